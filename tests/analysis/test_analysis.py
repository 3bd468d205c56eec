"""The analysis layer: aggregation (win rates, MC4, Borda, Copeland, ranks), statistics
(t-test, sign test, randomized Tukey HSD, corrections), correlation (Kendall's tau,
agreement, ties), robustness, reading tables back, and the analysis commands end to end
on the TREC 2012 Web track data (../shared/data/web2012).

Small cases are worked by hand in the comments; the web2012 checks recompute every
number independently (pandas + scipy + ir-measures) from the tables prefeval writes.
"""

from __future__ import annotations

import io
import json
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import invoke
from scipy import stats

from prefeval.analysis.agreement import agreement_table, kendall_tau, tau_table, ties_table
from prefeval.analysis.evidence import gather_inputs
from prefeval.analysis.orderings import (
    Evidence,
    competition_rank,
    copeland,
    mc4,
    order,
    orderings,
    run_scores,
)
from prefeval.analysis.significance import (
    adjust,
    discriminative_power,
    hsd_pvalues,
    pair_tests,
    sign_pvalues,
    ttest_pvalues,
)
from prefeval.core.cube import PreferenceCube, borda, win_rates
from prefeval.core.errors import InputError
from prefeval.io.tables import PREF_COLUMNS, cube_from_table, read_table
from prefeval.options import Options

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "sample_data"
SAMPLE_RUNS = sorted(str(p) for p in (SAMPLE / "runs").iterdir())

NO_BASELINES = Options(baselines=())  # gather_inputs without baselines


# --------------------------------------------------------------------------- helpers


def make_cube(values, runs=("a", "b", "c"), measures=("m",), queries=None) -> PreferenceCube:
    """A cube from values[measure][pair][query], pairs in np.triu_indices order."""
    values = np.asarray(values, dtype=float)
    n = len(runs)
    ia, ja = np.triu_indices(n, 1)
    queries = queries or [str(i + 1) for i in range(values.shape[2])]
    return PreferenceCube(list(measures), list(runs), list(queries), np.stack([ia, ja], 1), values)


def oriented(cube: PreferenceCube) -> dict:
    """(measure, x, y, query) -> Delta(x, y) for both orders of every pair (NaN left out)."""
    out = {}
    for k, m in enumerate(cube.measures):
        for p, (i, j) in enumerate(cube.pairs):
            for q, qid in enumerate(cube.query_ids):
                v = cube.values[k, p, q]
                if not np.isnan(v):
                    out[m, cube.runs[i], cube.runs[j], qid] = v
                    out[m, cube.runs[j], cube.runs[i], qid] = -v
    return out


def evidence_of(cube: PreferenceCube, metrics=None, better=None) -> Evidence:
    return Evidence(
        list(cube.runs), list(cube.query_ids), cube, dict(metrics or {}), dict(better or {})
    )


def ok(result):
    assert result.exit_code == 0, (result.exit_code, result.stderr, result.exception)
    return result.stdout


# pandas < 3 parses floats with a fast converter that is not always correctly rounded
# (0.02642857142857143 reads as 0.0264285714285714); pandas 3 parses them exactly and
# deprecates the option
_EXACT_FLOATS = {"float_precision": "round_trip"} if int(pd.__version__.split(".")[0]) < 3 else {}


def frame(text: str) -> pd.DataFrame:
    """A tsv written by prefeval, text columns kept as text, floats read exactly."""
    return pd.read_csv(
        io.StringIO(text),
        sep="\t",
        dtype={c: str for c in ("measure", "run", "run_a", "run_b", "query_id")},
        keep_default_na=False,
        na_values=[""],
        **_EXACT_FLOATS,
    )


# The orderings of three runs used below, as per-query preferences in pair order
# (a,b), (a,c), (b,c) with Delta = +1 when the first run is ranked above the second.
# W_q(x) = sum_y Delta(x, y) then ranks the runs exactly as the ordering does.
ORDER_DELTAS = {
    "abc": (1, 1, 1),  # a > b > c: W = (2, 0, -2)
    "acb": (1, 1, -1),  # a > c > b: W = (2, -2, 0)
    "bca": (-1, -1, 1),  # b > c > a: W = (-2, 2, 0)
    "cab": (1, -1, -1),  # c > a > b: W = (0, -2, 2)
}


def cube_of_orderings(*names) -> PreferenceCube:
    per_query = np.array([ORDER_DELTAS[n] for n in names], dtype=float).T  # pairs x queries
    return make_cube(per_query[None])


# --------------------------------------------------------------------------- 1. win rates


def test_win_rates_by_hand():
    # runs a, b, c; pairs (a,b), (a,c), (b,c); three queries
    # q1: D(a,b)=0.5, D(a,c)=1, D(b,c)=-0.25
    #     W(a) = 0.5 + 1 = 1.5; W(b) = -0.5 + -0.25 = -0.75; W(c) = -1 + 0.25 = -0.75
    # q2: D(a,b)=-1, D(a,c)=0, D(b,c)=0.5
    #     W(a) = -1 + 0 = -1; W(b) = 1 + 0.5 = 1.5; W(c) = 0 - 0.5 = -0.5
    # q3: D(a,c) undefined (NaN) -> the query is dropped
    values = [[[0.5, -1.0, 0.2], [1.0, 0.0, np.nan], [-0.25, 0.5, 0.3]]]
    cube = make_cube(values)
    expected = np.array([[1.5, -0.75, -0.75], [-1.0, 1.5, -0.5]])
    w = win_rates(cube.values[0], cube.pairs, 3)
    np.testing.assert_array_equal(w, expected)
    np.testing.assert_array_equal(evidence_of(cube).win_rates("m"), expected)
    np.testing.assert_array_equal(evidence_of(cube).scores("m"), expected)
    # W sums to 0 over runs (antisymmetry of Delta)
    np.testing.assert_array_equal(w.sum(axis=1), [0.0, 0.0])


def test_win_rates_four_runs():
    # runs a, b, c, d; pairs (a,b) (a,c) (a,d) (b,c) (b,d) (c,d) = 1, 2, 3, 4, 5, 6 / 10
    # W(a) = .1 + .2 + .3 = .6
    # W(b) = -.1 + .4 + .5 = .8
    # W(c) = -.2 - .4 + .6 = 0
    # W(d) = -.3 - .5 - .6 = -1.4
    values = np.array([[[0.1], [0.2], [0.3], [0.4], [0.5], [0.6]]])
    cube = make_cube(values, runs=("a", "b", "c", "d"))
    w = win_rates(cube.values[0], cube.pairs, 4)
    np.testing.assert_allclose(w, [[0.6, 0.8, 0.0, -1.4]], rtol=0, atol=1e-15)


# --------------------------------------------------------------------------- 2. MC4


def stationary_by_power(scores: np.ndarray, teleport: float) -> np.ndarray:
    """MC4 rebuilt from the definition, solved by power iteration."""
    q, n = scores.shape
    chain = np.zeros((n, n))
    for a in range(n):
        for b in range(n):
            if a == b:
                continue
            b_over_a = sum(scores[k, b] > scores[k, a] for k in range(q))
            a_over_b = sum(scores[k, a] > scores[k, b] for k in range(q))
            if b_over_a > a_over_b:
                chain[a, b] = 1.0 / n
        chain[a, a] = 1.0 - chain[a].sum()
    chain = (1 - teleport) * chain + teleport / n
    pi = np.full(n, 1.0 / n)
    for _ in range(5000):
        pi = pi @ chain
    return pi, chain


def test_mc4_condorcet_winner():
    # queries rank a>b>c, a>c>b, b>c>a: a beats b (2:1) and c (2:1); b beats c (2:1)
    # transition (n=3): from a stay 1; from b -> a 1/3, stay 2/3; from c -> a, b 1/3, stay 1/3
    # with teleport t = 0.05, pi_j = 0.95 * sum_i pi_i P_ij + 0.05/3:
    #   pi_c (1 - 0.95/3) = 0.05/3                  -> pi_c = 0.05/2.05 = 1/41 = 11/451
    #   pi_b (1 - 0.95*2/3) = 0.95/3 pi_c + 0.05/3  -> pi_b * 1.1 = 3/41 -> pi_b = 30/451
    #   pi_a = 1 - 11/451 - 30/451 = 410/451
    cube = cube_of_orderings("abc", "acb", "bca")
    scores = evidence_of(cube).scores("m")
    np.testing.assert_array_equal(scores, [[2, 0, -2], [2, -2, 0], [-2, 2, 0]])
    pi = mc4(scores, 0.05)
    # each score the float64 nearest its exact value (Python's int / int rounds so)
    assert pi.tolist() == [410 / 451, 30 / 451, 11 / 451]
    assert abs(pi.sum() - 1.0) < 1e-15
    power, chain = stationary_by_power(scores, 0.05)
    np.testing.assert_allclose(pi @ chain, pi, rtol=0, atol=1e-15)  # pi P = pi
    np.testing.assert_allclose(pi, power, rtol=0, atol=1e-12)
    assert np.argmax(pi) == 0
    table = order(evidence_of(cube), method="mc4")
    assert list(table["run"]) == ["a", "b", "c"]
    assert list(table["rank"]) == [1, 2, 3]
    assert set(table["method"]) == {"mc4"}
    np.testing.assert_allclose(table["score"], [410 / 451, 30 / 451, 11 / 451], atol=1e-15)


