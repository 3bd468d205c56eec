"""The statistics of a comparison of two runs, in ``pairs``, ``discpower`` and ``report``:
the randomization test, the false-discovery-rate corrections, the effect size and the
bootstrap interval, checked against values computed here from the per-query differences
``compare -q`` writes (exact enumeration of the sign flips, scipy, statsmodels)."""

from __future__ import annotations

import io
import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import invoke, read_tsv
from scipy import stats

import prefeval

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
QRELS = SAMPLE / "qrels.txt"
RUNS = sorted((SAMPLE / "runs").glob("input.*"))


def ok(result) -> str:
    assert result.exit_code == 0, (result.exit_code, result.stderr)
    assert "Traceback" not in result.stderr
    return result.stdout


def usage_error(result, *words) -> None:
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and result.stdout == ""
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.stderr
    for word in words:
        assert word in errors[0], errors[0]


@pytest.fixture(scope="module")
def per_query():
    """``compare -q -n`` of the sample runs: per measure and run pair, its per-query
    differences Delta(a, b)."""
    text = ok(invoke("compare", "-q", "-n", "-m", "rpp,lexirecall", QRELS, *RUNS))
    return pd.read_csv(io.StringIO(text), sep="\t", dtype={"query_id": str})


def differences(table, measure, a, b) -> np.ndarray:
    """The defined per-query Delta(a, b) of ``table`` (a ``compare -q`` table), query
    order, negated when the table holds (b, a)."""
    rows = table[(table["measure"] == measure) & (table["run_a"] == a) & (table["run_b"] == b)]
    sign = 1.0
    if rows.empty:
        rows = table[(table["measure"] == measure) & (table["run_a"] == b) & (table["run_b"] == a)]
        sign = -1.0
    assert not rows.empty
    values = sign * rows["value"].to_numpy(dtype=float)
    return values[~np.isnan(values)]


def exact_two_sided(d: np.ndarray) -> float:
    """The share of the 2**n sign flips of ``d`` whose mean is at least as far from 0 as
    the observed one, every flip enumerated."""
    observed = abs(d.mean())
    hits = 0
    for signs in itertools.product((1.0, -1.0), repeat=len(d)):
        flipped = abs(float(np.dot(signs, d)) / len(d))
        hits += flipped >= observed - 1e-12 * max(1.0, observed)
    return hits / 2 ** len(d)


# ------------------------------------------------------------------ randomization test


def test_randomization_is_the_exact_enumeration_on_few_queries(per_query, tmp_path):
    # ten queries: 2**10 = 1024 <= trials, every flip taken once
    queries = sorted(per_query["query_id"].unique())[:10]
    subset = per_query[per_query["query_id"].isin(queries)]
    prefs = tmp_path / "prefs.tsv"
    subset.to_csv(prefs, sep="\t", index=False)
    table = read_tsv(
        ok(
            invoke(
                "discpower", "--pairs", "--test", "randomization", "--correction", "none",
                "--prefs", prefs, "--no-baselines",
            )
        )
    )  # fmt: skip
    assert len(table) == 2 * 15
    assert set(table["test"]) == {"randomization"}
    for measure, _, _, a, b, p, adjusted in table.to_numpy():
        d = differences(subset, measure, a, b)
        assert len(d) == 10
        want = exact_two_sided(d)
        assert float(p) == pytest.approx(want, rel=1e-12), (measure, a, b)
        assert adjusted == p  # --correction none


def test_randomization_is_close_to_the_t_test(per_query):
    # 20 queries, 10,000 random flips: p within Monte Carlo error of the exact test, which
    # the t-test approximates on these differences
    table = read_tsv(
        ok(
            invoke(
                "discpower", "--pairs", "--test", "randomization", "-m", "rpp",
                "--no-baselines", QRELS, *RUNS,
            )
        )
    )  # fmt: skip
    assert len(table) == 15
    for _, _, correction, a, b, p, adjusted in table.to_numpy():
        d = differences(per_query, "rpp", a, b)
        t = stats.ttest_1samp(d, 0.0).pvalue
        assert float(p) == pytest.approx(t, abs=0.02), (a, b)
        assert 1 / 10001 <= float(p) <= 1
        assert correction == "bonferroni"
        assert float(adjusted) == pytest.approx(min(1.0, 15 * float(p)), rel=1e-14)


