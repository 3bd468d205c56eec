"""Parquet runs, qrels and tables, read with pyarrow.parquet.

A file is Parquet when it starts and ends with the magic bytes ``PAR1`` (whatever
its name), as a gzip file is recognized by its own magic bytes; a gzip-compressed
Parquet file is an error (Parquet compresses its columns itself).  Only the columns
needed are read.  Columns are found by name: ir-measures' ``query_id, doc_id,
score`` / ``relevance[, iteration]`` or PyTerrier's ``qid, docno, score`` /
``label``; a ``run`` (or ``name``) column makes a table of many runs.

Values mean what they mean in a TREC text file, whatever the physical layout: ids
are strings as the text reader sees them (plain or dictionary-encoded strings as
they are, integers as their decimal text, see :func:`prefeval.io.columns.id_strings`);
scores and grades are widened to float64 exactly (a float32 score is the same
number, so the ranking is the one of any exact decimal text of it); row order and
row groups change nothing.  Problems are reported as ``FILE: row N: ...`` (rows
counted from 1, as the data rows of a text table) or ``FILE: column X: ...``.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..core import limits
from ..core.arrays import small_strings
from ..core.errors import InputError
from ..core.positions import join_positions, reduce_rows, run_positions, set_like
from .columns import (
    DOC,
    GRADE,
    ITERATION,
    QUERY,
    RUN,
    SCORE,
    FirstError,
    RunColumns,
    dictionary_codes,
    dictionary_codes_with,
    duplicate_message,
    id_strings,
    qrels_rows,
)
from .source import StoredFile, is_stream, read_raw
from .spill import STREAMING, judged_codes, spilled_runs


def _file(data, path: str, dictionary: tuple = ()):
    """The ParquetFile of a file's stored bytes (bytes, not copied, or a
    :class:`~prefeval.io.source.StoredFile`, read as Arrow asks); the string columns
    ``dictionary`` are read as Arrow dictionaries (as they are stored)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if isinstance(data, StoredFile):
        source = pa.PythonFile(data.reader(), mode="r")
    else:
        source = pa.BufferReader(pa.py_buffer(data))
    try:
        return pq.ParquetFile(source, read_dictionary=list(dictionary) or None)
    except (pa.ArrowException, OSError, ValueError) as error:
        raise unreadable(path, error) from None


def _read(pfile, path: str, columns: list[str]):
    import pyarrow as pa

    try:
        return pfile.read(columns=columns, use_threads=limits.arrow_threads())
    except (pa.ArrowException, OSError, ValueError) as error:
        raise unreadable(path, error) from None


def find_column(names: list[str], choices: tuple, path: str) -> str | None:
    """The one column of ``names`` among ``choices`` (None when absent); a name two
    columns have is an error (Arrow cannot tell them apart)."""
    _unique(names, choices, path)
    present = [c for c in choices if c in names]
    if len(present) > 1:
        raise InputError(
            path, None, f"column {present[0]}: both {present[0]!r} and {present[1]!r}; keep one"
        )
    return present[0] if present else None


def _unique(names: list[str], wanted, path: str) -> None:
    """An error when one of the ``wanted`` column names is the name of several columns."""
    for c in wanted:
        count = names.count(c)
        if count > 1:
            raise InputError(
                path,
                None,
                f"column {c}: {count} columns have this name; rename or drop all but one",
            )


def need_column(names: list[str], choices: tuple, path: str, expected: str) -> str:
    found = find_column(names, choices, path)
    if found is None:
        alternatives = " or ".join(repr(c) for c in choices)
        raise InputError(
            path,
            None,
            f"column {choices[0]}: missing ({alternatives}); {expected}; the columns are {names}",
        )
    return found


def _plain(column, path: str = "<table>"):
    """One array (chunks combined, dictionaries decoded: an index outside the
    dictionary is an error)."""
    import pyarrow as pa

    if isinstance(column, pa.ChunkedArray):
        if column.num_chunks == 0:
            column = pa.array([], column.type)
        else:
            column = column.combine_chunks() if column.num_chunks > 1 else column.chunk(0)
    if pa.types.is_dictionary(column.type):
        if not _in_dictionary(column.indices, column.dictionary):
            raise unreadable(path, ValueError("Index not in dictionary bounds"))
        column = column.dictionary_decode()
    return column


def _in_dictionary(indices, dictionary) -> bool:
    """Whether every (non-null) index points into the dictionary."""
    import pyarrow.compute as pc

    bounds = pc.min_max(indices).as_py()
    return bounds["min"] is None or 0 <= bounds["min"] <= bounds["max"] < len(dictionary)


def _first(mask) -> int:
    return int(np.flatnonzero(np.asarray(mask, dtype=bool))[0])


