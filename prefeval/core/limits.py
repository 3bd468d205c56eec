"""The resource limits of this process (``ulimit``, a batch scheduler's ``h_vmem``): what
prefeval needs of them is checked before the work that needs it, so that a limit ends in
a run or in one message (:class:`~prefeval.core.errors.SystemLimitError`, ``MemoryError``)."""

from __future__ import annotations

import ctypes
import errno
import importlib
import mmap
import os

from .errors import SystemLimitError

#: open files a local Dask cluster takes in this process besides its workers' (measured:
#: about 21, and 10 per worker at rest; the rest for the run files, output and spikes)
CLUSTER_FILES = 40
#: open files per worker of a local Dask cluster (its connections, in this process and its
#: own)
WORKER_FILES = 16
#: address space left free before the BLAS libraries are loaded (numpy's and scipy's
#: OpenBLAS each map tens of MiB with one thread)
BLAS_ROOM = 256 << 20


#: largest rank a run can have (positions are 32-bit); a larger -M cuts nothing
MAX_RANK = 2**31 - 1


def _resource():
    try:
        import resource
    except ImportError:  # not on Windows
        return None
    return resource


def _soft_limit(name: str) -> int | None:
    """This process's soft limit ``resource.<name>`` (``RLIMIT_AS``...), None when there
    is none (unlimited, or no resource module)."""
    resource = _resource()
    if resource is None:
        return None
    soft, _ = resource.getrlimit(getattr(resource, name))
    return None if soft == resource.RLIM_INFINITY else soft


def open_files(needed: int, what: str) -> None:
    """At least ``needed`` open files for ``what``: the soft limit is raised to it where
    the hard limit allows (as Dask's own scheduler raises it); else SystemLimitError."""

    resource = _resource()
    if resource is None:
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    if hard == resource.RLIM_INFINITY or hard >= needed:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
            return
        except (ValueError, OSError):  # macOS: not beyond OPEN_MAX
            pass
    raise SystemLimitError(
        f"{what} needs {needed} open files, the limit is {soft} (ulimit -n): raise it, or "
        "use --engine local"
    )


def glibc(name: str):
    """The C library's function ``name`` (ctypes), or None when it has none (not glibc;
    Windows has no ``CDLL(None)``)."""
    try:
        return getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError, TypeError):
        return None


#: open files a thread reading runs holds at most at once: the run file, or a cache
#: folder and an entry in it (one more for a module a library imports meanwhile)
READER_FILES = 3
#: a soft open-files limit above this is not counted against (plenty for any core count)
_COUNTED_FILES = 4096


def free_files() -> int | None:
    """How many more files this process may open under its soft limit (``ulimit -n``):
    the limit less the descriptors open now; None when the limit is above
    :data:`_COUNTED_FILES` (or there is none)."""
    soft = _soft_limit("RLIMIT_NOFILE")
    if soft is None or soft > _COUNTED_FILES:
        return None
    used = 0
    for fd in range(soft):  # (fstat opens nothing: it works with no descriptor left)
        try:
            os.fstat(fd)
        except OSError:
            continue
        used += 1
    return max(0, soft - used)


