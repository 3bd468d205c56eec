"""prefeval explain: the aligned recall levels behind every measure, and the values
recomputed from its rows equal compare -q's for every measure, population and query."""

from __future__ import annotations

import io
import json
import math
import re
from fractions import Fraction
from pathlib import Path

import pandas as pd
import pytest
from helpers import invoke, read_tsv, tsv_to_dict, write_qrels, write_run

from prefeval.core.qrels import query_sort_key
from prefeval.io.source import run_name
from prefeval.options import Options
from prefeval.present.explain import COLUMNS, explain

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_data"
QRELS = SAMPLE / "qrels.txt"
SUBTOPICS = SAMPLE / "qrels.subtopics.txt"
RUNS = sorted((SAMPLE / "runs").glob("input.*"))
RPP = {"rpp": ("rpp", "dcgrpp", "invrpp"), "strpp": ("strpp", "stdcgrpp", "stinvrpp")}


# --------------------------------------------------------------------------- by hand

# rpp-sigir2022 section 3: X and Y rank nine relevant items (grades 1,1,1,2,3,3,4,4,5);
# X retrieves a(4) at 2, b(3) at 3, c(1) at 7, d(3) at 9 and omits e, f (1), g (2),
# h (4), i (5); Y retrieves b at 1, a at 3, i at 4, d at 5, c at 8, e at 9, omits f, g, h.
GRADES = {"a": 4, "b": 3, "c": 1, "d": 3, "e": 1, "f": 1, "g": 2, "h": 4, "i": 5}
X = {"a": 2, "b": 3, "c": 7, "d": 9}
Y = {"b": 1, "a": 3, "i": 4, "d": 5, "c": 8, "e": 9}
U = None  # unretrieved
# worked out by hand: per population lambda, f_i (X), f'_i (Y) and sgn(f'_i - f_i)
HAND = {
    1: ([2, 3, 7, 9, U, U, U, U, U], [1, 3, 4, 5, 8, 9, U, U, U], [-1, 0, -1, -1, -1, -1, 0, 0, 0]),
    2: ([2, 3, 9, U, U, U], [1, 3, 4, 5, U, U], [-1, 0, -1, -1, 0, 0]),
    3: ([2, 3, 9, U, U], [1, 3, 4, 5, U], [-1, 0, -1, -1, 0]),
    4: ([2, U, U], [3, 4, U], [1, -1, 0]),
    5: ([U], [4], [-1]),
}


def _ranking(positions: dict, depth: int = 12):
    """(qid, docno, score) rows: the given documents at their positions, judged
    non-relevant fillers elsewhere."""
    at = {pos: doc for doc, pos in positions.items()}
    return [("1", at.get(r, f"n{r:02d}"), float(100 - r)) for r in range(1, depth + 1)]


@pytest.fixture(scope="module")
def paper(tmp_path_factory):
    folder = tmp_path_factory.mktemp("paper")
    judged = [("1", 0, d, g) for d, g in GRADES.items()]
    judged += [("1", 0, f"n{r:02d}", 0) for r in range(1, 13)]
    qrels = write_qrels(folder / "qrels", judged)
    x = write_run(folder / "input.X", _ranking(X))
    y = write_run(folder / "input.Y", _ranking(Y))
    return qrels, x, y


def _levels(frame, family, population):
    rows = frame[(frame["row"] == "level") & (frame["population"] == population)]
    assert set(rows["family"]) == {family}
    as_list = lambda col: [None if pd.isna(v) else int(v) for v in rows[col]]  # noqa: E731
    return as_list("pos_a"), as_list("pos_b"), as_list("sgn")