def ids(column, what: str, path: str, name: str | None = None, offset: int = 0):
    """A string id column (pyarrow ``string``, ``large_string`` beyond 2 GiB): strings
    as they are, numbers as :func:`prefeval.io.columns.id_strings` makes them."""
    import pyarrow as pa
    import pyarrow.compute as pc

    column = _plain(column, path)
    kind = column.type
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        text = pa.large_string() if pa.types.is_large_binary(kind) else pa.string()
        try:
            column = column.cast(text)
        except pa.ArrowInvalid:
            raise _utf8_error(column, what, path, offset) from None
        kind = column.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        try:  # a Parquet string column is not checked on reading: invalid UTF-8 passes
            column.validate(full=True)
        except pa.ArrowInvalid:
            raw = pa.large_binary() if pa.types.is_large_string(kind) else pa.binary()
            raise _utf8_error(column.view(raw), what, path, offset) from None
        if column.null_count:
            raise InputError(
                path, None, f"row {offset + _first(column.is_null()) + 1}: missing {what}"
            )
        empty = pc.equal(pc.binary_length(column), 0)
        if len(column) and pc.any(empty).as_py():
            raise InputError(path, None, f"row {offset + _first(empty) + 1}: empty {what}")
        return small_strings(column)
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind):
        values = id_strings(column.to_pandas(), what, path, first_row=offset + 1)
        return pa.array(values.tolist(), pa.string())
    raise InputError(
        path, None, f"column {name or what}: type {kind}; give ids as strings or integers"
    )


def _utf8_error(column, what: str, path: str, offset: int) -> InputError:
    """The error of a binary ``column`` that is not all valid UTF-8: its first such row."""
    bad = [v is not None and _not_utf8(v) for v in column.to_pylist()]
    return InputError(path, None, f"row {offset + _first(bad) + 1}: {what} is not valid UTF-8")


def _not_utf8(value: bytes) -> bool:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def numbers(
    column, what: str, path: str, finite: bool = False, name: str | None = None, offset: int = 0
) -> np.ndarray:
    """float64 values of a number column, widened exactly (integers beyond 2**53 are
    rounded to the nearest float64, as the text reader rounds their decimal text); a
    missing value or NaN is an error, an infinity too when ``finite``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    column = _plain(column, path)
    kind = column.type
    if not (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind)):
        raise InputError(path, None, f"column {name or what}: type {kind}, not a number type")
    if column.null_count:
        raise InputError(path, None, f"row {offset + _first(column.is_null()) + 1}: missing {what}")
    values = np.asarray(pc.cast(column, pa.float64(), safe=False), dtype=np.float64)
    bad = ~np.isfinite(values) if finite else np.isnan(values)
    if bad.any():
        k = _first(bad)
        kind = "a finite number" if finite else "a number"
        raise InputError(
            path, None, f"row {offset + k + 1}: {what} {float(values[k])!r} is not {kind}"
        )
    return values


# --------------------------------------------------------------------------- runs

RUN_COLUMNS = "a Parquet run has columns query_id, doc_id, score (or qid, docno, score)"


def _run_table(data: bytes, path: str):
    """(query ids, docnos, scores) of a Parquet file of one run."""
    pfile = _file(data, path)
    query, doc, score = _one_run_columns(pfile, path)
    table = _read(pfile, path, [query, doc, score])
    return _run_values(path, [query, doc, score], table)


def _run_values(path: str, columns: list[str], table, offset: int = 0):
    """(query ids, docnos, scores) of a table or batch of the ``columns`` of a Parquet run,
    each checked (rows in errors counted from file row ``offset``)."""
    query, doc, score = columns
    return (
        ids(table.column(query), "query id", path, name=query, offset=offset),
        ids(table.column(doc), "document id", path, name=doc, offset=offset),
        numbers(table.column(score), "score", path, name=score, offset=offset),
    )


def _one_run_columns(pfile, path: str) -> list[str]:
    """The query, document and score columns of a Parquet file of one run (a run column:
    an error)."""
    names = list(pfile.schema_arrow.names)
    run = find_column(names, RUN, path)
    if run is not None:
        raise InputError(
            path,
            None,
            f"column {run}: a table of many runs, not one run; give it as a RUN argument "
            "(or in a list of runs), not as one named run",
        )
    return [
        need_column(names, QUERY, path, RUN_COLUMNS),
        need_column(names, DOC, path, RUN_COLUMNS),
        need_column(names, SCORE, path, RUN_COLUMNS),
    ]


def run_pieces(data, path: str, rows: int = 1 << 19):
    """(query ids, docnos, scores) of a Parquet file of one run (its stored bytes
    ``data``), ``rows`` at a time in file order, each piece's columns checked as
    :func:`parse_run` checks the whole file's (rows in errors counted in the file; a
    document twice for a query in two pieces is the caller's to find,
    :mod:`prefeval.io.spill`).  Read on this thread only."""
    columns = _one_run_columns(_file(data, path), path)
    for offset, batch in _batches(path, columns, data, threads=False, rows=rows):
        yield _run_values(path, columns, batch, offset)


def row_count(data, path: str) -> int:
    """The rows of a Parquet file, from its footer."""
    return _file(data, path).metadata.num_rows


def parse_run(data: bytes, path: str, name: str, known=None):
    """One run from a Parquet file's bytes (:class:`prefeval.io.columns.RunColumns`)."""

    qid, docno, score = _run_table(data, path)
    qcode, qvalues = dictionary_codes(qid)
    dcode, dvalues, kcode = dictionary_codes_with(docno, known)
    _duplicate_rows(path, qid, docno, (qcode, dcode), np.arange(len(score)))
    found = None if kcode is None else (known, kcode)
    return RunColumns(name, path, qid, docno, score, dcode, dvalues, qcode, qvalues, found)


