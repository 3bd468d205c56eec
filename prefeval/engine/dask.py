"""compare on partitions of complete queries, in this process or on a Dask cluster.

:func:`compare_partition` is the kernel: a plain function from the rows of complete
queries (pandas DataFrames: judgments ``query_id, iteration, doc_id, relevance``, runs
``run, query_id, doc_id, score``) to the partition's per-query preferences and its
partial sums (:class:`~prefeval.engine.job.PartitionResult`).  :class:`DaskEngine`
runs it on Dask workers, one task per query partition of
:func:`prefeval.engine.local.query_ranges`:
the partitions are the local engine's, so the per-query rows come in the same order
and the summary, added block by block in query order, is the same bits.  Spark's
``mapInArrow`` could call the kernel just as well (see the README).
"""

from __future__ import annotations

import logging
import operator
import os
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from ..core import limits, ties
from ..core.cube import run_pairs
from ..core.errors import InputError, SystemLimitError
from ..core.positions import RunPositions, join_positions, missing_notice, run_positions
from ..core.progress import progress_bar
from ..core.qrels import Qrels, RelevantSet
from ..core.signals import SignalsHeld
from ..io import parquet
from ..io.columns import RunColumns, dictionary_codes, run_from_arrays
from ..io.runs import Run, resolve_runs
from ..io.source import is_stream, stored
from ..io.textpass import run_text_positions
from ..io.writers import TemporaryFolder, row_groups
from ..measures import parse_measures
from .job import Job, PartitionResult, Partitions, Want, partition_result, summary_schema
from .local import compute_cube, load_runs, query_ranges, relevant_with_notice
from .memory import MMAP_THRESHOLD, map_large_allocations, release_free_memory

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
    relevant = _partition_relevant(qrels_rows, relevance_level)
    sources = _arrow_runs(run_rows, run_names, run_files or {})
    if sources is None:
        sources = _frame_runs(
            run_rows.to_pandas() if hasattr(run_rows, "to_pandas") else run_rows, run_names
        )
    reduced = load_runs(sources, relevant, max_docs, notify=None)
    return _partition_result(
        relevant, reduced, run_names, measures,
        binary=binary, pairs=pairs, per_query=per_query, both_directions=both_directions,
        has_subtopics=has_subtopics, sum_block=sum_block, values=values, rates=rates,
        signs=signs, positions=positions, plain=plain,
    )  # fmt: skip


def _partition_relevant(qrels_rows: pd.DataFrame, relevance_level: float | None):
    """The evaluated judgments of a partition's rows (:class:`~prefeval.core.qrels.RelevantSet`)."""
    judged = Qrels(
        qrels_rows["query_id"],
        qrels_rows["iteration"],
        qrels_rows["doc_id"],
        qrels_rows["relevance"],
        name="<partition>",
    )
    return judged.relevant(relevance_level)


def _partition_result(
    relevant,
    reduced: list,
    run_names: list[str],
    measures: list[str],
    *,
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
) -> PartitionResult:
    """What :func:`compare_partition` gives back, from the partition's reduced runs."""
    preferences = compute_cube(
        reduced, relevant, parse_measures(measures, has_subtopics), binary=binary, pairs=pairs
    )
    if both_directions:
        preferences = preferences.both_directions()
    return partition_result(
        preferences,
        Want(rows=per_query, values=values, rates=rates, signs=signs),
        sum_block=sum_block,
        plain=plain,
        pieces=False,
        missing={p.name: int(p.missing_queries) for p in reduced if p.missing_queries},
        positions=reduced if positions else None,
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
        name: _arrow_run(run_rows.filter(pc.equal(run_rows["run"], name)), name, files, problems)
        for name in run_names
    }
    _earliest(problems)  # a document met twice: the first in the file, as read locally
    return runs


def _arrow_run(rows, name: str, files: dict, problems: list | None = None):
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


def _earliest(problems: list) -> None:
    """Raise the error of ``problems`` (file row, error) that is earliest in the file."""
    if problems:
        raise min(problems, key=lambda item: item[0])[1]


def _partition_task(
    reads: list,
    pieces: list,
    texts: list,
    queries: list[str],
    stretches: list,
    qrels_rows: pd.DataFrame,
    run_names: list[str],
    measures: list[str],
    *,
    relevance_level: float | None = None,
    max_docs: int | None = None,
    run_files: dict | None = None,
    **options,
) -> PartitionResult:
    """One Dask task: :func:`compare_partition` on the rows of the partition's
    ``queries``, read here (:func:`_read_units`), on the ``texts``: (what a
    :func:`_text_positions` gave back, this partition's place in it), the positions of
    the text runs read by path on the workers (or the error of the first that cannot be
    read, in run order), and on the ``stretches``: (what a
    :func:`_stretch_task` gave back, this partition's place in it, None for a stretch
    of none of its queries), the positions of the Parquet runs read by stretches of row
    groups, each read once (the error of the first stretch that cannot be read, else of
    the document met twice earliest in the file)."""
    import pyarrow as pa

    relevant = _partition_relevant(qrels_rows, relevance_level)
    relevant.docnos()  # the lookup every run's reduction shares
    reduced: dict = {}
    for result, place in texts:
        if isinstance(result[place], InputError):
            raise result[place]
        reduced[result[place].name] = result[place]
    problems: list = []  # documents met twice, (file row, error)
    found: dict[str, list] = {}
    for result, place in stretches:
        if isinstance(result, _Flawed):
            if result.row is None:
                raise result.error
            problems.append((result.row, result.error))
        elif place is not None:
            for name, positions in result[place].items():
                found.setdefault(name, []).append(positions)
    for name, got in found.items():
        reduced[name] = _joined(name, got)
    read_here = [name for name in run_names if name not in reduced]
    reduced.update(
        _read_runs(
            _read_units(reads, pieces), pa.array(queries, pa.string()), read_here, relevant,
            run_files or {}, max_docs, problems,
        )
    )  # fmt: skip
    # every row is checked as it is read; of the documents met twice, the local reader
    # tells the first in the file
    _earliest(problems)
    release_free_memory()  # the rows read: freed, handed back before computing
    runs = [reduced.pop(name) for name in run_names]
    result = _partition_result(relevant, runs, run_names, measures, **options)
    del runs
    release_free_memory()  # and the cube's: the result may wait here for its turn
    return result


