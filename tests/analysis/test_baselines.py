"""Baseline metrics: ir-measures values, subtopic qrels, -M, -l, and the native TSE/ASL."""

from __future__ import annotations

import math
import os
from pathlib import Path

import ir_measures
import numpy as np
import pandas as pd
import pytest
from helpers import invoke, write_qrels, write_run

from prefeval.analysis.baselines import (
    DEFAULT_BASELINES,
    DEFAULT_SUBTOPIC_BASELINES,
    compute_metrics,
    default_baselines,
    higher_is_better,
    metrics_rows,
    metrics_summary,
    parse_baseline,
    parse_baselines,
)
from prefeval.core.errors import InputError
from prefeval.io.runs import read_qrels
from prefeval.io.source import run_name
from prefeval.options import Options

WEB2012 = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "web2012"
STANDARD = ["AP", "nDCG", "RR", "R@1000", "Rprec"]


def need_web2012() -> Path:
    if not (WEB2012 / "qrels.adhoc.txt.gz").exists():
        message = f"web2012 test collection not found at {WEB2012}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return WEB2012


def values(table: pd.DataFrame) -> dict:
    """{(measure, run, query_id): value}"""
    return {
        (m, r, q): v for m, r, q, v in table[["measure", "run", "query_id", "value"]].to_numpy()
    }


def irm_direct(measures, qrels, run) -> dict:
    """{(measure string, query_id): value} from ir-measures called directly."""
    parsed = [ir_measures.parse_measure(m) for m in measures]
    return {
        (str(m.measure), m.query_id): m.value for m in ir_measures.iter_calc(parsed, qrels, run)
    }


def trec_sorted(run: pd.DataFrame) -> pd.DataFrame:
    """trec_eval's order, computed independently: query, score desc, docno desc."""
    out = run.sort_values(["query_id", "score", "doc_id"], ascending=[True, False, False])
    return out.reset_index(drop=True)


# --------------------------------------------------------------------------- tiny collection
#
# query 1: judged d1 (2), d2 (1), d3 (0), d4 (1)   -> relevant (grade > 0): d1, d2, d4 (m = 3)
# query 2: judged e1 (1), e2 (0)                   -> relevant: e1 (m = 1)
# query 3: judged f1 (0)                           -> no relevant document: not evaluated
#
# run A  q1: d1 3, x1 2, d2 1        (d4 unretrieved)    q2: no line
# run B  q1: x2 5, d4 4, d1 3, d2 2  (all retrieved)     q2: e2 2, e1 1
# run C  q1: d2 1                    (d1, d4 unretrieved), plus a line for query 99 (not judged)
#
# corpus (rpp-sigir2022 5.5: the union of all rankings and the relevant documents; d3,
# judged non-relevant and retrieved by no run, is not in it):
# q1 = relevant {d1, d2, d4} + runs {x1, x2} -> n = 5;   q2 = {e1} + runs {e2} -> n = 2

QRELS = pd.DataFrame(
    [
        ("1", "d1", 2),
        ("1", "d2", 1),
        ("1", "d3", 0),
        ("1", "d4", 1),
        ("2", "e1", 1),
        ("2", "e2", 0),
        ("3", "f1", 0),
    ],
    columns=["query_id", "doc_id", "relevance"],
)


def run_frame(rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["query_id", "doc_id", "score"])


RUNS = {
    "A": run_frame([("1", "d1", 3.0), ("1", "x1", 2.0), ("1", "d2", 1.0)]),
    "B": run_frame(
        [
            ("1", "x2", 5.0),
            ("1", "d4", 4.0),
            ("1", "d1", 3.0),
            ("1", "d2", 2.0),
            ("2", "e2", 2.0),
            ("2", "e1", 1.0),
        ]
    ),
    "C": run_frame([("1", "d2", 1.0), ("99", "zz", 7.0)]),
}


def log_exposure(k: float) -> float:
    return 1.0 / math.log2(1.0 + k)


def test_table_shape_and_order():
    table = compute_metrics(QRELS, RUNS, ["AP", "TSE"])
    assert list(table.columns) == ["measure", "run", "query_id", "value"]
    # every (baseline, run, evaluated query), baseline-major; query 3 (no relevant doc)
    # and query 99 (not judged) are not evaluated
    expected = [(m, r, q) for m in ["AP", "TSE"] for r in "ABC" for q in ["1", "2"]]
    assert list(map(tuple, table[["measure", "run", "query_id"]].to_numpy())) == expected
    assert table["value"].dtype == np.float64


def test_tse_and_asl_hand_worked():
    got = values(
        compute_metrics(
            QRELS,
            RUNS,
            ["TSE", "TSE(exposure=rr)", "TSE(exposure=rbp)", "TSE(exposure=rbp,gamma=0.8)", "ASL"],
        )
    )
    tse = {
        # A q1: d4 unretrieved -> last relevant imputed at n = 5
        ("A", "1"): log_exposure(5),
        # B q1: last relevant (d2) at rank 4
        ("B", "1"): log_exposure(4),
        # C q1: d1, d4 unretrieved -> n = 5
        ("C", "1"): log_exposure(5),
        # A q2: no line for the query: e1 imputed at n = 2 (pessimistic, not 0)
        ("A", "2"): log_exposure(2),
        # B q2: e1 at rank 2
        ("B", "2"): log_exposure(2),
        ("C", "2"): log_exposure(2),
    }
    last = {("A", "1"): 5, ("B", "1"): 4, ("C", "1"): 5, ("A", "2"): 2, ("B", "2"): 2}
    for (run, q), value in tse.items():
        assert got[("TSE", run, q)] == pytest.approx(value)
    for (run, q), k in last.items():
        assert got[("TSE(exposure=rr)", run, q)] == pytest.approx(1 / k)
        assert got[("TSE(exposure=rbp)", run, q)] == pytest.approx(0.5 ** (k - 1))
        assert got[("TSE(exposure=rbp,gamma=0.8)", run, q)] == pytest.approx(0.8 ** (k - 1))
    asl = {
        ("A", "1"): (1 + 3 + 5) / 3,  # d1 at 1, d2 at 3, d4 imputed at 5
        ("B", "1"): (2 + 3 + 4) / 3,  # d4 at 2, d1 at 3, d2 at 4
        ("C", "1"): (1 + 4 + 5) / 3,  # d2 at 1; two unretrieved take n-1 = 4 and n = 5
        ("A", "2"): 2.0,  # e1 imputed at n = 2
        ("B", "2"): 2.0,  # e1 at rank 2
    }
    for (run, q), value in asl.items():
        assert got[("ASL", run, q)] == pytest.approx(value)


def test_natives_with_relevance_level_and_max_docs():
    # level 2: only d1 of query 1 is relevant; query 2 has no grade >= 2
    got = values(compute_metrics(QRELS, RUNS, ["TSE", "ASL"], relevance_level=2))
    assert {q for _, _, q in got} == {"1"}
    assert got[("TSE", "A", "1")] == pytest.approx(1.0)  # d1 at rank 1
    assert got[("ASL", "B", "1")] == pytest.approx(3.0)  # d1 at rank 3
    # n = 5 (the runs' d1, d2, d4, x1, x2); d1 unretrieved by C -> imputed at 5
    assert got[("ASL", "C", "1")] == pytest.approx(5.0)

    # -M 1: rankings keep their top document; corpus of q1 = relevant {d1, d2, d4} + the
    # rankings' {d1, x2, d2} = 4
    got = values(compute_metrics(QRELS, RUNS, ["TSE", "ASL"], max_docs=1))
    assert got[("ASL", "A", "1")] == pytest.approx((1 + 3 + 4) / 3)  # d1 at 1, d2 and d4 cut
    assert got[("ASL", "B", "1")] == pytest.approx((2 + 3 + 4) / 3)  # x2 only: all imputed
    assert got[("TSE", "B", "1")] == pytest.approx(log_exposure(4))
    # the same as evaluating runs whose files hold only their top line
    cut = {name: trec_sorted(run).groupby("query_id").head(1) for name, run in RUNS.items()}
    again = values(compute_metrics(QRELS, cut, ["TSE", "ASL"]))
    assert again == pytest.approx(got)


def test_missing_query_scores_zero_and_extra_queries_ignored():
    got = values(compute_metrics(QRELS, RUNS, STANDARD))
    for measure in STANDARD:
        assert got[(measure, "A", "2")] == 0.0  # run A has no line for query 2
        assert (measure, "C", "99") not in got  # query 99 is not judged
    assert got[("RR", "A", "1")] == 1.0
    assert got[("RR", "B", "2")] == 0.5
    # equal to ir-measures on each run directly (which also fills 0 for missing queries)
    for name, run in RUNS.items():
        direct = irm_direct(STANDARD, QRELS, run)
        for measure in STANDARD:
            for q in ["1", "2"]:
                assert got[(measure, name, q)] == pytest.approx(direct.get((measure, q), 0.0))


