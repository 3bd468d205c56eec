"""The ``prefeval`` command: a thin click layer over the library.

Heavy libraries (numpy, pandas, pyarrow, scipy, ir-measures) are imported inside
the commands, so ``prefeval --help`` starts fast.
"""

from __future__ import annotations

import inspect
import os
import signal
import sys
import warnings
from contextlib import contextmanager

import click

from . import api, options
from ._version import __version__
from .analysis.agreement import tau_matrix_text
from .analysis.baselines import default_baselines, metrics_rows, parse_baselines
from .analysis.significance import discriminative_power
from .core import limits, progress
from .core.cube import against_pairs
from .core.errors import InputError, SystemLimitError
from .core.progress import stderr_notice
from .engine import cache
from .engine.cache import CacheSettingError
from .engine.engines import engine_for
from .engine.job import Job, compare_tables
from .io.runs import read_qrels, resolve_runs
from .io.writers import (
    OutputError,
    atomic_output,
    check_output,
    output_target,
    write_frames,
    write_stdout,
    write_table,
)
from .measures import describe, measure_help, measure_table, parse_measures
from .options import OptionError, Options
from .present import plots as plotting
from .present.explain import explain as explain_table
from .present.explain import to_text
from .present.plots import plot_format, require
from .present.report import check_targets, output_paths

#: True in the console script (main), not in the library or click's test runner
_ENTRY_POINT = False

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
        super().__init__(bounds.lo, bounds.hi, bounds.lo_open, bounds.hi_open)
        self.field = field

    def convert(self, value, param, ctx):
        # click's parsing of the number, without its range check: the rule is judged below
        number = super(click.types._NumberRangeBase, self).convert(value, param, ctx)
        try:
            return options.check(self.field, number)
        except OptionError as error:
            self.fail(error.worded(_namer(ctx)), param, ctx)


class JudgedInt(_JudgedRange, click.IntRange):
    """An integer option judged by :mod:`prefeval.options`."""


class JudgedFloat(_JudgedRange, click.FloatRange):
    """A number option judged by :mod:`prefeval.options` (finite)."""

    name = "float"


def judged(field: str) -> click.ParamType:
    """The click type of the numeric option ``field`` (:class:`JudgedInt` or
    :class:`JudgedFloat`)."""
    return (JudgedInt if options.RANGES[field].integer else JudgedFloat)(field)


def _param(ctx, keyword: str):
    """The command's click parameter of the judge's ``keyword``: named so, or with the
    flag ``--KEYWORD`` (``-`` for ``_``)."""
    flag = "--" + keyword.replace("_", "-")
    for param in ctx.command.params:
        if param.name == keyword or flag in param.opts:
            return param
    return None


def _namer(ctx):
    """How the CLI words an option in an :class:`OptionError`: by its flags, taken from
    the click parameter (``-l/--relevance-level``; ``--engine dask`` with a value)."""

    def name(keyword: str, value: str | None) -> str:
        param = _param(ctx, keyword)
        flag = keyword if param is None else "/".join(param.opts)
        if value is None or getattr(param, "is_flag", False):
            return flag
        return f"{flag} {value.strip(chr(39))}"

    return name


def usage_error(error: OptionError, ctx=None) -> click.UsageError:
    """An :class:`OptionError` as the usage error of the flag it names (exit status 2)."""
    ctx = ctx or click.get_current_context()
    param = _param(ctx, error.field) if error.about_value else None
    if param is not None:
        return click.BadParameter(error.worded(_namer(ctx)), ctx=ctx, param=param)
    return click.UsageError(error.worded(_namer(ctx)), ctx=ctx)


DEFAULTS = Options()


def judged_options(**given) -> Options:
    """The command's :class:`~prefeval.options.Options`, judged from its parameters (those
    named as the judge's keywords; ``--engine``, ``--scheduler`` and ``--no-cache`` kept
    in the context, :func:`_keep`) and ``given``; the command's bar on a terminal."""
    ctx = click.get_current_context()
    kept = {
        k.removeprefix("prefeval."): v for k, v in ctx.meta.items() if k.startswith("prefeval.")
    }
    values = {**kept, **ctx.params, "progress": None, **given}
    if not values.get("baselines"):
        values["baselines"] = None  # no -B: the default set (--no-baselines: none)
    values = {k: v for k, v in values.items() if k in options.KEYWORDS}
    try:
        return options.judge(command=ctx.command.name, **values)
    except OptionError as error:
        raise usage_error(error, ctx) from None


