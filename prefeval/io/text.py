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
FIFO, ``/dev/fd/N``) is read once, as standard input is
(:func:`prefeval.io.source.read_raw`).  Problems are reported as ``FILE:LINE: message``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core import limits
from ..core.arrays import from_numpy, scalar, small_strings, to_numpy
from ..core.errors import InputError
from .columns import (
    FirstError,
    QrelsRows,
    RunColumns,
    dictionary_codes,
    dictionary_codes_with,
    duplicate_message,
    first_duplicate,
    first_uncastable,
    qrels_rows,
)
from .source import BOM, GZIP_MAGIC, PARQUET_MAGIC, gunzip_blocks, run_name, strip_bom

# --------------------------------------------------------------------------- lines and fields


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


def split_fields(
    data: bytes, path: str, wanted: int, exact: bool, what: str, parse=None, file_start: bool = True
) -> Fields:
    """Split text into lines (:func:`line_ends`) and fields as ``bytes.split()`` does
    (any run of ASCII whitespace), with Arrow's string kernels over all lines at once.

    A leading BOM is dropped (where ``data`` starts the file: ``file_start``).  Every data
    line needs at least ``wanted`` fields; with ``exact`` no more (qrels), else the rest
    are ignored (runs: tag and beyond, as trec_eval does).  A line with a NUL byte or
    invalid UTF-8 is an error, after any error on an earlier line: ``parse`` (the
    caller) is run on the text before it.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    data = strip_bom(data) if file_start else data
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
    count = to_numpy(pc.list_value_length(parts)).astype(np.int64)
    # a blank line trims to "" and splits into [""]
    first = pc.list_element(parts, scalar(0))
    blank = to_numpy(pc.equal(first, scalar("")))
    comment = to_numpy(pc.starts_with(first, "#"))
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
        parts = parts.filter(from_numpy(data_line))
    columns = [pc.list_element(parts, scalar(k)) for k in range(wanted)]
    return Fields(columns, rows + 1, errors)


def _numbers(column, fields: Fields, what: str, allow_inf: bool = True) -> np.ndarray:
    """float64 values of a string column (Arrow's decimal syntax: ``3``, ``-2.5``,
    ``.5``, ``1e-3``, ``inf``); the first line that is not a number is added to
    ``fields.errors`` (NaN is never a number, infinities only with ``allow_inf``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = "a number" if allow_inf else "a finite number"
    try:
        values = to_numpy(pc.cast(column, pa.float64()))
        limit = len(values)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        limit = first_uncastable(column, pa.float64())
        fields.errors.add(fields.line[limit], f"{what} {column[limit].as_py()!r} is not a number")
        values = to_numpy(pc.cast(column.slice(0, limit), pa.float64()))
    bad = np.isnan(values) if allow_inf else ~np.isfinite(values)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        fields.errors.add(fields.line[k], f"{what} {column[k].as_py()!r} is not {kind}")
    return values


# --------------------------------------------------------------------------- qrels


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


# --------------------------------------------------------------------------- runs


def _arrow_owned(data: bytes):
    """A copy of ``data`` in Arrow's own memory, for Arrow's streaming CSV reader. That
    reader reads ahead on Arrow's IO threads, and a buffer wrapping a Python object
    (``pa.py_buffer``) released there must take the GIL: at interpreter exit that aborts
    the process ("terminate called without an active exception", a command's exit status
    -6 after its output); an Arrow-owned buffer is released without Python."""
    import pyarrow as pa

    owned = pa.allocate_buffer(len(data))
    np.frombuffer(owned, dtype=np.uint8)[:] = np.frombuffer(data, dtype=np.uint8)
    return owned


def _regular_columns(data: bytes):
    """(qid, docno, score) columns by Arrow's CSV reader (multi-threaded) when
    every line is a regular single-space line of 5 or of 6 fields; None otherwise.

    The conditions make the result exactly what :func:`split_fields` gives: no byte
    that ``bytes.split()`` takes as whitespace other than the space and the line end
    (CRLF included), no empty field (which a doubled, leading or trailing space makes),
    no ``#`` line, no byte order mark where the data starts (the reader drops one
    there), and one column count throughout (else the reader fails).  Under an
    address-space limit None as well (:func:`prefeval.core.limits.arrow_threads`): the CSV
    reader starts I/O threads even without ``use_threads``, and waits for ever on one
    that could not start.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

    if not limits.arrow_threads():
        return None
    if data.startswith(BOM):  # the CSV reader would drop it: a second BOM, or a piece's
        return None  # line that starts with one, keeps it as :func:`split_fields` does
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
            _arrow_owned(data),
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
            score = to_numpy(columns[4])
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
        qcode, qvalues = dictionary_codes(qid)
        dcode, dvalues, kcode = dictionary_codes_with(docno, known)
        if first_duplicate(qcode, dcode) is None:
            found = None if kcode is None else (known, kcode)
            return RunColumns(name, path, qid, docno, score, dcode, dvalues, qcode, qvalues, found)
    fields, qid, docno, score = _split_run(data, path, True, lambda d, p: parse_run(d, p))
    qcode, qvalues = dictionary_codes(qid)
    dcode, dvalues, kcode = dictionary_codes_with(docno, known)
    duplicate = duplicate_message(
        qid, docno, (qcode, dcode), lambda row: f"line {int(fields.line[row])}"
    )
    if duplicate is not None:
        fields.errors.add(fields.line[duplicate[0]], duplicate[1])
    fields.errors.check()
    found = None if kcode is None else (known, kcode)
    return RunColumns(name, path, qid, docno, score, dcode, dvalues, qcode, qvalues, found)


def _split_run(data: bytes, path: str, file_start: bool, parse=None):
    """(:class:`Fields`, query ids, docnos, scores) of run text by :func:`split_fields`,
    the problems of its lines and scores in the fields' errors, not yet raised."""
    fields = split_fields(
        data, path, 5, False, "qid iter docno rank score [tag]", parse, file_start
    )
    qid = small_strings(fields.columns[0])
    docno = small_strings(fields.columns[2])
    return fields, qid, docno, _numbers(fields.columns[4], fields, "score")


# --------------------------------------------------------------------------- runs in pieces


def run_pieces(raw, path: str, size: int):
    """(query ids, docnos, scores) of a run file's text, piece by piece: its stored bytes
    ``raw`` (plain, or gzip-compressed and decompressed as they are read) cut after a
    line end once about ``size`` bytes are gathered, each piece cut into fields as
    :func:`parse_run` cuts a whole file (the problems of its lines raised; a document
    twice for a query is the caller's to find, :mod:`prefeval.io.spill`)."""
    first = True
    for piece in _line_pieces(_text_blocks(raw, path, size), size):
        regular = _regular_columns(strip_bom(piece) if first else piece)
        if regular is None:
            fields, *regular = _split_run(piece, path, first)
            fields.errors.check()
        first = False
        yield regular


def _text_blocks(raw, path: str, size: int):
    """The text of a stored run file in blocks of about ``size`` bytes (decompressed as
    they are read when gzip-compressed; a compressed Parquet file an error)."""
    if raw[:2] == GZIP_MAGIC:
        first = True
        for block in gunzip_blocks(raw, path, size):
            if first and block.startswith(PARQUET_MAGIC):
                raise InputError(path, None, "a gzip-compressed Parquet file?")  # read whole
            first = False
            yield block
        return
    for at in range(0, len(raw), size):
        yield bytes(raw[at : at + size])


def _line_pieces(blocks, size: int):
    """``blocks`` of text regrouped into pieces of whole lines (each cut after a
    ``\\n``; a line never split, so a CRLF neither), of at least ``size`` bytes but the
    last."""
    held: list[bytes] = []
    count = 0
    for block in blocks:
        held.append(block)
        count += len(block)
        if count < size:
            continue
        end = block.rfind(b"\n")
        if end < 0:
            continue  # no line end in this block: gather on
        data = b"".join(held)
        cut = count - len(block) + end + 1
        yield data[:cut]
        rest = data[cut:]
        del data
        held, count = ([rest], len(rest)) if rest else ([], 0)
    if count:
        yield b"".join(held)


def rows_estimate(raw) -> int:
    """An upper estimate of the lines of a run file from its stored size: 32 bytes a line
    (a TREC run line has more), gzip-compressed text 8 times its stored size."""
    return len(raw) * (8 if raw[:2] == GZIP_MAGIC else 1) // 32