def test_randomization_is_the_same_whatever_jobs_run_order_and_cache():
    args = ["--pairs", "--test", "randomization", "--test", "ttest", "-m", "rpp,lexirecall"]
    args += ["-B", "AP"]

    def rows(*extra, runs=RUNS):
        table = read_tsv(ok(invoke("discpower", *args, *extra, QRELS, *runs)))
        # a pair given the other way round: its two-sided p-values are the same
        return {(m, t, *sorted((a, b))): (p, q) for m, t, _, a, b, p, q in table.to_numpy()}

    first = rows("-j", "1")
    assert first == rows("-j", "2")
    assert first == rows("-j", "2", "--no-cache")
    assert first == rows("-j", "1", runs=RUNS[::-1])


def test_randomization_seed_and_trials():
    base = ["discpower", "--pairs", "--test", "randomization", "-m", "rpp", "--no-baselines"]
    one = read_tsv(ok(invoke(*base, "--trials", "999", "--seed", "3", QRELS, *RUNS)))
    same = read_tsv(ok(invoke(*base, "--trials", "999", "--seed", "3", QRELS, *RUNS)))
    other = read_tsv(ok(invoke(*base, "--trials", "999", "--seed", "4", QRELS, *RUNS)))
    assert one.equals(same)
    assert not one["p_value"].equals(other["p_value"])
    # p = (1 + count) / (1 + trials): a whole count of the 999 trials
    counts = one["p_value"].astype(float) * 1000 - 1
    assert np.allclose(counts, np.round(counts), atol=1e-9)


def test_randomization_keeps_the_default_tests_untouched():
    default = ok(invoke("discpower", "--pairs", "-m", "rpp", "-B", "AP", QRELS, *RUNS))
    more = read_tsv(
        ok(
            invoke(
                "discpower", "--pairs", "--test", "ttest", "--test", "sign", "--test", "hsd",
                "--test", "randomization", "-m", "rpp", "-B", "AP", QRELS, *RUNS,
            )
        )
    )  # fmt: skip
    kept = more[more["test"] != "randomization"]
    assert kept.reset_index(drop=True).equals(read_tsv(default))


def test_randomization_with_against_tests_those_pairs(per_query):
    table = read_tsv(
        ok(
            invoke(
                "discpower", "--pairs", "--test", "randomization", "--against", "sys01",
                "-m", "rpp", "--no-baselines", "--trials", str(2**20), QRELS, *RUNS,
            )
        )
    )  # fmt: skip
    assert list(zip(table["run_a"], table["run_b"])) == [(f"sys0{i}", "sys01") for i in range(2, 7)]
    # 2**20 trials: every flip of the 20 queries, p a multiple of 2**-20
    for a, p in zip(table["run_a"], table["p_value"].astype(float)):
        d = differences(per_query, "rpp", a, "sys01")
        assert len(d) == 20
        assert (p * 2**20) == pytest.approx(round(p * 2**20), abs=1e-6)
        assert p == pytest.approx(stats.ttest_1samp(d, 0.0).pvalue, abs=0.02)


# --------------------------------------------------------------------- corrections


@pytest.mark.parametrize("correction, method", [("bh", "fdr_bh"), ("by", "fdr_by")])
def test_false_discovery_rate_corrections_are_statsmodels(correction, method):
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    table = read_tsv(
        ok(
            invoke(
                "discpower", "--pairs", "--test", "ttest", "--test", "sign", "--correction",
                correction, "-m", "rpp,lexirecall", "-B", "AP", QRELS, *RUNS,
            )
        )
    )  # fmt: skip
    assert set(table["correction"]) == {correction}
    for _, group in table.groupby(["measure", "test"]):
        p = group["p_value"].astype(float).to_numpy()
        want = multitest.multipletests(p, method=method)[1]
        assert group["p_adjusted"].astype(float).to_numpy() == pytest.approx(want, rel=1e-12)
    summary = read_tsv(
        ok(
            invoke(
                "discpower", "--test", "ttest", "--correction", correction, "-m", "rpp",
                "--no-baselines", QRELS, *RUNS,
            )
        )
    )  # fmt: skip
    assert summary["correction"].tolist() == [correction]


