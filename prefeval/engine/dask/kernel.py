"""The kernel of a Dask task: :func:`compare_partition`, a plain function from the rows of
complete queries (pandas DataFrames: judgments ``query_id, iteration, doc_id, relevance``,
runs ``run, query_id, doc_id, score``) to the partition's per-query preferences and its
partial sums (:class:`~prefeval.engine.job.PartitionResult`), and the judgments of a
partition as a worker builds them."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...core.qrels import Qrels
from ...io import parquet
from ...io.columns import RunColumns, dictionary_codes, run_from_arrays
from ...measures import parse_measures
from ..job import PartitionResult, Want, partition_result
from ..local import compute_cube, load_runs

#: the columns of the run rows the kernel takes
RUN_COLUMNS = ["run", "query_id", "doc_id", "score"]


#: the columns of the judgment rows the kernel takes (Qrels.frame's)
QRELS_COLUMNS = ["query_id", "iteration", "doc_id", "relevance"]


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
    values: bool = False,
    rates: bool = False,
    signs: bool = False,
    positions: bool = False,
    plain: bool = True,
    run_files: dict | None = None,
) -> PartitionResult:
    """The kernel: compare every run pair (or ``pairs``) on the queries of
    ``qrels_rows`` (every judgment of those queries; all of them must have a relevant
    document at the level) from ``run_rows`` (the rows of every run on those queries).
    A run of ``run_names`` without rows here retrieved nothing on these queries.
    ``sum_block``: queries per block sum (default :data:`~prefeval.core.ties.SUM_BLOCK`).
    What else it gives back (for the analysis commands, as :class:`Want` names them):
    ``values``, the preferences; ``rates``, the win rates and block moments ``order``
    and ``discpower`` merge (with ``signs`` also the preferences' packed signs, for
    ``agree``); ``positions``, the
    reduced runs (label sampling of ``robustness``).  ``plain``: the per-query rows'
    text columns as plain strings (else pandas categoricals, as the local engine writes
    them: a fraction of the bytes to send).  ``run_files``: per run
    read from Parquet, its file and whether it holds many runs; with the rows' 0-based
    file rows in a ``row`` column, a document met twice is then reported as the local
    reader reports it."""
    relevant = partition_relevant(qrels_rows, relevance_level)
    sources = _arrow_runs(run_rows, run_names, run_files or {})
    if sources is None:
        sources = _frame_runs(
            run_rows.to_pandas() if hasattr(run_rows, "to_pandas") else run_rows, run_names
        )
    reduced = load_runs(sources, relevant, max_docs, notify=None)
    want = Want(
        rows=per_query, both_directions=both_directions, values=values, rates=rates,
        signs=signs, positions=positions,
    )  # fmt: skip
    return kernel_result(
        relevant, reduced, run_names, measures, want, binary=binary, pairs=pairs,
        has_subtopics=has_subtopics, sum_block=sum_block, plain=plain,
    )  # fmt: skip


def partition_relevant(qrels_rows: pd.DataFrame, relevance_level: float | None):
    """The evaluated judgments of a partition's rows (:class:`~prefeval.core.qrels.RelevantSet`)."""
    judged = Qrels(
        qrels_rows["query_id"],
        qrels_rows["iteration"],
        qrels_rows["doc_id"],
        qrels_rows["relevance"],
        name="<partition>",
    )
    return judged.relevant(relevance_level)


def kernel_result(
    relevant,
    reduced: list,
    run_names: list[str],
    measures: list[str],
    want: Want,
    *,
    binary: bool = False,
    pairs=None,
    has_subtopics: bool = False,
    sum_block: int | None = None,
    plain: bool = True,
) -> PartitionResult:
    """What :func:`compare_partition` gives back, from the partition's reduced runs:
    what ``want`` names (its ``rows``, ``both_directions``, ``values``, ``rates``,
    ``signs`` and ``positions``)."""
    preferences = compute_cube(
        reduced, relevant, parse_measures(measures, has_subtopics), binary=binary, pairs=pairs
    )
    if want.both_directions:
        preferences = preferences.both_directions()
    return partition_result(
        preferences,
        want,
        sum_block=sum_block,
        plain=plain,
        missing={p.name: int(p.missing_queries) for p in reduced if p.missing_queries},
        positions=reduced if want.positions else None,
    )