def _read_runs(
    units: list,
    wanted,
    names: list[str],
    relevant,
    files: dict,
    max_docs,
    problems: list,
    *,
    empty: bool = True,
) -> dict:
    """Runs ``names`` read from ``units`` (:func:`_read_units`; the rows of the queries
    ``wanted``, an Arrow array) and reduced against ``relevant``: per run its
    :class:`~prefeval.core.positions.RunPositions` (a run without rows: none, or with
    ``empty`` as retrieving nothing).  Each run is reduced as soon as no later unit can
    hold its rows (by the run column's statistics in a many-run table), so that a
    worker holds about one run's rows when the table is laid out run by run, and never
    a second copy of them.  A document met twice: added to ``problems`` (file row,
    error), the run left out."""
    import pyarrow as pa
    import pyarrow.compute as pc

    by_run: dict[str, list] = {name: [] for name in names}
    reduced: dict = {}

    def reduce(name: str) -> None:
        rows = by_run.pop(name)
        if not rows:  # retrieved nothing on these queries
            if not empty:
                return
            none = pa.array([], pa.string())
            rows = [
                pa.table({"query_id": none, "doc_id": none, "score": pa.array([], pa.float64())})
            ]
        table = pa.concat_tables(rows, promote_options="permissive")
        del rows[:]
        columns = _arrow_run(table, name, files, problems)
        if columns is not None:  # else a document met twice: told once all are read
            reduced[name] = run_positions(columns, relevant, max_docs)

    last = {name: -1 for name in names}  # the last unit that may hold a run's rows
    for i, (_, labels) in enumerate(units):
        for name in names:
            if labels is None or (
                name in labels if isinstance(labels, set) else labels[0] <= name <= labels[1]
            ):
                last[name] = i
    done: list[list[str]] = [[] for _ in range(len(units) + 1)]
    for name in names:
        done[last[name] + 1].append(name)
    for name in done[0]:
        reduce(name)
    for i, (unit, _) in enumerate(units):
        table = _unit_rows(unit, wanted)
        if table is not None and table.num_rows:
            labels = pc.unique(table["run"])
            for label in labels.to_pylist():
                if label in by_run:
                    one = len(labels) == 1
                    by_run[label].append(
                        table if one else table.filter(pc.equal(table["run"], label))
                    )
        del table
        for name in done[i + 1]:
            reduce(name)
    return reduced


def _joined(name: str, pieces: list) -> RunPositions:
    """One run's positions on a partition from ``pieces`` of it on disjoint queries
    (numbered alike): the documents in order, the retrieved counts added."""
    if len(pieces) == 1:
        return pieces[0]
    retrieved = np.sum([p.retrieved for p in pieces], axis=0)
    return join_positions(name, [(p.doc, p.rank) for p in pieces], retrieved)


@dataclass
class _Flawed:
    """What a :func:`_stretch_task` gives back for rows it cannot take: the error, and
    for a document met twice its 0-based row in the file (None: an error met reading)."""

    error: InputError
    row: int | None = None


def _stretch_task(
    source: _ParquetInput,
    groups: list[int],
    relevant,
    parts: list[range],
    run_names: list[str],
    max_docs,
    run_files: dict,
) -> list | _Flawed:
    """One Dask task per stretch of row groups (:func:`_stretches`): its groups read
    and checked here, once, each run reduced against ``relevant``, the judgments of the
    partitions whose queries the stretch may hold (:func:`_judgments`; ``parts``: the
    ranges of their queries there), and split by partition: per partition a dict run ->
    its :class:`~prefeval.core.positions.RunPositions` there (the runs with rows in the
    stretch); or, for rows the local reader would not take, a :class:`_Flawed`."""
    import pyarrow as pa

    problems: list = []
    wanted = pa.array(list(relevant.query_ids), pa.string())
    try:
        reduced = _read_runs(
            _read_units([(source, groups)], []), wanted, run_names, relevant, run_files,
            max_docs, problems, empty=False,
        )  # fmt: skip
    except InputError as error:
        return _Flawed(error)
    if problems:
        row, problem = min(problems, key=lambda item: item[0])
        return _Flawed(problem, row)
    out: list[dict] = [{} for _ in parts]
    for name, positions in reduced.items():
        for k, piece in enumerate(_by_partition(positions, relevant, parts)):
            out[k][name] = piece
    return out


def _judgments(qrels_rows: pd.DataFrame, relevance_level) -> object:
    """On a worker: the evaluated judgments of ``qrels_rows`` with their docno lookup
    made, shared by the stretches of row groups that hold their queries (one per run in
    a table laid out run by run)."""
    relevant = _partition_relevant(qrels_rows, relevance_level)
    relevant.docnos()
    return relevant


def _by_partition(positions: RunPositions, relevant, parts: list[range]) -> list:
    """One run's ``positions`` (on ``relevant``) split by the query ranges ``parts``:
    per range its positions, the documents numbered from 0 in the range."""
    out = []
    for part in parts:
        lo, hi = int(relevant.offsets[part.start]), int(relevant.offsets[part.stop])
        keep = (positions.doc >= lo) & (positions.doc < hi)
        out.append(
            RunPositions(
                positions.name, positions.doc[keep] - lo, positions.rank[keep],
                positions.retrieved[part.start : part.stop],
            )
        )  # fmt: skip
    return out


def _text_positions(source: _TextInput, relevant, parts: list[range], max_docs) -> list:
    """On a worker: the text run ``source`` read by path and reduced against the whole
    evaluated judgments ``relevant`` (as the local engine reduces it), split by partition
    of ``parts``: per partition its :class:`~prefeval.core.positions.RunPositions`, the
    documents numbered from 0 in the partition; or, for a run that cannot be read, the
    :class:`~prefeval.core.errors.InputError` the local engine raises, as a value (the
    partitions raise the first in run order)."""
    try:
        run = Run(source.name, source.kind, source.shown, stored(source.path))
        positions = run_text_positions(run, relevant, max_docs)  # None: declined
        if positions is None:
            positions = run_positions(run.read(known=relevant.docnos()), relevant, max_docs)
    except InputError as error:
        return [error] * len(parts)
    return _by_partition(positions, relevant, parts)


def _read_units(reads: list, pieces: list) -> list:
    """The pieces of one partition's run rows, in the order they are read: (unit, the
    run names it may hold: a set, a (lowest, highest) range, or None for any).  A unit
    is an Arrow table already split, or (file, source, row group, its first row)."""
    import pyarrow.compute as pc

    units = []
    for piece in pieces:
        if piece is not None and piece.num_rows:
            units.append((piece, set(pc.unique(piece["run"]).to_pylist())))
    for source, groups in reads:
        file = _open_input(source)
        starts = _group_starts(file)
        ranges = _run_ranges(file, source)
        for group in groups:
            labels = {source.run} if source.run is not None else ranges[group]
            units.append(((file, source, group, int(starts[group])), labels))
    return units


