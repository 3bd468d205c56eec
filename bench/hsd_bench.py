"""Randomized Tukey HSD: the code before issue 11 against prefeval's, side by side.

Usage: python bench/hsd_bench.py [--trials 1000] [--repeat 3] [--full] [--shapes ...]

A queries x runs matrix of random scores (standard normal * 0.3 plus small run effects)
per shape, all 210 (recsys) run pairs; old and new runs alternate and the median of
``--repeat`` runs is reported, per trial and extrapolated to 10,000 trials.  ``--full``
also times the new code on the default 10,000 trials.  Prints a Markdown table.
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
    from prefeval.analysis.significance import hsd_pvalues
    from prefeval.core import ties
except ImportError:  # prefeval not installed: use the checkout this script lives in
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from prefeval.analysis.significance import hsd_pvalues
    from prefeval.core import ties

SHAPES = {"recsys": (17564, 21), "robust": (249, 110), "sample": (50, 10)}


def old_hsd_pvalues(scores, pairs, trials, seed=0):
    """prefeval.analysis.significance.hsd_pvalues before issue 11 (rng.permuted on chunks
    of trials)."""
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


def matrix(queries: int, runs: int) -> np.ndarray:
    rng = np.random.default_rng(1)
    return rng.standard_normal((queries, runs)) * 0.3 + np.linspace(0.0, 0.03, runs)


def timed(fn, *args, **kwargs) -> float:
    start = time.perf_counter()
    fn(*args, **kwargs)
    return time.perf_counter() - start


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

    return f"{model}, {os.cpu_count()} cores, numpy {np.__version__}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--shapes", default="recsys,robust,sample")
    parser.add_argument("--full", action="store_true", help="also 10,000 trials (new code)")
    args = parser.parse_args()
    print(f"Machine: {machine()}; {args.trials} trials, median of {args.repeat}\n")
    print("| shape (queries x runs) | code | s per 1000 trials | 10,000 trials (s) | ratio |")
    print("| --- | --- | ---: | ---: | ---: |")
    for name in args.shapes.split(","):
        q, n = SHAPES[name]
        scores = matrix(q, n)
        pairs = np.stack(np.triu_indices(n, 1), axis=1)
        variants = {
            "old (rng.permuted)": (old_hsd_pvalues, {}),
            "new, 1 thread": (hsd_pvalues, {"progress": False, "threads": 1}),
            "new, 2 threads": (hsd_pvalues, {"progress": False, "threads": 2}),
        }
        times: dict[str, list[float]] = {key: [] for key in variants}
        for _ in range(args.repeat):  # old and new alternate: the same load on both
            for key, (fn, options) in variants.items():
                times[key].append(timed(fn, scores, pairs, args.trials, **options))
        old = statistics.median(times["old (rng.permuted)"])
        for key, values in times.items():
            median = statistics.median(values)
            per_1000 = median * 1000 / args.trials
            print(
                f"| {name} ({q} x {n}) | {key} | {per_1000:.3f} | {per_1000 * 10:.2f} | "
                f"{old / median:.2f}x |"
            )
        if args.full:
            full = [
                timed(hsd_pvalues, scores, pairs, 10000, progress=False) for _ in range(args.repeat)
            ]
            print(
                f"| {name} ({q} x {n}) | new, 10,000 trials measured | | "
                f"{statistics.median(full):.2f} | |"
            )


if __name__ == "__main__":
    main()