def test_query_ids_option():
    got = values(compute_metrics(QRELS, RUNS, ["AP", "ASL"], query_ids=["3", "1"]))
    assert [k for k in got if k[:2] == ("AP", "A")] == [("AP", "A", "3"), ("AP", "A", "1")]
    assert got[("AP", "B", "3")] == 0.0
    assert math.isnan(got[("ASL", "B", "3")])  # no relevant document: undefined
    assert got[("ASL", "B", "1")] == pytest.approx(3.0)


@pytest.mark.parametrize("level", [None, 0.5, 1, 2, 3])
@pytest.mark.parametrize("frame", [QRELS, "DIV"], ids=["plain", "subtopics"])
def test_default_queries_are_prefevals(frame, level):
    qrels = read_qrels(DIV if isinstance(frame, str) else frame)
    expected = qrels.relevant(level).query_ids
    for baselines in (["nDCG"], ["nDCG", "ASL"]):  # with and without the relevant set
        table = compute_metrics(qrels, {"r": RUNS["B"]}, baselines, relevance_level=level)
        assert list(dict.fromkeys(table["query_id"])) == expected


def test_run_names_from_paths(tmp_path):
    path = tmp_path / "input.myrun.gz"
    import gzip

    lines = [f"{q} Q0 {d} {i + 1} {s} tag" for i, (q, d, s) in enumerate(RUNS["B"].to_numpy())]
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    table = compute_metrics(QRELS, [str(path), RUNS["A"]], ["AP"])
    assert list(dict.fromkeys(table["run"])) == [run_name(path), "run2"]
    assert run_name(path) == "myrun"
    with pytest.raises(InputError, match="two runs are named"):
        compute_metrics(QRELS, [str(path), str(path)], ["AP"])


def test_ties_follow_trec_eval_order():
    # three documents with equal scores: trec_eval (and prefeval) rank them by docno
    # descending, z before m before a, whatever the input order
    qrels = pd.DataFrame({"query_id": ["1"], "doc_id": ["a"], "relevance": [1]})
    for order in (["a", "m", "z"], ["z", "a", "m"]):
        run = run_frame([("1", d, 1.0) for d in order])
        got = values(compute_metrics(qrels, {"r": run}, ["RR", "ASL"]))
        assert got[("RR", "r", "1")] == pytest.approx(1 / 3)
        assert got[("ASL", "r", "1")] == pytest.approx(3.0)


def test_max_docs_truncates_after_trec_sort():
    qrels = pd.DataFrame(
        {"query_id": ["1", "1"], "doc_id": ["a", "c"], "relevance": [1, 1]},
    )
    # ties at the cut: sorted order is b(3) c(2) a(2) [docno desc among the tie]
    run = run_frame([("1", "a", 2.0), ("1", "b", 3.0), ("1", "c", 2.0)])
    got = values(compute_metrics(qrels, {"r": run}, ["AP", "R@1000", "P@2"], max_docs=2))
    # top 2 = b, c: c relevant at rank 2, a cut
    assert got[("AP", "r", "1")] == pytest.approx(0.5 * 0.5)
    assert got[("R@1000", "r", "1")] == pytest.approx(0.5)
    assert got[("P@2", "r", "1")] == pytest.approx(0.5)
    direct = irm_direct(["AP"], qrels, run_frame([("1", "b", 3.0), ("1", "c", 2.0)]))
    assert got[("AP", "r", "1")] == pytest.approx(direct[("AP", "1")])


# --------------------------------------------------------------------------- relevance level


def test_relevance_level_maps_to_rel():
    qrels = pd.DataFrame(
        {
            "query_id": ["1"] * 4 + ["2"] * 2,
            "doc_id": ["a", "b", "c", "d", "e", "f"],
            "relevance": [2, 1, 1, 2, 1, 0],
        }
    )
    run = run_frame([("1", "b", 4.0), ("1", "a", 3.0), ("1", "c", 2.0), ("2", "e", 1.0)])
    table = compute_metrics(qrels, {"r": run}, ["AP", "AP(rel=1)", "nDCG"], relevance_level=2)
    got = values(table)
    # query 2 has no grade >= 2 document: not evaluated at level 2
    assert set(table["query_id"]) == {"1"}
    direct2 = irm_direct(["AP(rel=2)", "AP", "nDCG"], qrels, run)
    # AP is computed as AP(rel=2) and reported under the name given
    assert got[("AP", "r", "1")] == pytest.approx(direct2[("AP(rel=2)", "1")])
    assert got[("AP", "r", "1")] != pytest.approx(direct2[("AP", "1")])
    # an explicit rel wins, and stays visible in the name
    assert got[("AP(rel=1)", "r", "1")] == pytest.approx(direct2[("AP", "1")])
    # nDCG has no rel threshold: grades are gains
    assert got[("nDCG", "r", "1")] == pytest.approx(direct2[("nDCG", "1")])
    # an integral float level is fine; a fractional one is not
    again = values(compute_metrics(qrels, {"r": run}, ["AP"], relevance_level=2.0))
    assert again == {("AP", "r", "1"): got[("AP", "r", "1")]}
    with pytest.raises(ValueError, match="not an integer"):
        compute_metrics(qrels, {"r": run}, ["AP"], relevance_level=1.5)
    # ... unless no measure needs it
    compute_metrics(qrels, {"r": run}, ["nDCG", "TSE"], relevance_level=1.5)


@pytest.mark.parametrize("level", [2**31, 1e10, 1e308])
def test_relevance_level_beyond_a_c_int(level, tmp_path):
    """The qrels take any finite grade, and so does -l for prefeval's own relevance; an
    ir-measures rel must fit pytrec_eval's C int, as their grades must (<= 2**31 - 1):
    beyond it a ValueError (a usage error, exit 2), never pytrec_eval's TypeError."""
    qrels = pd.DataFrame({"query_id": ["1", "1"], "doc_id": ["a", "b"], "relevance": [2, 1]})
    run = run_frame([("1", "a", 4.0), ("1", "b", 3.0)])
    for names in (["AP"], ["NumRelRet"], None):
        with pytest.raises(ValueError, match="beyond what the ir-measures baselines take"):
            compute_metrics(qrels, {"r": run}, names, relevance_level=level)
    # measures without a rel threshold, and the natives, take it (nothing is relevant)
    got = values(
        compute_metrics(qrels, {"r": run}, ["nDCG", "TSE"], query_ids=["1"], relevance_level=level)
    )
    assert got[("nDCG", "r", "1")] == pytest.approx(1.0)
    assert math.isnan(got[("TSE", "r", "1")])
    at_max = compute_metrics(qrels, {"r": run}, ["AP"], query_ids=["1"], relevance_level=2**31 - 1)
    assert values(at_max) == {("AP", "r", "1"): 0.0}
    files = [
        write_qrels(tmp_path / "q", [("1", 0, "a", 2)]),
        write_run(tmp_path / "r", [("1", "a", 1.0)]),
    ]
    result = invoke("metrics", "-l", repr(level), *files)
    assert result.exit_code == 2, result.output
    assert "beyond what the ir-measures baselines take" in result.stderr
    assert "Traceback" not in result.output + result.stderr


def test_num_rel_ret_follows_the_level():
    """trec_eval's num_rel_ret (ir-measures' NumRelRet = NumRet(rel=1)) counts the
    retrieved documents relevant at -l; an explicit NumRet(rel=1) keeps its threshold."""
    qrels = pd.DataFrame({"query_id": ["1"] * 3, "doc_id": ["a", "b", "c"], "relevance": [2, 1, 0]})
    run = run_frame([("1", "a", 3.0), ("1", "b", 2.0), ("1", "c", 1.0)])  # three lines
    names = ["num_rel_ret", "NumRelRet", "NumRet(rel=1)", "NumRet(rel=2)", "NumRet"]
    assert [b.name for b in parse_baselines(names)] == [
        "NumRelRet",  # num_rel_ret and NumRelRet are one measure, named NumRelRet
        "NumRet(rel=1)",
        "NumRet(rel=2)",
        "NumRet",
    ]
    for level, want in ((None, 2.0), (1, 2.0), (2, 1.0)):
        got = values(compute_metrics(qrels, {"r": run}, names, relevance_level=level))
        assert got[("NumRelRet", "r", "1")] == want  # a (2), and b (1) below level 2
        assert got[("NumRet(rel=1)", "r", "1")] == 2.0
        assert got[("NumRet(rel=2)", "r", "1")] == 1.0
        assert got[("NumRet", "r", "1")] == 3.0
        direct = irm_direct([f"NumRet(rel={level or 1})"], qrels, run)
        assert got[("NumRelRet", "r", "1")] == direct[(f"NumRet(rel={level or 1})", "1")]
    # its summary is a sum, as for every count
    table = compute_metrics(qrels, {"r": run}, ["NumRelRet"], relevance_level=2)
    assert list(metrics_summary(pd.concat([table, table]))["value"]) == [2.0]


