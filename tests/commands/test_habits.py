"""CLI habits of trec_eval and ir_measures users: metrics -m in every
syntax with summary rows and -q/-n, -p/--precision, --against, compare
--both-directions, and the pairs table (wins, ties, losses, t interval)."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import ir_measures
import numpy as np
import pandas as pd
import pytest
from helpers import invoke, read_tsv, write_qrels, write_run
from scipy import stats

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
QRELS = SAMPLE / "qrels.txt"
RUNS = [SAMPLE / "runs" / f"input.sys0{i}" for i in (1, 2, 3)]
ALL_RUNS = sorted((SAMPLE / "runs").glob("input.*"))


def ok(result) -> str:
    assert result.exit_code == 0, (result.exit_code, result.stderr)
    assert "Traceback" not in result.stderr
    return result.stdout


def usage_error(result, *words) -> None:
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    for word in words:
        assert word in result.stderr, result.stderr


def irm_per_query(measures, runs=RUNS):
    """(measure name, run, query) -> value, computed by ir-measures itself."""
    qrels = list(ir_measures.read_trec_qrels(str(QRELS)))
    out = {}
    for path in runs:
        name = path.name.removeprefix("input.")
        run = list(ir_measures.read_trec_run(str(path)))
        for m in ir_measures.iter_calc(measures, qrels, run):
            out[(str(m.measure), name, m.query_id)] = m.value
    return out


# --------------------------------------------------------------------------- 1. -m syntaxes


def test_metrics_takes_every_measure_syntax():
    """ir-measures strings, blank- and comma-separated lists and trec_eval names, by -m or
    its alias -B; canonical ir-measures names in the measure column, map and AP once."""
    args = ["-m", "map", "-m", "ndcg_cut_10 P_10", "-B", "recip_rank,Rprec", "-m", "AP"]
    table = read_tsv(ok(invoke("metrics", "-q", "-n", *args, "-m", "recall_1000", QRELS, *RUNS)))
    names = ["AP", "nDCG@10", "P@10", "RR", "Rprec", "R@1000"]
    assert list(dict.fromkeys(table["measure"])) == names
    want = irm_per_query([ir_measures.parse_measure(n) for n in names])
    got = {(m, r, q): float(v) for m, r, q, v in table.to_numpy()}
    assert len(got) == len(want) == 6 * 3 * 20
    for key, value in want.items():
        assert got[key] == pytest.approx(value, abs=1e-12), key


def test_baseline_alias_and_analysis_commands_parse_the_same_way():
    same = ok(invoke("metrics", "-B", "AP,nDCG@10", QRELS, *RUNS))
    assert same == ok(invoke("metrics", "-m", "map", "-m", "ndcg_cut.10", QRELS, *RUNS))
    table = read_tsv(
        ok(invoke("agree", "-m", "rpp", "-B", "map ndcg_cut_10", "-B", "AP", QRELS, *RUNS))
    )
    assert list(table["baseline"]) == ["AP", "nDCG@10"]


@pytest.mark.parametrize("command", ["metrics", "pairs"])
def test_unknown_measure_is_a_usage_error_naming_it(command):
    usage_error(invoke(command, "-B", "AP,ndcg_cutt_10", QRELS, *RUNS), "'ndcg_cutt_10'")


PREFERENCE_MEASURES = (
    "rpp, dcgrpp, invrpp, strpp, stdcgrpp, stinvrpp, lexirecall, lexiprecision, rrlexiprecision"
)


@pytest.mark.parametrize("metric", ["AP", "nDCG@10", "AP(rel=2)", "map", "ndcg_cut_10", "TSE"])
@pytest.mark.parametrize("command", ["order", "pairs", "tau", "discpower"])
def test_a_metric_given_as_preference_measure_points_to_baselines(command, metric):
    """-m AP: one usage line naming the preference measures and -B, exit status 2."""
    result = invoke(command, "-m", f"rpp,{metric}", QRELS, *RUNS)
    usage_error(
        result,
        f"'{metric}' is a baseline metric, not a preference measure ({PREFERENCE_MEASURES}): "
        "give it with -B/--baseline",
    )
    assert "KeyError" not in result.stderr


@pytest.mark.parametrize("command", ["compare", "explain"])
def test_a_metric_given_to_compare_points_to_metrics(command):
    usage_error(
        invoke(command, "-m", "nDCG@10", QRELS, *RUNS[:2]),
        "'nDCG@10' is a baseline metric, not a preference measure",
        "compute it with metrics",
    )


def test_a_misspelt_preference_measure_is_still_unknown():
    usage_error(invoke("order", "-m", "rppp", QRELS, *RUNS), "unknown measure 'rppp'")


@pytest.mark.parametrize("measure", [ir_measures.AP, "AP", ir_measures.nDCG @ 10, [ir_measures.AP]])
def test_api_metric_as_preference_measure_is_a_value_error(measure):
    """measures=AP (the object or its name, alone or in a list): a ValueError naming
    baselines=, not a KeyError from inside ir-measures."""
    import prefeval

    name = str(measure[0] if isinstance(measure, list) else measure)
    with pytest.raises(ValueError) as caught:
        prefeval.order(str(QRELS), [str(r) for r in RUNS], measures=measure)
    assert str(caught.value) == (
        f"measures={name!r} is a baseline metric, not a preference measure "
        f"({PREFERENCE_MEASURES}): give it with baselines="
    )


def _piped(args, data: bytes):
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-m", "prefeval", *map(str, args)],
        input=data,
        capture_output=True,
        env={**__import__("os").environ, "PREFEVAL_CACHE": "0"},
    )


def test_prefs_and_metrics_read_from_standard_input(tmp_path):
    """--prefs - and --metrics - read the table piped in, as /dev/stdin does; '-' for
    two inputs is refused."""
    prefs, metrics = tmp_path / "prefs.tsv", tmp_path / "metrics.tsv"
    ok(invoke("compare", "-q", "-m", "rpp,lexirecall", "-o", prefs, QRELS, *RUNS))
    ok(invoke("metrics", "-q", "-m", "AP", "-o", metrics, QRELS, *RUNS))
    expected = ok(invoke("order", "--prefs", prefs, "--metrics", metrics))
    for args, data in (
        (["--prefs", "-", "--metrics", metrics], prefs.read_bytes()),
        (["--prefs", prefs, "--metrics", "-"], metrics.read_bytes()),
    ):
        proc = _piped(["order", *args], data)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.decode() == expected
    proc = _piped(["order", "--prefs", "-", "--metrics", "-"], prefs.read_bytes())
    assert proc.returncode == 2
    assert (
        proc.stderr.decode()
        .strip()
        .endswith("Error: '-' (standard input) may be given for one input only")
    )


# --------------------------------------------------------------------------- 2. summary rows


def test_metrics_summary_rows_as_trec_eval():
    """Without -q only `all` rows; -q per-query rows then `all`; the summary is the mean,
    the sum for ir-measures' count measures (as ir_measures.calc_aggregate and trec_eval)."""
    names = ["AP", "NumQ", "NumRel", "NumRelRet", "P@5"]
    full = read_tsv(ok(invoke("metrics", "-q", "-m", ",".join(names), QRELS, *RUNS)))
    summary = read_tsv(ok(invoke("metrics", "-m", ",".join(names), QRELS, *RUNS)))
    per_query = full[full["query_id"] != "all"]
    assert (summary["query_id"] == "all").all() and len(summary) == len(names) * len(RUNS)
    # -q: every per-query row first, then exactly the summary rows
    assert full.iloc[len(per_query) :].reset_index(drop=True).equals(summary)
    qrels = list(ir_measures.read_trec_qrels(str(QRELS)))
    for path in RUNS:
        run = list(ir_measures.read_trec_run(str(path)))
        want = ir_measures.calc_aggregate([ir_measures.parse_measure(n) for n in names], qrels, run)
        rows = summary[summary["run"] == path.name.removeprefix("input.")]
        got = dict(zip(rows["measure"], rows["value"].astype(float)))
        # NumRelRet (ir-measures' NumRet(rel=1)) keeps its name: its rel follows -l
        want = {str(k).replace("NumRet(rel=1)", "NumRelRet"): v for k, v in want.items()}
        assert got == pytest.approx(want, abs=1e-12)
    # a count is written as an integer, in every format
    assert set(summary.loc[summary["measure"] == "NumQ", "value"]) == {"20"}


