"""Parquet runs, qrels and tables, read with pyarrow.parquet.

A file is Parquet when it starts and ends with the magic bytes ``PAR1`` (whatever
its name), as a gzip file is recognized by its own magic bytes; a gzip-compressed
Parquet file is an error (Parquet compresses its columns itself).  Only the columns
needed are read.  Columns are found by name: ir-measures' ``query_id, doc_id,
score`` / ``relevance[, iteration]`` or PyTerrier's ``qid, docno, score`` /
``label``; a ``run`` (or ``name``) column makes a table of many runs.

Values mean what they mean in a TREC text file, whatever the physical layout: ids
are strings as the text reader sees them (plain or dictionary-encoded strings as
they are, integers as their decimal text, see :func:`prefeval.inputs.id_strings`);
scores and grades are widened to float64 exactly (a float32 score is the same
number, so the ranking is the one of any exact decimal text of it); row order and
row groups change nothing.  Problems are reported as ``FILE: row N: ...`` (rows
counted from 1, as the data rows of a text table) or ``FILE: column X: ...``.
"""

from __future__ import annotations

import os

import numpy as np

from .errors import InputError
from .readers import PARQUET_MAGIC as MAGIC

QUERY = ("query_id", "qid")
DOC = ("doc_id", "docno")
SCORE = ("score",)
GRADE = ("relevance", "label")
ITERATION = ("iteration",)
RUN = ("run", "name")


def is_parquet(data: bytes) -> bool:
    """Whether ``data`` is a Parquet file: ``PAR1`` at its start and at its end."""
    return len(data) >= 12 and data[:4] == MAGIC and data[-4:] == MAGIC


def sniff(path: str | os.PathLike) -> bool:
    """Whether the file at ``path`` is Parquet, from its first and last 4 bytes
    (standard input is read whole, once); False for a file that cannot be read (its
    reader reports that)."""
    from .readers import STDIN, read_raw

    path = os.fspath(path)
    if path == STDIN:
        return is_parquet(read_raw(path))
    try:
        with open(path, "rb") as handle:
            head = handle.read(4)
            if head != MAGIC:
                return False
            size = handle.seek(0, os.SEEK_END)
            if size < 12:
                return False
            handle.seek(size - 4)
            return handle.read(4) == MAGIC
    except OSError:
        return False


def _file(data: bytes, path: str):
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(pa.BufferReader(data))
    except (pa.ArrowException, OSError, ValueError) as error:
        raise InputError(path, None, f"not a readable Parquet file: {error}") from None


def _read(pfile, path: str, columns: list[str]):
    import pyarrow as pa

    try:
        return pfile.read(columns=columns, use_threads=True)
    except (pa.ArrowException, OSError, ValueError) as error:
        raise InputError(path, None, f"not a readable Parquet file: {error}") from None


def _find(names: list[str], choices: tuple, path: str) -> str | None:
    """The one column of ``names`` among ``choices`` (None when absent)."""
    present = [c for c in choices if c in names]
    if len(present) > 1:
        raise InputError(
            path, None, f"column {present[0]}: both {present[0]!r} and {present[1]!r}; keep one"
        )
    return present[0] if present else None


def _need(names: list[str], choices: tuple, path: str, expected: str) -> str:
    found = _find(names, choices, path)
    if found is None:
        alternatives = " or ".join(repr(c) for c in choices)
        raise InputError(
            path,
            None,
            f"column {choices[0]}: missing ({alternatives}); {expected}; the columns are {names}",
        )
    return found


def _plain(column):
    """One array (chunks combined, dictionaries decoded)."""
    import pyarrow as pa

    if isinstance(column, pa.ChunkedArray):
        if column.num_chunks == 0:
            column = pa.array([], column.type)
        else:
            column = column.combine_chunks() if column.num_chunks > 1 else column.chunk(0)
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    return column


def _first(mask) -> int:
    return int(np.flatnonzero(np.asarray(mask, dtype=bool))[0])