def unreadable(path: str, error: BaseException) -> InputError:
    """The error of a file Arrow cannot read, its words on one line (an
    :class:`InputError` of reading it, such as a file changed meanwhile, as it is)."""
    if isinstance(error, InputError):
        return error
    return InputError(path, None, f"not a readable Parquet file: {' '.join(str(error).split())}")


def open_parquet(path: str, data=None, dictionary: tuple = ()):
    """The ParquetFile of a path (reading only what is asked of it later), or of the
    file's stored bytes ``data`` when given (:func:`prefeval.io.source.stored`: a stream's
    bytes or a :class:`~prefeval.io.source.StoredFile`, the path only cited);
    ``dictionary``: see :func:`_file`."""

    if data is None:
        data = read_raw(path) if is_stream(path) else None
    if data is not None:
        return _file(data, path, dictionary)
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path, read_dictionary=list(dictionary) or None)
    except (pa.ArrowException, OSError, ValueError) as error:
        raise unreadable(path, error) from None


def runs_column(data, path: str) -> str | None:
    """The run (or ``name``) column of a Parquet file's stored bytes: a table of many
    runs; None for a file of one run (its footer only is read)."""
    return find_column(list(_file(data, path).schema_arrow.names), RUN, path)


# --------------------------------------------------------------------------- many runs

#: rows read at a time from a table of many runs: memory is bounded by a batch (and
#: the rows of one run's query carried over to the next), not by the table
BATCH_ROWS = 1 << 20


def _many_run_columns(pfile, path: str) -> list[str]:
    """The run, query, document and score columns of a many-run table."""
    names = list(pfile.schema_arrow.names)
    run = find_column(names, RUN, path)
    assert run is not None  # a many-run table (runs_column) has one
    return [
        run,
        need_column(names, QUERY, path, RUN_COLUMNS),
        need_column(names, DOC, path, RUN_COLUMNS),
        need_column(names, SCORE, path, RUN_COLUMNS),
    ]


def _row_group_chunks(pfile, batch: int | None = None) -> list[list[int]]:
    """The row groups of a file read together, in file order: a few at a time (up to
    ``batch`` (default :data:`BATCH_ROWS`) / 2 rows; over the whole file, iter_batches
    reads ahead and holds most of a large file in Arrow's memory);
    small row groups together."""
    batch = batch or BATCH_ROWS
    chunks: list[list[int]] = []
    groups: list[int] = []
    rows = 0
    for group in range(pfile.num_row_groups):
        size = pfile.metadata.row_group(group).num_rows
        if groups and rows + size > batch // 2:
            chunks.append(groups)
            groups, rows = [], 0
        groups.append(group)
        rows += size
    if groups:
        chunks.append(groups)
    return chunks


def _chunk_batches(
    pfile, groups: list[int], columns: list[str], threads: bool = True, rows: int | None = None
):
    """The RecordBatches (up to ``rows`` rows, default :data:`BATCH_ROWS`) of ``columns``
    of row groups ``groups`` (on Arrow's threads when ``threads`` and
    :func:`limits.arrow_threads`)."""
    return pfile.iter_batches(
        batch_size=rows or BATCH_ROWS,
        row_groups=groups,
        columns=columns,
        use_threads=threads and limits.arrow_threads(),
    )


def _batches(
    path: str,
    columns: list[str],
    data=None,
    threads: bool = True,
    rows: int | None = None,
    dictionary: tuple = (),
):
    """(file row of the first row, RecordBatch) of ``columns``, ``rows`` (default
    :data:`BATCH_ROWS`) at a time, in file order (on Arrow's threads when ``threads``,
    see :func:`_chunk_batches`)."""
    import pyarrow as pa

    pfile = open_parquet(path, data, dictionary)

    def read():
        for groups in _row_group_chunks(pfile, rows):
            yield from _chunk_batches(pfile, groups, columns, threads, rows)

    batches = read()
    offset = 0
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            return
        except (pa.ArrowException, OSError, ValueError) as error:
            raise unreadable(path, error) from None
        yield offset, batch
        offset += batch.num_rows


