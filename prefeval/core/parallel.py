"""The cores this process may use, and work spread over them in order.

:func:`usable_cpus` is the default of ``Options.jobs`` (``-j/--jobs``); :func:`in_order`
runs a function over items on a thread pool, yielding the results in the items' order
with a bounded number of calls in flight (so memory grows by at most that many results).
"""

from __future__ import annotations

import math
import os
from collections import deque
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import Executor

#: cgroup v2's CPU bandwidth limit, then cgroup v1's quota and period (microseconds)
_CGROUP_V2 = "/sys/fs/cgroup/cpu.max"
_CGROUP_V1 = (
    ("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "/sys/fs/cgroup/cpu/cpu.cfs_period_us"),
    ("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us"),
)


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def cgroup_cpus() -> float | None:
    """The CPUs this process's cgroup may use in a period (quota / period), or None where
    no quota is set (or none can be read: not Linux)."""
    text = _read(_CGROUP_V2)
    pairs = []
    if text is not None:
        pairs.append(text.split()[:2])
    for quota_path, period_path in _CGROUP_V1:
        quota_text, period_text = _read(quota_path), _read(period_path)
        if quota_text is not None and period_text is not None:
            pairs.append([quota_text, period_text])
    for pair in pairs:
        try:
            quota, period = (int(x) for x in pair)  # "max" (v2), -1 (v1): no quota
        except ValueError:
            continue
        if quota > 0 and period > 0:
            return quota / period
    return None


def usable_cpus() -> int:
    """The CPUs this process may use: its CPU affinity (``os.sched_getaffinity``), at most
    its cgroup's CPU quota rounded up (:func:`cgroup_cpus`), at least 1.

    Neither ``os.cpu_count`` nor Python 3.13's ``os.process_cpu_count`` reads a cgroup
    quota (a container limited to 2 CPUs on a 64-core host); loky's ``cpu_count`` does,
    but loky is no dependency of prefeval."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cpus = os.cpu_count() or 1
    quota = cgroup_cpus()
    if quota is not None:
        cpus = min(cpus, math.ceil(quota))
    return max(1, cpus)


def in_order(pool: Executor, fn: Callable, items: Iterable, ahead: int) -> Generator:
    """``map(fn, items)`` on ``pool``, results in the items' order, at most ``ahead``
    calls submitted and not yet yielded; the calls not started are cancelled when the
    caller stops early."""
    pending: deque = deque()
    try:
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) >= ahead:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:
            future.cancel()