def ids(column, what: str, path: str, name: str | None = None):
    """A string id column (pyarrow ``string``, ``large_string`` beyond 2 GiB): strings
    as they are, numbers as :func:`prefeval.inputs.id_strings` makes them."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from .inputs import id_strings
    from .readers import _small_strings

    column = _plain(column)
    kind = column.type
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        text = pa.large_string() if pa.types.is_large_binary(kind) else pa.string()
        try:
            column = column.cast(text)
        except pa.ArrowInvalid:
            bad = [v is not None and _not_utf8(v) for v in column.to_pylist()]
            message = f"row {_first(bad) + 1}: {what} is not valid UTF-8"
            raise InputError(path, None, message) from None
        kind = column.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        if column.null_count:
            raise InputError(path, None, f"row {_first(column.is_null()) + 1}: missing {what}")
        empty = pc.equal(pc.binary_length(column), 0)
        if len(column) and pc.any(empty).as_py():
            raise InputError(path, None, f"row {_first(empty) + 1}: empty {what}")
        return _small_strings(column)
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind):
        values = id_strings(column.to_pandas(), what, path, first_row=1)
        return pa.array(values.tolist(), pa.string())
    raise InputError(
        path, None, f"column {name or what}: type {kind}; give ids as strings or integers"
    )


def _not_utf8(value: bytes) -> bool:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def numbers(
    column, what: str, path: str, finite: bool = False, name: str | None = None
) -> np.ndarray:
    """float64 values of a number column, widened exactly (integers beyond 2**53 are
    rounded to the nearest float64, as the text reader rounds their decimal text); a
    missing value or NaN is an error, an infinity too when ``finite``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    column = _plain(column)
    kind = column.type
    if not (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind)):
        raise InputError(path, None, f"column {name or what}: type {kind}, not a number type")
    if column.null_count:
        raise InputError(path, None, f"row {_first(column.is_null()) + 1}: missing {what}")
    values = np.asarray(pc.cast(column, pa.float64(), safe=False), dtype=np.float64)
    bad = ~np.isfinite(values) if finite else np.isnan(values)
    if bad.any():
        k = _first(bad)
        kind = "a finite number" if finite else "a number"
        raise InputError(path, None, f"row {k + 1}: {what} {float(values[k])!r} is not {kind}")
    return values


# --------------------------------------------------------------------------- runs

RUN_COLUMNS = "a Parquet run has columns query_id, doc_id, score (or qid, docno, score)"


def _run_table(data: bytes, path: str, many: bool):
    """(query ids, docnos, scores, run names or None) of a Parquet run file."""
    pfile = _file(data, path)
    names = list(pfile.schema_arrow.names)
    run = _find(names, RUN, path)
    if run is not None and not many:
        raise InputError(
            path,
            None,
            f"column {run}: a table of many runs, not one run; give it as a RUN argument "
            "(or in a list of runs), not as one named run",
        )
    query = _need(names, QUERY, path, RUN_COLUMNS)
    doc = _need(names, DOC, path, RUN_COLUMNS)
    score = _need(names, SCORE, path, RUN_COLUMNS)
    table = _read(pfile, path, [c for c in (run, query, doc, score) if c is not None])
    qid = ids(table.column(query), "query id", path, name=query)
    docno = ids(table.column(doc), "document id", path, name=doc)
    values = numbers(table.column(score), "score", path, name=score)
    names_column = ids(table.column(run), "run name", path, name=run) if run is not None else None
    return qid, docno, values, names_column


def _duplicate(path: str, qid, docno, codes, run_names=None) -> None:
    from .readers import first_duplicate

    duplicate = first_duplicate(*codes)
    if duplicate is None:
        return
    row, earlier = duplicate
    of_run = f" of run {run_names[row].as_py()!r}" if run_names is not None else ""
    raise InputError(
        path,
        None,
        f"row {row + 1}: document {docno[row].as_py()!r} appears twice for query "
        f"{qid[row].as_py()!r}{of_run} (first at row {earlier + 1})",
    )


def parse_run(data: bytes, path: str, name: str, known=None):
    """One run from a Parquet file's bytes (:class:`prefeval.readers.RunColumns`)."""
    from .readers import RunColumns, _codes, _codes_with

    qid, docno, score, _ = _run_table(data, path, many=False)
    qcode, qvalues = _codes(qid)
    dcode, dvalues, kcode = _codes_with(docno, known)
    _duplicate(path, qid, docno, (qcode, dcode))
    found = None if kcode is None else (known, kcode)
    return RunColumns(name, path, qid, docno, score, dcode, dvalues, qcode, qvalues, found)


def _open(path: str):
    """The ParquetFile of a path (reading only what is asked of it later), or of
    standard input's bytes."""
    from .readers import STDIN, read_raw

    if path == STDIN:
        return _file(read_raw(path), path)
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path)
    except (pa.ArrowException, OSError, ValueError) as error:
        raise InputError(path, None, f"not a readable Parquet file: {error}") from None