def test_metrics_no_summary_needs_per_query():
    usage_error(invoke("metrics", "-n", QRELS, *RUNS), "-n/--no-summary without -q")
    table = read_tsv(ok(invoke("metrics", "-q", "-n", "-m", "AP", QRELS, *RUNS)))
    assert "all" not in set(table["query_id"]) and len(table) == 60


def test_summary_only_metrics_table_is_refused(tmp_path):
    table = tmp_path / "metrics.tsv"
    ok(invoke("metrics", "-m", "AP", "-o", table, QRELS, *RUNS))
    prefs = tmp_path / "prefs.tsv"
    ok(invoke("compare", "-q", "-m", "rpp", "-o", prefs, QRELS, *RUNS))
    for args in (["--prefs", prefs], ["-m", "rpp", QRELS, *RUNS]):
        result = invoke("agree", "--metrics", table, *args)
        assert result.exit_code == 2 and result.stdout == ""
        assert f"{table}: no per-query rows" in result.stderr and "metrics -q" in result.stderr


def test_metrics_summary_averages_every_judged_query(tmp_path):
    """As trec_eval -c: the summary counts every judged query, also one with no relevant
    document at -l (its AP is 0, its NumQ 1); the per-query rows are the queries prefeval
    evaluates.  Run b has no line for query 2: the empty ranking's values."""
    qrels = write_qrels(
        tmp_path / "qrels", [(1, 0, "a", 2), (1, 0, "b", 1), (2, 0, "c", 1), (3, 0, "d", 0)]
    )
    run_a = write_run(tmp_path / "a", [(1, "b", 2.0), (1, "a", 1.0), (2, "c", 1.0), (3, "d", 1.0)])
    run_b = write_run(tmp_path / "b", [(1, "a", 1.0)])
    names = "AP,P@1,NumQ,NumRel,num_rel_ret,NumRet"

    def summary(level):
        result = invoke("metrics", "-q", "-l", level, "-m", names, qrels, run_a, run_b)
        table = read_tsv(ok(result))
        rows = {(m, r, q): float(v) for m, r, q, v in table.to_numpy()}
        return rows, result.stderr

    rows, notice = summary(2)
    assert {q for _, _, q in rows} == {"1", "all"}  # only query 1 has a grade >= 2
    assert "2 of 3 queries" in notice and "no per-query rows" in notice
    assert rows[("AP", "a", "1")] == 0.5 and rows[("AP", "b", "1")] == 1.0
    want = {  # (run a, run b) over the 3 judged queries
        "AP": (0.5 / 3, 1 / 3),
        "P@1": (0.0, 1 / 3),
        "NumQ": (3.0, 3.0),
        "NumRel": (1.0, 1.0),  # a
        "NumRelRet": (1.0, 1.0),  # a, not b (grade 1)
        "NumRet": (4.0, 1.0),
    }
    for measure, (a, b) in want.items():
        assert rows[(measure, "a", "all")] == pytest.approx(a, abs=1e-15), measure
        assert rows[(measure, "b", "all")] == pytest.approx(b, abs=1e-15), measure

    rows, notice = summary(1)  # query 3 (only a grade 0) still counts
    assert {q for _, _, q in rows} == {"1", "2", "all"}
    assert rows[("AP", "a", "all")] == pytest.approx((1 + 1 + 0) / 3)
    assert rows[("AP", "b", "all")] == pytest.approx((0.5 + 0 + 0) / 3)
    assert rows[("NumRel", "a", "all")] == 3.0 and rows[("NumRelRet", "a", "all")] == 3.0

    rows, notice = summary(3)  # no relevant document at all: trec_eval's zeros
    assert {q for _, _, q in rows} == {"all"}
    assert "no query in" in notice
    assert rows[("AP", "a", "all")] == 0.0 and rows[("NumQ", "a", "all")] == 3.0