def _run_ranges(file, source: _ParquetInput) -> list:
    """Per row group of a many-run table, the (min, max) of its run names from the
    column's statistics, or None where they cannot tell."""
    meta = file.metadata
    column = next((k for k, v in source.rename.items() if v == "run"), None)
    ranges = _string_ranges(meta, column) if column is not None else None
    return ranges if ranges is not None else [None] * meta.num_row_groups


def _string_ranges(meta, column: str) -> list | None:
    """Per row group the (min, max) of string ``column`` from its statistics (None for a
    group whose statistics cannot tell), or None when the column is not of strings."""
    import pyarrow as pa

    kind = meta.schema.to_arrow_schema().field(column).type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        return None
    if meta.num_row_groups == 0:
        return []
    first = meta.row_group(0)
    # the Parquet (leaf) column: a nested column before it has several
    index = next(i for i in range(first.num_columns) if first.column(i).path_in_schema == column)
    out = []
    for g in range(meta.num_row_groups):
        stats = meta.row_group(g).column(index).statistics
        ok = stats is not None and stats.has_min_max
        ok = ok and isinstance(stats.min, str) and isinstance(stats.max, str)
        out.append((stats.min, stats.max) if ok else None)
    return out


def _unit_rows(unit, wanted):
    """The rows of one unit (:func:`_read_units`) of the partition's queries
    (``wanted``): an Arrow table already split as it is, a row group read, checked and
    filtered."""
    import pyarrow.compute as pc

    if not isinstance(unit, tuple):
        return unit
    file, source, group, start = unit
    table = _read_group(file, source, group, start)
    query = table["query_id"]
    return table.filter(pc.is_in(query, value_set=wanted.cast(query.type)))


@dataclass
class _Plan:
    """The client's side of a Dask computation: the evaluated queries, the runs, the
    partitions (the local engine's) and one delayed kernel call per partition."""

    relevant: RelevantSet | None  # None once the tasks carry all that is needed
    names: list[str]
    measures: list
    parts: list[range]
    tasks: _Tasks
    #: whether tasks share the tasks splitting a table by partition (computed together)
    shared: bool = False

    @property
    def n_queries(self) -> int:
        return self.parts[-1].stop if self.parts else 0


class _Tasks:
    """The delayed :func:`_partition_task` of each partition, made when asked for
    (``tasks[k]``, ``tasks[a:b]``): the client holds one copy of the judgments, not one
    more split by partition in tasks waiting to be submitted.  The stretches of row
    groups a partition's task takes (:func:`_stretch_task`) are submitted with the first
    partition that takes one (``submit``: delayed -> future, set by the caller), and
    their results held until the last such partition is done (:meth:`done`): each
    stretch is read once."""

    def __init__(self, reads: list, qrels, call: tuple, options: dict):
        self.reads: list | None = reads
        self.qrels, self.call, self.options = qrels, call, options
        self.count = len(reads)
        #: (source, :class:`_Stretch`), the partitions' query ranges, and the stretch
        #: tasks' other arguments (run names, relevance level, max_docs, run files)
        self.stretches: list = []
        self.parts: list[range] = []
        self.reader: tuple = ()
        #: the text run files the workers read (:class:`_TextInput`), and the evaluated
        #: judgments they are reduced against
        self.texts: list = []
        self.relevant: RelevantSet | None = None
        #: delayed -> future, and data -> its future on every worker (set by the caller)
        self.submit: Callable | None = None
        self.scatter: Callable | None = None
        self.started: dict = {}
        self.read_texts: list | None = None
        self.judged: dict = {}  # the stretches' judgments, by their partitions
        self.last = {n: k for k, read in enumerate(reads) for n, _ in read[-1]}

    def __len__(self) -> int:
        return self.count

    def release(self) -> None:
        """Every task is submitted: let the judgments and the query ids go."""
        self.reads = self.qrels = self.relevant = None

    def done(self, k: int) -> None:
        """Partition ``k``'s result is taken: let go of the stretches no later
        partition takes."""
        gone = [self.started.pop(n, None) for n, last in self.last.items() if last == k]
        if k == self.count - 1 and self.read_texts:
            gone += self.read_texts
            self.read_texts = None
        gone += [self.judged.pop(ks) for ks in list(self.judged) if (ks or (0,))[-1] == k]
        for future in gone:
            if callable(getattr(type(future), "release", None)):  # a future, not delayed
                future.release()

    def _stretch(self, n: int):
        """Stretch ``n``'s task: submitted on first use (a future), else made (delayed)."""
        import dask

        if n not in self.started:
            source, stretch = self.stretches[n]
            names, level, *reader = self.reader
            ks = tuple(stretch.parts)
            if ks not in self.judged:  # one copy of the judgments per chain of queries
                rows = pd.concat([self.qrels(k) for k in ks or (0,)], ignore_index=True)
                task = dask.delayed(_judgments, pure=False)(rows if ks else rows.iloc[:0], level)
                self.judged[ks] = self._submitted(task)
            starts = np.cumsum([0] + [len(self.parts[k]) for k in ks])
            ranges = [range(int(a), int(b)) for a, b in zip(starts[:-1], starts[1:])]
            task = dask.delayed(_stretch_task, pure=False)(
                source, stretch.groups, self.judged[ks], ranges, names, *reader
            )
            self.started[n] = self._submitted(task)
        return self.started[n]

    def _texts(self) -> list:
        """The text run files' tasks (:func:`_text_positions`), submitted on first use:
        the judgments sent to every worker once, beforehand (a worker that fetched them
        from another, busy parsing, waited for them)."""
        import dask

        if self.read_texts is None and not self.texts:
            self.read_texts = []
        if self.read_texts is None:
            whole = self.relevant
            if self.scatter is not None:
                whole = self.scatter(whole)
            else:
                whole = dask.delayed(whole, traverse=False)  # one copy in the graph
            tasks = [
                dask.delayed(_text_positions)(source, whole, self.parts, self.reader[2])
                for source in self.texts
            ]
            self.read_texts = [self._submitted(task) for task in tasks] + [whole]
        return self.read_texts[:-1]

    def _submitted(self, task):
        """``task`` submitted (a future), or as it is without ``submit``."""
        return task if self.submit is None else self.submit(task)

    def __getitem__(self, k):
        import dask

        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        direct, pieces, queries, refs = self.reads[k]
        texts = [(text, k) for text in self._texts()]
        stretches = [(self._stretch(n), place) for n, place in refs]
        return dask.delayed(_partition_task)(
            direct, pieces, texts, queries, stretches, self.qrels(k), *self.call, **self.options
        )