_INPUT_PARAMS = ("qrels", "runs", "inputs", "prefs", "metrics_file")


class PrefevalCommand(click.Command):
    """Checks before any computing: ``-`` (standard input) stands for one input only, as
    in trec_eval; ``-o`` is writable and not one of the inputs."""

    def invoke(self, ctx):

        cache.max_bytes()  # a bad PREFEVAL_CACHE_MAX_GB is reported before any work
        inputs = [
            path
            for name in _INPUT_PARAMS
            for value in [ctx.params.get(name)]
            for path in (value if isinstance(value, (list, tuple)) else [value])
        ]
        if sum(1 for path in inputs if path == "-") > 1:
            raise click.UsageError("'-' (standard input) may be given for one input only")
        output = ctx.params.get("output")
        if output == "":
            raise click.UsageError("-o needs a file name ('-' for standard output)")
        fmt = ctx.params.get("fmt")
        if fmt is not None and fmt.lower() == "parquet" and output in (None, "-"):
            if sys.stdout.isatty():
                raise click.UsageError("-f parquet writes binary: give -o FILE or redirect")
        if output is not None and output != "-":
            target = output_target(output)
            for path in inputs:
                if path is None or path == "-" or not os.path.exists(path):
                    continue
                if os.path.exists(target) and os.path.samefile(path, target):
                    raise click.UsageError(
                        f"-o {output} would overwrite the input {path}; choose another file"
                    )
            check_output(output)
        return super().invoke(ctx)


class PrefevalGroup(click.Group):
    """Turns input errors into ``FILE:LINE: message`` on stderr and exit status 2, and
    output failures into ``prefeval: cannot write FILE: reason`` (exit status 2)."""

    command_class = PrefevalCommand

    def invoke(self, ctx):

        try:
            # one bar for the command, on a terminal only
            with progress.command():
                return super().invoke(ctx)
        except InputError as error:
            click.echo(str(error), err=True)
            ctx.exit(2)
        except (OutputError, CacheSettingError, SystemLimitError) as error:
            click.echo(f"prefeval: {error}", err=True)
            if isinstance(error, SystemLimitError) and _ENTRY_POINT:
                # short of a resource, a library's threads may abort the interpreter's
                # shutdown (SIGABRT after the message): leave at once, status 2
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(2)
            ctx.exit(2)
        except MemoryError:
            click.echo(limits.out_of_memory_message(), err=True)
            ctx.exit(2)


@click.group(cls=PrefevalGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="prefeval")
def cli():
    """Preference-based offline evaluation of rankings, trec_eval style.

    Compares TREC runs pairwise by the positions of their relevant documents:
    recall-paired preference (RPP and variants), lexirecall and lexiprecision.
    """


