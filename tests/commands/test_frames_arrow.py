"""Tables of Arrow's C stream (pyarrow, polars, DuckDB) and ranx's Qrels/Run as the API's
qrels and runs: the same tables as the sample data's TREC files; clear errors; nothing of
polars, DuckDB or ranx imported unless the user passed one; a report shown inline."""

from __future__ import annotations

import base64
import gzip
import html
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

import prefeval
from prefeval.core.errors import InputError

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
QRELS = SAMPLE / "qrels.txt"
SUBTOPICS = SAMPLE / "qrels.subtopics.txt"
RUNS = sorted((SAMPLE / "runs").glob("input.*"))
NAMES = ["sys01", "sys02", "sys03", "sys04", "sys05", "sys06"]


def quiet(function, *args, **kwargs):
    return function(*args, notify=None, **kwargs)


def _lines(path: Path) -> list[list[str]]:
    """The whitespace-separated fields of a TREC file's lines, as trec_eval splits them."""
    raw = path.read_bytes()
    text = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
    return [line.split() for line in text.decode().splitlines() if line.strip()]


def _run_table(path: Path) -> pa.Table:
    """A run file as an Arrow table of its fields: ids as the text's strings."""
    rows = _lines(path)
    return pa.table(
        {
            "query_id": [r[0] for r in rows],
            "doc_id": [r[2] for r in rows],
            "score": pa.array([float(r[4]) for r in rows], pa.float64()),
        }
    )


def _qrels_table(path: Path) -> pa.Table:
    rows = _lines(path)
    return pa.table(
        {
            "query_id": [r[0] for r in rows],
            "iteration": [r[1] for r in rows],
            "doc_id": [r[2] for r in rows],
            "relevance": pa.array([int(r[3]) for r in rows], pa.int64()),
        }
    )


def _nested(table: pa.Table, value: str) -> dict:
    out: dict = {}
    for q, d, v in zip(*(table.column(c).to_pylist() for c in ("query_id", "doc_id", value))):
        out.setdefault(q, {})[d] = v
    return out


class NamedDict:
    """What prefeval reads of a ranx Qrels or Run: ``to_dict()`` and ``name``."""

    def __init__(self, mapping: dict, name: str | None = None):
        self.mapping = mapping
        self.name = name

    def to_dict(self) -> dict:
        return self.mapping


@pytest.fixture(scope="module")
def tables():
    runs = {name: _run_table(path) for name, path in zip(NAMES, RUNS)}
    many = pa.concat_tables(
        [t.append_column("run", pa.array([n] * t.num_rows)) for n, t in runs.items()]
    )
    # rows of every run interleaved: the order of the rows changes nothing
    many = many.take(pa.array(sorted(range(many.num_rows), key=lambda i: (i * 7919) % 5903)))
    return {"runs": runs, "many": many, "qrels": _qrels_table(QRELS)}


@pytest.fixture(scope="module")
def reference():
    return {
        "compare": quiet(prefeval.compare, QRELS, RUNS, per_query=True, summary=True),
        "metrics": quiet(prefeval.metrics, QRELS, RUNS, per_query=True, summary=True),
        "pairs": quiet(prefeval.pairs, QRELS, RUNS, baselines="AP"),
    }


def assert_as_text(qrels, runs, reference, flavour: str) -> None:
    """compare, metrics and pairs of ``qrels, runs`` equal those of the TREC files;
    ``qrels`` and ``runs`` may be functions giving them (a reader is read once)."""

    def given():
        return tuple(x() if callable(x) else x for x in (qrels, runs))

    got = quiet(prefeval.compare, *given(), per_query=True, summary=True)
    pd.testing.assert_frame_equal(got, reference["compare"], obj=f"compare, {flavour}")
    got = quiet(prefeval.metrics, *given(), per_query=True, summary=True)
    pd.testing.assert_frame_equal(got, reference["metrics"], obj=f"metrics, {flavour}")
    got = quiet(prefeval.pairs, *given(), baselines="AP")
    pd.testing.assert_frame_equal(got, reference["pairs"], obj=f"pairs, {flavour}")


def test_the_tables_hold_the_text(tables):
    """The tables built here are the files' rows (what the comparisons below rest on)."""
    rows = sum(len(_lines(path)) for path in RUNS)
    assert sum(t.num_rows for t in tables["runs"].values()) == tables["many"].num_rows == rows
    assert tables["qrels"].num_rows == len(_lines(QRELS))
    assert tables["runs"]["sys06"].column("query_id")[0].as_py() == _lines(RUNS[5])[0][0]


