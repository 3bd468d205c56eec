"""Significance tests on small or constant samples say so (once per command, on stderr;
a PrefevalWarning in the API) and keep their numbers."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from helpers import invoke, write_qrels, write_run

import prefeval
from prefeval.analysis.significance import MIN_QUERIES
from prefeval.core.errors import PrefevalWarning

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
SAMPLE_ARGS = [SAMPLE / "qrels.txt", *(SAMPLE / "runs" / f"input.sys0{i}" for i in (1, 2, 3))]

FEW = "prefeval: significance tests on 3 queries, fewer than 25: their p-values are a weak guide\n"
CONSTANT = (
    "prefeval: ttest: the differences of 1 of 1 run pair are the same on every query (rpp 1, "
    "lexirecall 1): no variance, so the t-test gives p = 0\n"
)


@pytest.fixture
def three_queries(tmp_path):
    """A finds each query's one relevant document at rank 1, B at rank 2: Delta(A, B) = +1
    on all three queries, a constant sample."""
    qrels = write_qrels(tmp_path / "qrels", [(q, 0, f"rel{q}", 1) for q in "123"])
    a = write_run(tmp_path / "A", [(q, d, s) for q in "123" for d, s in ((f"rel{q}", 2), ("x", 1))])
    b = write_run(tmp_path / "B", [(q, d, s) for q in "123" for d, s in (("x", 2), (f"rel{q}", 1))])
    return [qrels, a, b]


def test_few_queries_and_constant_samples_are_noticed_once(three_queries):
    args = ["discpower", "--no-baselines", "-m", "rpp,lexirecall", "--test", "ttest"]
    result = invoke(*args, *three_queries)
    assert result.exit_code == 0, result.stderr
    assert result.stderr == FEW + CONSTANT  # once each, not once per pair or measure
    # the numbers are as computed: p = 0 by the convention, both pairs significant
    assert result.stdout == (
        "measure\ttest\tcorrection\talpha\tsignificant\tpairs\tpercent\n"
        "rpp\tttest\tbonferroni\t0.05\t1\t1\t100.0\n"
        "lexirecall\tttest\tbonferroni\t0.05\t1\t1\t100.0\n"
    )
    # the sign test has no constant-sample convention: the few queries only
    result = invoke(*args[:-1], "sign", *three_queries)
    assert result.exit_code == 0 and result.stderr == FEW


def test_enough_varying_queries_say_nothing():
    assert MIN_QUERIES == 25
    result = invoke("discpower", "--test", "ttest", "-B", "AP", *SAMPLE_ARGS)  # 20 queries
    assert result.exit_code == 0
    assert result.stderr == (
        "prefeval: significance tests on 20 queries, fewer than 25: their p-values are a weak "
        "guide\n"
    )
    assert invoke("tau", "-B", "AP", *SAMPLE_ARGS).stderr == ""  # no test, no notice


def test_the_api_warns_and_returns_the_same_numbers(three_queries):
    qrels, a, b = map(str, three_queries)
    keywords = dict(measures=["rpp", "lexirecall"], baselines=[], tests="ttest")
    with pytest.warns(PrefevalWarning) as caught:
        table = prefeval.discpower(qrels, [a, b], **keywords)
    assert [str(w.message) for w in caught] == [FEW[10:-1], CONSTANT[10:-1]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quiet = prefeval.discpower(qrels, [a, b], notify=None, **keywords)
    assert table.equals(quiet)
    assert table["percent"].tolist() == [100.0, 100.0]


def test_the_constant_sample_notice_counts_run_pairs():
    """Runs a, b, c on three queries, two metrics.  X: a - b = 1 on every query, c varies:
    one constant pair.  Y: a - b = 1 and a - c = 1 on every query, b - c = 0 (constant but
    0: p = 1, not counted): two.  Pairs on either measure: (a, b) and (a, c), 2 of the 3
    run pairs (3 measure x pair rows of 6)."""
    from prefeval.analysis.orderings import Evidence
    from prefeval.analysis.significance import sample_caveats

    metrics = {
        "X": np.array([[1.0, 0.0, 5.0], [2.0, 1.0, 0.0], [3.0, 2.0, 7.0]]),
        "Y": np.array([[1.0, 0.0, 0.0], [2.0, 1.0, 1.0], [3.0, 2.0, 2.0]]),
    }
    evidence = Evidence(["a", "b", "c"], ["1", "2", "3"], None, metrics)
    assert sample_caveats(evidence, ("ttest",))[1] == (
        "ttest: the differences of 2 of 3 run pairs are the same on every query (X 1, Y 2): "
        "no variance, so the t-test gives p = 0"
    )
