"""Table writers: tsv (with header), csv, jsonl and Parquet, to stdout or atomically to
a file; on a terminal, a readable view for people (:func:`terminal`, the one test).

tsv to a terminal is an aligned table (:func:`readable_chunks`: 4 decimals, or
``precision``; a p-value above 0 too small for them as ``<0.0001``); every other output
(a file, ``-o``, a pipe, a redirection, csv, jsonl, Parquet) is the machine format
described below, byte for byte the same whatever reads it.  Counts held in float
columns (``counts``: metrics' NumQ, NumRel, NumRet, NumRelRet, robustness' numbers of
queries) are integers in every text format and view; ``precision`` leaves them alone.

Floats are written in their shortest round-trip form (Python's ``repr``), or with
``precision`` N as ``%.Nf`` (trec_eval's fixed notation; never ``-0``).  A missing
value (NaN, or NA in a nullable integer or boolean column) is empty in tsv and csv,
``null`` in jsonl.  Parquet keeps the DataFrame's column types (categoricals as
dictionary-encoded strings, float64, int64) and full precision; with ``precision`` N
each float is the float64 nearest its ``%.Nf`` text, exactly what reading the tsv
written with N back gives.  Lines are
assembled column-wise with pyarrow so that millions of rows are written at the speed
of the disk.  A file is written to a temporary name in its folder and renamed into
place only when complete.
"""

from __future__ import annotations

import functools
import io
import json
import os
import re
import stat
import sys
import time
import weakref
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.arrays import from_numpy, scalar, strings
from ..core.errors import OutputError
from ..core.progress import beside_bar
from ..core.rows import Coded, Rows, as_frame
from ..core.terminal import LINES, escaped

if TYPE_CHECKING:
    import pandas as pd

FORMATS = ("tsv", "csv", "jsonl")
#: binary formats, written by :func:`write_table` only (never to a terminal)
BINARY_FORMATS = ("parquet",)
#: float columns that echo a parameter (discpower's alpha, robustness' level): never rounded
EXACT_COLUMNS = ("alpha", "level")
#: p-value columns: in the readable view, a p-value above 0 that ``%.Nf`` would show as
#: 0 or as 10^-N is shown as ``<`` 10^-N (``<0.0001``); every machine format keeps it
P_COLUMNS = ("p_value", "p_adjusted")
_CHUNK = 1 << 20  # rows per formatting chunk


def _csv_quote(text: str) -> str:
    if any(ch in text for ch in ',"\n\r'):
        return '"' + text.replace('"', '""') + '"'
    return text


class TsvValueError(ValueError):
    """A name that a tsv table cannot hold (a tab, a line feed or a carriage return):
    refused rather than escaped, so that every tsv is read back as written."""


_TSV_BREAKS = re.compile("[\t\n\r]")


def _check_tsv(what: str, texts) -> None:
    for text in texts:
        if text is not None and _TSV_BREAKS.search(text):
            raise TsvValueError(
                f"{what}, {text!r}, holds a tab or a line break, which tsv cannot hold; "
                "use -f csv, jsonl or parquet"
            )


def fixed_text(values: np.ndarray, fmt: str, precision: int):
    """Floats as ``%.{precision}f`` text (a pyarrow string array): the correctly rounded
    decimal, as C's printf and trec_eval write it; a value that rounds to zero is
    written without a minus sign.  NaN and infinities as in :func:`float_text`."""
    import pyarrow.compute as pc

    values = np.asarray(values, dtype=np.float64)
    finite = np.isfinite(values)
    # each distinct value is formatted once: tables repeat few values many times
    distinct, index = np.unique(np.where(finite, values, 0.0), return_inverse=True)
    zero = f"{0.0:.{precision}f}"
    texts = [f"{v:.{precision}f}" for v in distinct.tolist()]
    texts = [zero if t.lstrip("-") == zero else t for t in texts]
    text = pc.take(strings(texts), from_numpy(index.reshape(-1)))
    if not finite.all():
        exact = float_text(np.where(finite, 0.0, values), fmt)
        text = pc.if_else(from_numpy(finite), text, exact)
    return text


def float_text(values: np.ndarray, fmt: str):
    """Shortest round-trip text of floats as a pyarrow string array: the text of
    Python's ``repr`` (Arrow's C++ formatter, which gives the same digits, with
    integral values keeping a ``.0`` and Python's exponent notation where it uses one).
    NaN is empty in tsv/csv and ``null`` in jsonl; infinities are ``inf``/``-inf``
    in tsv/csv and ``null`` in jsonl."""
    import pyarrow as pa
    import pyarrow.compute as pc

    values = np.asarray(values, dtype=np.float64) + 0.0  # -0.0 -> 0.0
    finite = np.isfinite(values)
    text = from_numpy(np.where(finite, values, 0.0)).cast(pa.string())
    size = np.abs(values)
    integral = finite & (values == np.floor(values)) & (size < 1e9)
    if integral.any():
        dotted = pc.binary_join_element_wise(text, scalar(".0"), scalar(""))
        text = pc.if_else(from_numpy(integral), dotted, text)
    # where either formatter uses exponent notation (Python's repr below 1e-4 and from
    # 1e16, Arrow's from about 1e12) the digits agree but not the notation: format those
    # rare values one by one with repr
    odd = finite & (((size < 1e-4) & (size > 0)) | (size >= 1e9))
    if odd.any():
        texts = strings([repr(float(v)) for v in values[odd]])
        text = pc.replace_with_mask(text, from_numpy(odd), texts)
    if not finite.all():
        if fmt == "jsonl":
            special = np.full(len(values), "null", dtype=object)
        else:
            special = np.where(np.isnan(values), "", np.where(values > 0, "inf", "-inf"))
        text = pc.if_else(from_numpy(finite), text, strings(special.tolist()))
    return text


