"""Table writers: tsv (with header), csv, jsonl and Parquet, to stdout or atomically to
a file.

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

import json
import os
import sys
import tempfile
from collections.abc import Iterator

import numpy as np
import pandas as pd

FORMATS = ("tsv", "csv", "jsonl")
#: binary formats, written by :func:`write_table` only (never to a terminal)
BINARY_FORMATS = ("parquet",)
#: float columns that echo a parameter (discpower's alpha, robustness' level): never rounded
EXACT_COLUMNS = ("alpha", "level")
_CHUNK = 1 << 20  # rows per formatting chunk


def _csv_quote(text: str) -> str:
    if any(ch in text for ch in ',"\n\r'):
        return '"' + text.replace('"', '""') + '"'
    return text


def fixed_text(values: np.ndarray, fmt: str, precision: int):
    """Floats as ``%.{precision}f`` text (a pyarrow string array): the correctly rounded
    decimal, as C's printf and trec_eval write it; a value that rounds to zero is
    written without a minus sign.  NaN and infinities as in :func:`float_text`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    values = np.asarray(values, dtype=np.float64)
    finite = np.isfinite(values)
    # each distinct value is formatted once: tables repeat few values many times
    distinct, index = np.unique(np.where(finite, values, 0.0), return_inverse=True)
    zero = f"{0.0:.{precision}f}"
    texts = [f"{v:.{precision}f}" for v in distinct.tolist()]
    texts = [zero if t.lstrip("-") == zero else t for t in texts]
    text = pc.take(pa.array(texts, pa.string()), pa.array(index.reshape(-1)))
    if not finite.all():
        exact = float_text(np.where(finite, 0.0, values), fmt)
        text = pc.if_else(pa.array(finite), text, exact)
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
    text = pa.array(np.where(finite, values, 0.0)).cast(pa.string())
    size = np.abs(values)
    integral = finite & (values == np.floor(values)) & (size < 1e9)
    if integral.any():
        text = pc.if_else(pa.array(integral), pc.binary_join_element_wise(text, ".0", ""), text)
    # where either formatter uses exponent notation (Python's repr below 1e-4 and from
    # 1e16, Arrow's from about 1e12) the digits agree but not the notation: format those
    # rare values one by one with repr
    odd = finite & (((size < 1e-4) & (size > 0)) | (size >= 1e9))
    if odd.any():
        texts = pa.array([repr(float(v)) for v in values[odd]], pa.string())
        text = pc.replace_with_mask(text, pa.array(odd), texts)
    if not finite.all():
        if fmt == "jsonl":
            special = np.full(len(values), "null", dtype=object)
        else:
            special = np.where(np.isnan(values), "", np.where(values > 0, "inf", "-inf"))
        text = pc.if_else(pa.array(finite), text, pa.array(special.astype(object), pa.string()))
    return text


def _encoded(series: pd.Series) -> tuple[np.ndarray, list[str]]:
    """Column as (codes, distinct strings); a missing value of a nullable integer or
    boolean column (pandas ``Int64``, ``boolean``) has the text None."""
    nullable = pd.api.types.is_extension_array_dtype(series.dtype) and (
        pd.api.types.is_bool_dtype(series.dtype) or pd.api.types.is_integer_dtype(series.dtype)
    )
    if nullable:
        missing = series.isna().to_numpy()
        numpy_dtype = series.dtype.numpy_dtype
        codes, texts = _encoded(series.fillna(numpy_dtype.type(0)).astype(numpy_dtype))
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
    return codes.astype(np.int64), [str(x) for x in uniq]


def _json_token(series: pd.Series, text: str) -> str:
    """JSON text of one distinct value of ``series``."""
    if pd.api.types.is_bool_dtype(series.dtype) or pd.api.types.is_integer_dtype(series.dtype):
        return text
    return json.dumps(text, ensure_ascii=False)


