"""Reading back prefeval's tables: complete grids, subtopic measures,
duplicate rows, query order independent of the hash seed, byte-order marks, quoting."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import invoke, write_qrels, write_run

import prefeval
from prefeval.analysis.evidence import gather_inputs
from prefeval.core.errors import InputError
from prefeval.core.qrels import query_sort_key
from prefeval.io.tables import (
    METRIC_COLUMNS,
    PREF_COLUMNS,
    cube_from_table,
    metrics_from_table,
    read_table,
)
from prefeval.io.writers import iter_chunks
from prefeval.options import Options

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "sample_data"
SAMPLE_RUNS = sorted(str(p) for p in (SAMPLE / "runs").iterdir())
BOM = b"\xef\xbb\xbf"
SUBTOPIC_MEASURES = {"strpp", "stdcgrpp", "stinvrpp"}

NO_BASELINES = Options(baselines=())  # gather_inputs without baselines


@pytest.fixture(autouse=True, scope="module")
def _own_cache(tmp_path_factory):
    """A cache of this module's own: the cube cache's key covers the relevant documents
    but not their grades or subtopics, so the cube of ``one_plain`` below (only 305's
    subtopics differ) would be served for sample_data/qrels.subtopics.txt elsewhere."""
    old = os.environ.get("PREFEVAL_CACHE_DIR")
    os.environ["PREFEVAL_CACHE_DIR"] = str(tmp_path_factory.mktemp("tables-cache"))
    yield
    if old is None:
        os.environ.pop("PREFEVAL_CACHE_DIR", None)
    else:
        os.environ["PREFEVAL_CACHE_DIR"] = old


def ok(result):
    assert result.exit_code == 0, (result.exit_code, result.stderr, result.exception)
    return result.stdout


def fails(result, path) -> str:
    """An input error: exit 2, nothing on stdout, one line ``PATH: message`` on stderr."""
    assert result.exit_code == 2, (result.exit_code, result.stderr, result.exception)
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{path}: "), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def rows_of(*rows) -> pd.DataFrame:
    return pd.DataFrame(list(rows), columns=PREF_COLUMNS)


def write_tsv(path: Path, frame: pd.DataFrame) -> Path:
    path.write_bytes(b"".join(iter_chunks(frame, "tsv")))
    return path


@pytest.fixture(scope="module")
def one_plain(tmp_path_factory) -> Path:
    """sample_data/qrels.subtopics.txt with query 305 judged without subtopics (its
    documents keep their general grade, iteration 0): the subtopic measures have no
    value on 305, the others do."""
    folder = tmp_path_factory.mktemp("one-plain")
    rows, general = [], {}
    for line in (SAMPLE / "qrels.subtopics.txt").read_text().splitlines():
        q, it, doc, grade = line.split()
        if q == "305":
            general[doc] = max(general.get(doc, -9), int(grade))
        else:
            rows.append((q, it, doc, grade))
    rows += [("305", 0, doc, grade) for doc, grade in general.items()]
    return write_qrels(folder / "qrels.txt", rows)


@pytest.fixture(scope="module")
def subtopic_prefs(one_plain, tmp_path_factory) -> dict:
    """compare -q on ``one_plain`` and the sample runs, and the engine's cube."""
    folder = tmp_path_factory.mktemp("subtopic-prefs")
    path = folder / "prefs.tsv"
    ok(invoke("compare", "-q", "-o", path, one_plain, *SAMPLE_RUNS))
    engine = gather_inputs(
        str(one_plain), SAMPLE_RUNS, options=NO_BASELINES, notify=None
    ).evidence.cube
    return {"path": path, "table": read_table(str(path), PREF_COLUMNS), "engine": engine}


# --------------------------------------------------------------------------- query order