def test_paper_example_rows(paper):
    qrels, x, y = paper
    frame = explain(qrels, [x, y], notify=None)
    assert list(frame.columns) == COLUMNS
    # the binary population (grade > 0) is lambda = 1
    assert _levels(frame, "binary", "grade>0") == HAND[1]
    for lam, expected in HAND.items():
        assert _levels(frame, "graded", f"grade>={lam}") == expected
    pops = frame[(frame["row"] == "population") & (frame["family"] == "graded")]
    assert list(pops["size"]) == [9, 6, 5, 3, 1]
    assert list(pops["sgn"]) == [-5, -3, -3, 0, -1]
    assert list(pops["weight"]) == [m / 24 for m in (9, 6, 5, 3, 1)]
    # section 4: a user of U_1 (lambda = 1) prefers Y, one of U_1 (lambda = 4) prefers X
    first = frame[(frame["row"] == "level") & (frame["level"] == 1)]
    assert dict(zip(first["population"], first["sgn"]))["grade>=4"] == 1
    assert dict(zip(first["population"], first["sgn"]))["grade>=1"] == -1

    binary = frame[(frame["row"] == "level") & (frame["family"] == "binary")]
    assert list(binary["lexiprecision_decides"]) == [True] + [False] * 8
    assert list(binary["lexirecall_decides"]) == [False] * 5 + [True] + [False] * 3
    assert binary["rr_term"].iloc[0] == 1 / 2 - 1 / 1
    assert binary["rr_term"].iloc[1:].isna().all()
    assert list(binary["retrieved_a"]) == [True] * 4 + [False] * 5
    assert list(binary["p_uniform"]) == [1 / 9] * 9
    assert list(binary["p_inverse"]) == [
        (1 / i) / sum(1 / j for j in range(1, 10)) for i in range(1, 10)
    ]

    values = frame[frame["row"] == "measure"].set_index("measure")["value"]
    assert values["rpp"] == -0.5  # (-5 - 3 - 3 + 0 - 1) / 24, exactly
    assert values["lexiprecision"] == -1.0
    assert values["lexirecall"] == -1.0  # level 6: Y retrieves its 6th, X does not
    assert values["rrlexiprecision"] == -0.5
    # invRPP with Fractions: p(i | lambda) = (1/i) / H_m
    inv = Fraction(0)
    for _lam, (_, _, signs) in HAND.items():
        m = len(signs)
        harmonic = sum(Fraction(1, j) for j in range(1, m + 1))
        rpp = sum(Fraction(s, i) for i, s in enumerate(signs, 1)) / harmonic
        inv += Fraction(m, 24) * rpp
    assert inv == Fraction(-4914 * 9, 7129 * 24) + Fraction(-95 * 6, 147 * 24) + Fraction(
        -95 * 5, 137 * 24
    ) + Fraction(9, 11 * 24) - Fraction(1, 24)
    assert values["invrpp"] == pytest.approx(float(inv), abs=1e-15)
    dcg = 0.0
    for _lam, (_, _, signs) in HAND.items():
        m = len(signs)
        norm = sum(1 / math.log2(j + 1) for j in range(1, m + 1))
        dcg += m / 24 * sum(s / math.log2(i + 1) / norm for i, s in enumerate(signs, 1))
    assert values["dcgrpp"] == pytest.approx(dcg, abs=1e-15)


def test_paper_example_text(paper):
    qrels, x, y = paper
    result = invoke("explain", qrels, x, y)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "query 1: A = X, B = Y (Delta > 0: A preferred)"
    assert "  rpp              -0.5" in lines
    assert "  rrlexiprecision  -0.5" in lines
    level1 = next(line for line in lines if line.startswith("      1      2      1   -1"))
    assert level1.endswith("<- lexiprecision")
    level6 = next(line for line in lines if line.startswith("      6      -      9   -1"))
    assert level6.endswith("<- lexirecall")
    both = next(line for line in lines if line.startswith("    7-9      -      -    0  "))
    assert both.split()[4:] == ["(both", "unretrieved)"]
    assert "  lexiprecision: level 1 decides, sgn -1; rrLP = 1/2 - 1/1 = -0.5" in lines
    assert "  lexirecall: level 6 decides, sgn -1" in lines
    assert "  rpp    = sum sgn / sum m = -12/24 = -0.5" in lines
    lam4 = next(line for line in lines if line.startswith("  grade>=4"))
    assert lam4.split()[:5] == ["grade>=4", "3", "3/24", "0", "0.0"]
    assert float(lam4.split()[-1]) == pytest.approx(3 / 11, abs=1e-15)  # (1 - 1/2) / H_3


# --------------------------------------------------------------------------- recompute