def _checked(path: str, columns: list[str], offset: int, batch, cuts: bool = False) -> tuple:
    """(offset, run names, query ids, docnos, scores) of one batch of a many-run table,
    each column checked (rows in errors counted in the whole file); with ``cuts``, then
    its :func:`_group_cuts`."""
    run, query, doc, score = columns
    names = ids(batch.column(0), "run name", path, name=run, offset=offset)
    qid = ids(batch.column(1), "query id", path, name=query, offset=offset)
    checked = (
        offset,
        names,
        qid,
        ids(batch.column(2), "document id", path, name=doc, offset=offset),
        numbers(batch.column(3), "score", path, name=score, offset=offset),
    )
    return (*checked, _group_cuts(names, qid)) if cuts else checked


def _group_cuts(names, qid) -> tuple[int, int]:
    """(first row of the second (run, query) group of a batch, first row of its last
    group): (0, 0) for a batch of one group (rows in a group are consecutive; a group
    seen again later is a group of its own here)."""
    import pyarrow.compute as pc

    if len(names) < 2:
        return 0, 0
    change = pc.or_(pc.not_equal(names[1:], names[:-1]), pc.not_equal(qid[1:], qid[:-1]))
    breaks = np.flatnonzero(np.asarray(change, dtype=bool))
    return (int(breaks[0]) + 1, int(breaks[-1]) + 1) if len(breaks) else (0, 0)


def _run_rows(
    path: str,
    columns: list[str],
    data=None,
    pool=None,
    ahead: int = 0,
    threads: bool = True,
    cuts: bool = False,
):
    """(offset, run names, query ids, docnos, scores) of every batch of a many-run
    table, each column checked (rows in errors counted in the whole file), and with
    ``cuts`` its :func:`_group_cuts`; with a thread ``pool``, its chunks of row groups
    are read (each on one thread) and checked on it, up to ``ahead`` ahead, and come
    (with their errors) in file order; without, read on Arrow's threads when
    ``threads``."""
    if pool is None:
        for offset, batch in _batches(path, columns, data, threads):
            yield _checked(path, columns, offset, batch, cuts)
        return
    import pyarrow as pa

    pfile = open_parquet(path, data)
    try:
        chunks, offset = [], 0
        for groups in _row_group_chunks(pfile):
            chunks.append((offset, groups))
            offset += sum(pfile.metadata.row_group(g).num_rows for g in groups)
    except (pa.ArrowException, OSError, ValueError) as error:
        raise unreadable(path, error) from None

    def chunk_rows(chunk):
        return _chunk_rows(path, columns, data, *chunk, cuts=cuts)

    for checked, failed in _ordered(pool, ahead, chunk_rows, chunks):
        yield from checked
        if failed is not None:
            raise failed


def _chunk_rows(
    path: str, columns: list[str], data, offset: int, groups: list[int], cuts: bool = False
):
    """([checked batch, ...], the error that stopped the reading or None) of the row
    groups ``groups`` of a many-run table, their first row at file row ``offset``
    (:func:`_checked`, with ``cuts``; a file of its own opened, for a thread of its
    own)."""
    import pyarrow as pa

    checked: list[tuple] = []
    try:
        pfile = open_parquet(path, data)
        # chunks are read on threads of their own: not on Arrow's too
        batches = _chunk_batches(pfile, groups, columns, threads=False)
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                return checked, None
            except (pa.ArrowException, OSError, ValueError) as error:
                raise unreadable(path, error) from None
            checked.append(_checked(path, columns, offset, batch, cuts))
            offset += batch.num_rows
    except InputError as error:
        return checked, error


def _ordered(pool, ahead: int, work, items):
    """``work(item)`` of each of ``items`` in their order, computed on the thread
    ``pool``, at most ``ahead`` ahead of the one taken (an error comes where its item
    comes: an error taking the next item after the results of the items before it)."""
    pending: deque = deque()
    items = iter(items)
    while True:
        try:
            item = next(items)
        except StopIteration:
            break
        except BaseException as error:
            while pending:
                yield pending.popleft().result()
            raise error
        pending.append(pool.submit(work, item))
        if len(pending) > ahead:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


