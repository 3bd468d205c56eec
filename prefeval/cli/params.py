"""The parameters the ``prefeval`` commands share: click types judged by
:mod:`prefeval.options`, the option decorators of each family of commands, and the
command's :class:`~prefeval.options.Options` judged from its parameters."""

from __future__ import annotations

from collections.abc import Mapping

import click

from .. import options
from ..core.errors import OutputError
from ..io.runs import NAMINGS, resolve_runs, run_argument
from ..io.writers import check_output
from ..measures import measure_help, parse_measures
from ..options import OptionError, Options
from ..present.plots import plot_format
from .errors import namer, usage_error, usage_errors

FORMAT_CHOICE = click.Choice(["tsv", "csv", "jsonl", "parquet"], case_sensitive=False)
FORMAT_HELP = (
    "Output format: tsv (header line), csv (header line), jsonl, or parquet (binary: "
    "-o FILE or a redirected stdout)."
)


class _JudgedRange:
    """A numeric option's click type: click parses the text (its job) and shows the range
    of :data:`prefeval.options.RANGES` in ``--help``; the value is judged by
    :func:`prefeval.options.check` (the one rule), a broken rule worded with the flag."""

    def __init__(self, field: str):
        bounds = options.RANGES[field]
        # a mixin: super() is click's IntRange or FloatRange (JudgedInt, JudgedFloat)
        super().__init__(bounds.lo, bounds.hi, bounds.lo_open, bounds.hi_open)  # type: ignore[call-arg]
        self.field = field

    def convert(self, value, param, ctx):
        # click's parsing of the number, without its range check: the rule is judged below
        number = super(click.types._NumberRangeBase, self).convert(value, param, ctx)
        try:
            return options.check(self.field, number)
        except OptionError as error:
            self.fail(error.worded(namer(ctx)), param, ctx)


class JudgedInt(_JudgedRange, click.IntRange):
    """An integer option judged by :mod:`prefeval.options`."""


class JudgedFloat(_JudgedRange, click.FloatRange):
    """A number option judged by :mod:`prefeval.options` (finite)."""

    name = "float"


def number_type(field: str) -> click.ParamType:
    """The click type of the numeric option ``field`` (:class:`JudgedInt` or
    :class:`JudgedFloat`)."""
    return (JudgedInt if options.RANGES[field].integer else JudgedFloat)(field)


def number_option(flag: str, field: str, help: str):
    """The numeric option ``flag`` setting the :class:`~prefeval.options.Options` field
    ``field``: judged by :func:`number_type`, its default shown."""
    return click.option(
        flag,
        type=number_type(field),
        default=options.default(field),
        show_default=True,
        help=help,
    )


# the options several commands take, each declared once
relevance_level_option = click.option(
    "-l",
    "--relevance-level",
    type=number_type("relevance_level"),
    default=None,
    metavar="L",
    help="Relevant means grade >= L (default: grade > 0).",
)
max_docs_option = click.option(
    "-M",
    "--max-docs",
    type=number_type("max_docs"),
    default=None,
    metavar="K",
    help="Keep each ranking's top K documents (after sorting), as trec_eval -M.",
)
method_option = click.option(
    "--method",
    type=click.Choice(options.METHODS),
    default=options.default("method"),
    show_default=True,
    help="Aggregation of the per-query rankings into one order of the runs.",
)
samples_option = number_option(
    "--samples",
    "samples",
    help="Samples drawn per level of queries or labels.",
)


def judged_options(params: Mapping, **given) -> Options:
    """The command's :class:`~prefeval.options.Options`, judged from ``params`` (the
    parameters its function gathers in ``**params``: every one of them a keyword of the
    judge) and ``given`` (the parameters its function names and the judge needs, and
    settings that differ from them); the command's bar on a terminal. A TypeError when a
    parameter of the command that the judge needs reaches it from neither."""
    ctx = click.get_current_context()
    strays = sorted(set(params) - set(options.KEYWORDS))
    if strays:
        raise TypeError(f"{ctx.command.name}: the judge takes no {', '.join(strays)}")
    reached = {*params, *given}
    needed = [p.name for p in ctx.command.params if p.name in options.KEYWORDS]
    lost = [name for name in needed if name not in reached]
    if lost:
        raise TypeError(f"{ctx.command.name}: {', '.join(lost)} did not reach the judge")
    values = {**params, "progress": None, **given}
    if not values.get("baselines"):
        values["baselines"] = None  # no -B: the default set (--no-baselines: none)
    values = {k: v for k, v in values.items() if k in options.KEYWORDS}
    try:
        return options.judge(command=ctx.command.name, **values)
    except OptionError as error:
        raise usage_error(error, ctx) from None


