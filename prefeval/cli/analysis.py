"""The analysis commands (order, pairs, discpower, tau, agree, robustness, table): each reads
its options, calls its function of :mod:`prefeval.api` and writes the table."""

from __future__ import annotations

import inspect
import sys

import click

from .. import api, options
from ..analysis.agreement import tau_matrix_text
from ..analysis.significance import discriminative_power
from ..core.cube import against_pairs
from ..core.progress import stderr_notice
from ..core.terminal import shown
from ..io.writers import atomic_output, write_stdout, write_table
from ..present.report import runs_table_tex
from .baselines import baseline_names
from .checks import command, no_against, plotting_for
from .errors import usage_errors
from .params import (
    FORMAT_HELP,
    IntervalType,
    PlotFile,
    analysis_options,
    judged_options,
    method_option,
    number_option,
    number_type,
    output_option,
    precision_option,
    resolved_runs,
    samples_option,
    significance_options,
)


def run_analysis(command, inputs, prefs, metrics_file, names, params, **given):
    """The table of an analysis command, from :mod:`prefeval.api` (the library's own entry
    point) with the command's :class:`~prefeval.options.Options` judged from ``params``
    and ``given`` (:func:`~prefeval.cli.params.judged_options`; a ``given`` that the judge
    does not take goes to the api function as it is), after the checks that name its
    options."""

    qrels, runs = (inputs[0], list(inputs[1:])) if inputs else (None, [])
    settings = judged_options(params, qrels=qrels, prefs=prefs, metrics=metrics_file, **given)
    runs = resolved_runs(runs, names)  # named as with --prefs: the names of the prefs table
    if prefs is None:
        names = list(runs)
        if len(names) < 2:
            raise click.UsageError("give QRELS and at least two RUNs, or --prefs FILE")
    baseline_names(settings.baselines or ())  # a usage error before any computing
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
            **{  # the settings that differ from the command's defaults (unset lists stay
                #  unset)
                k: getattr(settings, k)
                for k in options.FIELDS
                if k in keywords and getattr(settings, k) != options.default(k, command)
            },
            **{k: v for k, v in given.items() if k not in options.KEYWORDS},
        )


@command()
@analysis_options(against=False)
@method_option
@number_option(
    "--teleport",
    "teleport",
    help="MC4 uniform teleport weight (keeps the chain ergodic).",
)
def order(inputs, prefs, metrics_file, names, against, precision, fmt, output, **params):
    """Order the runs: rows `measure method rank run score`, rank 1 best.

    Per query, each run's win rate W_q(a) = sum_b Delta(a, b) ranks the runs;
    MC4 (default), Borda, mean win rate or Copeland aggregate them. Baselines are
    ordered by their mean over queries.

    \b
    Example:
      prefeval order qrels.txt runs/input.*
      prefeval order --prefs prefs.tsv --metrics metrics.tsv --method borda
    """

    no_against(against, "order", "ranks all runs")
    table = run_analysis("order", inputs, prefs, metrics_file, names, params, against=against)
    write_table(table, output, fmt, precision)


@command()
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
    names,
    alpha,
    per_pair,
    plot,
    plot_log,
    precision,
    fmt,
    output,
    **params,
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
    plotting = plotting_for(plot, output, [*inputs, prefs, metrics_file])
    # one row per pair: the curves need it, the summary counts it
    table = run_analysis(
        "discpower", inputs, prefs, metrics_file, names, params, alpha=alpha,
        per_pair=per_pair, pairs=True,
    )  # fmt: skip
    if plot:
        plotting.discpower_curves(table, plot, alpha=alpha, log=plot_log)
    result = table if per_pair else discriminative_power(table, alpha)
    write_table(result, output, fmt, precision)


@command()
@analysis_options(against=False)
@method_option
def tau(inputs, prefs, metrics_file, names, against, precision, fmt, output, **params):
    """Kendall's tau-b between the run orderings of every pair of measures.

    Rows `measure_a measure_b tau`; with the default tsv output, a readable
    matrix also goes to stderr when it is a terminal.

    \b
    Example:
      prefeval tau -B AP -B nDCG qrels.txt runs/input.*
    """

    no_against(against, "tau", "correlates orderings of all runs")
    table = run_analysis("tau", inputs, prefs, metrics_file, names, params, against=against)
    if fmt == "tsv" and sys.stderr.isatty():
        digits = 3 if precision is None else precision
        click.echo(shown(tau_matrix_text(table, digits), sys.stderr), err=True, nl=False)
    write_table(table, output, fmt, precision)


@command()
@analysis_options
@click.option(
    "--ties",
    "ties",
    is_flag=True,
    help="Write each measure's share of tied comparisons instead (rows measure ties comparisons).",
)
def agree(inputs, prefs, metrics_file, names, no_baselines, ties, precision, fmt, output, **params):
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
    table = run_analysis(
        "agree", inputs, prefs, metrics_file, names, params, no_baselines=no_baselines, ties=ties
    )
    write_table(table, output, fmt, precision)