def run_names(path: str, data=None) -> list[str]:
    """The run names in the run column of a many-run Parquet table, sorted (that column
    only is read, batch by batch, as a dictionary where it is stored as one; ``data``:
    the file's stored bytes, see :func:`open_parquet`)."""
    column = find_column(list(open_parquet(path, data).schema_arrow.names), RUN, path)
    assert column is not None  # a many-run table (runs_column) has one
    names: set[str] = set()
    for offset, batch in _batches(path, [column], data, dictionary=(column,)):
        names.update(_distinct_ids(batch.column(0), "run name", path, column, offset))
    return sorted(names)


def _distinct_ids(column, what: str, path: str, name: str, offset: int) -> list[str]:
    """The distinct ids of a column, as :func:`ids` makes them: of a dictionary of
    strings, the dictionary's values in use only are checked and made (a few values for
    millions of rows); where one of them is wrong, or an index is, the whole column is,
    so that the error names the row :func:`ids` names."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    kind = column.type
    if (
        pa.types.is_dictionary(kind)
        and (pa.types.is_string(kind.value_type) or pa.types.is_large_string(kind.value_type))
        and not column.null_count
    ):
        used = pc.unique(column.indices)
        if _in_dictionary(used, column.dictionary):
            try:
                values = ids(column.dictionary.take(used), what, path, name=name)
            except InputError:
                pass
            else:
                return pc.unique(values).to_pylist()
    return pc.unique(ids(column, what, path, name=name, offset=offset)).to_pylist()


def _duplicate_rows(path, qid, docno, codes, rows, run_of=None) -> None:
    """An error for the first row repeating an earlier row's ``codes`` (query, docno and,
    in a many-run table, run): ``rows`` are the rows' 0-based rows in the file,
    ``run_of(i)`` the run name of row i (None: a file of one run)."""
    found = duplicate_error(path, qid, docno, codes, rows, run_of)
    if found is not None:
        raise found[1]


def duplicate_error(path, qid, docno, codes, rows, run_of=None) -> tuple[int, InputError] | None:
    """(file row, error) of :func:`_duplicate_rows`'s first repeated row, or None."""

    duplicate = duplicate_message(qid, docno, codes, lambda i: f"row {int(rows[i]) + 1}", run_of)
    if duplicate is None:
        return None
    row = int(rows[duplicate[0]])
    return row, InputError(path, None, f"row {row + 1}: {duplicate[1]}")


def table_run(path: str, name: str, data=None):
    """Run ``name`` of a many-run table (:class:`prefeval.io.columns.RunColumns`), its rows
    kept batch by batch: memory is bounded by that run, not the table."""
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = _many_run_columns(open_parquet(path, data), path)
    pieces = []
    for offset, names, qid, docno, score in _run_rows(path, columns, data):
        mine = np.flatnonzero(np.asarray(pc.equal(names, name), dtype=bool))
        if len(mine):
            take = pa.array(mine)
            pieces.append((qid.take(take), docno.take(take), score[mine], offset + mine))
    if pieces:
        qid = small_strings(pa.chunked_array([p[0] for p in pieces]))
        docno = small_strings(pa.chunked_array([p[1] for p in pieces]))
        score = np.concatenate([p[2] for p in pieces])
        rows = np.concatenate([p[3] for p in pieces])
    else:
        qid = docno = pa.array([], pa.string())
        score, rows = np.zeros(0), np.zeros(0, dtype=np.int64)
    qcode, qvalues = dictionary_codes(qid)
    dcode, dvalues = dictionary_codes(docno)
    _duplicate_rows(path, qid, docno, (qcode, dcode), rows, lambda row: name)
    return RunColumns(name, path, qid, docno, score, dcode, dvalues, qcode, qvalues)


#: (run, query) blocks of queries the qrels do not evaluate that the batch-by-batch
#: reading remembers (to tell a block split in two): beyond, the table is read per run
OTHER_GROUPS = 1 << 20


class _NotGrouped(Exception):
    """The rows of one run's query are not consecutive in the table."""


def table_positions(
    path: str, relevant, max_docs: int | None = None, data=None, jobs: int = 1
) -> dict:
    """run name -> :class:`prefeval.core.positions.RunPositions` of every run of a many-run
    table, read batch by batch, on ``jobs`` threads.

    When the rows of each (run, query) are consecutive (as a table written run by run
    or query by query has them, in any order of the blocks), every complete block is
    reduced as soon as it is read, so memory is bounded by a batch; otherwise the rows
    are spilled to temporary files by query and reduced a partition at a time
    (:func:`prefeval.io.spill.spilled_runs`, on one thread), and only a table with a
    problem is read run by run (:func:`table_run`), which reports it where it always
    has.  Either way the positions are the same: ranks depend only on each (run,
    query)'s rows.  With
    ``jobs`` > 1, batches are read, checked and reduced on ``jobs`` threads (pyarrow
    and numpy release the GIL), a few ahead, and merged in file order: the same
    positions and the same first error as on one thread; with ``jobs`` = 1 the
    grouped table is read on this thread only.
    """

    path = os.fspath(path)
    try:
        if jobs > 1:
            with ThreadPoolExecutor(jobs) as pool:
                return _grouped_positions(path, relevant, max_docs, data, pool, jobs)
        return _grouped_positions(path, relevant, max_docs, data)
    except _NotGrouped:
        names = run_names(path, data)
    try:
        return _spilled_table(path, names, relevant, max_docs, data)
    except InputError:  # read run by run, as always: each problem where that reading finds it
        return {
            name: run_positions(table_run(path, name, data), relevant, max_docs) for name in names
        }