def _qrels_by_partition(judged: Qrels, ids, parts: list[range]):
    """A function k -> the judgment rows of partition k's queries (``ids[part]``), in
    file order."""
    import pyarrow as pa
    import pyarrow.compute as pc

    rows = judged.frame[QRELS_COLUMNS]
    at = pc.index_in(pa.array(rows["query_id"], pa.string()), value_set=ids)
    at = np.asarray(at.fill_null(-1), dtype=np.int64)
    starts = np.array([part.start for part in parts] + [len(ids)], dtype=np.int64)
    part_of = np.where(at >= 0, np.searchsorted(starts, at, side="right") - 1, -1)
    order = np.argsort(part_of, kind="stable")  # by partition, in file order within
    cuts = np.searchsorted(part_of[order], np.arange(len(parts) + 1))
    del at, part_of

    def qrels(k: int) -> pd.DataFrame:
        return rows.iloc[order[cuts[k] : cuts[k + 1]]].reset_index(drop=True)

    return qrels


def _plan(judged: Qrels, runs, measures, relevance_level, pairs, notify, cells, **kernel) -> _Plan:
    """Read the judgments, name the runs and make the partitions' tasks (the runs are
    read by the workers: Parquet) or here (TREC text, sent with the tasks)."""
    import dask
    import pyarrow as pa

    relevant = relevant_with_notice(judged, relevance_level, notify)
    queries = list(relevant.query_ids)
    names, inputs, files = _run_inputs(runs)
    measure_list = parse_measures(measures, judged.has_subtopics)
    parts = query_ranges(len(queries), len(names), len(measure_list), pairs, cells)
    # text run files: read and reduced by the workers, one task each, split by partition
    texts = [x for x in inputs if isinstance(x, _TextInput)] if parts else []
    # other text runs (streams, read here) split by partition here
    ids = pa.array(queries, pa.string())
    part_of = np.repeat(np.arange(len(parts)), [len(p) for p in parts])
    local: list[list] = [[] for _ in parts]
    for table in (x for x in inputs if isinstance(x, pa.Table)):
        for k, piece in enumerate(_split(table, ids, part_of, len(parts))):
            if piece is not None:
                local[k].append(piece)
    # Parquet inputs read by the workers: a table laid out by query, by each partition's
    # task (the row groups its queries may be in; those of no partition's queries by the
    # first, for their checks); another, row groups at a time, split by partition
    direct: list[list] = [[] for _ in parts]
    splits = []
    stretches: list = []  # (source, _Stretch): each read by a task of its own
    refs: list[list] = [[] for _ in parts]  # per partition: (stretch, its place there)
    lookup = dask.delayed((ids, part_of), pure=True)  # one copy in the graph
    for source in (x for x in inputs if isinstance(x, _ParquetInput)):
        groups = _row_groups(source, parts, queries)
        if groups is not None and groups[2] is not None and parts:
            for stretch in groups[2]:
                for place, k in enumerate(stretch.parts):
                    refs[k].append((len(stretches), place))
                if not stretch.parts:  # the queries of no partition: for its checks
                    refs[0].append((len(stretches), None))
                stretches.append((source, stretch))
            continue
        if groups is not None:
            chosen, unread, _ = groups
            for k in range(len(parts)):
                if chosen[k]:
                    direct[k].append((source, chosen[k]))
            if unread and parts:
                direct[0].append((source, unread))
            continue
        count = _open_input(source).metadata.num_row_groups
        for lo in range(0, count, SPLIT_GROUPS):
            groups = list(range(lo, min(count, lo + SPLIT_GROUPS)))
            splits.append(dask.delayed(_split_groups)(source, groups, lookup, len(parts)))
    reads = [
        (
            direct[k],
            local[k] + [dask.delayed(operator.getitem)(split, k) for split in splits],
            queries[part.start : part.stop],
            refs[k],
        )
        for k, part in enumerate(parts)
    ]
    kernel["run_files"] = files
    options = dict(
        relevance_level=relevance_level,
        pairs=pairs,
        has_subtopics=judged.has_subtopics,
        sum_block=ties.SUM_BLOCK,  # the client's: the blocks the partitions are made of
        **kernel,
    )
    call = (names, [m.name for m in measure_list])
    reader = (relevance_level, kernel["max_docs"], files)
    tasks = _Tasks(reads, _qrels_by_partition(judged, ids, parts), call, options)
    tasks.stretches, tasks.reader, tasks.parts = stretches, (names, *reader), parts
    tasks.texts, tasks.relevant = texts, relevant if texts else None
    return _Plan(relevant, names, measure_list, parts, tasks, shared=bool(splits or texts))


#: win rates of one measure (queries x runs) from which the Dask client keeps them in a
#: temporary file while the partitions come in (the workers' memory is then in use)
SPILL_SCORES = 1 << 23