def test_metrics_summary_of_tse_and_asl_averages_where_defined(tmp_path):
    """TSE and ASL are undefined without a relevant document: their summary is the mean
    over the queries with one (not trec_eval -c's mean over every judged query, which
    AP's summary is), the notice says so, and with no such query it is an undefined
    mean (an empty field), as the README says."""
    qrels = write_qrels(
        tmp_path / "qrels", [(1, 0, "a", 2), (1, 0, "b", 1), (2, 0, "c", 1), (3, 0, "d", 0)]
    )
    run_a = write_run(tmp_path / "a", [(1, "b", 2.0), (1, "a", 1.0), (2, "c", 1.0), (3, "d", 1.0)])
    run_b = write_run(tmp_path / "b", [(1, "a", 1.0)])

    def summary(level):
        result = invoke("metrics", "-q", "-l", level, "-m", "AP,TSE,ASL", qrels, run_a, run_b)
        return read_tsv(ok(result)), result.stderr

    table, notice = summary(2)  # only query 1 (document a) has a grade >= 2
    rows = {(m, r, q): float(v) for m, r, q, v in table.to_numpy()}
    assert rows[("TSE", "a", "all")] == rows[("TSE", "a", "1")] == pytest.approx(1 / math.log2(3))
    assert rows[("TSE", "b", "all")] == rows[("TSE", "b", "1")] == 1.0
    assert rows[("ASL", "a", "all")] == 2.0 and rows[("ASL", "b", "all")] == 1.0
    assert rows[("AP", "a", "all")] == pytest.approx(0.5 / 3)  # every judged query
    assert "2 of 3 queries" in notice
    assert "as trec_eval -c, except those of TSE, ASL, undefined there" in notice
    assert "which average the other queries" in notice
    table, notice = summary(3)  # no relevant document anywhere: undefined means
    last = table[table["query_id"] == "all"].set_index(["measure", "run"])["value"]
    assert last[("TSE", "a")] == last[("ASL", "b")] == ""
    assert last[("AP", "a")] == "0.0"


def test_metrics_summaries_equal_pytrec_eval_at_every_level(web2012):
    """On web2012 at -l 1, 2, 3 (2 of the 50 queries have no grade >= 2): each summary is
    the mean (the sum for counts, the geometric mean for gm_map) of pytrec_eval's
    per-query values over every judged query, averaged here independently; the per-query
    rows are pytrec_eval's values of the queries with a relevant document."""
    import gzip

    import pytrec_eval

    qrels_path = web2012 / "qrels.adhoc.txt.gz"
    runs = sorted((web2012 / "runs").glob("*.run.gz"))[:4]
    judged: dict = {}
    with gzip.open(qrels_path, "rt") as lines:
        for q, _, d, g in map(str.split, lines):
            judged.setdefault(q, {})[d] = int(g)
    rankings = []
    for path in runs:
        ranking: dict = {}
        with gzip.open(path, "rt") as lines:
            for q, _, d, _, score, *_ in map(str.split, lines):
                ranking.setdefault(q, {})[d] = float(score)
        assert set(ranking) == set(judged)  # every run answers every judged query
        rankings.append(ranking)
    trec = {
        "map": "AP",
        "P_10": "P@10",
        "ndcg_cut_10": "nDCG@10",
        "recip_rank": "RR",
        "Rprec": "Rprec",
        "bpref": "Bpref",
        "num_q": "NumQ",
        "num_ret": "NumRet",
        "num_rel": "NumRel",
        "num_rel_ret": "NumRelRet",
        "gm_map": "gm_map",
    }
    counts = {"num_q", "num_ret", "num_rel", "num_rel_ret"}
    for level in (1, 2, 3):
        out = ok(invoke("metrics", "-q", "-l", level, "-m", ",".join(trec), qrels_path, *runs))
        table = read_tsv(out)
        got = {(m, r, q): float(v) for m, r, q, v in table.to_numpy()}
        names = list(dict.fromkeys(table["run"]))
        relevant = {q for q, docs in judged.items() if max(docs.values()) >= level}
        assert len(relevant) == (50 if level == 1 else 48)
        assert {q for _, _, q in got} == relevant | {"all"}
        evaluator = pytrec_eval.RelevanceEvaluator(judged, set(trec), relevance_level=level)
        for name, ranking in zip(names, rankings):
            per_query = evaluator.evaluate(ranking)
            for key, measure in trec.items():
                column = [per_query[q][key] for q in judged]
                want = sum(column) if key in counts else sum(column) / len(judged)
                if key == "gm_map":  # its per-query values are logarithms
                    want = pytrec_eval.compute_aggregated_measure(key, column)
                assert got[(measure, name, "all")] == pytest.approx(want, rel=1e-12, abs=1e-15)
                for q in relevant:
                    assert got[(measure, name, q)] == pytest.approx(per_query[q][key], abs=1e-12)
            if level > 1:  # the queries with no relevant document count: a smaller mean
                mean48 = sum(per_query[q]["map"] for q in relevant) / len(relevant)
                assert got[("AP", name, "all")] < mean48