def test_pyarrow(tables, reference):
    runs, many, qrels = tables["runs"], tables["many"], tables["qrels"]
    assert_as_text(qrels, runs, reference, "Tables by name")
    assert_as_text(qrels, many, reference, "a many-run Table")
    assert_as_text(qrels.to_reader, many.to_reader, reference, "RecordBatchReaders")
    batches = {n: t.combine_chunks().to_batches()[0] for n, t in runs.items()}
    assert_as_text(qrels, batches, reference, "RecordBatches")
    # integer ids are their decimal text; a dictionary-encoded run column its strings
    numbered = many.set_column(0, "query_id", many.column("query_id").cast(pa.int64()))
    numbered = numbered.set_column(3, "run", numbered.column("run").dictionary_encode())
    pyterrier = qrels.rename_columns(["qid", "iteration", "docno", "label"])
    assert_as_text(pyterrier, numbered, reference, "integer query ids, PyTerrier names")


def test_a_many_run_table_is_its_runs_in_a_list(tables, reference):
    many = tables["many"]
    first = many.filter(pa.compute.equal(many.column("run"), "sys01")).drop_columns("run")
    rest = many.filter(pa.compute.not_equal(many.column("run"), "sys01"))
    got = quiet(prefeval.compare, tables["qrels"], {"sys01": first, "x": RUNS[1]}, measures="rpp")
    want = quiet(prefeval.compare, QRELS, {"sys01": RUNS[0], "x": RUNS[1]}, measures="rpp")
    pd.testing.assert_frame_equal(got, want)
    # a many-run table in a list: its runs, in sorted name order, then the next run
    got = quiet(prefeval.compare, QRELS, [rest, first], per_query=True)
    named = {**dict(zip(NAMES[1:], RUNS[1:])), "run2": RUNS[0]}
    pd.testing.assert_frame_equal(got, quiet(prefeval.compare, QRELS, named, per_query=True))
    with pytest.raises(InputError) as caught:
        quiet(prefeval.compare, QRELS, {"a": rest, "b": first})
    assert str(caught.value) == (
        "<run a>: a Table of many runs (a run column) given as the one run 'a'; "
        "give it in a list of runs, or drop its run column"
    )


def test_subtopic_qrels_as_a_table(tables):
    measures = "strpp,rpp,lexirecall"
    want = quiet(prefeval.compare, SUBTOPICS, RUNS, per_query=True, measures=measures)
    got = quiet(
        prefeval.compare, _qrels_table(SUBTOPICS), tables["many"], per_query=True,
        measures=measures,
    )  # fmt: skip
    pd.testing.assert_frame_equal(got, want)


def test_polars(tables, reference):
    pl = pytest.importorskip("polars")
    if not hasattr(pa.types, "is_string_view"):  # pyarrow < 16: one clear line
        with pytest.raises(InputError, match=r"^<qrels DataFrame>: not a table Arrow can read"):
            quiet(prefeval.compare, pl.from_arrow(tables["qrels"]), RUNS)
        pytest.skip(f"pyarrow {pa.__version__} reads no string views, which polars exports")
    runs = {n: pl.from_arrow(t) for n, t in tables["runs"].items()}
    qrels = pl.from_arrow(tables["qrels"])
    assert_as_text(qrels, runs, reference, "polars DataFrames")
    many = pl.from_arrow(tables["many"]).with_columns(
        pl.col("query_id").cast(pl.Int64), pl.col("run").cast(pl.Categorical)
    )
    assert_as_text(qrels, many, reference, "a many-run polars DataFrame")
    assert_as_text(qrels.lazy().collect(), [many], reference, "in a list")


def test_duckdb(tables, reference):
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    con.register("qrels", tables["qrels"])
    con.register("many", tables["many"])
    assert_as_text(  # relations made for each call: before DuckDB 1.2 one gives its rows once
        lambda: con.sql("select * from qrels"),
        lambda: con.sql("select run as name, query_id as qid, doc_id as docno, score from many"),
        reference,
        "DuckDB relations",
    )


def _named_dicts(tables, kind):
    qrels = kind(_nested(tables["qrels"], "relevance"), None)
    runs = [kind(_nested(t, "score"), n) for n, t in tables["runs"].items()]
    return qrels, runs


def test_ranx_stand_in(tables, reference):
    """Objects with to_dict() and name, as ranx's: a Run's name names it in a list; a key
    of a dict wins; without a name, run1, run2... by position."""
    qrels, runs = _named_dicts(tables, NamedDict)
    assert_as_text(qrels, runs, reference, "to_dict() objects")
    renamed = {f"x{i}": run for i, run in enumerate(runs)}
    got = quiet(prefeval.compare, qrels, renamed, measures="rpp")
    assert got.run_a.tolist()[:5] == ["x0"] * 5
    unnamed = [NamedDict(run.mapping) for run in runs[:2]]
    got = quiet(prefeval.compare, qrels, unnamed, measures="rpp")
    assert got[["run_a", "run_b"]].values.tolist() == [["run1", "run2"]]
    with pytest.raises(TypeError, match=r"<run a>: NamedDict.to_dict\(\) must give"):
        quiet(prefeval.compare, QRELS, {"a": NamedDict({"301": ["d"]}), "b": runs[0]})


