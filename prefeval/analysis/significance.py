"""Discriminative power (Sakai): the share of run pairs a measure tells apart.

Tests (distributions from scipy.stats):

- ``ttest``: a preference's per-query Delta(a, b) against 0 (one-sample t-test);
  a metric's per-query values of a and b (paired t-test).
- ``sign``: two-sided exact binomial test on wins against losses, ties dropped
  (the natural test for lexirecall and lexiprecision).
- ``hsd``: Carterette's randomized Tukey HSD on a queries x runs score matrix
  (metric values; for a preference, the per-query win rate W_q).
- ``randomization``: the two-sided paired randomization (sign-flip) test of the mean
  per-query difference (:func:`prefeval.analysis.paired.randomization_pvalues`).

Corrections for the pairwise tests: Bonferroni, Holm (family-wise error),
Benjamini-Hochberg (``bh``), Benjamini-Yekutieli (``by``) (false discovery rate), or
none; the HSD p-values already control the family-wise error (correction reported as
``tukey``).
"""

from __future__ import annotations

import functools
import operator
import threading
from concurrent.futures import ThreadPoolExecutor, wait

import numpy as np
import pandas as pd

from ..core import limits, ties
from ..core.parallel import usable_cpus
from ..core.progress import progress_bar, series
from ..engine.job import Engine
from ..engine.local import LocalEngine
from ..options import CORRECTIONS, DEFAULT_TESTS, INTERVALS, TESTS
from . import paired
from .orderings import Evidence

DEFAULT_TRIALS = 10000
#: (pair, query) differences taken at a time by the tests and intervals that need them
#: whole (randomization, bootstrap): a metric's made a stretch of pairs at a time
DIFFERENCE_CELLS = 1 << 22