def engine_options(func=None, *, measures_default: str | None = None):
    """Options shared by every command that computes preferences from runs;
    ``measures_default``: the command's own default of -m, for its help."""
    if func is None:
        return lambda f: engine_options(f, measures_default=measures_default)
    decorators = [
        click.option(
            "-m",
            "--measure",
            "measures",
            multiple=True,
            metavar="NAME[,NAME...]",
            help=measure_help(measures_default),
        ),
        relevance_level_option,
        max_docs_option,
        click.option(
            "--no-cache",
            "cache",
            is_flag=True,
            flag_value=False,
            default=None,
            help="Do not read or write the cache of reduced runs (also PREFEVAL_CACHE=0).",
        ),
        click.option(
            "-j",
            "--jobs",
            type=number_type("jobs"),
            default=None,
            metavar="N",
            help="Compute on N cores (query partitions at once, HSD trials); -j 1: one "
            "thread. Default: the CPUs this process may use (affinity, cgroup quota).",
        ),
        click.option(
            "--binary",
            is_flag=True,
            help="Binary RPP (eq. 4): one population, grade >= level. Default is graded "
            "RPP (eq. 5).",
        ),
    ]
    for option in reversed(decorators):
        func = option(func)
    return func


def dask_options(func):
    """--engine and --scheduler."""
    func = click.option(
        "--scheduler",
        metavar="ADDRESS",
        default=None,
        help="Dask scheduler address (tcp://host:8786) for --engine dask; default a local "
        "cluster with Dask's default workers for this machine.",
    )(func)
    return click.option(
        "--engine",
        type=click.Choice(options.ENGINES, case_sensitive=False),
        default=options.default("engine"),
        show_default=True,
        help="local: this process, by query partitions; dask: the same partitions as tasks "
        "on a Dask cluster (needs prefeval[dask]).",
    )(func)


PRECISION = click.IntRange(0, 17)


def precision_option(func):
    return click.option(
        "-p",
        "--precision",
        type=PRECISION,
        default=None,
        metavar="N",
        help="Write values rounded to N decimals (0..17, as %.Nf). Default: full precision "
        "(shortest round-trip form); 4 decimals in the aligned table shown on a terminal.",
    )(func)


AGAINST_HELP = "Only the pairs with RUN (repeatable), oriented with RUN as run_b."


def against_option(func=None, *, help: str | None = None):
    """--against RUN; ``help``: what it means to a command that gives it another meaning."""
    if func is None:
        return lambda f: against_option(f, help=help)
    return click.option(
        "--against",
        multiple=True,
        metavar="RUN",
        help=help or AGAINST_HELP,
    )(func)


BASELINE_HELP = (
    "Baseline metric(s): ir-measures strings (AP, nDCG@10, RR, ERR_IA@20), trec_eval "
    "names (map, ndcg_cut_10, P_10, recip_rank), or native TSE, ASL; repeatable, lists "
    "separated by commas or blanks."
)
DEFAULT_BASELINES_HELP = (
    "Default: AP nDCG RR R@1000 Rprec [+ ERR_IA@20 alpha_nDCG@20 StRecall@20 AP_IA]."
)


NAMES_HELP = (
    "How runs given as files are named: file (the file name without a leading input., a "
    ".gz and one of .run .trec .txt .res .tsv .parquet .pq) or tag (the run tag of every "
    "line, trec_eval's runid: a TREC run's 6th column, a Parquet run's tag or run_id "
    "column). A RUN given as NAME=PATH is named NAME (cut at the = whose PATH exists, so "
    "NAME may hold =)."
)