def test_asl_corpus_is_the_rankings_and_the_relevant_documents():
    """rpp-sigir2022 section 5.5: n = the unique items in the union of all rankings and
    the relevant items; judged non-relevant documents no run retrieved are not in it."""
    judged = [("r1", 1), ("r2", 1)] + [(f"n{i}", 0) for i in range(5)]  # 7 judgments
    qrels = pd.DataFrame(
        {"query_id": "1", "doc_id": [d for d, _ in judged], "relevance": [g for _, g in judged]}
    )
    run = run_frame([("1", "x", 2.0), ("1", "r1", 1.0)])  # r1 at rank 2, r2 unretrieved
    got = values(compute_metrics(qrels, {"r": run}, ["ASL", "TSE", "TSE(exposure=rr)"]))
    # n = |{x, r1} + {r1, r2}| = 3: r2 imputed at 3 (with the judged ones, n = 8: 5.0)
    assert got[("ASL", "r", "1")] == 2.5 == (2 + 3) / 2
    assert got[("TSE", "r", "1")] == pytest.approx(log_exposure(3))  # the same n
    assert got[("TSE(exposure=rr)", "r", "1")] == pytest.approx(1 / 3)
    # a judged non-relevant document a run retrieved is in the union: n = 4
    other = run_frame([("1", "n0", 1.0)])
    got = values(compute_metrics(qrels, {"r": run, "o": other}, ["ASL"]))
    assert got[("ASL", "r", "1")] == (2 + 4) / 2
    assert got[("ASL", "o", "1")] == (3 + 4) / 2
    # at a level, the relevant documents are those of the level: n = |{x, r1} + {r2}|
    graded = qrels.assign(relevance=np.where(qrels["doc_id"] == "r2", 2, qrels["relevance"]))
    got = values(compute_metrics(graded, {"r": run}, ["ASL"], relevance_level=2))
    assert got[("ASL", "r", "1")] == 3.0  # r2 (the one of grade >= 2) imputed at n = 3


@pytest.mark.parametrize("level", [0, -1, 0.0, -0.5, math.nan, math.inf, "x"])
def test_relevance_levels_must_be_positive(level):
    """One meaning everywhere: relevant means grade >= level > 0; a level <= 0 (which would
    make judged non-relevant and spam documents relevant) is a ValueError in the engine's
    relevant sets and in the baselines, never a TypeError from pytrec_eval or zeros."""
    qrels = read_qrels(QRELS)
    with pytest.raises(ValueError, match="relevance level"):
        qrels.relevant(level)
    for names in (["AP"], ["TSE"], ["nDCG"]):
        with pytest.raises(ValueError, match="relevance level"):
            compute_metrics(qrels, RUNS, names, relevance_level=level)
    with pytest.raises(ValueError, match="relevance level"):
        metrics_rows(qrels, RUNS, ["AP"], Options(relevance_level=level))


# --------------------------------------------------------------------------- subtopic qrels
#
# Diversity qrels: query 1 has subtopics 1 and 2.  Document a is relevant to subtopic 1
# only, and its subtopic-2 row (grade 0) comes last: fed to trec_eval unchanged, that row
# would overwrite the first and make a non-relevant.

DIV = pd.DataFrame(
    [
        ("1", 1, "a", 1),
        ("1", 1, "b", 0),
        ("1", 1, "c", 1),
        ("1", 2, "b", 1),
        ("1", 2, "c", 0),
        ("1", 2, "a", 0),
        ("2", 1, "g", 1),
        ("2", 2, "h", 2),
        ("2", 2, "g", 0),
    ],
    columns=["query_id", "iteration", "doc_id", "relevance"],
)
DIV_RUNS = {
    "x": run_frame(
        [("1", "a", 5.0), ("1", "z", 4.0), ("1", "b", 3.0), ("1", "c", 2.0), ("2", "g", 1.0)]
    ),
    "y": run_frame([("1", "z", 5.0), ("1", "c", 4.0), ("2", "h", 3.0), ("2", "g", 2.0)]),
}


def test_subtopic_qrels_general_and_intent_aware():
    qrels = read_qrels(DIV)
    assert qrels.has_subtopics
    got = values(compute_metrics(qrels, DIV_RUNS, ["AP", "nDCG", "ERR_IA@20", "AP_IA"]))
    general = DIV.groupby(["query_id", "doc_id"], as_index=False)["relevance"].max()
    subtopics = DIV.assign(iteration=DIV["iteration"].astype(str))
    raw = DIV.drop(columns="iteration")
    for name, run in DIV_RUNS.items():
        standard = irm_direct(["AP", "nDCG"], general, run)
        intent = irm_direct(["ERR_IA@20", "AP_IA"], subtopics, run)
        for q in ["1", "2"]:
            for measure in ["AP", "nDCG"]:
                assert got[(measure, name, q)] == pytest.approx(standard.get((measure, q), 0.0))
            for measure in ["ERR_IA@20", "AP_IA"]:
                assert got[(measure, name, q)] == pytest.approx(intent.get((measure, q), 0.0))
    # the pitfall is real here: raw subtopic rows make document a non-relevant
    overwritten = irm_direct(["AP"], raw, DIV_RUNS["x"])
    assert got[("AP", "x", "1")] == pytest.approx(1.0 * 1 / 3 + (2 / 3 + 3 / 4) / 3)
    assert overwritten[("AP", "1")] != pytest.approx(got[("AP", "x", "1")])


def test_default_baselines():
    assert default_baselines(False) == DEFAULT_BASELINES
    assert default_baselines(True) == DEFAULT_BASELINES + DEFAULT_SUBTOPIC_BASELINES
    table = compute_metrics(DIV, DIV_RUNS)
    assert list(dict.fromkeys(table["measure"])) == DEFAULT_BASELINES + DEFAULT_SUBTOPIC_BASELINES
    table = compute_metrics(QRELS, RUNS)
    assert list(dict.fromkeys(table["measure"])) == DEFAULT_BASELINES


# --------------------------------------------------------------------------- parsing, errors


def test_parse_baseline():
    ap = parse_baseline(" AP ")
    assert (ap.name, ap.kind, ap.intent_aware, ap.higher_is_better) == ("AP", "irm", False, True)
    assert parse_baseline("nDCG@10").name == "nDCG@10"
    assert parse_baseline("AP(rel=1)").name == "AP(rel=1)"
    assert parse_baseline("AP(rel=2)").name == "AP(rel=2)"
    for name in DEFAULT_SUBTOPIC_BASELINES + ["nERR_IA@20", "P_IA@10", "NRBP"]:
        assert parse_baseline(name).intent_aware, name
    assert parse_baseline("TSE").name == "TSE"
    assert parse_baseline("TSE(exposure=log2)").name == "TSE"
    assert parse_baseline("TSE(exposure='rr')").name == "TSE(exposure=rr)"
    assert parse_baseline("TSE(exposure=rbp,gamma=0.5)").name == "TSE(exposure=rbp)"
    assert parse_baseline("TSE(exposure=rbp, gamma=0.80)").name == "TSE(exposure=rbp,gamma=0.8)"
    asl = parse_baseline("ASL")
    assert (asl.kind, asl.higher_is_better) == ("native", False)
    assert higher_is_better("ASL") is False
    assert higher_is_better("TSE") is True
    assert higher_is_better("AP") is True


@pytest.mark.parametrize(
    "text, message",
    [
        ("Foo", "unknown baseline measure"),
        ("AP(x=1)", "unknown baseline measure|unsupported"),
        ("AP(rel=1.5)", "invalid param"),
        ("AP(rel=0)", r"'AP\(rel=0\)': rel must be >= 1 .*e\.g\. AP\(rel=1\)"),
        ("P(rel=0)@5", r"'P\(rel=0\)@5': rel must be >= 1 .*e\.g\. P\(rel=1\)@5$"),
        ("NumRet(rel=0)", r"'NumRet\(rel=0\)': rel must be >= 1"),
        ("nDCG@", "unknown baseline measure"),
        ("ERR_IA", "needs a cutoff"),
        ("ERR_IA@30", "up to @20"),
        ("TSE(exposure=foo)", "exposure must be"),
        ("TSE(gamma=0.5)", "only applies to exposure=rbp"),
        ("TSE(exposure=rbp,gamma=2)", "gamma must be"),
        ("TSE(foo=1)", "unknown parameter"),
        ("ASL(exposure=rr)", "ASL takes no parameters"),
        (
            "SDCG@5",
            r"^baseline measure 'SDCG@5': SDCG needs its parameter max_rel \(maximum relevance "
            r"score\), as in SDCG\(max_rel=\.\.\.\): ir-measures has no default for it$",
        ),
        (
            "NDGC@10",
            r"^unknown baseline measure 'NDGC@10' \(measure not found: NDGC\); "
            "close names: NDCG; use an ir-measures measure",
        ),
        ("recip_rnk", "; close names: recip_rank; use"),
        ("Foo", r"^unknown baseline measure 'Foo' \(measure not found: Foo\); use "),
    ],
)
def test_bad_measures(text, message):
    with pytest.raises(ValueError, match=message):
        parse_baseline(text)
    with pytest.raises(ValueError, match=message):
        compute_metrics(QRELS, RUNS, ["AP", text])


