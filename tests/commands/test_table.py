"""``prefeval table``: its values are those of ``metrics``, ``order``, ``pairs`` and
``discpower`` (each command run and read back), its letters and marks follow from the
p-values and means those commands write, in every format, on the sample data and on TREC
Web 2012 (../shared/data/web2012)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import invoke, read_tsv

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
QRELS = SAMPLE / "qrels.txt"
RUNS = sorted(str(p) for p in (SAMPLE / "runs").glob("input.*"))


def run(*args) -> pd.DataFrame:
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    return read_tsv(result.stdout)


def table(*args) -> pd.DataFrame:
    return run("table", *args, QRELS, *RUNS)


def test_baseline_cells_are_the_metrics_summary_rows():
    got = table("-m", "rpp", "-B", "AP,nDCG,RR")
    metrics = run("metrics", "-m", "AP,nDCG,RR", QRELS, *RUNS)
    expected = {(m, r): v for m, r, v in zip(metrics.measure, metrics.run, metrics.value)}
    base = got[got.kind == "baseline"]
    assert len(base) == 18 and set(base.method) == {"mean"}
    assert {(m, r): v for m, r, v in zip(base.measure, base.run, base.value)} == expected


def test_preference_cells_are_the_mc4_scores_and_ranks_of_order():
    got = table("-m", "rpp,lexirecall", "-B", "AP")
    order = run("order", "-m", "rpp,lexirecall", "-B", "AP", QRELS, *RUNS)
    for name in ("rpp", "lexirecall"):
        mine = got[got.measure == name]
        theirs = order[order.measure == name]
        assert set(mine.method) == {"mc4"} and set(mine.kind) == {"preference"}
        assert dict(zip(mine.run, mine.value)) == dict(zip(theirs.run, theirs.score))
        assert dict(zip(mine.run, mine["rank"])) == dict(zip(theirs.run, theirs["rank"]))
        assert set(mine.loc[mine.best == "true", "run"]) == set(theirs.run[theirs["rank"] == "1"])
    # rows: the MC4 order of the first preference measure, one row per run and measure
    rpp = order[order.measure == "rpp"]
    assert list(got.run.drop_duplicates()) == list(rpp.run)
    assert list(got.row.drop_duplicates()) == [str(i) for i in range(1, 7)]
    assert list(got.measure[:3]) == ["rpp", "lexirecall", "AP"]
    assert list(got.letter.drop_duplicates()) == list("abcdef")


def test_rows_in_the_order_given_or_by_a_baseline():
    shuffled = [RUNS[i] for i in (4, 0, 5, 2, 1, 3)]
    given = run("table", "-m", "rpp", "-B", "AP", "--order-by", "given", QRELS, *shuffled)
    expected = ["sys05", "sys01", "sys06", "sys03", "sys02", "sys04"]
    assert list(given.run.drop_duplicates()) == expected
    by_map = table("-m", "rpp", "-B", "AP", "--order-by", "map")  # map is AP
    ap = by_map[by_map.measure == "AP"]
    assert list(ap.value.astype(float)) == sorted(ap.value.astype(float), reverse=True)


def expected_letters(p_table: pd.DataFrame, means: pd.DataFrame, rows: list[str], alpha=0.05):
    """(measure, run) -> the letters of the runs it is significantly better than, from
    ``discpower --pairs`` and ``pairs`` tables."""
    letter = {run: "abcdefghijklmnopqrstuvwxyz"[i] for i, run in enumerate(rows)}
    keys = zip(means.measure, means.run_a, means.run_b)
    mean = {key: float(v) for key, v in zip(keys, means["mean"])}
    beaten: dict = {}
    for m, a, b, p in zip(p_table.measure, p_table.run_a, p_table.run_b, p_table.p_adjusted):
        if float(p) < alpha and mean[m, a, b] != 0:
            winner, loser = (a, b) if mean[m, a, b] > 0 else (b, a)
            beaten.setdefault((m, winner), []).append(loser)
    return {key: "".join(sorted(letter[r] for r in losers)) for key, losers in beaten.items()}


@pytest.mark.parametrize("test, correction", [("ttest", "bonferroni"), ("sign", "holm")])
def test_letters_are_the_pairs_discpower_finds_significant(test, correction):
    args = ["-m", "rpp,lexirecall", "-B", "AP", "--test", test, "--correction", correction]
    got = table(*args)
    p_table = run("discpower", "--pairs", *args, QRELS, *RUNS)
    means = run("pairs", "-m", "rpp,lexirecall", "-B", "AP", QRELS, *RUNS)
    rows = list(got.run.drop_duplicates())
    expected = expected_letters(p_table, means, rows)
    assert any(expected.values())
    for m, r, marks in zip(got.measure, got.run, got.marks):
        assert marks == expected.get((m, r), ""), (m, r)
    assert set(got.test) == {test} and set(got.correction) == {correction}


def test_against_a_reference_gives_the_pairs_means_and_discpower_p_values():
    args = ["-m", "rpp,lexirecall", "-B", "AP", "--against", "sys03"]
    got = table(*args)
    assert "letter" not in got.columns and set(got.reference) == {"sys03"}
    means = run("pairs", *args, QRELS, *RUNS)
    p_table = run("discpower", "--pairs", "--test", "ttest", *args, QRELS, *RUNS)
    for name in ("rpp", "lexirecall"):
        mine = got[(got.measure == name) & (got.run != "sys03")]
        theirs = means[means.measure == name]
        assert set(theirs.run_b) == {"sys03"}
        assert dict(zip(mine.run, mine.value)) == dict(zip(theirs.run_a, theirs["mean"]))
        assert set(mine.method) == {"delta"}
        ref = got[(got.measure == name) & (got.run == "sys03")]
        assert list(ref.value) == ["0.0"] and list(ref.p_value) == [""]
    for name in ("rpp", "lexirecall", "AP"):
        mine = got[(got.measure == name) & (got.run != "sys03")]
        theirs = p_table[p_table.measure == name]
        assert dict(zip(mine.run, mine.p_value)) == dict(zip(theirs.run_a, theirs.p_value))
        assert dict(zip(mine.run, mine.p_adjusted)) == dict(zip(theirs.run_a, theirs.p_adjusted))
        signs = {
            a: np.sign(float(v))
            for m, a, v in zip(means.measure, means.run_a, means["mean"])
            if m == name
        }
        for r, p, marks in zip(mine.run, mine.p_adjusted, mine.marks):
            want = "" if float(p) >= 0.05 else ("+" if signs[r] > 0 else "-")
            assert marks == want, (name, r)
    assert set(got.marks) >= {"-"}  # sys01 and sys02 lose to sys03 significantly
    # the baselines stay their means
    ap = got[got.measure == "AP"]
    metrics = run("metrics", "-m", "AP", QRELS, *RUNS)
    assert dict(zip(ap.run, ap.value)) == dict(zip(metrics.run, metrics.value))


def test_formats_hold_the_same_table(tmp_path):
    args = ["-m", "rpp", "-B", "AP", "--against", "sys06"]
    tsv = table(*args)
    csv = invoke("table", "-f", "csv", *args, QRELS, *RUNS)
    frame = pd.read_csv(io.StringIO(csv.stdout), dtype=str, keep_default_na=False)
    assert frame.equals(tsv)
    lines = invoke("table", "-f", "jsonl", *args, QRELS, *RUNS).stdout.splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["run"] for r in records] == list(tsv.run)
    assert [r["value"] for r in records] == [float(v) for v in tsv.value]
    assert [r["best"] for r in records] == [v == "true" for v in tsv.best]
    assert [r["p_value"] for r in records] == [None if v == "" else float(v) for v in tsv.p_value]
    out = tmp_path / "table.parquet"
    assert invoke("table", "-f", "parquet", "-o", out, *args, QRELS, *RUNS).exit_code == 0
    read = pd.read_parquet(out)
    assert list(read.columns) == list(tsv.columns)
    assert read["value"].tolist() == [float(v) for v in tsv.value]
    assert read["row"].dtype == np.int64 and read["best"].dtype == bool


def test_tex_is_a_booktabs_table_with_bold_best_and_letters(tmp_path):
    named = [f"a&b_c%={RUNS[0]}", *RUNS[1:]]  # a name LaTeX must escape
    out = tmp_path / "table.tex"
    result = invoke("table", "-f", "tex", "-o", out, "-m", "rpp", "-B", "AP", QRELS, *named)
    assert result.exit_code == 0, result.output
    text = out.read_text(encoding="utf-8")
    assert result.stdout == "" and text.endswith("\\end{table}\n")
    assert "\\toprule" in text and "\\midrule" in text and "\\bottomrule" in text
    assert "a\\&b\\_c\\%" in text and "a&b" not in text
    rows = [line for line in text.splitlines() if line.startswith(("sys", "a\\&"))]
    assert rows[0].startswith("sys06 & a & \\textbf{0.800}$^{\\mathrm{def}}$")
    assert rows[-1].startswith("a\\&b\\_c\\% & f & 0.010 & ")  # sys01, renamed, last
    assert "MC4 score" in text and "Bonferroni" in text and "significantly better" in text
    two = invoke("table", "-f", "tex", "-p", "2", "-m", "rpp", QRELS, *RUNS).stdout
    assert "\\textbf{0.80}" in two


@pytest.mark.parametrize(
    "args, message",
    [
        (["--order-by", "nosuch"], "'nosuch' is not a measure"),
        (["-B", "AP", "--order-by", "nDCG"], "'nDCG' is not a measure of the table"),
        (["--against", "nosuch"], "--against nosuch: no such run"),
        (["--against", "sys01", "--against", "sys02"], "one reference run"),
        (["--test", "hsd", "--against", "sys01"], "--test hsd with --against"),
        (["-f", "nosuch"], "'nosuch' is not one of"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message):
    result = invoke("table", "-m", "rpp", *args, QRELS, *RUNS)
    assert result.exit_code == 2, result.output
    errors = [x for x in result.stderr.splitlines() if x.startswith("Error:")]
    assert len(errors) == 1 and message in errors[0], result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_the_api_gives_the_command_s_rows():
    import prefeval

    frame = prefeval.table(str(QRELS), RUNS, measures="rpp", baselines="AP", notify=None)
    tsv = table("-m", "rpp", "-B", "AP")
    assert list(frame.columns) == list(tsv.columns)
    assert frame["value"].tolist() == [float(v) for v in tsv.value]
    assert frame["marks"].tolist() == list(tsv.marks)
    with pytest.raises(ValueError, match="order_by='nosuch' is not a measure"):
        prefeval.table(str(QRELS), RUNS, measures="rpp", order_by="nosuch")
    with pytest.raises(ValueError, match="--against nosuch: no such run"):
        prefeval.table(str(QRELS), RUNS, measures="rpp", against="nosuch")
    with pytest.raises(ValueError, match="one test"):
        prefeval.table(str(QRELS), RUNS, measures="rpp", test=["ttest", "sign"])


def test_the_report_has_the_table_after_its_summary(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "report.md"
    args = ["-m", "rpp", "-B", "AP", "--test", "ttest", "-o", out]
    assert invoke("report", *args, QRELS, *RUNS).exit_code == 0
    text = out.read_text(encoding="utf-8")
    titles = [line for line in text.splitlines() if line.startswith("## ")]
    assert titles[:2] == ["## Summary", "## Runs x measures"]
    got = table("-m", "rpp", "-B", "AP")
    first = got[got.row == "1"]
    marks = dict(zip(first.measure, first.marks))
    line = f"| sys06 | a | **0.800**<sup>{marks['rpp']}</sup> | **0.527**<sup>{marks['AP']}</sup> |"
    assert line in text


def test_web2012_table_equals_order_and_metrics(web2012):
    runs = sorted(str(p) for p in (web2012 / "runs").glob("*.gz"))
    qrels = web2012 / "qrels.adhoc.txt.gz"
    got = run("table", "-m", "rpp,lexiprecision", "-B", "AP,nDCG@10", qrels, *runs)
    order = run("order", "-m", "rpp,lexiprecision", qrels, *runs)
    metrics = run("metrics", "-m", "AP,nDCG@10", qrels, *runs)
    for name in ("rpp", "lexiprecision"):
        mine, theirs = got[got.measure == name], order[order.measure == name]
        assert dict(zip(mine.run, mine.value)) == dict(zip(theirs.run, theirs.score))
    base = got[got.kind == "baseline"]
    assert {(m, r): v for m, r, v in zip(base.measure, base.run, base.value)} == {
        (m, r): v for m, r, v in zip(metrics.measure, metrics.run, metrics.value)
    }
    assert len(got.run.unique()) == 8 and list(got.letter.drop_duplicates()) == list("abcdefgh")
    tex = invoke("table", "-f", "tex", "-m", "rpp", "-B", "AP", qrels, *runs).stdout
    assert tex.count("\\begin{table}") == 1
