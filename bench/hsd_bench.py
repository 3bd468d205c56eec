"""Randomized Tukey HSD: earlier kernels against prefeval's, side by side.

Usage: python bench/hsd_bench.py [--trials 1000] [--repeat 3] [--full] [--shapes ...]
       [--variants ...]

A queries x runs matrix of random scores (standard normal * 0.3 plus small run effects)
per shape, all run pairs; the variants run in turn, ``--repeat`` times (the same load on
each), and the median is reported: wall time per 1000 trials, extrapolated to 10,000,
and CPU time (``time.process_time``, every thread of the process) in ns per (query,
run, trial).  The variants: ``pre11``, the first kernel (``rng.permuted`` on chunks
of trials); ``numpy``, the numpy kernel the compiled one replaced (embedded here);
``numba`` and ``numba2``, prefeval's compiled kernel on 1 and 2 threads.  ``numba2``'s
p-values are checked equal to ``numba``'s (the same random stream); the others draw
differently (prefeval draws uint64 digit codes below 2**48, the numpy kernel uint32
ones), so their largest
difference from ``numba``'s p-values is shown, in units of the Monte Carlo standard
error at p = 1/2 (1 / (2 sqrt(trials))).  ``--full``
also times prefeval on the default 10,000 trials.  Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

try:
    from prefeval.analysis.significance import _kernel, hsd_pvalues
    from prefeval.core import ties
except ImportError:  # prefeval not installed: use the checkout this script lives in
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from prefeval.analysis.significance import _kernel, hsd_pvalues
    from prefeval.core import ties

SHAPES = {
    "recsys-xl": (100000, 10),  # the HSD target's shape: 100k users x 10 runs
    "recsys": (17564, 21),
    "robust": (249, 110),
    "sample": (50, 10),
}


def old_hsd_pvalues(scores, pairs, trials, seed=0):
    """The first kernel of prefeval.analysis.significance.hsd_pvalues (rng.permuted on
    chunks of trials)."""
    rng = np.random.default_rng(seed)
    q, n = scores.shape
    means = scores.mean(axis=0)
    observed = np.abs(means[pairs[:, 0]] - means[pairs[:, 1]])
    threshold = observed - ties.TOLERANCE * np.maximum(1.0, observed)
    at_least = np.zeros(len(pairs), dtype=np.int64)
    chunk = max(1, min(trials, (1 << 22) // max(1, q * n)))
    for start in range(0, trials, chunk):
        stop = min(trials, start + chunk)
        block = rng.permuted(np.broadcast_to(scores, (stop - start, q, n)), axis=2)
        col = block.mean(axis=1)
        ranges = np.sort(col.max(axis=1) - col.min(axis=1))
        at_least += len(ranges) - np.searchsorted(ranges, threshold, "left")
    return (1.0 + at_least) / (1.0 + trials)


def numpy_trial_ranges(columns, first, stop, entropy, per_stream=1):
    """The numpy kernel's prefeval.analysis.significance._trial_ranges: uint32
    digit codes (groups of Fisher-Yates steps whose radix product is below 2**32),
    Fisher-Yates vectorized by numpy over (trial, query) rows in segments of about 2**20
    scores, a gather and a scatter per step."""
    n, q = columns.shape
    trials = stop - first
    groups = uint32_digit_groups(n)
    draws = []
    for start in range(first, stop, per_stream):
        seeds = np.random.SeedSequence(entropy, spawn_key=(start // per_stream,))
        rng = np.random.Generator(np.random.PCG64(seeds))
        size = min(per_stream, stop - start) * q
        draws.append(
            [rng.integers(0, product, size=size, dtype=np.uint32) for product, _ in groups]
        )
    codes = [np.concatenate([d[g] for d in draws]).reshape(trials, q) for g in range(len(groups))]
    sums = np.zeros((trials, n))
    size = max(4096, (1 << 20) // max(1, n))
    size = q if q <= 2 * size else size
    for lo in range(0, q, size):
        hi = min(q, lo + size)
        sums += numpy_segment_sums(columns[:, lo:hi], [c[:, lo:hi] for c in codes], groups)
    means = sums / q
    return means.max(axis=1) - means.min(axis=1)


def uint32_digit_groups(n):
    """The numpy kernel's prefeval.analysis.significance._digit_groups: radix products
    < 2**32."""
    groups, product, steps = [], 1, []
    for k in range(n - 1, 0, -1):
        if product * (k + 1) > 1 << 32:
            groups.append((product, steps))
            product, steps = 1, []
        product *= k + 1
        steps.append(k)
    if steps:
        groups.append((product, steps))
    return groups


def numpy_segment_sums(columns, codes, groups):
    n, q = columns.shape
    trials = codes[0].shape[0] if codes else 1
    rows = trials * q
    block = np.tile(columns, (1, trials))  # row k: run k's scores, trial after trial
    flat = block.reshape(-1)
    offsets = np.arange(rows, dtype=np.intp)
    sums = np.empty((trials, n))
    for g, (_, steps) in enumerate(groups):
        code = codes[g].reshape(-1)
        for k in steps:
            radix = np.uint32(k + 1)
            rest = code // radix
            index = np.multiply(code - rest * radix, rows, dtype=np.intp)  # j * rows
            index += offsets
            code = rest
            sums[:, k] = flat.take(index).reshape(trials, q).sum(axis=1)
            flat[index] = block[k]  # row k is done: its values fill the places drawn
    sums[:, 0] = block[0].reshape(trials, q).sum(axis=1)
    return sums


def numpy_hsd_pvalues(scores, pairs, trials, seed=0):
    """The numpy kernel's prefeval.analysis.significance.hsd_pvalues on one thread, default
    chunks: the numpy kernel above."""
    q, n = scores.shape
    means = scores.mean(axis=0)
    observed = np.abs(means[pairs[:, 0]] - means[pairs[:, 1]])
    threshold = observed - ties.TOLERANCE * np.maximum(1.0, observed)
    entropy = np.random.SeedSequence(seed).entropy
    columns = np.ascontiguousarray(scores.T)
    per_stream = max(1, 8192 // q)
    chunk_rows = max(8192, (2 << 20) // (8 * n))
    chunk = per_stream * max(1, min(-(-trials // per_stream), chunk_rows // (per_stream * q)))
    at_least = np.zeros(len(pairs), dtype=np.int64)
    for start in range(0, trials, chunk):
        ranges = numpy_trial_ranges(columns, start, min(trials, start + chunk), entropy, per_stream)
        ranges.sort()
        at_least += len(ranges) - np.searchsorted(ranges, threshold, "left")
    return (1.0 + at_least) / (1.0 + trials)


def matrix(queries: int, runs: int) -> np.ndarray:
    rng = np.random.default_rng(1)
    return rng.standard_normal((queries, runs)) * 0.3 + np.linspace(0.0, 0.03, runs)


def timed(fn, *args, **kwargs):
    """(wall seconds, CPU seconds, result) of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn(*args, **kwargs)
    return time.perf_counter() - wall, time.process_time() - cpu, result