def test_intent_aware_needs_subtopics():
    with pytest.raises(ValueError, match="need subtopic qrels"):
        compute_metrics(QRELS, RUNS, ["AP", "ERR_IA@20"])


def test_non_integer_grades_rejected_for_ir_measures():
    qrels = QRELS.assign(relevance=QRELS["relevance"] * 0.5)
    with pytest.raises(ValueError, match="not an integer"):
        compute_metrics(qrels, RUNS, ["AP"])
    compute_metrics(qrels, RUNS, ["TSE", "ASL"])  # native metrics need no integer grades


# --------------------------------------------------------------------------- web2012


@pytest.fixture(scope="module")
def web():
    root = need_web2012()
    runs = sorted(str(p) for p in (root / "runs").glob("*.gz"))
    assert len(runs) == 8
    return root, runs


def test_web2012_equals_ir_measures(web):
    root, runs = web
    qrels_path = str(root / "qrels.adhoc.txt.gz")
    table = compute_metrics(qrels_path, runs, STANDARD)
    got = values(table)
    query_ids = list(dict.fromkeys(table["query_id"]))
    assert len(query_ids) == 50
    assert len(table) == len(STANDARD) * len(runs) * len(query_ids)
    qrels = list(ir_measures.read_trec_qrels(qrels_path))
    for path in runs:
        name = run_name(path)
        direct = irm_direct(STANDARD, qrels, ir_measures.read_trec_run(path))
        assert {q for _, q in direct} <= set(query_ids)
        for measure in STANDARD:
            for q in query_ids:
                assert got[(measure, name, q)] == pytest.approx(
                    direct.get((measure, q), 0.0), abs=1e-12
                ), (measure, name, q)


def test_web2012_max_docs_equals_truncated_runs(web):
    root, runs = web
    qrels_path = str(root / "qrels.adhoc.txt.gz")
    runs = runs[:3]
    got = values(compute_metrics(qrels_path, runs, STANDARD + ["TSE", "ASL"], max_docs=100))
    cut = {}
    for path in runs:
        frame = pd.DataFrame(ir_measures.read_trec_run(path))
        cut[run_name(path)] = trec_sorted(frame).groupby("query_id").head(100)
    assert values(compute_metrics(qrels_path, cut, STANDARD + ["TSE", "ASL"])) == pytest.approx(got)
    qrels = list(ir_measures.read_trec_qrels(qrels_path))
    for name, frame in cut.items():
        direct = irm_direct(STANDARD, qrels, frame)
        for (measure, q), value in direct.items():
            assert got[(measure, name, q)] == pytest.approx(value, abs=1e-12)


def test_web2012_natives_against_a_plain_oracle(web, monkeypatch):
    import prefeval.analysis.baselines as baselines

    root, runs = web
    qrels_path = str(root / "qrels.adhoc.txt.gz")
    runs = runs[:3]
    got = values(compute_metrics(qrels_path, runs, ["TSE", "ASL", "TSE(exposure=rr)"]))
    # the corpus merges its buffered rows in batches: tiny batches give the same result
    monkeypatch.setattr(baselines.rankings.Corpus, "BATCH", 10_000)
    again = values(compute_metrics(qrels_path, runs, ["TSE", "ASL", "TSE(exposure=rr)"]))
    assert again == got

    judged = pd.DataFrame(ir_measures.read_trec_qrels(qrels_path))
    frames = {run_name(p): trec_sorted(pd.DataFrame(ir_measures.read_trec_run(p))) for p in runs}
    relevant = judged[judged["relevance"] > 0].groupby("query_id")["doc_id"].apply(set)
    # n: the documents of all the rankings and the relevant ones (rpp-sigir2022 5.5)
    corpus = {q: set(docs) for q, docs in relevant.items()}
    for frame in frames.values():
        for q, part in frame.groupby("query_id"):
            corpus.setdefault(q, set()).update(part["doc_id"])
    for name, frame in frames.items():
        for q, rel in relevant.items():
            ranking = list(frame.loc[frame["query_id"] == q, "doc_id"])
            ranks = [ranking.index(d) + 1 for d in rel if d in ranking]
            n, u = len(corpus[q]), len(rel) - len(ranks)
            asl = (sum(ranks) + sum(range(n - u + 1, n + 1))) / len(rel)
            last = n if u else max(ranks)
            assert got[("ASL", name, q)] == pytest.approx(asl), (name, q)
            assert got[("TSE", name, q)] == pytest.approx(1 / math.log2(1 + last)), (name, q)
            assert got[("TSE(exposure=rr)", name, q)] == pytest.approx(1 / last), (name, q)


def test_web2012_diversity(web):
    root, runs = web
    qrels_path = str(root / "qrels.diversity-ndeval.txt.gz")
    measures = ["AP", "nDCG"] + DEFAULT_SUBTOPIC_BASELINES
    got = values(compute_metrics(qrels_path, runs[:4], measures))
    div = list(ir_measures.read_trec_qrels(qrels_path))
    general = pd.DataFrame(div).groupby(["query_id", "doc_id"], as_index=False)["relevance"].max()
    standard = ir_measures.evaluator([ir_measures.AP, ir_measures.nDCG], general)
    intent = ir_measures.evaluator(
        [ir_measures.parse_measure(m) for m in DEFAULT_SUBTOPIC_BASELINES], div
    )
    for path in runs[:4]:
        name = run_name(path)
        run = list(ir_measures.read_trec_run(path))
        direct = {}
        for evaluator in (standard, intent):
            direct.update({(str(m.measure), m.query_id): m.value for m in evaluator.iter_calc(run)})
        for (measure, q), value in direct.items():
            assert got[(measure, name, q)] == pytest.approx(value, abs=1e-12), (measure, name, q)
        missing = {k for k in got if k[1] == name} - {(m, name, q) for m, q in direct}
        assert all(got[k] == 0.0 for k in missing)


# --------------------------------------------------------------------------- query order
#
# Runs whose files list their queries in another order than prefeval's (query blocks in
# random order, or lines shuffled) must give every query its own documents: per-query
# values equal ir-measures' own evaluator on the run, with its trec_eval tie order.

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
CHECKED = ["AP", "nDCG", "nDCG@10", "RR", "P@10", "R@1000", "Rprec", "NumRel"]
NATIVES = ["TSE", "ASL", "TSE(exposure=rr)"]


def read_frame(path) -> pd.DataFrame:
    return pd.DataFrame(ir_measures.read_trec_run(str(path)))[["query_id", "doc_id", "score"]]


def shuffle_query_blocks(frame: pd.DataFrame, seed: int) -> pd.DataFrame:
    """The run's query blocks in a random order (not the sorted one), lines within a block
    unchanged."""
    rng = np.random.default_rng(seed)
    qids = list(dict.fromkeys(frame["query_id"]))
    shuffled = [qids[i] for i in rng.permutation(len(qids))]
    while shuffled == sorted(shuffled, key=int) or shuffled == qids:
        shuffled = [qids[i] for i in rng.permutation(len(qids))]
    blocks = {q: part for q, part in frame.groupby("query_id", sort=False)}
    return pd.concat([blocks[q] for q in shuffled], ignore_index=True)


def shuffle_lines(frame: pd.DataFrame, seed: int) -> pd.DataFrame:
    return frame.sample(frac=1.0, random_state=seed).reset_index(drop=True)


LAYOUTS = {"blocks": shuffle_query_blocks, "lines": shuffle_lines}


def write_frame(path: Path, frame: pd.DataFrame) -> str:
    from helpers import write_run

    rows = zip(frame["query_id"], frame["doc_id"], frame["score"].astype(float))
    write_run(path, rows, compress=str(path).endswith(".gz"))
    return str(path)


def judged_relevant(qrels: pd.DataFrame, level: int = 1) -> pd.Series:
    """Judged documents with grade >= level per query (trec_eval's num_rel)."""
    general = qrels.groupby(["query_id", "doc_id"], as_index=False)["relevance"].max()
    return general[general["relevance"] >= level].groupby("query_id").size()