#: environment of the local cluster's worker processes, set before they start: glibc's
#: mmap threshold held fixed, as :func:`~prefeval.engine.memory.map_large_allocations` does in
#: compare's client, so that the arrays a task frees go back to the system
WORKER_ENV = {"MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD)}

#: the Dask resource of the local cluster's workers made for ``compare -q``: as many
#: as the threads Dask would give a worker, one taken by each task of a partition, so
#: that the worker's one thread more is left for fetching results
PARTITION_SLOT = "prefeval-partition"

#: seconds a ``--scheduler`` address has to accept the connection and answer as Dask
CONNECT_SECONDS = 15
#: seconds a ``--scheduler`` without workers has for one to join (tasks would wait for ever)
WORKER_SECONDS = 15


def _client(scheduler: str | None, fetcher: bool = False):
    """A client of the scheduler at ``scheduler``, or of a new local cluster; with
    ``fetcher``, whose workers have a thread more than partition slots (for
    :func:`_partition_results` with ``pieces``)."""
    from distributed import Client

    if scheduler is not None and not scheduler.strip():
        raise ValueError("--scheduler: an empty address")
    try:
        if scheduler:
            client = _bounded(lambda: _connected(Client, scheduler))
            return _with_a_worker(client, scheduler)
        # Dask's own choice of processes and threads; with ``fetcher`` one thread more
        # per worker, which no partition takes: it hands a finished partition's rows to
        # the client while the partition slots compute the next ones (only then: an idle
        # thread raises every worker's peak; the 1M-user Dask cases of bench/RESULTS.md)
        from distributed.deploy.utils import nprocesses_nthreads

        workers, threads = nprocesses_nthreads()
        needed = limits.CLUSTER_FILES + limits.WORKER_FILES * workers
        limits.open_files(needed, f"--engine dask (a local cluster of {workers} workers)")
        slots = {"threads_per_worker": threads}
        if fetcher:
            slots = {"threads_per_worker": threads + 1, "resources": {PARTITION_SLOT: threads}}
        # started whole (a signal meanwhile is held, then handled with the cluster
        # closed): one interrupted while it starts left its processes writing in the
        # folder removed meanwhile, and failed an assertion at exit
        held = SignalsHeld()
        with held:
            client = _local_client(workers, slots)
        try:
            held.deliver()
        except BaseException:
            _close(client, True)
            raise
        return client
    except _NoWorkers as error:
        raise ValueError(str(error)) from None
    except Exception as error:  # Dask's own errors for a bad address or answer, too
        if not scheduler:
            if isinstance(error, (SystemLimitError, MemoryError)):
                raise
            # a worker process that cannot start (a process or memory limit...)
            raise SystemLimitError(f"cannot start a local Dask cluster ({error})") from None
        detail = str(error) or type(error).__name__  # Dask's timeouts come without a text
        raise ValueError(f"--scheduler {scheduler}: cannot connect ({detail})") from None


def _local_client(workers: int, slots: dict):
    """A client of a new local cluster of ``workers`` processes (``slots``: their threads
    and resources), whose scratch space is a :class:`~prefeval.io.writers.TemporaryFolder`
    of its own, removed with the cluster (:func:`_close`)."""
    import dask
    from distributed import Client, LocalCluster

    environ = {f"distributed.nanny.pre-spawn-environ.{k}": v for k, v in WORKER_ENV.items()}
    # the workers' scratch space (and Dask's lock files beside it) in a folder of the
    # command's own, not left in $TMPDIR
    scratch = TemporaryFolder("dask")
    cluster = None
    try:
        # the workers share the command's stderr: their log of a failed task (an input
        # error, raised again here) would print a traceback beside its message; a
        # dashboard on any free port (the default 8787 may be taken: a warning)
        with dask.config.set({**environ, "temporary-directory": scratch.name}):
            cluster = LocalCluster(
                n_workers=workers,
                **slots,
                processes=True,
                dashboard_address=":0",
                silence_logs=logging.CRITICAL,
            )
        cluster.prefeval_scratch = scratch  # type: ignore[attr-defined]  # ours, closed with it
        # the scheduler's tasks run on this loop: what an interruption leaves them
        # (a request cut short) is as silent as the cluster's logs
        loop = cluster.loop
        assert loop is not None  # a started cluster's
        loop.asyncio_loop.set_exception_handler(_quiet)  # type: ignore[attr-defined]
        return Client(cluster)
    except BaseException:
        if cluster is not None:
            cluster.close()
        scratch.cleanup()
        raise


def _quiet(loop, context) -> None:
    """The exception handler of the event loop of a local cluster: nothing is printed."""


#: tasks per worker thread that :meth:`DaskEngine.blocks` makes of its items (a few, so
#: that a thread done early takes another)
BLOCK_TASKS = 4


def _block_task(work, shared, items) -> list:
    """On a worker: ``work(shared, item)`` for each of ``items``."""
    return [work(shared, item) for item in items]


class _NoWorkers(Exception):
    """The scheduler has no worker (and none joined in time)."""


def _with_a_worker(client, scheduler: str):
    """``client`` once its scheduler has a worker; else (none within
    :data:`WORKER_SECONDS`) the client closed and :class:`_NoWorkers`."""
    try:
        client.wait_for_workers(1, timeout=WORKER_SECONDS)
    except TimeoutError:
        client.close()
        raise _NoWorkers(
            f"--scheduler {scheduler}: the scheduler has no workers (none joined within "
            f"{WORKER_SECONDS} s)"
        ) from None
    return client


def _connected(client_class, scheduler: str):
    """A ``client_class`` (distributed's Client) of ``scheduler``, connected again
    while distributed's own checks of a connection in the making fail, until
    :data:`CONNECT_SECONDS` have passed.  Those checks are assertions, whose error has
    no text (the command said "cannot connect (AssertionError)"): that the thread of
    the client's event loop started within 10 s, and that the scheduler's first answer
    is its one "stream-start" message.  On a loaded machine a live scheduler failed
    one of them (a test of ``tests/engine/test_dask.py`` under ``pytest -n 2``, 3 runs
    in 40); an address that does not answer, or answers otherwise, fails with an
    error of its own."""
    deadline = time.monotonic() + CONNECT_SECONDS
    while True:
        try:
            return client_class(scheduler, timeout=f"{CONNECT_SECONDS}s")
        except AssertionError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.1)


def _bounded(connect):
    """``connect()`` within :data:`CONNECT_SECONDS`: Dask bounds the
    TCP connection but not the handshake after it, so an address that accepts and never
    answers (not a Dask scheduler) would hang the command.  The attempt left behind runs
    in a daemon thread, which does not keep the process alive."""

    got: list = []

    def attempt():
        try:
            got.append((True, connect()))
        except BaseException as error:  # handed to the caller
            got.append((False, error))

    thread = threading.Thread(target=attempt, name="prefeval-connect", daemon=True)
    thread.start()
    thread.join(CONNECT_SECONDS)
    if not got:
        raise TimeoutError(f"no answer from a Dask scheduler within {CONNECT_SECONDS} s")
    ok, value = got[0]
    if not ok:
        raise value
    return value


