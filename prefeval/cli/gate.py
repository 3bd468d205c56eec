"""The regression gate: ``prefeval gate --against REF``, whose exit status is the verdict."""

from __future__ import annotations

import click

from .. import api, options
from ..analysis.gate import Verdicts
from ..core.cube import against_pairs
from ..core.progress import stderr_notice
from ..io.writers import write_table
from .baselines import baseline_names
from .checks import command
from .errors import usage_errors
from .params import (
    analysis_options,
    judged_options,
    number_option,
    number_type,
    resolved_runs,
)

#: exit statuses: no regression; a regression; bad input or usage; with --strict, no
#: regression but some verdict inconclusive
PASSED, REGRESSED, INCONCLUSIVE = 0, 1, 3


@command()
@analysis_options(
    against_help="The reference run REF (required): every other run is a candidate.",
    baselines_default="Gated besides -m; default none (with --metrics FILE: its metrics).",
    measures_default="rpp",
)
@click.option(
    "--test",
    "tests",
    type=click.Choice(options.GATE_TESTS),
    default=options.default("tests", "gate")[0],
    show_default=True,
    help="One-sided paired test, H1 the candidate is worse: Student's t on the mean "
    "difference, the sign test on wins and losses (ties dropped), or the randomization "
    "(sign-flip) test of the mean.",
)
@click.option(
    "--margin",
    type=number_type("margin"),
    default=options.default("margin"),
    show_default=True,
    metavar="M",
    help="Non-inferiority margin, in the measure's units: a regression is a mean "
    "difference significantly below -M (an improvement, above +M). Not with --test sign.",
)
@click.option(
    "--correction",
    type=click.Choice(options.CORRECTIONS),
    default=options.default("correction", "gate"),
    show_default=True,
    help="Multiple-comparison correction over every (candidate, measure) tested: "
    "family-wise (holm, bonferroni), false discovery rate (bh: Benjamini-Hochberg, by: "
    "Benjamini-Yekutieli), or none.",
)
@number_option(
    "--alpha",
    "alpha",
    help="Significance level of the corrected one-sided tests; the interval is at 1 - alpha.",
)
@click.option(
    "--min-queries",
    type=number_type("min_queries"),
    default=options.default("min_queries"),
    show_default=True,
    metavar="N",
    help="Fewer evaluated queries make the verdict inconclusive (not tested).",
)
@click.option(
    "--ci",
    type=click.Choice(options.INTERVALS),
    default=options.default("ci"),
    show_default=True,
    help="The two-sided (1 - alpha) interval of the mean difference: Student's t, or "
    "the percentile bootstrap.",
)
@number_option(
    "--resamples",
    "resamples",
    help="Bootstrap resamples (--ci bootstrap).",
)
@number_option(
    "--trials",
    "trials",
    help="Random sign flips of the randomization test (every flip when 2^queries <= trials).",
)
@number_option(
    "--seed",
    "seed",
    help="Seed of the sign flips and the bootstrap resamples.",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Exit with status 3 when no run regressed but some verdict is inconclusive.",
)
def gate(inputs, prefs, metrics_file, names, against, strict, precision, fmt, output, **params):
    """Regression gate: is any run worse than the reference run REF?

    Every RUN but REF is a candidate. Per gated measure (-m, default rpp; -B, none
    by default) and candidate, the per-query differences candidate vs REF (as
    `pairs --against REF`) are tested one-sided and paired, corrected over every
    (candidate, measure) tested. Rows `measure candidate reference queries mean
    ci_low ci_high wins ties losses effect test p_value p_adjusted verdict`; verdict
    regression, improvement, no difference or inconclusive. Each regression is also
    named on stderr.

    \b
    Exit status:
      0  no regression
      1  at least one regression
      2  bad input or usage
      3  with --strict: no regression, but some verdict is inconclusive

    \b
    Example:
      prefeval gate --against sys01 --min-queries 20 qrels.txt runs/input.*
    """

    if not against:
        raise click.UsageError("gate needs --against REF: the reference run")
    if len(set(against)) > 1:
        raise click.UsageError(
            f"--against {against[1]}: gate compares with one reference run (given "
            f"{len(set(against))})"
        )
    reference = against[0]
    qrels, runs = (inputs[0], list(inputs[1:])) if inputs else (None, [])
    settings = judged_options(
        params, qrels=qrels, prefs=prefs, metrics=metrics_file, against=against, strict=strict
    )
    runs = resolved_runs(runs, names)
    if prefs is None:
        names = list(runs)
        if not names:
            raise click.UsageError("give QRELS and RUN..., or --prefs FILE")
        with usage_errors():
            against_pairs(names, [reference])  # an unknown REF before any run is read
        if len(names) < 2:
            raise click.UsageError(
                f"gate: give at least one candidate RUN besides the reference {reference}"
            )
    baseline_names(settings.baselines or ())  # a usage error before any computing
    with usage_errors():
        table = api.gate(
            qrels,
            runs or None,
            against=reference,
            prefs=prefs,
            metrics=metrics_file,
            measures=settings.measures or None,
            baselines=settings.baselines,
            relevance_level=settings.relevance_level,
            max_docs=settings.max_docs,
            binary=settings.binary,
            test=settings.tests[0],
            margin=settings.margin,
            correction=settings.correction,
            alpha=settings.alpha,
            min_queries=settings.min_queries,
            ci=settings.ci,
            resamples=settings.resamples,
            trials=settings.trials,
            seed=settings.seed,
            engine=settings.engine,
            scheduler=settings.scheduler,
            cache=settings.cache,
            jobs=settings.jobs,
            progress=settings.progress,
            notify=stderr_notice,
        )
    write_table(table, output, fmt, precision)
    verdicts = Verdicts.of(table)
    for line in verdicts.lines():
        stderr_notice(line)
    if len(verdicts.regressions):
        click.get_current_context().exit(REGRESSED)
    if strict and verdicts.inconclusive:
        click.get_current_context().exit(INCONCLUSIVE)