def irm_expected(measures, qrels: pd.DataFrame, run: pd.DataFrame, query_ids, max_docs=None):
    """{(measure, query_id): value} from ir-measures' own evaluator on ``run`` (cut at its
    trec-sorted top ``max_docs``, computed independently); a query the run did not answer
    gets the empty ranking's value: NumRel from the qrels, 0 otherwise."""
    if max_docs is not None:
        run = trec_sorted(run).groupby("query_id").head(max_docs)
    parsed = [ir_measures.parse_measure(m) for m in measures]
    direct = {
        (str(m.measure), m.query_id): m.value for m in ir_measures.iter_calc(parsed, qrels, run)
    }
    answered = set(run["query_id"])
    num_rel = judged_relevant(qrels)
    out = {}
    for measure in measures:
        for q in query_ids:
            if q in answered:
                out[(measure, q)] = direct[(measure, q)]
            else:
                out[(measure, q)] = float(num_rel.get(q, 0)) if measure == "NumRel" else 0.0
    return out


def assert_equals_irm(got: dict, name: str, expected: dict) -> None:
    for (measure, q), value in expected.items():
        assert got[(measure, name, q)] == pytest.approx(value, abs=1e-12), (measure, name, q)


@pytest.fixture(scope="module")
def sample():
    qrels_path = SAMPLE / "qrels.txt"
    runs = sorted((SAMPLE / "runs").glob("input.*"))
    assert len(runs) == 6
    frames = {run_name(p): read_frame(p) for p in runs}
    # sys04 answers 19 of the 20 queries: its missing one gets the empty ranking's values
    assert [frame["query_id"].nunique() for frame in frames.values()] == [20, 20, 20, 19, 20, 20]
    qrels = pd.DataFrame(ir_measures.read_trec_qrels(str(qrels_path)))
    return str(qrels_path), qrels, frames


@pytest.mark.parametrize("max_docs", [None, 5])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_shuffled_queries_equal_ir_measures(sample, tmp_path, layout, max_docs):
    qrels_path, qrels, frames = sample
    paths = {}
    for i, (name, frame) in enumerate(frames.items()):
        shuffled = LAYOUTS[layout](frame, seed=i)
        paths[name] = write_frame(tmp_path / f"{name}.run", shuffled)
    table = compute_metrics(qrels_path, paths, CHECKED, max_docs=max_docs)
    got = values(table)
    query_ids = list(dict.fromkeys(table["query_id"]))
    assert len(query_ids) == 20
    for name, frame in frames.items():
        assert_equals_irm(got, name, irm_expected(CHECKED, qrels, frame, query_ids, max_docs))
    # the same table as for the files in query order, and as for DataFrames
    original = {name: str(p) for name, p in zip(frames, sorted((SAMPLE / "runs").glob("*")))}
    assert values(compute_metrics(qrels_path, original, CHECKED, max_docs=max_docs)) == got
    assert values(compute_metrics(qrels_path, frames, CHECKED, max_docs=max_docs)) == got


def test_shuffled_queries_mean_equals_ir_measures_aggregate(sample, tmp_path):
    qrels_path, qrels, frames = sample
    name, frame = next(iter(frames.items()))
    path = write_frame(tmp_path / "run.gz", shuffle_query_blocks(frame, seed=7))
    table = compute_metrics(qrels_path, {name: path}, ["AP", "nDCG@10", "P@10"])
    means = table.groupby("measure")["value"].mean()
    parsed = [ir_measures.parse_measure(m) for m in ["AP", "nDCG@10", "P@10"]]
    for measure, value in ir_measures.calc_aggregate(parsed, qrels, frame).items():
        assert means[str(measure)] == pytest.approx(value, abs=1e-12)


def test_cli_metrics_shuffled_query_blocks(sample, tmp_path):
    from helpers import invoke, read_tsv

    qrels_path, qrels, frames = sample
    paths = [
        write_frame(tmp_path / f"input.{name}", shuffle_query_blocks(frame, seed=i))
        for i, (name, frame) in enumerate(frames.items())
    ]
    options = [arg for measure in CHECKED for arg in ("-B", measure)]
    for max_docs in (None, 5):
        cut = [] if max_docs is None else ["-M", max_docs]
        result = invoke("metrics", "-q", "-n", *options, *cut, qrels_path, *paths)
        assert result.exit_code == 0, result.stderr
        assert "Traceback" not in result.stderr
        table = read_tsv(result.stdout)
        got = {
            (m, r, q): float(v)
            for m, r, q, v in table[["measure", "run", "query_id", "value"]].to_numpy()
        }
        query_ids = list(dict.fromkeys(table["query_id"]))
        for name, frame in frames.items():
            expected = irm_expected(CHECKED, qrels, frame, query_ids, max_docs)
            assert_equals_irm(got, name, expected)


def test_ranking_does_not_trust_the_query_order_of_trec_order(sample, monkeypatch):
    """A trec order whose query blocks follow the file (ranked within each query, the
    queries in the file's order) must still give each query its own documents."""
    import prefeval.analysis.baselines as baselines

    qrels_path, qrels, frames = sample
    shuffled = {name: shuffle_query_blocks(f, seed=i) for i, (name, f) in enumerate(frames.items())}
    expected = values(compute_metrics(qrels_path, frames, CHECKED + NATIVES, max_docs=5))
    trec_order = baselines.rankings.trec_order

    def file_block_order(q, score, docno):
        order = trec_order(q, score, docno)
        first = np.full(int(q.max()) + 1 if len(q) else 0, len(q))
        np.minimum.at(first, q, np.arange(len(q)))
        return order[np.argsort(first[q[order]], kind="stable")]

    monkeypatch.setattr(baselines.rankings, "trec_order", file_block_order)
    got = values(compute_metrics(qrels_path, shuffled, CHECKED + NATIVES, max_docs=5))
    assert got.keys() == expected.keys()
    assert got == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("max_docs", [None, 5])
def test_natives_unchanged_by_shuffled_query_blocks(sample, tmp_path, max_docs):
    qrels_path, qrels, frames = sample
    expected = values(compute_metrics(qrels_path, frames, NATIVES, max_docs=max_docs))
    for layout, shuffle in LAYOUTS.items():
        paths = {
            name: write_frame(tmp_path / f"{layout}-{name}.run", shuffle(frame, seed=i + 3))
            for i, (name, frame) in enumerate(frames.items())
        }
        got = values(compute_metrics(qrels_path, paths, NATIVES, max_docs=max_docs))
        assert got.keys() == expected.keys()
        assert got == pytest.approx(expected, abs=1e-12), layout


def test_web2012_shuffled_query_blocks_equal_ir_measures(web2012, tmp_path):
    qrels_path = str(web2012 / "qrels.adhoc.txt.gz")
    qrels = pd.DataFrame(ir_measures.read_trec_qrels(qrels_path))
    runs = sorted((web2012 / "runs").glob("*.run.gz"))
    assert len(runs) == 8
    frames = {run_name(p): read_frame(p) for p in runs}
    paths = {
        name: write_frame(tmp_path / f"{name}.run.gz", shuffle_query_blocks(frame, seed=i))
        for i, (name, frame) in enumerate(frames.items())
    }
    for max_docs in (None, 5):
        table = compute_metrics(qrels_path, paths, CHECKED + NATIVES, max_docs=max_docs)
        got = values(table)
        query_ids = list(dict.fromkeys(table["query_id"]))
        assert len(query_ids) == 50
        for name, frame in frames.items():
            expected = irm_expected(CHECKED, qrels, frame, query_ids, max_docs)
            assert_equals_irm(got, name, expected)
        # TSE and ASL as for the files in query order
        original = values(
            compute_metrics(qrels_path, [str(p) for p in runs], NATIVES, max_docs=max_docs)
        )
        assert {k: v for k, v in got.items() if k[0] in NATIVES} == pytest.approx(original)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_web2012_diversity_shuffled_queries(web2012, tmp_path, layout):
    qrels_path = str(web2012 / "qrels.diversity-ndeval.txt.gz")
    div = pd.DataFrame(ir_measures.read_trec_qrels(qrels_path))
    general = div.groupby(["query_id", "doc_id"], as_index=False)["relevance"].max()
    runs = sorted((web2012 / "runs").glob("*.run.gz"))[:3]
    frames = {run_name(p): read_frame(p) for p in runs}
    paths = {
        name: write_frame(tmp_path / f"{name}.run.gz", LAYOUTS[layout](frame, seed=i))
        for i, (name, frame) in enumerate(frames.items())
    }
    # ir-measures is called on the runs in file order: its own pyndeval path groups
    # consecutive rows by query, so it needs rows grouped by query (shuffled lines give
    # it wrong intent-aware values)
    standard, intent = ["AP", "nDCG@10", "NumRel"], DEFAULT_SUBTOPIC_BASELINES
    for max_docs in (None, 5):
        table = compute_metrics(qrels_path, paths, standard + intent, max_docs=max_docs)
        got = values(table)
        query_ids = list(dict.fromkeys(table["query_id"]))
        for name, frame in frames.items():
            assert_equals_irm(
                got, name, irm_expected(standard, general, frame, query_ids, max_docs)
            )
            # ndeval: the max_docs cut in trec order, then its own tie order
            cut = frame if max_docs is None else trec_sorted(frame).groupby("query_id").head(5)
            direct = irm_direct(intent, div, cut)
            for measure in intent:
                for q in query_ids:
                    assert got[(measure, name, q)] == pytest.approx(
                        direct.get((measure, q), 0.0), abs=1e-12
                    ), (measure, name, q)