def _frame_runs(run_rows: pd.DataFrame, run_names: list[str]) -> dict:
    """The runs of a pandas table of rows ``run, query_id, doc_id, score``."""
    grouped = {name: rows for name, rows in run_rows.groupby("run", sort=False, observed=True)}
    sources = {}
    for name in run_names:
        rows = grouped.get(name)
        if rows is None or rows.empty:
            rows = pd.DataFrame({"query_id": [], "doc_id": [], "score": []})
        sources[name] = rows[["query_id", "doc_id", "score"]].astype(
            {"query_id": str, "doc_id": str, "score": float}
        )
    return sources


def _arrow_runs(run_rows, run_names: list[str], files: dict) -> dict | None:
    """The runs of an Arrow table of rows ``run, query_id, doc_id, score[, row]`` with
    string ids, as :class:`~prefeval.io.columns.RunColumns` (no pandas on the way); None
    for another table."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not isinstance(run_rows, pa.Table):
        return None
    text = (pa.types.is_string, pa.types.is_large_string)
    for column in ("run", "query_id", "doc_id"):
        values = run_rows[column]
        if not any(t(values.type) for t in text):
            return None
        if values.null_count or pc.any(pc.equal(pc.utf8_length(values), 0)).as_py():
            return None  # the pandas path tells which row
    kind = run_rows["score"].type
    if not (pa.types.is_floating(kind) or pa.types.is_integer(kind)):
        return None
    problems: list = []
    runs = {
        name: arrow_run(run_rows.filter(pc.equal(run_rows["run"], name)), name, files, problems)
        for name in run_names
    }
    earliest(problems)  # a document met twice: the first in the file, as read locally
    return runs


def arrow_run(rows, name: str, files: dict, problems: list | None = None):
    """Run ``name``'s rows (an Arrow table ``query_id, doc_id, score[, row]``, string ids
    with neither null nor empty values) as :class:`~prefeval.io.columns.RunColumns`: read
    from Parquet on a worker (``files``, rows numbered in the file: checked there), a
    document met twice is told by the file's rows, as the local reader tells it.  With
    ``problems`` that error is added to it, (file row, error), and None returned: the
    caller reports the earliest in the file once every run is checked."""
    import pyarrow as pa

    qid = rows["query_id"].combine_chunks()
    docno = rows["doc_id"].combine_chunks()
    score = np.asarray(rows["score"].cast(pa.float64()).to_numpy(), dtype=np.float64)
    if name in files and "row" in rows.column_names and not rows["row"].null_count:
        path, many = files[name]
        qcode, qvalues = dictionary_codes(qid)
        dcode, dvalues = dictionary_codes(docno)
        at = rows["row"].to_numpy()
        run_of = (lambda row, name=name: name) if many else None
        found = parquet.duplicate_error(path, qid, docno, (qcode, dcode), at, run_of)
        if found is not None:
            if problems is None:
                raise found[1]
            problems.append(found)
            return None
        return RunColumns(name, path, qid, docno, score, dcode, dvalues, qcode, qvalues)
    return run_from_arrays(qid, docno, score, name, f"<run {name}>")


def earliest(problems: list) -> None:
    """Raise the error of ``problems`` (file row, error) that is earliest in the file."""
    if problems:
        raise min(problems, key=lambda item: item[0])[1]


def worker_judgments(qrels_rows: pd.DataFrame, relevance_level) -> object:
    """On a worker: the evaluated judgments of ``qrels_rows`` with their docno lookup
    made, shared by the stretches of row groups that hold their queries (one per run in
    a table laid out run by run)."""
    relevant = partition_relevant(qrels_rows, relevance_level)
    relevant.docnos()
    return relevant