def _encoded(series: pd.Series) -> tuple[np.ndarray, Sequence[str | None] | None]:
    """Column as (codes, distinct strings); a missing value of a nullable integer or
    boolean column (pandas ``Int64``, ``boolean``) has the text None; a float column as
    (its values, None)."""
    import pandas as pd

    nullable = pd.api.types.is_extension_array_dtype(series.dtype) and (
        pd.api.types.is_bool_dtype(series.dtype) or pd.api.types.is_integer_dtype(series.dtype)
    )
    if nullable:
        missing = series.isna().to_numpy()
        numpy_dtype = series.dtype.numpy_dtype
        codes, texts = _encoded(series.fillna(numpy_dtype.type(0)).astype(numpy_dtype))
        assert texts is not None  # an integer or boolean column has texts
        return np.where(missing, len(texts), codes), [*texts, None]
    if isinstance(series.dtype, pd.CategoricalDtype):
        cats = [str(c) for c in series.cat.categories]
        # the codes in their own (smallest) integer type: a copy as int64 would take
        # 8 bytes a row per column of a table of millions of rows
        return series.cat.codes.to_numpy(), cats
    if pd.api.types.is_float_dtype(series.dtype):
        return series.to_numpy(dtype=np.float64), None
    if pd.api.types.is_bool_dtype(series.dtype):
        return series.to_numpy().astype(np.int64), ["false", "true"]
    if pd.api.types.is_integer_dtype(series.dtype):
        arr = series.to_numpy()
        uniq, codes = np.unique(arr, return_inverse=True)
        return codes.reshape(-1), [str(int(x)) for x in uniq]
    codes, uniq = pd.factorize(series.astype(str), sort=False)
    # the distinct strings converted at once (iterating an Arrow-backed array calls
    # Python per element: seconds for a million query ids)
    return codes.astype(np.int64), [str(x) for x in np.asarray(uniq, dtype=object)]


def _column(frame, name) -> tuple[np.ndarray, Sequence[str | None] | None, bool, bool]:
    """Column ``name`` of ``frame`` (a DataFrame or :class:`~prefeval.core.rows.Rows`) as
    :func:`_encoded` gives it, and (whether its texts are JSON strings, not numbers or
    booleans; whether it is a number, right-aligned in the readable view)."""
    if isinstance(frame, Rows):
        column = frame.columns[name]
        if isinstance(column, Coded):
            return column.codes, [str(c) for c in column.categories], True, False
        return np.asarray(column, dtype=np.float64), None, True, True
    import pandas as pd

    series = frame[name]
    codes, texts = _encoded(series)
    dtype = series.dtype
    quoted = not (pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_integer_dtype(dtype))
    return codes, texts, quoted, _right_aligned(series)


def _encoded_columns(frame: pd.DataFrame, fmt: str, precision: int | None, counts):
    """The column names and each column as (codes, texts) for :func:`_chunk_texts`: a
    float column as (values, digits, count mask or None), any other as (codes, a pyarrow
    array of its distinct texts in ``fmt``; ``text``: as tsv, unchecked, control
    characters escaped as a terminal shows them)."""

    names = [str(c) for c in frame.columns]
    if fmt == "tsv":
        _check_tsv("a column name", names)
    masks = counts(frame) if callable(counts) else dict(counts or {})
    encoded = []
    for name in frame.columns:
        codes, texts, quoted, _ = _column(frame, name)
        if texts is None:  # floats: formatted chunk by chunk
            digits = None if str(name) in EXACT_COLUMNS else precision
            mask = masks.get(str(name))
            if mask is not None:
                mask = np.broadcast_to(np.asarray(mask, dtype=bool), codes.shape)
            small = fmt == "text" and digits is not None and str(name) in P_COLUMNS
            encoded.append((codes, (digits, mask, small)))
            continue
        if fmt == "tsv":
            _check_tsv(f"a value of {name}", texts)
        if fmt == "csv":
            texts = ["" if t is None else _csv_quote(t) for t in texts]
        elif fmt == "jsonl":
            texts = [
                "null" if t is None else json.dumps(t, ensure_ascii=False) if quoted else t
                for t in texts
            ]
        elif fmt == "text":  # the readable view: shown on a terminal
            texts = ["" if t is None else escaped(t) for t in texts]
        else:
            texts = ["" if t is None else t for t in texts]
        encoded.append((codes, strings(texts)))
    return names, encoded


def _chunk_texts(encoded, fmt: str, start: int, stop: int) -> list:
    """The texts (pyarrow string arrays) of rows ``start:stop`` of ``encoded`` columns."""
    import pyarrow.compute as pc

    cols = []
    for codes, texts in encoded:
        if isinstance(texts, tuple):
            digits, mask, small = texts
            part = None if mask is None else mask[start:stop]
            text = _float_column(codes[start:stop], fmt, digits, part)
            cols.append(_below(codes[start:stop], text, digits) if small else text)
        else:
            cols.append(pc.take(texts, from_numpy(codes[start:stop])))
    return cols