# --------------------------------------------------------------------------- empty rankings


def test_unanswered_query_gets_empty_ranking_values():
    # run A has no line for query 2 (judged e1 relevant, e2 not)
    measures = ["NumRel", "NumQ", "NumRet", "NumRet(rel=1)", "IPrec@0.0", "Bpref", "SetP"]
    got = values(compute_metrics(QRELS, RUNS, CHECKED + measures + ["TSE"]))
    assert got[("NumRel", "A", "2")] == 1.0 == judged_relevant(QRELS)["2"]
    assert got[("NumQ", "A", "2")] == 1.0
    for measure in CHECKED + measures:
        if measure not in ("NumRel", "NumQ"):
            assert got[(measure, "A", "2")] == 0.0, measure
    assert got[("TSE", "A", "2")] == pytest.approx(log_exposure(2))  # imputed, as before
    # answered queries: ir-measures' own values
    for name, run in RUNS.items():
        direct = irm_direct(measures, QRELS, run)
        for (measure, q), value in direct.items():
            if q in set(run["query_id"]):
                assert got[(measure, name, q)] == pytest.approx(value), (measure, name, q)
    # NumRel counts the judged documents with grade >= rel, whatever the run retrieved
    extra = pd.DataFrame({"query_id": ["2"] * 2, "doc_id": ["e3", "e4"], "relevance": [2, -2]})
    qrels = pd.concat([QRELS, extra], ignore_index=True)
    got = values(compute_metrics(qrels, RUNS, ["NumRel", "AP"]))
    assert got[("NumRel", "A", "2")] == 2.0  # e1 (1) and e3 (2); e2 (0), e4 (-2) not
    assert got[("NumRel", "B", "2")] == 2.0  # answered: pytrec_eval's own count


def test_unanswered_query_with_subtopic_qrels():
    # run y without its query-2 lines: NumRel from the general qrels, intent-aware 0
    got = values(compute_metrics(DIV, {"y": DIV_RUNS["y"].iloc[:2]}, ["NumRel", "ERR_IA@20"]))
    assert got[("NumRel", "y", "2")] == 2.0  # g and h, general grades 1 and 2
    assert got[("ERR_IA@20", "y", "2")] == 0.0
    assert got[("NumRel", "y", "1")] == 3.0


def test_numrel_at_a_relevance_level():
    # trec_eval's num_rel at -l L: the judged documents with grade >= L (pytrec_eval
    # computes rel=1 only; prefeval counts them from the qrels); an explicit rel stays
    names = ["NumRel", "NumRel(rel=1)", "NumRel(rel=2)"]
    for level, want in ((None, 3.0), (1, 3.0), (2, 1.0), (3, 0.0)):
        table = compute_metrics(QRELS, RUNS, names, relevance_level=level, query_ids=["1", "3"])
        got = values(table)
        for run in RUNS:
            assert got[("NumRel", run, "1")] == want  # d1 (2), d2 (1), d4 (1)
            assert got[("NumRel(rel=1)", run, "1")] == 3.0
            assert got[("NumRel(rel=2)", run, "1")] == 1.0
            assert got[("NumRel", run, "3")] == 0.0  # f1 (0)


def test_web2012_unanswered_query_numrel_from_qrels(web2012, tmp_path):
    qrels_path = str(web2012 / "qrels.adhoc.txt.gz")
    qrels = pd.DataFrame(ir_measures.read_trec_qrels(qrels_path))
    path = sorted((web2012 / "runs").glob("*.run.gz"))[0]
    frame = read_frame(path)
    dropped = sorted(set(frame["query_id"]), key=int)[::7]
    partial = shuffle_query_blocks(frame[~frame["query_id"].isin(dropped)], seed=11)
    run = write_frame(tmp_path / "partial.run.gz", partial)
    table = compute_metrics(qrels_path, {"partial": run}, CHECKED + ["NumQ"])
    got = values(table)
    num_rel = judged_relevant(qrels)
    for q in dropped:
        assert got[("NumRel", "partial", q)] == num_rel[q] > 0
        assert got[("NumQ", "partial", q)] == 1.0
        assert got[("AP", "partial", q)] == 0.0
    query_ids = list(dict.fromkeys(table["query_id"]))
    assert_equals_irm(got, "partial", irm_expected(CHECKED, qrels, partial, query_ids))


def test_large_string_run_columns():
    """A huge run's columns stay large_string (beyond 2 GiB of text): same values."""
    import pyarrow as pa

    from prefeval.io.columns import RunColumns

    def columns(name, frame, kind):
        return RunColumns(
            name,
            f"<run {name}>",
            pa.array(frame["query_id"].tolist(), kind),
            pa.array(frame["doc_id"].tolist(), kind),
            frame["score"].to_numpy(dtype=float),
        )

    measures = ["AP", "NumRel", "TSE", "ASL"]
    small = [columns(name, run, pa.string()) for name, run in RUNS.items()]
    mixed = [columns(name, run, pa.large_string()) for name, run in RUNS.items()][:2] + small[2:]
    expected = values(compute_metrics(QRELS, small, measures, max_docs=2))
    assert values(compute_metrics(QRELS, mixed, measures, max_docs=2)) == expected


def test_tie_orders_of_trec_eval_and_ndeval_measures():
    # a (relevant to both subtopics) and z (judged non-relevant) tie on score
    qrels = pd.DataFrame(
        [("1", 1, "a", 1), ("1", 2, "a", 1), ("1", 1, "z", 0), ("1", 2, "z", 0)],
        columns=["query_id", "iteration", "doc_id", "relevance"],
    )
    run = run_frame([("1", "a", 1.0), ("1", "z", 1.0)])
    got = values(compute_metrics(qrels, {"r": run}, ["RR", "P@1", "ASL", "P_IA@1"]))
    assert got[("RR", "r", "1")] == 0.5  # trec_eval: docno descending, z before a
    assert got[("P@1", "r", "1")] == 0.0
    assert got[("ASL", "r", "1")] == 2.0  # prefeval's own order: the same
    assert got[("P_IA@1", "r", "1")] == 1.0  # pyndeval: docno ascending, a first
    # the max_docs cut is made in trec order: only z is left, for every measure
    got = values(compute_metrics(qrels, {"r": run}, ["RR", "P_IA@1"], max_docs=1))
    assert got[("RR", "r", "1")] == 0.0
    assert got[("P_IA@1", "r", "1")] == 0.0


# --------------------------------------------------------------------------- all-negative queries

_NEGATIVE_SCRIPT = r"""
import json, sys
import pandas as pd
from prefeval.analysis.baselines import compute_metrics
from prefeval.io.runs import read_qrels
qrels = read_qrels(sys.argv[1])
names = json.loads(sys.argv[2])
run = pd.DataFrame(
    [("7", "d1", 2.0), ("7", "bD", 2.0), ("7", "d4", 1.0),
     ("abc", "bD", 3.0), ("abc", "d1", 2.0), ("abc", "d4", 2.0), ("abc", "DyQ", 1.0)],
    columns=["query_id", "doc_id", "score"],
)
seven = run["query_id"] == "7"
# s before t: pytrec_eval evaluates abc after another query's evaluation (the hang)
runs = {"s": run[seven], "t": run[~seven], "r": run}
got = {}
# one measure at a time: next to a judged_only measure, ir-measures may evaluate NumRet
# in that measure's pytrec_eval invocation, which counts judged documents only
for name in names:
    table = compute_metrics(qrels, runs, [name], query_ids=["7", "abc"])
    got.update({f"{m} {r} {q}": v for m, r, q, v in table.itertuples(index=False)})
print(json.dumps(got))
"""


#: seconds after which a process evaluating two tiny runs is taken to hang: generous, as
#: importing ir-measures on a loaded machine running the suite in parallel takes a while
HANG_SECONDS = 300


