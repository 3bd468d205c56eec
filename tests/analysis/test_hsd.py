"""The randomized Tukey HSD: exact permutations, determinism, speed-neutral
options.  Exact p-values come from enumerating every combination of row permutations
on tiny matrices in rational arithmetic (each score read as the fraction with the
smallest denominator up to 1000), so ties are decided exactly."""

from __future__ import annotations

import functools
import itertools
import math
import os
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from helpers import as_other_user
from scipy import stats

from prefeval.analysis.orderings import Evidence
from prefeval.analysis.significance import _digit_groups, _trial_ranges, hsd_pvalues, pair_tests


def all_pairs(n: int) -> np.ndarray:
    return np.stack(np.triu_indices(n, 1), axis=1)


def exact_pvalues(scores, pairs) -> list[Fraction]:
    """The permutation p-value: the share of all (n!)^q combinations of row orders whose
    range of column sums is >= |sum_a - sum_b| (exact fractions: ties count)."""
    rows = [[Fraction(x).limit_denominator(1000) for x in row] for row in scores]
    n = len(rows[0])
    totals = [sum(row[j] for row in rows) for j in range(n)]
    observed = [abs(totals[a] - totals[b]) for a, b in pairs]
    ranges = []
    for orders in itertools.product(itertools.permutations(range(n)), repeat=len(rows)):
        sums = [sum(row[order[j]] for row, order in zip(rows, orders)) for j in range(n)]
        ranges.append(max(sums) - min(sums))
    return [Fraction(sum(r >= o for r in ranges), len(ranges)) for o in observed]


def entropy(seed: int = 0):
    return np.random.SeedSequence(seed).entropy