def test_query_sort_key_is_a_total_order():
    ids = ["b", "10", "001", "2", "1", "01", "0", "00", "A", "a1", "9", "010", "٣"]
    expected = ["0", "00", "001", "01", "1", "2", "9", "010", "10", "A", "a1", "b", "٣"]
    assert sorted(ids, key=query_sort_key) == expected
    rng = random.Random(7)
    for _ in range(20):
        rng.shuffle(ids)
        assert sorted(ids, key=query_sort_key) == expected
    assert len({query_sort_key(q) for q in ids}) == len(ids)  # distinct ids, distinct keys
    # a very long numeric id is ordered by value without int() (no digit limit)
    long = "9" * 5000
    assert sorted([long, "8", "0" + long], key=query_sort_key) == ["8", "0" + long, long]


def test_table_queries_in_a_stable_order():
    rows = [("m", "a", "b", q, 0.5) for q in ["1", "001", "x", "01", "2", "0001"]]
    for seed in range(5):
        random.Random(seed).shuffle(rows)
        cube = cube_from_table(rows_of(*rows))
        assert cube.query_ids == ["0001", "001", "01", "1", "2", "x"]


def _prefeval(*args, seed: int, cwd: Path) -> bytes:
    exe = Path(sys.executable).with_name("prefeval")
    command = [str(exe)] if exe.exists() else [sys.executable, "-m", "prefeval"]
    env = {**os.environ, "PYTHONHASHSEED": str(seed)}
    done = subprocess.run(
        [*command, *map(str, args)], cwd=cwd, env=env, capture_output=True, check=False
    )
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout


def test_output_does_not_depend_on_the_hash_seed(tmp_path):
    # query ids 1, 01, 001, 0001 must not share one sort key, or their order (and the
    # float sum of the mean win rate) would follow set iteration, i.e. PYTHONHASHSEED
    table = rows_of(
        ("rpp", "a", "b", "1", 0.1),
        ("rpp", "a", "b", "01", 0.2),
        ("rpp", "a", "b", "001", 0.3),
        ("rpp", "a", "b", "0001", 0.7),
        ("rpp", "a", "b", "2", 0.4),
    )
    write_tsv(tmp_path / "prefs.tsv", table)
    args = ["order", "--no-baselines", "--method", "winrate", "--prefs", "prefs.tsv"]
    outputs = [_prefeval(*args, seed=seed, cwd=tmp_path) for seed in (0, 1, 2, 3)]
    assert outputs[0] == outputs[1] == outputs[2] == outputs[3]
    # queries 0001, 001, 01, 1, 2: ((((0.7 + 0.3) + 0.2) + 0.1) + 0.4) / 5 = 0.34
    assert outputs[0].decode() == (
        "measure\tmethod\trank\trun\tscore\nrpp\twinrate\t1\ta\t0.34\nrpp\twinrate\t2\tb\t-0.34\n"
    )
    # the engine orders the qrels' queries the same way, and so does compare -q
    write_qrels(
        tmp_path / "qrels.txt",
        [(q, 0, d, 1) for q in ["1", "01", "001", "2"] for d in ("d1", "d2")],
    )
    for name, docs in (("a", ["d1", "x", "d2"]), ("b", ["x", "d2", "y", "d1"])):
        write_run(
            tmp_path / name,
            [(q, d, 10.0 - i) for q in ["001", "1", "2", "01"] for i, d in enumerate(docs)],
        )
    compare = ["compare", "-q", "-n", "qrels.txt", "a", "b"]
    outputs = [_prefeval(*compare, seed=seed, cwd=tmp_path) for seed in (0, 1)]
    assert outputs[0] == outputs[1]
    lines = outputs[0].decode().splitlines()
    assert [line.split("\t")[3] for line in lines[1:5]] == ["001", "01", "1", "2"]


# --------------------------------------------------------------------------- complete grids


