"""compare on partitions of complete queries, in this process or on a Dask cluster.

:func:`compare_partition` is the kernel: a plain function from the rows of complete
queries (pandas DataFrames: judgments ``query_id, iteration, doc_id, relevance``, runs
``run, query_id, doc_id, score``) to the partition's per-query preferences and its
partial sums (:class:`PartitionResult`).  :func:`dask_compare` runs it on Dask
workers, one task per query partition of :func:`prefeval.engine.compare_partitions`:
the partitions are the local engine's, so the per-query rows come in the same order
and the summary, added block by block in query order, is the same bits.  Spark's
``mapInArrow`` could call the kernel just as well (see the README).
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd

from . import ties
from .engine import (
    SummaryAccumulator,
    compare_partitions,
    compute_cube,
    load_runs,
    run_pairs,
)
from .measures import parse_measures
from .qrels import Qrels

#: the columns of the run rows the kernel takes
RUN_COLUMNS = ["run", "query_id", "doc_id", "score"]
#: the columns of the judgment rows the kernel takes (Qrels.frame's)
QRELS_COLUMNS = ["query_id", "iteration", "doc_id", "relevance"]


@dataclass
class PartitionResult:
    """What one partition gives back: its per-query rows (plain string columns; None
    without ``per_query``), the sums of its :data:`~prefeval.ties.SUM_BLOCK` blocks of
    queries (blocks x measures x pairs), the counts of defined values (measures x pairs),
    and per run the number of its queries the run has no results for."""

    frame: pd.DataFrame | None
    block_sums: np.ndarray
    counts: np.ndarray
    missing: dict[str, int]


def compare_partition(
    qrels_rows: pd.DataFrame,
    run_rows: pd.DataFrame,
    run_names: list[str],
    measures: list[str],
    *,
    relevance_level: float | None = None,
    max_docs: int | None = None,
    binary: bool = False,
    pairs=None,
    per_query: bool = True,
    both_directions: bool = False,
    has_subtopics: bool = False,
    sum_block: int | None = None,
) -> PartitionResult:
    """The kernel: compare every run pair (or ``pairs``) on the queries of
    ``qrels_rows`` (every judgment of those queries; all of them must have a relevant
    document at the level) from ``run_rows`` (the rows of every run on those queries).
    A run of ``run_names`` without rows here retrieved nothing on these queries.
    ``sum_block``: queries per block sum (default :data:`~prefeval.ties.SUM_BLOCK`)."""
    judged = Qrels(
        qrels_rows["query_id"],
        qrels_rows["iteration"],
        qrels_rows["doc_id"],
        qrels_rows["relevance"],
        name="<partition>",
    )
    relevant = judged.relevant(relevance_level)
    grouped = {name: rows for name, rows in run_rows.groupby("run", sort=False, observed=True)}
    sources = {}
    for name in run_names:
        rows = grouped.get(name)
        if rows is None or rows.empty:
            rows = pd.DataFrame({"query_id": [], "doc_id": [], "score": []})
        sources[name] = rows[["query_id", "doc_id", "score"]].astype(
            {"query_id": str, "doc_id": str, "score": float}
        )
    positions = load_runs(sources, relevant, max_docs, notify=None)
    cube = compute_cube(
        positions, relevant, parse_measures(measures, has_subtopics), binary=binary, pairs=pairs
    )
    if both_directions:
        cube = cube.both_directions()
    frame = None
    if per_query:
        frame = cube.to_frame(per_query=True, summary=False)
        for column in ("measure", "run_a", "run_b", "query_id"):
            frame[column] = frame[column].astype(str)
    return PartitionResult(
        frame,
        ties.block_sums(cube.values, axis=2, block=sum_block),
        np.sum(~np.isnan(cube.values), axis=2),
        {p.name: int(p.missing_queries) for p in positions if p.missing_queries},
    )


def dask_compare(
    judged: Qrels,
    runs: list,
    measures: list[str],
    *,
    relevance_level: float | None = None,
    max_docs: int | None = None,
    binary: bool = False,
    pairs=None,
    per_query: bool = True,
    both_directions: bool = False,
    summary: bool = True,
    scheduler: str | None = None,
    notify=None,
) -> Iterator[pd.DataFrame]:
    """compare's tables on Dask: an iterator of the per-query rows of each partition (with
    ``per_query``), then the summary rows (with ``summary``).  ``runs``: paths
    (TREC text, parsed here, or Parquet of one run or many, read by the workers);
    ``scheduler``: the address of a Dask scheduler, default a local cluster of one
    worker process per core.  ValueError when the scheduler cannot be reached."""
    import dask
    import dask.dataframe as dd
    from distributed import Client, LocalCluster

    from .engine import relevant_with_notice

    relevant = relevant_with_notice(judged, relevance_level, notify)
    queries = list(relevant.query_ids)
    names, frames = _run_tables(runs)
    measure_list = parse_measures(measures, judged.has_subtopics)
    parts = compare_partitions(len(queries), len(names), len(measure_list), pairs)
    partition_of = pd.Series(
        np.repeat(np.arange(len(parts)), [len(p) for p in parts]),
        index=pd.Index(queries, dtype=object),
    )
    table = dd.concat(frames) if len(frames) > 1 else frames[0]
    table = table.assign(partition=table["query_id"].map(partition_of, meta=("partition", float)))
    table = table.dropna(subset=["partition"])
    table["partition"] = table["partition"].astype(np.int64)
    divisions = [*range(len(parts)), len(parts) - 1]
    table = table.set_index("partition", divisions=divisions, sort=True)
    judged_rows = judged.frame[QRELS_COLUMNS]
    by_query = judged_rows.groupby("query_id", sort=False).indices
    options = dict(
        relevance_level=relevance_level,
        max_docs=max_docs,
        binary=binary,
        pairs=pairs,
        per_query=per_query,
        both_directions=both_directions,
        has_subtopics=judged.has_subtopics,
        sum_block=ties.SUM_BLOCK,  # the client's: the blocks the partitions are made of
    )
    tasks = []
    for part, rows in zip(parts, table.to_delayed()):
        take = np.concatenate([by_query[q] for q in queries[part.start : part.stop]])
        qrels_part = judged_rows.iloc[np.sort(take)].reset_index(drop=True)
        tasks.append(
            dask.delayed(compare_partition)(
                qrels_part, rows, names, [m.name for m in measure_list], **options
            )
        )
    try:
        if scheduler:
            client = Client(scheduler, timeout="15s")
        else:
            # the workers share the command's stderr: their log of a failed task (an
            # input error, raised again here) would print a traceback beside its message;
            # a dashboard on any free port (the default 8787 may be taken: a warning)
            cluster = LocalCluster(
                processes=True, dashboard_address=":0", silence_logs=logging.CRITICAL
            )
            client = Client(cluster)
    except (OSError, TimeoutError) as error:
        raise ValueError(f"--scheduler {scheduler}: cannot connect ({error})") from None
    return _results(
        client, tasks, names, measure_list, pairs, both_directions, per_query, summary,
        len(queries), notify, own_cluster=not scheduler,
    )  # fmt: skip


def _results(
    client, tasks, names, measure_list, pairs, both_directions, per_query, summary,
    n_queries, notify, own_cluster,
) -> Iterator[pd.DataFrame]:  # fmt: skip
    """The frames of :func:`dask_compare`, as the tasks finish, in partition order."""
    from .engine import PreferenceCube

    try:
        with warnings.catch_warnings():
            # text runs are parsed here and travel in the graph: Dask's advice to load
            # them on the workers is no news to the user of a command
            warnings.filterwarnings("ignore", "Sending large graph", UserWarning)
            futures = client.compute(tasks)
        total = SummaryAccumulator()
        missing: dict[str, int] = {}
        like = None
        for future in futures:
            result = future.result()
            future.release()
            if like is None:  # the runs and pairs of the summary rows
                chosen = run_pairs(len(names), pairs)
                shape = (len(measure_list), len(chosen), 0)
                like = PreferenceCube(
                    [m.name for m in measure_list], names, [], chosen, np.zeros(shape)
                )
                like = like.both_directions() if both_directions else like
            total.add_blocks(result.block_sums, result.counts, like)
            for name, count in result.missing.items():
                missing[name] = missing.get(name, 0) + count
            if per_query and result.frame is not None and len(result.frame):
                yield result.frame
        if notify is not None:
            for name in names:
                if missing.get(name):
                    notify(
                        f"run {name}: no results for {missing[name]} of {n_queries} "
                        "evaluated queries; evaluated as retrieving nothing"
                    )
        if summary:
            yield total.frame()
    finally:
        cluster = client.cluster
        client.close()
        if cluster is not None and own_cluster:
            cluster.close()


def _run_tables(runs) -> tuple[list[str], list]:
    """The run names (in compare's order: a many-run table's in sorted order) and Dask
    DataFrames ``run, query_id, doc_id, score`` of run sources: a Parquet file is read
    by the workers (only its column names and run names here), anything else here with
    prefeval's reader."""
    import dask.dataframe as dd
    import pyarrow.parquet as pq

    from . import parquet
    from .readers import read_run, run_name

    names: list[str] = []
    tables = []
    for source in runs:
        path = os.fspath(source) if isinstance(source, (str, os.PathLike)) else None
        if path is not None and path != "-" and parquet.sniff(path):
            columns = pq.read_schema(path).names
            rename = {
                parquet._need(columns, parquet.QUERY, path, parquet.RUN_COLUMNS): "query_id",
                parquet._need(columns, parquet.DOC, path, parquet.RUN_COLUMNS): "doc_id",
                parquet._need(columns, parquet.SCORE, path, parquet.RUN_COLUMNS): "score",
            }
            run = parquet._find(columns, parquet.RUN, path)
            if run is not None:
                rename[run] = "run"
            frame = dd.read_parquet(path, columns=list(rename)).rename(columns=rename)
            if run is None:
                names.append(run_name(path))
                frame = frame.assign(run=names[-1])
            else:
                names.extend(parquet.run_names(path))
            tables.append(frame[RUN_COLUMNS])
            continue
        name = run_name(path) if path is not None else f"run{len(names) + 1}"
        columns = read_run(source, name=name)
        local = pd.DataFrame(
            {
                "run": name,
                "query_id": np.asarray(columns.query_id.to_pylist(), dtype=object),
                "doc_id": np.asarray(columns.doc_id.to_pylist(), dtype=object),
                "score": np.asarray(columns.score, dtype=float),
            }
        )
        names.append(name)
        tables.append(dd.from_pandas(local, npartitions=1))
    seen = set()
    for name in names:
        if name in seen:
            raise ValueError(f"two runs are named {name!r}")
        seen.add(name)
    return names, tables