def recompute(frame: pd.DataFrame, binary: bool) -> dict:
    """Every measure value of every query from explain's rows alone (checking each level
    row on the way): {(query, measure): value}, uniform RPP as an exact fraction."""
    pops: dict = {}
    levels: dict = {}
    for row in frame.to_dict("records"):
        key = (row["query_id"], row["family"], row["population"])
        if row["row"] == "population":
            pops.setdefault(row["query_id"], []).append(row)
        elif row["row"] == "level":
            levels.setdefault(key, []).append(row)
    out = {}
    for query, query_pops in pops.items():
        for pop in query_pops:
            mine = levels[query, pop["family"], pop["population"]]
            m = int(pop["size"])
            assert [r["level"] for r in mine] == list(range(1, m + 1))
            assert all(r["size"] == m and r["weight"] == pop["weight"] for r in mine)
            a = [math.inf if pd.isna(r["pos_a"]) else int(r["pos_a"]) for r in mine]
            b = [math.inf if pd.isna(r["pos_b"]) else int(r["pos_b"]) for r in mine]
            assert a == sorted(a) and b == sorted(b)
            assert [r["retrieved_a"] for r in mine] == [x < math.inf for x in a]
            signs = [(y > x) - (y < x) for x, y in zip(a, b)]
            assert [r["sgn"] for r in mine] == signs
            assert pop["sgn"] == sum(signs)
            assert pop["rpp_uniform"] == sum(signs) / m
            assert [r["p_uniform"] for r in mine] == pytest.approx([1 / m] * m, abs=1e-16)
            for w in ("dcg", "inverse"):
                total = math.fsum(s * r[f"p_{w}"] for s, r in zip(signs, mine))
                assert pop[f"rpp_{w}"] == pytest.approx(total, abs=1e-15)
        for family, names in (("graded", RPP["rpp"]), ("subtopic", RPP["strpp"])):
            want = "binary" if binary and family == "graded" else family
            fam = [p for p in query_pops if p["family"] == want]
            if not fam:
                continue
            sizes = sum(p["size"] for p in fam)
            assert [p["weight"] for p in fam] == [p["size"] / sizes for p in fam]
            out[query, names[0]] = float(Fraction(sum(p["sgn"] for p in fam), sizes))
            for name, w in zip(names[1:], ("dcg", "inverse")):
                out[query, name] = math.fsum(p["weight"] * p[f"rpp_{w}"] for p in fam)
        binary_pop = next(p for p in query_pops if p["family"] == "binary")
        binary_levels = levels[query, "binary", binary_pop["population"]]
        signs = [r["sgn"] for r in binary_levels]
        first = [r for r in binary_levels if r["lexiprecision_decides"]]
        last = [r for r in binary_levels if r["lexirecall_decides"]]
        assert len(first) == len(last) == (1 if any(signs) else 0)
        out[query, "lexiprecision"] = float(first[0]["sgn"]) if first else 0.0
        out[query, "lexirecall"] = float(last[0]["sgn"]) if last else 0.0
        out[query, "rrlexiprecision"] = float(first[0]["rr_term"]) if first else 0.0
        if first:
            i, j = first[0]["level"] - 1, last[0]["level"] - 1
            assert signs[i] != 0 and signs[j] != 0
            assert not any(signs[:i]) and not any(signs[j + 1 :])
            inverse = [
                0.0 if pd.isna(r[f"pos_{x}"]) else 1 / r[f"pos_{x}"]
                for x in "ab"
                for r in [first[0]]
            ]
            assert first[0]["rr_term"] == inverse[0] - inverse[1]
    return out


def check_against_compare(qrels, runs, compare_values, *options, binary=False, **kwargs):
    """For every pair of ``runs`` and every query: explain's measure rows equal compare -q
    (``compare_values``: tsv_to_dict of its output), and so do the values recomputed
    from the rows (uniform RPP and lexicographic exactly, DCG and inverse to 1e-15)."""
    names = [run_name(p) for p in runs]
    queries = sorted({k[3] for k in compare_values} - {"all"}, key=query_sort_key)
    checked = 0
    for i in range(len(runs)):
        for j in range(i + 1, len(runs)):
            settings = Options(binary=binary, **kwargs)
            frame = explain(qrels, [runs[i], runs[j]], settings, queries=queries, notify=None)
            expected = {
                (q, m): v
                for (m, a, b, q), v in compare_values.items()
                if (a, b) == (names[i], names[j]) and q != "all"
            }
            shown = frame[frame["row"] == "measure"]
            got = dict(zip(zip(shown["query_id"], shown["measure"]), shown["value"]))
            assert got == expected  # the values explain prints are compare's, bit for bit
            again = recompute(frame, binary)
            assert set(again) == set(expected)
            for key, value in expected.items():
                if key[1] in ("dcgrpp", "invrpp", "stdcgrpp", "stinvrpp"):
                    assert again[key] == pytest.approx(value, abs=1e-15), key
                else:
                    assert again[key] == value, key
            checked += len(expected)
    return checked