def _spilled_table(path: str, names: list[str], relevant, max_docs, data=None) -> dict:
    """run name -> positions of a table whose (run, query) rows are scattered: its
    checked batches spilled by query and reduced partition by partition
    (:func:`prefeval.io.spill.spilled_runs`), on this thread; a problem is an
    :class:`InputError` (the caller reads run by run to say where)."""
    parts = STREAMING.parts(open_parquet(path, data).metadata.num_rows)
    pieces = table_pieces(path, names, data)
    return spilled_runs(path, pieces, names, relevant, max_docs, parts)


def table_pieces(path: str, names: list[str], data=None):
    """The rows of the runs ``names`` of a many-run table, batch by batch in file order,
    as :class:`prefeval.io.spill.Spill` takes them: each row's run as an int32 index
    into ``names`` (the rows of the table's other runs left out), query ids, docnos,
    scores; each batch checked as :func:`table_run` checks it.  Read on this thread."""
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = _many_run_columns(open_parquet(path, data), path)
    known = pa.array(names, pa.string())
    for _, labels, qid, docno, score in _run_rows(path, columns, data, threads=False):
        run = pc.index_in(labels, value_set=set_like(known, labels)).cast(pa.int32())
        if run.null_count:  # rows of runs not asked for
            mine = np.flatnonzero(np.asarray(run.is_valid(), dtype=bool))
            take = pa.array(mine)
            run, qid, docno, score = run.take(take), qid.take(take), docno.take(take), score[mine]
        yield run, qid, docno, score


def _grouped_positions(
    path: str, relevant, max_docs: int | None, data=None, pool=None, ahead: int = 0
) -> dict:
    """:func:`table_positions` of a table whose rows come grouped by (run, query), each
    block of complete groups reduced as it is read (on the thread ``pool``, up to
    ``ahead`` blocks ahead, merged in file order); _NotGrouped when they do not."""
    columns = _many_run_columns(open_parquet(path, data), path)
    reduction = _GroupedReduction(path, relevant, max_docs)
    blocks = _complete_groups(path, columns, data, pool, ahead)
    if pool is None:
        reduced = (reduction.reduce(*block) for block in blocks)
    else:
        reduced = _ordered(pool, ahead, lambda block: reduction.reduce(*block), blocks)
    for block in reduced:
        reduction.merge(block)
    return reduction.positions()


def _complete_groups(path: str, columns: list[str], data=None, pool=None, ahead: int = 0):
    """The rows of a many-run table (run names, query ids, docnos, scores, row numbers)
    read batch by batch, in blocks of complete (run, query) groups: the last group of a
    batch may go on in the next batch, so it is carried over and joined to that batch's
    first group, a small block of its own; the rest of a batch is a block (slices, not
    copies).  A batch's groups are found where it is read (:func:`_group_cuts`, on the
    ``pool``'s threads: see :func:`_run_rows`; on this thread only without a pool)."""
    carry: tuple | None = None
    rows_read = _run_rows(path, columns, data, pool, ahead, threads=False, cuts=True)
    for offset, names, qid, docno, score, (second, last) in rows_read:
        if not len(score):
            continue
        batch = (names, qid, docno, score, np.arange(offset, offset + len(score), dtype=np.int64))
        if last == 0:  # one group, which may go on before and after
            carry = batch if carry is None else _joined(carry, batch)
            continue
        if carry is not None:
            yield _joined(carry, tuple(column[:second] for column in batch))
        start = 0 if carry is None else second
        if last > start:
            yield tuple(column[start:last] for column in batch)
        carry = tuple(column[last:] for column in batch)
    if carry is not None:
        yield carry


def _joined(first: tuple, then: tuple) -> tuple:
    """The rows of two blocks of :func:`_complete_groups` one after the other."""
    import pyarrow as pa

    names, qid, docno = (pa.concat_arrays([a, b]) for a, b in zip(first[:3], then[:3]))
    return (
        names,
        qid,
        docno,
        np.concatenate([first[3], then[3]]),
        np.concatenate([first[4], then[4]]),
    )