def test_complete_table_from_compare_is_accepted(subtopic_prefs, one_plain):
    engine, table = subtopic_prefs["engine"], subtopic_prefs["table"]
    assert "305" in engine.query_ids
    q305 = engine.query_ids.index("305")
    for k, name in enumerate(engine.measures):
        # the subtopic measures have no value on 305, so compare -q wrote no row for it
        assert np.isnan(engine.values[k, :, q305]).all() == (name in SUBTOPIC_MEASURES)
        rows = table[(table["measure"] == name) & (table["query_id"] == "305")]
        assert len(rows) == (0 if name in SUBTOPIC_MEASURES else 15)
    back = cube_from_table(table, str(subtopic_prefs["path"]))
    assert back.measures == engine.measures
    assert back.runs == engine.runs
    assert back.query_ids == engine.query_ids  # 305 is named by the other measures
    np.testing.assert_array_equal(back.pairs, engine.pairs)
    np.testing.assert_array_equal(back.values, engine.values)  # NaN on 305 included
    # only a subtopic measure: still on every query the table names, NaN on 305
    only = cube_from_table(table, "x", ["strpp"])
    assert only.query_ids == engine.query_ids
    np.testing.assert_array_equal(only.values[0], engine.values[engine.measures.index("strpp")])
    # with the qrels, and from the command line: the same as from the runs
    path = subtopic_prefs["path"]
    with_qrels = gather_inputs(str(one_plain), prefs=str(path), options=NO_BASELINES, notify=None)
    np.testing.assert_array_equal(with_qrels.evidence.cube.values, engine.values)
    from_runs = ok(invoke("order", "--no-baselines", one_plain, *SAMPLE_RUNS))
    assert ok(invoke("order", "--no-baselines", "--prefs", path)) == from_runs
    assert ok(invoke("order", "--no-baselines", "--prefs", path, one_plain)) == from_runs


def test_missing_pair_row_of_one_query(tmp_path):
    path = tmp_path / "prefs.tsv"
    ok(invoke("compare", "-q", "-o", path, SAMPLE / "qrels.txt", *SAMPLE_RUNS))
    table = read_table(str(path), PREF_COLUMNS)
    drop = (
        (table["measure"] == "invrpp")
        & (table["run_a"] == "sys02")
        & (table["run_b"] == "sys04")
        & (table["query_id"] == "307")
    )
    assert drop.sum() == 1
    with pytest.raises(InputError) as error:
        cube_from_table(table[~drop], str(path))
    assert error.value.message == (
        "incomplete table: no row for measure invrpp, runs sys02 and sys04, query 307 "
        "(1 missing in all; the table must hold every measure x run pair x query it names)"
    )
    bad = write_tsv(tmp_path / "bad.tsv", table[~drop])
    line = fails(invoke("order", "--no-baselines", "--prefs", bad), bad)
    assert "measure invrpp, runs sys02 and sys04, query 307" in line
    # a whole pair missing: the first missing row is named, with the count
    pair = (table["run_a"] == "sys01") & (table["run_b"] == "sys06")
    with pytest.raises(InputError, match=r"measure rpp, runs sys01 and sys06, query 301 \(120 "):
        cube_from_table(table[~pair], "x.tsv")
    # a query missing for one measure only (the others name it)
    query = (table["measure"] == "lexirecall") & (table["query_id"] == "320")
    with pytest.raises(InputError, match=r"lexirecall, runs sys01 and sys02, query 320 \(15 "):
        cube_from_table(table[~query], "x.tsv")


def test_subtopic_measure_may_lack_whole_queries_not_pairs(subtopic_prefs, one_plain, tmp_path):
    table, engine = subtopic_prefs["table"], subtopic_prefs["engine"]
    strpp = table["measure"] == "strpp"
    # some pairs of a query: an error
    drop = strpp & (table["query_id"] == "306") & (table["run_a"] == "sys03")
    assert drop.sum() == 3
    with pytest.raises(InputError) as error:
        cube_from_table(table[~drop], "x.tsv")
    assert error.value.message == (
        "incomplete table: no row for measure strpp, runs sys03 and sys04, query 306 "
        "(3 missing in all; a subtopic measure may leave out a whole query, not some "
        "pairs of it)"
    )
    # a whole query (every pair): accepted without the qrels, NaN there ...
    whole = strpp & (table["query_id"] == "306")
    cube = cube_from_table(table[~whole], "x.tsv")
    k, q = cube.measures.index("strpp"), cube.query_ids.index("306")
    assert np.isnan(cube.values[k, :, q]).all()
    expected = engine.values.copy()
    expected[k, :, q] = np.nan
    np.testing.assert_array_equal(cube.values, expected)
    # ... but the qrels say 306 has subtopic judgments: the engine gives it a value
    path = write_tsv(tmp_path / "prefs.tsv", table[~whole])
    ok(invoke("order", "--no-baselines", "--prefs", path))
    line = fails(invoke("order", "--no-baselines", "--prefs", path, one_plain), path)
    assert line == (
        f"{path}: incomplete table: no rows for measure strpp, query 306 (1 such queries), "
        f"which has subtopic-relevant documents in {one_plain}: was the table written from "
        "other judgments or at another relevance level?"
    )
    # a standard measure lacking the query no other row names is caught by the qrels
    rpp_gone = table[~table["query_id"].isin(["305"])]
    path = write_tsv(tmp_path / "no305.tsv", rpp_gone)
    ok(invoke("order", "--no-baselines", "--prefs", path))  # 305 named by no row
    line = fails(invoke("order", "--no-baselines", "--prefs", path, one_plain), path)
    assert "no rows for measure rpp, query 305 (1 such queries), which " in line