def names_option(func):
    """--names file|tag: how :func:`resolved_runs` names runs given as files."""
    return click.option(
        "--names",
        type=click.Choice(NAMINGS),
        default="file",
        show_default=True,
        help=NAMES_HELP,
    )(func)


def run_arguments(ctx, param, value):
    """Callback of the RUN arguments: ``NAME=PATH`` names a run
    (:func:`prefeval.io.runs.run_argument`); of ``[QRELS RUN...]``, the RUNs only."""
    if param.name == "inputs":
        return value[:1] + tuple(run_argument(v) for v in value[1:])
    return tuple(run_argument(v) for v in value)


def qrels_and_runs(func=None, *, metavar: str | None = None):
    """The arguments ``QRELS RUN...`` of the commands that read runs (``metavar``: the
    runs' own, e.g. ``RUN_A RUN_B``)."""
    if func is None:
        return lambda f: qrels_and_runs(f, metavar=metavar)
    runs = click.argument(
        "runs",
        nargs=-1,
        required=True,
        metavar=metavar,
        type=click.Path(dir_okay=False),
        callback=run_arguments,
    )
    return click.argument("qrels", type=click.Path(dir_okay=False))(runs(func))


def rows_options(func):
    """``-q`` and ``-n`` of the commands that write per-query and summary rows (compare,
    metrics)."""
    per_query = click.option(
        "-q", "--per-query", is_flag=True, help="Per-query rows, then summary rows."
    )
    no_summary = click.option(
        "-n",
        "--no-summary",
        "summary",
        is_flag=True,
        flag_value=False,
        default=options.default("summary"),
        help="Drop the summary rows (query_id all).",
    )
    return per_query(no_summary(func))


def resolved_runs(runs, names: str):
    """The command's RUN arguments resolved once
    (:func:`prefeval.io.runs.resolve_runs`: each opened once, a many-run table standing
    for its runs), named as ``NAME=PATH`` and ``names`` (--names) say."""
    return resolve_runs(runs, names)


def analysis_options(
    func=None,
    *,
    against=True,
    outputs=True,
    against_help: str = AGAINST_HELP,
    baselines_default: str = DEFAULT_BASELINES_HELP,
    measures_default: str | None = None,
):
    """Inputs shared by the analysis commands: QRELS RUN... or --prefs, and baselines;
    ``against=False``: a command that needs every pair (--against is a usage error); a
    str: the help of --against, which means something else to the command (as
    ``against_help``); ``outputs=False``: without the table options -f, -o, -p;
    ``baselines_default``, ``measures_default``: the command's own defaults of -B and -m,
    for their help."""
    if func is None:
        return lambda f: analysis_options(
            f, against=against, outputs=outputs, against_help=against_help,
            baselines_default=baselines_default, measures_default=measures_default,
        )  # fmt: skip
    decorators = [
        click.argument(
            "inputs",
            nargs=-1,
            type=click.Path(dir_okay=False),
            metavar="[QRELS RUN...]",
            callback=run_arguments,
        ),
        click.option(
            "--prefs",
            type=click.Path(dir_okay=False, exists=True, allow_dash=True),
            default=None,
            help="Per-query preference table written by `compare -q` (any format) "
            "instead of computing preferences from QRELS RUN...",
        ),
        click.option(
            "--metrics",
            "metrics_file",
            type=click.Path(dir_okay=False, exists=True, allow_dash=True),
            default=None,
            help="Per-query baseline table written by `prefeval "
            "metrics`, instead of computing baselines.",
        ),
        click.option(
            "-B",
            "--baseline",
            "baselines",
            multiple=True,
            metavar="MEASURE",
            help=f"{BASELINE_HELP} {baselines_default}",
        ),
        click.option("--no-baselines", is_flag=True, help="Do not compute baselines."),
        names_option,
    ]
    if isinstance(against, str):
        against_help = against
    if against:
        decorators.append(against_option(help=against_help))
    else:  # the command needs every pair: --against is refused with a reason
        decorators.append(click.option("--against", multiple=True, hidden=True))
    func = dask_options(engine_options(func, measures_default=measures_default))
    for option in reversed(decorators):
        func = option(func)
    return output_options(func) if outputs else func