def test_mc4_scores_are_the_floats_nearest_the_exact_stationary_distribution(monkeypatch):
    """Six runs in one total order on every query (f above e above ... above a), teleport
    t = 1/20.  With pi A = p 1, A = (q - p) L + n p I = 19 L + 6 I (L = diag(B 1) - B,
    B[a, b] = b beats a), the column of the run ranked r reads
    (19 (r - 1) + 6) pi_r - 19 (1 - pi_1 - ... - pi_r) = 1, the runs below it being the
    ones it beats:
      r = 1: 6 pi_1 - 19 (1 - pi_1) = 1                     -> pi_1 = 20/25 = 4/5
      r = 2: 25 pi_2 - 19 (1/5 - pi_2) = 1                  -> pi_2 = (24/5)/44 = 6/55
      r = 3: 44 pi_3 - 19 (1/5 - 6/55 - pi_3) = 1           -> pi_3 = (30/11)/63 = 10/231
    and on: 20/861, 60/4141, 1/101.  A float64 solve gave 0.8000000000000004 for 4/5."""
    from prefeval.analysis import orderings as module

    exact = [4 / 5, 6 / 55, 10 / 231, 20 / 861, 60 / 4141, 1 / 101]
    scores = np.array([[6.0, 5, 4, 3, 2, 1]])  # a (first column) ranked first
    pi = mc4(scores, 0.05)
    assert pi.tolist() == exact and repr(float(pi[0])) == "0.8"
    # whatever the order of the runs: the same floats, moved with their runs
    shuffled = [3, 0, 5, 1, 4, 2]
    assert mc4(scores[:, shuffled], 0.05).tolist() == [exact[i] for i in shuffled]
    # the exact solve in fractions, taken when no refinement certifies, agrees
    monkeypatch.setattr(module, "_REFINEMENTS", 0)
    assert mc4(scores, 0.05).tolist() == exact


@pytest.mark.parametrize("teleport", [0.05, 0.3, 0.9])
def test_mc4_against_power_iteration(teleport):
    # a random 6-run, 9-query case with ties: the exact solution is the fixed point
    rng = np.random.default_rng(3)
    scores = rng.integers(0, 4, size=(9, 6)).astype(float)
    pi = mc4(scores, teleport)
    power, chain = stationary_by_power(scores, teleport)
    assert abs(pi.sum() - 1.0) < 1e-12
    assert np.all(pi > 0)
    np.testing.assert_allclose(pi @ chain, pi, rtol=0, atol=1e-12)
    np.testing.assert_allclose(pi, power, rtol=0, atol=1e-12)


def test_mc4_cycle_ties():
    # a>b>c, b>c>a, c>a>b: a beats b, b beats c, c beats a (each 2:1); every run is
    # beaten by exactly one other, so the chain is symmetric: pi = (1/3, 1/3, 1/3)
    cube = cube_of_orderings("abc", "bca", "cab")
    scores = evidence_of(cube).scores("m")
    pi = mc4(scores, 0.05)
    np.testing.assert_allclose(pi, [1 / 3] * 3, rtol=0, atol=1e-15)
    np.testing.assert_allclose(pi, stationary_by_power(scores, 0.05)[0], atol=1e-12)
    # every aggregation ties here: Borda 2+1+0 = 3 each; mean W = 0 each; mean Delta
    # (a,b) = 1/3, (a,c) = -1/3, (b,c) = 1/3 -> Copeland a: +1-1, b: -1+1, c: +1-1 = 0
    for method in ("mc4", "borda", "winrate", "copeland"):
        table = order(evidence_of(cube), method=method)
        assert list(table["rank"]) == [1, 1, 1], method
        assert list(table["run"]) == ["a", "b", "c"], method
        assert len(set(table["score"].round(12))) == 1, method


def test_mc4_single_run_and_teleport_one():
    np.testing.assert_array_equal(mc4(np.array([[1.0], [2.0]])), [1.0])
    # teleport 1: pure uniform jump
    assert mc4(np.array([[3.0, 2.0, 1.0]]), 1.0).tolist() == [1 / 3] * 3


# --------------------------------------------------------------------------- 3. Borda etc.


def test_borda_with_ties_by_hand():
    # per query: runs strictly below + half of the other runs tied
    # q1 scores (2, 2, 1): a 1 + 0.5 = 1.5, b 1.5, c 0
    # q2 scores (0, 1, 1): a 0, b 1 + 0.5 = 1.5, c 1.5
    # q3 scores (3, 1, 2): a 2, b 0, c 1
    # sums: a 3.5, b 3.0, c 2.5
    scores = np.array([[2.0, 2.0, 1.0], [0.0, 1.0, 1.0], [3.0, 1.0, 2.0]])
    np.testing.assert_array_equal(borda(scores), [3.5, 3.0, 2.5])
    # four runs all tied on one query: 1.5 each (3 others tied, halved)
    np.testing.assert_array_equal(borda(np.array([[7.0, 7.0, 7.0, 7.0]])), [1.5] * 4)


def test_borda_copeland_winrate_from_cube():
    # pairs (a,b), (a,c), (b,c)
    # q1: D = (0, 1, 1)   -> W = (1, 1, -2)   Borda (1.5, 1.5, 0)
    # q2: D = (-1, -1, 0) -> W = (-2, 1, 1)   Borda (0, 1.5, 1.5)
    # q3: D = (1, 1, -1)  -> W = (2, -2, 0)   Borda (2, 0, 1)
    # Borda = (3.5, 3, 2.5); mean W = (1/3, 0, -1/3)
    # mean D: (a,b) 0, (a,c) 1/3, (b,c) 0 -> Copeland a: 0 + 1 = 1, b: 0 + 0 = 0, c: -1 + 0 = -1
    values = np.array([[0, -1, 1], [1, -1, 1], [1, 0, -1]], dtype=float)[None]
    cube = make_cube(values)
    ev = evidence_of(cube)
    np.testing.assert_array_equal(ev.scores("m"), [[1, 1, -2], [-2, 1, 1], [2, -2, 0]])
    assert run_scores(ev, "m", "borda")[1].tolist() == [3.5, 3.0, 2.5]
    np.testing.assert_allclose(run_scores(ev, "m", "winrate")[1], [1 / 3, 0, -1 / 3], atol=1e-15)
    assert run_scores(ev, "m", "copeland")[1].tolist() == [1.0, 0.0, -1.0]
    for method in ("borda", "winrate", "copeland"):
        table = order(ev, method=method)
        assert list(table["run"]) == ["a", "b", "c"]
        assert list(table["rank"]) == [1, 2, 3]
        assert set(table["method"]) == {method}


def test_copeland_ignores_undefined_queries_and_counts_zero_mean_as_tie():
    # four runs; pair means (NaN queries left out of the mean):
    # (a,b) mean(0.5, -0.25) = 0.125 > 0   a +1, b -1
    # (a,c) mean(-1, NaN)    = -1    < 0   a -1, c +1
    # (a,d) mean(0.5, -0.5)  = 0           tie
    # (b,c) mean(0.25, 0.5)  > 0           b +1, c -1
    # (b,d) mean(-0.1, -0.2) < 0           b -1, d +1
    # (c,d) mean(1, 1)       > 0           c +1, d -1
    # Copeland: a 0, b -1, c +1, d 0
    values = np.array([[0.5, -0.25], [-1, np.nan], [0.5, -0.5], [0.25, 0.5], [-0.1, -0.2], [1, 1]])[
        None
    ]
    cube = make_cube(values, runs=("a", "b", "c", "d"))
    assert run_scores(evidence_of(cube), "m", "copeland")[1].tolist() == [0.0, -1.0, 1.0, 0.0]
    means = np.array([0.125, -1.0, 0.0, 0.375, -0.15, 1.0])
    assert copeland(means, cube.pairs, 4).tolist() == [0.0, -1.0, 1.0, 0.0]
    table = order(evidence_of(cube), method="copeland")
    assert list(zip(table["rank"], table["run"])) == [(1, "c"), (2, "a"), (2, "d"), (4, "b")]


def test_winrate_is_mean_win_rate():
    rng = np.random.default_rng(11)
    values = rng.choice([-1.0, -0.5, 0.0, 0.5, 1.0], size=(1, 10, 7))  # 5 runs, 7 queries
    cube = make_cube(values, runs=("a", "b", "c", "d", "e"))
    ev = evidence_of(cube)
    w = np.zeros((7, 5))
    for p, (i, j) in enumerate(cube.pairs):
        w[:, i] += values[0, p]
        w[:, j] -= values[0, p]
    np.testing.assert_allclose(run_scores(ev, "m", "winrate")[1], w.mean(axis=0), atol=1e-15)


def test_baselines_ordered_by_mean_respecting_direction():
    # metric X (higher better): means a 0.5, b 0.25, c 0.5 -> ranks 1, 3, 1
    # ASL (lower better): means a 3, b 1, c 2 -> ranks 3, 1, 2
    x = np.array([[0.5, 0.0, 1.0], [0.5, 0.5, 0.0]])
    asl = np.array([[4.0, 1.0, 2.0], [2.0, 1.0, 2.0]])
    ev = Evidence(["a", "b", "c"], ["1", "2"], None, {"X": x, "ASL": asl}, {"ASL": False})
    table = order(ev)
    got = {(m, r): (k, s, meth) for m, meth, k, r, s in table.itertuples(index=False)}
    assert got[("X", "a")] == (1, 0.5, "mean")
    assert got[("X", "c")] == (1, 0.5, "mean")
    assert got[("X", "b")] == (3, 0.25, "mean")
    assert got[("ASL", "b")] == (1, 1.0, "mean")
    assert got[("ASL", "c")] == (2, 2.0, "mean")
    assert got[("ASL", "a")] == (3, 3.0, "mean")
    # orderings for tau: minus order's ranks (higher is better, shared ranks tie)
    scores = orderings(ev)
    assert scores["X"].tolist() == [-1.0, -3.0, -1.0]
    assert scores["ASL"].tolist() == [-3.0, -1.0, -2.0]


