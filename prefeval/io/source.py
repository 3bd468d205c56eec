"""Where every input's bytes come from: the one function that opens a qrels, run or
table path (:func:`read_raw`: standard input and other streams read once per
command), gzip decompression, format sniffing by magic bytes, and run names from
paths."""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import threading
import zlib

from ..core.errors import InputError

GZIP_MAGIC = b"\x1f\x8b"

PARQUET_MAGIC = b"PAR1"


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

    data = decompress(raw, path)
    if data is not raw and is_parquet(data):
        raise InputError(
            path,
            None,
            "a gzip-compressed Parquet file: Parquet compresses its columns itself; "
            "give the Parquet file uncompressed",
        )
    return data


BOM = b"\xef\xbb\xbf"


def strip_bom(data: bytes) -> bytes:
    """``data`` without a leading UTF-8 byte order mark."""
    return data[len(BOM) :] if data.startswith(BOM) else data


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


def is_frame(obj) -> bool:
    return type(obj).__name__ == "DataFrame" and hasattr(obj, "columns")


def is_parquet(data: bytes) -> bool:
    """Whether ``data`` is a Parquet file: ``PAR1`` at its start and at its end."""
    return len(data) >= 12 and data[:4] == PARQUET_MAGIC and data[-4:] == PARQUET_MAGIC