def _partition_results(
    plan: _Plan, client, own_cluster, notify, progress=False, pieces: bool = False, done=None
) -> Generator:
    """Run the tasks on ``client`` (at the end, ``done()``; without it the client is
    closed, and its cluster with ``own_cluster``); yield their :class:`PartitionResult`
    in partition order, each as it is needed, then tell which runs had no results for
    some queries (as the local engine does).  With ``pieces``, a result's ``frame`` is
    an iterator of its per-query rows fetched from the worker a row group at a time, to
    be read before the next result is asked for: the client never holds a whole
    partition's rows."""

    slot = None

    def submit(tasks):
        with warnings.catch_warnings():
            # text runs are parsed here and travel in the graph: Dask's advice to load
            # them on the workers is no news to the user of a command
            warnings.filterwarnings("ignore", "Sending large graph", UserWarning)
            return client.compute(tasks, resources=slot)

    try:
        workers = client.scheduler_info().get("workers", {})
        # on our own cluster made for fetching pieces (see _client), every task of a
        # partition (its reading and splitting too) takes a slot, as the workers tell:
        # a slot no worker has would leave the tasks waiting for ever
        if own_cluster and _has_slots(workers):
            slot = {PARTITION_SLOT: 1}
        # a few partitions ahead of the one written: results wait in the workers'
        # memory for their turn (tasks that share the splitting of a table go together);
        # a partition's per-query rows, fetched in pieces, are held by its worker while
        # it computes the next one: one each, not two
        ahead = len(plan.tasks)
        if not plan.shared:
            ahead = max(1, len(workers)) * (1 if pieces else 2)
        plan.tasks.submit = submit  # each stretch of row groups on its first use
        plan.tasks.scatter = lambda data: client.scatter(data, broadcast=True, hash=False)
        futures = deque(submit(plan.tasks[:ahead]))
        if ahead >= len(plan.tasks):
            plan.tasks.release()
        missing: dict[str, int] = {}
        for k in progress_bar(
            range(len(plan.tasks)), desc="partitions", unit="partition", enable=progress
        ):
            future = futures.popleft()
            if k + ahead < len(plan.tasks):
                futures.append(submit(plan.tasks[k + ahead]))
                if k + ahead == len(plan.tasks) - 1:
                    plan.tasks.release()
            if pieces:
                result, rows = client.submit(_without_rows, future).result()
                result.frame = _rows_in_pieces(client, future, rows)
            else:
                result = future.result()
            plan.tasks.done(k)
            for name, count in result.missing.items():
                missing[name] = missing.get(name, 0) + count
            yield result
            future.release()
        if notify is not None:
            for name in plan.names:
                if missing.get(name):
                    notify(missing_notice(name, missing[name], plan.n_queries))
    finally:
        if done is not None:
            done()
        else:
            _close(client, own_cluster)


def _close(client, own_cluster: bool) -> None:
    """Close ``client``, and its cluster with ``own_cluster`` (then its scratch folder,
    once no process of the cluster writes there), whole: a signal meanwhile is handled
    once they are closed."""
    held = SignalsHeld()
    with held:
        cluster = client.cluster
        client.close()
        if cluster is not None and own_cluster:
            cluster.close()
            scratch = getattr(cluster, "prefeval_scratch", None)
            if scratch is not None:
                scratch.cleanup()
    held.deliver()


def _has_slots(workers: dict) -> bool:
    """Whether there are ``workers`` (the scheduler's information on each) and every one
    has :data:`PARTITION_SLOT`."""
    found = [PARTITION_SLOT in w.get("resources", {}) for w in workers.values()]
    return bool(found) and all(found)


def _without_rows(result: PartitionResult) -> tuple[PartitionResult, int]:
    """On the worker: ``result`` without its per-query rows, and their number."""
    rows = 0 if result.frame is None else len(result.frame)
    return replace(result, frame=None), rows


def _rows_of(result: PartitionResult, lo: int, hi: int) -> pd.DataFrame:
    """On the worker: rows ``lo:hi`` of ``result``'s per-query rows."""
    assert result.frame is not None  # asked for: compare's per-query rows
    return result.frame.iloc[lo:hi]


def _rows_in_pieces(client, future, rows: int) -> Iterator[pd.DataFrame]:
    """The rows of ``future``'s result, one piece per row group of the output
    (:func:`~prefeval.io.writers.row_groups`, so that the file is the local engine's, row
    group for row group; one empty piece for no rows), the next one asked for while this
    one is written."""
    pieces: deque = deque()
    for lo, hi in row_groups(rows):
        pieces.append(client.submit(_rows_of, future, lo, hi))
        if len(pieces) == 2:
            yield _taken(pieces.popleft())
    while pieces:
        yield _taken(pieces.popleft())


def _taken(piece):
    rows = piece.result()
    piece.release()
    return rows


class DaskEngine:
    """The Dask engine: the local engine's partitions, one task each on a Dask cluster
    (``scheduler``, default a local cluster with the workers Dask chooses),
    computed by the kernel (:func:`compare_partition`'s) and brought back in query order,
    a partition's per-query rows fetched in pieces (:func:`_rows_in_pieces`); blocks of
    other work (:meth:`blocks`) on the same workers.  The cache is not used.  ValueError
    when the scheduler cannot be reached.  The client (and the cluster it made) is
    closed once a call's results are all given, or, in a ``with`` block, at its end."""

    def __init__(self, scheduler: str | None = None):
        self.scheduler = scheduler
        self._held = 0
        self._client = None

    def __enter__(self) -> DaskEngine:
        self._held += 1
        return self

    def __exit__(self, *exc) -> None:
        self._held -= 1
        self._release()

    def _connect(self, fetcher: bool = False):
        """The client: the one held, else a new one (:func:`_client`)."""
        if self._client is None:
            self._client = _client(self.scheduler, fetcher=fetcher)
        return self._client

    def _release(self) -> None:
        """The client closed (and its cluster, when it made one), unless held."""
        if not self._held and self._client is not None:
            client, self._client = self._client, None
            _close(client, not self.scheduler)

    def blocks(self, work, shared, items, *, threads: int = 1, ready=()) -> Iterator:
        """``work(shared, item)`` for each of ``items`` on the workers, the results in the
        items' order: ``shared`` sent to every worker once (scattered, broadcast), the
        items in about :data:`BLOCK_TASKS` tasks per worker thread, consecutive items
        together (each task a list of results); ``threads`` and ``ready`` are the local
        engine's (the work gets ready on the workers)."""
        items = list(items)
        if not items:
            return
        client = self._connect()
        try:
            slots = sum(client.nthreads().values())  # the workers' threads
            tasks = max(1, min(len(items), BLOCK_TASKS * max(1, slots)))
            cuts = np.linspace(0, len(items), tasks + 1).astype(np.int64)
            [data] = client.scatter([shared], broadcast=True, hash=False)
            futures = [
                client.submit(_block_task, work, data, items[lo:hi], pure=False)
                for lo, hi in zip(cuts[:-1], cuts[1:])
            ]
            for future in futures:
                yield from future.result()
                future.release()
            data.release()  # the workers' copies
        finally:
            self._release()

    def prepare(self) -> None:
        """The client's memory handed back as it is freed (glibc's mmap threshold held
        fixed: :func:`~prefeval.engine.memory.map_large_allocations`), before anything
        is read."""
        map_large_allocations()

    def partitions(self, job: Job, want: Want) -> Partitions:
        options = job.options
        assert job.qrels is not None  # let go below, once the tasks carry them
        plan = _plan(
            job.qrels, job.runs, [m.name for m in job.measures], options.relevance_level,
            job.pairs, job.notify, options.partition_cells, max_docs=options.max_docs,
            binary=options.binary, per_query=want.rows, both_directions=want.both_directions,
            plain=False, values=want.values, rates=want.rates, signs=want.signs,
            positions=want.positions,
        )  # fmt: skip
        if want.rows:
            job.qrels = None  # the tasks carry their judgments; the client needs none
        relevant = plan.relevant
        assert relevant is not None  # the plan's, until the tasks carry it
        measures = [m.name for m in plan.measures]
        chosen = run_pairs(len(plan.names), job.pairs)
        schema = summary_schema(
            measures, plan.names, relevant.query_ids, plan.parts, chosen, want.both_directions
        )
        spill = relevant.n_queries * len(plan.names) >= SPILL_SCORES
        if want.rows:
            plan.relevant = relevant = None  # compare needs no more than the tasks carry
        # connected now: a scheduler that cannot be reached is an error of this call
        client = self._connect(fetcher=want.rows)
        results = _partition_results(
            plan, client, not self.scheduler, job.notify, options.progress, want.rows,
            done=self._release,
        )  # fmt: skip
        return Partitions(
            relevant, plan.names, measures, chosen, plan.parts, schema, results, spill=spill
        )