def test_query_with_only_negative_grades_never_hangs_trec_eval(tmp_path):
    """Query abc is judged with grade -1 only: trec_eval's form_res_rels.c then keeps the
    previous query's num_rel_levels, and pytrec_eval's ndcg looped for ever (SIGTERM does
    not stop it: the C loop never returns to Python, hence a subprocess killed at the
    timeout).  Every measure has its num_rel = 0 value there, the other query its own."""
    import json
    import subprocess
    import sys

    qrels = write_qrels(
        tmp_path / "qrels", [("7", 0, "d4", 2), ("7", 0, "bD", 1), ("abc", 0, "DyQ", -1)]
    )
    names = ["AP", "nDCG", "nDCG@10", "P@2", "RR", "NumRet", "NumQ", "IPrec(judged_only=True)@0.0"]
    result = subprocess.run(
        [sys.executable, "-c", _NEGATIVE_SCRIPT, str(qrels), json.dumps(names)],
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
        env={**os.environ, "PREFEVAL_CACHE": "0"},
    )
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout)
    # query 7 in trec order: d1, bD (tied at 2.0: docno descending), d4
    ndcg = (1 / math.log2(3) + 2 / 2) / (2 + 1 / math.log2(3))
    for run in ("r", "s"):
        assert got[f"AP {run} 7"] == pytest.approx((1 / 2 + 2 / 3) / 2)
        assert got[f"nDCG {run} 7"] == pytest.approx(ndcg)
        assert got[f"nDCG@10 {run} 7"] == pytest.approx(ndcg)
        assert got[f"P@2 {run} 7"] == 0.5
        assert got[f"RR {run} 7"] == 0.5
        assert got[f"NumRet {run} 7"] == 3.0
        assert got[f"IPrec(judged_only=True)@0.0 {run} 7"] == 1.0
    for name in names:
        want = {"NumRet": 4.0, "NumQ": 1.0}.get(name, 0.0)
        if name.startswith("IPrec"):
            # DyQ (-1) is dropped, no judged document is left; nor in run s's empty
            # ranking (the added judgment is not trec_eval -c's bogus document)
            for run in ("r", "s", "t"):
                assert math.isnan(got[f"{name} {run} abc"])
            assert math.isnan(got[f"{name} t 7"])
            continue
        assert got[f"{name} r abc"] == got[f"{name} t abc"] == want, name
        # runs that did not answer a query: the empty ranking's values (trec_eval -c)
        assert got[f"{name} s abc"] == got[f"{name} t 7"] == {"NumQ": 1.0}.get(name, 0.0), name
    # the metrics command (the hang's first sighting): its summary averages every judged
    # query, abc included
    seven = write_run(tmp_path / "seven", [("7", "d1", 2.0), ("7", "bD", 2.0), ("7", "d4", 1.0)])
    abc = write_run(tmp_path / "abc", [("abc", "d1", 1.0)])
    command = ["metrics", "-m", "AP,nDCG,NumRet", str(qrels), str(seven), str(abc)]
    result = subprocess.run(
        [sys.executable, "-m", "prefeval", *command],
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
        env={**os.environ, "PREFEVAL_CACHE": "0"},
    )
    assert result.returncode == 0, result.stderr
    rows = {
        tuple(line.split("\t")[:2]): float(line.split("\t")[3])
        for line in result.stdout.splitlines()[1:]
    }
    assert rows == pytest.approx(
        {
            ("AP", "seven"): (1 / 2 + 2 / 3) / 4,
            ("AP", "abc"): 0.0,
            ("nDCG", "seven"): ndcg / 2,
            ("nDCG", "abc"): 0.0,
            ("NumRet", "seven"): 3.0,
            ("NumRet", "abc"): 1.0,
        }
    )


def test_negative_query_with_a_gain_for_grade_0_is_refused():
    # the judgment that keeps trec_eval off max_rel < 0 has grade 0: a gains map that
    # gives grade 0 a gain would count it, so the combination is refused, not guessed
    qrels = pd.DataFrame(
        [("1", "a", 1), ("2", "b", -1)], columns=["query_id", "doc_id", "relevance"]
    )
    run = run_frame([("1", "a", 1.0), ("2", "b", 1.0)])
    with pytest.raises(ValueError, match="no judgment with a grade >= 0"):
        compute_metrics(qrels, {"r": run}, ["nDCG(gains={0:1,1:2})"], query_ids=["1", "2"])
    got = values(compute_metrics(qrels, {"r": run}, ["nDCG(gains={1:2})"], query_ids=["1", "2"]))
    assert got[("nDCG(gains={1:2})", "r", "1")] == 1.0
    assert got[("nDCG(gains={1:2})", "r", "2")] == 0.0


JUDGED_ONLY = "NumRet,P(judged_only=True)@5,P@5"


def _alone(args) -> list[str]:
    """The rows of NumRet, P(judged_only=True)@5 and P@5, each measure evaluated alone."""
    return [
        invoke("metrics", "-m", m, *args).stdout.splitlines()[1] for m in JUDGED_ONLY.split(",")
    ]


def test_judged_only_measures_do_not_change_the_others():
    """ir-measures puts NumRet (and the other measures without judged_only) into whichever
    pytrec_eval call it makes first: in one evaluator with P(judged_only=True)@5, NumRet
    counted the judged documents only, or all of them, by the hash seed (275 or 1000 on
    sample_data's sys01).  Together they give the values each measure has alone."""
    args = [SAMPLE / "qrels.txt", SAMPLE / "runs" / "input.sys01"]
    alone = _alone(args)
    assert alone[0].endswith("\t1000")
    assert invoke("metrics", "-m", JUDGED_ONLY, *args).stdout.splitlines()[1:] == alone