# ------------------------------------------------------------------------- pairs


def test_effect_is_mean_over_sd_of_the_differences(per_query):
    table = read_tsv(ok(invoke("pairs", "-m", "rpp,lexirecall", "--no-baselines", QRELS, *RUNS)))
    assert list(table.columns)[-4:] == ["wins", "ties", "losses", "effect"]
    for measure, a, b, *_, effect in table.to_numpy():
        d = differences(per_query, measure, a, b)
        if np.ptp(d) == 0:  # every difference the same: no spread, no effect size
            assert effect == ""
        else:
            assert float(effect) == pytest.approx(d.mean() / d.std(ddof=1), rel=1e-12)


def test_bootstrap_interval_is_close_to_the_t_interval(per_query):
    base = ["pairs", "--against", "sys01", "-m", "rpp", "-B", "AP"]
    t = read_tsv(ok(invoke(*base, QRELS, *RUNS)))
    boot = read_tsv(ok(invoke(*base, "--ci", "bootstrap", QRELS, *RUNS)))
    same = ["measure", "run_a", "run_b", "queries", "mean", "wins", "ties", "losses", "effect"]
    assert boot[same].equals(t[same])
    for (mean, low, high), (t_low, t_high) in zip(
        boot[["mean", "ci_low", "ci_high"]].to_numpy(),
        t[["ci_low", "ci_high"]].to_numpy(),
    ):
        low, high, t_low, t_high, mean = map(float, (low, high, t_low, t_high, mean))
        assert low < mean < high
        width = t_high - t_low
        assert abs(low - t_low) < 0.2 * width and abs(high - t_high) < 0.2 * width
    # a preference's interval against scipy's percentile bootstrap (other random draws)
    d = differences(per_query, "rpp", "sys02", "sys01")
    want = stats.bootstrap(
        (d,), np.mean, n_resamples=10000, method="percentile", random_state=1
    ).confidence_interval
    got = boot[(boot["measure"] == "rpp") & (boot["run_a"] == "sys02")]
    assert float(got["ci_low"].iloc[0]) == pytest.approx(want.low, abs=0.02)
    assert float(got["ci_high"].iloc[0]) == pytest.approx(want.high, abs=0.02)


def test_bootstrap_is_the_same_whatever_jobs_run_order_and_cache():
    def run(*extra, seed=7, runs=RUNS):
        return ok(
            invoke(
                "pairs", "--ci", "bootstrap", "--resamples", "3000", "--seed", seed,
                "--against", "sys01", "-m", "rpp,lexirecall", "-B", "AP", *extra, QRELS, *runs,
            )
        )  # fmt: skip

    first = run("-j", "1")
    assert run("-j", "2") == first
    assert run("-j", "2", "--no-cache") == first
    key = ["measure", "run_a", "run_b"]
    backward = read_tsv(run("-j", "1", runs=RUNS[::-1])).sort_values(key, kind="stable")
    forward = read_tsv(first)
    assert backward.reset_index(drop=True).equals(
        forward.sort_values(key, kind="stable").reset_index(drop=True)
    )
    other = read_tsv(run(seed=8))
    assert not other["ci_low"].equals(forward["ci_low"])


def test_level_and_ci_as_a_number():
    base = ["pairs", "--against", "sys01", "-m", "rpp", "--no-baselines", QRELS, *RUNS]
    old = ok(invoke(*base[:1], "--ci", "0.9", *base[1:]))
    assert ok(invoke(*base[:1], "--level", "0.9", *base[1:])) == old
    assert ok(invoke(*base[:1], "--ci", "t", "--level", "0.9", *base[1:])) == old
    t90 = read_tsv(old)
    t95 = read_tsv(ok(invoke(*base)))
    assert (t90["ci_high"].astype(float) < t95["ci_high"].astype(float)).all()
    # a narrower bootstrap interval at a lower level
    boot = ["pairs", "--ci", "bootstrap", *base[1:]]
    b80 = read_tsv(ok(invoke(*boot[:3], "--level", "0.8", *boot[3:])))
    b95 = read_tsv(ok(invoke(*boot)))
    assert (b80["ci_high"].astype(float) < b95["ci_high"].astype(float)).all()
    assert (b80["ci_low"].astype(float) > b95["ci_low"].astype(float)).all()