def format_option(func):
    """-f/--format: the table formats (tsv by default)."""
    return click.option(
        "-f",
        "--format",
        "fmt",
        type=FORMAT_CHOICE,
        default="tsv",
        show_default=True,
        help=FORMAT_HELP,
    )(func)


def output_option(func=None, *, what: str = "Write"):
    """-o/--output FILE, written atomically; ``what``: the help's first word(s)."""
    if func is None:
        return lambda f: output_option(f, what=what)
    return click.option(
        "-o",
        "--output",
        type=click.Path(dir_okay=False, writable=True),
        default=None,
        help=f"{what} to FILE atomically (default: stdout).",
    )(func)


def output_options(func):
    """-f, -o and -p of the commands that write a table."""
    return format_option(output_option(precision_option(func)))


def parse_measures_named(measures, has_subtopics):
    """The measures of ``-m`` (:func:`prefeval.measures.parse_measures`); a usage error
    naming the unknown one otherwise."""
    with usage_errors():
        return parse_measures(measures, has_subtopics)


class IntervalType(click.ParamType):
    """--ci: the kind of interval (:data:`prefeval.options.INTERVALS`), or a number, the
    confidence level of a t interval (judged as ``level``)."""

    name = "interval"

    def get_metavar(self, param, ctx=None):
        return "[" + "|".join(options.INTERVALS) + "|LEVEL]"

    def convert(self, value, param, ctx):
        if not isinstance(value, str) or value in options.INTERVALS:
            return value
        try:
            number = float(value)
        except ValueError:
            choices = ", ".join(options.INTERVALS)
            self.fail(f"{value!r} is not one of {choices}, nor a confidence level.", param, ctx)
        try:
            return options.check("level", number)
        except OptionError as error:
            self.fail(error.worded(namer(ctx)), param, ctx)


class PlotFile(click.Path):
    """--plot FILE: a writable .png, .pdf or .svg file (any case), checked before any
    computing."""

    def __init__(self):
        super().__init__(dir_okay=False)

    def convert(self, value, param, ctx):

        path = super().convert(value, param, ctx)
        try:
            plot_format(path)
            check_output(path)
        except (ValueError, OutputError) as error:
            self.fail(str(error), param, ctx)
        return path


def significance_options(func=None, *, one_test: bool = False):
    """--test, --correction, --alpha, --trials, --seed: the tests of discpower and report;
    ``one_test``: --test takes one test, ttest by default (table)."""
    if func is None:
        return lambda f: significance_options(f, one_test=one_test)
    tests = (
        "ttest (t-test of the per-query differences), sign (sign test), hsd (randomized "
        "Tukey HSD), randomization (paired sign-flip test of the mean difference; holds the "
        "preferences whole)"
    )
    if one_test:
        test = click.option(
            "--test",
            "tests",
            type=click.Choice(options.TESTS),
            default=options.default("tests", "table")[0],
            show_default=True,
            help=f"Significance test: {tests}.",
        )
    else:
        test = click.option(
            "--test",
            "tests",
            type=click.Choice(options.TESTS),
            multiple=True,
            help=f"Significance test(s); repeatable: {tests}. Default: ttest, sign and hsd "
            "(ttest and sign with --against).",
        )
    decorators = [
        test,
        click.option(
            "--correction",
            type=click.Choice(options.CORRECTIONS),
            default=options.default("correction"),
            show_default=True,
            help="Multiple-comparison correction of the ttest, sign and randomization "
            "p-values: bonferroni or holm (family-wise error), bh (Benjamini-Hochberg) or "
            "by (Benjamini-Yekutieli) (false discovery rate), none.",
        ),
        number_option(
            "--alpha",
            "alpha",
            help="Significance level: a pair is significant when its corrected p-value "
            "(the HSD's, for hsd) is below it.",
        ),
        number_option(
            "--trials",
            "trials",
            help="Trials of the randomized HSD and of the randomization test (exact, "
            "every sign flip, where 2**queries <= N).",
        ),
        number_option(
            "--seed",
            "seed",
            help="Seed of the HSD's and the randomization test's trials.",
        ),
    ]
    for option in reversed(decorators):
        func = option(func)
    return func