# --------------------------------------------------------------------------- 4. competition ranks


def test_competition_rank():
    assert competition_rank(np.array([3.0, 2.0, 2.0, 1.0])).tolist() == [1, 2, 2, 4]
    assert competition_rank(np.array([1.0, 2.0, 2.0, 3.0]), False).tolist() == [1, 2, 2, 4]
    assert competition_rank(np.array([2.0, 3.0, 1.0, 3.0])).tolist() == [3, 1, 4, 1]
    # equal to 12 significant digits: 0.1 + 0.2 and 0.3 share rank 1
    assert competition_rank(np.array([0.1 + 0.2, 0.3, 0.1])).tolist() == [1, 1, 3]
    assert competition_rank(np.array([5.0, 5.0, 5.0])).tolist() == [1, 1, 1]


# --------------------------------------------------------------------------- 5. Kendall's tau


def test_kendall_tau_hand_values():
    # x = 1 2 3 4, y = 1 3 2 4: of 6 pairs only (2,3) is discordant: (5 - 1)/6 = 4/6
    assert kendall_tau(np.array([1, 2, 3, 4]), np.array([1, 3, 2, 4])) == pytest.approx(
        4 / 6, abs=1e-15
    )
    # tau-b with ties: x = 1 1 2 3, y = 1 2 2 3
    # pairs: (1,2) tied in x; (2,3) tied in y; the other 4 concordant
    # tau_b = (4 - 0) / sqrt((6 - 1)(6 - 1)) = 4/5
    assert kendall_tau(np.array([1, 1, 2, 3]), np.array([1, 2, 2, 3])) == pytest.approx(
        0.8, abs=1e-15
    )
    assert kendall_tau(np.array([1, 2, 3]), np.array([3, 2, 1])) == pytest.approx(-1.0)
    # a constant ordering: tau undefined (NaN)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert math.isnan(kendall_tau(np.array([1, 1, 1]), np.array([1, 2, 3])))


def test_kendall_tau_is_written_exactly_from_its_counts():
    """Six runs: 15 pairs.  Every pair concordant: tau = 15 / sqrt(15 * 15) = 1 exactly
    (scipy's 15 / sqrt(15) / sqrt(15) is 0.9999999999999999).  y swapping the runs
    ranked 5 and 6 of x: one discordant pair, 13/15, the double nearest it.  x with the
    two last runs tied: 14 pairs untied in x, all concordant with y = 1..6, 14 /
    sqrt(14 * 15), one square root of the integer 210."""
    x = np.arange(6.0)
    assert stats.kendalltau(x, x).statistic == 0.9999999999999999
    assert kendall_tau(x, x) == 1.0
    assert kendall_tau(x, -x) == -1.0
    assert kendall_tau(x, np.array([0.0, 1, 2, 3, 5, 4])) == 13 / 15
    tied = np.array([0.0, 1, 2, 3, 4, 4])
    assert kendall_tau(tied, x) == 14 / math.sqrt(210)
    # 2000 runs, more than one block of rows: every pair concordant, still exactly 1
    many = np.random.default_rng(0).permutation(2000).astype(float)
    assert kendall_tau(many, 2 * many + 1) == 1.0


@pytest.mark.parametrize("seed", range(5))
def test_kendall_tau_equals_scipy_with_ties(seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 4, size=9).astype(float)
    y = rng.integers(0, 3, size=9).astype(float)
    expected = stats.kendalltau(x, y).statistic
    assert kendall_tau(x, y) == pytest.approx(expected, abs=1e-15)


def test_tau_table_by_hand():
    # three metrics on runs a, b, c (one query): X = (3, 2, 1), Y = (1, 3, 2), Z = ASL
    # (lower is better) = (1, 2, 3), i.e. the same ordering as X.
    # tau(X, Y): pairs (a,b) D, (a,c) D, (b,c) C -> (1 - 2)/3 = -1/3
    # tau(X, Z) = 1; tau(Y, Z) = -1/3
    ev = Evidence(
        ["a", "b", "c"],
        ["1"],
        None,
        {
            "X": np.array([[3.0, 2.0, 1.0]]),
            "Y": np.array([[1.0, 3.0, 2.0]]),
            "ASL": np.array([[1.0, 2.0, 3.0]]),
        },
        {"ASL": False},
    )
    table = tau_table(ev)
    assert list(zip(table["measure_a"], table["measure_b"])) == [
        ("X", "Y"),
        ("X", "ASL"),
        ("Y", "ASL"),
    ]
    np.testing.assert_allclose(table["tau"], [-1 / 3, 1.0, -1 / 3], atol=1e-15)


def test_agreement_and_ties_by_hand():
    # runs a, b, c; one preference m, one metric X; two queries
    # q1: X = (0.5, 0.5, 0.1)  diffs (a,b) 0, (a,c) +.4, (b,c) +.4
    #     m = ( 1,  1, -1)     -> (a,b) not compared; (a,c) agrees; (b,c) disagrees
    # q2: X = (0.2, 0.3, 0.3)  diffs (a,b) -.1, (a,c) -.1, (b,c) 0
    #     m = ( -1,  0,  1)    -> (a,b) agrees; (a,c) tie counts as disagreeing
    # compared 4, agree 2 -> 0.5
    # ties: m values (1, 1, -1, -1, 0, 1) -> 1 tie in 6; X diffs (0, .4, .4, -.1, -.1, 0)
    # -> 2 ties in 6
    values = np.array([[1.0, -1.0], [1.0, 0.0], [-1.0, 1.0]])[None]
    cube = make_cube(values)
    x = np.array([[0.5, 0.5, 0.1], [0.2, 0.3, 0.3]])
    ev = evidence_of(cube, {"X": x})
    agree = agreement_table(ev)
    assert agree.to_dict("records") == [
        {"measure": "m", "baseline": "X", "agreement": 0.5, "compared": 4}
    ]
    ties = ties_table(ev)
    assert ties["measure"].tolist() == ["m", "X"]
    assert ties["comparisons"].tolist() == [6, 6]
    np.testing.assert_allclose(ties["ties"], [1 / 6, 2 / 6], atol=1e-15)


# --------------------------------------------------------------------------- 6. p-values


def random_evidence(seed=5, n_runs=5, n_queries=14):
    rng = np.random.default_rng(seed)
    runs = [f"r{i}" for i in range(n_runs)]
    n_pairs = n_runs * (n_runs - 1) // 2
    values = rng.choice([-1.0, -0.5, 0.0, 0.0, 0.25, 0.5, 1.0], size=(1, n_pairs, n_queries))
    values[0, 0] = 0.0  # pair (r0, r1): all differences 0 -> p = 1
    values[0, 1] = 0.5  # pair (r0, r2): all differences 0.5 -> t-test p = 0, sign test 2/2^14
    cube = make_cube(values, runs=runs)
    metric = rng.random((n_queries, n_runs))
    asl = rng.integers(1, 30, size=(n_queries, n_runs)).astype(float)
    return evidence_of(cube, {"X": metric, "ASL": asl}, {"X": True, "ASL": False})


def test_ttest_pvalues_equal_scipy():
    ev = random_evidence()
    pairs = ev.pairs()
    p = ttest_pvalues(ev, "m")
    values = ev.preferences("m")
    assert p[0] == 1.0  # constant 0
    assert p[1] == 0.0  # constant 0.5
    for k in range(2, len(pairs)):
        expected = stats.ttest_1samp(values[k], 0.0).pvalue
        assert p[k] == pytest.approx(expected, rel=1e-12, abs=0)
    for name in ("X", "ASL"):
        p = ttest_pvalues(ev, name)
        for k, (i, j) in enumerate(pairs):
            expected = stats.ttest_rel(ev.metrics[name][:, i], ev.metrics[name][:, j]).pvalue
            assert p[k] == pytest.approx(expected, rel=1e-12, abs=0), (name, k)


def test_sign_pvalues_equal_binomtest():
    ev = random_evidence()
    values = ev.preferences("m")
    p = sign_pvalues(ev, "m")
    assert p[0] == 1.0  # no wins, no losses
    # 14 wins, 0 losses: 2 * 0.5^14
    assert p[1] == pytest.approx(2 * 0.5**14, rel=1e-12)
    for k in range(len(values)):
        wins, losses = int((values[k] > 0).sum()), int((values[k] < 0).sum())
        expected = stats.binomtest(wins, wins + losses, 0.5).pvalue if wins + losses else 1.0
        assert p[k] == pytest.approx(expected, rel=1e-12, abs=1e-300), k
    for name in ("X", "ASL"):
        p = sign_pvalues(ev, name)
        for k, (i, j) in enumerate(ev.pairs()):
            d = ev.metrics[name][:, i] - ev.metrics[name][:, j]
            wins, losses = int((d > 0).sum()), int((d < 0).sum())
            expected = stats.binomtest(wins, wins + losses, 0.5).pvalue if wins + losses else 1.0
            assert p[k] == pytest.approx(expected, rel=1e-12), (name, k)


