"""The regression gate's numbers against independent computations: per-query differences
from ``compare`` (preferences) and ir-measures (metrics), scipy's one-sided
``ttest_1samp`` and ``binomtest``, every sign flip enumerated, statsmodels'
``multipletests``; on the sample data and on TREC Web 2012."""

from __future__ import annotations

import itertools
import warnings
from pathlib import Path

import ir_measures
import numpy as np
import pandas as pd
import pytest
from scipy import stats

import prefeval
from prefeval.analysis.gate import COLUMNS

REPO = Path(__file__).resolve().parents[2]
QRELS = str(REPO / "sample_data" / "qrels.txt")
RUNS = {
    p.name.removeprefix("input.").removesuffix(".gz"): str(p)
    for p in sorted((REPO / "sample_data" / "runs").glob("input.*"))
}
REFERENCE = "sys03"
#: a compare -q table (preferences, no baseline value)
PREFS = pd.DataFrame(
    {"measure": "rpp", "run_a": "sys01", "run_b": "sys02", "query_id": ["301"], "value": 1.0}
)
CORRECTIONS = {"bonferroni": "bonferroni", "holm": "holm", "bh": "fdr_bh", "by": "fdr_by"}


def _quiet(function, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", prefeval.PrefevalWarning)
        return function(*args, **kwargs)


def _differences(qrels, runs, reference, measure) -> dict[str, np.ndarray]:
    """candidate -> per-query Delta(candidate, reference) by query id, from compare -q."""
    rows = _quiet(
        prefeval.compare, qrels, runs, measures=measure, per_query=True, against=reference
    )
    out = {}
    for candidate, part in rows.groupby("run_a"):
        out[candidate] = part.sort_values("query_id")["value"].to_numpy()
    return out


def _metric_differences(qrels, runs, reference, measure) -> dict[str, np.ndarray]:
    """candidate -> per-query value(candidate) - value(reference) by ir-measures alone."""
    parsed = ir_measures.parse_measure(measure)
    judged = list(ir_measures.read_trec_qrels(qrels))
    values = {}
    for name, path in runs.items():
        found = {
            m.query_id: m.value
            for m in ir_measures.iter_calc([parsed], judged, ir_measures.read_trec_run(path))
        }
        values[name] = found
    queries = sorted({q.query_id for q in judged})
    ref = np.array([values[reference].get(q, 0.0) for q in queries])
    return {
        name: np.array([values[name].get(q, 0.0) for q in queries]) - ref
        for name in sorted(runs)
        if name != reference
    }


def test_columns_and_rows_by_candidate_name():
    table = _quiet(prefeval.gate, QRELS, RUNS, against=REFERENCE, min_queries=20)
    assert list(table.columns) == COLUMNS
    assert table["candidate"].tolist() == ["sys01", "sys02", "sys04", "sys05", "sys06"]
    assert (table["reference"] == REFERENCE).all() and (table["test"] == "ttest").all()


@pytest.mark.parametrize("margin", [0.0, 0.05])
def test_ttest_is_scipys_one_sided_test_and_holm_is_statsmodels(margin):
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    table = _quiet(
        prefeval.gate, QRELS, RUNS, against=REFERENCE, min_queries=20, margin=margin,
        measures="rpp,lexirecall",
    )  # fmt: skip
    want = []
    for measure in ("rpp", "lexirecall"):
        for candidate, d in _differences(QRELS, RUNS, REFERENCE, measure).items():
            row = table[(table.measure == measure) & (table.candidate == candidate)].iloc[0]
            assert row.queries == len(d)
            assert row["mean"] == pytest.approx(d.mean(), abs=1e-12)
            assert row.effect == pytest.approx(d.mean() / d.std(ddof=1))
            p = stats.ttest_1samp(d, -margin, alternative="less").pvalue
            assert row.p_value == pytest.approx(p, rel=1e-9)
            low, high = stats.t.interval(0.95, len(d) - 1, d.mean(), stats.sem(d))
            low, high = max(low, -1.0), min(high, 1.0)  # a preference's range, clipped
            assert (row.ci_low, row.ci_high) == (pytest.approx(low), pytest.approx(high))
            assert (row.wins, row.ties, row.losses) == (
                (d > 0).sum(),
                (d == 0).sum(),
                (d < 0).sum(),
            )
            want.append(p)
    assert table["p_adjusted"].to_numpy() == pytest.approx(
        multitest.multipletests(want, method="holm")[1], rel=1e-9
    )


@pytest.mark.parametrize("correction", sorted(CORRECTIONS))
def test_every_correction_is_statsmodels_over_every_candidate_and_measure(correction):
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    table = _quiet(
        prefeval.gate, QRELS, RUNS, against="sys06", min_queries=20, correction=correction,
        measures=["rpp", "dcgrpp"], baselines="AP",
    )  # fmt: skip
    assert len(table) == 15
    want = multitest.multipletests(table["p_value"], method=CORRECTIONS[correction])[1]
    assert table["p_adjusted"].to_numpy() == pytest.approx(want, rel=1e-12)
    expected = np.where(want < 0.05, "regression", "no difference")
    assert table["verdict"].tolist() == expected.tolist()


def test_a_metric_is_value_of_candidate_minus_reference():
    table = _quiet(prefeval.gate, QRELS, RUNS, against=REFERENCE, min_queries=20, baselines="AP")
    metric = table[table.measure == "AP"]
    for candidate, d in _metric_differences(QRELS, RUNS, REFERENCE, "AP").items():
        row = metric[metric.candidate == candidate].iloc[0]
        assert row["mean"] == pytest.approx(d.mean())
        assert row.p_value == pytest.approx(stats.ttest_1samp(d, 0, alternative="less").pvalue)


def test_sign_test_is_scipys_binomial_test():
    table = _quiet(prefeval.gate, QRELS, RUNS, against=REFERENCE, min_queries=20, test="sign")
    for candidate, d in _differences(QRELS, RUNS, REFERENCE, "rpp").items():
        row = table[table.candidate == candidate].iloc[0]
        wins, losses = int((d > 0).sum()), int((d < 0).sum())
        p = stats.binomtest(wins, wins + losses, 0.5, alternative="less").pvalue
        assert row.p_value == pytest.approx(p, rel=1e-12)


def _enumerated(d: np.ndarray, shift: float) -> float:
    x = d + shift
    observed, count = x.mean(), 0
    for flips in itertools.product((1.0, -1.0), repeat=len(x)):
        count += (np.array(flips) * x).mean() <= observed + 1e-12
    return count / 2 ** len(x)


@pytest.mark.parametrize("margin", [0.0, 0.1])
def test_randomization_enumerates_every_flip_on_a_few_queries(margin):
    # a preference table of 10 queries: 2**10 <= trials, every flip once
    rows = _quiet(prefeval.compare, QRELS, RUNS, measures="rpp", per_query=True)
    kept = sorted(rows.query_id.unique())[:10]
    prefs = rows[rows.query_id.isin(kept)]
    table = _quiet(
        prefeval.gate, prefs=prefs, against=REFERENCE, test="randomization", margin=margin,
        min_queries=10, trials=1024,
    )  # fmt: skip
    diffs = _differences(QRELS, RUNS, REFERENCE, "rpp")
    for row in table.itertuples():
        d = diffs[row.candidate][:10]
        assert row.p_value == _enumerated(d, margin)


def test_randomization_with_random_flips_is_seeded_and_near_the_t_test():
    a = _quiet(
        prefeval.gate,
        QRELS,
        RUNS,
        against=REFERENCE,
        min_queries=20,
        test="randomization",
        trials=20000,
    )
    b = _quiet(
        prefeval.gate,
        QRELS,
        RUNS,
        against=REFERENCE,
        min_queries=20,
        test="randomization",
        trials=20000,
        seed=1,
    )
    t = _quiet(prefeval.gate, QRELS, RUNS, against=REFERENCE, min_queries=20)
    assert not a["p_value"].equals(b["p_value"])
    assert np.allclose(a["p_value"] * 20001 % 1, 0, atol=1e-6) | np.allclose(
        a["p_value"] * 20001 % 1, 1, atol=1e-6
    )
    assert a["p_value"].to_numpy() == pytest.approx(t["p_value"].to_numpy(), abs=0.02)
    assert a["verdict"].tolist() == t["verdict"].tolist()


def test_same_table_whatever_the_order_of_the_runs_and_the_jobs():
    kwargs = dict(
        against=REFERENCE,
        min_queries=20,
        baselines="AP",
        test="randomization",
        ci="bootstrap",
        resamples=2000,
        trials=2000,
    )
    one = _quiet(prefeval.gate, QRELS, RUNS, **kwargs)
    shuffled = dict(reversed(list(RUNS.items())))
    two = _quiet(prefeval.gate, QRELS, shuffled, jobs=1, cache=False, **kwargs)
    pd.testing.assert_frame_equal(one, two)


def test_bootstrap_interval_is_near_the_t_interval():
    t = _quiet(prefeval.gate, QRELS, RUNS, against=REFERENCE, min_queries=20)
    boot = _quiet(prefeval.gate, QRELS, RUNS, against=REFERENCE, min_queries=20, ci="bootstrap")
    assert boot["mean"].equals(t["mean"]) and boot["p_value"].equals(t["p_value"])
    width = (t.ci_high - t.ci_low).to_numpy()
    assert (boot.ci_high - boot.ci_low).to_numpy() == pytest.approx(width, rel=0.25)
    assert ((boot.ci_low < boot["mean"]) & (boot["mean"] < boot.ci_high)).all()


def test_verdicts_regression_improvement_inconclusive():
    table = _quiet(prefeval.gate, QRELS, RUNS, against="sys01", min_queries=20)
    assert set(table["verdict"]) == {"improvement"}  # sys01 is the worst run
    assert table["p_value"].gt(0.5).all()
    few = _quiet(prefeval.gate, QRELS, RUNS, against="sys01", min_queries=21)
    assert set(few["verdict"]) == {"inconclusive"} and few["p_adjusted"].isna().all()
    assert few["p_value"].equals(table["p_value"])  # computed, not corrected


def test_inconclusive_rows_say_why_in_one_notice():
    notices = []
    prefeval.gate(QRELS, RUNS, against="sys01", notify=notices.append)
    said = [n for n in notices if "inconclusive" in n]
    assert said == [
        "5 of 5 verdicts inconclusive: 20 evaluated queries, fewer than the minimum of 25 "
        "(rpp sys02 vs sys01, rpp sys03 vs sys01, rpp sys04 vs sys01 and 2 more)"
    ]


def test_check_raises_a_regression_listing_them():
    with pytest.raises(prefeval.Regression) as raised:
        _quiet(prefeval.gate, QRELS, RUNS, against="sys06", min_queries=20, check=True)
    assert isinstance(raised.value, AssertionError)
    message = str(raised.value)
    assert message.startswith("5 regressions:\n")
    assert "regression: rpp: sys01 vs sys06: mean -0.8228" in message
    assert len(raised.value.table) == 5
    table = _quiet(prefeval.gate, QRELS, RUNS, against="sys01", min_queries=20, check=True)
    assert len(table) == 5  # no regression: no raise


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(against="nope"), "--against nope: no such run"),
        (dict(against=["sys01", "sys02"]), "one reference run"),
        (dict(against="sys01", test="sign", margin=0.1), "margin with test='sign'"),
        (dict(against="sys01", margin=-0.1), "margin=-0.1 is not in the range"),
        (dict(against="sys01", min_queries=0), "min_queries=0 is not in the range"),
        (dict(against="sys01", test="hsd"), "gate takes one test"),
        (dict(against="sys01", prefs=PREFS, baselines="AP"), "baselines='AP': the gate has no"),
        (dict(against="sys01", ci=0.9), "ci=0.9: the gate's interval is at 1 - alpha"),
    ],
)
def test_bad_arguments(kwargs, message):
    inputs = () if "prefs" in kwargs else (QRELS, RUNS)
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        prefeval.gate(*inputs, **kwargs)