def has_runs_column(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a Parquet table of many runs (a ``run`` or ``name`` column):
    its footer only is read."""
    path = os.fspath(path)
    if not sniff(path):
        return False
    pfile = _open(path)
    return _find(list(pfile.schema_arrow.names), RUN, path) is not None


def run_names(path: str | os.PathLike) -> list[str]:
    """The run names of a many-run Parquet table, sorted (its run column only is read)."""
    import pyarrow.compute as pc

    path = os.fspath(path)
    pfile = _open(path)
    column = _find(list(pfile.schema_arrow.names), RUN, path)
    names = ids(_read(pfile, path, [column]).column(column), "run name", path, name=column)
    return sorted(pc.unique(names).to_pylist())


def parse_runs(data: bytes, path: str) -> list:
    """The runs of a many-run Parquet table, in sorted name order (as the API takes one
    DataFrame of many runs), each a :class:`prefeval.readers.RunColumns` named by the
    run column; a docno twice for one query of one run is an error."""
    import pyarrow as pa

    from .readers import RunColumns, _codes

    qid, docno, score, names = _run_table(data, path, many=True)
    rcode, rvalues = _codes(names)
    qcode, qvalues = _codes(qid)
    dcode, dvalues = _codes(docno)
    _duplicate(path, qid, docno, (rcode, qcode, dcode), names)
    labels = rvalues.to_pylist()
    rank = np.empty(len(labels), dtype=np.int64)
    rank[np.argsort(np.array(labels, dtype=object), kind="stable")] = np.arange(len(labels))
    by_run = rank[rcode] if len(rcode) else rcode
    order = np.argsort(by_run, kind="stable")
    bounds = np.searchsorted(by_run[order], np.arange(len(labels) + 1))
    take = pa.array(order)
    qid, docno = qid.take(take), docno.take(take)
    score, qcode, dcode = score[order], qcode[order], dcode[order]
    out = []
    for k, label in enumerate(sorted(labels)):
        lo, hi = int(bounds[k]), int(bounds[k + 1])
        out.append(
            RunColumns(
                label,
                path,
                qid.slice(lo, hi - lo),
                docno.slice(lo, hi - lo),
                score[lo:hi],
                dcode[lo:hi],
                dvalues,
                qcode[lo:hi],
                qvalues,
            )
        )
    return out


# --------------------------------------------------------------------------- qrels

QRELS_COLUMNS = (
    "Parquet qrels have columns query_id, doc_id, relevance[, iteration] "
    "(or qid, docno, label[, iteration])"
)


def parse_qrels(data: bytes, path: str):
    """Judgment rows (:class:`prefeval.readers.QrelsRows`) of a Parquet qrels file,
    checked as the text reader checks them; ``iteration`` (optional) ``0``/``Q0`` or an
    integer subtopic id."""
    from .readers import qrels_rows

    pfile = _file(data, path)
    names = list(pfile.schema_arrow.names)
    query = _need(names, QUERY, path, QRELS_COLUMNS)
    doc = _need(names, DOC, path, QRELS_COLUMNS)
    grade = _need(names, GRADE, path, QRELS_COLUMNS)
    iteration = _find(names, ITERATION, path)
    table = _read(pfile, path, [c for c in (query, iteration, doc, grade) if c is not None])
    qid = ids(table.column(query), "query id", path, name=query)
    docno = ids(table.column(doc), "document id", path, name=doc)
    relevance = numbers(table.column(grade), "relevance", path, finite=True, name=grade)
    if iteration is not None:
        it = ids(table.column(iteration), "iteration", path, name=iteration)
    else:
        import pyarrow as pa

        it = pa.array(np.zeros(len(qid), dtype=np.int64)).cast(pa.string())
    return qrels_rows(qid, it, docno, lambda: relevance, RowErrors(path), None)


class RowErrors:
    """:class:`prefeval.readers.FirstError` for a table: problems at rows (from 1),
    reported as ``FILE: row N: message``."""

    unit = "row"

    def __init__(self, path: str):
        self.path = path
        self.found: list[tuple[int, str]] = []

    def add(self, row: int, message: str) -> None:
        self.found.append((int(row), message))

    def check(self) -> None:
        if self.found:
            row, message = min(self.found, key=lambda item: item[0])
            raise InputError(self.path, None, f"row {row}: {message}")


# --------------------------------------------------------------------------- tables


def read_table(data: bytes, path: str, required: list[str]):
    """A ``--prefs``/``--metrics`` table from Parquet, as :func:`prefeval.tables.read_table`
    gives the same table in tsv: text columns as strings, ``value`` float64 (a missing
    value or NaN: an error)."""
    import pyarrow as pa

    pfile = _file(data, path)
    names = list(pfile.schema_arrow.names)
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
            column = _plain(table.column(c))
            if not (pa.types.is_floating(column.type) or pa.types.is_integer(column.type)):
                raise InputError(path, None, f"column value: type {column.type}, not a number type")
            values = np.asarray(column.cast(pa.float64(), safe=False).fill_null(np.nan))
            if np.isnan(values).any():
                raise InputError(path, None, f"row {_first(np.isnan(values)) + 1}: missing value")
            columns[c] = pa.array(values, pa.float64())
        else:
            columns[c] = ids(table.column(c), c, path, name=c).cast(pa.string())
    return pa.table(columns).to_pandas()