def test_digit_groups_cover_every_fisher_yates_step():
    assert _digit_groups(21) == [
        (math.factorial(21) // math.factorial(9), list(range(20, 8, -1))),
        (math.factorial(9), list(range(8, 0, -1))),
    ]
    assert _digit_groups(10) == [(math.factorial(10), list(range(9, 0, -1)))]
    assert _digit_groups(2) == [(2, [1])]
    assert _digit_groups(1) == []
    for n in (3, 13, 14, 21, 40, 110):
        groups = _digit_groups(n)
        assert [k for _, steps in groups for k in steps] == list(range(n - 1, 0, -1))
        assert math.prod(product for product, _ in groups) == math.factorial(n)
        assert all(product <= 1 << 48 for product, _ in groups)
        # a group takes every step whose radix still fits
        assert all(p * steps[-1] > 1 << 48 for p, steps in groups[:-1])
    assert len(_digit_groups(110)) == 14  # 21 with products below 2**32


# halves: the column sums and the observed differences tie exactly in many combinations
TINY = {
    "3x3 halves": np.array([[1.0, 0.5, 0.0], [0.5, 0.5, 0.0], [1.0, 0.0, 0.5]]),
    "3x3 reals": np.array([[0.9, 0.2, 0.4], [0.35, 0.8, 0.1], [0.7, 0.05, 0.6]]),
    "4x2 thirds": np.array([[1, 0], [2 / 3, 1 / 3], [1, 1 / 3], [0, 1 / 3]]),
    "2x4": np.array([[0.9, 0.1, 0.2, 0.0], [0.8, 0.3, 0.0, 0.1]]),
    "3x4 quarters": np.array([[1, 0, 0.5, 0.25], [0.75, 0, 0.5, 1], [1, 0.25, 0, 0.5]]),
}


@pytest.mark.parametrize("name", sorted(TINY))
def test_randomized_pvalues_estimate_the_exact_permutation_pvalue(name):
    scores = TINY[name]
    pairs = all_pairs(scores.shape[1])
    exact = np.array([float(p) for p in exact_pvalues(scores, pairs)])
    assert np.any((exact > 0.05) & (exact < 0.95))  # not a trivial case
    trials = 20000
    p = hsd_pvalues(scores, pairs, trials, seed=11, progress=False)
    # p = (1 + count) / (1 + B): count ~ Binomial(B, exact)
    count = p * (1 + trials) - 1
    np.testing.assert_allclose(count, np.round(count), atol=1e-6)
    spread = np.sqrt(exact * (1 - exact) * trials)
    assert np.all(np.abs(count - exact * trials) <= 4.5 * spread + 1), (count, exact * trials)


def test_every_order_of_a_row_is_equally_likely():
    """n = 21 (two digit groups, the first near half the 2**48 limit): the value that meets
    query 0's 1 is uniform.

    Query 0 has a 1 in one column, 0 elsewhere; query 1 has the values 0, 0.001, ...,
    0.020.  A trial's range of column sums is 1 + v - (the least other value of query
    1), v the value that lands with the 1: 1 + v for v > 0, 0.999 for v = 0.  The range
    tells v, which must be uniform."""
    n, trials = 21, 21000
    values = np.arange(n) / 1000.0
    columns = np.stack([np.eye(n)[0], values], axis=1)  # runs x queries
    ranges = _trial_ranges(columns, 0, trials, entropy(4)) * 2  # means: sums / 2 queries
    v = np.where(ranges < 1.0, ranges - 0.999, ranges - 1.0)
    landed = np.rint(v * 1000.0).astype(int)
    np.testing.assert_allclose(v * 1000.0, landed, atol=1e-6)
    counts = np.bincount(landed, minlength=n)
    assert counts.sum() == trials and len(counts) == n
    assert stats.chisquare(counts).pvalue > 1e-3, counts


def test_trial_streams_do_not_depend_on_chunks():
    """Trial t's range is the same float whatever trials it is computed with."""
    rng = np.random.default_rng(3)
    columns = np.ascontiguousarray(rng.random((6, 9)))
    whole = _trial_ranges(columns, 0, 40, entropy(2))
    parts = np.concatenate([_trial_ranges(columns, a, b, entropy(2)) for a, b in
                            ((0, 1), (1, 8), (8, 9), (9, 40))])  # fmt: skip
    np.testing.assert_array_equal(whole, parts)
    assert len(np.unique(whole)) > 20  # the trials differ
    assert not np.array_equal(whole, _trial_ranges(columns, 0, 40, entropy(3)))
    # blocks of 4 trials per stream (the last one short): split at block boundaries
    whole = _trial_ranges(columns, 0, 38, entropy(2), per_stream=4)
    parts = np.concatenate([_trial_ranges(columns, a, b, entropy(2), per_stream=4) for a, b in
                            ((0, 4), (4, 12), (12, 36), (36, 38))])  # fmt: skip
    np.testing.assert_array_equal(whole, parts)
    assert len(np.unique(whole)) > 20


@pytest.mark.parametrize("size", [1, 2, 4, 10])
def test_batches_of_queries_give_the_same_trials(monkeypatch, size):
    """The kernel shuffles queries in batches (a level-2 cache's worth): a trial sees the
    same draws and adds its columns' values in the same order whatever the batch, so
    its range is the same float."""
    from prefeval.analysis import significance as statistics

    rng = np.random.default_rng(6)
    columns = np.ascontiguousarray(rng.random((5, 11)))
    whole = _trial_ranges(columns, 0, 50, entropy(6), per_stream=3)
    assert len(np.unique(whole)) > 40
    monkeypatch.setattr(statistics, "_batch_queries", lambda n: size)
    batched = _trial_ranges(columns, 0, 50, entropy(6), per_stream=3)
    np.testing.assert_array_equal(batched, whole)


def test_batch_sizes():
    from prefeval.analysis.significance import _batch_queries

    assert _batch_queries(110) == 297  # 2**15 scores
    assert _batch_queries(300) == 109
    assert _batch_queries(10) == _batch_queries(1) == 512  # at most 512 queries
    assert _batch_queries(1000) == 64  # at least 64


def fisher_yates_sums(columns, codes, groups) -> np.ndarray:
    """The kernel's column sums, in Python integers: j, code = divmod(code, k + 1)."""
    n, q = columns.shape
    sums = np.zeros((codes.shape[1], n))
    for t in range(codes.shape[1]):
        for i in range(q):
            row = list(columns[:, i])
            for g, (_, steps) in enumerate(groups):
                code = int(codes[g, t, i])
                for k in steps:
                    code, j = divmod(code, k + 1)
                    sums[t, k] += row[j]
                    row[j] = row[k]
            sums[t, 0] += row[0]
    return sums


@pytest.mark.parametrize("n", [2, 3, 13, 21, 40])
def test_the_kernel_decodes_every_digit_exactly(n):
    """The compiled kernel's float64 digits equal integer division's, on uniform codes
    and on the extremes of each group (0, product - 1, multiples of its radices)."""
    from prefeval.analysis.significance import _batch_queries, _kernel

    groups = _digit_groups(n)
    rng = np.random.default_rng(n)
    trials, q = 7, 40
    codes = np.empty((len(groups), trials, q), dtype=np.uint64)
    for g, (product, steps) in enumerate(groups):
        codes[g] = rng.integers(0, product, size=(trials, q), dtype=np.uint64)
        edges = [0, 1, product - 1, product - 2, product // 2, product // (steps[0] + 1)]
        edges += [product - product // (steps[0] + 1), (steps[0] + 1) * steps[0] - 1]
        codes[g, 0, : len(edges)] = np.array(edges) % product
    columns = np.ascontiguousarray(rng.random((n, q)) + np.arange(n)[:, None] * 1000)
    steps = np.array([len(s) for _, s in groups], dtype=np.intp)
    sums = np.zeros((trials, n))
    _kernel()(columns, codes, steps, _batch_queries(n), sums)
    np.testing.assert_array_equal(sums, fisher_yates_sums(columns, codes, groups))
    assert codes.max() > (1 << 46) or n < 21  # codes near the 2**48 limit


def test_pvalues_do_not_depend_on_threads_or_chunk_size():
    rng = np.random.default_rng(5)
    scores = rng.random((30, 7)) + np.linspace(0, 0.3, 7)
    pairs = all_pairs(7)
    trials = 700
    reference = hsd_pvalues(scores, pairs, trials, seed=9, progress=False, threads=1)
    assert np.any((reference > 0.05) & (reference < 0.95)) and np.any(reference < 0.05)
    for threads, chunk_rows in ((2, None), (3, 1), (1, 31), (2, 300), (1, 10**7)):
        again = hsd_pvalues(
            scores, pairs, trials, seed=9, progress=False, threads=threads, chunk_rows=chunk_rows
        )
        np.testing.assert_array_equal(again, reference, err_msg=f"{threads=} {chunk_rows=}")


def test_pvalues_do_not_depend_on_the_engine_running_the_chunks():
    """An engine's ``blocks`` may run the chunks of trials anywhere and in any order
    (here last first, each in a copy of the shared matrix, as a worker has): the counts
    are integers summed exactly, the same p-values; the matrix is shared once per call."""
    import copy

    rng = np.random.default_rng(4)
    scores, pairs = rng.random((37, 5)), all_pairs(5)
    calls = []

    class LastFirst:
        def blocks(self, work, shared, items, *, threads=1, ready=()):
            calls.append(len(items))
            shared = copy.deepcopy(shared)
            return reversed([work(shared, item) for item in reversed(items)])

    reference = hsd_pvalues(scores, pairs, 700, seed=5, progress=False, threads=1)
    chunk_rows = 37 * 221  # a chunk per stream of 8192 // 37 = 221 trials: 3 x 221 + 37
    got = hsd_pvalues(
        scores, pairs, 700, seed=5, progress=False, chunk_rows=chunk_rows, engine=LastFirst()
    )
    np.testing.assert_array_equal(got, reference)
    assert calls == [4]


def test_pvalues_do_not_depend_on_the_order_of_the_runs():
    rng = np.random.default_rng(8)
    runs = ["b", "e", "a", "d", "c"]
    values = rng.random((12, 5)) + np.linspace(0, 0.4, 5)
    queries = [str(i) for i in range(12)]

    def hsd(order):
        ev = Evidence([runs[i] for i in order], queries, None, {"X": values[:, order]},
                      {"X": True})  # fmt: skip
        table = pair_tests(ev, ("hsd",), trials=500, seed=1, progress=False)
        return {frozenset(k): p for k, p in zip(zip(table.run_a, table.run_b), table.p_value)}

    first = hsd([0, 1, 2, 3, 4])
    assert len(first) == 10 and len(set(first.values())) > 3
    assert first == hsd([3, 0, 4, 2, 1]) == hsd([4, 3, 2, 1, 0])


def test_pvalues_are_deterministic_per_seed():
    scores = TINY["3x3 reals"]
    pairs = all_pairs(3)
    a = hsd_pvalues(scores, pairs, 300, seed=7, progress=False)
    np.testing.assert_array_equal(a, hsd_pvalues(scores, pairs, 300, seed=7, progress=False))
    assert not np.array_equal(a, hsd_pvalues(scores, pairs, 300, seed=8, progress=False))


def test_degenerate_matrices():
    # two runs: one Fisher-Yates step; run 0 wins every query by 1 and the range of a
    # trial is |sum of +-1| / q: it reaches 1 only when all 5 signs agree (2 / 2^5)
    scores = np.array([[1.0, 0.0]] * 5)
    trials = 6000
    p = hsd_pvalues(scores, all_pairs(2), trials, seed=0, progress=False)
    count = p[0] * (1 + trials) - 1
    assert abs(count - trials / 16) <= 4.5 * np.sqrt(trials / 16 * 15 / 16)
    # no queries or a single run: nothing to test
    np.testing.assert_array_equal(hsd_pvalues(np.empty((0, 3)), all_pairs(3), 10), 1.0)
    assert hsd_pvalues(np.ones((4, 1)), all_pairs(1), 10).shape == (0,)


ROOT = Path(__file__).resolve().parents[2]


def python(code: str, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **kwargs.pop("env", {})}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, **kwargs
    )


def test_start_up_does_not_import_numba():
    """``prefeval --help`` and importing the module leave numba (a second or more to
    import) to the first HSD."""
    code = (
        "import sys; sys.argv = ['prefeval', '--help']\n"
        "import prefeval.analysis.significance\n"
        "from prefeval.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('numba' in sys.modules, 'llvmlite' in sys.modules)"
    )
    result = python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "False False"


def test_the_kernel_compiles_once_and_is_cached_on_disk(tmp_path):
    """A fresh process compiles the kernel while :func:`_kernel_ticks` keeps a progress
    bar alive, and writes it to numba's cache; the next process loads it from there.
    Nothing reaches stdout or stderr but the p-values."""
    code = (
        "import numpy as np\n"
        "from prefeval.analysis.significance import _kernel, _kernel_ticks, hsd_pvalues\n"
        "ticks = sum(1 for _ in _kernel_ticks())\n"
        "scores = np.random.default_rng(0).random((300, 5))\n"
        "pairs = np.array([[0, 1], [2, 4]])\n"
        "p = [hsd_pvalues(scores[:q], pairs, 500, progress=False, threads=2) for q in (30, 300)]\n"
        "stats = _kernel().stats\n"
        "print(ticks, len(_kernel().overloads), len(stats.cache_hits), len(stats.cache_misses))\n"
        "print(repr(p))"
    )
    env = {"NUMBA_CACHE_DIR": str(tmp_path)}
    first, second = python(code, env=env), python(code, env=env)
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    assert first.stderr == second.stderr == ""
    ticks, overloads, hits, misses = map(int, first.stdout.splitlines()[0].split())
    assert ticks > 0 and overloads == 1 and (hits, misses) == (0, 1)  # compiled here
    assert list(tmp_path.rglob("*.nbi")) and list(tmp_path.rglob("*.nbc"))
    _, overloads, hits, misses = map(int, second.stdout.splitlines()[0].split())
    assert overloads == 1 and (hits, misses) == (1, 0)  # loaded, not compiled
    assert first.stdout.splitlines()[1] == second.stdout.splitlines()[1]


def test_the_bar_ticks_while_the_kernel_compiles(monkeypatch):
    """On a terminal, the HSD stage's bar advances by 0 every 0.1 s while numba compiles
    (here a stand-in that takes 0.45 s), so the wait shows as a bar, not a stall."""
    import tqdm.auto

    from prefeval.analysis import significance
    from prefeval.core import progress

    kernel = significance._kernel()

    @functools.cache
    def slow():
        time.sleep(0.45)
        return kernel

    updates = []

    class Recorder(tqdm.auto.tqdm):
        def update(self, n=1):
            updates.append(n)
            return super().update(n)

    monkeypatch.setattr(significance, "_compiled", slow)
    monkeypatch.setattr(tqdm.auto, "tqdm", Recorder)
    monkeypatch.setattr(progress, "_terminal", lambda: True)
    monkeypatch.setattr(progress, "DELAY", 0.0)
    scores = np.random.default_rng(0).random((30, 4))
    p = significance.hsd_pvalues(scores, all_pairs(4), 500, seed=2)
    assert updates[:3] == [0, 0, 0] and sum(updates) == 500
    updates.clear()  # compiled: no more ticks
    np.testing.assert_array_equal(significance.hsd_pvalues(scores, all_pairs(4), 500, seed=2), p)
    assert 0 not in updates and sum(updates) == 500


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root")
def test_a_read_only_install_without_a_home_still_compiles_the_kernel(monkeypatch):
    """As user nobody, whose home does not exist, next to a package directory it cannot
    write (root's): numba has nowhere to cache, so the kernel compiles in memory, and
    computes what the cached one does."""
    numba = pytest.importorskip("numba")
    from prefeval.analysis import significance

    monkeypatch.setenv("HOME", "/nonexistent")
    monkeypatch.setattr(numba.config, "CACHE_DIR", "")
    # numba's compiler modules imported first, as the user who can read them: a clone in
    # a folder of mode 0700 hides them from nobody, which an installed numba does not
    numba.njit(lambda x: x + 1)(1)
    with as_other_user():
        kernel = significance._compiled.__wrapped__()
    assert type(kernel._cache).__name__ == "NullCache"
    rng = np.random.default_rng(2)
    columns = np.ascontiguousarray(rng.random((4, 9)))
    codes = rng.integers(0, 24, size=(1, 3, 9), dtype=np.uint64)
    steps = np.array([3], dtype=np.intp)
    sums = [np.zeros((3, 4)), np.zeros((3, 4))]
    kernel(columns, codes, steps, 4, sums[0])
    significance._kernel()(columns, codes, steps, 4, sums[1])
    np.testing.assert_array_equal(sums[0], sums[1])
    np.testing.assert_array_equal(sums[0], fisher_yates_sums(columns, codes, _digit_groups(4)))