# --------------------------------------------------------------------------- 3. precision


def test_precision_rounds_every_float_as_printf():
    full = read_tsv(ok(invoke("compare", "-q", "-m", "rpp,dcgrpp", QRELS, *RUNS)))
    short = read_tsv(ok(invoke("compare", "-q", "-p", "3", "-m", "rpp,dcgrpp", QRELS, *RUNS)))
    want = [f"{float(v):.3f}".replace("-0.000", "0.000") for v in full["value"]]
    assert list(short["value"]) == want
    assert "-0.000" not in set(short["value"])
    ranks = read_tsv(ok(invoke("order", "-p", "2", "-B", "AP", "-m", "rpp", QRELS, *RUNS)))
    assert set(ranks["rank"]) <= {"1", "2", "3"}  # integers as they are
    assert all(len(s.split(".")[1]) == 2 for s in ranks["score"])
    power = read_tsv(
        ok(
            invoke(
                "discpower",
                "-p",
                "0",
                "--test",
                "ttest",
                "-m",
                "rpp",
                "--no-baselines",
                QRELS,
                *RUNS,
            )
        )
    )
    assert list(power["alpha"]) == ["0.05"]  # a parameter, never rounded
    assert power["percent"].iloc[0] in {"0", "33", "67", "100"}


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_precision_in_every_format(fmt):
    text = ok(invoke("metrics", "-p", "4", "-f", fmt, "-m", "AP", QRELS, *RUNS))
    full = read_tsv(ok(invoke("metrics", "-m", "AP", QRELS, *RUNS)))
    want = [f"{float(v):.4f}" for v in full["value"]]
    if fmt == "jsonl":
        lines = text.splitlines()
        assert [line.rsplit(": ", 1)[1][:-1] for line in lines] == want
        assert [json.loads(line)["value"] for line in lines] == [float(w) for w in want]
    else:
        assert [line.rsplit(",", 1)[1] for line in text.splitlines()[1:]] == want


def test_precision_never_writes_negative_zero():
    from prefeval.io.writers import iter_chunks

    frame = pd.DataFrame({"x": [-1e-9, -0.0, 0.004, -0.006, 2.5, -2.5, math.nan, -math.inf]})
    text = b"".join(iter_chunks(frame, "tsv", precision=2)).decode()
    assert text.split("\n")[1:-1] == ["0.00", "0.00", "0.00", "-0.01", "2.50", "-2.50", "", "-inf"]
    usage_error(invoke("compare", "-p", "18", QRELS, *RUNS), "--precision")
    # default: full precision, the shortest round-trip form
    values = read_tsv(ok(invoke("compare", "-m", "dcgrpp", QRELS, *RUNS)))["value"]
    assert all(repr(float(v)) == v for v in values) and max(len(v) for v in values) > 10


# --------------------------------------------------------------------------- 4. --against


def compare_dict(*args):
    table = read_tsv(ok(invoke("compare", *args)))
    return {(m, a, b, q): float(v) for m, a, b, q, v in table.to_numpy()}, table


def test_against_keeps_the_pairs_with_the_run_oriented_towards_it():
    full, _ = compare_dict("-q", "-m", "rpp,LR", QRELS, *ALL_RUNS)
    got, table = compare_dict("-q", "-m", "rpp,LR", "--against", "sys03", QRELS, *ALL_RUNS)
    assert set(table["run_b"]) == {"sys03"}
    assert list(dict.fromkeys(table["run_a"])) == ["sys01", "sys02", "sys04", "sys05", "sys06"]
    for (m, a, b, q), v in got.items():
        assert v == full.get((m, a, b, q), None) or v == -full[(m, b, a, q)]


def test_two_against_runs_give_each_pair_once():
    got, table = compare_dict(
        "-m", "rpp", "--against", "sys05", "--against", "sys02", QRELS, *ALL_RUNS
    )
    pairs = list(zip(table["run_a"], table["run_b"]))
    assert pairs == [
        ("sys01", "sys05"),
        ("sys02", "sys05"),  # the two against runs once, in the runs' order
        ("sys03", "sys05"),
        ("sys04", "sys05"),
        ("sys06", "sys05"),
        ("sys01", "sys02"),
        ("sys03", "sys02"),
        ("sys04", "sys02"),
        ("sys06", "sys02"),
    ]