def compare_q(*args) -> dict:
    result = invoke("compare", "-q", *args)
    assert result.exit_code == 0, result.stderr
    return tsv_to_dict(result.stdout)


@pytest.mark.parametrize(
    "options",
    [[], ["--binary"], ["-l", "2"], ["-M", "20"]],
    ids=["graded", "binary", "level2", "M20"],
)
def test_sample_data_recomputes_compare(options):
    runs = RUNS[:3]
    values = compare_q(*options, QRELS, *runs)
    kwargs = {
        "relevance_level": float(options[1]) if options[:1] == ["-l"] else None,
        "max_docs": int(options[1]) if options[:1] == ["-M"] else None,
    }
    n = check_against_compare(QRELS, runs, values, binary="--binary" in options, **kwargs)
    assert n == len(values) - 3 * 6  # every per-query value of 3 pairs, 6 measures


def test_sample_subtopics_recompute_compare():
    runs = [RUNS[0], RUNS[3], RUNS[5]]
    values = compare_q(SUBTOPICS, *runs)
    assert {k[0] for k in values} >= set(RPP["strpp"])
    n = check_against_compare(SUBTOPICS, runs, values)
    assert n == len(values) - 3 * 9


@pytest.fixture(scope="module")
def web(web2012):
    runs = sorted((web2012 / "runs").glob("*.run.gz"))
    return web2012, [runs[0], runs[3], runs[6]]  # ql-cata-filtered, ql-catb, rm-catb-filtered


@pytest.mark.parametrize("binary", [False, True], ids=["graded", "binary"])
def test_web2012_adhoc_recomputes_compare(web, binary):
    folder, runs = web
    qrels = folder / "qrels.adhoc.txt.gz"
    values = compare_q(*(["--binary"] if binary else []), qrels, *runs)
    n = check_against_compare(qrels, runs, values, binary=binary)
    assert n == 3 * 6 * 50


def test_web2012_diversity_recomputes_compare(web):
    folder, runs = web
    qrels = folder / "qrels.diversity-ndeval.txt.gz"
    values = compare_q(qrels, *runs)
    n = check_against_compare(qrels, runs, values)
    assert n == len(values) - 3 * 9
    assert n == 3 * 9 * 50


# --------------------------------------------------------------------------- CLI


def _explained_queries(text: str) -> list[str]:
    return [line.split()[1].rstrip(":") for line in text.splitlines() if line.startswith("query ")]


@pytest.mark.parametrize("measure", ["rpp", "lexiprecision", "invrpp"])
def test_top_orders_by_abs_delta_then_query_id(measure):
    a, b = RUNS[0], RUNS[1]
    values = compare_q("-m", measure, QRELS, a, b)
    per_query = {q: v for (_, _, _, q), v in values.items() if q != "all"}
    expected = sorted(per_query, key=lambda q: (-abs(per_query[q]), query_sort_key(q)))
    result = invoke("explain", "-m", measure, "--top", 7, QRELS, a, b)
    assert result.exit_code == 0, result.stderr
    assert _explained_queries(result.stdout) == expected[:7]
    default = invoke("explain", "-m", f"{measure},rpp", QRELS, a, b)
    assert _explained_queries(default.stdout) == expected[:5]
    if measure == "lexiprecision":  # many |Delta| = 1: ties go by query id
        assert [abs(per_query[q]) for q in expected[:7]] == [1.0] * 7
        assert expected[:7] == sorted(expected[:7], key=query_sort_key)


def test_queries_in_the_order_given():
    result = invoke(
        "explain", "--query", "310", "--query", "301", "--query", "310", QRELS, RUNS[0], RUNS[1]
    )
    assert result.exit_code == 0, result.stderr
    assert _explained_queries(result.stdout) == ["310", "301"]