@dataclass
class _ParquetInput:
    """A Parquet run file, or a table of many runs, that the workers read: its path, its
    columns (file name -> kernel name) and, for a single run, the run's name."""

    path: str
    rename: dict
    run: str | None
    #: the path as given, which messages cite (as the local engine's do)
    shown: str = ""


@dataclass
class _TextInput:
    """A TREC text run file (plain or gzip) that a worker reads: its absolute path, the
    path as given (which messages cite), the run's name and kind."""

    path: str
    shown: str
    name: str
    kind: str


def _run_inputs(runs) -> tuple[list[str], list, dict]:
    """The run names (of the :class:`~prefeval.io.runs.RunSet` of ``runs``: a many-run
    table's in sorted order), the inputs: a :class:`_ParquetInput` per Parquet file (only
    its footer read here, from the bytes the run set holds), a :class:`_TextInput` per
    text run file, an Arrow table ``run, query_id, doc_id, score`` per other run (read
    here with prefeval's reader); and per
    run read from Parquet its file and whether the file holds many runs (for the kernel's
    messages).  Standard input and other streams
    (:func:`prefeval.io.source.is_stream`) are read here, never by path on a worker."""
    import pyarrow as pa

    named = resolve_runs(runs)
    inputs: list = []
    files: dict[str, tuple[str, bool]] = {}
    read: set[str] = set()
    for name, run in named.items():
        if run.kind in ("parquet", "table") and not is_stream(run.path):
            table = run.path
            path = os.path.abspath(table)  # workers may run elsewhere: an absolute path
            files[name] = (table, run.kind == "table")  # for messages
            if run.kind == "table":
                if table in read:  # a many-run table: read once, for all its runs
                    continue
                read.add(table)
            columns = parquet.open_parquet(table, run.data).schema_arrow.names
            rename = {
                parquet.need_column(columns, parquet.QUERY, table, parquet.RUN_COLUMNS): "query_id",
                parquet.need_column(columns, parquet.DOC, table, parquet.RUN_COLUMNS): "doc_id",
                parquet.need_column(columns, parquet.SCORE, table, parquet.RUN_COLUMNS): "score",
            }
            column = parquet.find_column(columns, parquet.RUN, table)
            if column is not None:
                rename[column] = "run"
            inputs.append(_ParquetInput(path, rename, None if column is not None else name, table))
            continue
        if run.kind in ("text", "gzip") and not is_stream(run.path) and run.error is None:
            # read by the workers: the client neither parses nor sends the rows
            inputs.append(_TextInput(os.path.abspath(run.path), run.path, name, run.kind))
            continue
        columns = run.read()
        inputs.append(
            pa.table(
                {
                    "run": pa.array([name] * len(columns), pa.string()),
                    "query_id": columns.query_id,
                    "doc_id": columns.doc_id,
                    "score": pa.array(np.asarray(columns.score, dtype=float)),
                }
            )
        )
    return list(named), inputs, files