def iter_chunks(
    frame: pd.DataFrame,
    fmt: str,
    header: bool = True,
    precision: int | None = None,
    counts=None,
) -> Iterator[bytes]:
    """The table as encoded text chunks; ``precision`` N writes floats as ``%.Nf``
    (except :data:`EXACT_COLUMNS`); ``counts``: where float columns hold counts, written
    as integers (see :func:`write_table`)."""
    import pyarrow.compute as pc

    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    # every value is checked before the header: nothing is written of a refused table
    names, encoded = _encoded_columns(frame, fmt, precision, counts)
    if fmt == "tsv" and header:
        yield ("\t".join(names) + "\n").encode()
    elif fmt == "csv" and header:
        yield (",".join(_csv_quote(n) for n in names) + "\n").encode()
    n = len(frame)
    for start in range(0, n, _CHUNK):
        stop = min(n, start + _CHUNK)
        cols = _chunk_texts(encoded, fmt, start, stop)
        if fmt == "jsonl":
            pieces = []
            for i, name in enumerate(names):
                lead = "{" if i == 0 else ", "
                pieces.append(scalar(lead + json.dumps(name) + ": "))
                pieces.append(cols[i])
            pieces.append(scalar("}\n"))
            lines = pc.binary_join_element_wise(*pieces, scalar(""))
        else:
            sep = "\t" if fmt == "tsv" else ","
            lines = pc.binary_join_element_wise(*cols, scalar(sep))
            lines = pc.binary_join_element_wise(lines, scalar("\n"), scalar(""))
        yield _string_data(lines)


#: decimals of the readable view (:func:`readable_chunks`) without ``-p``: trec_eval's
READABLE_DIGITS = 4
#: between the columns of the readable view
_GAP = "  "


def terminal(output: str | None) -> bool:
    """Whether a table written to ``output`` (None or ``-``: standard output) is read by
    a person: standard output is a terminal.  The one test of the readable view; ``-o
    FILE``, a pipe and a redirection get the machine formats."""
    return (output is None or output == "-") and sys.stdout.isatty()


def _right_aligned(series: pd.Series) -> bool:
    import pandas as pd

    dtype = series.dtype
    return (pd.api.types.is_float_dtype(dtype) or pd.api.types.is_integer_dtype(dtype)) and not (
        pd.api.types.is_bool_dtype(dtype)
    )


def readable_chunks(frames, precision: int | None = None, counts=None) -> Iterator[bytes]:
    """The rows of ``frames`` (DataFrames with the same columns) as an aligned table for
    people: a header, numbers right-aligned (floats as ``%.Nf``, N = ``precision`` or
    :data:`READABLE_DIGITS`; counts as integers; :data:`EXACT_COLUMNS` as given; a
    p-value of :data:`P_COLUMNS` above 0 and below 10^-N as ``<0.0001``), text
    left-aligned, columns two spaces apart, no trailing blanks; control characters in
    names and texts escaped (:func:`prefeval.core.terminal.escaped`).  Widths come from the
    header and the first frame's rows; a wider value later widens its column from there
    on (a table written as it is computed is not held whole)."""
    import pyarrow.compute as pc

    digits = READABLE_DIGITS if precision is None else precision
    widths = None
    for frame in frames:
        names, encoded = _encoded_columns(frame, "text", digits, counts)
        names = [escaped(name) for name in names]
        right = [_column(frame, c)[3] for c in frame.columns]
        n = len(frame)
        # an empty first frame still gives the header
        for start in range(0, n, _CHUNK) if n or widths is not None else [0]:
            cols = _chunk_texts(encoded, "text", start, min(n, start + _CHUNK))
            longest = [(pc.max(pc.utf8_length(c)).as_py() or 0) if len(c) else 0 for c in cols]
            if widths is None:
                widths = [max(len(name), size) for name, size in zip(names, longest)]
                head = [
                    name.rjust(w) if r else name.ljust(w)
                    for name, w, r in zip(names, widths, right)
                ]
                yield (_GAP.join(head).rstrip() + "\n").encode()
            widths = [max(w, size) for w, size in zip(widths, longest)]
            if start >= n or not cols:
                continue
            last = len(cols) - 1
            padded = [
                pc.utf8_lpad(c, w) if r else (c if i == last else pc.utf8_rpad(c, w))
                for i, (c, w, r) in enumerate(zip(cols, widths, right))
            ]
            lines = pc.utf8_rtrim(pc.binary_join_element_wise(*padded, scalar(_GAP)), " ")
            lines = pc.binary_join_element_wise(lines, scalar("\n"), scalar(""))
            yield _string_data(lines)