def test_engine_computes_only_the_chosen_pairs():
    """compute_cube with pairs equals the full cube's pairs (reversed ones negated), bit
    for bit, and holds only those pairs."""
    from prefeval.core.cube import against_pairs
    from prefeval.engine.local import compute_cube, load_runs, relevant_with_notice
    from prefeval.io.runs import read_qrels
    from prefeval.measures import parse_measures

    judged = read_qrels(str(QRELS))
    relevant = relevant_with_notice(judged, None, None)
    positions = load_runs([str(p) for p in ALL_RUNS], relevant, notify=None)
    measures = parse_measures([], judged.has_subtopics)
    chosen = against_pairs([p.name for p in positions], ["sys04"])
    assert chosen.tolist() == [[0, 3], [1, 3], [2, 3], [4, 3], [5, 3]]
    part = compute_cube(positions, relevant, measures, pairs=chosen)
    whole = compute_cube(positions, relevant, measures)
    assert part.values.shape == (len(measures), 5, 20)
    assert np.array_equal(part.values, whole.select_pairs(chosen).values, equal_nan=True)
    forward = [i for i, (a, b) in enumerate(whole.pairs.tolist()) if b == 3]
    assert np.array_equal(part.values[:, :3], whole.values[:, forward], equal_nan=True)


def test_against_with_prefs_table_equals_against_with_runs(tmp_path):
    prefs = tmp_path / "prefs.csv"
    ok(invoke("compare", "-q", "-f", "csv", "-m", "rpp,invrpp", "-o", prefs, QRELS, *ALL_RUNS))
    metrics = tmp_path / "metrics.tsv"
    ok(invoke("metrics", "-q", "-m", "AP", "-o", metrics, QRELS, *ALL_RUNS))
    args = ["--against", "sys02", "--against", "sys06"]
    from_runs = ok(invoke("pairs", *args, "-m", "rpp,invrpp", "-B", "AP", QRELS, *ALL_RUNS))
    assert ok(invoke("pairs", *args, "--prefs", prefs, "--metrics", metrics)) == from_runs


def test_against_errors():
    usage_error(
        invoke("compare", "--against", "nope", QRELS, *RUNS),
        "--against nope: no such run",
        "sys01, sys02, sys03",
    )
    for command in ("order", "tau"):
        usage_error(invoke(command, "--against", "sys01", QRELS, *RUNS), "--against", command)
    usage_error(
        invoke("robustness", "--queries", "5", "--against", "sys01", QRELS, *RUNS), "--against"
    )
    usage_error(invoke("discpower", "--against", "sys01", "--test", "hsd", QRELS, *RUNS), "hsd")


def test_discpower_against_tests_and_corrects_only_those_pairs():
    common = ["--pairs", "-m", "rpp", "--no-baselines", "--test", "ttest", "--test", "sign"]
    full = read_tsv(ok(invoke("discpower", *common, QRELS, *ALL_RUNS)))
    some = read_tsv(ok(invoke("discpower", *common, "--against", "sys01", QRELS, *ALL_RUNS)))
    assert set(some["run_b"]) == {"sys01"} and len(some) == 2 * 5
    p = {
        (t, frozenset((a, b))): v
        for t, a, b, v in full[["test", "run_a", "run_b", "p_value"]].to_numpy()
    }
    for t, a, b, v, adj in some[["test", "run_a", "run_b", "p_value", "p_adjusted"]].to_numpy():
        assert v == p[(t, frozenset((a, b)))]  # two-sided tests: orientation changes nothing
        assert float(adj) == min(1.0, float(v) * 5)  # Bonferroni over the 5 pairs tested


# --------------------------------------------------------------------------- 5. both directions


def test_both_directions_writes_each_pair_then_its_reverse():
    got, table = compare_dict("-q", "--both-directions", "-m", "rpp,LR", QRELS, *RUNS)
    full, _ = compare_dict("-q", "-m", "rpp,LR", QRELS, *RUNS)
    assert len(got) == 2 * len(full)
    for (m, a, b, q), v in full.items():
        assert got[(m, a, b, q)] == v
        assert got[(m, b, a, q)] == -v
    assert "-0.0" not in set(table["value"]) and "0.0" in set(table["value"])
    pairs = list(dict.fromkeys(zip(table["run_a"], table["run_b"])))
    assert pairs == [
        ("sys01", "sys02"),
        ("sys02", "sys01"),
        ("sys01", "sys03"),
        ("sys03", "sys01"),
        ("sys02", "sys03"),
        ("sys03", "sys02"),
    ]
    matrix = table[table["query_id"] == "all"].pivot_table(
        index="run_a", columns="run_b", values="value", aggfunc="first"
    )
    assert matrix.shape == (3, 3)


# --------------------------------------------------------------------------- 6. pairs


@pytest.fixture
def tiny(tmp_path):
    """Four queries, one relevant document r each.  Ranks of r: A 1 2 1 1, B 2 1 1 3, C as
    A, D always 2 (a run ranks r first when it scores it highest)."""
    qrels = write_qrels(tmp_path / "qrels", [(q, 0, "r", 1) for q in "1234"])
    ranks = {"A": [1, 2, 1, 1], "B": [2, 1, 1, 3], "C": [1, 2, 1, 1], "D": [2, 2, 2, 2]}
    runs = []
    for name, rank in ranks.items():
        rows = []
        for q, k in zip("1234", rank):
            docs = ["x", "y", "z"]
            docs.insert(k - 1, "r")
            rows += [(q, d, float(10 - i)) for i, d in enumerate(docs)]
        runs.append(write_run(tmp_path / f"input.{name}", rows))
    return qrels, runs