def test_web2012_degraded_copy_regresses_identical_copy_does_not(web2012, tmp_path):
    """On real data (50 queries): a copy of the reference is no difference on every
    measure; the reference with its first relevant document of each query dropped to the
    bottom is a regression; every p-value is scipy's."""
    runs = {p.name.split(".")[0]: str(p) for p in sorted((web2012 / "runs").glob("*.run.gz"))}
    qrels = str(web2012 / "qrels.adhoc.txt.gz")
    reference = "rm-catb"
    judged = pd.DataFrame(ir_measures.read_trec_qrels(qrels))
    relevant = set(zip(judged.query_id[judged.relevance > 0], judged.doc_id[judged.relevance > 0]))
    lines = pd.DataFrame(ir_measures.read_trec_run(runs[reference]))
    lines = lines.sort_values(["query_id", "score"], ascending=[True, False], kind="stable")
    first = lines[[(q, d) in relevant for q, d in zip(lines.query_id, lines.doc_id)]]
    first = first.groupby("query_id").head(1).index
    lines.loc[first, "score"] = lines.score.min() - 1.0
    degraded = tmp_path / "degraded.run"
    with open(degraded, "w") as out:
        for row in lines.itertuples():
            out.write(f"{row.query_id} Q0 {row.doc_id} 0 {row.score!r} degraded\n")
    chosen = {
        reference: runs[reference],
        "copy": runs[reference],
        "degraded": str(degraded),
        "ql-catb": runs["ql-catb"],
    }
    table = _quiet(
        prefeval.gate, qrels, chosen, against=reference, measures="rpp,invrpp", baselines="AP"
    )
    verdict = {(r.measure, r.candidate): r.verdict for r in table.itertuples()}
    assert all(verdict[(m, "copy")] == "no difference" for m in ("rpp", "invrpp", "AP"))
    assert all(verdict[(m, "degraded")] == "regression" for m in ("rpp", "invrpp", "AP"))
    copy = table[table.candidate == "copy"]
    assert (
        (copy["mean"] == 0).all() and (copy["p_value"] == 1).all() and copy["effect"].isna().all()
    )
    for measure in ("rpp", "invrpp"):
        for candidate, d in _differences(qrels, chosen, reference, measure).items():
            row = table[(table.measure == measure) & (table.candidate == candidate)].iloc[0]
            if d.std() == 0:
                continue
            assert row.queries == len(d) == 50
            p = stats.ttest_1samp(d, 0, alternative="less").pvalue
            assert row.p_value == pytest.approx(p, rel=1e-9)