class _GroupedReduction:
    """The positions of the runs of a table read in blocks of complete (run, query)
    groups, each block reduced (:func:`prefeval.core.positions.reduce_rows`) as it
    comes; _NotGrouped as soon as a group is seen in two blocks.

    :meth:`reduce` uses nothing the blocks change (blocks may be reduced on several
    threads); :meth:`merge` takes the reduced blocks in file order."""

    def __init__(self, path: str, relevant, max_docs: int | None):
        import pandas as pd
        import pyarrow as pa

        self.path, self.relevant, self.max_docs = path, relevant, max_docs
        self.nq = relevant.n_queries
        self.queries = pd.Index(pa.array(relevant.query_ids, pa.string()).to_pandas())
        self.docnos = relevant.docnos()
        self.judged = pd.Index(self.docnos.to_pandas())  # codes as relevant.lookup takes
        self.parts: dict[str, list] = {}  # run -> RunPositions of the blocks reduced
        self.retrieved: dict[str, np.ndarray] = {}  # run -> documents retrieved per query
        self.done: dict[str, np.ndarray] = {}  # run -> evaluated queries already reduced
        self.done_other: set[tuple[str, str]] = set()  # (run, query id) of queries not evaluated
        # pandas builds an index's hash table on first use: one thread at a time (its
        # lookups of Python strings hold the GIL anyway)
        self.lock = threading.Lock()

    def reduce(self, names, qid, docno, score, rows):
        """One block of complete groups (arrow run names, query ids and docnos, numpy
        scores and row numbers) reduced, for :meth:`merge`: (first rows of its groups,
        their evaluated query codes, the query ids, [(run, its groups, its
        RunPositions or None), ...]), None for an empty block; its own errors
        (_NotGrouped within the block, a repeated row) raised."""
        import pyarrow as pa

        rcode, rvalues = dictionary_codes(names)
        qcode, qvalues = dictionary_codes(qid)
        dcode, dvalues = dictionary_codes(docno)
        n = len(rcode)
        if n == 0:
            return None
        change = np.flatnonzero((rcode[1:] != rcode[:-1]) | (qcode[1:] != qcode[:-1])) + 1
        starts = np.concatenate([[0], change])
        key = rcode[starts].astype(np.int64) * len(qvalues) + qcode[starts]
        if len(np.unique(key)) != len(starts):
            raise _NotGrouped
        _duplicate_rows(
            self.path, qid, docno, (rcode, qcode, dcode), rows, lambda row: names[row].as_py()
        )
        # hashes of the evaluated queries and judged docnos built once (index_in would
        # hash them again for every batch)
        with self.lock:
            qidx = self.queries.get_indexer(qvalues.to_pandas()).astype(np.int64)[qcode]
        code = judged_codes(dvalues, self.docnos, self.judged, self.lock)[dcode]
        del qcode, dcode  # a block's arrays are let go as soon as they are used
        labels = rvalues.to_pylist()
        group_run, group_q = rcode[starts], qidx[starts]
        runs = []
        for r, label in enumerate(labels):
            rows_r = np.flatnonzero((rcode == r) & (qidx >= 0))
            part = None
            if len(rows_r):
                if rows_r[-1] - rows_r[0] + 1 == len(rows_r):  # one stretch: views, not copies
                    take = slice(int(rows_r[0]), int(rows_r[-1]) + 1)
                    docno_r = docno.slice(take.start, len(rows_r))
                else:
                    take = rows_r
                    docno_r = docno.take(pa.array(rows_r))
                del rows_r
                part = reduce_rows(
                    label,
                    qidx[take],
                    score[take],
                    docno_r,
                    code[take],
                    self.relevant,
                    self.max_docs,
                )
                del take, docno_r
            runs.append((label, group_run == r, part))
        return starts, group_q, qid, runs

    def merge(self, reduced) -> None:
        """Take one block :meth:`reduce` gave (in file order): its groups marked as seen
        (_NotGrouped for one seen in an earlier block), its positions kept."""
        if reduced is None:
            return
        starts, group_q, qid, runs = reduced
        for label, mine, part in runs:
            self._mark_groups(label, mine, starts, group_q, qid)
            if part is not None:
                self.retrieved[label] += part.retrieved
                part.retrieved = None  # one count per run, not one per block
                self.parts.setdefault(label, []).append(part)

    def _mark_groups(self, label: str, mine, starts, group_q, qid) -> None:
        """The groups ``mine`` of a block (first rows ``starts``, evaluated query codes
        ``group_q``, -1 for others) of run ``label`` marked as seen; _NotGrouped for one
        seen before (or past OTHER_GROUPS groups of queries not evaluated)."""
        seen = self.done.setdefault(label, np.zeros(self.nq, dtype=bool))
        self.retrieved.setdefault(label, np.zeros(self.nq, dtype=np.int64))
        evaluated = group_q[mine & (group_q >= 0)]
        if seen[evaluated].any():
            raise _NotGrouped
        seen[evaluated] = True
        for start in starts[mine & (group_q < 0)]:
            key_other = (label, qid[int(start)].as_py())
            if key_other in self.done_other or len(self.done_other) >= OTHER_GROUPS:
                raise _NotGrouped
            self.done_other.add(key_other)

    def positions(self) -> dict:
        """run name -> RunPositions of every run seen, its blocks' positions joined (and
        let go, run by run: the blocks and the joined arrays are not all held at once)."""
        out = {}
        for name in sorted(self.done):
            parts = [(p.doc, p.rank) for p in self.parts.pop(name, [])]
            out[name] = join_positions(name, parts, self.retrieved.pop(name))
        return out