def test_sign_test_hand_value():
    # 5 wins, 1 loss, 2 ties: two-sided 2 * P(X <= 1 | n=6) = 2 * 7/64 = 14/64
    values = np.array([[[1, 1, 1, 1, 1, -1, 0, 0]]], dtype=float)
    ev = evidence_of(make_cube(values, runs=("a", "b")))
    assert sign_pvalues(ev, "m")[0] == pytest.approx(14 / 64, rel=1e-14)


def test_adjustments_by_hand():
    p = np.array([0.01, 0.04, 0.03])
    # Bonferroni: p * 3 capped at 1
    np.testing.assert_allclose(adjust(p, "bonferroni"), [0.03, 0.12, 0.09], atol=1e-15)
    # Holm: sorted 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 = 0.04 -> running max 0.03, 0.06, 0.06
    np.testing.assert_allclose(adjust(p, "holm"), [0.03, 0.06, 0.06], atol=1e-15)
    np.testing.assert_array_equal(adjust(p, "none"), p)
    np.testing.assert_array_equal(adjust(np.array([0.5, 0.6]), "bonferroni"), [1.0, 1.0])
    # Holm with a tie and capping: p = (0.2, 0.2, 0.9, 0.01)
    # sorted 0.01*4 = .04, 0.2*3 = .6, 0.2*2 = .4 -> .6, 0.9*1 = .9 -> .04 .6 .6 .9
    np.testing.assert_allclose(
        adjust(np.array([0.2, 0.2, 0.9, 0.01]), "holm"), [0.6, 0.6, 0.9, 0.04], atol=1e-15
    )
    assert len(adjust(np.array([]), "holm")) == 0
    with pytest.raises(ValueError):
        adjust(p, "sidak")


def test_hsd_pvalues():
    rng = np.random.default_rng(1)
    scores = rng.random((20, 4))
    scores[:, 0] += 100.0  # run 0 far better on every query
    ia, ja = np.triu_indices(4, 1)
    pairs = np.stack([ia, ja], 1)
    trials = 300
    p = hsd_pvalues(scores, pairs, trials, seed=3)
    assert np.all((p > 0) & (p <= 1))
    # a trial reaches a range >= ~100 only if every query's +100 lands in one column:
    # probability 4 * 4^-20 per trial, so no trial does and p = 1 / (1 + B)
    involving = pairs[:, 0] == 0
    np.testing.assert_array_equal(p[involving], 1.0 / (1 + trials))
    # the other pairs are far from significant (observed range < 1 << permuted ranges)
    assert np.all(p[~involving] > 0.5)
    np.testing.assert_array_equal(p, hsd_pvalues(scores, pairs, trials, seed=3))
    # p-values are multiples of 1/(1+B)
    np.testing.assert_allclose(p * (1 + trials), np.round(p * (1 + trials)), atol=1e-9)


def test_hsd_seeds():
    rng = np.random.default_rng(2)
    scores = rng.random((15, 5))
    scores[:, 1] += 0.15
    ia, ja = np.triu_indices(5, 1)
    pairs = np.stack([ia, ja], 1)
    a = hsd_pvalues(scores, pairs, 200, seed=7)
    b = hsd_pvalues(scores, pairs, 200, seed=7)
    c = hsd_pvalues(scores, pairs, 200, seed=8)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert np.all((a > 0) & (a <= 1)) and np.all((c > 0) & (c <= 1))


def test_pair_tests_and_discriminative_power():
    ev = random_evidence()
    table = pair_tests(ev, ("ttest", "sign", "hsd"), "holm", trials=100, seed=0)
    n_pairs = len(ev.pairs())
    assert len(table) == 3 * 3 * n_pairs
    for (_, test), part in table.groupby(["measure", "test"], sort=False):
        assert len(part) == n_pairs
        if test == "hsd":
            assert set(part["correction"]) == {"tukey"}
            np.testing.assert_array_equal(part["p_value"], part["p_adjusted"])
        else:
            assert set(part["correction"]) == {"holm"}
            np.testing.assert_array_equal(part["p_adjusted"], adjust(part["p_value"], "holm"))
    power = discriminative_power(table, alpha=0.05)
    for row in power.itertuples(index=False):
        part = table[(table["measure"] == row.measure) & (table["test"] == row.test)]
        assert row.significant == int((part["p_adjusted"] < 0.05).sum())
        assert row.pairs == n_pairs
        assert row.percent == 100.0 * row.significant / n_pairs


# --------------------------------------------------------------------------- 8. tables


@pytest.mark.parametrize("qrels", ["qrels.txt", "qrels.subtopics.txt"])
@pytest.mark.parametrize("fmt", ["tsv", "csv", "jsonl"])
def test_table_round_trip(tmp_path, qrels, fmt):
    path = tmp_path / f"prefs.{fmt}"
    ok(invoke("compare", "-q", "-f", fmt, "-o", path, SAMPLE / qrels, *SAMPLE_RUNS))
    engine = gather_inputs(str(SAMPLE / qrels), SAMPLE_RUNS, options=NO_BASELINES, notify=None)
    cube = engine.evidence.cube
    table = read_table(str(path), PREF_COLUMNS)
    assert (table["query_id"] == "all").any()  # summary rows present, and ignored:
    back = cube_from_table(table, str(path))
    assert back.measures == cube.measures
    assert back.runs == cube.runs == ["sys01", "sys02", "sys03", "sys04", "sys05", "sys06"]
    assert back.query_ids == cube.query_ids
    np.testing.assert_array_equal(back.pairs, cube.pairs)
    np.testing.assert_array_equal(back.values, cube.values)  # NaN where undefined, too
    from_file = gather_inputs(prefs=str(path), options=NO_BASELINES, notify=None).evidence.cube
    np.testing.assert_array_equal(from_file.values, cube.values)


def test_table_reversed_pairs_negate(tmp_path):
    path = tmp_path / "prefs.tsv"
    ok(invoke("compare", "-q", "-o", path, SAMPLE / "qrels.txt", *SAMPLE_RUNS))
    table = read_table(str(path), PREF_COLUMNS)
    cube = cube_from_table(table)
    # write the rows of pair (sys02, sys04) the other way round, negated
    flip = (table["run_a"] == "sys02") & (table["run_b"] == "sys04")
    assert flip.sum() > 0
    swapped = table.copy()
    swapped.loc[flip, ["run_a", "run_b"]] = swapped.loc[flip, ["run_b", "run_a"]].to_numpy()
    swapped.loc[flip, "value"] = -swapped.loc[flip, "value"]
    np.testing.assert_array_equal(cube_from_table(swapped).values, cube.values)
    # shuffled rows: runs may come in another order, the preferences are the same
    shuffled = swapped.sample(frac=1, random_state=0)
    back = cube_from_table(shuffled)
    assert sorted(back.runs) == sorted(cube.runs)
    assert oriented(back) == oriented(cube)


def test_table_by_hand():
    # rows: (a,b) 0.5; (b,c) 0.25; (c,a) -1 -> runs a, b, c; D(a,c) = +1
    rows = pd.DataFrame(
        [
            ("m", "a", "b", "1", 0.5),
            ("m", "b", "c", "1", 0.25),
            ("m", "c", "a", "1", -1.0),
            ("m", "a", "b", "all", 99.0),  # summary row: ignored
        ],
        columns=PREF_COLUMNS,
    )
    cube = cube_from_table(rows)
    assert cube.runs == ["a", "b", "c"]
    assert cube.query_ids == ["1"]
    np.testing.assert_array_equal(cube.values[0, :, 0], [0.5, 1.0, 0.25])
    with pytest.raises(InputError, match="no per-query rows"):
        cube_from_table(rows[rows["query_id"] == "all"], "x.tsv")
    with pytest.raises(InputError, match="more than once"):
        cube_from_table(pd.concat([rows, rows.iloc[:1]]), "x.tsv")
    # (b,a) duplicates (a,b) too
    dup = pd.DataFrame([("m", "b", "a", "1", -0.5)], columns=PREF_COLUMNS)
    with pytest.raises(InputError, match="more than once"):
        cube_from_table(pd.concat([rows, dup]), "x.tsv")