def iter_chunks(
    frame: pd.DataFrame, fmt: str, header: bool = True, precision: int | None = None
) -> Iterator[bytes]:
    """The table as encoded text chunks; ``precision`` N writes floats as ``%.Nf``
    (except :data:`EXACT_COLUMNS`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    names = [str(c) for c in frame.columns]
    if fmt == "tsv" and header:
        yield ("\t".join(names) + "\n").encode()
    elif fmt == "csv" and header:
        yield (",".join(_csv_quote(n) for n in names) + "\n").encode()
    encoded = []
    for name in frame.columns:
        series = frame[name]
        codes, texts = _encoded(series)
        if texts is None:  # floats: formatted chunk by chunk
            digits = None if str(name) in EXACT_COLUMNS else precision
            encoded.append((codes, digits))
            continue
        if fmt == "csv":
            texts = ["" if t is None else _csv_quote(t) for t in texts]
        elif fmt == "jsonl":
            texts = ["null" if t is None else _json_token(series, t) for t in texts]
        else:
            texts = ["" if t is None else t for t in texts]
        encoded.append((codes, pa.array(texts, pa.string())))
    n = len(frame)
    for start in range(0, n, _CHUNK):
        stop = min(n, start + _CHUNK)
        cols = [
            _float_column(codes[start:stop], fmt, texts)
            if texts is None or isinstance(texts, int)
            else pc.take(texts, pa.array(codes[start:stop]))
            for codes, texts in encoded
        ]
        if fmt == "jsonl":
            pieces = []
            for i, name in enumerate(names):
                lead = "{" if i == 0 else ", "
                pieces.append(pa.scalar(lead + json.dumps(name) + ": "))
                pieces.append(cols[i])
            pieces.append(pa.scalar("}\n"))
            lines = pc.binary_join_element_wise(*pieces, "")
        else:
            sep = "\t" if fmt == "tsv" else ","
            lines = pc.binary_join_element_wise(*cols, sep)
            lines = pc.binary_join_element_wise(lines, pa.scalar("\n"), "")
        yield _string_data(lines)


def _float_column(values: np.ndarray, fmt: str, precision: int | None):
    if precision is None:
        return float_text(values, fmt)
    return fixed_text(values, fmt, precision)


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


class OutputError(OSError):
    """The output could not be written; the CLI prints ``prefeval: cannot write FILE:
    reason`` and exits with status 2."""

    def __init__(self, path: str, reason: str):
        self.path, self.reason = str(path), reason
        super().__init__(f"cannot write {self.path}: {reason}")

    def __str__(self) -> str:
        return f"cannot write {self.path}: {self.reason}"


def _reason(error: BaseException) -> str:
    return getattr(error, "strerror", None) or str(error) or type(error).__name__


def write_table(
    frame: pd.DataFrame, output: str | None = None, fmt: str = "tsv", precision: int | None = None
) -> None:
    """Write ``frame`` to ``output`` (atomically) or, when None or ``-``, to stdout;
    ``precision`` N writes floats as ``%.Nf`` (default: shortest round-trip form).
    ``fmt`` ``parquet``: see :func:`parquet_bytes` (standard output must not be a
    terminal)."""
    if fmt in BINARY_FORMATS:
        if output is None or output == "-":
            if sys.stdout.isatty():
                raise OutputError("<stdout>", PARQUET_TTY)
            write_stdout([parquet_bytes(frame, precision)])
            return
        with atomic_output(output) as handle:
            handle.write(parquet_bytes(frame, precision))
        return
    if output is None or output == "-":
        write_stdout(iter_chunks(frame, fmt, precision=precision))
        return
    with atomic_output(output) as handle:
        for chunk in iter_chunks(frame, fmt, precision=precision):
            handle.write(chunk)


def write_frames(
    frames, output: str | None = None, fmt: str = "tsv", precision: int | None = None
) -> None:
    """:func:`write_table` of the rows of ``frames`` (an iterable of DataFrames with the
    same columns) one after the other, one header: a table too large to hold whole is
    written as it is computed, still atomically."""

    if fmt in BINARY_FORMATS:
        _write_parquet_frames(frames, output, precision)
        return

    def chunks():
        for i, frame in enumerate(frames):
            yield from iter_chunks(frame, fmt, header=i == 0, precision=precision)

    if output is None or output == "-":
        write_stdout(chunks())
        return
    with atomic_output(output) as handle:
        for chunk in chunks():
            handle.write(chunk)


#: rows of a Parquet row group: a frame is converted and written this many rows at a
#: time (a frame of more rows than that is converted piece by piece, not whole)
PARQUET_GROUP_ROWS = 1 << 20


def row_groups(rows: int) -> list[tuple[int, int]]:
    """The (start, stop) rows of the row groups a frame of ``rows`` rows is written in:
    :data:`PARQUET_GROUP_ROWS` each, the last shorter; one empty group for no rows."""
    size = PARQUET_GROUP_ROWS
    return [(lo, min(lo + size, rows)) for lo in range(0, max(1, rows), size)]


def _write_parquet_frames(frames, output, precision) -> None:
    """One Parquet file of ``frames``, written as they come (atomically to a file; to
    standard output once complete): each frame in row groups of
    :data:`PARQUET_GROUP_ROWS` rows, the last one of the frame shorter."""
    import io

    import pyarrow.parquet as pq

    def write(handle) -> None:
        writer = None
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
    with atomic_output(output) as handle:
        write(handle)


PARQUET_TTY = "-f parquet writes binary: give -o FILE or redirect standard output"


def parquet_bytes(frame: pd.DataFrame, precision: int | None = None) -> bytes:
    """The Parquet file of ``frame`` (no index): its column types as they are; with
    ``precision`` N each finite float (but :data:`EXACT_COLUMNS`) is the float64 nearest
    its ``%.Nf`` text, the value a reader of the tsv table written with N gets."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(_parquet_table(frame, precision), sink)
    return sink.getvalue().to_pybytes()