def _float_column(values: np.ndarray, fmt: str, precision: int | None, counts=None):
    """Float texts (``fmt``'s special values; ``text`` as tsv), the cells ``counts`` marks
    (a boolean array, or None) as integers."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = "tsv" if fmt == "text" else fmt
    text = float_text(values, kind) if precision is None else fixed_text(values, kind, precision)
    if counts is not None:
        whole = counts & np.isfinite(values)
        if whole.any():
            ints = from_numpy(np.rint(values[whole]).astype(np.int64)).cast(pa.string())
            text = pc.replace_with_mask(text, from_numpy(whole), ints)
    return text


def _below(values: np.ndarray, text, digits: int):
    """``text`` with each value above 0 and below 10^-``digits`` (the smallest
    positive ``%.Nf`` value) written ``<`` 10^-digits: a p-value ``%.4f`` would show as
    0.0000 or round up to 0.0001 is ``<0.0001``."""
    import pyarrow.compute as pc

    smallest = 10.0**-digits
    below = (values > 0) & (values < smallest)
    if not below.any():
        return text
    return pc.if_else(from_numpy(below), scalar("<" + f"{smallest:.{digits}f}"), text)


def _string_data(array) -> bytes:
    """The concatenated bytes of a pyarrow string array (without copying per element)."""
    import pyarrow as pa

    if isinstance(array, pa.ChunkedArray):
        return b"".join(_string_data(c) for c in array.chunks)
    if len(array) == 0:
        return b""
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int32)[
        array.offset : array.offset + len(array) + 1
    ]
    data = array.buffers()[2]
    return data.to_pybytes()[offsets[0] : offsets[-1]]


#: the characters a name keeps as they are in a file name it is part of: ASCII letters,
#: digits and ``_.+@=,-`` (for a name that must also pass LaTeX's ``\includegraphics``:
#: letters, digits and ``_.-``)
FILE_NAME_CHARS = "A-Za-z0-9_.+@=,-"
TEX_FILE_NAME_CHARS = "A-Za-z0-9_.-"
#: the longest name kept as it is (characters)
FILE_NAME_PART_MAX = 100


def file_name_part(text: str, chars: str = FILE_NAME_CHARS) -> str:
    """``text`` (a measure's or a run's name, any string) as a safe part of a file name:
    itself when it is made of ``chars`` only, does not start with ``.`` or ``-``, holds
    neither ``..`` nor ``--`` and is at most :data:`FILE_NAME_PART_MAX` characters;
    otherwise every other character becomes ``_`` (``..`` and a leading ``.`` or ``-``
    too), the result is cut to that length and ``--`` and 10 hex digits of the SHA-256 of
    ``text`` are appended.  Never a path separator, a control character, ``..`` or an
    empty or hidden name; distinct texts give distinct parts (a changed part always holds
    ``--``, a kept one never)."""
    text = str(text)
    if (
        re.fullmatch(f"[{chars}]+", text)
        and not text.startswith((".", "-"))
        and ".." not in text
        and "--" not in text
        and len(text) <= FILE_NAME_PART_MAX
    ):
        return text
    part = re.sub(f"[^{chars}]", "_", text)
    part = re.sub(r"\.{2,}", "_", re.sub("-{2,}", "-", part))
    part = re.sub(r"^[.-]+", "_", part)[:FILE_NAME_PART_MAX] or "_"
    import hashlib

    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{part}--{digest}"


def file_beside(output, part: str) -> str:
    """The path of the file named ``part`` (from :func:`file_name_part`) in the folder of
    ``output``; ValueError when it would lie anywhere else."""
    folder = os.path.dirname(os.fspath(output))
    path = os.path.join(folder, part)
    if os.path.dirname(path) != folder or os.path.basename(path) != part or part in ("..", "."):
        raise ValueError(f"{output}: the file name {part!r} would leave the folder {folder!r}")
    return path


def _reason(error: BaseException) -> str:
    return getattr(error, "strerror", None) or str(error) or type(error).__name__


def _refusing_tsv(write):
    """``write`` with a :class:`TsvValueError` turned into an :class:`OutputError` of
    its output (``prefeval: cannot write FILE: ...``, exit status 2)."""

    @functools.wraps(write)
    def wrapper(*args, **kwargs):
        try:
            return write(*args, **kwargs)
        except TsvValueError as error:
            output = args[1] if len(args) > 1 else kwargs.get("output")
            raise OutputError(_named(output), str(error)) from None

    return wrapper


def _named(output: str | None) -> str:
    """``output`` as an error names it: ``<stdout>`` for None or ``-``."""
    return "<stdout>" if output is None or output == "-" else output


@_refusing_tsv
def write_table(
    frame: pd.DataFrame,
    output: str | None = None,
    fmt: str = "tsv",
    precision: int | None = None,
    counts=None,
) -> None:
    """Write ``frame`` to ``output`` (atomically) or, when None or ``-``, to stdout;
    ``precision`` N writes floats as ``%.Nf`` (default: shortest round-trip form).
    ``counts``: the cells of float columns that hold counts, written as integers in
    every text format (``{column: boolean row mask}``, or a function of the frame that
    gives one; Parquet keeps the column's type).  tsv to a terminal
    (:func:`terminal`) is the readable view, :func:`readable_chunks`.
    ``fmt`` ``parquet``: see :func:`parquet_bytes` (standard output must not be a
    terminal).  A tsv table refuses names holding a tab or a line break
    (:class:`OutputError`, nothing written)."""
    if fmt in BINARY_FORMATS:
        if output is None or output == "-":
            if sys.stdout.isatty():
                raise OutputError("<stdout>", PARQUET_TTY)
            write_stdout([parquet_bytes(frame, precision)])
            return
        _no_terminal(output)
        with atomic_output(output) as handle:
            handle.write(parquet_bytes(frame, precision))
        return
    write_frames([frame], output, fmt, precision, counts)


def check_tsv_values(output: str | None, column: str, texts) -> None:
    """Refuse, before a table written in pieces (:func:`write_frames`) starts, the
    values of ``column`` that a tsv table cannot hold, as :func:`write_table` would:
    none of it is written, to a file or to standard output."""
    try:
        _check_tsv(f"a value of {column}", texts)
    except TsvValueError as error:
        raise OutputError(_named(output), str(error)) from None


@_refusing_tsv
def write_frames(
    frames,
    output: str | None = None,
    fmt: str = "tsv",
    precision: int | None = None,
    counts=None,
    regroup: bool = False,
) -> None:
    """:func:`write_table` of the rows of ``frames`` (an iterable of DataFrames with the
    same columns) one after the other, one header: a table too large to hold whole is
    written as it is computed, still atomically.  Parquet writes each frame in its own
    row groups, or with ``regroup`` the rows in groups of :data:`PARQUET_GROUP_ROWS`
    whatever the frames, the bytes :func:`write_table` writes for the whole table."""

    if fmt in BINARY_FORMATS:
        frames = (as_frame(frame) for frame in frames)
        _write_parquet_frames(_regrouped(frames) if regroup else frames, output, precision)
        return
    if fmt == "tsv" and terminal(output):
        write_stdout(readable_chunks(frames, precision, counts))
        return

    def chunks():
        for i, frame in enumerate(frames):
            yield from iter_chunks(frame, fmt, header=i == 0, precision=precision, counts=counts)

    if output is None or output == "-":
        write_stdout(chunks())
        return
    with atomic_output(output) as handle:
        for chunk in chunks():
            handle.write(chunk)


#: rows of a Parquet row group: a frame is converted and written this many rows at a
#: time (a frame of more rows than that is converted piece by piece, not whole)
PARQUET_GROUP_ROWS = 1 << 20


def _regrouped(frames) -> Iterator[pd.DataFrame]:
    """The rows of ``frames`` in frames of :data:`PARQUET_GROUP_ROWS` rows, the last
    shorter (one frame, maybe empty, at least)."""
    import pandas as pd

    held: list = []
    rows = 0
    first = None
    given = False
    for frame in frames:
        first = frame if first is None else first
        while len(frame):
            take = min(len(frame), PARQUET_GROUP_ROWS - rows)
            held.append(frame.iloc[:take])
            frame, rows = frame.iloc[take:], rows + take
            if rows == PARQUET_GROUP_ROWS:
                yield pd.concat(held, ignore_index=True)
                held, rows, given = [], 0, True
    if held:
        yield pd.concat(held, ignore_index=True)
    elif not given and first is not None:
        yield first.iloc[:0]


def row_groups(rows: int) -> list[tuple[int, int]]:
    """The (start, stop) rows of the row groups a frame of ``rows`` rows is written in:
    :data:`PARQUET_GROUP_ROWS` each, the last shorter; one empty group for no rows."""
    size = PARQUET_GROUP_ROWS
    return [(lo, min(lo + size, rows)) for lo in range(0, max(1, rows), size)]


def _write_parquet_frames(frames, output, precision) -> None:
    """One Parquet file of ``frames``, written as they come (atomically to a file; to
    standard output once complete): each frame in row groups of
    :data:`PARQUET_GROUP_ROWS` rows, the last one of the frame shorter."""

    import pyarrow.parquet as pq

    def write(handle) -> None:
        writer: Any = None  # a pyarrow ParquetWriter, once the first piece is converted
        try:
            for frame in frames:
                for lo, hi in row_groups(len(frame)):
                    piece = frame.iloc[lo:hi]
                    schema = writer.schema if writer else None
                    table = _parquet_table(piece, precision, schema)
                    if writer is None:
                        writer = pq.ParquetWriter(handle, table.schema)
                    writer.write_table(table, row_group_size=PARQUET_GROUP_ROWS)
                    del table
        finally:
            if writer is not None:
                writer.close()

    if output is None or output == "-":
        if sys.stdout.isatty():
            raise OutputError("<stdout>", PARQUET_TTY)
        buffer = io.BytesIO()
        write(buffer)
        write_stdout([buffer.getvalue()])
        return
    _no_terminal(output)
    with atomic_output(output) as handle:
        write(handle)


def _no_terminal(output) -> None:
    """Binary output to ``/dev/stdout`` (or ``/dev/fd/N``) on a terminal: refused, as
    on standard output itself."""
    fd = descriptor(output)
    if fd is not None and os.isatty(fd):
        raise OutputError(output, PARQUET_TTY)


PARQUET_TTY = "-f parquet writes binary: give -o FILE or redirect standard output"


def parquet_bytes(frame: pd.DataFrame, precision: int | None = None) -> bytes:
    """The Parquet file of ``frame`` (no index): its column types as they are; with
    ``precision`` N each finite float (but :data:`EXACT_COLUMNS`) is the float64 nearest
    its ``%.Nf`` text, the value a reader of the tsv table written with N gets."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()  # pyarrow's default groups, named here: 1M rows
    pq.write_table(_parquet_table(frame, precision), sink, row_group_size=PARQUET_GROUP_ROWS)
    return sink.getvalue().to_pybytes()


def _parquet_table(frame: pd.DataFrame, precision: int | None = None, schema=None):
    """``frame`` as an Arrow table for Parquet (see :func:`parquet_bytes`); ``schema``:
    cast to it (the first table's, when a table is written frame by frame)."""
    import pandas as pd
    import pyarrow as pa

    if precision is not None:
        frame = frame.copy()
        for name in frame.columns:
            series = frame[name]
            if str(name) in EXACT_COLUMNS or not pd.api.types.is_float_dtype(series.dtype):
                continue
            values = series.to_numpy(dtype=np.float64)
            finite = np.isfinite(values)
            rounded = values.copy()
            if finite.any():
                text = fixed_text(values[finite], "tsv", precision)
                rounded[finite] = np.asarray(text.cast(pa.float64()), dtype=np.float64)
            frame[name] = rounded
    table = pa.Table.from_pandas(frame, preserve_index=False)
    # one dictionary index type for every frame of a table (categoricals of frames with
    # more or fewer categories would otherwise differ)
    fields = [
        pa.field(f.name, pa.dictionary(pa.int32(), f.type.value_type))
        if pa.types.is_dictionary(f.type)
        else f
        for f in table.schema
    ]
    table = table.cast(pa.schema(fields, metadata=table.schema.metadata))
    return table if schema is None else table.cast(schema)


class _StreamFailed(Exception):
    def __init__(self, error: Exception):
        self.error = error


def _on_terminal(chunk: bytes) -> bytes:
    """Whole lines of text as a terminal is shown them: control characters but line
    breaks and tabs escaped (:func:`prefeval.core.terminal.escaped`)."""
    text = chunk.decode("utf-8", "surrogateescape")
    return escaped(text, LINES).encode("utf-8", "surrogateescape")


def write_stdout(chunks) -> None:
    """Write byte chunks (whole lines) to standard output; a reader that went away
    (``| head``) stops the output quietly, like other Unix tools; any other failure is an
    OutputError.  On a terminal, control characters are shown escaped (:func:`_on_terminal`);
    elsewhere the bytes are written as they are."""
    stream = getattr(sys.stdout, "buffer", None)
    if stream is None:
        raise OutputError("<stdout>", "standard output is closed")

    def put(write, *args):  # a failure of the stream, not of making the chunks (an
        try:  # input error found while computing them passes through as it is)
            write(*args)
        except BrokenPipeError:
            raise
        except (OSError, ValueError) as error:
            raise _StreamFailed(error) from None

    shared = sys.stdout.isatty()  # the screen of the progress bar too, maybe
    try:
        for chunk in chunks:
            if shared:  # the bar cleared, the rows written, the bar drawn below them
                chunk = _on_terminal(chunk)
                with beside_bar():
                    put(stream.write, chunk)
                    put(stream.flush)
            else:
                put(stream.write, chunk)
        put(stream.flush)
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except _StreamFailed as failed:
        error = failed.error
        # the interpreter must not try (and fail) to flush it again at exit
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        raise OutputError("<stdout>", _reason(error)) from None


#: /dev/stdin, /dev/stdout, /dev/stderr and /dev/fd/N (or /proc/self/fd/N): names of a
#: file descriptor this process already has open
_STANDARD = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}
_FD_PATH = re.compile(r"^/(?:dev/fd|proc/self/fd|proc/(\d+)/fd)/(\d+)$")


