"""The ``metrics`` command: the baselines (ir-measures' metrics, trec_eval's names) of every
run."""

from __future__ import annotations

import click

from ..analysis.baselines import (
    count_measure,
    default_baselines,
    metrics_frames,
    no_metrics,
    without_runid,
)
from ..core.progress import stderr_notice
from ..io.runs import read_qrels
from ..io.writers import (
    check_tsv_values,
    terminal,
    write_frames,
    write_table,
)
from .baselines import baseline_names
from .checks import command
from .errors import usage_errors
from .params import (
    BASELINE_HELP,
    DEFAULT_BASELINES_HELP,
    judged_options,
    max_docs_option,
    names_option,
    output_options,
    qrels_and_runs,
    relevance_level_option,
    resolved_runs,
    rows_options,
)


@command()
@qrels_and_runs
@click.option(
    "-m",
    "--measure",
    "-B",
    "--baseline",
    "baselines",
    multiple=True,
    metavar="MEASURE",
    help=f"{BASELINE_HELP} {DEFAULT_BASELINES_HELP}".replace("Baseline metric(s)", "Metric(s)"),
)
@relevance_level_option
@max_docs_option
@click.option(
    "--no-cache",
    "cache",
    is_flag=True,
    flag_value=False,
    default=None,
    help="Accepted like the other commands; metrics reads the runs itself and "
    "neither reads nor writes the cache.",
)
@rows_options
@click.option(
    "-c",
    "complete",
    is_flag=True,
    help="Accepted for trec_eval -c, which prefeval always does: the summary averages "
    "over every judged query, a query a run did not answer counting as an empty ranking.",
)
@names_option
@output_options
def metrics(qrels, runs, names, complete, precision, fmt, output, **params):
    """Baseline metrics with ir-measures: rows `measure run query_id value`.

    As trec_eval -c: without -q only summary rows (query_id `all`: the mean over
    every judged query, also those with no relevant document at the level; the sum
    for NumQ, NumRel, NumRet, NumRelRet; TSE and ASL, undefined without a relevant
    document, average the queries with one); -q per-query rows of the evaluated queries
    (those with a relevant document), then the summary rows; -n drops the summary.
    Every evaluated query appears for every run (a query a run did not answer is
    evaluated as an empty ranking, as trec_eval -c). Analysis commands read
    `metrics -q` back with --metrics. The measure column holds ir-measures' name
    (map is written AP). A run that did not answer some evaluated queries gets a notice,
    as in compare.

    gm_map (trec_eval's geometric mean AP) has per-query rows log(max(AP, 0.00001)),
    trec_eval's per-query value, and the summary exp of their mean. runid writes no
    rows: the run column holds each run's name, its run tag with --names tag.

    \b
    Example:
      prefeval metrics -q -o metrics.tsv qrels.txt runs/input.*
      prefeval metrics -m map,ndcg_cut_10,P_10 qrels.txt runs/input.*
    """

    del complete  # what trec_eval -c asks for is what prefeval always does
    settings = judged_options(params, qrels=qrels)
    wanted, runid = without_runid(settings.baselines or ())
    measure_names = baseline_names(wanted) if wanted else None
    runs = resolved_runs(runs, names)
    judgments = read_qrels(qrels)
    if runid:
        stderr_notice(RUNID_NOTICE[names])
        if not wanted:  # runid alone: no values to write
            write_table(no_metrics(), output, fmt, precision)
            return
    with usage_errors():  # computed here; written a (measure, run) at a time
        frames = metrics_frames(
            judgments,
            runs,
            measure_names or default_baselines(judgments.has_subtopics),
            settings,
            notify=stderr_notice,
        )
    if fmt == "tsv":  # refused before the first piece is written
        check_tsv_values(output, "run", list(runs))
        if settings.per_query:  # the summary rows' query_id is "all"
            check_tsv_values(output, "query_id", judgments.query_ids())
    if terminal(output) and fmt == "tsv":  # the readable view: aligned on every row
        import pandas as pd

        frames = [pd.concat(list(frames), ignore_index=True)]
    write_frames(frames, output, fmt, precision, counts=metric_counts, regroup=True)


def metric_counts(table) -> dict:
    """The cells of a metrics table that hold counts (the values of NumQ, NumRel, NumRet,
    NumRelRet): written as integers."""
    import numpy as np
    import pandas as pd

    codes, names = pd.factorize(table["measure"])  # no Python object a row
    counting = np.array([count_measure(str(name)) for name in names], dtype=bool)
    return {"value": counting[codes] if len(names) else np.zeros(len(codes), dtype=bool)}


#: the notice of ``metrics -m runid``, by --names
RUNID_NOTICE = {
    "file": "runid: no rows; the run column names each run, by its file name (--names tag: "
    "by its run tag, trec_eval's runid)",
    "tag": "runid: no rows; the run column names each run by its run tag (--names tag), "
    "trec_eval's runid",
}
