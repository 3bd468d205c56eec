"""The statistics of run pairs on an :class:`Evidence`: the randomization test and the
bootstrap interval of each pair's per-query differences (a metric's made a stretch of
pairs at a time), and the effect size, from values worked here."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from prefeval.analysis import significance
from prefeval.analysis.orderings import Evidence
from prefeval.analysis.significance import pair_summary, pair_tests, randomization_pvalues
from prefeval.core.cube import PreferenceCube

RNG = np.random.default_rng(11)
#: 8 queries x 5 runs of a metric (higher is better; ASL the same values, lower better)
VALUES = np.round(RNG.uniform(0, 1, size=(8, 5)), 2)
RUNS = ["a", "b", "c", "d", "e"]


def metric_evidence() -> Evidence:
    return Evidence(
        RUNS, [str(q) for q in range(8)], None, {"X": VALUES, "ASL": VALUES}, {"ASL": False}
    )


def enumerated(d: np.ndarray) -> float:
    """Two-sided sign-flip p-value, every one of the 2**n flips."""
    observed = abs(d.mean())
    flips = [abs(np.dot(s, d)) / len(d) for s in itertools.product((1, -1), repeat=len(d))]
    return float(np.mean([f >= observed - 1e-12 for f in flips]))


def test_randomization_of_a_metric_is_the_enumeration():
    ev = metric_evidence()
    pairs = ev.pairs()
    got = randomization_pvalues(ev, "X", trials=256)  # 2**8 flips: exact
    lower = randomization_pvalues(ev, "ASL", trials=256)
    for k, (i, j) in enumerate(pairs):
        d = VALUES[:, i] - VALUES[:, j]
        assert got[k] == pytest.approx(enumerated(d), rel=1e-12)
    assert lower == pytest.approx(got, rel=1e-12)  # -d: the same two-sided p-values


def test_stretches_of_pairs_change_nothing(monkeypatch):
    ev = metric_evidence()
    whole = pair_tests(ev, ["randomization"], trials=100, seed=3)
    boot = pair_summary(ev, 0.9, "bootstrap", 500, 3)
    monkeypatch.setattr(significance, "DIFFERENCE_CELLS", 1)  # one pair at a time
    assert pair_tests(metric_evidence(), ["randomization"], trials=100, seed=3).equals(whole)
    assert pair_summary(metric_evidence(), 0.9, "bootstrap", 500, 3).equals(boot)


def test_preference_randomization_and_bootstrap_from_the_cube():
    # one measure, runs a b c, pairs (a,b) (a,c) (b,c), 6 queries, one undefined
    values = np.array(
        [
            [
                [0.5, 1.0, -0.25, 0.75, np.nan, 0.5],
                [1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
                [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            ]
        ]
    )
    cube = PreferenceCube(
        ["m"], ["a", "b", "c"], [str(q) for q in range(6)], np.array([[0, 1], [0, 2], [1, 2]]),
        values,
    )  # fmt: skip
    ev = Evidence(["a", "b", "c"], list(cube.query_ids), cube)
    p = randomization_pvalues(ev, "m", trials=64)
    assert p[0] == pytest.approx(enumerated(np.array([0.5, 1.0, -0.25, 0.75, 0.5])))
    # six equal differences: only the flip of none and of all reach |mean| = 1
    assert p[1] == pytest.approx(2 / 64)
    assert p[2] == 1.0
    table = pair_summary(ev, 0.95, "bootstrap", 2000, 0)
    d = np.array([0.5, 1.0, -0.25, 0.75, 0.5])
    assert table["queries"].tolist() == [5, 6, 6]
    assert table["ci_low"][0] < d.mean() < table["ci_high"][0]
    assert d.min() <= table["ci_low"][0] and table["ci_high"][0] <= d.max()
    # all tied: a zero-width interval at the mean, no effect size
    assert (table["ci_low"][1], table["ci_high"][1]) == (1.0, 1.0)
    assert (table["ci_low"][2], table["ci_high"][2]) == (0.0, 0.0)
    assert table["effect"][0] == pytest.approx(d.mean() / d.std(ddof=1), rel=1e-14)
    assert np.isnan(table["effect"][1]) and np.isnan(table["effect"][2])


def test_effect_and_t_interval_of_a_metric():
    table = pair_summary(metric_evidence(), 0.9)
    ev = metric_evidence()
    for k, (i, j) in enumerate(ev.pairs()):
        d = VALUES[:, i] - VALUES[:, j]
        row = table.iloc[k]
        assert row["effect"] == pytest.approx(d.mean() / d.std(ddof=1), rel=1e-12)
        low, high = stats.t.interval(0.9, 7, loc=d.mean(), scale=stats.sem(d))
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((low, high), rel=1e-12)
        asl = table.iloc[len(ev.pairs()) + k]  # lower is better: b - a
        assert asl["effect"] == pytest.approx(-row["effect"], rel=1e-12)


def test_unknown_interval():
    with pytest.raises(ValueError, match="unknown interval 'z'"):
        pair_summary(metric_evidence(), 0.9, "z")


def test_a_preference_interval_is_clipped_to_its_range_a_baselines_is_not():
    """Runs a, b, c on 20 queries.  lexirecall Delta(a, b): 19 losses and a win, mean
    -0.9, sd sqrt((19 * 0.1**2 + 1.9**2) / 19) = sqrt(0.2), so the t interval is
    -0.9 -/+ t(0.975, 19) * sqrt(0.2 / 20) = -0.9 -/+ 0.2093: [-1.1093, -0.6907],
    written [-1, -0.6907]; (a, c) and (b, c) vary inside.  The metric X holds the same
    differences (a - b) and keeps its interval as computed."""
    votes = np.array([-1.0] * 19 + [1.0])
    spread = np.tile([0.5, -0.5], 10)
    cube = PreferenceCube(
        ["lexirecall"], RUNS[:3], [str(q) for q in range(20)],
        np.array([[0, 1], [0, 2], [1, 2]]), np.stack([votes, spread, -spread])[None],
    )  # fmt: skip
    metric = np.stack([votes, np.zeros(20), np.zeros(20)], axis=1)  # queries x runs
    ev = Evidence(RUNS[:3], cube.query_ids, cube, {"X": metric})
    told = []
    table = pair_summary(ev, notify=told.append).set_index(["measure", "run_a", "run_b"])
    half = stats.t.ppf(0.975, 19) * np.sqrt(0.2 / 20)
    assert half == pytest.approx(0.2093024, abs=1e-7)
    row = table.loc[("lexirecall", "a", "b")]
    assert row["mean"] == pytest.approx(-0.9, abs=1e-15)
    assert row["ci_low"] == -1.0
    assert row["ci_high"] == pytest.approx(-0.9 + half, abs=1e-12)
    inside = table.loc[("lexirecall", "a", "c")]  # mean 0, sd sqrt(20/19)/2: inside
    assert inside["ci_low"] == pytest.approx(-stats.t.ppf(0.975, 19) * 0.5 / np.sqrt(19))
    baseline = table.loc[("X", "a", "b")]
    assert baseline["ci_low"] == pytest.approx(-0.9 - half, abs=1e-12)
    assert told == [
        "t interval clipped to [-1, 1], the range of a preference's mean difference, on 1 "
        "of 3 run pairs (lexirecall 1): the mean lies inside, so the clipped interval "
        "holds it whenever the t interval does"
    ]
    # the bootstrap's means are means of the values: inside the range, nothing to say
    told.clear()
    boot = pair_summary(ev, 0.95, "bootstrap", 200, 0, told.append)
    assert boot["ci_low"].min() >= -1.0 and told == []