def test_too_few_trials_for_any_significant_verdict_is_said():
    notices = []
    table = prefeval.gate(
        QRELS, RUNS, against="sys01", test="randomization", trials=100, min_queries=20,
        measures="rpp,lexirecall,dcgrpp", notify=notices.append,
    )  # fmt: skip
    assert (table["p_value"] >= 1 / 101).all()
    assert (
        "randomization: no verdict can be significant: the smallest p-value of "
        "randomization with 100 trials is 0.0099, 0.15 after holm over 15 tests, not "
        "below alpha 0.05; raise the number of trials"
    ) in notices
    notices.clear()
    prefeval.gate(QRELS, RUNS, against="sys01", test="randomization", notify=notices.append,
                  min_queries=20)  # fmt: skip
    assert not [n for n in notices if "no verdict" in n]


def test_a_sign_test_on_few_queries_that_can_never_be_significant_is_said():
    rows = _quiet(prefeval.compare, QRELS, RUNS, measures="rpp", per_query=True)
    prefs = rows[rows.query_id.isin(sorted(rows.query_id.unique())[:4])]
    notices = []
    table = prefeval.gate(
        prefs=prefs, against="sys01", test="sign", min_queries=4, notify=notices.append
    )
    assert set(table["verdict"]) == {"no difference"}
    # on 4 queries some t intervals reach beyond [-1, 1]: clipped, in a notice of their own
    assert notices[0].startswith("t interval clipped to [-1, 1]")
    assert notices[1:] == [
        "sign: no verdict can be significant: the smallest p-value of the sign test on at "
        "most 4 decided queries is 0.062, 0.31 after holm over 5 tests, not below alpha 0.05"
    ]


