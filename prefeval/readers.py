"""Readers for TREC qrels and run files (plain or gzip, detected by magic bytes).

Every file is cut into lines and whitespace-separated fields by Arrow's string
kernels (``ascii_trim_whitespace``/``ascii_split_whitespace`` over all lines at once,
the same fields ``bytes.split()`` gives); a run file of regular single-space lines is
read by Arrow's CSV reader instead, under conditions that make its fields the same.
Numbers are parsed by Arrow's cast, duplicates found from Arrow's hash-table
dictionary codes, in one shared step after either path.  ``\\n``, ``\\r\\n`` and a
lone ``\\r`` (old Mac OS) each end a line, in any mix.  The other conventions are
trec_eval's: blank lines and lines starting with ``#`` are skipped, fields after a
run's tag are ignored, quotes are ordinary characters, a leading UTF-8 byte order mark
is dropped; ``-`` reads standard input.  A path that is not a regular file (a pipe, a
FIFO, ``/dev/fd/N``) is read once, as standard input is (:func:`read_raw`).  Problems
are reported as ``FILE:LINE: message``.
"""

from __future__ import annotations

import contextlib
import math
import os
import stat
import threading
import zlib
from dataclasses import dataclass

import numpy as np

from . import limits
from .errors import InputError

GZIP_MAGIC = b"\x1f\x8b"
PARQUET_MAGIC = b"PAR1"
#: query id of summary rows (as in trec_eval); not allowed as a real query id
RESERVED_QUERY = "all"


#: the path that stands for standard input (one input per command, as trec_eval 10)
STDIN = "-"
_stdin_data: bytes | None = None
#: (path, device, inode) -> bytes of every stream (not a regular file) read so far in
#: the current command (:func:`one_command`)
_streams: dict[tuple, bytes] = {}
_streams_lock = threading.Lock()
_commands = 0  # commands (:func:`one_command`) under way


@contextlib.contextmanager
def one_command():
    """The scope of one command or API call: a stream read in it (:func:`read_raw`) is
    read once and its bytes are forgotten when the outermost scope ends, so that a later
    command reads a FIFO written again anew (standard input stays read once per process)."""
    global _commands
    with _streams_lock:
        _commands += 1
    try:
        yield
    finally:
        with _streams_lock:
            _commands -= 1
            if _commands == 0:
                _streams.clear()