def engine_options(func):
    """Options shared by every command that computes preferences from runs."""
    decorators = [
        click.option(
            "-m",
            "--measure",
            "measures",
            multiple=True,
            metavar="NAME[,NAME...]",
            help=measure_help(),
        ),
        click.option(
            "-l",
            "--relevance-level",
            type=judged("relevance_level"),
            default=None,
            metavar="L",
            help="Relevant means grade >= L (default: grade > 0).",
        ),
        click.option(
            "-M",
            "--max-docs",
            type=judged("max_docs"),
            default=None,
            metavar="K",
            help="Keep each ranking's top K documents (after sorting), as trec_eval -M.",
        ),
        click.option(
            "--no-cache",
            "cache",
            is_flag=True,
            flag_value=False,
            default=None,
            expose_value=False,
            callback=_keep,
            help="Do not read or write the cache of reduced runs (also PREFEVAL_CACHE=0).",
        ),
        click.option(
            "-j",
            "--jobs",
            type=judged("jobs"),
            default=None,
            metavar="N",
            expose_value=False,
            callback=_keep,
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


def _keep(ctx, param, value):
    """Callback of the options a command does not take as arguments: kept in the
    context for :func:`judged_options`."""
    ctx.meta[f"prefeval.{param.name}"] = value
    return value


def dask_options(func=None, *, expose=True):
    """--engine and --scheduler; ``expose=False``: kept in the click context for
    :func:`judged_options` instead of passed to the command's function."""
    if func is None:
        return lambda f: dask_options(f, expose=expose)
    hidden = {} if expose else {"expose_value": False, "callback": _keep}
    func = click.option(
        "--scheduler",
        metavar="ADDRESS",
        default=None,
        help="Dask scheduler address (tcp://host:8786) for --engine dask; default a local "
        "cluster with Dask's default workers for this machine.",
        **hidden,
    )(func)
    return click.option(
        "--engine",
        type=click.Choice(options.ENGINES, case_sensitive=False),
        default="local",
        show_default=True,
        help="local: this process, by query partitions; dask: the same partitions as tasks "
        "on a Dask cluster (needs prefeval[dask]).",
        **hidden,
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
        "(shortest round-trip form).",
    )(func)


def against_option(func):
    return click.option(
        "--against",
        multiple=True,
        metavar="RUN",
        help="Only the pairs with RUN (repeatable), oriented with RUN as run_b.",
    )(func)


@contextmanager
def usage_errors():
    """Library ValueErrors about arguments (unknown measure, bad level...) become usage
    errors, exit status 2; input errors (``FILE:LINE: ...``) pass through."""

    try:
        yield
    except InputError:
        raise
    except OptionError as error:
        raise usage_error(error) from None
    except ValueError as error:
        raise click.UsageError(str(error)) from None


def _parse_measures(measures, has_subtopics):

    with usage_errors():
        return parse_measures(measures, has_subtopics)


@cli.command()
@click.argument("qrels", type=click.Path(dir_okay=False))
@click.argument("runs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@engine_options
@click.option("-q", "--per-query", is_flag=True, help="Per-query rows, then summary rows.")
@click.option(
    "-n",
    "--no-summary",
    "summary",
    is_flag=True,
    flag_value=False,
    default=True,
    help="Drop the summary rows (query_id all).",
)
@against_option
@click.option(
    "--both-directions",
    is_flag=True,
    help="Also write each pair reversed (Delta(b, a) = -Delta(a, b)): a runs x runs matrix.",
)
@dask_options
@precision_option
@click.option(
    "-f",
    "--format",
    "fmt",
    type=FORMAT_CHOICE,
    default="tsv",
    show_default=True,
    help=FORMAT_HELP,
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help="Write to FILE atomically (default: stdout).",
)
def compare(
    qrels,
    runs,
    measures,
    relevance_level,
    max_docs,
    binary,
    per_query,
    summary,
    against,
    both_directions,
    engine,
    scheduler,
    precision,
    fmt,
    output,
):
    """Preference of every pair of RUNs on QRELS.

    Rows are `measure run_a run_b query_id value`, run_a before run_b in command
    line order; value > 0 means run_a is preferred. Without -q only the summary
    rows (query_id `all`: mean over evaluated queries) are written.

    --against RUN keeps the pairs (a, RUN); --both-directions writes each pair,
    then the same pair reversed.

    \b
    Example:
      prefeval compare -q -m rpp,lexirecall qrels.txt runs/input.* > prefs.tsv
    """

    runs = resolve_runs(runs)  # each opened once; a many-run table stands for its runs
    names = list(runs)
    if len(names) < 2:
        raise click.UsageError("need at least two runs to compare")
    settings = judged_options()
    computing = engine_for(settings)
    computing.prepare()  # before anything is read (Dask: the client's memory)
    judged = read_qrels(qrels)
    measure_list = _parse_measures(settings.measures, judged.has_subtopics)
    pairs = None
    if settings.against:
        with usage_errors():
            pairs = against_pairs(names, settings.against)
    job = Job(judged, runs, measure_list, settings, pairs, stderr_notice)
    del judged  # the job holds the judgments (on Dask, the tasks)
    with usage_errors():  # one query partition at a time: memory bounded by a partition
        frames, _ = compare_tables(
            computing, job, settings.per_query, settings.summary, settings.both_directions
        )
    write_frames(frames, output, fmt.lower(), precision)


BASELINE_HELP = (
    "Baseline metric(s): ir-measures strings (AP, nDCG@10, RR, ERR_IA@20), trec_eval "
    "names (map, ndcg_cut_10, P_10, recip_rank), or native TSE, ASL; repeatable, lists "
    "separated by commas or blanks. Default: AP nDCG RR R@1000 Rprec [+ ERR_IA@20 "
    "alpha_nDCG@20 StRecall@20 AP_IA]."
)


def analysis_options(func=None, *, against=True, outputs=True):
    """Inputs shared by the analysis commands: QRELS RUN... or --prefs, and baselines;
    ``against=False``: a command that needs every pair (--against is a usage error);
    ``outputs=False``: without the table options -f, -o, -p."""
    if func is None:
        return lambda f: analysis_options(f, against=against, outputs=outputs)
    decorators = [
        click.argument(
            "inputs", nargs=-1, type=click.Path(dir_okay=False), metavar="[QRELS RUN...]"
        ),
        click.option(
            "--prefs",
            type=click.Path(dir_okay=False, exists=True),
            default=None,
            help="Per-query preference table written by `compare -q` (any format) "
            "instead of computing preferences from QRELS RUN...",
        ),
        click.option(
            "--metrics",
            "metrics_file",
            type=click.Path(dir_okay=False, exists=True),
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
            help=BASELINE_HELP,
        ),
        click.option("--no-baselines", is_flag=True, help="Do not compute baselines."),
    ]
    if against:
        decorators.append(against_option)
    else:  # the command needs every pair: --against is refused with a reason
        decorators.append(click.option("--against", multiple=True, hidden=True))
    func = dask_options(engine_options(func), expose=False)
    for option in reversed(decorators):
        func = option(func)
    return output_options(func) if outputs else func


def output_options(func):
    func = precision_option(func)
    func = click.option(
        "-o",
        "--output",
        type=click.Path(dir_okay=False, writable=True),
        default=None,
        help="Write to FILE atomically (default: stdout).",
    )(func)
    return click.option(
        "-f",
        "--format",
        "fmt",
        type=FORMAT_CHOICE,
        default="tsv",
        show_default=True,
        help=FORMAT_HELP,
    )(func)


def _no_against(against, command, why):
    if against:
        raise click.UsageError(
            f"--against: {command} {why}, so it needs every pair of runs; drop --against"
        )


def _baseline_names(baselines):
    """Canonical names of the -B/-m values (map -> AP), each once; usage error otherwise."""

    with usage_errors():
        return [b.name for b in parse_baselines(baselines)]


def _analysis(command, inputs, prefs, metrics_file, **given):
    """The table of an analysis command, from :mod:`prefeval.api` (the library's own entry
    point) with the command's :class:`~prefeval.options.Options` (``given``: settings
    that differ from the command's parameters), after the checks that name its options."""

    qrels, runs = (inputs[0], list(inputs[1:])) if inputs else (None, [])
    settings = judged_options(qrels=qrels, metrics=metrics_file, **given)
    if prefs is None:
        runs = resolve_runs(runs)  # each opened once; a many-run table stands for its runs
        names = list(runs)
        if len(names) < 2:
            raise click.UsageError("give QRELS and at least two RUNs, or --prefs FILE")
    _baseline_names(settings.baselines or ())  # a usage error before any computing
    if settings.against and prefs is None:  # unknown names before any run is read
        with usage_errors():
            against_pairs(names, settings.against)
    function = getattr(api, command)
    keywords = inspect.signature(function).parameters
    with usage_errors():
        return function(
            qrels,
            runs or None,
            prefs=prefs,
            metrics=metrics_file,
            notify=stderr_notice,
            **{  # the settings that differ from the defaults (unset lists stay unset)
                k: getattr(settings, k)
                for k in options.FIELDS
                if k in keywords and getattr(settings, k) != getattr(DEFAULTS, k)
            },
            **{k: v for k, v in given.items() if k not in options.FIELDS},
        )


@cli.command()
@analysis_options(against=False)
@click.option(
    "--method",
    type=click.Choice(options.METHODS),
    default="mc4",
    show_default=True,
    help="Aggregation of per-query rankings.",
)
@click.option(
    "--teleport",
    type=judged("teleport"),
    default=0.05,
    show_default=True,
    help="MC4 uniform teleport weight (keeps the chain ergodic).",
)
def order(
    inputs,
    prefs,
    metrics_file,
    baselines,
    no_baselines,
    measures,
    relevance_level,
    max_docs,
    binary,
    method,
    teleport,
    against,
    precision,
    fmt,
    output,
):
    """Order the runs: rows `measure method rank run score`, rank 1 best.

    Per query, each run's win rate W_q(a) = sum_b Delta(a, b) ranks the runs;
    MC4 (default), Borda, mean win rate or Copeland aggregate them. Baselines are
    ordered by their mean over queries.

    \b
    Example:
      prefeval order qrels.txt runs/input.*
      prefeval order --prefs prefs.tsv --metrics metrics.tsv --method borda
    """

    _no_against(against, "order", "ranks all runs")
    table = _analysis("order", inputs, prefs, metrics_file)
    write_table(table, output, fmt, precision)


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


def significance_options(func):
    """--test, --correction, --alpha, --trials, --seed: the tests of discpower and report."""
    decorators = [
        click.option(
            "--test",
            "tests",
            type=click.Choice(options.TESTS),
            multiple=True,
            help="Significance test(s); repeatable. Default: all three.",
        ),
        click.option(
            "--correction",
            type=click.Choice(options.CORRECTIONS),
            default="bonferroni",
            show_default=True,
            help="Multiple-comparison correction of ttest and sign p-values.",
        ),
        click.option(
            "--alpha",
            type=judged("alpha"),
            default=0.05,
            show_default=True,
        ),
        click.option(
            "--trials",
            type=judged("trials"),
            default=10000,
            show_default=True,
            help="Randomized HSD trials.",
        ),
        click.option(
            "--seed",
            type=judged("seed"),
            default=0,
            show_default=True,
            help="Seed of the HSD trials.",
        ),
    ]
    for option in reversed(decorators):
        func = option(func)
    return func


@cli.command()
@analysis_options
@significance_options
@click.option(
    "--pairs",
    "per_pair",
    is_flag=True,
    help="One row per run pair: measure test run_a run_b p_value p_adjusted.",
)
@click.option(
    "--plot",
    type=PlotFile(),
    default=None,
    metavar="FILE",
    help="Draw Sakai's curves (sorted adjusted p-values, alpha line) to FILE: .png, .pdf "
    "or .svg (needs matplotlib).",
)
@click.option("--plot-log", is_flag=True, help="Log scale for the p-values of --plot.")
def discpower(
    inputs,
    prefs,
    metrics_file,
    baselines,
    no_baselines,
    measures,
    relevance_level,
    max_docs,
    binary,
    tests,
    correction,
    alpha,
    trials,
    seed,
    per_pair,
    plot,
    against,
    precision,
    plot_log,
    fmt,
    output,
):
    """Discriminative power: share of run pairs significantly different.

    Rows `measure test correction alpha significant pairs percent`. With --against
    only the pairs with those runs are tested (and corrected for); the default tests
    are then ttest and sign (hsd needs every pair of a preference).

    \b
    Example:
      prefeval discpower --test ttest --test sign qrels.txt runs/input.*
    """

    if plot_log and not plot:
        raise click.UsageError("--plot-log needs --plot")
    plotting = _plotting(plot)
    # one row per pair: the curves need it, the summary counts it
    table = _analysis("discpower", inputs, prefs, metrics_file, pairs=True)
    if plot:
        plotting.discpower_curves(table, plot, alpha=alpha, log=plot_log)
    result = table if per_pair else discriminative_power(table, alpha)
    write_table(result, output, fmt, precision)


@cli.command()
@analysis_options(against=False)
@click.option(
    "--method",
    type=click.Choice(options.METHODS),
    default="mc4",
    show_default=True,
    help="How preferences order the runs.",
)
def tau(
    inputs,
    prefs,
    metrics_file,
    baselines,
    no_baselines,
    measures,
    relevance_level,
    max_docs,
    binary,
    method,
    against,
    precision,
    fmt,
    output,
):
    """Kendall's tau-b between the run orderings of every pair of measures.

    Rows `measure_a measure_b tau`; with the default tsv output, a readable
    matrix also goes to stderr when it is a terminal.

    \b
    Example:
      prefeval tau -B AP -B nDCG qrels.txt runs/input.*
    """

    _no_against(against, "tau", "correlates orderings of all runs")
    table = _analysis("tau", inputs, prefs, metrics_file)
    if fmt == "tsv" and sys.stderr.isatty():
        digits = 3 if precision is None else precision
        click.echo(tau_matrix_text(table, digits), err=True, nl=False)
    write_table(table, output, fmt, precision)


@cli.command()
@analysis_options
@click.option(
    "--ties",
    "ties",
    is_flag=True,
    help="Write each measure's share of tied comparisons instead (rows measure ties comparisons).",
)
def agree(
    inputs,
    prefs,
    metrics_file,
    baselines,
    no_baselines,
    measures,
    relevance_level,
    max_docs,
    binary,
    ties,
    against,
    precision,
    fmt,
    output,
):
    """Sign agreement of preferences with baseline differences, per comparison.

    Rows `measure baseline agreement compared`: among (query, run pair)
    comparisons where the baseline differs, the share where the preference has
    the same sign. With --ties: rows `measure ties comparisons`.
    """

    if not ties and (
        no_baselines or (prefs is not None and metrics_file is None and len(inputs) < 2)
    ):
        raise click.UsageError(
            "agree compares preferences with baselines: give QRELS RUN... or --metrics FILE "
            "(or --ties, which needs none)"
        )
    table = _analysis("agree", inputs, prefs, metrics_file)
    write_table(table, output, fmt, precision)


@cli.command()
@analysis_options(against=False)
@click.option(
    "--queries",
    default=None,
    metavar="K[,K...]",
    help="Numbers of queries to draw at random, e.g. 5,10,25.",
)
@click.option(
    "--labels",
    default=None,
    metavar="F[,F...]",
    help="Fractions of each query's relevant judgments to keep, e.g. 0.9,0.7,0.5.",
)
@click.option(
    "--policy",
    type=click.Choice(options.POLICIES),
    default="uniform",
    show_default=True,
    help="Which labels to remove: at random, or the documents retrieved by the most runs first.",
)
@click.option("--samples", type=judged("samples"), default=10, show_default=True)
@click.option("--seed", type=judged("seed"), default=0, show_default=True)
@click.option(
    "--plot",
    type=PlotFile(),
    default=None,
    metavar="FILE",
    help="Draw Kendall's tau against the level (mean, ±std band) to FILE: .png, .pdf or "
    ".svg (needs matplotlib).",
)
def robustness(
    inputs,
    prefs,
    metrics_file,
    baselines,
    no_baselines,
    measures,
    relevance_level,
    max_docs,
    binary,
    queries,
    labels,
    policy,
    samples,
    seed,
    plot,
    against,
    precision,
    fmt,
    output,
):
    """How orderings hold up with fewer queries or fewer relevance labels.

    Rows `measure kind level samples tau_mean tau_std ties agreement` (ties and
    agreement for label sampling only).

    \b
    Example:
      prefeval robustness --queries 5,10,25 --labels 0.9,0.5 qrels.txt runs/input.*
    """

    _no_against(against, "robustness", "correlates orderings of all runs")
    plotting = _plotting(plot)
    table = _analysis("robustness", inputs, prefs, metrics_file)
    if plot:
        plotting.robustness_plot(table, plot)
    write_table(table, output, fmt, precision)


@cli.command()
@click.argument("qrels", type=click.Path(dir_okay=False))
@click.argument("runs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option(
    "-m",
    "--measure",
    "-B",
    "--baseline",
    "baselines",
    multiple=True,
    metavar="MEASURE",
    help=BASELINE_HELP.replace("Baseline metric(s)", "Metric(s)"),
)
@click.option(
    "-l",
    "--relevance-level",
    type=judged("relevance_level"),
    default=None,
    metavar="L",
    help="Relevant means grade >= L (default: grade > 0).",
)
@click.option(
    "-M",
    "--max-docs",
    type=judged("max_docs"),
    default=None,
    metavar="K",
    help="Keep each ranking's top K documents, as trec_eval -M.",
)
@click.option(
    "--no-cache",
    "cache",
    is_flag=True,
    flag_value=False,
    default=None,
    expose_value=False,
    callback=_keep,
    help="Accepted like the other commands; metrics reads the runs itself and "
    "neither reads nor writes the cache.",
)
@click.option("-q", "--per-query", is_flag=True, help="Per-query rows, then summary rows.")
@click.option(
    "-n",
    "--no-summary",
    "summary",
    is_flag=True,
    flag_value=False,
    default=True,
    help="Drop the summary rows (query_id all).",
)
@output_options
def metrics(
    qrels,
    runs,
    baselines,
    relevance_level,
    max_docs,
    per_query,
    summary,
    precision,
    fmt,
    output,
):
    """Baseline metrics with ir-measures: rows `measure run query_id value`.

    As trec_eval -c: without -q only summary rows (query_id `all`: the mean over
    every judged query, also those with no relevant document at the level; the sum
    for NumQ, NumRel, NumRet, NumRelRet; TSE and ASL, undefined without a relevant
    document, average the queries with one); -q per-query rows of the evaluated queries
    (those with a relevant document), then the summary rows; -n drops the summary.
    Every evaluated query appears for every run (a query a run did not answer is
    evaluated as an empty ranking, as trec_eval -c). Analysis commands read
    `metrics -q` back with --metrics. The measure column holds ir-measures' name
    (map is written AP).

    \b
    Example:
      prefeval metrics -q -o metrics.tsv qrels.txt runs/input.*
      prefeval metrics -m map,ndcg_cut_10,P_10 qrels.txt runs/input.*
    """

    settings = judged_options()
    names = _baseline_names(settings.baselines) if settings.baselines else None
    judged = read_qrels(qrels)
    with usage_errors():
        table = metrics_rows(
            judged,
            list(runs),
            names or default_baselines(judged.has_subtopics),
            settings,
            notify=stderr_notice,
        )
    write_table(table, output, fmt, precision)


@cli.command()
@analysis_options
@click.option(
    "--ci",
    "ci",
    type=judged("ci"),
    default=0.95,
    show_default=True,
    help="Confidence level of the t interval of the mean difference.",
)
def pairs(
    inputs,
    prefs,
    metrics_file,
    baselines,
    no_baselines,
    measures,
    relevance_level,
    max_docs,
    binary,
    ci,
    against,
    precision,
    fmt,
    output,
):
    """Per run pair: mean difference, t confidence interval, wins, ties, losses.

    Rows `measure run_a run_b queries mean ci_low ci_high wins ties losses`: per
    query Delta(a, b) for a preference, value(a) - value(b) for a metric (b - a when
    lower is better, ASL), so positive always favours run_a.

    \b
    Example:
      prefeval pairs --against sys01 qrels.txt runs/input.*
    """

    table = _analysis("pairs", inputs, prefs, metrics_file)
    write_table(table, output, fmt, precision)


@cli.command()
@click.argument("qrels", type=click.Path(dir_okay=False))
@click.argument(
    "runs", nargs=-1, required=True, metavar="RUN_A RUN_B", type=click.Path(dir_okay=False)
)
@engine_options
@click.option(
    "-q",
    "--query",
    "query_ids",
    multiple=True,
    metavar="QUERY",
    help="Explain this query (repeatable, in the order given). Default: the --top queries.",
)
@click.option(
    "--top",
    type=judged("top"),
    default=None,
    metavar="N",
    help="The N queries (default 5) with the largest |Delta| under the first measure, "
    "equal ones by query id.",
)
@precision_option
@click.option(
    "-f",
    "--format",
    "fmt",
    type=click.Choice(["text", "tsv", "csv", "jsonl", "parquet"], case_sensitive=False),
    default="text",
    show_default=True,
    help="text for people; tsv, csv (header line), jsonl or parquet (binary: -o FILE or a "
    "redirected stdout): one row per query, population and recall level.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help="Write to FILE atomically (default: stdout).",
)
def explain(
    qrels, runs, measures, relevance_level, max_docs, binary, query_ids, top, precision, fmt, output
):
    """Why RUN_A or RUN_B is preferred: the aligned recall levels behind every measure.

    Per query: the value of every measure (as compare -q writes it), the positions of
    the i-th relevant document in A and B at every recall level of the binary
    population with sgn and p(i), the levels deciding lexiprecision and lexirecall,
    then the graded (eq. 5) and subtopic (eq. 6) populations with their weights and
    RPP, summing to the reported values. RUN_A RUN_B may be one Parquet table of two
    runs (a run column): A is the first name in sorted order.

    \b
    Example:
      prefeval explain -q 301 qrels.txt runs/input.a runs/input.b
    """

    runs = resolve_runs(runs)  # each opened once; a many-run table stands for its runs
    count = len(runs)
    if count != 2:
        raise click.UsageError(f"explain compares two runs, RUN_A RUN_B; got {count}")
    if query_ids and top is not None:
        raise click.UsageError("give -q/--query or --top, not both")
    settings = judged_options()
    judged = read_qrels(qrels)
    measure_list = _parse_measures(settings.measures, judged.has_subtopics)
    # a wrong query id is reported before the runs are read
    with usage_errors():
        frame = explain_table(judged, runs, settings, queries=list(query_ids) or None)
    if frame.empty:
        stderr_notice(f"no query has a value of {measure_list[0].name} to explain")
    fmt = fmt.lower()
    if fmt != "text":
        write_table(frame, output, fmt, precision)
        return
    data = to_text(frame, precision, [m.name for m in measure_list]).encode()
    if output is None or output == "-":
        write_stdout([data])
    else:
        with atomic_output(output) as handle:
            handle.write(data)


@cli.command()
@analysis_options(against=False, outputs=False)
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False, writable=True),
    help="The report: FILE.html (one self-contained page), FILE.md or FILE.tex; the "
    "figures of .md and .tex are written beside it as FILE-<figure>.svg or .pdf.",
)
@significance_options
@click.option(
    "--robustness",
    is_flag=True,
    help="Add the robustness curves: 10%, 25%, 50%, 75% of the queries, and of the "
    "relevant labels (from QRELS RUN... only).",
)
@click.option(
    "--samples",
    type=judged("samples"),
    default=10,
    show_default=True,
    help="Samples per level of --robustness.",
)
@click.option(
    "-p",
    "--precision",
    "digits",
    type=judged("digits"),
    default=3,
    show_default=True,
    help="Decimals of the preferences and taus in the tables.",
)
def report(
    inputs,
    prefs,
    metrics_file,
    baselines,
    no_baselines,
    measures,
    relevance_level,
    max_docs,
    binary,
    against,
    output,
    tests,
    correction,
    alpha,
    trials,
    seed,
    robustness,
    samples,
    digits,
):
    """The whole study in one document: HTML, Markdown or LaTeX.

    The data; per preference measure the runs x runs matrix of mean preference with
    significance marks and its MC4 ordering beside each baseline's; discriminative
    power (table and curves); Kendall's tau between all measures (heatmap); agreement
    and ties; with --robustness the robustness curves. The format comes from the
    extension of -o: .html is one self-contained page; .md and .tex get their figures
    written beside them (FILE-<figure>.svg, FILE-<figure>.pdf).

    \b
    Example:
      prefeval report -o report.html qrels.txt runs/input.*
    """

    _no_against(against, "report", "shows every pair of runs")
    with usage_errors():
        check_targets(output, [*inputs, prefs, metrics_file])  # before any computing
    _require_matplotlib("report")

    for path in output_paths(output)[:-1]:  # the figures: -o itself is checked already
        check_output(path)
    _analysis("report", inputs, prefs, metrics_file, output=output)


@cli.command("measures")
@click.argument("names", nargs=-1)
@click.option(
    "-m",
    "--measure",
    "more",
    multiple=True,
    metavar="NAME[,NAME...]",
    help="Describe this measure, as NAME does; repeatable, comma lists allowed.",
)
@click.option(
    "-f",
    "--format",
    "fmt",
    type=FORMAT_CHOICE,
    default="tsv",
    show_default=True,
    help=FORMAT_HELP,
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help="Write the listing to FILE atomically (default: stdout).",
)
def measures(names, more, fmt, output):
    """The preference measures: name, family, aliases, paper and equation.

    With NAME (or -m NAME), that measure's description instead, as trec_eval -h -m NAME.

    \b
    Example:
      prefeval measures
      prefeval measures dcgRPP
    """
    if not names and not more:
        write_table(measure_table(), output, fmt)
        return
    if output is not None or fmt != "tsv":
        raise click.UsageError("-f/-o write the listing; a measure's description is text")
    with usage_errors():
        chosen = parse_measures([*names, *more], has_subtopics=True)
    write_stdout(["\n".join(describe(m) for m in chosen).encode()])


def _require_matplotlib(what: str) -> None:
    """A usage error when matplotlib is missing (:func:`prefeval.present.plots.require`)."""

    try:
        require(what)
    except ImportError as error:
        raise click.UsageError(str(error)) from None


def _plotting(plot):
    """The plotting module for --plot FILE (None without it), checked before any computing:
    matplotlib is installed and FILE is neither -o nor an input."""
    if plot is None:
        return None
    _require_matplotlib("--plot")

    params = click.get_current_context().params
    target = output_target(plot)
    output = params.get("output")
    if output not in (None, "-") and output_target(output) == target:
        raise click.UsageError(f"--plot {plot} and -o {output} are the same file")
    for name in _INPUT_PARAMS:
        value = params.get(name)
        for path in value if isinstance(value, (list, tuple)) else [value]:
            if path in (None, "-") or not os.path.exists(path) or not os.path.exists(target):
                continue
            if os.path.samefile(path, target):
                raise click.UsageError(f"--plot {plot} would overwrite the input {path}")

    return plotting


def _terminate(signum, frame):
    """SIGTERM/SIGHUP unwind like Ctrl-C, so temporary files are removed on the way out."""
    raise SystemExit(128 + signum)


def main(argv=None):
    """Console-script entry point."""
    global _ENTRY_POINT
    _ENTRY_POINT = True

    if not sys.warnoptions:
        # a safety net only: the cases numpy warns about (empty slices, NaN casts) are
        # handled where they arise, and the tests turn these warnings into errors
        warnings.simplefilter("ignore", RuntimeWarning)

    for name in ("SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), _terminate)
    try:
        limits.under_address_limit()  # before numpy: see there
        cli.main(args=argv, prog_name="prefeval")
    except Exception as error:  # a resource running out, also in imports: one line
        message = limits.limit_message(error)
        if message is None:
            raise
        click.echo(message, err=True)
        sys.exit(2)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