def test_judged_only_measures_do_not_change_the_others_whatever_the_hash_seed():
    """The same in a process of each of six hash seeds (the order of ir-measures' calls
    follows the seed)."""
    import subprocess
    import sys

    args = [SAMPLE / "qrels.txt", SAMPLE / "runs" / "input.sys01"]
    alone = dict(zip(JUDGED_ONLY.split(","), _alone(args)))
    for seed in ("1", "2", "3", "4", "5", "6"):
        proc = subprocess.run(
            [sys.executable, "-m", "prefeval", "metrics", "-m", JUDGED_ONLY, *map(str, args)],
            capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": seed},
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.splitlines()[1:] == [
            alone["NumRet"],
            alone["P(judged_only=True)@5"],
            alone["P@5"],
        ], seed


# --------------------------------------------------------------------------- gm_map


def test_gm_map_hand_worked():
    """trec_eval's gm_map (m_gm_map.c): per query log(max(AP, MIN_GEO_MEAN = 1e-5)), the
    summary exp of their mean over every judged query (te_calc_avg_meas_s_gm with -c).

    AP on the tiny collection: A q1 (d1 at 1, d2 at 3; d4 missed) (1 + 2/3) / 3 = 5/9,
    q2 unanswered 0; B q1 (d4, d1, d2 at 2, 3, 4) (1/2 + 2/3 + 3/4) / 3 = 23/36, q2 (e1
    at 2) 1/2; C q1 (d2 at 1) 1/3, q2 0; query 3 (judged, nothing relevant) 0 for all."""
    floor = math.log(1e-5)
    aps = {"A": [5 / 9, 0.0, 0.0], "B": [23 / 36, 1 / 2, 0.0], "C": [1 / 3, 0.0, 0.0]}
    got = values(compute_metrics(QRELS, RUNS, ["gm_map", "AP"]))
    for run, (q1, q2, _) in aps.items():
        assert got[("AP", run, "1")] == pytest.approx(q1, abs=1e-15)
        assert got[("gm_map", run, "1")] == pytest.approx(math.log(q1), abs=1e-15)
        assert got[("gm_map", run, "2")] == (math.log(q2) if q2 else floor)
    table = metrics_rows(read_qrels(QRELS), RUNS, ["gm_map"], Options(per_query=True))
    summary = {r: v for r, q, v in table[["run", "query_id", "value"]].to_numpy() if q == "all"}
    want = {r: math.exp(sum(math.log(max(a, 1e-5)) for a in v) / 3) for r, v in aps.items()}
    assert summary == pytest.approx(want, rel=1e-14)
    assert summary["B"] == pytest.approx((23 / 36 * 1 / 2 * 1e-5) ** (1 / 3), rel=1e-14)
    assert parse_baseline("gm_map").name == "gm_map" and higher_is_better("gm_map")
    assert [b.name for b in parse_baselines("map gm_map")] == ["AP", "gm_map"]
    assert "gm_map" in [b.name for b in parse_baselines("official")]  # trec_eval's set


def test_gm_map_follows_the_relevance_level():
    """At -l 2 only d1 (grade 2) is relevant in query 1: gm_map is AP(rel=2)'s."""
    got = values(compute_metrics(QRELS, RUNS, ["gm_map", "AP"], relevance_level=2))
    assert got[("AP", "A", "1")] == 1.0 and got[("gm_map", "A", "1")] == 0.0
    assert got[("gm_map", "B", "1")] == pytest.approx(math.log(1 / 3), abs=1e-15)


# ------------------------------------------------------------- large runs, by partition

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"


def _tiny():
    """Every run file "large": spilled in pieces of a few rows, 7 partitions of queries."""
    from prefeval.io.spill import Streaming

    return Streaming(
        above=0, piece_rows=7, piece_bytes=200, part_rows=50, max_parts=7, max_evaluated_parts=7
    )


PARTITIONED_CASES = {
    "text runs, natives, -M": (
        "qrels.txt",
        "text",
        ["AP", "nDCG@10", "TSE", "ASL", "gm_map", "NumRel", "NumRet", "IPrec@0.5"],
        {"max_docs": 7},
    ),
    "subtopic qrels, -l 2": (
        "qrels.subtopics.txt",
        "text",
        ["ERR_IA@20", "alpha_nDCG@20", "AP", "ASL"],
        {"relevance_level": 2},
    ),
    "many-run table": ("qrels.txt", "table", ["AP", "RR", "TSE", "NumQ"], {}),
    "Parquet and gzip files, shuffled rows": ("qrels.txt", "files", ["AP", "nDCG", "ASL"], {}),
    "some runs of a table": ("qrels.txt", "table-subset", ["AP", "ASL"], {}),
}


def _sample_runs(layout: str, folder: Path | None = None):
    import gzip

    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from prefeval.io.runs import resolve_runs

    if layout == "files":  # one Parquet file per run, or gzip text, rows shuffled
        table = pq.read_table(SAMPLE / "runs.parquet")
        paths = []
        for k, name in enumerate(sorted(set(table.column("run").to_pylist()))):
            rows = table.filter(pc.equal(table.column("run"), name)).drop_columns(["run"])
            rows = rows.take(np.random.default_rng(k).permutation(len(rows)))
            if k % 2:
                path = folder / f"{name}.parquet"
                pq.write_table(rows, path, row_group_size=50)
            else:
                path = folder / f"{name}.gz"
                lines = [
                    f"{q} Q0 {d} {j + 1} {s!r} t\n"
                    for j, (q, d, s) in enumerate(zip(*(c.to_pylist() for c in rows.columns)))
                ]
                path.write_bytes(gzip.compress("".join(lines).encode()))
            paths.append(str(path))
        return paths
    if layout == "text":
        return sorted(str(p) for p in (SAMPLE / "runs").iterdir())
    table = resolve_runs(str(SAMPLE / "runs.parquet"))
    names = list(table)
    return table.subset(names[::-3]) if layout == "table-subset" else table


@pytest.mark.parametrize("case", list(PARTITIONED_CASES))
def test_large_runs_are_evaluated_by_partition_to_the_same_values(case, monkeypatch, tmp_path):
    """Runs above the streaming size are spilled by query and evaluated a partition of
    the queries at a time, each by evaluators of its own judgments: every value, every
    row and every notice is the one of the runs read whole."""
    import prefeval.analysis.baselines as baselines

    qrels, layout, measures, kw = PARTITIONED_CASES[case]
    qrels = str(SAMPLE / qrels)
    told_whole, told_parts = [], []
    runs = _sample_runs(layout, tmp_path)
    whole = compute_metrics(qrels, runs, measures, notify=told_whole.append, **kw)
    sizes = []
    real_input = baselines.evaluate.run_input

    def sized(ranking, query_ids, intent_aware):
        sizes.append(len(set(np.asarray(ranking.q).tolist())))
        return real_input(ranking, query_ids, intent_aware)

    monkeypatch.setattr(baselines.evaluate, "STREAMING", _tiny())
    monkeypatch.setattr(baselines.evaluate, "run_input", sized)
    parts = compute_metrics(qrels, runs, measures, notify=told_parts.append, **kw)
    pd.testing.assert_frame_equal(parts, whole)
    assert told_parts == told_whole
    evaluated = whole["query_id"].nunique()
    # the rankings handed to ir-measures each hold some of the queries only
    assert sizes and max(sizes) < evaluated / 2


def test_a_run_without_rows_in_a_partition_answered_none_of_its_queries(tmp_path, monkeypatch):
    import prefeval.analysis.baselines as baselines

    qrels = write_qrels(tmp_path / "qrels", [(f"q{k}", 0, f"d{k}", 1) for k in range(40)])
    full = write_run(
        tmp_path / "full", [(f"q{k}", f"d{j}", 10 - j) for k in range(40) for j in range(5)]
    )
    one = write_run(tmp_path / "one", [("q3", "d3", 1.0), ("q3", "d9", 0.5)])
    measures = ["AP", "NumQ", "NumRet", "RR", "ASL"]
    told_whole, told_parts = [], []
    whole = compute_metrics(qrels, [full, one], measures, notify=told_whole.append)
    monkeypatch.setattr(baselines.evaluate, "STREAMING", _tiny())
    parts = compute_metrics(qrels, [full, one], measures, notify=told_parts.append)
    pd.testing.assert_frame_equal(parts, whole)
    assert told_parts == told_whole and len(told_whole) == 1


def test_a_flaw_of_a_large_run_is_told_where_the_whole_read_tells_it(tmp_path, monkeypatch):
    import prefeval.analysis.baselines as baselines

    qrels = write_qrels(tmp_path / "qrels", [(f"q{k}", 0, f"d{k}", 1) for k in range(30)])
    lines = [(f"q{k}", f"d{j}", 10 - j) for k in range(30) for j in range(5)]
    good = write_run(tmp_path / "good", lines)
    bad = write_run(tmp_path / "bad", [*lines, lines[3]])  # a document twice for q0
    with pytest.raises(InputError) as whole:
        compute_metrics(qrels, [good, bad], ["AP"])
    monkeypatch.setattr(baselines.evaluate, "STREAMING", _tiny())
    with pytest.raises(InputError) as parts:
        compute_metrics(qrels, [good, bad], ["AP"])
    assert str(parts.value) == str(whole.value) and ":151:" in str(whole.value)


def test_no_room_for_temporary_files_evaluates_runs_whole(monkeypatch, tmp_path):
    import tempfile

    import prefeval.analysis.baselines as baselines

    qrels, runs = str(SAMPLE / "qrels.txt"), _sample_runs("text")
    whole = compute_metrics(qrels, runs, ["AP", "TSE", "NumRel"])
    monkeypatch.setattr(baselines.evaluate, "STREAMING", _tiny())
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing"))
    told: list[str] = []
    got = compute_metrics(qrels, runs, ["AP", "TSE", "NumRel"], notify=told.append)
    pd.testing.assert_frame_equal(got, whole)
    assert told[0] == (
        f"cannot write temporary files in {tmp_path / 'missing'} (No such file or directory): "
        f"{len(runs)} run files read whole, in more memory; set TMPDIR to a folder with room"
    )
    assert told[1:] == ["run sys04: no results for 1 of 20 evaluated queries; evaluated as "
                        "retrieving nothing"]  # fmt: skip


def test_metric_matrices_are_the_table_read_back():
    """``order`` and ``discpower`` take the baselines as matrices, never as the table of
    rows: the same numbers as reading the table back, and its errors."""
    from prefeval.analysis.baselines import metric_matrices
    from prefeval.io.tables import metrics_from_table

    qrels, runs = str(SAMPLE / "qrels.txt"), _sample_runs("text")
    names = [run_name(r) for r in runs][::-1]
    queries = sorted(read_qrels(qrels).relevant(None).query_ids)[::-1]
    runs = runs[::-1]
    measures = ["AP", "ASL", "gm_map"]
    table = compute_metrics(qrels, runs, measures, query_ids=queries)
    want = metrics_from_table(table, names, queries, "<metrics>")
    got = metric_matrices(qrels, runs, measures, query_ids=queries)
    assert list(got) == list(want)
    for name in want:
        assert got[name].flags.c_contiguous
        np.testing.assert_array_equal(got[name], want[name])
    # ASL is NaN on a query without a relevant document at the level
    judged = list(read_qrels(qrels).query_ids())
    assert len(read_qrels(qrels).relevant(3).query_ids) < len(judged)
    table = compute_metrics(qrels, runs, ["ASL"], query_ids=judged, relevance_level=3)
    with pytest.raises(InputError) as told:
        metrics_from_table(table, names, judged, "<metrics>")
    with pytest.raises(InputError) as again:
        metric_matrices(qrels, runs, ["ASL"], query_ids=judged, relevance_level=3)
    assert str(again.value) == str(told.value)