VARIANTS = {
    "pre11": ("first kernel (rng.permuted)", old_hsd_pvalues, {}),
    "numpy": ("numpy kernel, 1 thread", numpy_hsd_pvalues, {}),
    "numba": ("numba kernel, 1 thread", hsd_pvalues, {"progress": False, "threads": 1}),
    "numba2": ("numba kernel, 2 threads", hsd_pvalues, {"progress": False, "threads": 2}),
}


def machine() -> str:
    try:
        info = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        model = next(
            line.split(":", 1)[1].strip()
            for line in info.splitlines()
            if line.startswith("Model name")
        )
    except (OSError, StopIteration):
        model = platform.processor() or "unknown CPU"
    import os

    import numba

    load = os.getloadavg()[0]
    return (
        f"{model}, {os.cpu_count()} cores (load average {load:.1f}), numpy {np.__version__}, "
        f"numba {numba.__version__}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--shapes", default="recsys-xl,recsys,robust,sample")
    parser.add_argument("--variants", default="numpy,numba,numba2", help=", ".join(VARIANTS))
    parser.add_argument("--full", action="store_true", help="also 10,000 trials (prefeval)")
    args = parser.parse_args()
    _kernel()  # compiled (or loaded from numba's cache) before any timing
    print(f"Machine: {machine()}; {args.trials} trials, median of {args.repeat}\n")
    print(
        "| shape (queries x runs) | code | s per 1000 trials | 10,000 trials (s) "
        "| CPU ns per (query, run, trial) | vs first | p-values |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | --- |")
    keys = args.variants.split(",")
    for name in args.shapes.split(","):
        q, n = SHAPES[name]
        scores = matrix(q, n)
        pairs = np.stack(np.triu_indices(n, 1), axis=1)
        walls: dict[str, list[float]] = {key: [] for key in keys}
        cpus: dict[str, list[float]] = {key: [] for key in keys}
        results = {}
        for _ in range(args.repeat):  # the variants alternate: the same load on each
            for key in keys:
                _, fn, options = VARIANTS[key]
                wall, cpu, results[key] = timed(fn, scores, pairs, args.trials, **options)
                walls[key].append(wall)
                cpus[key].append(cpu)
        first = statistics.median(cpus[keys[0]])
        for key in keys:
            wall = statistics.median(walls[key]) * 1000 / args.trials
            cpu = statistics.median(cpus[key])
            ns = cpu / (q * n * args.trials) * 1e9
            if key == "numba2" and "numba" in results:
                same = "= 1 thread" if np.array_equal(results[key], results["numba"]) else "DIFFER"
            elif key != "numba" and "numba" in results:
                error = 0.5 / np.sqrt(args.trials)
                same = f"max {np.abs(results[key] - results['numba']).max() / error:.1f} SE"
            else:
                same = ""
            print(
                f"| {name} ({q} x {n}) | {VARIANTS[key][0]} | {wall:.3f} | {wall * 10:.2f} | "
                f"{ns:.2f} | {first / cpu:.2f}x | {same} |"
            )
        if args.full:
            full = [
                timed(hsd_pvalues, scores, pairs, 10000, progress=False)[0]
                for _ in range(args.repeat)
            ]
            print(
                f"| {name} ({q} x {n}) | prefeval, 10,000 trials measured | | "
                f"{statistics.median(full):.2f} | | | |"
            )


if __name__ == "__main__":
    main()