def test_old_spelling_q_still_works_with_a_notice(tmp_path):
    """-q QUERY, the spelling of --query up to 0.1.0 (-q is --per-query in compare and
    metrics), gives the same output and exit status, with one deprecation line on stderr."""
    for fmt in ("text", "tsv"):
        new = invoke("explain", "-f", fmt, "--query", "310", "--query", "301", QRELS, *RUNS[:2])
        old = invoke("explain", "-f", fmt, "-q", "310", "-q", "301", QRELS, *RUNS[:2])
        assert new.exit_code == old.exit_code == 0, old.stderr
        assert old.stdout == new.stdout != ""
        if fmt == "text":
            assert _explained_queries(new.stdout) == ["310", "301"]
        assert new.stderr == ""
        assert old.stderr == (
            "prefeval: explain -q QUERY is deprecated, use --query QUERY (-q is --per-query "
            "in compare and metrics; explain -q goes in the next release)\n"
        )
    out = tmp_path / "why.tsv"
    old = invoke("explain", "-f", "tsv", "-q", "301", "-o", out, QRELS, *RUNS[:2])
    assert old.exit_code == 0 and old.stdout == "" and "deprecated" in old.stderr
    assert (
        out.read_text() == invoke("explain", "-f", "tsv", "--query", "301", QRELS, *RUNS[:2]).stdout
    )
    # the old spelling and the new one together: which order was meant is unclear
    both = invoke("explain", "-q", "301", "--query", "310", QRELS, *RUNS[:2])
    _usage_error(both, "deprecated", "give --query only, not -q (its deprecated spelling) too")
    _usage_error(invoke("explain", "-q", "301", "--top", "2", QRELS, *RUNS[:2]), "not both")


def test_query_is_the_only_documented_spelling():
    """explain --help shows --query, not -q (which means --per-query in compare and
    metrics); no command gives -q another meaning."""
    help_text = invoke("explain", "--help").stdout
    assert "--query QUERY" in help_text
    assert re.findall(r"[\w-]* ?(?<![\w-])-q\b", help_text) == ["compare -q"]
    for command in ("compare", "metrics"):
        assert "-q, --per-query" in invoke(command, "--help").stdout


def test_tsv_csv_jsonl_rows():
    args = ["--query", "301", QRELS, RUNS[0], RUNS[1]]
    tsv = invoke("explain", "-f", "tsv", *args)
    assert tsv.exit_code == 0, tsv.stderr
    frame = read_tsv(tsv.stdout)
    assert list(frame.columns) == COLUMNS
    expected = explain(QRELS, [RUNS[0], RUNS[1]], queries=["301"], notify=None)
    assert len(frame) == len(expected)
    assert list(frame["row"][:7]) == ["measure"] * 6 + ["population"]
    level = frame[frame["row"] == "level"].iloc[0]
    assert level["lexiprecision_decides"] == "true" and level["retrieved_a"] == "true"
    population = frame[frame["row"] == "population"].iloc[0]
    assert population["level"] == population["pos_a"] == population["retrieved_a"] == ""
    measures = frame[frame["row"] == "measure"]
    compared = compare_q("-m", "rpp,dcgrpp,invrpp,LR,sgnLP,rrLP", QRELS, RUNS[0], RUNS[1])
    for name, value in zip(measures["measure"], measures["value"]):
        assert float(value) == compared[name, "sys01", "sys02", "301"]

    csv = invoke("explain", "-f", "csv", *args)
    assert pd.read_csv(io.StringIO(csv.stdout), dtype=str, keep_default_na=False).equals(frame)

    jsonl = invoke("explain", "-f", "jsonl", *args)
    rows = [json.loads(line) for line in jsonl.stdout.splitlines()]
    assert len(rows) == len(frame)
    assert all(list(row) == COLUMNS for row in rows)
    level = next(r for r in rows if r["row"] == "level")
    assert isinstance(level["pos_a"], int) and isinstance(level["p_dcg"], float)
    assert level["lexiprecision_decides"] is True
    first_pop = next(r for r in rows if r["row"] == "population")
    assert first_pop["level"] is None and first_pop["pos_a"] is None
    assert isinstance(first_pop["sgn"], int) and first_pop["measure"] == ""

    rounded = invoke("explain", "-f", "tsv", "-p", "3", *args)
    values = read_tsv(rounded.stdout)["p_dcg"]
    assert all(v == "" or len(v.split(".")[1]) == 3 for v in values)


def test_text_values_as_compare_writes_them(tmp_path):
    out = tmp_path / "why.txt"
    result = invoke("explain", "-p", "4", "--query", "310", "-o", out, QRELS, RUNS[0], RUNS[1])
    assert result.exit_code == 0 and result.stdout == ""
    text = out.read_text()
    compared = invoke("compare", "-q", "-p", "4", QRELS, RUNS[0], RUNS[1])
    rows = read_tsv(compared.stdout)
    assert (rows["query_id"] == "310").sum() == 6
    for _, row in rows[rows["query_id"] == "310"].iterrows():
        assert f"  {row['measure'].ljust(15)}  {row['value']}\n" in text