def test_pairs_hand_counted(tiny):
    qrels, runs = tiny
    table = read_tsv(ok(invoke("pairs", "-m", "rpp", "-B", "AP", qrels, *runs)))
    assert list(table.columns) == [
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
    rows = {(m, a, b): r for m, a, b, *r in table.to_numpy()}
    # rpp, one relevant document: sgn(rank_b - rank_a); A vs B: +1 -1 0 +1
    deltas = np.array([1.0, -1.0, 0.0, 1.0])
    q, mean, low, high, wins, ties_, losses, effect = rows[("rpp", "A", "B")]
    assert (q, wins, ties_, losses) == ("4", "2", "1", "1")
    assert float(mean) == 0.25
    # sd (ddof 1) of +1 -1 0 +1: sqrt(2.75 / 3)
    assert float(effect) == pytest.approx(0.25 / np.sqrt(2.75 / 3), rel=1e-14)
    interval = stats.ttest_1samp(deltas, 0.0).confidence_interval(0.95)
    # the t interval, [-1.27, 1.77], clipped to [-1, 1], the range of a preference
    assert interval.low < -1 and interval.high > 1
    assert (float(low), float(high)) == (-1.0, 1.0)
    # AP = 1/rank of r: A - B = 1/2, -1/2, 0, 2/3
    ap = np.array([0.5, -0.5, 0.0, 2 / 3])
    q, mean, low, high, wins, ties_, losses, effect = rows[("AP", "A", "B")]
    assert (wins, ties_, losses) == ("2", "1", "1")
    assert float(mean) == pytest.approx(ap.mean(), rel=1e-15)
    assert float(effect) == pytest.approx(ap.mean() / ap.std(ddof=1), rel=1e-14)
    lo, hi = stats.t.interval(0.95, 3, loc=ap.mean(), scale=stats.sem(ap))
    assert (float(low), float(high)) == pytest.approx((lo, hi), rel=1e-12)
    # constant differences: a zero-width interval at the mean, no effect size (no spread)
    assert rows[("rpp", "A", "C")][1:] == ["0.0", "0.0", "0.0", "0", "4", "0", ""]
    # A vs D: +1 0 +1 +1
    assert rows[("rpp", "A", "D")][1] == "0.75" and rows[("rpp", "A", "D")][4:7] == ["3", "1", "0"]
    assert rows[("AP", "B", "D")][4:7] == ["2", "1", "1"]


def test_pairs_constant_nonzero_and_confidence_level(tiny):
    qrels, runs = tiny
    a_vs_d = read_tsv(
        ok(
            invoke(
                "pairs", "-m", "rpp", "--no-baselines", "--against", "D", qrels, runs[0], runs[3]
            )
        )
    )
    # A ranks r at 1 2 1 1, D always at 2: +1 0 +1 +1
    row = a_vs_d.iloc[0]
    assert (row["run_a"], row["run_b"], row["wins"], row["ties"], row["losses"]) == (
        "A",
        "D",
        "3",
        "1",
        "0",
    )
    d = np.array([1.0, 0.0, 1.0, 1.0])
    for level in (0.5, 0.99):
        table = read_tsv(
            ok(
                invoke(
                    "pairs", "--ci", level, "-m", "rpp", "--no-baselines", qrels, runs[0], runs[3]
                )
            )
        )
        lo, hi = stats.t.interval(level, 3, loc=d.mean(), scale=stats.sem(d))
        hi = min(hi, 1.0)  # a preference's interval, clipped to its range [-1, 1]
        assert (float(table["ci_low"][0]), float(table["ci_high"][0])) == pytest.approx(
            (lo, hi), rel=1e-12
        )
    # B vs D: B ranks r at 2 1 1 3, D at 2: 0 +1 +1 -1; reversed with --against B
    table = read_tsv(
        ok(
            invoke(
                "pairs", "-m", "rpp", "--no-baselines", "--against", "B", qrels, runs[1], runs[3]
            )
        )
    )
    row = table.iloc[0]
    assert (row["run_a"], row["run_b"], row["mean"], row["wins"], row["ties"], row["losses"]) == (
        "D",
        "B",
        "-0.25",
        "1",
        "1",
        "2",
    )
    usage_error(invoke("pairs", "--ci", "1", qrels, *runs), "--ci")


def test_pairs_constant_nonzero_gives_zero_width(tmp_path):
    qrels = write_qrels(tmp_path / "qrels", [(q, 0, "r", 1) for q in "123"])
    top = write_run(
        tmp_path / "input.top", [(q, d, s) for q in "123" for d, s in (("r", 2.0), ("x", 1.0))]
    )
    low = write_run(
        tmp_path / "input.low", [(q, d, s) for q in "123" for d, s in (("x", 2.0), ("r", 1.0))]
    )
    table = read_tsv(ok(invoke("pairs", "-m", "rpp", "--no-baselines", qrels, top, low)))
    assert table.iloc[0, 3:].tolist() == ["3", "1.0", "1.0", "1.0", "3", "0", "0", ""]


def test_pairs_reversed_by_the_order_of_the_runs_is_exactly_negated():
    forward = read_tsv(ok(invoke("pairs", "-m", "rpp,dcgrpp", "-B", "AP,ASL", QRELS, *RUNS)))
    backward = read_tsv(ok(invoke("pairs", "-m", "rpp,dcgrpp", "-B", "AP,ASL", QRELS, *RUNS[::-1])))
    back = {(m, a, b): r for m, a, b, *r in backward.to_numpy()}
    for m, a, b, q, mean, low, high, wins, ties_, losses, effect in forward.to_numpy():
        other = back[(m, b, a)]
        assert other[0] == q and (other[4], other[5], other[6]) == (losses, ties_, wins)
        assert float(other[1]) == -float(mean)
        assert (float(other[2]), float(other[3])) == (-float(high), -float(low))
        assert float(other[7] or "nan") == pytest.approx(-float(effect or "nan"), nan_ok=True)


def test_tau_matrix_on_a_terminal_follows_precision():
    import pandas as pd

    from prefeval.analysis.agreement import tau_matrix_text

    table = pd.DataFrame(
        {
            "measure_a": ["rpp", "rpp", "AP"],
            "measure_b": ["AP", "nDCG", "nDCG"],
            "tau": [0.8, 0.6, 0.9],
        }
    )
    assert tau_matrix_text(table, 1).splitlines() == [
        "           AP   nDCG",
        "rpp       0.8    0.6",
        "AP               0.9",
    ]
    assert "0.800" in tau_matrix_text(table)  # the default: three decimals


# --------------------------------------------------------------------------- 6. run names


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    """runs/<system>/run.trec, a common layout: three copies of sample runs, tags kept."""
    root = tmp_path_factory.mktemp("layout")
    paths = []
    for system, source in zip(("bm25", "dense", "splade"), RUNS):
        path = root / system / "run.trec"
        path.parent.mkdir()
        path.write_bytes(source.read_bytes())
        paths.append(path)
    return paths


#: every command that reads runs, with options that keep it small, and the columns of its
#: output that hold run names (none: the names are checked through --pairs or the page)
COMMANDS = {
    "compare": (["-m", "rpp"], ["run_a", "run_b"]),
    "metrics": (["-m", "AP"], ["run"]),
    "order": (["-m", "rpp", "-B", "AP"], ["run"]),
    "discpower": (["-m", "rpp", "-B", "AP", "--test", "ttest", "--pairs"], ["run_a", "run_b"]),
    "tau": (["-m", "rpp", "-B", "AP"], []),
    "agree": (["-m", "rpp", "-B", "AP"], []),
    "robustness": (["-m", "rpp", "-B", "AP", "--queries", "5", "--samples", "2"], []),
    "pairs": (["-m", "rpp", "-B", "AP"], ["run_a", "run_b"]),
    "explain": (["-m", "rpp", "--top", "1"], []),
    "report": (["-m", "rpp", "-B", "AP", "--test", "ttest", "--trials", "10"], []),
}


def named_output(command, runs, tmp_path, *flags):
    """(exit result, the run names the output holds: a set, or the report's page)."""
    options, columns = COMMANDS[command]
    if command == "explain":
        runs = runs[:2]
    extra = ["-o", tmp_path / "r.html"] if command == "report" else []
    result = invoke(command, *flags, *options, *extra, QRELS, *runs)
    if result.exit_code != 0:
        return result, None
    if command == "report":
        return result, (tmp_path / "r.html").read_text()
    if command == "explain":
        return result, result.stdout
    table = read_tsv(result.stdout)
    return result, {n for c in columns for n in table[c]}


def names_shown(command, names, want):
    """Whether the output's run names (:func:`named_output`) are ``want``."""
    if command == "report":
        return all(f">{n}<" in names for n in want)
    if command == "explain":  # its text names RUN_A and RUN_B
        return all(n in names for n in want[:2])
    return not COMMANDS[command][1] or names == set(want)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_names_runs_as_users_do(command, layout, tmp_path):
    """runs/<system>/run.trec: by file name the runs collide (exit 2, saying how to name
    them); NAME=PATH names them; --names tag names them by their run tag."""
    result, _ = named_output(command, layout, tmp_path)
    usage = "name them NAME=PATH (in Python, a dict {name: run}) or use --names tag"
    assert result.exit_code == 2 and result.stdout == "", result.stderr
    assert "two runs are named 'run'" in result.stderr and usage in result.stderr
    assert "Traceback" not in result.stderr
    named = [f"{p.parent.name}={p}" for p in layout]
    result, names = named_output(command, named, tmp_path)
    assert result.exit_code == 0, result.stderr
    assert names_shown(command, names, ["bm25", "dense", "splade"])
    result, names = named_output(command, layout, tmp_path, "--names", "tag")
    assert result.exit_code == 0, result.stderr
    assert names_shown(command, names, ["sys01", "sys02", "sys03"])
    assert "--names [file|tag]" in invoke(command, "--help").stdout


@pytest.mark.parametrize("names", [[], ["--names", "tag"]])
def test_tags_and_suffixes_name_compare_and_metrics_rows(names, tmp_path):
    paths = []
    for i, suffix in enumerate([".run", ".trec.gz", ".txt"]):
        data = RUNS[i].read_bytes()
        path = tmp_path / f"exp{i}" / f"system{i}{suffix}"
        path.parent.mkdir()
        path.write_bytes(gzip.compress(data) if suffix.endswith(".gz") else data)
        paths.append(path)
    want = ["sys01", "sys02", "sys03"] if names else ["system0", "system1", "system2"]
    table = read_tsv(ok(invoke("metrics", *names, "-m", "AP", QRELS, *paths)))
    assert list(table["run"]) == want
    table = read_tsv(ok(invoke("compare", *names, "-m", "rpp", QRELS, *paths)))
    assert list(zip(table["run_a"], table["run_b"])) == [
        (want[0], want[1]), (want[0], want[2]), (want[1], want[2])
    ]  # fmt: skip


def test_named_prefs_and_metrics_read_back(tmp_path):
    """Tables written with NAME=PATH are read back by --prefs and --metrics with the same
    names given to the baselines: the same ordering as from the runs."""
    named = [f"r{i}={p}" for i, p in enumerate(RUNS)]
    prefs, metrics = tmp_path / "prefs.tsv", tmp_path / "metrics.tsv"
    ok(invoke("compare", "-q", "-m", "rpp", "-o", prefs, QRELS, *named))
    ok(invoke("metrics", "-q", "-m", "AP", "-o", metrics, QRELS, *named))
    direct = ok(invoke("order", "-m", "rpp", "-B", "AP", QRELS, *named))
    assert ok(invoke("order", "--prefs", prefs, "--metrics", metrics)) == direct
    assert ok(invoke("order", "--prefs", prefs, "-B", "AP", QRELS, *named)) == direct
    assert set(read_tsv(direct)["run"]) == {"r0", "r1", "r2"}


def test_name_equals_path_checks_the_path_it_names(tmp_path):
    """-o may not overwrite a run given as NAME=PATH; '-' named stands for stdin."""
    target = tmp_path / "x.run"
    target.write_bytes(RUNS[0].read_bytes())
    result = invoke("compare", "-o", target, QRELS, f"x={target}", RUNS[1])
    usage_error(result, "would overwrite the input")
    result = invoke("compare", QRELS, "a=-", "b=-")
    usage_error(result, "'-' (standard input) may be given for one input only")


# --------------------------------------------------------------------------- 7. trec_eval habits


def test_metrics_c_is_what_prefeval_always_does():
    plain = invoke("metrics", "-q", "-m", "map", QRELS, *ALL_RUNS)
    assert ok(invoke("metrics", "-c", "-q", "-m", "map", QRELS, *ALL_RUNS)) == ok(plain)
    assert "-c" in ok(invoke("metrics", "--help")).replace("\n", " ")


def test_metrics_notices_a_run_missing_queries_as_compare_does():
    """sample_data's sys04 has no results for one query: metrics tells it with compare's
    own notice."""
    notice = (
        "prefeval: run sys04: no results for 1 of 20 evaluated queries; evaluated as "
        "retrieving nothing\n"
    )
    compared = invoke("compare", "-m", "rpp", QRELS, *ALL_RUNS)
    assert ok(compared) and compared.stderr == notice
    measured = invoke("metrics", "-m", "map", QRELS, *ALL_RUNS)
    assert ok(measured) and measured.stderr == notice


def test_gm_map_as_trec_eval():
    """gm_map: per query pytrec_eval's (trec_eval's) log(max(AP, 1e-5)); summary its
    geometric mean over every judged query, a query a run missed counting as AP 0 (-c)."""
    import pytrec_eval

    table = read_tsv(ok(invoke("metrics", "-q", "-m", "gm_map", QRELS, *ALL_RUNS)))
    judged: dict = {}
    for q, _, d, g in map(str.split, QRELS.read_text().splitlines()):
        judged.setdefault(q, {})[d] = int(g)
    evaluator = pytrec_eval.RelevanceEvaluator(judged, {"gm_map"})
    for path in ALL_RUNS:
        ranking: dict = {}
        for line in (
            (gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes())
            .decode()
            .splitlines()
        ):
            q, _, d, _, score, *_ = line.split()
            ranking.setdefault(q, {})[d] = float(score)
        per_query = evaluator.evaluate(ranking)
        name = path.name.removeprefix("input.").removesuffix(".gz")
        rows = table[table["run"] == name]
        got = {q: float(v) for q, v in zip(rows["query_id"], rows["value"])}
        for q, values in per_query.items():
            assert got[q] == pytest.approx(values["gm_map"], abs=1e-12)
        unanswered = [q for q in judged if q not in per_query]
        assert [got[q] for q in unanswered] == [math.log(1e-5)] * len(unanswered)
        logs = [v["gm_map"] for v in per_query.values()] + [math.log(1e-5)] * len(unanswered)
        assert got["all"] == pytest.approx(math.exp(sum(logs) / len(judged)), rel=1e-12)
        if not unanswered:
            assert got["all"] == pytest.approx(
                pytrec_eval.compute_aggregated_measure("gm_map", logs), rel=1e-12
            )
    assert len(set(table["run"])) == 6 and "sys04" in set(table["run"])


def test_metrics_runid():
    """runid: no rows (the run column names the runs), a notice that says so; alone, the
    header only; in the analyses it is no baseline."""
    both = invoke("metrics", "-m", "map,runid", QRELS, *RUNS)
    assert ok(both) == ok(invoke("metrics", "-m", "map", QRELS, *RUNS))
    assert "runid: no rows; the run column names each run" in both.stderr
    alone = invoke("metrics", "--names", "tag", "-m", "runid", QRELS, *RUNS)
    assert ok(alone) == "measure\trun\tquery_id\tvalue\n"
    assert "by its run tag (--names tag)" in alone.stderr
    usage_error(invoke("order", "-B", "runid", QRELS, *RUNS), "runid (trec_eval's run tag)")