def descriptor(path) -> int | None:
    """The open file descriptor ``path`` names (``/dev/stdout``, ``/dev/stderr``,
    ``/dev/fd/N``, ``/proc/self/fd/N``, or a symbolic link to one of them), else None."""
    current = os.path.abspath(os.fspath(path))
    for _ in range(40):  # a loop of links ends here
        if current in _STANDARD:
            return _STANDARD[current]
        match = _FD_PATH.match(current)
        if match and match.group(1) in (None, str(os.getpid())):
            return int(match.group(2))
        if not os.path.islink(current):
            return None
        target = os.readlink(current)
        current = os.path.normpath(os.path.join(os.path.dirname(current), target))
    return None


def output_target(path: str) -> str:
    """The file ``path`` writes to: a symbolic link's target, not the link."""
    return os.path.realpath(path) if os.path.islink(path) else os.path.abspath(path)


def check_output(path: str):
    """Raise OutputError unless ``path`` can be written: called before any computing,
    and again when the file is opened.  Returns (the file written, its ``os.stat`` or
    None when it does not exist yet, or when ``path`` names an open file descriptor).

    One rule for every file prefeval writes (tables, figures, reports, their side
    files): a name of an open descriptor (``/dev/stdout``...) must be open for writing;
    a path that exists must not be a folder, and must be writable by this user (a
    read-only file, or another user's, is never replaced); a regular file (or a new
    one) needs a writable folder, since it is replaced by a renamed temporary file (in a
    sticky folder such as /tmp, a file of another user cannot be replaced: refused); a
    device or a FIFO is written through."""
    if os.fspath(path) == "":
        raise OutputError("''", "an empty file name")
    fd = descriptor(path)
    if fd is not None:
        _check_descriptor(path, fd)
        return os.fspath(path), None
    target = output_target(path)
    try:
        info = os.stat(target)
    except FileNotFoundError:
        info = None
    except OSError as error:
        raise OutputError(path, _reason(error)) from None
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise OutputError(path, "is a directory")
    if info is not None and not _may(target, os.W_OK):
        raise OutputError(path, "permission denied (the file is read-only for this user)")
    if info is not None and not stat.S_ISREG(info.st_mode):
        return target, info
    folder = os.path.dirname(target)
    if not os.path.isdir(folder):
        raise OutputError(path, f"no such directory {folder!r}")
    if not _may(folder, os.W_OK | os.X_OK):
        raise OutputError(path, f"directory {folder!r} is not writable")
    if info is not None and not _may_replace(folder, info):
        raise OutputError(
            path,
            f"it belongs to another user and directory {folder!r} is sticky "
            "(only its owner may replace or remove it): write another file",
        )
    return target, info