def test_table_from_another_relevance_level(tmp_path):
    qrels = SAMPLE / "qrels.txt"
    level3 = tmp_path / "prefs-l3.tsv"
    ok(
        invoke(
            "compare", "-q", "-l", "3", "-m", "rpp,lexirecall", "-o", level3, qrels, *SAMPLE_RUNS
        )
    )
    # 13 of the 20 queries have a document of grade >= 3; the first one without is 302
    line = fails(invoke("order", "--no-baselines", "--prefs", level3, qrels), level3)
    assert line == (
        f"{level3}: incomplete table: no rows for measure rpp, query 302 (7 such queries), "
        f"which {qrels} evaluates: was the table written from other judgments or at another "
        "relevance level?"
    )
    same = ok(
        invoke("order", "--no-baselines", "-l", "3", "-m", "rpp,lexirecall", qrels, *SAMPLE_RUNS)
    )
    assert ok(invoke("order", "--no-baselines", "-l", "3", "--prefs", level3, qrels)) == same
    # the metrics table names the evaluated queries too
    metrics = tmp_path / "metrics.tsv"
    ok(invoke("metrics", "-q", "-B", "AP", "-o", metrics, qrels, *SAMPLE_RUNS))
    line = fails(invoke("order", "--prefs", level3, "--metrics", metrics), level3)
    assert f"no rows for measure rpp, query 302 (7 such queries), which {metrics} evaluates" in line
    metrics3 = tmp_path / "metrics-l3.tsv"
    ok(invoke("metrics", "-q", "-l", "3", "-B", "AP", "-o", metrics3, qrels, *SAMPLE_RUNS))
    with_runs = ok(
        invoke("order", "-l", "3", "-m", "rpp,lexirecall", "-B", "AP", qrels, *SAMPLE_RUNS)
    )
    assert ok(invoke("order", "--prefs", level3, "--metrics", metrics3)) == with_runs


# --------------------------------------------------------------------------- duplicates


def test_duplicate_preference_rows():
    rows = rows_of(
        ("m", "a", "b", "1", 0.5),
        ("m", "b", "c", "1", 0.25),
        ("m", "a", "c", "1", 1.0),
    )
    cube = cube_from_table(rows)
    np.testing.assert_array_equal(cube.values[0, :, 0], [0.5, 1.0, 0.25])
    # both directions of one pair: still one cube, values negated ...
    flipped = rows_of(
        ("m", "a", "b", "1", 0.5), ("m", "c", "b", "1", -0.25), ("m", "a", "c", "1", 1.0)
    )
    np.testing.assert_array_equal(cube_from_table(flipped).values, cube.values)
    # ... but a pair given both ways for one measure and query is a duplicate
    with pytest.raises(InputError) as error:
        cube_from_table(pd.concat([rows, rows_of(("m", "c", "b", "1", -0.25))]), "x.tsv")
    assert error.value.message == (
        "measure m, runs b and c, query 1 appear more than once: rows 2 and 4 "
        "(a pair in both orders counts twice)"
    )
    with pytest.raises(InputError) as error:
        cube_from_table(pd.concat([rows, rows.iloc[:1]]), "x.tsv")
    assert (
        error.value.message
        == "measure m, runs a and b, query 1 appear more than once: rows 1 and 4"
    )
    # the same pair for another query or measure is not a duplicate
    other = rows_of(*[("m", a, b, "2", v) for _, a, b, _, v in rows.itertuples(index=False)])
    assert cube_from_table(pd.concat([rows, other])).query_ids == ["1", "2"]