def test_randomization_enumerating_every_flip_does_not_ask_for_more_trials():
    """On 4 queries the 2**4 = 16 flips are all enumerated, the smallest p-value is
    1/16 whatever the trials: the notice blames the queries, not the trials."""
    rows = _quiet(prefeval.compare, QRELS, RUNS, measures="rpp", per_query=True)
    prefs = rows[rows.query_id.isin(sorted(rows.query_id.unique())[:4])]
    notices = []
    table = prefeval.gate(
        prefs=prefs, against="sys01", test="randomization", min_queries=4,
        notify=notices.append,
    )  # fmt: skip
    assert set(table["verdict"]) == {"no difference"}
    assert notices[0].startswith("t interval clipped to [-1, 1]")
    assert notices[1:] == [
        "randomization: no verdict can be significant: the smallest p-value of "
        "randomization on at most 4 queries (every flip enumerated) is 0.062, 0.31 after "
        "holm over 5 tests, not below alpha 0.05"
    ]


def test_equal_nonzero_differences_have_no_effect_and_no_t_but_a_verdict():
    """30 queries each lost by 0.5: no tie (d = 0) at all, yet the differences are all
    equal (s = 0): effect and t are undefined, the interval has zero width at -0.5, the
    t-test's p is 0 (the mean lies below 0) and the verdict a regression; with a margin
    of 0.6 the mean lies above -0.6: p = 1, no difference."""
    queries = [str(300 + i) for i in range(30)]
    prefs = pd.DataFrame(
        {"measure": "rpp", "run_a": "c", "run_b": "r", "query_id": queries, "value": -0.5}
    )
    row = prefeval.gate(prefs=prefs, against="r").iloc[0]
    assert (row.wins, row.ties, row.losses) == (0, 0, 30)
    assert np.isnan(row.effect)
    assert (row.ci_low, row.ci_high) == (-0.5, -0.5)
    assert (row.p_value, row.verdict) == (0.0, "regression")
    row = prefeval.gate(prefs=prefs, against="r", margin=0.6).iloc[0]
    assert (row.p_value, row.verdict) == (1.0, "no difference")


def test_the_unreachable_notice_of_one_test_says_test():
    rows = _quiet(prefeval.compare, QRELS, RUNS, measures="rpp", per_query=True)
    prefs = rows[rows.query_id.isin(sorted(rows.query_id.unique())[:4])]
    prefs = prefs[(prefs.run_a == "sys01") & (prefs.run_b == "sys02")]
    notices = []
    prefeval.gate(prefs=prefs, against="sys01", test="sign", min_queries=4, notify=notices.append)
    notices = [n for n in notices if not n.startswith("t interval clipped")]
    assert len(notices) == 1 and notices[0].endswith(
        "after holm over 1 test, not below alpha 0.05"
    ), notices