def _stream_key(path: str) -> tuple | None:
    """The key of ``path`` in :data:`_streams` when it is a stream: a pipe, a FIFO,
    ``/dev/fd/N``, a character device (anything that exists and is neither a regular
    file nor a folder); None otherwise."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    if stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode):
        return None
    return (path, info.st_dev, info.st_ino)


def is_stream(path: str | os.PathLike) -> bool:
    """Whether ``path`` is standard input (``-``) or a stream (:func:`_stream_key`):
    something that can be read once only, so every reader takes its bytes from
    :func:`read_raw` instead of opening it."""
    path = os.fspath(path)
    return path == STDIN or _stream_key(path) is not None


def read_raw(path: str | os.PathLike) -> bytes:
    """The bytes of ``path`` as stored (possibly gzip-compressed).

    ``-`` is standard input; it and any other stream (a pipe such as ``<(zcat
    run.gz)``, a FIFO, ``/dev/fd/N``: :func:`is_stream`) are read once, their bytes
    kept for every later reader of the same command (format sniffing, naming, cache
    keys, reading, baselines: :func:`one_command`; standard input's for the process).
    This is the one function that opens a qrels, run or table path."""
    global _stdin_data
    path = os.fspath(path)
    if path == STDIN:
        with _streams_lock:
            if _stdin_data is None:
                import sys

                try:
                    _stdin_data = sys.stdin.buffer.read()
                except (OSError, AttributeError, ValueError) as error:
                    raise InputError(
                        "<stdin>", None, f"cannot read standard input: {error}"
                    ) from None
            return _stdin_data
    key = _stream_key(path)
    if key is not None:
        with _streams_lock:
            if key not in _streams:
                _streams[key] = _read_file(path)
            return _streams[key]
    return _read_file(path)


def _read_file(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as error:
        raise InputError(path, None, f"cannot read file: {error.strerror or error}") from None


def memory_limit() -> int:
    """Bytes a decompressed input may take: half of the machine's physical memory."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
    except (ValueError, OSError, AttributeError):
        return 1 << 34


def decompress(data: bytes, path: str) -> bytes:
    """``data`` gunzipped when it starts with the gzip magic bytes (every member of a
    multi-member file), streamed so that a file that would not fit in memory (a gzip
    bomb) is an error, not a crash."""
    if data[:2] != GZIP_MAGIC:
        return data
    limit = memory_limit()
    parts: list[bytes] = []
    total = 0
    rest = data
    try:
        while rest:
            inflater = zlib.decompressobj(wbits=31)
            pending = rest
            while pending:
                chunk = inflater.decompress(pending, 1 << 26)
                total += len(chunk)
                if total > limit:
                    raise InputError(
                        path,
                        None,
                        f"decompresses to more than {limit >> 20} MiB, half of this "
                        "machine's memory; decompress it elsewhere or split it",
                    )
                parts.append(chunk)
                pending = inflater.unconsumed_tail
                if inflater.eof:
                    break
            if not inflater.eof:
                raise InputError(path, None, "corrupt gzip data: truncated file")
            rest = inflater.unused_data
            if rest and rest[:2] != GZIP_MAGIC:
                break  # trailing garbage after the last member, as gzip -d tolerates
    except zlib.error as error:
        raise InputError(path, None, f"corrupt gzip data: {error}") from None
    return b"".join(parts)


def read_bytes(path: str | os.PathLike) -> bytes:
    """The whole content of ``path``, gunzipped when it starts with the gzip magic bytes."""
    path = os.fspath(path)
    return decompress(read_raw(path), path)


def text_bytes(raw: bytes, path: str) -> bytes:
    """The text of a TREC file from its stored bytes (gunzipped); a gzip-compressed
    Parquet file is an error."""
    from .parquet import is_parquet

    data = decompress(raw, path)
    if data is not raw and is_parquet(data):
        raise InputError(
            path,
            None,
            "a gzip-compressed Parquet file: Parquet compresses its columns itself; "
            "give the Parquet file uncompressed",
        )
    return data


def run_name(path: str | os.PathLike) -> str:
    """Run name from a file name: basename without a leading ``input.`` and a trailing ``.gz``,
    ``.parquet`` or ``.pq`` (``stdin`` for ``-``).

    This is the rule of the reference implementation (pref_eval), restricted to the
    start and the end of the name.  A trailing ``.parquet`` or ``.pq`` (Parquet's
    extensions, a container like ``.gz``) is dropped too: ``bm25.parquet`` is ``bm25``.
    """
    if os.fspath(path) == STDIN:
        return "stdin"
    name = os.path.basename(os.fsdecode(path))
    # a file name that is not UTF-8 (its bytes kept as surrogates by os.fsdecode) names
    # the run with U+FFFD in their place: a name every output format can write
    name = name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    if name.startswith("input."):
        name = name[len("input.") :]
    for extension in (".gz", ".parquet", ".pq"):
        if name.endswith(extension):
            name = name[: -len(extension)]
            break
    return name


def run_names(runs) -> list[str]:
    """The names :func:`name_runs` gives the run paths ``runs``, a many-run Parquet table
    standing for its runs (only its run column is read)."""
    from . import parquet

    names: list[str] = []
    for path in runs:
        if parquet.has_runs_column(path):
            names.extend(parquet.run_names(path))
        else:
            names.append(run_name(path))
    return names


def name_runs(runs) -> list[tuple[str, object]]:
    """(name, source) of every run: a mapping's keys, else a path's :func:`run_name`, a
    :class:`RunColumns`' name, ``run{i}`` for another in-memory run at position i (from 1).

    One path, DataFrame or RunColumns alone is a list of one; two runs with one name are
    an error.  A path to a Parquet table with a ``run`` (or ``name``) column stands for
    its runs (named by that column, in sorted name order), each a
    :class:`prefeval.parquet.TableRun` read when needed.
    """
    from . import parquet

    if isinstance(runs, (str, os.PathLike, RunColumns)) or _is_frame(runs):
        runs = [runs]
    items = list(runs.items()) if isinstance(runs, dict) else [(None, s) for s in runs]
    expanded = []
    for i, (name, source) in enumerate(items):
        if isinstance(source, (str, os.PathLike)) and parquet.has_runs_column(source):
            path = os.fspath(source)
            if name is not None:
                raise InputError(
                    path,
                    None,
                    f"a table of many runs (a run column) given as the one run {name!r}; "
                    "give it in a list of runs",
                )
            expanded.extend((i, name, run) for name, run in parquet.table_names(path))
        else:
            expanded.append((i, name, source))
    out: list[tuple[str, object]] = []
    seen: dict[str, int] = {}
    keys = [key for key, _ in items]
    for i, name, source in expanded:
        key = name
        if name is None:
            if isinstance(source, RunColumns):
                name = source.name
            elif isinstance(source, (str, os.PathLike)):
                name = run_name(source)
            else:
                name = f"run{i + 1}"
        name = str(name)
        if name in seen:
            where = source if isinstance(source, (str, os.PathLike)) else f"<run {name}>"
            if isinstance(source, (RunColumns, parquet.TableRun)):
                where = source.path
            other = keys[seen[name]]
            alike = (
                f": keys {other!r} and {key!r} are one name; give runs distinct names"
                if key is not None and other is not None and other != key
                else ""
            )
            raise InputError(
                os.fspath(where),
                None,
                f"two runs are named {name!r} (inputs {seen[name] + 1} and {i + 1}){alike}",
            )
        seen[name] = i
        out.append((name, source))
    return out


# --------------------------------------------------------------------------- lines and fields

BOM = b"\xef\xbb\xbf"


def strip_bom(data: bytes) -> bytes:
    """``data`` without a leading UTF-8 byte order mark."""
    return data[len(BOM) :] if data.startswith(BOM) else data


def line_ends(data: bytes) -> np.ndarray:
    """Byte offsets of every line end of ``data``: ``\\n``, ``\\r\\n`` (its ``\\n``) and a
    lone ``\\r`` (old Mac OS) each end a line, whichever style a file (or a line) uses."""
    raw = np.frombuffer(data, dtype=np.uint8)
    newline = raw == 10
    if b"\r" in data:
        cr = raw == 13
        cr[:-1] &= ~newline[1:]  # the CR of a CRLF is not a line end of its own
        newline |= cr
    return np.flatnonzero(newline)


def _line_of(data: bytes, offset: int) -> int:
    """1-based line number of byte ``offset`` of ``data`` (any line end style)."""
    crlf = data.count(b"\r\n", 0, min(offset + 1, len(data)))
    return data.count(b"\n", 0, offset) + data.count(b"\r", 0, offset) - crlf + 1


def _line_start(data: bytes, offset: int) -> int:
    """Byte offset of the start of the line holding byte ``offset`` (any line end style)."""
    ends = line_ends(data[: offset + 1])
    ends = ends[ends < offset]
    return int(ends[-1]) + 1 if len(ends) else 0


def _text_problem(data: bytes) -> tuple[int, str] | None:
    """(byte offset of the line, message) of the first line with a NUL byte or invalid
    UTF-8, or None."""
    problems = []
    nul = data.find(b"\x00")
    if nul >= 0:
        problems.append((nul, "NUL byte in the line"))
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as error:
        problems.append((error.start, "not valid UTF-8 text"))
    if not problems:
        return None
    offset, message = min(problems)
    return _line_start(data, offset), message


class FirstError:
    """Problems found by vectorized checks, each its first offending line; the one on
    the earliest line is reported, as a line-by-line reader would."""

    unit = "line"

    def __init__(self, path: str):
        self.path = path
        self.found: list[tuple[int, str]] = []

    def add(self, line: int, message: str) -> None:
        self.found.append((int(line), message))

    def check(self) -> None:
        if self.found:
            raise self.error(*min(self.found, key=lambda item: item[0]))

    def error(self, line: int, message: str) -> InputError:
        return InputError(self.path, line, message)


@dataclass
class Fields:
    """The whitespace-separated fields of a text file's data lines, as Arrow arrays.

    ``columns[k]`` holds field k of every well-formed data line (blank lines and lines
    whose first field starts with ``#`` are skipped); ``line`` the 1-based line number
    of each; ``errors`` the problems found so far.
    """

    columns: list
    line: np.ndarray
    errors: FirstError


def split_fields(data: bytes, path: str, wanted: int, exact: bool, what: str, parse=None) -> Fields:
    """Split text into lines (:func:`line_ends`) and fields as ``bytes.split()`` does
    (any run of ASCII whitespace), with Arrow's string kernels over all lines at once.

    A leading BOM is dropped.  Every data line needs at least ``wanted`` fields; with
    ``exact`` no more (qrels), else the rest are ignored (runs: tag and beyond, as
    trec_eval does).  A line with a NUL byte or invalid UTF-8 is an error, after any
    error on an earlier line: ``parse`` (the caller) is run on the text before it.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    data = strip_bom(data)
    problem = _text_problem(data)
    if problem is not None:
        start, message = problem
        if parse is not None and start > 0:
            parse(data[:start], path)  # raises on an earlier problem
        if data.startswith(PARQUET_MAGIC):
            message += " (the file starts like Parquet, PAR1, but does not end like it: truncated?)"
        raise InputError(path, _line_of(data, start), message)
    errors = FirstError(path)
    ends = line_ends(data) + 1
    if len(data) and (not len(ends) or ends[-1] != len(data)):
        ends = np.append(ends, len(data))
    offsets = np.zeros(len(ends) + 1, dtype=np.int64)
    offsets[1:] = ends
    lines = pa.LargeStringArray.from_buffers(len(ends), pa.py_buffer(offsets), pa.py_buffer(data))
    # split off at most `wanted` fields; the remainder (if any) is one more element
    parts = pc.ascii_split_whitespace(pc.ascii_trim_whitespace(lines), max_splits=wanted)
    count = np.asarray(pc.list_value_length(parts), dtype=np.int64)
    # a blank line trims to "" and splits into [""]
    first = pc.list_element(parts, 0)
    blank = np.asarray(pc.equal(first, ""), dtype=bool)
    comment = np.asarray(pc.starts_with(first, "#"), dtype=bool)
    data_line = ~blank & ~comment
    bad = data_line & ((count < wanted) | ((count > wanted) if exact else False))
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        found = len(bytes(data[offsets[k] : offsets[k + 1]]).split())
        expect = f"{wanted}" if exact else f"at least {wanted}"
        errors.add(k + 1, f"expected {expect} columns ({what}), found {found}")
        data_line &= ~bad
    rows = np.flatnonzero(data_line)
    if len(rows) < len(count):
        parts = parts.filter(pa.array(data_line))
    columns = [pc.list_element(parts, k) for k in range(wanted)]
    return Fields(columns, rows + 1, errors)


def _small_strings(array):
    """A large_string array as ``pa.string()`` when it fits (2 GiB of characters)."""
    import pyarrow as pa

    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if array.type == pa.large_string():
        size = int(np.frombuffer(array.buffers()[1], np.int64)[array.offset + len(array)])
        if size < (1 << 31) - 1:
            return array.cast(pa.string())
    return array


def _numbers(column, fields: Fields, what: str, allow_inf: bool = True) -> np.ndarray:
    """float64 values of a string column (Arrow's decimal syntax: ``3``, ``-2.5``,
    ``.5``, ``1e-3``, ``inf``); the first line that is not a number is added to
    ``fields.errors`` (NaN is never a number, infinities only with ``allow_inf``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = "a number" if allow_inf else "a finite number"
    try:
        values = np.asarray(pc.cast(column, pa.float64()), dtype=np.float64)
        limit = len(values)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        limit = _first_uncastable(column, pa.float64())
        fields.errors.add(fields.line[limit], f"{what} {column[limit].as_py()!r} is not a number")
        values = np.asarray(pc.cast(column.slice(0, limit), pa.float64()), dtype=np.float64)
    bad = np.isnan(values) if allow_inf else ~np.isfinite(values)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        fields.errors.add(fields.line[k], f"{what} {column[k].as_py()!r} is not {kind}")
    return values


def _codes_with(column, known) -> tuple[np.ndarray, object, np.ndarray | None]:
    """:func:`_codes` of ``column`` in one hash pass with ``known`` (distinct strings,
    e.g. the relevant docnos) encoded first: also returns each row's index in
    ``known`` (-1 when absent), so matching a run against the judgments needs no
    second pass over its docnos."""
    import pyarrow as pa

    if known is None:
        code, values = _codes(column)
        return code, values, None
    known = known if known.type == column.type else known.cast(column.type)
    code, values = _codes(pa.concat_arrays([known, column]))
    code = code[len(known) :]
    return code, values, np.where(code < len(known), code, -1)


def _codes(column) -> tuple[np.ndarray, object]:
    """(int64 code of every string, the distinct strings) by Arrow's hash table."""
    import pyarrow.compute as pc

    encoded = pc.dictionary_encode(column)
    return np.asarray(encoded.indices, dtype=np.int64), encoded.dictionary


def first_duplicate(*codes: np.ndarray) -> tuple[int, int] | None:
    """(row, earlier row) of the first row whose combination of non-negative integer
    ``codes`` (one array per column) appeared on an earlier row, or None."""
    n = len(codes[0])
    if n < 2:
        return None
    widths = [int(code.max()) + 1 for code in codes]
    if math.prod(widths) < (1 << 62):
        key = np.zeros(n, dtype=np.int64)
        for code, width in zip(codes, widths):
            key = key * width + code
    else:  # too many distinct values to pack into one integer: rank the tuples instead
        _, key = np.unique(np.stack(codes, axis=1), axis=0, return_inverse=True)
        key = key.reshape(-1)
    ranked = np.sort(key)
    if not (ranked[1:] == ranked[:-1]).any():
        return None
    order = np.argsort(key, kind="stable")  # only on the error path: which rows
    ranked = key[order]
    same = np.flatnonzero(ranked[1:] == ranked[:-1])
    later = order[same + 1]
    k = int(np.argmin(later))
    earlier = int(order[np.searchsorted(ranked, ranked[same[k]], side="left")])
    return int(later[k]), earlier


# --------------------------------------------------------------------------- qrels


@dataclass(frozen=True)
class QrelsRows:
    """Judgment rows of a qrels file in file order (``iteration`` 0 = plain judgment)."""

    query_id: list
    iteration: np.ndarray
    doc_id: list
    relevance: np.ndarray


def _first_uncastable(column, type_) -> int:
    """Index of the first element of ``column`` Arrow cannot cast to ``type_`` (binary
    search over slices: the error path only)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    lo, hi = 0, len(column)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            pc.cast(column.slice(lo, mid - lo), type_)
            lo = mid
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            hi = mid
    return lo


def parse_qrels(data: bytes, path: str) -> QrelsRows:
    """Parse ``qid iter docno grade`` lines; ``#`` lines and blank lines are skipped.

    ``iter`` is ``0`` or ``Q0`` for plain judgments; any other integer is a
    Web-track (ndeval) subtopic id.  Grades are finite numbers.
    """
    fields = split_fields(data, path, 4, True, "qid iter docno grade", parse_qrels)
    qid, it, docno, grade = fields.columns
    return qrels_rows(
        qid,
        it,
        docno,
        lambda: _numbers(grade, fields, "grade", allow_inf=False),
        fields.errors,
        fields.line,
    )


def qrels_rows(qid, it, docno, grades, errors, line) -> QrelsRows:
    """The checks of judgment rows shared by the text and Parquet readers: ``qid``,
    ``it``, ``docno`` string arrays, ``grades()`` the float grades (adding its problems
    to ``errors``), ``line`` each row's line number (None: rows counted from 1)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if line is None:
        line = np.arange(1, len(qid) + 1)
    reserved = np.asarray(pc.equal(qid, RESERVED_QUERY), dtype=bool)
    if reserved.any():
        k = int(np.flatnonzero(reserved)[0])
        errors.add(
            line[k],
            f"query id {RESERVED_QUERY!r} is reserved for summary rows; rename the query",
        )
    plain = pc.is_in(it, value_set=pa.array(["0", "Q0"], it.type))
    it_text = pc.if_else(plain, pa.scalar("0", it.type), it)
    try:
        iteration = np.asarray(pc.cast(it_text, pa.int64()), dtype=np.int64)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        k = _first_uncastable(it_text, pa.int64())
        errors.add(
            line[k],
            f"iteration {it[k].as_py()!r} is neither 0, Q0 nor an integer subtopic id",
        )
        iteration = np.zeros(len(it), dtype=np.int64)
        iteration[:k] = np.asarray(pc.cast(it_text.slice(0, k), pa.int64()), dtype=np.int64)
        iteration[k:] = -np.arange(1, len(it) - k + 1)  # distinct: no false duplicates
    relevance = grades()
    qcode, _ = _codes(qid)
    dcode, _ = _codes(docno)
    _, icode = np.unique(iteration, return_inverse=True)
    duplicate = first_duplicate(qcode, icode.reshape(-1), dcode)
    if duplicate is not None:
        row, earlier = duplicate
        subtopic = int(iteration[row])
        errors.add(
            line[row],
            f"duplicate judgment of document {docno[row].as_py()!r} for query "
            f"{qid[row].as_py()!r}"
            + (f" subtopic {subtopic}" if subtopic else "")
            + f" (first at {errors.unit} {int(line[earlier])})",
        )
    errors.check()
    return QrelsRows(qid, iteration, docno, relevance)


def read_qrels(source, *, name: str | None = None):
    """Read qrels from a path or a pandas DataFrame into a :class:`prefeval.qrels.Qrels`.

    A DataFrame uses ir-measures' column names ``query_id, doc_id, relevance`` (or
    PyTerrier's ``qid, docno, label``) and, optionally, ``iteration`` (``0``/``Q0`` or an
    integer subtopic id); see :mod:`prefeval.inputs`.
    """
    from .qrels import Qrels

    if isinstance(source, Qrels):
        return source
    if _is_frame(source):
        return Qrels.from_frame(source, name=name or "<qrels DataFrame>")
    from . import parquet

    path = os.fspath(source)
    with one_command():
        raw = read_raw(path)
    if parquet.is_parquet(raw):
        rows = parquet.parse_qrels(raw, path)
    else:
        rows = parse_qrels(text_bytes(raw, path), path)
    return Qrels.from_rows(rows, name=name or path)


# --------------------------------------------------------------------------- runs


@dataclass
class RunColumns:
    """The three columns of a run that evaluation needs, in file order.

    ``query_id`` and ``doc_id`` are pyarrow string arrays (``large_string`` beyond
    2 GiB of text), ``score`` a float64 numpy array.  The rank and tag columns are not
    kept (trec_eval ignores ranks).  ``doc_code``/``doc_values``: the docnos
    dictionary-encoded (codes into the distinct docnos), when the reader has them.
    """

    name: str
    path: str
    query_id: object
    doc_id: object
    score: np.ndarray
    doc_code: np.ndarray | None = None
    doc_values: object = None
    query_code: np.ndarray | None = None
    query_values: object = None
    #: (the ``known`` array given to :func:`parse_run`, each row's index in it or -1)
    known: tuple | None = None

    def __len__(self) -> int:
        return len(self.score)

    def doc_codes(self) -> tuple[np.ndarray, object]:
        """(code of every row's docno, the distinct docnos), computed once."""
        if self.doc_code is None:
            self.doc_code, self.doc_values = _codes(self.doc_id)
        return self.doc_code, self.doc_values

    def query_codes(self) -> tuple[np.ndarray, object]:
        """(code of every row's query id, the distinct query ids), computed once."""
        if self.query_code is None:
            self.query_code, self.query_values = _codes(self.query_id)
        return self.query_code, self.query_values


def _duplicate_message(qid, docno, codes, where, run_of=None) -> tuple[int, str] | None:
    """(row, message) for the first row repeating an earlier row's ``codes`` (query,
    docno and, in a table of many runs, run), or None; ``where(i)`` names row i in the
    message, ``run_of(i)`` its run (None: one run)."""
    duplicate = first_duplicate(*codes)
    if duplicate is None:
        return None
    row, earlier = duplicate
    of_run = f" of run {run_of(row)!r}" if run_of is not None else ""
    return row, (
        f"document {docno[row].as_py()!r} appears twice for query {qid[row].as_py()!r}"
        f"{of_run} (first at {where(earlier)})"
    )


def _regular_columns(data: bytes):
    """(qid, docno, score) columns by Arrow's CSV reader (multi-threaded) when
    every line is a regular single-space line of 5 or of 6 fields; None otherwise.

    The conditions make the result exactly what :func:`split_fields` gives: no byte
    that ``bytes.split()`` takes as whitespace other than the space and the line end
    (CRLF included), no empty field (which a doubled, leading or trailing space makes),
    no ``#`` line, and one column count throughout (else the reader fails).  Under an
    address-space limit None as well (:func:`prefeval.limits.arrow_threads`): the CSV
    reader starts I/O threads even without ``use_threads``, and waits for ever on one
    that could not start.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

    if not limits.arrow_threads():
        return None
    if b"\t" in data or b"\x0b" in data or b"\x0c" in data or b"\x00" in data:
        return None
    if b"\r" in data and data.count(b"\r") != data.count(b"\r\n"):
        return None
    if not data.isascii() and _text_problem(data) is not None:
        return None  # invalid UTF-8 anywhere (the tag column is not converted)
    end = data.find(b"\n")
    first = data[: end if end >= 0 else len(data)].rstrip(b"\r")
    ncols = first.count(b" ") + 1
    if ncols not in (5, 6):
        return None
    names = [f"c{i}" for i in range(ncols)]
    kept: list[list] = [[], [], []]  # qid, docno, score: block by block
    try:
        # streamed in blocks of 16 MiB: only the three kept columns grow with the file
        reader = pacsv.open_csv(
            pa.py_buffer(data),
            read_options=pacsv.ReadOptions(column_names=names, block_size=1 << 24),
            parse_options=pacsv.ParseOptions(
                delimiter=" ", quote_char=False, escape_char=False, ignore_empty_lines=True
            ),
            convert_options=pacsv.ConvertOptions(
                column_types={**{name: pa.string() for name in names}, "c4": pa.float64()},
                # an empty tag (a trailing blank) changes nothing: fields 0-4 are kept
                include_columns=names[:5],
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
                null_values=[],
                check_utf8=True,
            ),
        )
        for batch in reader:
            columns = [batch.column(name) for name in names[:5]]
            for column in columns[:4]:
                if len(column) and pc.min(pc.binary_length(column)).as_py() == 0:
                    return None  # an empty field: irregular spacing
            if len(columns[0]) and pc.any(pc.starts_with(columns[0], "#")).as_py():
                return None
            score = np.asarray(columns[4], dtype=np.float64)
            if np.isnan(score).any():
                return None
            kept[0].append(columns[0])
            kept[1].append(columns[2])
            kept[2].append(score)
    except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError):
        return None
    try:
        qid, docno = (pa.chunked_array(c, pa.string()).combine_chunks() for c in kept[:2])
    except (pa.ArrowInvalid, pa.ArrowCapacityError):
        return None  # a column beyond 2 GiB: split_fields reads it as large strings
    score = np.concatenate(kept[2]) if kept[2] else np.zeros(0)
    return qid, docno, score


def parse_run(data: bytes, path: str, name: str | None = None, known=None) -> RunColumns:
    """Parse run text ``qid iter docno rank score [tag ...]`` into :class:`RunColumns`.

    Regular files are cut into fields by Arrow's CSV reader, anything else by
    :func:`split_fields`; both give the same fields, and every later step (numbers,
    duplicates) is shared.  Any problem is reported by the line-aware path.
    ``known``: distinct docnos (the relevant ones) to locate in the same hash pass.
    """
    name = name or run_name(path)
    regular = _regular_columns(strip_bom(data))
    if regular is not None:
        qid, docno, score = regular
        qcode, qvalues = _codes(qid)
        dcode, dvalues, kcode = _codes_with(docno, known)
        if first_duplicate(qcode, dcode) is None:
            found = None if kcode is None else (known, kcode)
            return RunColumns(name, path, qid, docno, score, dcode, dvalues, qcode, qvalues, found)
    fields = split_fields(
        data, path, 5, False, "qid iter docno rank score [tag]", lambda d, p: parse_run(d, p)
    )
    qid = _small_strings(fields.columns[0])
    docno = _small_strings(fields.columns[2])
    score = _numbers(fields.columns[4], fields, "score")
    qcode, qvalues = _codes(qid)
    dcode, dvalues, kcode = _codes_with(docno, known)
    duplicate = _duplicate_message(
        qid, docno, (qcode, dcode), lambda row: f"line {int(fields.line[row])}"
    )
    if duplicate is not None:
        fields.errors.add(fields.line[duplicate[0]], duplicate[1])
    fields.errors.check()
    found = None if kcode is None else (known, kcode)
    return RunColumns(name, path, qid, docno, score, dcode, dvalues, qcode, qvalues, found)


def read_run(source, *, name: str | None = None) -> RunColumns:
    """Read one run from a path or a pandas DataFrame (``query_id, doc_id, score``, or
    PyTerrier's ``qid, docno, score``: see :mod:`prefeval.inputs`)."""
    from . import parquet

    if isinstance(source, RunColumns):
        return source
    if isinstance(source, parquet.TableRun):
        return parquet.table_run(source.path, source.name)
    if _is_frame(source):
        return _run_from_frame(source, name or "run")
    path = os.fspath(source)
    with one_command():  # called alone: a FIFO is read anew next time
        raw = read_raw(path)
    return parse_any_run(raw, path, name)


def parse_any_run(raw: bytes, path: str, name: str | None = None, known=None) -> RunColumns:
    """One run from a file's stored bytes: Parquet (by its magic bytes), else TREC text
    (plain or gzip); see :func:`parse_run`."""
    from . import parquet

    if parquet.is_parquet(raw):
        return parquet.parse_run(raw, path, name or run_name(path), known)
    return parse_run(text_bytes(raw, path), path, name, known)


def _run_from_frame(frame, name: str) -> RunColumns:
    import pyarrow as pa

    from .inputs import run_frame

    where = f"<run {name}>"
    frame = run_frame(frame, where)
    qid = pa.array(frame["query_id"].tolist(), pa.string())
    docno = pa.array(frame["doc_id"].tolist(), pa.string())
    return run_from_arrays(qid, docno, frame["score"].to_numpy(dtype=float), name, where)


def run_from_arrays(qid, docno, score: np.ndarray, name: str, where: str) -> RunColumns:
    """A run of Arrow string arrays ``qid``, ``docno`` and float scores, checked as a
    DataFrame run is (no NaN score, no document twice in a query); errors cite
    ``where`` and the row number."""
    if np.isnan(score).any():
        row = int(np.flatnonzero(np.isnan(score))[0])
        raise InputError(where, None, f"row {row}: score is not a number")
    qcode, qvalues = _codes(qid)
    dcode, dvalues = _codes(docno)
    duplicate = _duplicate_message(qid, docno, (qcode, dcode), lambda row: f"row {row}")
    if duplicate is not None:
        raise InputError(where, None, f"row {duplicate[0]}: {duplicate[1]}")
    return RunColumns(name, where, qid, docno, score, dcode, dvalues, qcode, qvalues)


def _is_frame(obj) -> bool:
    return type(obj).__name__ == "DataFrame" and hasattr(obj, "columns")