def test_duplicate_metric_rows(tmp_path):
    prefs = tmp_path / "prefs.tsv"
    metrics = tmp_path / "metrics.tsv"
    three = SAMPLE_RUNS[:3]
    ok(invoke("compare", "-q", "-m", "rpp", "-o", prefs, SAMPLE / "qrels.txt", *three))
    ok(invoke("metrics", "-q", "-n", "-m", "AP,RR", "-o", metrics, SAMPLE / "qrels.txt", *three))
    good = ok(invoke("order", "--prefs", prefs, "--metrics", metrics))
    table = read_table(str(metrics), METRIC_COLUMNS)
    assert len(table) == 2 * 3 * 20
    runs = ["sys01", "sys02", "sys03"]
    queries = [str(q) for q in range(301, 321)]
    matrices = metrics_from_table(table, runs, queries)
    assert matrices["AP"].shape == (20, 3)
    row = table[
        (table["measure"] == "RR") & (table["run"] == "sys02") & (table["query_id"] == "310")
    ]
    for value in (row["value"].iloc[0], 0.0):  # the same value or another: an error
        twice = pd.concat([table, row.assign(value=value)], ignore_index=True)
        with pytest.raises(InputError) as error:
            metrics_from_table(twice, runs, queries, "m.tsv")
        assert error.value.message == (
            f"metric RR, run sys02, query 310 appears more than once: rows {row.index[0] + 1} "
            f"and {len(table) + 1}"
        )
    bad = tmp_path / "bad.tsv"
    bad.write_bytes(metrics.read_bytes() + b"RR\tsys02\t310\t0.0\n")
    line = fails(invoke("order", "--prefs", prefs, "--metrics", bad), bad)
    assert "metric RR, run sys02, query 310 appears more than once" in line
    assert ok(invoke("order", "--prefs", prefs, "--metrics", metrics)) == good


def test_run_names_alike_in_a_table_are_refused(tmp_path):
    """A --prefs or --metrics table naming one run two ways that print alike (equal in
    Unicode NFC: a composed and a decomposed 'é') is refused as run files are: one line,
    exit 2; in Python the InputError."""
    composed, decomposed = "caf\u00e9", "cafe\u0301"
    prefs = tmp_path / "prefs.tsv"
    metrics = tmp_path / "metrics.tsv"
    two = SAMPLE_RUNS[:2]
    ok(invoke("compare", "-q", "-m", "rpp", "-o", prefs, SAMPLE / "qrels.txt", *two))
    ok(invoke("metrics", "-q", "-n", "-m", "AP", "-o", metrics, SAMPLE / "qrels.txt", *two))
    renamed = {"sys01": composed, "sys02": decomposed}
    table = read_table(str(prefs), PREF_COLUMNS)
    alike_prefs = write_tsv(
        tmp_path / "alike-prefs.tsv",
        table.assign(run_a=table["run_a"].map(renamed), run_b=table["run_b"].map(renamed)),
    )
    named = "two runs are named alike, 'caf\\xe9' and 'cafe\\u0301' (one Unicode NFC name)"
    line = fails(invoke("order", "--prefs", alike_prefs, "--no-baselines"), alike_prefs)
    assert line == f"{alike_prefs}: {named} (row 1); give runs distinct names"
    with pytest.raises(InputError) as error:
        prefeval.order(prefs=str(alike_prefs), baselines=())
    assert error.value.message == f"{named} (row 1); give runs distinct names"
    with pytest.raises(InputError, match="named alike"):
        prefeval.pairs(prefs=str(alike_prefs))
    # names that differ in Unicode NFC too are two runs
    apart = {"sys01": composed, "sys02": "cafe"}
    distinct = write_tsv(
        tmp_path / "distinct.tsv",
        table.assign(run_a=table["run_a"].map(apart), run_b=table["run_b"].map(apart)),
    )
    ranked = prefeval.order(prefs=str(distinct), baselines=())
    assert sorted(set(ranked["run"])) == ["cafe", composed]
    # a metrics table: its run column
    mtable = read_table(str(metrics), METRIC_COLUMNS)
    alike_metrics = write_tsv(
        tmp_path / "alike-metrics.tsv", mtable.assign(run=mtable["run"].map(renamed))
    )
    line = fails(invoke("order", "--prefs", prefs, "--metrics", alike_metrics), alike_metrics)
    assert line == f"{alike_metrics}: {named} (rows 1 and 21); give runs distinct names"
    with pytest.raises(InputError) as error:
        prefeval.order(prefs=str(prefs), metrics=str(alike_metrics))
    assert error.value.message == f"{named} (rows 1 and 21); give runs distinct names"


