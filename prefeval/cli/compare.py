"""The commands that compute from QRELS and runs: compare (preferences), metrics
(baselines with ir-measures) and explain (one pair of runs, level by level)."""

from __future__ import annotations

import click

from .. import options
from ..analysis.baselines import (
    count_measure,
    default_baselines,
    metrics_frames,
    no_metrics,
    without_runid,
)
from ..core.cube import against_pairs
from ..core.progress import stderr_notice
from ..engine.engines import engine_for
from ..engine.job import Job, compare_tables
from ..io.runs import read_qrels
from ..io.writers import (
    READABLE_DIGITS,
    atomic_output,
    check_tsv_values,
    terminal,
    write_frames,
    write_stdout,
    write_table,
)
from ..measures import parse_measures
from ..present.explain import explain as explain_table
from ..present.explain import to_text
from .checks import command
from .errors import usage_errors
from .params import (
    BASELINE_HELP,
    DEFAULT_BASELINES_HELP,
    against_option,
    baseline_names,
    dask_options,
    engine_options,
    format_option,
    judged_options,
    max_docs_option,
    names_option,
    number_type,
    output_option,
    output_options,
    precision_option,
    relevance_level_option,
    resolved_runs,
    run_arguments,
)


def _parse_measures(measures, has_subtopics):

    with usage_errors():
        return parse_measures(measures, has_subtopics)


@command()
@click.argument("qrels", type=click.Path(dir_okay=False))
@click.argument(
    "runs", nargs=-1, required=True, type=click.Path(dir_okay=False), callback=run_arguments
)
@engine_options
@click.option("-q", "--per-query", is_flag=True, help="Per-query rows, then summary rows.")
@click.option(
    "-n",
    "--no-summary",
    "summary",
    is_flag=True,
    flag_value=False,
    default=options.default("summary"),
    help="Drop the summary rows (query_id all).",
)
@against_option
@names_option
@click.option(
    "--both-directions",
    is_flag=True,
    help="Also write each pair reversed (Delta(b, a) = -Delta(a, b)): a runs x runs matrix.",
)
@dask_options
@precision_option
@format_option
@output_option
def compare(
    qrels,
    runs,
    precision,
    fmt,
    output,
    measures,
    relevance_level,
    max_docs,
    cache,
    jobs,
    binary,
    per_query,
    summary,
    against,
    names,
    both_directions,
    engine,
    scheduler,
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

    runs = resolved_runs(runs)
    names = list(runs)
    if len(names) < 2:
        raise click.UsageError("need at least two runs to compare")
    settings = judged_options()
    computing = engine_for(settings)
    computing.prepare()  # before anything is read (Dask: the client's memory)
    judgments = read_qrels(qrels)
    measure_list = _parse_measures(settings.measures, judgments.has_subtopics)
    pairs = None
    if settings.against:
        with usage_errors():
            pairs = against_pairs(names, settings.against)
    job = Job(judgments, runs, measure_list, settings, pairs, stderr_notice)
    del judgments  # the job holds the judgments (on Dask, the tasks)
    with usage_errors():  # one query partition at a time: memory bounded by a partition
        frames, _ = compare_tables(
            computing, job, settings.per_query, settings.summary, settings.both_directions
        )
    write_frames(frames, output, fmt.lower(), precision)


@command()
@click.argument("qrels", type=click.Path(dir_okay=False))
@click.argument(
    "runs", nargs=-1, required=True, type=click.Path(dir_okay=False), callback=run_arguments
)
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
@click.option("-q", "--per-query", is_flag=True, help="Per-query rows, then summary rows.")
@click.option(
    "-n",
    "--no-summary",
    "summary",
    is_flag=True,
    flag_value=False,
    default=options.default("summary"),
    help="Drop the summary rows (query_id all).",
)
@click.option(
    "-c",
    "complete",
    is_flag=True,
    help="Accepted for trec_eval -c, which prefeval always does: the summary averages "
    "over every judged query, a query a run did not answer counting as an empty ranking.",
)
@names_option
@output_options
def metrics(
    qrels,
    runs,
    names,
    precision,
    fmt,
    output,
    baselines,
    relevance_level,
    max_docs,
    cache,
    per_query,
    summary,
    complete,
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

    settings = judged_options()
    wanted, runid = without_runid(settings.baselines or ())
    measure_names = baseline_names(wanted) if wanted else None
    runs = resolved_runs(runs)
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


#: ``explain -q QUERY``, the spelling of --query up to 0.1.0, still works for one release
OLD_QUERY_NOTICE = (
    "explain -q QUERY is deprecated, use --query QUERY (-q is --per-query in compare and "
    "metrics; explain -q goes in the next release)"
)


@command()
@click.argument("qrels", type=click.Path(dir_okay=False))
@click.argument(
    "runs",
    nargs=-1,
    required=True,
    metavar="RUN_A RUN_B",
    type=click.Path(dir_okay=False),
    callback=run_arguments,
)
@engine_options
@click.option(
    "--query",
    "query_ids",
    multiple=True,
    metavar="QUERY",
    help="Explain this query (repeatable, in the order given). Default: the --top queries.",
)
@click.option(
    "-q",
    "old_queries",
    multiple=True,
    metavar="QUERY",
    hidden=True,
    help="The old spelling of --query (-q is -q/--per-query in compare and metrics).",
)
@click.option(
    "--top",
    type=number_type("top"),
    default=None,
    metavar="N",
    help="The N queries (default 5) with the largest |Delta| under the first measure, "
    "equal ones by query id.",
)
@names_option
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
@output_option
def explain(
    qrels,
    runs,
    query_ids,
    old_queries,
    top,
    precision,
    fmt,
    output,
    measures,
    relevance_level,
    max_docs,
    cache,
    jobs,
    binary,
    names,
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
      prefeval explain --query 301 qrels.txt runs/input.a runs/input.b
    """

    if old_queries:
        stderr_notice(OLD_QUERY_NOTICE)
        if query_ids:
            raise click.UsageError("give --query only, not -q (its deprecated spelling) too")
        query_ids = old_queries
    runs = resolved_runs(runs)
    count = len(runs)
    if count != 2:
        raise click.UsageError(f"explain compares two runs, RUN_A RUN_B; got {count}")
    if query_ids and top is not None:
        raise click.UsageError("give --query or --top, not both")
    settings = judged_options()
    judgments = read_qrels(qrels)
    measure_list = _parse_measures(settings.measures, judgments.has_subtopics)
    # a wrong query id is reported before the runs are read
    with usage_errors():
        frame = explain_table(judgments, runs, settings, queries=list(query_ids) or None)
    if frame.empty:
        stderr_notice(f"no query has a value of {measure_list[0].name} to explain")
    fmt = fmt.lower()
    if fmt != "text":
        write_table(frame, output, fmt, precision)
        return
    if precision is None and terminal(output):  # read by a person: rounded
        precision = READABLE_DIGITS
    data = to_text(frame, precision, [m.name for m in measure_list]).encode()
    if output is None or output == "-":
        write_stdout([data])
    else:
        with atomic_output(output) as handle:
            handle.write(data)
