"""What a Dask worker reads: the tasks that read a partition's runs (Parquet row groups,
text files by path, a table split by partition) and reduce them to rank positions before
the kernel (:mod:`.kernel`) compares them, and the inputs the client describes for them."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ...core.errors import InputError
from ...core.positions import RunPositions, join_positions, run_positions
from ...io import parquet
from ...io.runs import Run, resolve_runs
from ...io.source import is_stream, stored
from .. import runtime
from ..job import PartitionResult
from ..local import reduce_run
from .kernel import arrow_run, earliest, kernel_result, partition_relevant


def partition_task(
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
    :func:`text_task` gave back, this partition's place in it), the positions of
    the text runs read by path on the workers (or the error of the first that cannot be
    read, in run order), and on the ``stretches``: (what a
    :func:`stretch_task` gave back, this partition's place in it, None for a stretch
    of none of its queries), the positions of the Parquet runs read by stretches of row
    groups, each read once (the error of the first stretch that cannot be read, else of
    the document met twice earliest in the file)."""
    import pyarrow as pa

    relevant = partition_relevant(qrels_rows, relevance_level)
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
    earliest(problems)
    runtime.after_reading()  # the rows read: freed, handed back before computing
    runs = [reduced.pop(name) for name in run_names]
    result = kernel_result(relevant, runs, run_names, measures, **options)
    del runs
    runtime.after_partition()  # and the cube's: the result may wait here for its turn
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
        columns = arrow_run(table, name, files, problems)
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
    """What a :func:`stretch_task` gives back for rows it cannot take: the error, and
    for a document met twice its 0-based row in the file (None: an error met reading)."""

    error: InputError
    row: int | None = None


def stretch_task(
    source: ParquetInput,
    groups: list[int],
    relevant,
    parts: list[range],
    run_names: list[str],
    max_docs,
    run_files: dict,
) -> list | _Flawed:
    """One Dask task per stretch of row groups (:func:`_stretches`): its groups read
    and checked here, once, each run reduced against ``relevant``, the judgments of the
    partitions whose queries the stretch may hold (:func:`worker_judgments`; ``parts``: the
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


def text_task(source: TextInput, relevant, parts: list[range], max_docs) -> list:
    """On a worker: the text run ``source`` read by path and reduced against the whole
    evaluated judgments ``relevant`` (as the local engine reduces it), split by partition
    of ``parts``: per partition its :class:`~prefeval.core.positions.RunPositions`, the
    documents numbered from 0 in the partition; or, for a run that cannot be read, the
    :class:`~prefeval.core.errors.InputError` the local engine raises, as a value (the
    partitions raise the first in run order)."""
    try:
        run = Run(source.name, source.kind, source.shown, stored(source.path))
        positions = reduce_run(run, relevant, max_docs)
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
        file = open_input(source)
        starts = _group_starts(file)
        ranges = _run_ranges(file, source)
        for group in groups:
            labels = {source.run} if source.run is not None else ranges[group]
            units.append(((file, source, group, int(starts[group])), labels))
    return units


def _run_ranges(file, source: ParquetInput) -> list:
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
class ParquetInput:
    """A Parquet run file, or a table of many runs, that the workers read: its path, its
    columns (file name -> kernel name) and, for a single run, the run's name."""

    path: str
    rename: dict
    run: str | None
    #: the path as given, which messages cite (as the local engine's do)
    shown: str = ""


@dataclass
class TextInput:
    """A TREC text run file (plain or gzip) that a worker reads: its absolute path, the
    path as given (which messages cite), the run's name and kind."""

    path: str
    shown: str
    name: str
    kind: str


def run_inputs(runs) -> tuple[list[str], list, dict]:
    """The run names (of the :class:`~prefeval.io.runs.RunSet` of ``runs``: a many-run
    table's in sorted order), the inputs: a :class:`ParquetInput` per Parquet file (only
    its footer read here, from the bytes the run set holds), a :class:`TextInput` per
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
            inputs.append(ParquetInput(path, rename, None if column is not None else name, table))
            continue
        if run.kind in ("text", "gzip") and not is_stream(run.path) and run.error is None:
            # read by the workers: the client neither parses nor sends the rows
            inputs.append(TextInput(os.path.abspath(run.path), run.path, name, run.kind))
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


def open_input(source: ParquetInput):
    """The ParquetFile of ``source`` (by its absolute path); an unreadable one is an input
    error citing the path as given."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(source.path)
    except (pa.ArrowException, OSError, ValueError) as error:
        raise parquet.unreadable(source.shown or source.path, error) from None


def groups_by_partition(source: ParquetInput, parts: list[range], queries: list[str]):
    """(per partition the row groups of ``source`` that may hold its queries, the row
    groups that hold none of them, the row groups in :func:`_stretches` or None where
    a stretch would hold more rows than a partition reads), from the row groups'
    statistics of the query column (string min and max; the partition's smallest and
    largest id in the same byte order); None when the statistics cannot tell (not
    strings, missing) or when the partitions would read the table's rows more than
    :data:`DIRECT_READS` times over in all: a table not laid out by query, split by
    partition instead."""
    file = open_input(source)
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
    row of a query in their range is in them: read by one task (:func:`stretch_task`),
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


def _read_group(file, source: ParquetInput, group: int, start: int):
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


def split_table(table, ids, part_of: np.ndarray, n_parts: int) -> list:
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


def split_groups(source: ParquetInput, groups: list[int], lookup, n_parts: int) -> list:
    """Row groups ``groups`` of a table not laid out by query (on a worker), checked and
    split by partition: a list of one Arrow table (or None) per partition."""
    import pyarrow as pa

    ids, part_of = lookup
    file = open_input(source)
    starts = _group_starts(file)
    pieces: list[list] = [[] for _ in range(n_parts)]
    for group in groups:
        table = _read_group(file, source, group, int(starts[group]))
        for k, piece in enumerate(split_table(table, ids, part_of, n_parts)):
            if piece is not None:
                pieces[k].append(piece)
    return [pa.concat_tables(p) if p else None for p in pieces]