# --------------------------------------------------------------------------- BOM and quoting


@pytest.mark.parametrize("fmt", ["tsv", "csv", "jsonl"])
def test_byte_order_mark(tmp_path, fmt):
    plain = tmp_path / f"prefs.{fmt}"
    ok(
        invoke(
            "compare",
            "-q",
            "-m",
            "rpp,lexirecall",
            "-f",
            fmt,
            "-o",
            plain,
            SAMPLE / "qrels.txt",
            *SAMPLE_RUNS,
        )
    )
    marked = tmp_path / f"bom.{fmt}"
    marked.write_bytes(BOM + plain.read_bytes().replace(b"\n", b"\r\n"))  # as Notepad saves it
    expected = read_table(str(plain), PREF_COLUMNS)
    got = read_table(str(marked), PREF_COLUMNS)
    pd.testing.assert_frame_equal(got, expected)
    assert list(got.columns) == PREF_COLUMNS
    metrics = tmp_path / f"metrics.{fmt}"
    ok(
        invoke(
            "metrics",
            "-q",
            "-B",
            "AP",
            "-f",
            fmt,
            "-o",
            metrics,
            SAMPLE / "qrels.txt",
            *SAMPLE_RUNS,
        )
    )
    metrics_bom = tmp_path / f"metrics-bom.{fmt}"
    metrics_bom.write_bytes(BOM + metrics.read_bytes())
    good = ok(invoke("order", "--prefs", plain, "--metrics", metrics))
    assert ok(invoke("order", "--prefs", marked, "--metrics", metrics_bom)) == good


ODD_RUNS = ['a"b', "x,y", "#run", '"q"', "p#q"]
ODD_QUERIES = ["1", 'q"2', "2,3", "q#4", '"5"', "'6'"]


@pytest.fixture(scope="module")
def odd_names(tmp_path_factory) -> dict:
    """Run names and query ids with quotes, commas and '#' (qrels lines starting with
    '#' are comments, so no query id starts with it; a run name may)."""
    folder = tmp_path_factory.mktemp("odd")
    rng = np.random.default_rng(5)
    docs = [f"d{i}" for i in range(6)]
    grades = rng.integers(0, 3, (len(ODD_QUERIES), len(docs)))
    rows = [(q, 0, d, int(g)) for q, row in zip(ODD_QUERIES, grades) for d, g in zip(docs, row)]
    # every query has a relevant document: d6, grade 2
    qrels = write_qrels(folder / "qrels.txt", rows + [(q, 0, "d6", 2) for q in ODD_QUERIES])
    runs = []
    for name in ODD_RUNS:
        order = [str(d) for d in rng.permutation([*docs, "d6", "n1", "n2"])]
        runs.append(
            write_run(
                folder / name, [(q, d, 20.0 - i) for q in ODD_QUERIES for i, d in enumerate(order)]
            )
        )
    return {"folder": folder, "qrels": qrels, "runs": runs}