def _may_replace(folder: str, info: os.stat_result) -> bool:
    """Whether a rename may replace the file ``info`` in ``folder``: in a sticky folder
    (/tmp, mode 1777) only the file's owner, the folder's owner and root may."""
    uid = os.geteuid() if hasattr(os, "geteuid") else None
    if uid is None or uid == 0 or info.st_uid == uid:
        return True
    try:
        parent = os.stat(folder)
    except OSError:
        return True  # the folder's own failure is reported when the file is written
    return not parent.st_mode & stat.S_ISVTX or parent.st_uid == uid


def _may(path: str, mode: int) -> bool:
    """Whether this process (its effective user) may access ``path`` in ``mode``."""
    effective = os.access in os.supports_effective_ids
    return os.access(path, mode, effective_ids=effective)


def _check_descriptor(path, fd: int) -> None:
    try:
        import fcntl

        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    except ImportError:
        return
    except OSError:
        raise OutputError(path, f"file descriptor {fd} is not open") from None
    if flags & os.O_ACCMODE not in (os.O_WRONLY, os.O_RDWR):
        raise OutputError(path, f"file descriptor {fd} is not open for writing")


# ------------------------------------------------------------- temporary files

#: the name of prefeval's temporary files (``.prefeval-`` and random letters)
TEMP_NAME = re.compile(r"^\.prefeval-[A-Za-z0-9_]+\.tmp$")
#: a temporary file untouched this long, and not locked, was left by a killed writer
STALE_SECONDS = 60


def _flock():
    try:
        import fcntl
    except ImportError:  # no flock (Windows): temporaries are never swept
        return None
    return fcntl