def reader_threads(wanted: int) -> int:
    """How many threads may read runs at once: ``wanted``, fewer where the open-files
    limit leaves too few descriptors for :data:`READER_FILES` each, at least one (a
    process that cannot open a run file then says so in one line); one under an
    address-space limit, where each thread's stack and buffers take a share of it."""
    if address_space() is not None:
        return 1
    free = free_files()
    if free is None:
        return max(1, wanted)
    return max(1, min(wanted, free // READER_FILES))


def address_space() -> int | None:
    """The address-space limit in bytes (``ulimit -v``), None when there is none."""
    return _soft_limit("RLIMIT_AS")


def arrow_threads() -> bool:
    """Whether Arrow's readers may use its thread pools: not under an address-space limit,
    where a pool thread that cannot start leaves Arrow's CSV reader waiting for ever on
    the task given to it; there they read in the calling thread, the same values."""
    return address_space() is None


def under_address_limit() -> None:
    """Under an address-space limit, before numpy is imported: one OpenBLAS thread (unless
    OPENBLAS_NUM_THREADS says otherwise), and the BLAS libraries of numpy and scipy (and
    pandas) loaded now, once :data:`BLAS_ROOM` is known to be free (else MemoryError):
    OpenBLAS retries for ever when it cannot allocate its buffers, which it does on
    loading, so loaded late in a process near the limit it would spin instead of failing."""
    if address_space() is None:
        return

    # one malloc arena: glibc reserves 64 MiB of address space for each thread's own
    # arena, so the reading threads (Arrow's and prefeval's) ran out of it at random
    # (a thread that could not start, a bad_alloc, a hang) where one thread fitted
    mallopt = glibc("mallopt")
    if mallopt is not None:
        mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        mallopt(-8, 1)  # M_ARENA_MAX
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        # private and read-only: address space only, no memory committed
        mmap.mmap(-1, BLAS_ROOM, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ).close()
    except (OSError, ValueError, OverflowError):
        raise MemoryError from None
    try:
        # importing scipy.linalg loads numpy with its BLAS; pandas after them (the BLAS
        # libraries need BLAS_ROOM): a pandas that could not be mapped is then the
        # one-line message, not a failure inside the first library that imports it
        importlib.import_module("numpy")
        importlib.import_module("scipy.linalg")
        importlib.import_module("pandas")
    except SystemError as error:
        # an extension module whose initialisation could not allocate near the limit
        # returns an error without setting one ("error return without exception set")
        raise MemoryError from error


def limit_message(error: BaseException) -> str | None:
    """The one line the CLI prints for ``error`` when it is a resource running out: memory
    (MemoryError; a library that cannot be mapped, ``failed to map segment``, an
    ImportError, or a SystemError under an address-space limit), open files (EMFILE,
    ENFILE) or threads (``can't start new thread``: no room for a thread's stack, or a
    limit on processes) or room for temporary files (ENOSPC, or EFBIG under a file size
    limit: outputs say so where they are written); None for another error."""
    if isinstance(error, MemoryError):
        return out_of_memory_message()
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EFBIG):
        import tempfile

        if error.errno == errno.EFBIG:
            return (
                f"prefeval: a temporary file in {tempfile.gettempdir()} would pass the file "
                "size limit (ulimit -f): raise it"
            )
        return (
            f"prefeval: no space left on device for temporary files in {tempfile.gettempdir()}"
            ": free some, or set TMPDIR to a folder with room"
        )
    if isinstance(error, ImportError) and "failed to map segment" in str(error):
        return out_of_memory_message()
    if isinstance(error, SystemError) and address_space() is not None:
        # C code that could not allocate near the limit returns an error without setting
        # one ("returned NULL without setting an exception"), in an import or a call
        return out_of_memory_message()
    if isinstance(error, OSError) and error.errno in (errno.EMFILE, errno.ENFILE):
        limit = ""
        resource = _resource()
        if resource is not None and error.errno == errno.EMFILE:
            limit = f" (the limit is {resource.getrlimit(resource.RLIMIT_NOFILE)[0]}, ulimit -n)"
        return f"prefeval: too many open files{limit}: raise the limit"
    if "Failed to launch worker thread" in str(error):  # Arrow's thread pools
        return out_of_memory_message() if address_space() is not None else None
    if isinstance(error, RuntimeError) and "can't start new thread" in str(error):
        if address_space() is not None:
            return out_of_memory_message()
        return "prefeval: cannot start a thread: a limit on processes (ulimit -u)?"
    return None


def out_of_memory_message() -> str:
    """The one line the CLI prints when memory runs out."""
    limit = address_space()
    if limit is not None:
        return (
            f"prefeval: out of memory under the address-space limit of {limit >> 10} KiB "
            "(ulimit -v): raise it, or give fewer runs or queries at once"
        )
    return (
        "prefeval: out of memory: the inputs are too large for this machine "
        "(fewer runs or queries at once, or -M, reduce what is held)"
    )