@pytest.mark.parametrize(
    "args, flag",
    [
        (["--ci", "foo"], "--ci"),
        (["--ci", "1.5"], "--ci"),
        (["--ci", "nan"], "--ci"),
        (["--resamples", "0"], "--resamples"),
        (["--level", "1.5"], "--level"),
        (["--level", "0"], "--level"),
        (["--ci", "0.9", "--level", "0.8"], "--level"),
        (["--seed", "-1"], "--seed"),
    ],
)
def test_bad_interval_options_are_usage_errors(args, flag):
    usage_error(invoke("pairs", *args, "-m", "rpp", QRELS, *RUNS[:2]), flag)


def test_bad_correction_or_test_is_a_usage_error():
    usage_error(
        invoke("discpower", "--correction", "fdr", "-m", "rpp", QRELS, *RUNS[:2]), "--correction"
    )
    usage_error(invoke("discpower", "--test", "perm", "-m", "rpp", QRELS, *RUNS[:2]), "--test")


# --------------------------------------------------------------------------- API


def test_api_pairs_bootstrap_equals_the_command_line():
    table = prefeval.pairs(
        str(QRELS), [str(r) for r in RUNS], measures="rpp", baselines="AP", against="sys01",
        ci="bootstrap", level=0.9, resamples=2000, seed=5, notify=None,
    )  # fmt: skip
    cli = read_tsv(
        ok(
            invoke(
                "pairs", "--ci", "bootstrap", "--level", "0.9", "--resamples", "2000",
                "--seed", "5", "--against", "sys01", "-m", "rpp", "-B", "AP", QRELS, *RUNS,
            )
        )
    )  # fmt: skip
    assert list(table.columns) == list(cli.columns)
    for column in ("mean", "ci_low", "ci_high", "effect"):
        want = cli[column].replace("", "nan").astype(float).to_numpy()
        assert table[column].to_numpy() == pytest.approx(want, rel=1e-15, nan_ok=True)
    # a number as ci: the level of a t interval
    runs = [str(r) for r in RUNS]
    t90 = prefeval.pairs(str(QRELS), runs, measures="rpp", baselines=[], ci=0.9, notify=None)
    level = prefeval.pairs(str(QRELS), runs, measures="rpp", baselines=[], level=0.9, notify=None)
    assert t90.equals(level)


@pytest.mark.parametrize(
    "keywords, word",
    [
        ({"ci": "foo"}, "ci="),
        ({"level": 1.5}, "level="),
        ({"resamples": 0}, "resamples="),
        ({"ci": 0.9, "level": 0.8}, "level="),
    ],
)
def test_api_bad_interval_options(keywords, word):
    with pytest.raises(ValueError, match=word):
        prefeval.pairs(str(QRELS), [str(r) for r in RUNS[:2]], measures="rpp", **keywords)


def test_api_discpower_randomization_and_fdr():
    table = prefeval.discpower(
        str(QRELS), [str(r) for r in RUNS], measures="rpp", baselines=[],
        tests="randomization", correction="by", pairs=True, trials=2**20, notify=None,
    )  # fmt: skip
    harmonic = sum(1 / k for k in range(1, 16))
    p = table["p_value"].to_numpy()
    order = np.argsort(p, kind="stable")
    # Benjamini-Yekutieli: the running minimum from the largest of m c(m) p_(i) / i
    scaled = p[order] * 15 * harmonic / np.arange(1, 16)
    want = np.empty(15)
    want[order] = np.minimum(1.0, np.minimum.accumulate(scaled[::-1])[::-1])
    assert table["p_adjusted"].to_numpy() == pytest.approx(want, rel=1e-14)
    assert math.isclose(table["p_value"].min() * 2**20, round(table["p_value"].min() * 2**20))


@pytest.mark.parametrize("command", ["discpower", "report"])
def test_alpha_says_what_it_is_in_the_help(command):
    shown = " ".join(invoke(command, "--help").stdout.split())
    assert "--alpha FLOAT Significance level: a pair is significant when its corrected" in shown