@pytest.mark.parametrize("fmt", ["tsv", "csv", "jsonl"])
def test_quotes_commas_and_hashes_round_trip(odd_names, fmt):
    folder, qrels, runs = odd_names["folder"], odd_names["qrels"], odd_names["runs"]
    path = folder / f"prefs.{fmt}"
    ok(invoke("compare", "-q", "-f", fmt, "-o", path, qrels, *runs))
    table = read_table(str(path), PREF_COLUMNS)
    assert set(table["run_a"]) | set(table["run_b"]) == set(ODD_RUNS)
    assert set(table["query_id"]) == {*ODD_QUERIES, "all"}
    cube = cube_from_table(table, str(path))
    engine = gather_inputs(
        str(qrels), [str(r) for r in runs], options=NO_BASELINES, notify=None
    ).evidence.cube
    assert cube.runs == engine.runs == ODD_RUNS
    assert cube.query_ids == engine.query_ids == ["1", '"5"', "'6'", "2,3", 'q"2', "q#4"]
    np.testing.assert_array_equal(cube.values, engine.values)
    from_runs = ok(invoke("order", "--no-baselines", qrels, *runs))
    assert ok(invoke("order", "--no-baselines", "--prefs", path)) == from_runs
    assert ok(invoke("order", "--no-baselines", "--prefs", path, qrels)) == from_runs
    # the metrics table with the same names, in the same format
    metrics = folder / f"metrics.{fmt}"
    ok(invoke("metrics", "-q", "-B", "AP", "-f", fmt, "-o", metrics, qrels, *runs))
    with_runs = ok(invoke("order", "-B", "AP", qrels, *runs))
    assert ok(invoke("order", "--prefs", path, "--metrics", metrics)) == with_runs


def test_tsv_fields_are_verbatim(tmp_path):
    # a tsv field that starts and ends with a quote keeps its quotes (the writer never
    # quotes tsv); in csv the same text is written quoted and read back unquoted
    text = 'measure\trun_a\trun_b\tquery_id\tvalue\nrpp\t"a"\tb,c\t"1"\t0.5\n'
    tsv = tmp_path / "t.tsv"
    tsv.write_text(text)
    got = read_table(str(tsv), PREF_COLUMNS)
    assert got.iloc[0].tolist() == ["rpp", '"a"', "b,c", '"1"', 0.5]
    csv = tmp_path / "t.csv"
    csv.write_text('measure,run_a,run_b,query_id,value\nrpp,"""a""","b,c","""1""",0.5\n')
    pd.testing.assert_frame_equal(read_table(str(csv), PREF_COLUMNS), got)
    jsonl = tmp_path / "t.jsonl"
    jsonl.write_text(json.dumps(dict(zip(PREF_COLUMNS, got.iloc[0].tolist()))) + "\n")
    pd.testing.assert_frame_equal(read_table(str(jsonl), PREF_COLUMNS), got)


@pytest.mark.parametrize("value", [1.5, -2.0, float("inf"), float("-inf")])
def test_value_outside_minus_one_to_one_is_not_a_preference(value):
    rows = rows_of(("m", "a", "b", "1", 0.5), ("m", "a", "b", "2", value))
    with pytest.raises(InputError) as error:
        cube_from_table(rows, "x.tsv")
    assert error.value.message == (
        f"row 2: value {value!r} is not a preference (a preference lies in [-1, 1])"
    )


def test_preference_at_the_bounds_and_by_rounding_is_accepted():
    # +-1 exactly, and 1 + 1e-15: a weighted sum of signs may round just past 1
    rows = rows_of(
        ("m", "a", "b", "1", 1.0), ("m", "a", "b", "2", -1.0), ("m", "a", "b", "3", 1 + 1e-15)
    )
    np.testing.assert_array_equal(cube_from_table(rows).values[0, 0], [1.0, -1.0, 1 + 1e-15])