def difference_rows(evidence: Evidence, name: str, width: int = 0):
    """(the pairs' slice, their (pairs x queries) :meth:`Evidence.pair_differences`) a
    stretch of pairs at a time, :data:`DIFFERENCE_CELLS` values at most (at least one
    pair), a pair counting for its queries or ``width`` values, the larger: a
    preference's rows of the cube, a metric's made stretch by stretch.  The tests and
    intervals on them give each pair's result from its own row, so the stretches do not
    change them."""
    pairs = evidence.pairs()
    step = max(1, DIFFERENCE_CELLS // max(1, len(evidence.query_ids), width))
    for lo in range(0, len(pairs), step):
        chosen = slice(lo, min(len(pairs), lo + step))
        if evidence.is_preference(name):
            yield chosen, evidence.preferences(name)[chosen]
        else:
            scores = evidence.scores(name)
            a, b = pairs[chosen, 0], pairs[chosen, 1]
            yield chosen, (scores[:, a] - scores[:, b]).T


def randomization_pvalues(
    evidence: Evidence, name: str, trials: int = DEFAULT_TRIALS, seed: int | None = 0
) -> np.ndarray:
    """Two-sided paired randomization (sign-flip) test p-value for every run pair, of
    its per-query differences (:meth:`Evidence.pair_differences`, needs the cube of a
    preference): :func:`prefeval.analysis.paired.randomization_pvalues`, all 2**n sign
    flips of a pair's n defined differences where 2**n <= ``trials`` (exact), else
    ``trials`` random ones seeded by ``seed``, p = (1 + count) / (1 + trials)."""
    out = np.ones(len(evidence.pairs()))
    for chosen, differences in difference_rows(evidence, name):
        out[chosen] = paired.randomization_pvalues(differences, trials=trials, seed=seed)
    return out


def ttest_pvalues(evidence: Evidence, name: str) -> np.ndarray:
    """Two-sided t-test p-value for every run pair (vectorized over pairs).

    For a preference, a one-sample t-test of Delta(a, b) against 0; for a metric, the
    paired t-test of a's and b's values, which is the same test on their differences.
    t = mean / (s / sqrt(n)) over the queries where the pair's difference is defined,
    p = 2 P(T_{n-1} >= |t|) (``scipy.stats.t``), from the merged
    :class:`~prefeval.core.moments.PairMoments` (so equal to ``scipy.stats.ttest_1samp`` to
    about 1e-15).  Below two queries p = 1.  A pair whose differences all tie
    (:mod:`prefeval.core.ties`: the largest ties with the smallest) gets p = 1 when they are
    0 and p = 0 otherwise (a zero variance has no t).
    """
    from scipy import stats

    moments = evidence.moments(name)
    out = np.ones(len(moments.n))
    constant = moments.constant()
    small = moments.n < 2
    mean = moments.mean()
    fixed = constant & ~small
    out[fixed] = np.where(ties.is_zero(mean[fixed]), 1.0, 0.0)
    varying = ~constant & ~small
    if varying.any():
        n = moments.n[varying]
        t = mean[varying] / np.sqrt(moments.variance()[varying] / n)
        out[varying] = np.minimum(1.0, 2.0 * stats.t.sf(np.abs(t), n - 1))
    return out


def sign_pvalues(evidence: Evidence, name: str) -> np.ndarray:
    """Two-sided exact binomial test of wins against losses (ties dropped), per pair.

    Equals ``scipy.stats.binomtest(wins, wins + losses, 0.5).pvalue``; with p = 1/2
    the two-sided p-value is min(1, 2 P(X <= min(wins, losses))), computed for all
    pairs at once with ``scipy.stats.binom``.  Signs by :mod:`prefeval.core.ties`; an
    undefined difference counts for neither.
    """
    from scipy import stats

    moments = evidence.moments(name)
    wins, losses = moments.wins, moments.losses
    n = wins + losses
    tail = stats.binom.cdf(np.minimum(wins, losses), np.maximum(n, 1), 0.5)
    return np.where(n > 0, np.minimum(1.0, 2.0 * tail), 1.0)


_THREADED_SIZE = 1 << 17  # scores per trial from which threads pay off
_STREAM_ROWS = 8192  # (trial, query) rows of one random stream
_CHUNK_BYTES = 4 << 20  # digit codes of one chunk of trials (one call of the kernel)
#: digit codes are uniform below at most 2**48: :func:`_shuffle_sums` divides them exactly
_CODE_LIMIT = 1 << 48


def _digit_groups(n: int) -> list[tuple[int, list[int]]]:
    """The Fisher-Yates steps k = n-1, ..., 1 (a uniform j in 0..k each, radix k+1) in
    groups whose radix product is at most :data:`_CODE_LIMIT`, one uint64 draw each:
    ``(product, steps)``."""
    groups: list[tuple[int, list[int]]] = []
    steps: list[int]
    product, steps = 1, []
    for k in range(n - 1, 0, -1):
        if product * (k + 1) > _CODE_LIMIT:
            groups.append((product, steps))
            product, steps = 1, []
        product *= k + 1
        steps.append(k)
    if steps:
        groups.append((product, steps))
    return groups


def _trial_ranges(
    columns: np.ndarray, first: int, stop: int, entropy, per_stream: int = 1
) -> np.ndarray:
    """max - min column mean of each of the trials ``first`` .. ``stop - 1``.

    ``columns`` is the runs x queries score matrix.  The trials come in blocks of
    ``per_stream`` (``first`` a multiple of it, ``stop`` one too or the last trial):
    block b draws from its own stream, PCG64 seeded by ``SeedSequence(entropy,
    spawn_key=(b,))`` (the b-th child of ``SeedSequence(seed).spawn``), and each
    trial's column sums are added up on their own, query after query, so a trial's
    range is the same float whatever blocks share its chunk or thread.

    Every query's row is shuffled by Fisher-Yates (:func:`_shuffle_sums`): for k = n-1
    .. 1 a uniform j in 0..k picks the value that lands in column k and the value at k
    takes its place, so every one of the n! orders is equally likely.  The j of a row
    are the mixed-radix digits of uniform integers below (k+1) k (k-1) ... <= 2**48
    (:func:`_digit_groups`; ``Generator.integers``, exact), several per draw.
    """
    columns = np.ascontiguousarray(columns, dtype=np.float64)
    n, q = columns.shape
    trials = stop - first
    groups = _digit_groups(n)
    codes = np.empty((len(groups), trials, q), dtype=np.uint64)
    for start in range(first, stop, per_stream):
        seeds = np.random.SeedSequence(entropy, spawn_key=(start // per_stream,))
        rng = np.random.Generator(np.random.PCG64(seeds))
        rows = slice(start - first, min(stop, start + per_stream) - first)
        for g, (product, _) in enumerate(groups):
            codes[g, rows] = rng.integers(0, product, size=codes[g, rows].shape, dtype=np.uint64)
    steps = np.array([len(steps) for _, steps in groups], dtype=np.intp)
    sums = np.zeros((trials, n))
    _kernel()(columns, codes, steps, _batch_queries(n), sums)
    means = sums / q
    return means.max(axis=1) - means.min(axis=1)


#: scores in one batch of queries that :func:`_shuffle_sums` shuffles at a time: 256 KB
_BATCH_SCORES = 1 << 15


def _batch_queries(n: int) -> int:
    """Queries shuffled together by :func:`_shuffle_sums`: :data:`_BATCH_SCORES` scores
    (a level-2 cache), 64 to 512 queries (the loops over a batch are long enough)."""
    return max(64, min(512, _BATCH_SCORES // max(1, n)))


def _shuffle_sums(columns, codes, steps, batch, sums):
    """Add to ``sums`` (trials x runs) the column sums of every trial's shuffle of the
    runs x queries matrix ``columns``.

    ``codes[g, t, i]`` holds the digits of trial t and query i for the Fisher-Yates
    steps of digit group g (:func:`_digit_groups`; ``steps[g]`` of them): step k takes
    the digit j = code mod (k+1), then code = code // (k+1), in float64, exactly: for
    an integer code < 2**48, (code + 1/2) / (k+1) lies at least 1/(2(k+1)) from an
    integer and its product by the rounded 1/(k+1) errs by under 2**-4/(k+1), so
    ``floor`` gives the quotient.  ``batch`` queries are shuffled at a time, step by
    step across them (no dependency from one query to the next); the sum of column k
    adds the queries' values in query order whatever ``batch``, so the result does
    not depend on it.  Compiled by :func:`_kernel` (plain Python here, slow).
    """
    n, q = columns.shape
    trials = sums.shape[0]
    values = np.empty((n, batch))
    code = np.empty(batch)
    digit = np.empty(batch, dtype=np.intp)
    for lo in range(0, q, batch):
        size = min(batch, q - lo)
        for t in range(trials):
            for k in range(n):
                for b in range(size):
                    values[k, b] = columns[k, lo + b]
            k = n - 1
            for g in range(len(steps)):
                for b in range(size):
                    code[b] = codes[g, t, lo + b]
                for _ in range(steps[g]):
                    radix = k + 1.0
                    inverse = 1.0 / radix
                    for b in range(size):
                        rest = np.floor((code[b] + 0.5) * inverse)
                        digit[b] = np.intp(code[b] - rest * radix)
                        code[b] = rest
                    total = sums[t, k]
                    for b in range(size):
                        j = digit[b]
                        total += values[j, b]
                        values[j, b] = values[k, b]
                    sums[t, k] = total
                    k -= 1
            total = sums[t, 0]
            for b in range(size):
                total += values[0, b]
            sums[t, 0] = total


_compiling = threading.Lock()


@functools.cache
def _compiled():
    try:
        import numba

        signature = "void(float64[:, ::1], uint64[:, :, ::1], intp[::1], intp, float64[:, ::1])"
        try:  # machine code cached on disk (next to this file, else the user's cache)
            return numba.njit(signature, nogil=True, cache=True)(_shuffle_sums)
        except RuntimeError:  # no writable cache directory (a read-only install, no home)
            return numba.njit(signature, nogil=True)(_shuffle_sums)
    except (ImportError, OSError) as error:
        # llvmlite's library cannot be mapped under an address-space limit (ulimit -v):
        # memory ran out, which the CLI says in one line
        if limits.address_space() is not None:
            raise MemoryError from error
        raise


def _kernel():
    """:func:`_shuffle_sums` compiled by numba for its one signature (imported here:
    ``prefeval --help`` does not load it), once per process, from numba's disk cache
    after the first time; it releases the GIL, so threads run it at once."""
    with _compiling:
        return _compiled()


def _kernel_ticks():
    """Chunks of no trials (:func:`_trial_counts`'s (0, None)), one each 0.1 s, while
    :func:`_kernel` compiles (or loads) in a thread: a progress bar shows the wait on a
    terminal, not a stall."""
    if _compiled.cache_info().currsize:  # compiled already in this process
        return
    with ThreadPoolExecutor(max_workers=1) as pool:
        ready = pool.submit(_kernel)
        while not wait([ready], timeout=0.1).done:
            yield 0, None
        ready.result()


def _trial_counts(shared: tuple, start: int) -> tuple[int, np.ndarray]:
    """(the number of trials, per pair the trials whose range reaches its threshold) of
    the chunk of trials from ``start``; ``shared``: (runs x queries ``columns``, the
    pairs' thresholds, trials, trials per chunk, ``entropy``, ``per_stream``) as
    :func:`hsd_pvalues` makes them (:func:`_trial_ranges`)."""
    columns, threshold, trials, chunk, entropy, per_stream = shared
    stop = min(trials, start + chunk)
    ranges = _trial_ranges(columns, start, stop, entropy, per_stream)
    ranges.sort()
    return stop - start, len(ranges) - np.searchsorted(ranges, threshold, "left")


def hsd_pvalues(
    scores: np.ndarray,
    pairs: np.ndarray,
    trials: int = DEFAULT_TRIALS,
    seed: int | None = 0,
    progress: bool | None = None,
    label: str = "",
    *,
    threads: int | None = None,
    chunk_rows: int | None = None,
    jobs: int | None = None,
    engine: Engine | None = None,
) -> np.ndarray:
    """Randomized Tukey HSD (Carterette 2012) on a queries x runs score matrix.

    Each trial permutes every query's row independently (uniformly, exactly);
    p(a, b) = (1 + number of trials whose max minus min column mean >= |mean_a -
    mean_b|) / (1 + trials), where ">=" follows the tie rule of :mod:`prefeval.core.ties`.
    The columns should come in a canonical order (:func:`pair_tests` sorts them by run
    name) so that the random permutations, and hence the p-values, do not depend on the
    order of the runs.  Each block of trials (8192 // queries of them, at least 1) has
    its own random stream derived from ``seed`` and the block's number, so the p-values
    do not depend on ``threads`` (default: ``jobs``, the cores it may use (default the
    usable CPUs, :func:`~prefeval.core.parallel.usable_cpus`), for a matrix of 2**17
    scores or more, else 1) nor on ``chunk_rows`` (about how many (trial, query) rows one call
    of the compiled kernel handles; memory does not grow with ``trials``) nor on the
    ``engine`` whose :meth:`~prefeval.engine.job.Engine.blocks` run the chunks (default
    the local engine, on ``threads`` threads; a Dask engine's workers, each sent the
    matrix once): the chunks' counts are integers, summed exactly.
    """
    scores = np.asarray(scores, dtype=np.float64)
    q, n = scores.shape
    if q == 0 or n < 2 or len(pairs) == 0:
        return np.ones(len(pairs))
    means = scores.mean(axis=0)
    observed = np.abs(means[pairs[:, 0]] - means[pairs[:, 1]])
    # trials with range >= observed, a range that ties with it included
    threshold = observed - ties.TOLERANCE * np.maximum(1.0, observed)
    entropy = np.random.SeedSequence(seed).entropy
    columns = np.ascontiguousarray(scores.T)
    # one stream per block of trials: few streams to seed when the trials are small
    per_stream = max(1, _STREAM_ROWS // q)
    if chunk_rows is None:  # about 4 MB of digit codes per chunk, at least 8192 rows
        chunk_rows = max(_STREAM_ROWS, _CHUNK_BYTES // (8 * len(_digit_groups(n))))
    chunk = per_stream * max(1, min(-(-trials // per_stream), chunk_rows // (per_stream * q)))
    starts = range(0, trials, chunk)
    if threads is None:
        # the compiled kernel releases the GIL; below ~1e5 scores a trial the calls are
        # too short for a second thread to gain anything
        threads = (jobs or usable_cpus()) if q * n >= _THREADED_SIZE else 1
    shared = (columns, threshold, trials, chunk, entropy, per_stream)
    at_least = np.zeros(len(pairs), dtype=np.int64)
    counted = (engine or LocalEngine()).blocks(
        _trial_counts, shared, starts, threads=threads, ready=_kernel_ticks()
    )
    done = progress_bar(
        counted,
        desc=f"HSD trials {label}".rstrip(),
        unit="trial",
        enable=progress,
        total=trials,
        count=operator.itemgetter(0),
    )
    for _, counts in done:  # counted chunk by chunk: memory does not grow with trials
        if counts is not None:
            at_least += counts
    return (1.0 + at_least) / (1.0 + trials)


def adjust(pvalues: np.ndarray, correction: str) -> np.ndarray:
    """p-values adjusted for the m tests of ``pvalues`` (NaN: not tested, kept NaN and not
    counted), as ``statsmodels.stats.multitest.multipletests`` adjusts them:
    ``bonferroni`` min(1, m p); ``holm``, step-down, the running maximum of (m - i + 1)
    p_(i) over the sorted p-values; ``bh`` (Benjamini-Hochberg, false discovery rate),
    step-up, the running minimum from the largest of m p_(i) / i; ``by``
    (Benjamini-Yekutieli, any dependence) bh times sum_{k<=m} 1/k; each at most 1."""
    p = np.asarray(pvalues, dtype=float)
    tested = ~np.isnan(p)
    if not tested.all():
        out = np.full(len(p), np.nan)
        out[tested] = adjust(p[tested], correction)
        return out
    m = len(p)
    if correction not in CORRECTIONS:
        raise ValueError(f"unknown correction {correction!r}; use one of {', '.join(CORRECTIONS)}")
    if correction == "none" or m == 0:
        return p.copy()
    if correction == "bonferroni":
        return np.minimum(1.0, p * m)
    order = np.argsort(p, kind="stable")
    ranked = p[order]
    if correction == "holm":
        stepped = np.maximum.accumulate(ranked * (m - np.arange(m)))
    else:
        scale = 1.0 if correction == "bh" else float(np.sum(1.0 / np.arange(1, m + 1)))
        scaled = ranked * m * scale / np.arange(1, m + 1)
        stepped = np.minimum.accumulate(scaled[::-1])[::-1]
    out = np.empty(m)
    out[order] = np.minimum(1.0, stepped)
    return out


#: fewer evaluated queries than this: a significance test's p-values are a weak guide
#: (docs/output.md, "Small samples": 25 topics is the smallest topic set of the
#: studies of IR test reliability, Voorhees & Buckley 2002, Urbano et al. 2019)
MIN_QUERIES = 25


def sample_caveats(evidence: Evidence, tests=DEFAULT_TESTS) -> list[str]:
    """What makes the p-values of ``tests`` on ``evidence`` a weak guide, as notices
    (empty when nothing): fewer than :data:`MIN_QUERIES` queries; for ``ttest``, run
    pairs whose differences are the same on every query (no variance: p = 0 as
    :func:`ttest_pvalues` gives it, or 1 when they are 0), counted as run pairs (on
    any measure) and per measure.  The numbers stay as computed; the commands say these
    once each."""
    caveats = []
    n_q = len(evidence.query_ids)
    if tests and n_q < MIN_QUERIES:
        caveats.append(
            f"significance tests on {n_q} {'query' if n_q == 1 else 'queries'}, fewer than "
            f"{MIN_QUERIES}: their p-values are a weak guide"
        )
    if "ttest" in tests:
        counts, any_measure = [], None
        for name in evidence.measures:
            moments = evidence.moments(name)
            fixed = moments.constant() & (moments.n >= 2) & ~ties.is_zero(moments.mean())
            any_measure = fixed if any_measure is None else any_measure | fixed
            counts += [f"{name} {int(fixed.sum())}"] if fixed.any() else []
        if counts:
            assert any_measure is not None  # set by the measure counted
            total = len(any_measure)
            caveats.append(
                f"ttest: the differences of {int(any_measure.sum())} of {total} run "
                f"pair{'' if total == 1 else 's'} are the same on every query "
                f"({', '.join(counts)}): no variance, so the t-test gives p = 0"
            )
    return caveats


def pair_tests(
    evidence: Evidence,
    tests=DEFAULT_TESTS,
    correction: str = "bonferroni",
    trials: int = DEFAULT_TRIALS,
    seed: int | None = 0,
    progress: bool | None = None,
    jobs: int | None = None,
    notify=None,
    engine: Engine | None = None,
) -> pd.DataFrame:
    """One row per measure, test and run pair: ``measure, test, run_a, run_b, p_value,
    p_adjusted``; ``randomization`` needs each pair's per-query differences (a cube of
    the preferences, not streamed moments), with the HSD's ``trials`` and ``seed``; the
    HSD on at most ``jobs`` cores (``Options.jobs``; default the usable
    CPUs), or on ``engine``'s workers (:func:`hsd_pvalues`), its trials one stretch of the
    progress bar (:func:`~prefeval.core.progress.series`); ``notify``: told
    :func:`sample_caveats` (None: not)."""
    for caveat in sample_caveats(evidence, tests) if notify is not None else ():
        notify(caveat)
    with series(len(evidence.measures) if "hsd" in tests else 0):
        return _pair_tests(evidence, tests, correction, trials, seed, progress, jobs, engine)


def _pair_tests(evidence, tests, correction, trials, seed, progress, jobs, engine) -> pd.DataFrame:
    pairs = evidence.pairs()
    run_a = [evidence.runs[i] for i in pairs[:, 0]]
    run_b = [evidence.runs[i] for i in pairs[:, 1]]
    frames = []
    for name in evidence.measures:
        for test in tests:
            if test == "ttest":
                p, adj = ttest_pvalues(evidence, name), None
            elif test == "sign":
                p, adj = sign_pvalues(evidence, name), None
            elif test == "randomization":
                p, adj = randomization_pvalues(evidence, name, trials, seed), None
            elif test == "hsd":
                # columns by run name: the same random permutations whatever the run order
                canonical = evidence.name_order()
                where = np.empty_like(canonical)
                where[canonical] = np.arange(len(canonical))
                scores = evidence.scores(name)[:, canonical]
                p = hsd_pvalues(
                    scores, where[pairs], trials, seed, progress, label=name, jobs=jobs,
                    engine=engine,
                )  # fmt: skip
                adj = p
            else:
                raise ValueError(f"unknown test {test!r}; use one of {', '.join(TESTS)}")
            if adj is None:
                adj = adjust(p, correction)
            frames.append(
                pd.DataFrame(
                    {
                        "measure": name,
                        "test": test,
                        "correction": "tukey" if test == "hsd" else correction,
                        "run_a": run_a,
                        "run_b": run_b,
                        "p_value": p,
                        "p_adjusted": adj,
                    }
                )
            )
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


PAIR_COLUMNS = [
    "measure",
    "run_a",
    "run_b",
    "queries",
    "mean",
    "ci_low",
    "ci_high",
    "wins",
    "ties",
    "losses",
    "effect",
]


#: the range of every preference's per-query Delta(a, b), hence of its mean: RPP's
#: weights sum to 1 over signs, a lexicographic measure is -1, 0 or +1, rrLP a
#: difference of two reciprocal ranks
PREFERENCE_RANGE = (-1.0, 1.0)


def pair_summary(
    evidence: Evidence,
    confidence: float = 0.95,
    interval: str = "t",
    resamples: int = 10000,
    seed: int | None = 0,
    notify=None,
) -> pd.DataFrame:
    """Rows ``measure, run_a, run_b, queries, mean, ci_low, ci_high, wins, ties, losses,
    effect``.

    Per measure and run pair, over the queries where the measure is defined: the mean
    per-query difference (Delta(a, b); a metric's value(a) - value(b), b - a when lower
    is better), its two-sided confidence interval at level ``confidence``, the queries a
    wins, ties and loses (signs by :mod:`prefeval.core.ties`) and the effect size mean /
    sd of the differences (sample sd, ddof 1: Cohen's d of paired differences; NaN below
    two queries or when they all tie).  ``interval`` ``t``: mean -/+ t_{(1+c)/2, n-1}
    s/sqrt(n) (``scipy.stats.t``); ``bootstrap``: the percentile bootstrap of the mean,
    ``resamples`` resamples seeded by ``seed``
    (:func:`prefeval.analysis.paired.bootstrap_intervals`; needs each pair's per-query
    differences, a cube of the preferences).  Either interval has zero width when the
    differences all tie and is NaN below two queries.  A preference's interval is
    clipped to :data:`PREFERENCE_RANGE`, [-1, 1], the range of its mean: a t interval
    can reach beyond it (19 losses and a win on 20 queries: mean -0.9, t interval from
    -1.1093), and the mean cannot, so the clipped interval holds the mean whenever the
    unclipped one does; ``notify`` (None: not told) is told on how many run pairs, per
    measure.  A baseline's interval is as computed (its range depends on the metric:
    ASL's is unbounded).
    """
    from scipy import stats

    if interval not in INTERVALS:
        raise ValueError(f"unknown interval {interval!r}; use one of {', '.join(INTERVALS)}")
    pairs = evidence.pairs()
    frames, clipped, counts = [], None, []
    for name in evidence.measures:
        moments = evidence.moments(name)
        n = moments.n
        mean = ties.snap_zero(moments.mean())
        spread = np.sqrt(np.where(n > 1, moments.variance(), 0.0))
        constant = moments.constant()
        if interval == "t":
            half = (
                stats.t.ppf(0.5 + confidence / 2, np.maximum(n - 1, 1))
                * spread
                / np.sqrt(np.maximum(n, 1))
            )
            half = np.where(constant, 0.0, half)
            half = np.where(n > 1, half, np.nan)
            low, high = mean - half, mean + half
        else:
            low, high = np.full(len(n), np.nan), np.full(len(n), np.nan)
            # a stretch of pairs at a time: their resamples' means (resamples x pairs)
            for chosen, differences in difference_rows(evidence, name, resamples):
                low[chosen], high[chosen] = paired.bootstrap_intervals(
                    differences, confidence, resamples, seed
                )
            fixed = constant & (n > 1)  # zero width at the mean, as the t interval
            low[fixed] = high[fixed] = mean[fixed]
        if evidence.is_preference(name):
            bottom, top = PREFERENCE_RANGE
            beyond = (low < bottom) | (high > top)
            low, high = np.maximum(low, bottom), np.minimum(high, top)
            clipped = beyond if clipped is None else clipped | beyond
            counts += [f"{name} {int(beyond.sum())}"] if beyond.any() else []
        frames.append(
            pd.DataFrame(
                {
                    "measure": name,
                    "run_a": [evidence.runs[i] for i in pairs[:, 0]],
                    "run_b": [evidence.runs[i] for i in pairs[:, 1]],
                    "queries": n.astype(np.int64),
                    "mean": mean,
                    "ci_low": low,
                    "ci_high": high,
                    "wins": moments.wins,
                    "ties": moments.tied,
                    "losses": moments.losses,
                    "effect": paired.effect_from(n, mean, spread, constant),
                },
                columns=PAIR_COLUMNS,
            )
        )
    if counts and notify is not None:
        bottom, top = PREFERENCE_RANGE
        assert clipped is not None  # set by the measure counted
        total = len(clipped)
        notify(
            f"{interval} interval clipped to [{bottom:g}, {top:g}], the range of a "
            f"preference's mean difference, on {int(clipped.sum())} of {total} run "
            f"pair{'' if total == 1 else 's'} ({', '.join(counts)}): the mean lies inside, "
            f"so the clipped interval holds it whenever the {interval} interval does"
        )
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=PAIR_COLUMNS)


def discriminative_power(pair_table: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """Rows ``measure, test, correction, alpha, significant, pairs, percent``."""
    rows = []
    for (name, test, corr), part in pair_table.groupby(
        ["measure", "test", "correction"], sort=False
    ):
        significant = int((part["p_adjusted"] < alpha).sum())
        total = len(part)
        rows.append((name, test, corr, alpha, significant, total, 100.0 * significant / total))
    return pd.DataFrame(
        rows,
        columns=["measure", "test", "correction", "alpha", "significant", "pairs", "percent"],
    )