@pytest.mark.parametrize(
    "name, text",
    [
        ("bad.tsv", "measure\trun_a\trun_b\tquery_id\nrpp\ta\tb\t1\n"),
        ("bad.csv", "measure,run_a,run_b,value\nrpp,a,b,0.5\n"),
        ("bad.jsonl", json.dumps({"measure": "rpp", "run_a": "a", "run_b": "b"}) + "\n"),
    ],
)
def test_table_missing_columns_exit_2(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    result = invoke("order", "--no-baselines", "--prefs", path)
    assert result.exit_code == 2
    assert str(path) in result.stderr
    assert result.stdout == ""
    out = tmp_path / "out.tsv"
    result = invoke("tau", "--no-baselines", "--prefs", path, "-o", out)
    assert result.exit_code == 2 and str(path) in result.stderr
    assert not out.exists()


def test_metrics_table_missing_columns_exit_2(tmp_path):
    prefs = tmp_path / "prefs.tsv"
    ok(invoke("compare", "-q", "-m", "rpp", "-o", prefs, SAMPLE / "qrels.txt", *SAMPLE_RUNS[:3]))
    metrics = tmp_path / "metrics.tsv"
    metrics.write_text("measure\trun\tvalue\nAP\tsys01\t0.5\n")
    result = invoke("order", "--prefs", prefs, "--metrics", metrics)
    assert result.exit_code == 2
    assert str(metrics) in result.stderr


# --------------------------------------------------------------------------- 7. seeds (sample data)


def test_discpower_hsd_seed_reproducible(tmp_path):
    args = ["discpower", "--test", "hsd", "--trials", "200", "--seed", "7", "-B", "AP"]
    data = [str(SAMPLE / "qrels.txt"), *SAMPLE_RUNS]
    first = ok(invoke(*args, *data))
    second = ok(invoke(*args, *data))
    assert first == second
    pairs7 = ok(invoke(*args, "--pairs", *data))
    assert pairs7 == ok(invoke(*args, "--pairs", *data))
    other = ok(invoke(*[a if a != "7" else "8" for a in args], "--pairs", *data))
    assert other != pairs7
    table = frame(pairs7)
    assert set(table["correction"]) == {"tukey"}
    assert ((table["p_value"] > 0) & (table["p_value"] <= 1)).all()
    # p-values are (1 + k) / 201
    k = table["p_value"] * 201
    np.testing.assert_allclose(k, np.round(k), atol=1e-9)


# --------------------------------------------------------------------------- 9. web2012


def run_files(web2012: Path) -> list[str]:
    runs = sorted(str(p) for p in (web2012 / "runs").glob("*.gz"))
    assert len(runs) == 8
    return runs


@pytest.fixture(scope="module", params=["adhoc", "diversity-ndeval"])
def web(request, web2012, tmp_path_factory):
    """qrels, runs, and the tables prefeval writes for them (compare -q, metrics)."""
    tmp = tmp_path_factory.mktemp(request.param)
    qrels = str(web2012 / f"qrels.{request.param}.txt.gz")
    runs = run_files(web2012)
    prefs = tmp / "prefs.tsv"
    metrics = tmp / "metrics.tsv"
    ok(invoke("compare", "-q", "-o", prefs, qrels, *runs))
    ok(invoke("metrics", "-q", "-o", metrics, qrels, *runs))
    prefs_frame = frame(prefs.read_text())
    metrics_frame = frame(metrics.read_text())
    return {
        "name": request.param,
        "qrels": qrels,
        "runs": runs,
        "run_names": [Path(r).name[: -len(".run.gz")] for r in runs],
        "prefs": prefs,
        "metrics": metrics,
        "prefs_frame": prefs_frame[prefs_frame["query_id"] != "all"],
        "metrics_frame": metrics_frame[metrics_frame["query_id"] != "all"],
        "tmp": tmp,
    }


def test_web_runs_and_prefs_give_identical_rows(web):
    data = [web["qrels"], *web["runs"]]
    for command in (
        ["order"],
        ["order", "--method", "borda"],
        ["discpower", "--test", "ttest", "--test", "sign", "--test", "hsd", "--trials", "50"],
        ["tau"],
    ):
        from_runs = ok(invoke(*command, "--no-baselines", *data))
        from_prefs = ok(invoke(*command, "--no-baselines", "--prefs", web["prefs"]))
        assert from_runs == from_prefs, command
        assert from_runs.count("\n") > 1
    # with baselines: computed from QRELS RUN... either way, or read from metrics.tsv
    from_runs = ok(invoke("order", *data))
    assert from_runs == ok(invoke("order", "--prefs", web["prefs"], *data))
    assert from_runs == ok(invoke("order", "--prefs", web["prefs"], "--metrics", web["metrics"]))
    table = frame(from_runs)
    measures = list(dict.fromkeys(table["measure"]))
    expected = [
        "rpp",
        "dcgrpp",
        "invrpp",
        *(["strpp", "stdcgrpp", "stinvrpp"] if "diversity" in web["name"] else []),
        "lexirecall",
        "lexiprecision",
        "rrlexiprecision",
        "AP",
        "nDCG",
        "RR",
        "R@1000",
        "Rprec",
        *(
            ["ERR_IA@20", "alpha_nDCG@20", "StRecall@20", "AP_IA"]
            if "diversity" in web["name"]
            else []
        ),
    ]
    assert measures == expected
    for name, part in table.groupby("measure", sort=False):
        assert sorted(part["run"]) == sorted(web["run_names"])
        assert part["rank"].min() == 1
        # competition ranks: rank = 1 + number of runs with a strictly better score
        score = part["score"].to_numpy()
        oriented = score if name != "ASL" else -score
        for rank, s in zip(part["rank"], oriented):
            assert rank == 1 + int((oriented > s + 1e-12 * max(1.0, abs(s))).sum())
        n_prefs = 9 if "diversity" in web["name"] else 6
        method = "mc4" if name in expected[:n_prefs] else "mean"
        assert set(part["method"]) == {method}, name


def ir_measures_means(qrels_path: str, run_paths, names) -> pd.DataFrame:
    """Per-run means of AP and nDCG over the evaluated queries, with ir-measures alone.

    General qrels: a document's maximum grade over subtopic rows; evaluated queries:
    those with a document of grade > 0; a query missing from a run scores 0."""
    import ir_measures

    best: dict = {}
    for qrel in ir_measures.read_trec_qrels(qrels_path):
        key = (qrel.query_id, qrel.doc_id)
        best[key] = max(best.get(key, qrel.relevance), qrel.relevance)
    qrels: dict = {}
    for (q, d), g in best.items():
        qrels.setdefault(q, {})[d] = g
    evaluated = sorted(q for q, docs in qrels.items() if any(g > 0 for g in docs.values()))
    qrels = {q: qrels[q] for q in evaluated}
    measures = [ir_measures.AP, ir_measures.nDCG]
    rows = {}
    for name, path in zip(names, run_paths):
        run = [s for s in ir_measures.read_trec_run(path) if s.query_id in qrels]
        values = {
            (str(m.measure), m.query_id): m.value
            for m in ir_measures.iter_calc(measures, qrels, run)
        }
        rows[name] = {
            str(m): sum(values.get((str(m), q), 0.0) for q in evaluated) / len(evaluated)
            for m in measures
        }
    return pd.DataFrame(rows).T


def test_web_tau_against_ir_measures(web):
    out = frame(ok(invoke("tau", "-B", "AP", "-B", "nDCG", web["qrels"], *web["runs"])))
    row = out[(out["measure_a"] == "AP") & (out["measure_b"] == "nDCG")]
    assert len(row) == 1
    means = ir_measures_means(web["qrels"], web["runs"], web["run_names"])
    expected = stats.kendalltau(means["AP"], means["nDCG"]).statistic
    assert float(row["tau"].iloc[0]) == pytest.approx(expected, abs=1e-12)
    # the metric means themselves agree with prefeval's metrics table
    table = web["metrics_frame"]
    for name in ("AP", "nDCG"):
        mine = table[table["measure"] == name].groupby("run")["value"].mean()
        np.testing.assert_allclose(
            mine[web["run_names"]].to_numpy(), means.loc[web["run_names"], name], atol=1e-12
        )
    # every pair of measures appears once; taus in [-1, 1]
    assert len(out) == len(set(zip(out["measure_a"], out["measure_b"])))
    assert ((out["tau"] >= -1) & (out["tau"] <= 1)).all()


def independent_pvalues(prefs: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (measure, a, b), part in prefs.groupby(["measure", "run_a", "run_b"], sort=False):
        d = part["value"].to_numpy(dtype=float)
        if np.all(d == d[0]):
            p_t = 1.0 if d[0] == 0 else 0.0
        else:
            p_t = stats.ttest_1samp(d, 0.0).pvalue
        wins, losses = int((d > 0).sum()), int((d < 0).sum())
        p_s = stats.binomtest(wins, wins + losses, 0.5).pvalue if wins + losses else 1.0
        rows.append((measure, a, b, p_t, p_s))
    table = pd.DataFrame(rows, columns=["measure", "run_a", "run_b", "ttest", "sign"])
    n = table.groupby("measure")["run_a"].transform("size")
    for test in ("ttest", "sign"):
        table[test + "_adj"] = np.minimum(1.0, table[test] * n)
    return table


def test_web_discpower_against_independent(web):
    result = ok(
        invoke(
            "discpower",
            "--test",
            "ttest",
            "--test",
            "sign",
            "--no-baselines",
            "--prefs",
            web["prefs"],
        )
    )
    power = frame(result)
    mine = independent_pvalues(web["prefs_frame"])
    assert (mine.groupby("measure").size() == 28).all()
    for row in power.itertuples(index=False):
        assert row.correction == "bonferroni" and row.alpha == 0.05 and row.pairs == 28
        part = mine[mine["measure"] == row.measure]
        expected = int((part[row.test + "_adj"] < 0.05).sum())
        assert row.significant == expected, (row.measure, row.test)
        assert row.percent == pytest.approx(100 * expected / 28, abs=1e-12)
    assert len(power) == 2 * mine["measure"].nunique()
    # per pair p-values, straight from QRELS RUN...
    pairs = frame(
        ok(
            invoke(
                "discpower",
                "--pairs",
                "--test",
                "ttest",
                "--test",
                "sign",
                "--no-baselines",
                web["qrels"],
                *web["runs"],
            )
        )
    )
    merged = pairs.merge(mine, on=["measure", "run_a", "run_b"])
    assert len(merged) == len(pairs) == 2 * len(mine)
    for test in ("ttest", "sign"):
        part = merged[merged["test"] == test]
        np.testing.assert_allclose(part["p_value"], part[test], rtol=1e-10, atol=1e-300)
        np.testing.assert_allclose(part["p_adjusted"], part[test + "_adj"], rtol=1e-10)

    # Holm, by hand: sort ascending, p_(k) * (m - k + 1), running maximum, capped at 1
    holm = frame(
        ok(
            invoke(
                "discpower",
                "--pairs",
                "--test",
                "ttest",
                "--correction",
                "holm",
                "--no-baselines",
                "--prefs",
                web["prefs"],
            )
        )
    )
    merged = holm.merge(mine, on=["measure", "run_a", "run_b"])
    for _, part in merged.groupby("measure"):
        p = part["ttest"].to_numpy()
        expected = np.empty(len(p))
        running = 0.0
        for rank, k in enumerate(np.argsort(p, kind="stable")):
            running = max(running, p[k] * (len(p) - rank))
            expected[k] = min(1.0, running)
        np.testing.assert_allclose(part["p_adjusted"], expected, rtol=1e-10, atol=1e-300)
        assert set(part["correction"]) == {"holm"}


def test_web_agree_against_independent(web):
    agree = frame(ok(invoke("agree", web["qrels"], *web["runs"])))
    prefs = web["prefs_frame"]
    metrics = web["metrics_frame"]
    wide = metrics.pivot_table(index=["query_id", "run"], columns="measure", values="value")
    n_rows = 0
    for row in agree.itertuples(index=False):
        part = prefs[prefs["measure"] == row.measure]
        va = wide.loc[list(zip(part["query_id"], part["run_a"])), row.baseline].to_numpy()
        vb = wide.loc[list(zip(part["query_id"], part["run_b"])), row.baseline].to_numpy()
        diff = va - vb
        decided = diff != 0
        compared = int(decided.sum())
        same = int((np.sign(part["value"].to_numpy()[decided]) == np.sign(diff[decided])).sum())
        assert row.compared == compared, (row.measure, row.baseline)
        assert row.agreement == same / compared, (row.measure, row.baseline)
        assert 0 <= row.agreement <= 1
        n_rows += 1
    assert n_rows == prefs["measure"].nunique() * metrics["measure"].nunique()
    # sgnLP and rrLP decide at the first relevant level whenever RR differs: always agree
    for measure in ("lexiprecision", "rrlexiprecision"):
        rr = agree[(agree["measure"] == measure) & (agree["baseline"] == "RR")]
        assert len(rr) == 1 and rr["compared"].iloc[0] > 0
        assert rr["agreement"].iloc[0] == 1.0

    ties = frame(
        ok(invoke("agree", "--ties", "--prefs", web["prefs"], "--metrics", web["metrics"]))
    )
    assert ((ties["ties"] >= 0) & (ties["ties"] <= 1)).all()
    for row in ties.itertuples(index=False):
        if row.measure in set(prefs["measure"]):
            values = prefs.loc[prefs["measure"] == row.measure, "value"].to_numpy()
        else:
            m = wide[row.measure].unstack("run")[web["run_names"]].to_numpy()
            ia, ja = np.triu_indices(8, 1)
            values = (m[:, ia] - m[:, ja]).ravel()
        assert row.comparisons == len(values), row.measure
        assert row.ties == int((values == 0).sum()) / len(values), row.measure
    assert len(ties) == prefs["measure"].nunique() + metrics["measure"].nunique()


ROBUSTNESS_COLUMNS = [
    "measure",
    "kind",
    "level",
    "samples",
    "tau_mean",
    "tau_std",
    "ties",
    "agreement",
]


def test_web_robustness(web2012, tmp_path):
    qrels = str(web2012 / "qrels.adhoc.txt.gz")
    runs = run_files(web2012)
    args = [
        "robustness",
        "--queries",
        "5,25",
        "--labels",
        "0.5",
        "--samples",
        "2",
        "-B",
        "AP",
        "-B",
        "RR",
    ]
    first = ok(invoke(*args, "--seed", "3", qrels, *runs))
    assert first == ok(invoke(*args, "--seed", "3", qrels, *runs))
    table = frame(first)
    assert list(table.columns) == ROBUSTNESS_COLUMNS
    measures = [
        "rpp",
        "dcgrpp",
        "invrpp",
        "lexirecall",
        "lexiprecision",
        "rrlexiprecision",
        "AP",
        "RR",
    ]
    assert sorted(set(table["measure"])) == sorted(measures)
    assert len(table) == 3 * len(measures)
    assert (table["samples"] == 2).all()
    assert sorted(set(zip(table["kind"], table["level"]))) == [
        ("labels", 0.5),
        ("queries", 5),
        ("queries", 25),
    ]
    assert ((table["tau_mean"] >= -1) & (table["tau_mean"] <= 1)).all()
    assert (table["tau_std"] >= 0).all()
    queries = table[table["kind"] == "queries"]
    assert queries["ties"].isna().all() and queries["agreement"].isna().all()
    labels = table[table["kind"] == "labels"]
    assert ((labels["ties"] >= 0) & (labels["ties"] <= 1)).all()
    assert ((labels["agreement"] >= 0) & (labels["agreement"] <= 1)).all()

    # every query drawn: the ordering is the full one, tau = 1 for every measure
    prefs = tmp_path / "prefs.tsv"
    ok(invoke("compare", "-q", "-o", prefs, qrels, *runs))
    full = frame(
        ok(
            invoke(
                "robustness", "--queries", "50", "--samples", "2", "--prefs", prefs, qrels, *runs
            )
        )
    )
    assert len(full) == 6 + 5  # 6 preference measures (adhoc: no subtopic ones), 5 baselines
    # (scipy's tau-b of two identical vectors of 8 distinct values is 0.9999999999999998:
    # prefeval reports scipy's value, so 1 up to float rounding)
    np.testing.assert_allclose(full["tau_mean"], 1.0, rtol=0, atol=1e-15)
    assert (full["tau_std"] == 0.0).all()
    # query sampling from --prefs equals query sampling from QRELS RUN... (same seed)
    a = ok(
        invoke(
            "robustness", "--queries", "5,25", "--samples", "2", "--no-baselines", "--prefs", prefs
        )
    )
    b = ok(
        invoke("robustness", "--queries", "5,25", "--samples", "2", "--no-baselines", qrels, *runs)
    )
    assert a == b
    # label sampling needs QRELS RUN...
    result = invoke("robustness", "--labels", "0.5", "--no-baselines", "--prefs", prefs)
    assert result.exit_code == 2


@pytest.mark.parametrize("qrels_name", ["qrels.txt", "qrels.subtopics.txt"])
def test_label_sample_is_the_reduced_judgments(monkeypatch, tmp_path, qrels_name):
    """A label sample's ties, agreement and tau are those of compare, metrics and order
    on a qrels file without the removed labels, worked out here from their tables: the
    sample drops the first relevant document (by docno) of each query with two or more."""
    import prefeval
    from prefeval.analysis import robustness as robust
    from prefeval.core import ties

    def first_dropped(relevant, matrix, fraction, policy, rng):
        keep = np.ones(int(relevant.offsets[-1]), dtype=bool)
        keep[relevant.offsets[:-1][relevant.sizes() >= 2]] = False
        return keep

    monkeypatch.setattr(robust, "keep_labels", first_dropped)
    qrels = SAMPLE / qrels_name
    lines = qrels.read_text().splitlines()
    relevant: dict = {}
    for line in lines:
        q, _, doc, grade = line.split()
        if int(grade) > 0:
            relevant.setdefault(q, set()).add(doc)
    removed = {(q, min(docs)) for q, docs in relevant.items() if len(docs) >= 2}
    assert len(removed) > 5
    reduced = tmp_path / "reduced.txt"
    kept = [line for line in lines if (line.split()[0], line.split()[2]) not in removed]
    reduced.write_text("\n".join(kept) + "\n")
    runs = SAMPLE_RUNS[:5]
    got = prefeval.robustness(
        qrels, runs, labels=[0.5], samples=1, baselines=["AP"], notify=None, cache=False
    ).set_index("measure")

    def differences(path):
        prefs = prefeval.compare(path, runs, per_query=True, summary=False, notify=None)
        values = prefs.set_index(["measure", "run_a", "run_b", "query_id"])["value"]
        ap = prefeval.metrics(path, runs, measures="AP", per_query=True, notify=None)
        ap = ap.pivot(index="query_id", columns="run", values="value")
        pairs = prefs[["run_a", "run_b"]].drop_duplicates().itertuples(index=False)
        for a, b in pairs:
            for q in ap.index:
                values["AP", a, b, q] = ap.loc[q, a] - ap.loc[q, b]
        return values

    full, part = differences(qrels), differences(reduced)
    assert part.index.equals(full.index)
    order_full = prefeval.order(qrels, runs, baselines=["AP"], notify=None)
    order_part = prefeval.order(reduced, runs, baselines=["AP"], notify=None)
    names = sorted(set(order_full["run"]))
    for name in got.index:
        sign, ref = ties.sign(part[name].to_numpy()), ties.sign(full[name].to_numpy())
        decided = ref != 0
        assert got.loc[name, "ties"] == (sign == 0).sum() / len(sign)
        assert got.loc[name, "agreement"] == (sign[decided] == ref[decided]).sum() / decided.sum()
        rank_full, rank_part = (
            -o[o.measure == name].set_index("run")["rank"].reindex(names).to_numpy(float)
            for o in (order_full, order_part)
        )
        assert got.loc[name, "tau_mean"] == kendall_tau(rank_full, rank_part)
    assert got.loc["rpp", "agreement"] < 1 and got.loc["AP", "agreement"] < 1


def test_label_samples_set_the_full_baselines_aside(young_heap):
    """While label samples compute their own baselines, the full labels' values are
    freed, their signs kept packed, and put back after, equal."""
    import gc
    import weakref

    from prefeval.analysis import robustness as robust

    rng = np.random.default_rng(3)
    whole = np.round(rng.random((2, 40, 4)), 1)  # one array, as metric_matrices gives
    ev = Evidence(["a", "b", "c", "d"], [str(q) for q in range(40)])
    ev.metrics = {"AP": whole[0], "RR": whole[1]}
    expected = {name: values.copy() for name, values in ev.metrics.items()}
    signs = {name: ev.signs_of(name, 0, 40) for name in ev.metrics}
    freed = weakref.ref(whole)
    del whole
    with robust._baselines_set_aside(ev) as (reference, packed):
        gc.collect()
        assert freed() is None and ev.metrics == {} and len(packed) == 2
        for name in expected:
            np.testing.assert_array_equal(reference(name, 0, 40), signs[name])
            np.testing.assert_array_equal(reference(name, 7, 23), signs[name][:, 7:23])
        bits = [weakref.ref(b) for p in packed for piece in p._pieces for b in piece[2:]]
    gc.collect()  # the packed signs let go once the values are back
    assert packed == [] and len(bits) == 4 and all(ref() is None for ref in bits)
    assert list(ev.metrics) == ["AP", "RR"]
    for name, values in expected.items():
        np.testing.assert_array_equal(ev.metrics[name], values)


@pytest.mark.parametrize("streamed", [False, True])
def test_query_samples_restrict_one_measure_at_a_time(monkeypatch, streamed):
    """A query sample's ordering is computed one measure at a time on the chosen queries
    (not every measure's values on the chosen queries at once): the
    same table as the whole restricted evidence gives, with its values."""
    from helpers import partition_cells

    import prefeval
    from prefeval.analysis.orderings import Evidence
    from prefeval.core import ties

    if streamed:
        monkeypatch.setattr(ties, "SUM_BLOCK", 3)
        partition_cells(monkeypatch, 200)
    restrict, seen = Evidence.restrict, []

    def watched(self, query_index, names=None):
        whole = restrict(self, query_index)
        got = restrict(self, query_index, names)
        seen.append(got.measures)
        for name in got.measures:
            np.testing.assert_array_equal(got.scores(name), whole.scores(name))
        return got

    monkeypatch.setattr(Evidence, "restrict", watched)
    table = prefeval.robustness(
        SAMPLE / "qrels.txt", SAMPLE_RUNS[:4], queries=[3, 9], samples=2,
        baselines=["AP", "RR"], notify=None, cache=False,
    )  # fmt: skip
    measures = list(dict.fromkeys(table["measure"]))
    assert len(measures) == 8 and seen == [[name] for name in measures] * 4


@pytest.mark.parametrize("streamed", [False, True])
def test_label_sample_baselines_run_with_positions_and_signs_set_aside(
    monkeypatch, streamed, young_heap
):
    """While a label sample's baselines fill their values, the runs'
    position matrix (on disk from the sample's start) and every packed sign (the full
    labels' where they were streamed, the baselines' and the sample's) wait in temporary
    files, freed, and come back equal for the agreement and the next sample (the
    sample's baseline values let go first)."""
    import contextlib
    import gc
    import weakref

    from helpers import partition_cells

    import prefeval
    from prefeval.analysis import robustness as robust
    from prefeval.core import ties

    if streamed:  # the full labels' preferences in partitions: their signs packed
        monkeypatch.setattr(ties, "SUM_BLOCK", 3)
        partition_cells(monkeypatch, 200)

    def bits(signs):
        return [weakref.ref(b) for packed in signs for piece in packed._pieces for b in piece[2:]]

    def run():
        return prefeval.robustness(
            SAMPLE / "qrels.txt", SAMPLE_RUNS[:4], labels=[0.5, 0.8], samples=2,
            measures="rpp,lexirecall", baselines=["AP", "RR"], notify=None, cache=False,
        )  # fmt: skip

    expected = run()
    measures = set(expected["measure"])
    full_set_aside = robust._baselines_set_aside
    sample_signs: list = []

    @contextlib.contextmanager
    def watch_full(evidence):
        with full_set_aside(evidence) as got:
            yield got
            gc.collect()  # the samples are done: their packed signs let go before the
            assert [ref() for ref in sample_signs] == [None] * len(sample_signs)  # restore

    held: list = []
    counted: list = []
    live: list = []
    set_aside, reduced_metrics = robust._set_aside, robust._reduced_metrics

    values: list = []

    @contextlib.contextmanager
    def watch_set_aside(signs):
        held[:] = bits(signs)
        counted.append(len(signs))
        sample_signs[:] = [weakref.ref(s) for s in signs[-(len(measures) - 2) :]]  # the sample's
        with set_aside(signs):
            yield
            gc.collect()  # the sample's baseline values let go before the rest comes back
            assert values[-1]() is None

    def watch_metrics(inputs, keep, baselines):
        gc.collect()
        live.append(sum(ref() is not None for ref in held))
        assert inputs.matrix is None and inputs.has_positions()  # the matrix on disk
        got = reduced_metrics(inputs, keep, baselines)
        values.append(weakref.ref(next(iter(got.values())).base))
        return got

    monkeypatch.setattr(robust, "_baselines_set_aside", watch_full)
    monkeypatch.setattr(robust, "_set_aside", watch_set_aside)
    monkeypatch.setattr(robust, "_reduced_metrics", watch_metrics)
    got = run()
    # the full labels' signs of every measure (of a baseline only, from a cube), and the
    # sample's of each preference measure
    preferences = len(measures) - 2
    assert counted == [2 + preferences * (2 if streamed else 1)] * 4
    assert len(held) >= 2 * counted[0]
    assert live == [0, 0, 0, 0] and len(values) == 4
    pd.testing.assert_frame_equal(got, expected)


@pytest.mark.parametrize("command", ["robustness", "report"])
def test_position_matrix_waits_aside_while_baselines_and_sections_are_made(
    monkeypatch, tmp_path, command, young_heap
):
    """The runs' position matrix (only label samples use it) waits
    in a temporary file, freed, while the full labels' baselines fill their values and
    a report's sections and query samples are made; it comes back equal for each label
    sample to choose its labels, once the full labels' baseline values have gone to disk
    in their turn, and waits there again while the sample's preferences are computed
    from its kept columns."""
    import gc
    import weakref

    from helpers import partition_cells

    import prefeval
    from prefeval.analysis import evidence as gathering
    from prefeval.core import ties
    from prefeval.present import report as reports

    monkeypatch.setattr(ties, "SUM_BLOCK", 3)  # partitions: the engine keeps the matrix
    partition_cells(monkeypatch, 200)

    def run(name):
        data = (SAMPLE / "qrels.txt", SAMPLE_RUNS[:4])
        common = dict(baselines=["AP", "RR"], samples=2, notify=None, cache=False)
        if command == "robustness":
            return prefeval.robustness(*data, labels=[0.5], queries=[5], **common)
        out = tmp_path / name
        prefeval.report(*data, output=out, robustness=True, tests="ttest", measures="rpp",
                        sections=["agreement", "robustness"], **common)  # fmt: skip
        return out.read_bytes()

    from prefeval.analysis import robustness as robust

    set_aside, metric_matrices = gathering.Inputs.set_matrix_aside, gathering.metric_matrices
    reduced_evidence, during_samples = robust._reduced_evidence, []

    def watch_sample(inputs, keep, kept):
        during_samples.append((inputs.matrix, kept.shape[1] == int(keep.sum())))
        return reduced_evidence(inputs, keep, kept)

    agreement, position_matrix = reports._agreement_section, gathering.Inputs.position_matrix
    matrix, alive = [], []

    def watch_set_aside(inputs):
        matrix.append(weakref.ref(inputs.matrix))
        set_aside(inputs)

    def watch(function):
        def watched(*args, **kw):
            gc.collect()
            alive.append(matrix[-1]() is not None)
            return function(*args, **kw)

        return watched

    def read_back(inputs):
        if inputs.matrix is None:  # read back once the full labels' values wait on disk
            alive.append(("read back", inputs.evidence.metrics))
        return position_matrix(inputs)

    monkeypatch.setattr(gathering.Inputs, "set_matrix_aside", lambda inputs: None)
    expected = run("kept.html")
    monkeypatch.setattr(gathering.Inputs, "set_matrix_aside", watch_set_aside)
    monkeypatch.setattr(gathering, "metric_matrices", watch(metric_matrices))
    monkeypatch.setattr(reports, "_agreement_section", watch(agreement))
    monkeypatch.setattr(gathering.Inputs, "position_matrix", read_back)
    monkeypatch.setattr(robust, "_reduced_evidence", watch_sample)
    got = run("aside.html")
    sections = [False] if command == "report" else []
    samples = 2 * (4 if command == "report" else 1)  # 2 samples of each level of labels
    assert matrix[0]() is None and len(matrix) == 1 + samples
    assert alive == [False, *sections, *[("read back", {})] * samples]
    assert during_samples == [(None, True)] * samples
    if command == "robustness":
        pd.testing.assert_frame_equal(got, expected)
        assert set(got["kind"]) == {"queries", "labels"}
    else:
        assert got == expected and b"fewer relevance labels" in got


def test_plot_option(tmp_path):
    data = [str(SAMPLE / "qrels.txt"), *SAMPLE_RUNS[:3]]
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        for command in (
            ["discpower", "--test", "sign", "--no-baselines", "--plot", tmp_path / "d.png"],
            [
                "robustness",
                "--queries",
                "3",
                "--samples",
                "1",
                "--no-baselines",
                "--plot",
                tmp_path / "r.png",
            ],
        ):
            result = invoke(*command, *data)
            assert result.exit_code == 2, command
            assert "prefeval[plot]" in result.stderr
            assert not list(tmp_path.iterdir())
        return
    for name, command in (
        ("d.png", ["discpower", "--test", "sign", "--no-baselines"]),
        ("r.png", ["robustness", "--queries", "3", "--samples", "1", "--no-baselines"]),
    ):
        ok(invoke(*command, "--plot", tmp_path / name, *data))
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_order_cli_teleport_by_hand(tmp_path):
    # the Condorcet case of test_mc4_condorcet_winner as a --prefs table, teleport t = 0.5:
    #   pi_c (1 - 0.5/3) = 0.5/3                 -> pi_c = 1/5
    #   pi_b (1 - 0.5*2/3) = 0.5/3 pi_c + 0.5/3  -> pi_b * 2/3 = 1/30 + 5/30 -> pi_b = 3/10
    #   pi_a = 1 - 1/5 - 3/10 = 1/2
    lines = ["measure\trun_a\trun_b\tquery_id\tvalue"]
    for q, name in enumerate(("abc", "acb", "bca"), start=1):
        for (x, y), v in zip((("a", "b"), ("a", "c"), ("b", "c")), ORDER_DELTAS[name]):
            lines.append(f"m\t{x}\t{y}\t{q}\t{float(v)}")
    path = tmp_path / "prefs.tsv"
    path.write_text("\n".join(lines) + "\n")
    table = frame(ok(invoke("order", "--no-baselines", "--teleport", "0.5", "--prefs", path)))
    assert list(table["run"]) == ["a", "b", "c"]
    assert list(table["rank"]) == [1, 2, 3]
    np.testing.assert_allclose(table["score"], [0.5, 0.3, 0.2], rtol=0, atol=1e-15)
    # Borda: a 2+2+0 = 4, b 1+0+2 = 3, c 0+1+1 = 2
    table = frame(ok(invoke("order", "--no-baselines", "--method", "borda", "--prefs", path)))
    assert list(zip(table["run"], table["score"])) == [("a", 4.0), ("b", 3.0), ("c", 2.0)]


def test_web_robustness_all_labels_is_identity(web):
    # --labels 1.0 keeps every judgment: preferences and baselines are recomputed
    # unchanged, so tau = 1, agreement = 1 and ties equal `agree --ties` on the full data
    base = ["-B", "AP", "-B", "RR"]
    if "diversity" in web["name"]:
        base += ["-B", "ERR_IA@20"]
    out = ok(
        invoke("robustness", "--labels", "1.0", "--samples", "1", *base, web["qrels"], *web["runs"])
    )
    table = frame(out)
    ties = frame(
        ok(invoke("agree", "--ties", *base, "--prefs", web["prefs"], web["qrels"], *web["runs"]))
    )
    assert list(table["measure"]) == list(ties["measure"])
    np.testing.assert_allclose(table["tau_mean"], 1.0, rtol=0, atol=1e-15)
    assert (table["agreement"] == 1.0).all()
    np.testing.assert_array_equal(table["ties"], ties["ties"])


def test_robustness_bad_levels_exit_2():
    data = [str(SAMPLE / "qrels.txt"), *SAMPLE_RUNS[:3]]
    result = invoke("robustness", "--queries", "21", "--no-baselines", *data)  # 20 queries
    assert result.exit_code == 2 and "--queries 21" in result.stderr
    result = invoke("robustness", "--labels", "1.5", "--no-baselines", *data)
    assert result.exit_code == 2 and "--labels 1.5" in result.stderr
    assert invoke("robustness", "--no-baselines", *data).exit_code == 2


def test_prefs_table_with_subtopic_measure_keeps_evaluated_queries(tmp_path):
    # Regression: subtopic qrels where query 2 has only plain (iteration 0) judgments: query 2 is
    # evaluated (it has relevant documents) but strpp is undefined there, so a table
    # written by `compare -q -m strpp` has rows for query 1 only.  Read back with --prefs,
    # the evidence loses query 2, and baselines are averaged over query 1 only.
    #   general qrels: q1 d1 1, d2 1, d3 0;  q2 d1 1, d4 1
    #   r1: q1 d1 d2 d3 -> AP 1;             q2 d9 d8 -> AP 0
    #   r2: q1 d3 d2 d1 -> AP (1/2 + 2/3)/2 = 7/12;   q2 d1 d4 -> AP 1
    #   mean AP over the evaluated queries 1, 2: r1 1/2, r2 19/24 -> r2 ranks first
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("1 1 d1 1\n1 2 d2 1\n1 1 d3 0\n2 0 d1 1\n2 0 d4 1\n")
    r1 = tmp_path / "input.r1"
    r1.write_text("1 Q0 d1 1 3 t\n1 Q0 d2 2 2 t\n1 Q0 d3 3 1 t\n2 Q0 d9 1 3 t\n2 Q0 d8 2 2 t\n")
    r2 = tmp_path / "input.r2"
    r2.write_text("1 Q0 d3 1 3 t\n1 Q0 d2 2 2 t\n1 Q0 d1 3 1 t\n2 Q0 d1 1 3 t\n2 Q0 d4 2 2 t\n")
    prefs = tmp_path / "prefs.tsv"
    ok(invoke("compare", "-q", "-m", "strpp", "-o", prefs, qrels, r1, r2))
    from_runs = frame(ok(invoke("order", "-m", "strpp", "-B", "AP", qrels, r1, r2)))
    ap = from_runs[from_runs["measure"] == "AP"]
    assert list(ap["run"]) == ["r2", "r1"]
    np.testing.assert_allclose(ap["score"], [19 / 24, 1 / 2], rtol=0, atol=1e-15)
    from_prefs = frame(ok(invoke("order", "-B", "AP", "--prefs", prefs, qrels, r1, r2)))
    assert from_prefs.to_dict("list") == from_runs.to_dict("list")


def test_agree_without_baselines_is_a_usage_error(tmp_path):
    """agree compares preferences with baselines: with none (--no-baselines, or --prefs
    without QRELS RUN... or --metrics) it wrote an empty table, exit 0.  --ties needs none."""
    qrels, runs = SAMPLE / "qrels.txt", SAMPLE_RUNS[:3]
    prefs = tmp_path / "prefs.tsv"
    ok(invoke("compare", "-q", "-o", prefs, qrels, *runs))
    for args in (["--no-baselines", qrels, *runs], ["--prefs", prefs]):
        result = invoke("agree", "-o", tmp_path / "out.tsv", *args)
        assert (result.exit_code, result.stdout) == (2, ""), result.stderr
        assert result.stderr.splitlines()[-1] == (
            "Error: agree compares preferences with baselines: give QRELS RUN... or --metrics "
            "FILE (or --ties, which needs none)"
        )
        assert not (tmp_path / "out.tsv").exists()
    ties = ok(invoke("agree", "--ties", "--no-baselines", qrels, *runs))
    assert ties.splitlines()[0] == "measure\tties\tcomparisons"
    assert ties == ok(invoke("agree", "--ties", "--prefs", prefs))
    agree = ok(invoke("agree", "--prefs", prefs, qrels, *runs))
    assert agree.count("\n") > 1 and agree == ok(invoke("agree", qrels, *runs))
    # the library alike
    import prefeval

    for kwargs in ({"baselines": []}, {"prefs": str(prefs), "qrels": None, "runs": None}):
        with pytest.raises(ValueError, match="^agree compares preferences with baselines"):
            prefeval.agree(**{"qrels": str(qrels), "runs": runs, **kwargs})
    assert len(prefeval.agree(str(qrels), runs, baselines=[], ties=True)) == 6


@pytest.mark.parametrize("higher", [True, False])
def test_a_metrics_moments_taken_a_stretch_of_queries_at_a_time_are_the_same_bits(
    higher, monkeypatch
):
    """``discpower``'s t-test moments of a baseline come from its pair differences a
    stretch of whole blocks of queries at a time, never all pairs x queries at once:
    every moment is the bits of all the differences at once."""
    import prefeval.analysis.orderings as orderings
    from prefeval.core.moments import PairMoments
    from prefeval.core.ties import SUM_BLOCK

    rng = np.random.default_rng(7)
    n_q, runs = 5 * SUM_BLOCK + 37, ["a", "b", "c", "d"]
    values = rng.random((n_q, len(runs))) * 1e3
    values[rng.random(values.shape) < 0.05] = np.nan
    values[:, 3] = values[:, 2]  # a pair tied on every query

    def evidence():
        return orderings.Evidence(
            runs, [f"q{k}" for k in range(n_q)], None, {"AP": values}, {"AP": higher}
        )

    whole = PairMoments.of(evidence().pair_differences("AP"))
    monkeypatch.setattr(orderings, "MOMENT_QUERIES", SUM_BLOCK)
    got = evidence().moments("AP")
    for field in ("n", "sums", "block_mean", "m2", "low", "high", "wins", "tied", "losses"):
        assert getattr(got, field).tobytes() == getattr(whole, field).tobytes(), field