def test_cli_rejects_a_prefs_value_outside_the_range(tmp_path):
    table = tmp_path / "prefs.tsv"
    table.write_text("measure\trun_a\trun_b\tquery_id\tvalue\nrpp\ta\tb\t1\t0.5\nrpp\ta\tb\t2\t3\n")
    result = invoke("order", "--prefs", table, "--no-baselines")
    assert result.exit_code == 2
    assert f"{table}: row 2: value 3.0 is not a preference" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("value", ["inf", "-inf", "Infinity"])
def test_metrics_value_must_be_finite(tmp_path, value):
    """An infinity ties with every number (prefeval.core.ties): a run with one would rank
    first with any other; a --metrics table (file or DataFrame) with one is an error citing
    the row.  A NaN is a missing value, refused as before."""
    prefs = tmp_path / "prefs.tsv"
    metrics = tmp_path / "metrics.tsv"
    three = SAMPLE_RUNS[:3]
    ok(invoke("compare", "-q", "-m", "rpp", "-o", prefs, SAMPLE / "qrels.txt", *three))
    ok(invoke("metrics", "-q", "-n", "-m", "AP", "-o", metrics, SAMPLE / "qrels.txt", *three))
    lines = metrics.read_text().splitlines(keepends=True)
    assert lines[3].startswith("AP\tsys01\t303\t")
    bad = tmp_path / "bad.tsv"
    bad.write_text("".join(lines[:3] + [f"AP\tsys01\t303\t{value}\n"] + lines[4:]))
    shown = repr(float(value))
    line = fails(invoke("order", "--prefs", prefs, "--metrics", bad), bad)
    assert line == (
        f"{bad}: row 3: value {shown} is not a metric value (a metric value is a finite number)"
    )
    for command in ("agree", "tau", "discpower"):
        assert fails(invoke(command, "--prefs", prefs, "--metrics", bad), bad) == line
    import prefeval

    table = read_table(str(metrics), METRIC_COLUMNS)
    table.loc[2, "value"] = float(value)
    with pytest.raises(InputError, match=r"^<metrics DataFrame>: row 3: value .* not a metric"):
        prefeval.order(prefs=str(prefs), metrics=table)
    with pytest.raises(InputError, match="missing value"):
        prefeval.order(prefs=str(prefs), metrics=table.assign(value=np.nan))


@pytest.mark.parametrize("value", [1.7e308, -1.7e308, 1e101])
def test_metrics_values_whose_sum_can_overflow_are_refused(tmp_path, value):
    """Two values of 1.7e308 have an infinite sum and mean: `order` ranked a finite run
    equal first with it (an infinity ties with every number) and `pairs` printed inf with
    a blank interval.  A --metrics value is at most 1e100 in magnitude, so that sums of
    values, differences and squares over the queries stay finite."""
    prefs = tmp_path / "prefs.tsv"
    metrics = tmp_path / "metrics.tsv"
    three = SAMPLE_RUNS[:3]
    ok(invoke("compare", "-q", "-m", "rpp", "-o", prefs, SAMPLE / "qrels.txt", *three))
    ok(invoke("metrics", "-q", "-n", "-m", "AP", "-o", metrics, SAMPLE / "qrels.txt", *three))
    lines = metrics.read_text().splitlines(keepends=True)
    assert lines[1].startswith("AP\tsys01\t") and lines[2].startswith("AP\tsys01\t")
    bad = tmp_path / "bad.tsv"
    row = [line.split("\t") for line in lines[1:3]]
    bad.write_text(
        "".join([lines[0]] + ["\t".join([*r[:3], f"{value!r}\n"]) for r in row] + lines[3:])
    )
    line = fails(invoke("order", "--prefs", prefs, "--metrics", bad), bad)
    assert line == (
        f"{bad}: row 1: value {value!r} is too large for a metric value (|value| <= 1e+100, "
        "so that sums over queries cannot overflow)"
    )
    assert fails(invoke("pairs", "--prefs", prefs, "--metrics", bad), bad) == line
    # at the bound, the values are taken and every sum stays finite
    edge = tmp_path / "edge.tsv"
    edge.write_text(bad.read_text().replace(repr(value), repr(1e100)))
    assert "inf" not in ok(invoke("pairs", "--prefs", prefs, "--metrics", edge))