@command()
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
    default=options.default("policy"),
    show_default=True,
    help="Which labels to remove: at random, or the documents retrieved by the most runs first.",
)
@samples_option
@click.option(
    "--seed", type=number_type("seed"), default=options.default("seed"), show_default=True
)
@click.option(
    "--plot",
    type=PlotFile(),
    default=None,
    metavar="FILE",
    help="Draw Kendall's tau against the level (mean, ±std band) to FILE: .png, .pdf or "
    ".svg (needs matplotlib).",
)
def robustness(inputs, prefs, metrics_file, names, against, plot, precision, fmt, output, **params):
    """How orderings hold up with fewer queries or fewer relevance labels.

    Rows `measure kind level samples tau_mean tau_std ties agreement` (ties and
    agreement for label sampling only).

    \b
    Example:
      prefeval robustness --queries 5,10,25 --labels 0.9,0.5 qrels.txt runs/input.*
    """

    no_against(against, "robustness", "correlates orderings of all runs")
    plotting = plotting_for(plot, output, [*inputs, prefs, metrics_file])
    table = run_analysis("robustness", inputs, prefs, metrics_file, names, params, against=against)
    if plot:
        plotting.robustness_plot(table, plot)
    # a level of --queries is a number of queries: an integer, in a column of fractions
    write_table(table, output, fmt, precision, counts={"level": table["kind"] == "queries"})


@command()
@analysis_options
@click.option(
    "--ci",
    "ci",
    type=IntervalType(),
    default=options.default("ci"),
    show_default=True,
    help="Interval of the mean difference: t (Student's t) or bootstrap (percentile "
    "bootstrap of the mean; holds the preferences whole). A number is the --level of a "
    "t interval.",
)
@click.option(
    "--level",
    type=number_type("level"),
    default=None,
    help="Confidence level of the interval.  [default: 0.95]",
)
@number_option(
    "--resamples",
    "resamples",
    help="Bootstrap resamples (--ci bootstrap).",
)
@number_option(
    "--seed",
    "seed",
    help="Seed of the bootstrap resamples.",
)
def pairs(inputs, prefs, metrics_file, names, precision, fmt, output, **params):
    """Per run pair: mean difference, its interval, wins, ties, losses, effect size.

    Rows `measure run_a run_b queries mean ci_low ci_high wins ties losses
    effect`: per query Delta(a, b) for a preference, value(a) - value(b) for a
    metric (b - a when lower is better, ASL), so positive always favours run_a;
    effect is mean / sd of those differences (empty when they are all equal).

    \b
    Example:
      prefeval pairs --against sys01 qrels.txt runs/input.*
    """

    table = run_analysis("pairs", inputs, prefs, metrics_file, names, params)
    write_table(table, output, fmt, precision)


#: the formats of ``table``: the tidy table's, and the LaTeX table
TABLE_FORMATS = click.Choice(["tsv", "csv", "jsonl", "parquet", "tex"], case_sensitive=False)
#: decimals of ``table -f tex`` without -p
TEX_DIGITS = 3


@command()
@analysis_options(
    against="The reference run REF: each cell is the run against REF (a preference "
    "measure's mean Δ(run, REF)), marked + or - where the run is significantly better or "
    "worse than REF.",
    outputs=False,
)
@click.option(
    "--order-by",
    "order_by",
    metavar="MEASURE|given",
    default=None,
    help="Rows in the MC4 order of MEASURE (a baseline: its mean), or 'given': the runs "
    "in the order given.  [default: the first preference measure]",
)
@significance_options(one_test=True)
@click.option(
    "-f",
    "--format",
    "fmt",
    type=TABLE_FORMATS,
    default="tsv",
    show_default=True,
    help=FORMAT_HELP.removesuffix(".")
    + "; tex: the table itself (booktabs), to \\input into a paper.",
)
@output_option
@precision_option
def table(
    inputs, prefs, metrics_file, names, tests, order_by, trials, precision, fmt, output, **params
):
    """The runs x measures table papers print, with significance marks.

    One row per run (in the MC4 order of --order-by, or as given), one column per
    measure: a preference measure's MC4 score, or with --against REF the run's mean
    preference Delta(run, REF); a baseline's mean. The best per measure is marked; each
    run has a letter (a, b, ..., z, aa, ...) and a cell lists the letters of the runs it
    is significantly better than (--test, --correction over all pairs of runs of the
    measure); with --against, + or - against REF, with its p-values.

    Rows `row run letter measure kind method value rank best marks test correction
    alpha` (with --against: no letter; reference p_value p_adjusted after them); -f tex
    writes the table itself (best in bold, marks as superscripts; -p decimals, default 3).

    \b
    Example:
      prefeval table -m rpp -B AP qrels.txt runs/input.*
      prefeval table -f tex -o table.tex --against sys01 qrels.txt runs/input.*
    """

    fmt = fmt.lower()
    frame = run_analysis(
        "table", inputs, prefs, metrics_file, names, params, tests=tests, order_by=order_by,
        trials=trials, test=tests,
    )  # fmt: skip
    if fmt != "tex":
        write_table(frame, output, fmt, precision)
        return
    with usage_errors():
        text = runs_table_tex(
            frame,
            order_by=order_by,
            trials=trials,
            digits=TEX_DIGITS if precision is None else precision,
        )
    data = text.encode("utf-8")
    if output is None or output == "-":
        write_stdout([data])
        return
    with atomic_output(output) as handle:
        handle.write(data)