def _open_input(source: _ParquetInput):
    """The ParquetFile of ``source`` (by its absolute path); an unreadable one is an input
    error citing the path as given."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(source.path)
    except (pa.ArrowException, OSError, ValueError) as error:
        raise parquet.unreadable(source.shown or source.path, error) from None


def _row_groups(source: _ParquetInput, parts: list[range], queries: list[str]):
    """(per partition the row groups of ``source`` that may hold its queries, the row
    groups that hold none of them, the row groups in :func:`_stretches` or None where
    a stretch would hold more rows than a partition reads), from the row groups'
    statistics of the query column (string min and max; the partition's smallest and
    largest id in the same byte order); None when the statistics cannot tell (not
    strings, missing) or when the partitions would read the table's rows more than
    :data:`DIRECT_READS` times over in all: a table not laid out by query, split by
    partition instead."""
    file = _open_input(source)
    meta = file.metadata
    column = next(k for k, v in source.rename.items() if v == "query_id")
    ranges = _string_ranges(meta, column)
    if ranges is None:
        return None
    rows = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
    if any(rows[g] and ranges[g] is None for g in range(len(rows))):
        return None
    # a group with rows has its range (checked above)
    lows: list[Any] = [r[0] if r is not None else None for r in ranges]
    highs: list[Any] = [r[1] if r is not None else None for r in ranges]
    chosen, total, read = [], 0, set()
    for part in parts:
        ids = queries[part.start : part.stop]
        lo, hi = min(ids), max(ids)  # str order is UTF-8 byte order, Parquet's
        groups = [g for g in range(len(rows)) if rows[g] and lows[g] <= hi and highs[g] >= lo]
        total += sum(rows[g] for g in groups)
        read.update(groups)
        chosen.append(groups)
    unread = [g for g in range(len(rows)) if g not in read]
    total += sum(rows[g] for g in unread)
    if total > DIRECT_READS * max(1, sum(rows)):
        return None
    stretches = _stretches(rows, lows, highs, queries, parts, _run_ranges(file, source))
    most = max((sum(rows[g] for g in groups) for groups in chosen), default=0)
    if any(sum(rows[g] for g in stretch.groups) > most for stretch in stretches):
        return chosen, unread, None  # rows of a query in every row group (groups cut inside)
    return chosen, unread, stretches


@dataclass
class _Stretch:
    """Row groups of a Parquet input whose query ranges chain by overlap, so that every
    row of a query in their range is in them: read by one task (:func:`_stretch_task`),
    for the partitions whose queries they may hold (``parts``, their indices in order;
    none: read for the checks only)."""

    groups: list[int]
    parts: list[int]


def _stretches(
    rows: list[int], lows: list, highs: list, queries: list[str], parts, runs: list | None = None
) -> list:
    """The row groups with rows (``rows``, query ids from ``lows`` to ``highs``) in
    :class:`_Stretch` es, each with the partitions of ``parts`` (ranges of ``queries``)
    whose queries are in its range, in file order: the groups whose query ranges chain,
    split where their runs (``runs``: per group the (lowest, highest) run name, None
    where unknown) do not chain, so that each run's rows of those queries are in one."""
    chains = _chained([g for g in range(len(rows)) if rows[g]], lows, highs)
    touched: list[list[int]] = [[] for _ in chains]
    if chains and parts:
        by_low = sorted(range(len(chains)), key=lambda u: lows[chains[u][0]])
        low = [min(lows[g] for g in chains[u]) for u in by_low]
        high = [max(highs[g] for g in chains[u]) for u in by_low]
        ids = np.array(queries, dtype=object)  # compared as Python str: UTF-8 byte order
        at = np.searchsorted(np.array(low + [None], dtype=object)[:-1], ids, side="right") - 1
        inside = np.flatnonzero(at >= 0)
        ends = np.array([high[u] for u in at[inside]] + [None], dtype=object)[:-1]
        inside = inside[np.asarray(ids[inside] <= ends, dtype=bool)]
        part_of = np.repeat(np.arange(len(parts)), [len(p) for p in parts])
        owner = np.asarray(by_low, dtype=np.int64)[at[inside]]
        for key in np.unique(owner * len(parts) + part_of[inside]).tolist():
            touched[key // len(parts)].append(key % len(parts))
    out = []
    for chain, found in zip(chains, touched):
        split = [chain]
        if runs is not None and all(runs[g] is not None for g in chain):
            split = _chained(chain, [runs[g][0] for g in chain], [runs[g][1] for g in chain], chain)
        out += [_Stretch(groups, found) for groups in split]
    return sorted(out, key=lambda stretch: stretch.groups[0])


def _chained(groups: list[int], lows: list, highs: list, index: list | None = None) -> list:
    """``groups`` in chains of overlapping ranges (from ``lows`` to ``highs``, by group,
    or by place in ``index``), each in file order, the chains by their first group."""
    at = {g: g for g in groups} if index is None else {g: i for i, g in enumerate(index)}
    chains: list = []  # [highest, groups], by lowest
    for g in sorted(groups, key=lambda g: lows[at[g]]):
        if chains and lows[at[g]] <= chains[-1][0]:
            chains[-1][0] = max(chains[-1][0], highs[at[g]])
            chains[-1][1].append(g)
        else:
            chains.append([highs[at[g]], [g]])
    return sorted((sorted(chain) for _, chain in chains), key=lambda chain: chain[0])


#: how many times over the partitions may read a Parquet table's rows in all before it
#: is split by partition instead (a table not laid out by query)
DIRECT_READS = 4
#: row groups a task of a table split by partition reads
SPLIT_GROUPS = 16


def _read_group(file, source: _ParquetInput, group: int, start: int):
    """Row group ``group`` of ``source`` (its first row ``start`` in the file) as an
    Arrow table ``run, query_id, doc_id, score, row``, checked as the local reader checks
    it: errors cite the file and its row (``row``: 0-based row in the file)."""
    import pyarrow as pa

    names = {v: k for k, v in source.rename.items()}
    try:
        raw = file.read_row_group(group, columns=list(source.rename))
    except (pa.ArrowException, OSError, ValueError) as error:
        raise parquet.unreadable(source.shown or source.path, error) from None
    where: dict[str, Any] = dict(path=source.shown or source.path, offset=start)
    query = parquet.ids(raw[names["query_id"]], "query id", name=names["query_id"], **where)
    run = (
        parquet.ids(raw[names["run"]], "run name", name=names["run"], **where)
        if source.run is None
        else pa.array([source.run] * len(raw), pa.string())
    )
    doc = parquet.ids(raw[names["doc_id"]], "document id", name=names["doc_id"], **where)
    score = parquet.numbers(raw[names["score"]], "score", name=names["score"], **where)
    row = pa.array(np.arange(start, start + len(raw), dtype=np.int64))
    return pa.table({"run": run, "query_id": query, "doc_id": doc, "score": score, "row": row})


def _group_starts(file) -> np.ndarray:
    meta = file.metadata
    sizes = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
    return np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])


def _split(table, ids, part_of: np.ndarray, n_parts: int) -> list:
    """The rows of ``table`` per partition (None where none), in their order; rows of
    queries not evaluated (not in ``ids``) dropped."""
    import pyarrow.compute as pc

    at = pc.index_in(table["query_id"], value_set=ids.cast(table["query_id"].type))
    at = at.to_numpy(zero_copy_only=False)
    code = np.where(np.isnan(at), -1, part_of[np.nan_to_num(at).astype(np.int64)])
    order = np.argsort(code, kind="stable")
    bounds = np.searchsorted(code[order], np.arange(n_parts + 1))
    return [
        table.take(order[bounds[k] : bounds[k + 1]]) if bounds[k + 1] > bounds[k] else None
        for k in range(n_parts)
    ]


def _split_groups(source: _ParquetInput, groups: list[int], lookup, n_parts: int) -> list:
    """Row groups ``groups`` of a table not laid out by query (on a worker), checked and
    split by partition: a list of one Arrow table (or None) per partition."""
    import pyarrow as pa

    ids, part_of = lookup
    file = _open_input(source)
    starts = _group_starts(file)
    pieces: list[list] = [[] for _ in range(n_parts)]
    for group in groups:
        table = _read_group(file, source, group, int(starts[group]))
        for k, piece in enumerate(_split(table, ids, part_of, n_parts)):
            if piece is not None:
                pieces[k].append(piece)
    return [pa.concat_tables(p) if p else None for p in pieces]
