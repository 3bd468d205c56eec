"""The runtime of a computation: when memory freed is handed back to the system and what
the process's resource limits allow (threads reading runs, files a spill holds open).
The engine and analysis steps call these hooks at their boundaries; the policy itself
(what is released, which limit is read) lives here and in :mod:`prefeval.core.limits`
and :mod:`prefeval.engine.memory`."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TypeVar

from ..core import limits
from ..core.errors import SystemLimitError
from ..io.spill import SPARE_FILES
from .memory import release_free_memory

T = TypeVar("T")


def after_run() -> None:
    """After a large run is read: its parse buffers handed back (a trim costs about a
    millisecond, so the reader calls this after large runs only)."""
    release_free_memory()


def after_reading() -> None:
    """After all runs are read: the parse buffers handed back before computing."""
    release_free_memory()


def after_partition() -> None:
    """Between query partitions (and between the steps of one): what the previous step
    freed (its rows, rankings, judgments, samples) handed back before the next."""
    release_free_memory()


def after_evidence() -> None:
    """Once the evidence of an analysis is made: the judgments' and runs' heap handed
    back before the analysis runs."""
    release_free_memory()


def released(steps: Iterable[T]) -> Iterator[T]:
    """The items of ``steps`` one after the other, the memory freed while the caller
    used one handed back (:func:`after_partition`) before the next is given: a loop
    over query partitions names its steps, and the runtime hands back between them."""
    for i, step in enumerate(steps):
        if i:
            after_partition()
        yield step


def reader_threads(wanted: int) -> int:
    """How many threads may read runs at once (:func:`prefeval.core.limits.reader_threads`)."""
    return limits.reader_threads(wanted)


def spill_files(parts: int, what: str) -> bool:
    """Whether a spill of ``parts`` partitions may hold a file per partition open: the
    soft open-files limit raised to that where the hard limit allows (True), else False
    (the caller then spills into fewer partitions)."""
    try:
        limits.open_files(parts + SPARE_FILES, what)
    except SystemLimitError:
        return False
    return True


def cluster_files(workers: int) -> None:
    """The open files a local Dask cluster of ``workers`` workers takes
    (:data:`~prefeval.core.limits.CLUSTER_FILES` and
    :data:`~prefeval.core.limits.WORKER_FILES` each): the soft limit raised to that
    where the hard limit allows, else :class:`~prefeval.core.errors.SystemLimitError`."""
    limits.open_files(
        limits.CLUSTER_FILES + limits.WORKER_FILES * workers,
        f"--engine dask (a local cluster of {workers} workers)",
    )
