"""Where every input's bytes come from: the functions that open a qrels, run or table
path (:func:`read_raw`, and :func:`stored` for the runs, each opened once per command),
gzip decompression, format sniffing by magic bytes, and run names from paths."""

from __future__ import annotations

import io
import os
import stat
import sys
import threading
import weakref
import zlib
from typing import overload

from ..core.errors import InputError

GZIP_MAGIC = b"\x1f\x8b"

PARQUET_MAGIC = b"PAR1"


#: the path that stands for standard input (one input per command, as trec_eval 10)
STDIN = "-"

_stdin_data: bytes | None = None


_stdin_lock = threading.Lock()


def _is_special(path: str) -> bool:
    """Whether ``path`` exists and is neither a regular file nor a folder: a pipe, a
    FIFO, ``/dev/fd/N``, a character device."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return False
    return not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode))


def is_stream(path: str | os.PathLike) -> bool:
    """Whether ``path`` is standard input (``-``) or another stream (a pipe, a FIFO,
    ``/dev/fd/N``, a character device): something that can be read once only, so it is
    read whole, once (:func:`read_raw`), and never by path on a Dask worker."""
    path = os.fspath(path)
    return path == STDIN or _is_special(path)


def is_input(path: str | os.PathLike) -> bool:
    """Whether ``path`` is something a reader opens: standard input (``-``), or a path
    that exists, its links followed, and is not a folder (a regular file, a pipe, a
    FIFO, ``/dev/fd/N``, a character device); a folder or a dangling link is not."""
    path = os.fspath(path)
    return path == STDIN or os.path.isfile(path) or _is_special(path)


def read_raw(path: str | os.PathLike) -> bytes:
    """The bytes of ``path`` as stored (possibly gzip-compressed), read whole.

    ``-`` is standard input, read once per process (its bytes kept for a later call).
    Any other stream (a pipe such as ``<(zcat run.gz)``, a FIFO, ``/dev/fd/N``:
    :func:`is_stream`) can be read once only: a command reads each input once (its
    qrels and tables here, its runs in its :class:`~prefeval.io.runs.RunSet`), so a
    FIFO written again for the next command is read anew."""
    global _stdin_data
    path = os.fspath(path)
    if path == STDIN:
        with _stdin_lock:
            if _stdin_data is None:
                try:
                    _stdin_data = sys.stdin.buffer.read()
                except (OSError, AttributeError, ValueError) as error:
                    raise InputError(
                        "<stdin>", None, f"cannot read standard input: {error}"
                    ) from None
            return _stdin_data
    return _read_file(path)


def stored(path: str | os.PathLike, whole: int = 0):
    """The bytes of ``path`` as stored, ``path`` opened once: standard input and other
    streams (:func:`is_stream`) read whole (:func:`read_raw`), a regular file of at most
    ``whole`` bytes too; a larger one a :class:`StoredFile` (its bytes read when used,
    from the system's page cache, not held by the process).  A file that cannot be
    opened is an :class:`InputError`."""
    path = os.fspath(path)
    if is_stream(path):
        return read_raw(path)
    try:
        with open(path, "rb") as handle:
            if os.fstat(handle.fileno()).st_size > whole:
                return StoredFile(path, handle.fileno())
            return handle.read()
    except OSError as error:
        raise InputError(path, None, f"cannot read file: {error.strerror or error}") from None


#: bytes a :class:`StoredFile` reads at a time
_READ = 1 << 26


class StoredFile:
    """A regular file opened once, read as its bytes are used: by length, slices and
    ``bytes()`` as :class:`bytes` is, or as a file (:meth:`reader`); each read made
    at an offset (``pread``, safe from any thread) and checked.  A file changed while it
    is read (truncated, rewritten or grown in place: its size or modification time not
    those it had when opened) is an :class:`InputError`; not a crash, as a memory map of
    a file truncated meanwhile is (SIGBUS)."""

    def __init__(self, path: str, fd: int):
        self.path = path
        self._fd = os.dup(fd)
        self._finalizer = weakref.finalize(self, os.close, self._fd)
        info = os.fstat(self._fd)
        self._size = info.st_size
        self._identity = (info.st_size, info.st_mtime_ns)

    def __len__(self) -> int:
        return self._size

    @overload
    def __getitem__(self, key: int) -> int: ...
    @overload
    def __getitem__(self, key: slice) -> bytes: ...
    def __getitem__(self, key: int | slice) -> int | bytes:
        if isinstance(key, int):
            at = key + self._size if key < 0 else key
            if not 0 <= at < self._size:
                raise IndexError("StoredFile index out of range")
            return self.read(at, 1)[0]
        if not isinstance(key, slice):
            raise TypeError(f"StoredFile indices must be integers or slices, not {type(key)}")
        start, stop, step = key.indices(self._size)
        data = self.read(start, max(0, stop - start))
        return data if step == 1 else data[::step]

    def __bytes__(self) -> bytes:
        return self.read(0, self._size)

    def read(self, offset: int, size: int) -> bytes:
        """``size`` bytes from ``offset`` (within the file's size when opened)."""
        size = max(0, min(size, self._size - offset))
        parts = []
        got = 0
        try:
            while got < size:
                part = _pread(self._fd, min(size - got, _READ), offset + got)
                if not part:
                    break
                parts.append(part)
                got += len(part)
            info = os.fstat(self._fd)
        except OSError as error:
            raise InputError(self.path, None, f"cannot read file: {error.strerror}") from None
        if got < size or (info.st_size, info.st_mtime_ns) != self._identity:
            raise InputError(self.path, None, "changed while being read")
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def reader(self) -> _StoredReader:
        """The file as a binary file object of its own position (for Arrow's readers)."""
        return _StoredReader(self)

    def close(self) -> None:
        self._finalizer()


_seeking = threading.Lock()


def _pread(fd: int, size: int, offset: int) -> bytes:
    """``os.pread``, or where there is none (Windows) a seek and a read, one thread at a
    time."""
    if hasattr(os, "pread"):
        return os.pread(fd, size, offset)
    with _seeking:
        os.lseek(fd, offset, os.SEEK_SET)
        return os.read(fd, size)


class _StoredReader(io.RawIOBase):
    """A :class:`StoredFile` read as a file: ``read``, ``seek``, ``tell`` (its reads
    checked as the StoredFile's are)."""

    def __init__(self, data: StoredFile):
        super().__init__()
        self._data, self._at = data, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._at, os.SEEK_END: len(self._data)}[whence]
        self._at = max(0, base + offset)
        return self._at

    def tell(self) -> int:
        return self._at

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            size = len(self._data) - self._at
        data = self._data.read(self._at, size)
        self._at += len(data)
        return data

    def readinto(self, buffer) -> int:
        data = self.read(len(buffer))
        memoryview(buffer).cast("B")[: len(data)] = data
        return len(data)


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
    bomb) is an error, not a crash (:func:`gunzip_blocks`)."""
    if data[:2] != GZIP_MAGIC:
        return data
    return b"".join(gunzip_blocks(data, path))


#: compressed bytes given to the decompressor at a time
_GZIP_INPUT = 1 << 20


def gunzip_blocks(data, path: str, size: int = 1 << 26):
    """The text of gzip-compressed ``data`` (bytes or a :class:`StoredFile`; every member
    of a multi-member file) in blocks of at most ``size`` bytes, as it is decompressed: the
    errors of a corrupt or truncated file, of bytes after a member that start no other
    member (:func:`_check_trailing`), and of a file decompressing to more than
    :func:`memory_limit` bytes, come when the decompression reaches them."""
    limit = memory_limit()
    total, at, end = 0, 0, len(data)
    try:
        while at < end:
            if at and data[at : at + 2] != GZIP_MAGIC:
                _check_trailing(data, at, path)
                break
            inflater = zlib.decompressobj(wbits=31)
            while not inflater.eof:
                if at >= end:
                    raise InputError(path, None, "corrupt gzip data: truncated file")
                pending = data[at : at + _GZIP_INPUT]
                at += len(pending)
                while pending:
                    block = inflater.decompress(pending, size)
                    total += len(block)
                    if total > limit:
                        raise InputError(
                            path,
                            None,
                            f"decompresses to more than {limit >> 20} MiB, half of this "
                            "machine's memory; decompress it elsewhere or split it",
                        )
                    if block:
                        yield block
                    pending = inflater.unconsumed_tail
                    if inflater.eof:
                        break
            at -= len(inflater.unused_data)  # the bytes after this member
    except zlib.error as error:
        raise InputError(path, None, f"corrupt gzip data: {error}") from None


def _check_trailing(data, at: int, path: str) -> None:
    """Bytes from ``at`` on, after a gzip member, that start no other member: zero bytes
    to the end (a block device's or tar's padding) are ignored, as ``gzip -d`` ignores
    them; anything else (a log line, a second download appended to a partial one) is
    an :class:`InputError`, where ``gzip -d`` warns and stops, dropping the members
    after it."""
    for start in range(at, len(data), _GZIP_INPUT):
        if bytes(data[start : start + _GZIP_INPUT]).strip(b"\0"):
            raise InputError(
                path,
                None,
                f"trailing garbage after gzip data at byte {at}: not a gzip member "
                "(gzip -d stops there too); repair or recompress the file",
            )


def read_bytes(path: str | os.PathLike) -> bytes:
    """The whole content of ``path``, gunzipped when it starts with the gzip magic bytes."""
    path = os.fspath(path)
    return decompress(read_raw(path), path)


def text_bytes(raw: bytes, path: str) -> bytes:
    """The text of a TREC file from its stored bytes (gunzipped); a gzip-compressed
    Parquet file is an error."""

    data = decompress(raw, path)
    if data is raw and not isinstance(data, bytes):
        return bytes(data)  # a stored file's text, read once for the parsers
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


#: the run-file suffixes a run name drops (one, after an optional ``.gz``): TREC text's
#: usual ones and Parquet's
RUN_SUFFIXES = (".run", ".trec", ".txt", ".res", ".tsv", ".parquet", ".pq")


def run_name(path: str | os.PathLike) -> str:
    """Run name from a file name: basename without a leading ``input.``, then without a
    trailing ``.gz`` and one of :data:`RUN_SUFFIXES` (``stdin`` for ``-``).

    ``input.`` is the prefix of the reference implementation (pref_eval) and of TREC's
    submitted runs; ``bm25.run``, ``bm25.trec.gz``, ``input.bm25.gz`` and ``bm25.parquet``
    all name the run ``bm25``.  Only the end of the name is looked at, once each:
    ``bm25.txt.run`` is ``bm25.txt``; a prefix or suffix that is the whole name stays
    (``input.``, ``.run``).
    """
    if os.fspath(path) == STDIN:
        return "stdin"
    name = os.path.basename(os.fsdecode(path))
    # a file name that is not UTF-8 (its bytes kept as surrogates by os.fsdecode) names
    # the run with U+FFFD in their place: a name every output format can write
    name = name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    if name.startswith("input.") and len(name) > len("input."):
        name = name[len("input.") :]
    for suffixes in ((".gz",), RUN_SUFFIXES):
        for suffix in suffixes:
            if name.endswith(suffix) and len(name) > len(suffix):
                name = name[: -len(suffix)]
                break
    return name


def is_frame(obj) -> bool:
    return type(obj).__name__ == "DataFrame" and hasattr(obj, "columns")


def is_parquet(data: bytes) -> bool:
    """Whether ``data`` is a Parquet file: ``PAR1`` at its start and at its end."""
    return len(data) >= 12 and data[:4] == PARQUET_MAGIC and data[-4:] == PARQUET_MAGIC