class Replacement:
    """The one way prefeval replaces a file: a temporary file ``.prefeval-XXXX.tmp`` in
    the target's folder (given as an open descriptor of the folder, so a symbolic link
    swapped in meanwhile is never followed), held under an exclusive ``flock`` while it
    is written, then flushed, fsynced, given ``mode`` and renamed over ``name``;
    removed on any failure.  A writer killed outright (SIGKILL, the OOM killer) cannot
    remove its temporary file; its lock dies with it, so a later writer in the folder
    removes the file (:func:`sweep_temporaries`)."""

    def __init__(self, folder_fd: int, name: str, mode: int):
        import secrets

        self.folder_fd, self.name, self.mode = folder_fd, name, mode
        self.tmp: str | None = None
        self.handle: io.BufferedWriter | None = None
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        flags |= getattr(os, "O_CLOEXEC", 0)
        fd = None
        try:  # a signal at any point here (SIGINT, SIGTERM) removes the file made
            for _ in range(100):
                # named before it is made: an interruption just after os.open finds it
                self.tmp = f".prefeval-{secrets.token_hex(6)}.tmp"
                try:
                    fd = os.open(self.tmp, flags, 0o600, dir_fd=folder_fd)
                    break
                except FileExistsError:
                    self.tmp = None
            else:  # pragma: no cover - 100 collisions of 48 random bits
                raise FileExistsError("no free temporary file name")
            fcntl = _flock()
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self.handle = os.fdopen(fd, "wb")
        except BaseException:
            if self.handle is None and fd is not None:
                os.close(fd)
            self.abandon()
            raise

    def commit(self) -> None:
        """Flush, fsync and rename the temporary file over the target."""
        try:
            # both set by __init__ (which raises otherwise) until committed or abandoned
            assert self.handle is not None and self.tmp is not None
            self.handle.flush()
            os.fsync(self.handle.fileno())
            os.chmod(self.handle.fileno(), self.mode)
            # renamed while still locked: a sweeper never sees it unlocked under its name
            os.replace(self.tmp, self.name, src_dir_fd=self.folder_fd, dst_dir_fd=self.folder_fd)
            self.tmp = None
            self.handle.close()
        except BaseException:
            self.abandon()
            raise

    def abandon(self) -> None:
        """Close the handle and remove the temporary file, whatever state they are in."""
        handle = self.handle
        if handle is not None:
            try:
                handle.close()
            except OSError:
                pass
        if self.tmp is not None:
            try:
                os.unlink(self.tmp, dir_fd=self.folder_fd)
            except OSError:
                pass
            self.tmp = None


def sweep_temporaries(folder_fd: int, names=None) -> int:
    """Remove the temporary files that killed prefeval writers left in a folder (an open
    descriptor; ``names``: its entries, when already listed); returns how many.  Only a
    file that is provably stale and ours is removed: named like prefeval's temporaries,
    a regular file of this user, untouched for :data:`STALE_SECONDS`, and not locked (a
    live writer holds a lock on its temporary file until it is renamed; the kernel
    drops the lock when the writer dies)."""
    fcntl = _flock()
    if fcntl is None:
        return 0
    if names is None:
        try:
            names = os.listdir(folder_fd)
        except OSError:
            return 0
    uid, limit, removed = os.geteuid(), time.time() - STALE_SECONDS, 0
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    for name in names:
        if not TEMP_NAME.match(name):
            continue
        try:
            info = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
            if not stat.S_ISREG(info.st_mode) or info.st_uid != uid or info.st_mtime > limit:
                continue
            fd = os.open(name, flags, dir_fd=folder_fd)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # fails while a writer lives
            now = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
            if os.path.samestat(now, os.fstat(fd)):
                os.unlink(name, dir_fd=folder_fd)
                removed += 1
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed


# ----------------------------------------------------------- temporary folders

#: the name of prefeval's temporary folders (``prefeval-KIND-`` and random letters)
TEMP_FOLDER = re.compile(r"^prefeval-[a-z]+-[A-Za-z0-9_]+$")
#: the file of a temporary folder its process holds locked while it lives
FOLDER_LOCK = ".prefeval-lock"