# --------------------------------------------------------------------------- qrels

QRELS_COLUMNS = (
    "Parquet qrels have columns query_id, doc_id, relevance[, iteration] "
    "(or qid, docno, label[, iteration])"
)


def parse_qrels(data: bytes, path: str):
    """Judgment rows (:class:`prefeval.io.columns.QrelsRows`) of a Parquet qrels file,
    checked as the text reader checks them; ``iteration`` (optional) ``0``/``Q0`` or an
    integer subtopic id."""

    pfile = _file(data, path)
    columns = qrels_columns(list(pfile.schema_arrow.names), path)
    table = _read(pfile, path, [c for c in columns if c is not None])
    return table_qrels(table, columns, path)


def qrels_columns(names: list[str], path: str) -> tuple:
    """The query, iteration (None when absent), document and grade columns of a table of
    judgments with columns ``names``."""
    query = need_column(names, QUERY, path, QRELS_COLUMNS)
    doc = need_column(names, DOC, path, QRELS_COLUMNS)
    grade = need_column(names, GRADE, path, QRELS_COLUMNS)
    return query, find_column(names, ITERATION, path), doc, grade


def table_qrels(table, columns: tuple, path: str, first_row: int = 1):
    """Judgment rows of an Arrow table's ``columns`` (:func:`qrels_columns`), checked as
    :func:`parse_qrels` checks a file's; rows in errors counted from ``first_row`` (1 for
    a file's rows, 0 for a table in memory, as its positions)."""
    import pyarrow as pa

    query, iteration, doc, grade = columns
    offset = first_row - 1
    qid = ids(table.column(query), "query id", path, name=query, offset=offset)
    docno = ids(table.column(doc), "document id", path, name=doc, offset=offset)
    relevance = numbers(
        table.column(grade), "relevance", path, finite=True, name=grade, offset=offset
    )
    if iteration is not None:
        it = ids(table.column(iteration), "iteration", path, name=iteration, offset=offset)
    else:
        it = pa.array(np.zeros(len(qid), dtype=np.int64)).cast(pa.string())
    line = None if first_row == 1 else np.arange(first_row, first_row + len(qid))
    return qrels_rows(qid, it, docno, lambda: relevance, RowErrors(path), line)


class RowErrors(FirstError):
    """:class:`prefeval.io.columns.FirstError` for a table: problems at rows (from 1),
    reported as ``FILE: row N: message``."""

    unit = "row"

    def error(self, row: int, message: str) -> InputError:
        return InputError(self.path, None, f"row {row}: {message}")


# --------------------------------------------------------------------------- tables


def read_table(data: bytes, path: str, required: list[str]):
    """A ``--prefs``/``--metrics`` table from Parquet, as :func:`prefeval.io.tables.read_table`
    gives the same table in tsv: text columns as strings, ``value`` float64 (a missing
    value or NaN: an error)."""
    import pyarrow as pa

    pfile = _file(data, path)
    names = list(pfile.schema_arrow.names)
    _unique(names, required, path)
    missing = [c for c in required if c not in names]
    if missing:
        raise InputError(
            path,
            None,
            f"missing columns {missing} (need {', '.join(required)}); the columns are {names}",
        )
    table = _read(pfile, path, required)
    columns = {}
    for c in required:
        if c == "value":
            column = _plain(table.column(c), path)
            if not (pa.types.is_floating(column.type) or pa.types.is_integer(column.type)):
                raise InputError(path, None, f"column value: type {column.type}, not a number type")
            values = np.asarray(column.cast(pa.float64(), safe=False).fill_null(np.nan))
            if np.isnan(values).any():
                raise InputError(path, None, f"row {_first(np.isnan(values)) + 1}: missing value")
            columns[c] = pa.array(values, pa.float64())
        else:
            columns[c] = ids(table.column(c), c, path, name=c).cast(pa.string())
    return pa.table(columns).to_pandas()