def _parquet_table(frame: pd.DataFrame, precision: int | None = None, schema=None):
    """``frame`` as an Arrow table for Parquet (see :func:`parquet_bytes`); ``schema``:
    cast to it (the first table's, when a table is written frame by frame)."""
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


def write_stdout(chunks) -> None:
    """Write byte chunks to standard output; a reader that went away (``| head``) stops
    the output quietly, like other Unix tools; any other failure is an OutputError."""
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

    try:
        for chunk in chunks:
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


def output_target(path: str) -> str:
    """The file ``path`` writes to: a symbolic link's target, not the link."""
    return os.path.realpath(path) if os.path.islink(path) else os.path.abspath(path)


def check_output(path: str):
    """Raise OutputError unless ``path`` can be written: called before any computing.
    Returns (the file written, its ``os.stat`` or None when it does not exist yet).

    A path that exists must not be a folder; a regular file (or a new one) needs a
    writable folder, since it is replaced by a renamed temporary file; a device or a
    FIFO is written through and needs to be writable itself."""
    import stat

    target = output_target(path)
    try:
        info = os.stat(target)
    except FileNotFoundError:
        info = None
    except OSError as error:
        raise OutputError(path, _reason(error)) from None
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise OutputError(path, "is a directory")
    if info is not None and not stat.S_ISREG(info.st_mode):
        if not os.access(target, os.W_OK):
            raise OutputError(path, "permission denied")
        return target, info
    folder = os.path.dirname(target)
    if not os.path.isdir(folder):
        raise OutputError(path, f"no such directory {folder!r}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(path, f"directory {folder!r} is not writable")
    return target, info


class atomic_output:
    """Context manager: a binary handle on a temporary file in the target's folder,
    flushed, fsynced and renamed to the target on success, removed on any failure or
    interruption.  A symbolic link's target is written (the link stays); an existing
    path that is not a regular file (a device such as /dev/null, a FIFO) is written
    through directly, never replaced.  Failures raise :class:`OutputError`."""

    def __init__(self, path: str):
        self.path = os.fspath(path)
        self.tmp = None
        self.handle = None

    def __enter__(self):
        import stat

        self.target, info = check_output(self.path)
        try:
            if info is not None and not stat.S_ISREG(info.st_mode):
                self.handle = open(self.target, "wb")  # noqa: SIM115 - closed in __exit__
                return self.handle
            self.mode = stat.S_IMODE(info.st_mode) if info is not None else 0o666 & ~_umask()
            folder = os.path.dirname(self.target)
            fd, self.tmp = tempfile.mkstemp(prefix=".prefeval-", suffix=".tmp", dir=folder)
            self.handle = os.fdopen(fd, "wb")
        except OSError as error:
            self._abandon()
            raise OutputError(self.path, _reason(error)) from None
        return self.handle

    def _abandon(self) -> None:
        """Close the handle and remove the temporary file, whatever state they are in."""
        if self.handle is not None:
            try:
                self.handle.close()
            except OSError:
                pass
        if self.tmp is not None:
            try:
                os.unlink(self.tmp)
            except OSError:
                pass
            self.tmp = None

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self._abandon()
            if issubclass(exc_type, OSError) and not isinstance(exc, OutputError):
                raise OutputError(self.path, _reason(exc)) from None
            return False
        try:
            self.handle.flush()
            if self.tmp is not None:
                os.fsync(self.handle.fileno())
            self.handle.close()
            if self.tmp is not None:
                os.chmod(self.tmp, self.mode)
                os.replace(self.tmp, self.target)
                self.tmp = None
        except OSError as error:
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