class TemporaryFolder:
    """The one way prefeval makes a temporary folder (``tempfile.TemporaryDirectory``'s
    :attr:`name` and :meth:`cleanup`, and a context manager): ``prefeval-KIND-XXXX`` in
    the system's temporary folder (``$TMPDIR``), mode 0700, holding a file
    :data:`FOLDER_LOCK` under an exclusive ``flock`` while the process lives; removed by
    :meth:`cleanup` on success, on an error and on an interrupt alike.  A process
    killed outright (SIGKILL, the OOM killer) cannot remove it; its lock dies with it,
    so the next temporary folder made by a prefeval command of this user removes it
    first (:func:`sweep_folders`), as writers do with temporary files."""

    def __init__(self, kind: str):
        import tempfile

        sweep_folders(tempfile.gettempdir())
        self.name = tempfile.mkdtemp(prefix=f"prefeval-{kind}-")
        held: list[int] = []  # the lock's descriptor, once open
        # removed at the latest when the interpreter exits (an exit that skipped cleanup)
        self._finalizer = weakref.finalize(self, _remove_folder, self.name, held)
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
            path = os.path.join(self.name, FOLDER_LOCK)
            held.append(os.open(path, flags | getattr(os, "O_CLOEXEC", 0), 0o600))
            fcntl = _flock()
            if fcntl is not None:
                fcntl.flock(held[0], fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BaseException:
            self.cleanup()
            raise

    def __enter__(self) -> TemporaryFolder:
        return self

    def __exit__(self, *exc) -> None:
        self.cleanup()

    def cleanup(self) -> None:
        """Remove the folder and what it holds (locked until it is gone); again: nothing."""
        self._finalizer()


def _remove_folder(name: str, held: list[int]) -> None:
    """Remove the temporary folder ``name``, then let go of its lock (``held``)."""
    import shutil

    shutil.rmtree(name, ignore_errors=True)
    for fd in held:
        os.close(fd)
    held.clear()


def sweep_folders(parent: str) -> int:
    """Remove the temporary folders that killed prefeval commands left in ``parent``
    (:class:`TemporaryFolder`); returns how many.  Only a folder that is provably stale
    and ours is removed: named like prefeval's temporary folders, a folder (not a link)
    of this user, untouched for :data:`STALE_SECONDS`, and not locked (its process
    holds :data:`FOLDER_LOCK` locked while it lives; a folder without it was left
    before the lock was made)."""
    import shutil

    fcntl = _flock()
    if fcntl is None:
        return 0
    try:
        parent_fd = os.open(parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | os.O_CLOEXEC)
    except OSError:
        return 0
    removed = 0
    try:
        names = [name for name in os.listdir(parent_fd) if TEMP_FOLDER.match(name)]
        uid, limit = os.geteuid(), time.time() - STALE_SECONDS
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        for name in names:
            try:
                info = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
                if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid or info.st_mtime > limit:
                    continue
                folder = os.open(name, flags | os.O_DIRECTORY, dir_fd=parent_fd)
            except OSError:
                continue
            lock = None
            try:
                try:
                    lock = os.open(FOLDER_LOCK, flags, dir_fd=folder)
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # fails while it lives
                except FileNotFoundError:
                    pass
                now = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
                if os.path.samestat(now, os.fstat(folder)):
                    if sys.version_info >= (3, 11):
                        shutil.rmtree(name, dir_fd=parent_fd)
                    else:  # no dir_fd before Python 3.11
                        shutil.rmtree(os.path.join(parent, name))
                    removed += 1
            except OSError:
                pass
            finally:
                if lock is not None:
                    os.close(lock)
                os.close(folder)
    except OSError:
        pass
    finally:
        os.close(parent_fd)
    return removed


def _open_descriptor(fd: int):
    """A binary file on a duplicate of the open descriptor ``fd`` (``-o /dev/stdout``):
    it writes in the descriptor's own mode (appending stays appending) and closing it
    leaves ``fd`` open.  Python's own stdout and stderr are flushed first, so that what
    they hold comes before."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    return os.fdopen(os.dup(fd), "wb")


class atomic_output:
    """Context manager: a binary handle for writing the file ``path``; the one opener of
    every file prefeval writes (see :func:`check_output` for its rule).

    A regular file (or a new one) is written to a :class:`Replacement`, renamed over it
    only when complete (stale temporaries of killed writers in the folder are swept
    first); a symbolic link's target is written (the link stays); an existing path that
    is not a regular file (a device such as /dev/null, a FIFO) is written through
    directly, never replaced; ``/dev/stdout``, ``/dev/stderr`` and ``/dev/fd/N`` write to
    the already open descriptor, in its mode (appending to a log stays appending).
    Failures raise :class:`OutputError`."""

    def __init__(self, path: str):
        self.path = os.fspath(path)
        self.replacement: Replacement | None = None
        self.handle: io.BufferedWriter | None = None
        self.folder_fd: int | None = None
        self.stream_fd: int | None = None

    def __enter__(self):
        self.target, info = check_output(self.path)
        try:
            self.stream_fd = descriptor(self.path)
            if self.stream_fd is not None:
                self.handle = _open_descriptor(self.stream_fd)
                return self.handle
            if info is not None and not stat.S_ISREG(info.st_mode):
                self.handle = open(self.target, "wb")  # noqa: SIM115 - closed in __exit__
                return self.handle
            mode = stat.S_IMODE(info.st_mode) if info is not None else 0o666 & ~_umask()
            folder = os.path.dirname(self.target)
            self.folder_fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
            sweep_temporaries(self.folder_fd)
            self.replacement = Replacement(self.folder_fd, os.path.basename(self.target), mode)
            self.handle = self.replacement.handle
        except OSError as error:
            self._abandon()
            raise OutputError(self.path, _reason(error)) from None
        except BaseException:  # a signal before the with block is entered
            self._abandon()
            raise
        return self.handle

    def _abandon(self) -> None:
        """Close the handle and remove the temporary file, whatever state they are in."""
        if self.replacement is not None:
            self.replacement.abandon()
        elif self.handle is not None:
            try:
                self.handle.close()
            except OSError:
                pass
        self._close_folder()

    def _quiet(self) -> None:
        """A reader that went away (``| head``): the descriptor and its duplicate are
        pointed at /dev/null, so that nothing buffered fails again (at exit)."""
        # called for a descriptor's output (``stream_fd``) once entered (``handle``)
        assert self.stream_fd is not None and self.handle is not None
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, self.stream_fd)
                os.dup2(devnull, self.handle.fileno())
            finally:
                os.close(devnull)
        except (OSError, ValueError):
            pass

    def _close_folder(self) -> None:
        if self.folder_fd is not None:
            os.close(self.folder_fd)
            self.folder_fd = None

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            if self.stream_fd is not None and issubclass(exc_type, BrokenPipeError):
                self._quiet()  # | head: the output ends quietly, as on stdout
                self._abandon()
                return True
            self._abandon()
            if issubclass(exc_type, OSError) and not isinstance(exc, OutputError):
                raise OutputError(self.path, _reason(exc)) from None
            return False
        try:
            if self.replacement is not None:
                self.replacement.commit()
            else:
                self.handle.flush()
                self.handle.close()
            self._close_folder()
        except OSError as error:
            if self.stream_fd is not None and isinstance(error, BrokenPipeError):
                self._quiet()
                self._abandon()
                return False
            self._abandon()
            raise OutputError(self.path, _reason(error)) from None
        except BaseException:
            self._abandon()
            raise
        return False


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