def test_ranx(tables, reference):
    ranx = pytest.importorskip("ranx")
    qrels = ranx.Qrels(_nested(tables["qrels"], "relevance"))
    runs = [ranx.Run(_nested(t, "score"), name=n) for n, t in tables["runs"].items()]
    assert_as_text(qrels, runs, reference, "ranx Qrels and Runs")


def test_read_qrels_and_read_run_take_tables(tables):
    want = prefeval.read_run(RUNS[0])
    got = prefeval.read_run(tables["runs"]["sys01"], name="sys01")
    assert got.name == "sys01"
    assert got.query_id.to_pylist() == want.query_id.to_pylist()
    assert got.doc_id.to_pylist() == want.doc_id.to_pylist()
    assert got.score.tolist() == want.score.tolist()
    qrels = prefeval.read_qrels(tables["qrels"])
    assert qrels.frame.equals(prefeval.read_qrels(QRELS).frame)


RUN = pa.table({"query_id": ["301", "301"], "doc_id": ["a", "b"], "score": [2.0, 1.0]})


@pytest.mark.parametrize(
    "runs, message",
    [
        (
            [RUN.drop_columns("score"), RUN],
            "<runs Table 1>: column score: missing ('score'); a run has columns query_id, "
            "doc_id, score (or qid, docno, score); the columns are ['query_id', 'doc_id']",
        ),
        (
            {"a": RUN.rename_columns(["q", "doc_id", "score"]), "b": RUN},
            "<run a>: column query_id: missing ('query_id' or 'qid'); a run has columns "
            "query_id, doc_id, score (or qid, docno, score); the columns are "
            "['q', 'doc_id', 'score']",
        ),
        (
            {"a": RUN.set_column(0, "query_id", pa.array(["301", None])), "b": RUN},
            "<run a>: row 1: missing query id",
        ),
        (
            {"a": RUN.set_column(0, "query_id", pa.array([301.0, 301.5])), "b": RUN},
            "<run a>: row 1: query id 301.5 is not an integer; give ids as strings",
        ),
        (
            {"a": RUN.set_column(1, "doc_id", pa.array(["a", "a"])), "b": RUN},
            "<run a>: row 1: document 'a' appears twice for query '301' (first at row 0)",
        ),
        (
            {"a": RUN.set_column(2, "score", pa.array(["1", "2"])), "b": RUN},
            "<run a>: column score: type string, not a number type",
        ),
        (
            [RUN.append_column("run", pa.array(["a", None])), RUN],
            "<runs Table 1>: row 1: missing run name",
        ),
    ],
)
def test_bad_tables(runs, message):
    with pytest.raises(InputError) as caught:
        quiet(prefeval.compare, QRELS, runs, measures="rpp")
    assert str(caught.value) == message


def test_bad_qrels_tables():
    qrels = pa.table({"qid": ["301"], "docno": ["a"], "label": [1]})
    with pytest.raises(ValueError) as caught:
        quiet(prefeval.compare, qrels.drop_columns("label"), [RUN, RUN])
    assert str(caught.value) == (
        "<qrels Table>: column relevance: missing ('relevance' or 'label'); Parquet qrels "
        "have columns query_id, doc_id, relevance[, iteration] (or qid, docno, label"
        "[, iteration]); the columns are ['qid', 'docno']"
    )
    twice = pa.concat_tables([qrels, qrels])
    with pytest.raises(InputError, match=r"<qrels Table>: row 1: duplicate judgment"):
        quiet(prefeval.compare, twice, [RUN, RUN])


def test_a_reader_read_already_is_an_error_not_an_empty_run():
    """A RecordBatchReader gives its rows once: the same reader as two runs, or given
    again to a second call, would be an empty run (every query lost to the other run);
    it is an error naming it."""
    reader = RUN.to_reader()
    with pytest.raises(InputError) as caught:
        quiet(prefeval.compare, QRELS, {"a": reader, "b": reader}, measures="rpp")
    assert str(caught.value) == (
        "<run b>: this RecordBatchReader was read already: it gives its rows once (give a "
        "pyarrow Table to use the same rows again)"
    )
    qrels = pa.table({"query_id": ["301"], "doc_id": ["a"], "relevance": [1]}).to_reader()
    got = quiet(prefeval.compare, qrels, {"a": RUN, "b": RUN}, measures="rpp")
    assert got["value"].tolist() == [0.0]
    with pytest.raises(InputError, match="<qrels RecordBatchReader>: this RecordBatchReader"):
        quiet(prefeval.compare, qrels, {"a": RUN, "b": RUN}, measures="rpp")