def test_subtopic_block_and_background():
    result = invoke("explain", "-m", "strpp", "--query", "301", SUBTOPICS, RUNS[0], RUNS[1])
    assert result.exit_code == 0, result.stderr
    assert "subtopic RPP (eq. 6), p(t) = m_t / sum m" in result.stdout
    assert "  subtopic=*" in result.stdout
    assert "graded RPP" not in result.stdout  # only the families of the measures asked


# --------------------------------------------------------------------------- errors


def _usage_error(result, *words):
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    for word in words:
        assert word in result.stderr


def test_unknown_query_is_a_usage_error(tmp_path):
    out = tmp_path / "x.tsv"
    result = invoke(
        "explain", "--query", "301", "--query", "999", "-o", out, QRELS, RUNS[0], RUNS[1]
    )
    _usage_error(result, "--query 999: no such query in the qrels")
    assert not out.exists()


def test_query_without_relevant_documents(tmp_path):
    qrels = write_qrels(tmp_path / "qrels", [("1", 0, "d1", 1), ("2", 0, "d2", 0)])
    run = [("1", "d1", 2.0), ("2", "d2", 1.0)]
    a, b = write_run(tmp_path / "a", run), write_run(tmp_path / "b", run[::-1])
    result = invoke("explain", "--query", "2", qrels, a, b)
    _usage_error(result, "--query 2: the query has no relevant document (grade>0)")


def test_same_run_twice_and_other_errors():
    result = invoke("explain", QRELS, RUNS[0], RUNS[0])
    _usage_error(result, "two runs are named 'sys01'")
    _usage_error(
        invoke("explain", "--query", "301", "--top", "2", QRELS, RUNS[0], RUNS[1]), "not both"
    )
    for runs in ([RUNS[0]], RUNS[:3]):
        _usage_error(invoke("explain", QRELS, *runs), "explain compares two runs")
    _usage_error(invoke("explain", "-m", "strpp", QRELS, RUNS[0], RUNS[1]), "subtopic")
    _usage_error(invoke("explain", "--top", "0", QRELS, RUNS[0], RUNS[1]), "--top")


def test_subtopic_measure_undefined_on_a_query(tmp_path):
    """Query 2 has plain judgments only: no subtopic population, strpp undefined there
    (no measure row, a line in the text, and not among the --top queries of strpp)."""
    qrels = write_qrels(
        tmp_path / "qrels",
        [("1", 1, "d1", 1), ("1", 2, "d2", 1), ("2", 0, "d3", 1), ("2", 0, "d4", 2)],
    )
    a = write_run(tmp_path / "a", [("1", "d1", 2.0), ("1", "d2", 1.0), ("2", "d3", 1.0)])
    b = write_run(tmp_path / "b", [("1", "d2", 2.0), ("2", "d4", 2.0), ("2", "d3", 1.0)])
    frame = explain(qrels, [a, b], Options(measures=("strpp,rpp",)), queries=["2"], notify=None)
    assert list(frame.loc[frame["row"] == "measure", "measure"]) == ["rpp"]
    assert "subtopic" not in set(frame["family"])
    result = invoke("explain", "-m", "strpp,rpp", "--query", "2", qrels, a, b)
    assert "subtopic RPP: no subtopic-relevant document, undefined here" in result.stdout
    top = invoke("explain", "-m", "strpp", qrels, a, b)
    assert _explained_queries(top.stdout) == ["1"]
    # query 1: subtopics 1 and 2 ({d1}, {d2}) and the background {d1, d2}, p(t) = 1/4, 1/4, 2/4
    q1 = explain(qrels, [a, b], Options(measures=("strpp",)), queries=["1"], notify=None)
    pops = q1[(q1["row"] == "population") & (q1["family"] == "subtopic")]
    assert list(pops["population"]) == ["subtopic=1", "subtopic=2", "subtopic=*"]
    assert list(pops["weight"]) == [0.25, 0.25, 0.5]
    # {d1}: A 1, B -; {d2}: A 2, B 1; {d1, d2}: A [1, 2], B [1, -]
    assert list(pops["sgn"]) == [1, -1, 1]
    assert q1.loc[q1["measure"] == "strpp", "value"].item() == 0.25  # (1 - 1 + 1) / (1 + 1 + 2)
