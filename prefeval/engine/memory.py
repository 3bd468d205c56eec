"""Handing memory back to the system between the steps of a computation: Arrow's pool
and glibc's heap (``malloc_trim``, the mmap threshold)."""

from __future__ import annotations

import ctypes

from ..core import limits


def release_free_memory() -> None:
    """Hand the memory freed so far back to the system: Arrow's pool (mimalloc) and the
    C heap's free pages (glibc's ``malloc_trim``; nothing elsewhere).  Called through
    the hooks of :mod:`prefeval.engine.runtime`: after each large run read (see
    ``_TRIM_BYTES`` in :mod:`prefeval.engine.local`) and after all of them, between
    query partitions and once the evidence of an analysis is made:
    without it what one step freed (parse buffers, a partition's rows and text) stays
    resident beside the next (bench/run.py's recsys peak RSS; see bench/RESULTS.md)."""

    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    trim = limits.glibc("malloc_trim")
    if trim is not None:
        trim.argtypes = [ctypes.c_size_t]
        trim(0)


#: allocations of at least this many bytes that :func:`map_large_allocations` has glibc's
#: malloc map (and unmap when freed): glibc's initial threshold, held fixed
MMAP_THRESHOLD = 128 << 10


def map_large_allocations() -> None:
    """Hold glibc's mmap threshold at :data:`MMAP_THRESHOLD` bytes: every larger array
    is mapped and given back when freed.  By default each freed mapped block raises the
    threshold (up to 32 MiB), and the arrays of the next query partition then come from
    the heap, which keeps them after they are freed: a Dask client taking a partition's
    rows piece after piece, and each worker, would keep them.  It costs page faults,
    the most to work that makes its arrays anew each step (the randomized HSD's
    trials), so the CLI sets it for ``compare --engine dask`` only, before reading
    (nothing elsewhere than glibc); the trade was set by bench/run.py's recsys-xl shape
    on both engines (see bench/RESULTS.md)."""

    mallopt = limits.glibc("mallopt")
    if mallopt is not None:
        mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        mallopt(-3, MMAP_THRESHOLD)  # M_MMAP_THRESHOLD