_ISOLATED = """
import sys, prefeval
runs = sys.argv[2:]
prefeval.compare(sys.argv[1], runs, notify=None)
prefeval.metrics(sys.argv[1], runs, notify=None)
import pyarrow as pa
prefeval.compare(sys.argv[1], {"a": pa.table({"query_id": ["301"], "doc_id": ["x"],
                 "score": [1.0]}), "b": runs[0]}, notify=None)
print(sorted(m for m in ("polars", "duckdb", "ranx") if m in sys.modules))
"""


def test_no_library_imported_unless_given():
    """Reading text inputs, and an Arrow table, imports none of polars, DuckDB, ranx."""
    env = {**os.environ, "PYTHONPATH": str(Path(prefeval.__file__).parents[1])}
    done = subprocess.run(
        [sys.executable, "-c", _ISOLATED, str(QRELS), *map(str, RUNS[:2])],
        capture_output=True, text=True, env=env, check=True,
    )  # fmt: skip
    assert done.stdout.strip() == "[]"


def test_report_shown_inline_writes_nothing(tables, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    cwd, temp = tmp_path / "cwd", tmp_path / "tmp"
    cwd.mkdir()
    temp.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    monkeypatch.setenv("TMPDIR", str(temp))
    shown = quiet(
        prefeval.report, tables["qrels"], tables["many"], measures="rpp", baselines="AP",
        tests="ttest", cache=False,
    )  # fmt: skip
    assert list(cwd.iterdir()) == [] and list(temp.iterdir()) == []
    written = quiet(
        prefeval.report, QRELS, RUNS, measures="rpp", baselines="AP", tests="ttest",
        output=tmp_path / "r.html",
    )  # fmt: skip
    assert written == [str(tmp_path / "r.html")]
    page = (tmp_path / "r.html").read_text()
    headings = re.findall(r"<h[1-3]>([^<]*)</h[1-3]>", page)
    assert headings[:4] == ["prefeval report", "Summary", "Runs x measures", "Data"]
    assert re.findall(r"<h[1-3]>([^<]*)</h[1-3]>", shown.html) == headings
    frame = shown._repr_html_()
    assert frame.startswith("<iframe ") and frame.endswith("></iframe>")
    srcdoc = re.fullmatch(r'<iframe title="[^"]*" srcdoc="([^"]*)" style="[^"]*"></iframe>', frame)
    assert html.unescape(srcdoc.group(1)) == shown.html
    assert shown.html.startswith("<!DOCTYPE html>") and "data:image/svg+xml;base64," in shown.html


def test_report_of_many_runs_inline_holds_the_matrix_file(tmp_path, monkeypatch):
    """Past 10 runs the whole matrix is a CSV file; shown inline, a data: link holds it."""
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    runs = {f"r{i:02d}": RUNS[i % 6] for i in range(11)}
    shown = quiet(prefeval.report, QRELS, runs, measures="rpp", baselines=[], tests="ttest")
    written = quiet(
        prefeval.report, QRELS, runs, measures="rpp", baselines=[], tests="ttest",
        output=tmp_path / "r.html",
    )  # fmt: skip
    csv = Path(written[0]).read_bytes()
    assert Path(written[0]).name == "r-matrix-rpp.csv"
    link = re.search(r'href="data:text/csv;base64,([^"]*)" download="([^"]*)"', shown.html)
    assert base64.b64decode(link.group(1)) == csv
    assert link.group(2) == "report-matrix-rpp.csv"


def test_gate_and_report_against_read_a_reader_or_an_iterator_once(tables):
    """gate and report(against=) check the reference among the runs' names before
    computing: the runs are resolved once for both, so a RecordBatchReader or an
    iterator of paths (each giving its runs once) is its runs, not an error."""
    many = tables["many"]
    want = quiet(prefeval.gate, QRELS, many, against="sys03", min_queries=20)
    got = quiet(prefeval.gate, QRELS, many.to_reader(), against="sys03", min_queries=20)
    pd.testing.assert_frame_equal(got, want)
    got = quiet(prefeval.gate, QRELS, iter(RUNS), against="sys03", min_queries=20)
    pd.testing.assert_frame_equal(got, want)
    for runs in (many.to_reader(), iter(RUNS)):
        shown = quiet(prefeval.report, QRELS, runs, against="sys03", sections="against")
        assert "Against the reference" in shown._repr_html_()
