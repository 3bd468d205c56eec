"""Parquet in and out: runs, qrels and --prefs/--metrics tables read
from Parquet give exactly what the same data in TREC text or tsv gives, whatever the
layout; ``-f parquet`` writes every command's table atomically."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import invoke, read_tsv, write_run

import prefeval
from prefeval.io.runs import read_run

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "sample_data"
QRELS = SAMPLE / "qrels.txt"
SUBTOPICS = SAMPLE / "qrels.subtopics.txt"
RUNS = sorted((SAMPLE / "runs").glob("input.*"))
NAMES = [f"sys0{i}" for i in range(1, 7)]


def run_frame(path) -> pd.DataFrame:
    """A text run as ``query_id, doc_id, score`` (the values the text reader reads)."""
    run = read_run(path)
    return pd.DataFrame(
        {"query_id": run.query_id.to_pylist(), "doc_id": run.doc_id.to_pylist(), "score": run.score}
    )


def all_runs() -> pd.DataFrame:
    return pd.concat([run_frame(p).assign(run=n) for p, n in zip(RUNS, NAMES)], ignore_index=True)[
        ["run", "query_id", "doc_id", "score"]
    ]


def qrels_frame(path) -> pd.DataFrame:
    return pd.read_csv(
        path,
        sep=" ",
        header=None,
        names=["query_id", "iteration", "doc_id", "relevance"],
        dtype={"query_id": str, "iteration": str, "doc_id": str},
    )


def write(frame, path: Path, **kw) -> Path:
    """Write a DataFrame (NaN becomes null, as pyarrow converts pandas) or a pyarrow table."""
    if isinstance(frame, pd.DataFrame):
        frame = pa.Table.from_pandas(frame, preserve_index=False)
    pq.write_table(frame, path, **kw)
    return path


def one_line_error(result, where: str, text: str) -> str:
    assert result.exit_code == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith(str(where)), lines[0]
    assert text in lines[0], lines[0]
    return lines[0]


# layouts of one run: none may change a value
def shuffled(frame):
    return frame.sample(frac=1.0, random_state=7).reset_index(drop=True)


LAYOUTS = {
    "plain": (lambda f: f, {}),
    "shuffled, row groups of 100": (shuffled, {"row_group_size": 100}),
    "int query ids, dictionary docnos": (
        lambda f: f.assign(
            query_id=f.query_id.astype(np.int64), doc_id=f.doc_id.astype("category")
        ),
        {},
    ),
    "PyTerrier names with rank": (
        lambda f: shuffled(f.rename(columns={"query_id": "qid", "doc_id": "docno"})).assign(
            rank=lambda g: np.arange(len(g), 0, -1)
        ),
        {"use_dictionary": False},
    ),
    "large strings": (
        lambda f: pa.table(
            {
                "query_id": pa.array(f.query_id.tolist(), pa.large_string()),
                "doc_id": pa.array(f.doc_id.tolist(), pa.large_string()),
                "score": f.score.to_numpy(),
            }
        ),
        {},
    ),
}


def write_layout(frame, path, layout):
    change, options = LAYOUTS[layout]
    table = change(frame)
    if isinstance(table, pd.DataFrame):
        table = pa.Table.from_pandas(table, preserve_index=False)
    pq.write_table(table, path, **options)
    return path


@pytest.fixture(scope="module")
def text_compare():
    result = invoke("compare", "-q", QRELS, *RUNS)
    assert result.exit_code == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_one_file_per_run_as_text(layout, tmp_path, text_compare):
    paths = [
        write_layout(run_frame(p), tmp_path / f"{n}.parquet", layout) for p, n in zip(RUNS, NAMES)
    ]
    result = invoke("compare", "-q", QRELS, *paths)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == text_compare
    # the same through the API, and the magic bytes decide, not the name
    odd = tmp_path / "input.sys01.txt"
    odd.write_bytes(paths[0].read_bytes())
    with pytest.warns(prefeval.PrefevalWarning):
        frame = prefeval.compare(str(QRELS), [odd, *paths[1:]], per_query=True, summary=True)
    assert frame.equals(
        prefeval.compare(
            str(QRELS), [str(p) for p in RUNS], per_query=True, summary=True, notify=None
        )
    )


def many_run_table(
    tmp_path, layout="shuffled, row groups of 100", name="runs.parquet", column="run"
):
    frame = all_runs().rename(columns={"run": column})
    change, options = LAYOUTS[layout]
    table = change(frame)
    return write(table, tmp_path / name, **options)


COMMANDS = [
    ("compare", "-q"),
    ("metrics", "-q"),
    ("order",),
    ("discpower", "--trials", "50"),
    ("tau",),
    ("agree",),
    ("robustness", "--queries", "5", "--labels", "0.5", "--samples", "2"),
    ("pairs",),
]


@pytest.mark.parametrize("command", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_every_command_reads_parquet_runs_and_qrels(command, tmp_path):
    """One table of many runs (a run column, rows shuffled, row groups) and Parquet qrels
    give the text files' output byte for byte."""
    table = many_run_table(tmp_path)
    qrels = write(qrels_frame(QRELS).assign(iteration=0), tmp_path / "qrels.pq")
    text = invoke(*command, QRELS, *RUNS)
    assert text.exit_code == 0, text.stderr
    parquet = invoke(*command, qrels, table)
    assert parquet.exit_code == 0, parquet.stderr
    assert parquet.stdout == text.stdout
    assert len(read_tsv(text.stdout)) > 0


def test_sample_runs_parquet_is_the_sample_runs(text_compare):
    result = invoke("compare", "-q", QRELS, SAMPLE / "runs.parquet")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == text_compare
    table = pq.read_table(SAMPLE / "runs.parquet")
    assert table.column_names == ["run", "query_id", "doc_id", "score"]
    assert sorted(set(table.column("run").to_pylist())) == NAMES


def test_subtopic_qrels_from_parquet(tmp_path):
    frame = qrels_frame(SUBTOPICS)
    frame["iteration"] = frame["iteration"].astype(np.int64)
    qrels = write(
        frame.rename(columns={"query_id": "qid", "doc_id": "docno", "relevance": "label"}),
        tmp_path / "subtopics.parquet",
        row_group_size=300,
    )
    for command in (("compare", "-q", "-m", "strpp,rpp"), ("metrics", "-q", "-m", "AP_IA,AP")):
        text = invoke(*command, SUBTOPICS, *RUNS)
        parquet = invoke(*command, qrels, SAMPLE / "runs.parquet")
        assert text.exit_code == parquet.exit_code == 0, parquet.stderr
        assert parquet.stdout == text.stdout
        assert "strpp" in text.stdout or "AP_IA" in text.stdout


def test_mixed_inputs_and_run_order(tmp_path):
    """A table expands in place, its runs in name order; text runs keep their places."""
    runs = all_runs()[lambda f: f.run.isin(["sys03", "sys02"])].iloc[::-1]  # sys03 first
    table = write(runs, tmp_path / "t.parquet")
    mixed = invoke("compare", "-m", "rpp", QRELS, RUNS[3], table, RUNS[0])
    text = invoke("compare", "-m", "rpp", QRELS, RUNS[3], RUNS[1], RUNS[2], RUNS[0])
    assert mixed.exit_code == text.exit_code == 0, mixed.stderr
    assert mixed.stdout == text.stdout
    pairs = read_tsv(mixed.stdout)[["run_a", "run_b"]].values.tolist()
    assert pairs[:3] == [["sys04", "sys02"], ["sys04", "sys03"], ["sys04", "sys01"]]


def test_run_count_after_expansion(tmp_path):
    one = write(all_runs()[lambda f: f.run == "sys01"], tmp_path / "one.parquet")
    result = invoke("compare", QRELS, one)
    assert result.exit_code == 2 and "need at least two runs" in result.stderr
    result = invoke("order", "--no-baselines", QRELS, one)
    assert result.exit_code == 2 and "at least two RUNs" in result.stderr
    both = many_run_table(tmp_path)
    result = invoke("pairs", "--no-baselines", "-m", "rpp", "--against", "sys05", QRELS, both)
    assert result.exit_code == 0, result.stderr
    assert set(read_tsv(result.stdout)["run_b"]) == {"sys05"}
    result = invoke("pairs", "--no-baselines", "--against", "nosuch", QRELS, both)
    assert result.exit_code == 2 and "no such run" in result.stderr
    result = invoke("compare", QRELS, both, RUNS[0])
    one_line_error(result, "", "two runs are named 'sys01'")


def test_name_column_and_api(tmp_path):
    table = many_run_table(tmp_path, layout="int query ids, dictionary docnos", column="name")
    qrels = write(qrels_frame(QRELS), tmp_path / "qrels.parquet")
    got = prefeval.compare(qrels, table, per_query=True, summary=True, notify=None)
    assert got.equals(prefeval.compare(QRELS, RUNS, per_query=True, summary=True, notify=None))
    with pytest.raises(prefeval.InputError, match="table of many runs"):
        prefeval.compare(QRELS, {"a": table, "b": RUNS[0]})


@pytest.mark.parametrize("command", ["order", "pairs", "agree"])
def test_analysis_commands_on_sample_runs_parquet(command):
    """The analysis commands (computed by prefeval.api) count a many-run table as its
    runs: the sample table gives the sample text runs' output byte for byte."""
    text = invoke(command, QRELS, *RUNS)
    assert text.exit_code == 0, text.stderr
    parquet = invoke(command, QRELS, SAMPLE / "runs.parquet")
    assert parquet.exit_code == 0, parquet.stderr
    assert parquet.stdout == text.stdout
    assert len(read_tsv(text.stdout)) > 0


API_CALLS = [
    ("compare", {"per_query": True, "summary": True}),
    ("metrics", {"per_query": True, "summary": True}),
    ("order", {}),
    ("discpower", {"trials": 50}),
    ("tau", {}),
    ("agree", {}),
    ("robustness", {"queries": [5], "samples": 2}),
    ("pairs", {"against": "sys03"}),
]


@pytest.mark.parametrize("call", API_CALLS, ids=[c[0] for c in API_CALLS])
def test_api_on_a_many_run_table(call):
    """prefeval.<command>(qrels, "runs.parquet") is the table of the text runs (a path
    alone, or in a list)."""
    name, options = call
    function = getattr(prefeval, name)
    text = function(str(QRELS), [str(p) for p in RUNS], notify=None, **options)
    assert len(text) > 0
    table = str(SAMPLE / "runs.parquet")
    assert function(str(QRELS), table, notify=None, **options).equals(text)
    assert function(str(QRELS), [table], notify=None, **options).equals(text)


def test_explain_on_a_table_of_two_runs(tmp_path):
    """explain takes RUN_A RUN_B as one Parquet table of two runs (A first by name);
    a table of more runs is counted as its runs."""
    two = write(all_runs()[lambda f: f.run.isin(["sys02", "sys01"])].iloc[::-1], tmp_path / "t.pq")
    text = invoke(
        "explain", "--query", "301", "--query", "310", "-f", "tsv", QRELS, RUNS[0], RUNS[1]
    )
    assert text.exit_code == 0, text.stderr
    parquet = invoke("explain", "--query", "301", "--query", "310", "-f", "tsv", QRELS, two)
    assert parquet.exit_code == 0, parquet.stderr
    assert parquet.stdout == text.stdout
    assert set(read_tsv(text.stdout)["run_a"]) == {"sys01"}
    people = invoke("explain", "--top", "2", QRELS, two)
    assert people.exit_code == 0, people.stderr
    assert people.stdout == invoke("explain", "--top", "2", QRELS, RUNS[0], RUNS[1]).stdout
    out = tmp_path / "why.parquet"
    result = invoke("explain", "--query", "301", "-f", "parquet", "-o", out, QRELS, two)
    assert result.exit_code == 0 and result.stdout == "", result.stderr
    frame = pq.read_table(out).to_pandas()
    assert len(frame) == len(
        read_tsv(invoke("explain", "--query", "301", "-f", "tsv", QRELS, two).stdout)
    )
    result = invoke("explain", "--query", "301", QRELS, SAMPLE / "runs.parquet")
    assert result.exit_code == 2 and "two runs, RUN_A RUN_B; got 6" in result.stderr
    result = invoke("explain", "--query", "301", QRELS, two, RUNS[2])
    assert result.exit_code == 2 and "got 3" in result.stderr
    api = prefeval.explain(QRELS, two, queries=["301"], notify=None)
    assert api.equals(prefeval.explain(QRELS, RUNS[:2], queries=["301"], notify=None))
    with pytest.raises(ValueError, match="two runs, not 6"):
        prefeval.explain(QRELS, SAMPLE / "runs.parquet", queries=["301"])


def test_float32_scores_are_widened_exactly(tmp_path):
    """A float32 score is the same number in float64: the run equals the text run whose
    scores are the float32 values' exact decimals."""
    frames = [run_frame(p) for p in RUNS[:3]]
    parquet, text = [], []
    for k, frame in enumerate(frames):
        narrow = frame.assign(score=frame.score.astype(np.float32))
        parquet.append(write(narrow, tmp_path / f"r{k}.parquet"))
        wide = narrow.score.astype(np.float64).tolist()
        assert any(w != s for w, s in zip(wide, frame.score))  # float32 did change values
        rows = list(zip(narrow.query_id, narrow.doc_id, wide))
        text.append(write_run(tmp_path / f"r{k}", rows))
    a = invoke("compare", "-q", QRELS, *parquet)
    b = invoke("compare", "-q", QRELS, *text)
    assert a.exit_code == b.exit_code == 0, a.stderr
    assert a.stdout == b.stdout


# --------------------------------------------------------------------------- writing

OUTPUTS = [
    ("compare", "-q"),
    ("compare", "--both-directions"),
    ("metrics", "-q"),
    ("order",),
    ("discpower", "--trials", "50"),
    ("discpower", "--trials", "50", "--pairs"),
    ("tau",),
    ("agree",),
    ("agree", "--ties"),
    ("robustness", "--queries", "5", "--labels", "0.5", "--samples", "2"),
    ("pairs",),
]


@pytest.mark.parametrize("command", OUTPUTS, ids=[" ".join(c) for c in OUTPUTS])
@pytest.mark.parametrize("precision", [None, 3])
def test_parquet_output_is_the_tsv_table(command, precision, tmp_path):
    """Every command's -f parquet table holds the tsv table's rows and values exactly;
    with -p N each value is the float nearest the tsv's N-decimal text."""
    digits = ("-p", str(precision)) if precision is not None else ()
    tsv = invoke(*command, *digits, QRELS, *RUNS[:4])
    assert tsv.exit_code == 0, tsv.stderr
    out = tmp_path / "out.parquet"
    result = invoke(*command, *digits, "-f", "parquet", "-o", out, QRELS, *RUNS[:4])
    assert result.exit_code == 0 and result.stdout == "", result.stderr
    stdout = invoke(*command, *digits, "-f", "parquet", QRELS, *RUNS[:4])
    assert stdout.stdout_bytes == out.read_bytes()  # same bytes to stdout
    table = pq.read_table(out)
    text = read_tsv(tsv.stdout)
    assert table.column_names == list(text.columns)
    assert table.num_rows == len(text) > 0
    for name in text.columns:
        column = table.column(name)
        kind = column.type
        values = column.to_pylist()
        if pa.types.is_floating(kind):
            assert kind == pa.float64()
            expected = [float(v) if v != "" else float("nan") for v in text[name]]
            np.testing.assert_array_equal(np.array(values, dtype=float), np.array(expected))
        elif pa.types.is_integer(kind):
            assert kind == pa.int64()
            assert [str(v) for v in values] == text[name].tolist()
        elif pa.types.is_boolean(kind):
            assert [str(v).lower() for v in values] == text[name].tolist()
        else:
            assert (
                pa.types.is_dictionary(kind)
                or pa.types.is_string(kind)
                or pa.types.is_large_string(kind)
            )
            assert [str(v) for v in values] == text[name].tolist()


@pytest.mark.parametrize("precision", [None, 4])
def test_prefs_and_metrics_read_back_from_parquet(precision, tmp_path):
    digits = ("-p", str(precision)) if precision is not None else ()
    tables = {}
    for fmt in ("tsv", "parquet"):
        prefs, metrics = tmp_path / f"prefs.{fmt}", tmp_path / f"metrics.{fmt}"
        for command, path in (("compare", prefs), ("metrics", metrics)):
            result = invoke(command, "-q", *digits, "-f", fmt, "-o", path, QRELS, *RUNS)
            assert result.exit_code == 0, result.stderr
        tables[fmt] = (prefs, metrics)
    assert tables["parquet"][0].read_bytes()[:4] == b"PAR1"
    analyses = [*COMMANDS[2:6], ("robustness", "--queries", "5", "--samples", "2"), ("pairs",)]
    for command in analyses:
        outputs = []
        for fmt in ("tsv", "parquet"):
            prefs, metrics = tables[fmt]
            result = invoke(*command, "--prefs", prefs, "--metrics", metrics)
            assert result.exit_code == 0, result.stderr
            outputs.append(result.stdout)
        assert outputs[0] == outputs[1] and outputs[0], command
    # the API takes the Parquet tables as paths too
    prefs, metrics = tables["parquet"]
    assert prefeval.order(prefs=prefs, metrics=metrics).equals(
        prefeval.order(prefs=tables["tsv"][0], metrics=tables["tsv"][1])
    )


def test_parquet_prefs_table_types(tmp_path):
    out = tmp_path / "prefs.parquet"
    assert invoke("compare", "-q", "-f", "parquet", "-o", out, QRELS, *RUNS).exit_code == 0
    schema = pq.read_schema(out)
    for name in ("measure", "run_a", "run_b", "query_id"):
        # one index type for every partition written: int32 (pandas would pick int8 here)
        assert schema.field(name).type == pa.dictionary(pa.int32(), pa.string())
    assert schema.field("value").type == pa.float64()
    api = prefeval.compare(QRELS, RUNS, per_query=True, summary=True, notify=None)
    back = pd.read_parquet(out)
    assert back["value"].tolist() == api["value"].tolist()  # exact, no rounding
    assert back["query_id"].astype(str).tolist() == api["query_id"].tolist()


def test_parquet_refuses_a_terminal(tmp_path):
    import pty

    master, slave = pty.openpty()
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "prefeval",
                "order",
                "-f",
                "parquet",
                "--no-baselines",
                QRELS,
                *RUNS[:2],
            ],
            stdout=slave,
            stderr=subprocess.PIPE,
            env={**os.environ, "PREFEVAL_CACHE": "0"},
            timeout=120,
        )
    finally:
        os.close(slave)
        os.close(master)
    assert proc.returncode == 2
    assert "-f parquet writes binary: give -o FILE or redirect" in proc.stderr.decode()
    assert "Traceback" not in proc.stderr.decode()


def test_parquet_output_is_atomic(tmp_path, monkeypatch):
    out = tmp_path / "prefs.parquet"
    out.write_bytes(b"old")
    bad = write(run_frame(RUNS[0]).assign(score=np.nan), tmp_path / "bad.parquet")
    result = invoke("compare", "-f", "parquet", "-o", out, QRELS, RUNS[1], bad)
    one_line_error(result, bad, "row 1: missing score")
    assert out.read_bytes() == b"old"

    def broken(*args, **kw):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pq, "write_table", broken)  # a whole table (analysis commands)
    monkeypatch.setattr(pq.ParquetWriter, "write_table", broken)  # compare, frame by frame
    result = invoke("compare", "-f", "parquet", "-o", out, QRELS, *RUNS[:2])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"prefeval: cannot write {out}: No space left on device"
    assert out.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.parquet", "prefs.parquet"]


# --------------------------------------------------------------------------- errors


def test_bad_parquet_runs(tmp_path):
    frame = run_frame(RUNS[0])
    cases = {
        "nocol.parquet": (frame.drop(columns="score"), "column score: missing ('score')"),
        "nodoc.parquet": (
            frame.drop(columns="doc_id"),
            "column doc_id: missing ('doc_id' or 'docno')",
        ),
        "both.parquet": (frame.assign(qid=frame.query_id), "both 'query_id' and 'qid'"),
        "nan.parquet": (
            pa.table(
                {
                    "qid": frame.query_id.tolist(),
                    "docno": frame.doc_id.tolist(),
                    "score": np.where(np.arange(len(frame)) == 9, np.nan, 1.0),
                }
            ),
            "row 10: score nan is not a number",
        ),
        "dup.parquet": (
            pd.concat([frame, frame.iloc[[4]]], ignore_index=True),
            f"row {len(frame) + 1}: document {frame.doc_id[4]!r} appears twice for query "
            f"{frame.query_id[4]!r} (first at row 5)",
        ),
        "text.parquet": (
            pa.table(
                {"query_id": frame.query_id.tolist(), "score": ["1.5"] * len(frame)}
            ).append_column("doc_id", pa.array(frame.doc_id.tolist(), pa.string())),
            "column score: type string, not a number type",
        ),
        "null.parquet": (
            frame.assign(doc_id=frame.doc_id.where(frame.index != 2)),
            "row 3: missing document id",
        ),
        "frac.parquet": (frame.assign(query_id=0.5), "row 1: query id 0.5 is not an integer"),
    }
    for name, (bad, message) in cases.items():
        path = write(bad, tmp_path / name)
        one_line_error(invoke("compare", QRELS, RUNS[1], path), path, message)
    many = write(
        all_runs().pipe(lambda f: pd.concat([f, f.iloc[[3000]]])), tmp_path / "many.parquet"
    )
    row = all_runs().iloc[3000]
    one_line_error(
        invoke("order", QRELS, many),
        many,
        f"document {row.doc_id!r} appears twice for query {row.query_id!r} of run {row.run!r}",
    )


def test_not_parquet_files(tmp_path):
    good = write(run_frame(RUNS[0]), tmp_path / "good.parquet").read_bytes()
    truncated = tmp_path / "truncated.parquet"
    truncated.write_bytes(good[: len(good) // 2])  # PAR1 at the start only: text
    one_line_error(invoke("compare", QRELS, RUNS[1], truncated), f"{truncated}:1:", "truncated?")
    corrupt = tmp_path / "corrupt.parquet"
    corrupt.write_bytes(b"PAR1" + b"\x00" * 20 + b"PAR1")
    one_line_error(
        invoke("compare", QRELS, RUNS[1], corrupt), corrupt, "not a readable Parquet file"
    )
    zipped = tmp_path / "zipped.parquet.gz"
    zipped.write_bytes(gzip.compress(good))
    one_line_error(invoke("compare", QRELS, RUNS[1], zipped), zipped, "gzip-compressed Parquet")
    one_line_error(invoke("compare", zipped, *RUNS[:2]), zipped, "gzip-compressed Parquet")
    # a text run whose first query id starts with PAR1 is text
    text = write_run(tmp_path / "par", [("PAR1", "d1", 1.0), ("301", "doc0000001", 2.0)])
    assert invoke("compare", QRELS, RUNS[1], text).exit_code == 0


def test_bad_parquet_qrels_and_tables(tmp_path):
    frame = qrels_frame(QRELS)
    cases = {
        "q1.parquet": (
            frame.drop(columns="relevance"),
            "column relevance: missing ('relevance' or 'label')",
        ),
        "q2.parquet": (
            frame.assign(relevance=np.inf),
            "row 1: relevance inf is not a finite number",
        ),
        "q3.parquet": (
            pd.concat([frame, frame.iloc[[7]]]),
            f"row {len(frame) + 1}: duplicate judgment",
        ),
        "q4.parquet": (frame.assign(iteration="x"), "row 1: iteration 'x' is neither 0, Q0 nor"),
        "q5.parquet": (frame.assign(query_id="all"), "row 1: query id 'all' is reserved"),
    }
    for name, (bad, message) in cases.items():
        path = write(bad, tmp_path / name)
        line = one_line_error(invoke("compare", path, *RUNS[:2]), path, message)
        if name == "q3.parquet":
            assert "(first at row 8)" in line
    prefs = tmp_path / "prefs.parquet"
    assert invoke("compare", "-q", "-f", "parquet", "-o", prefs, QRELS, *RUNS[:3]).exit_code == 0
    table = pq.read_table(prefs)
    write(table.select(["measure", "run_a", "query_id", "value"]), tmp_path / "p1.parquet")
    one_line_error(
        invoke("order", "--no-baselines", "--prefs", tmp_path / "p1.parquet"),
        tmp_path / "p1.parquet",
        "missing columns ['run_b']",
    )
    values = table.column("value").to_numpy().copy()
    values[5] = np.nan
    p2 = write(table.to_pandas().assign(value=values), tmp_path / "p2.parquet")
    one_line_error(invoke("order", "--no-baselines", "--prefs", p2), p2, "row 6: missing value")


def test_parquet_runs_are_cached(tmp_path, monkeypatch):
    from prefeval.engine import cache

    folder = tmp_path / "cache"
    monkeypatch.setenv("PREFEVAL_CACHE_DIR", str(folder))
    monkeypatch.delenv("PREFEVAL_CACHE", raising=False)
    paths = [write(run_frame(p), tmp_path / f"{n}.parquet") for p, n in zip(RUNS[:2], NAMES)]
    first = invoke("compare", "-q", QRELS, *paths)
    entries = sorted(Path(cache.user_dir(), "runs").rglob("*.entry"))
    assert len(entries) == 2
    second = invoke("compare", "-q", QRELS, *paths)
    assert first.exit_code == second.exit_code == 0
    assert second.stdout == first.stdout
    assert sorted(Path(cache.user_dir(), "runs").rglob("*.entry")) == entries
    # a many-run table is not cached
    invoke("compare", QRELS, many_run_table(tmp_path))
    assert sorted(Path(cache.user_dir(), "runs").rglob("*.entry")) == entries


def test_stdin_parquet(tmp_path):
    data = write(run_frame(RUNS[0]), tmp_path / "r.parquet").read_bytes()
    proc = subprocess.run(
        [sys.executable, "-m", "prefeval", "compare", "-q", QRELS, "-", RUNS[1]],
        input=data,
        capture_output=True,
        env={**os.environ, "PREFEVAL_CACHE": "0"},
        timeout=120,
    )
    expected = invoke("compare", "-q", QRELS, RUNS[0], RUNS[1])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode() == expected.stdout.replace("sys01", "stdin")


# --------------------------------------------------------------------------- batch by batch


def _blocks_reversed(frame):
    """The (run, query) blocks in reverse order, each block's rows as they were."""
    block = (frame.run + "\t" + frame.query_id).ne((frame.run + "\t" + frame.query_id).shift())
    number = block.cumsum()
    return frame.assign(_b=-number).sort_values("_b", kind="stable").drop(columns="_b")


GROUPED = {
    "run by run": (lambda f: f, True),
    "query by query, runs interleaved": (
        lambda f: f.sort_values("query_id", kind="stable", key=lambda q: q.str[::-1]),
        True,
    ),
    "blocks reversed": (_blocks_reversed, True),
    "rows shuffled": (shuffled, False),
    "one row moved away from its block": (
        lambda f: pd.concat([f.iloc[1:], f.iloc[:1]], ignore_index=True),
        False,
    ),
}


@pytest.mark.parametrize("max_docs", [None, 7])
@pytest.mark.parametrize("batch", [13, 1000, 1 << 20])
@pytest.mark.parametrize("layout", GROUPED)
def test_many_run_table_batch_by_batch(layout, batch, max_docs, monkeypatch, tmp_path):
    """A many-run table is reduced batch by batch when each (run, query)'s rows are
    consecutive, else spilled to temporary files by query (never run by run, each run
    whole); either way, for any batch size, the positions and so the
    output equal the text runs'."""
    from prefeval.io import parquet

    change, grouped = GROUPED[layout]
    monkeypatch.setattr(parquet, "BATCH_ROWS", batch)
    by_run, spilled = [], []
    table_run, spilled_runs = parquet.table_run, parquet.spilled_runs
    monkeypatch.setattr(parquet, "table_run", lambda *a: by_run.append(a) or table_run(*a))
    monkeypatch.setattr(parquet, "spilled_runs", lambda *a: spilled.append(a) or spilled_runs(*a))
    table = write(change(all_runs()), tmp_path / "t.parquet", row_group_size=300)
    kw = dict(per_query=True, summary=True, notify=None, max_docs=max_docs)
    got = prefeval.compare(QRELS, table, **kw)
    assert got.equals(prefeval.compare(QRELS, RUNS, **kw))
    assert len(got) > 1000
    assert len(by_run) == 0
    assert (len(spilled) == 0) == grouped, len(spilled)


def test_many_run_table_errors_cite_file_rows(monkeypatch, tmp_path):
    """Read batch by batch, a bad value or a duplicate is reported at its row of the file
    (from 1), a duplicate that crosses a batch boundary too."""
    from prefeval.io import parquet

    monkeypatch.setattr(parquet, "BATCH_ROWS", 100)
    frame = all_runs()
    # a duplicate of row 250 (0-based) right after it: rows 251 and 252 of the file
    twice = pd.concat([frame.iloc[:251], frame.iloc[250:]], ignore_index=True)
    path = write(twice, tmp_path / "twice.parquet")
    result = invoke("compare", QRELS, path)
    row = frame.iloc[250]
    one_line_error(
        result,
        path,
        f"row 252: document {row.doc_id!r} appears twice for query {row.query_id!r} of run "
        f"{row.run!r} (first at row 251)",
    )
    missing = frame.assign(score=frame.score.where(frame.index != 345))
    path = write(missing, tmp_path / "missing.parquet")
    one_line_error(invoke("order", QRELS, path), path, "row 346: missing score")
    empty = frame.assign(doc_id=frame.doc_id.where(frame.index != 1234, ""))
    path = write(empty, tmp_path / "empty.parquet")
    one_line_error(invoke("compare", QRELS, path), path, "row 1235: empty document id")


def test_many_run_table_with_queries_not_judged(monkeypatch, tmp_path):
    """Rows of queries the qrels do not evaluate are checked (a duplicate there is an
    error as in a text run) and dropped, whatever their place."""
    from prefeval.io import parquet

    monkeypatch.setattr(parquet, "BATCH_ROWS", 64)
    frame = all_runs()
    extra = frame[frame.query_id == frame.query_id.iloc[0]].assign(query_id="not-judged")
    for layout, rows in {
        "grouped": pd.concat([extra, frame], ignore_index=True),
        "split": pd.concat([extra.iloc[:3], frame, extra.iloc[3:]], ignore_index=True),
    }.items():
        path = write(rows, tmp_path / f"{layout}.parquet")
        got = prefeval.compare(QRELS, path, per_query=True, summary=True, notify=None)
        assert got.equals(
            prefeval.compare(QRELS, RUNS, per_query=True, summary=True, notify=None)
        ), layout
    monkeypatch.setattr(parquet, "OTHER_GROUPS", 3)  # too many such blocks: run by run
    got = prefeval.compare(QRELS, path, per_query=True, summary=True, notify=None)
    assert got.equals(prefeval.compare(QRELS, RUNS, per_query=True, summary=True, notify=None))
    twice = pd.concat([extra.iloc[:5], extra.iloc[4:5], frame], ignore_index=True)
    path = write(twice, tmp_path / "twice.parquet")
    one_line_error(invoke("compare", QRELS, path), path, "row 6: document")


@pytest.mark.parametrize("engine", ["local", "dask"])
def test_bad_parquet_schemas_and_strings_are_input_errors(tmp_path, engine):
    """A duplicated column name, a string column that is not UTF-8 (plain or
    dictionary-encoded) and a dictionary index outside the dictionary: exit 2 with
    ``FILE: message`` (the row where one is known), never a traceback nor a result."""
    from helpers import bad_parquet_inputs

    if engine == "dask":
        pytest.importorskip("distributed")
    qrels = SAMPLE / "qrels.txt"
    r1, r2 = SAMPLE / "runs" / "input.sys01", SAMPLE / "runs" / "input.sys02"
    cases = bad_parquet_inputs(tmp_path)
    for name, (kind, path, fragment) in cases.items():
        args = {"qrels": [path, r1, r2], "run": [qrels, path, r2], "runs": [qrels, path]}[kind]
        result = invoke("compare", "--engine", engine, *args)
        assert result.exit_code == 2, (name, result.stderr, repr(result.exception))
        assert f"{path}: " in result.stderr and fragment in result.stderr, (name, result.stderr)
        assert result.stdout == ""


def test_bad_parquet_tables_are_input_errors(tmp_path):
    """--metrics and --prefs Parquet tables: a duplicated column and strings that are not
    UTF-8 are FILE: errors."""
    bad = pa.array([b"a", b"\xff"], pa.binary()).view(pa.string())
    metrics = {
        "metrics-dup.parquet": pa.Table.from_arrays(
            [
                pa.array(["AP", "AP"]),
                pa.array(["a", "b"]),
                pa.array(["a", "b"]),
                pa.array(["1", "1"]),
                pa.array([0.5, 0.25]),
            ],
            names=["measure", "run", "run", "query_id", "value"],
        ),
        "metrics-utf8.parquet": pa.table(
            {"measure": ["AP", "AP"], "run": bad, "query_id": ["1", "1"], "value": [0.5, 0.2]}
        ),
    }
    prefs = {
        "prefs-utf8.parquet": pa.table(
            {
                "measure": ["rpp"],
                "run_a": ["a"],
                "run_b": ["b"],
                "query_id": bad[1:],
                "value": [0.5],
            }
        )
    }
    expected = {
        "metrics-dup.parquet": "column run: 2 columns have this name",
        "metrics-utf8.parquet": "row 2: run is not valid UTF-8",
        "prefs-utf8.parquet": "row 1: query_id is not valid UTF-8",
    }
    pq.write_table(metrics["metrics-dup.parquet"], tmp_path / "metrics-dup.parquet")
    pq.write_table(metrics["metrics-utf8.parquet"], tmp_path / "metrics-utf8.parquet")
    pq.write_table(prefs["prefs-utf8.parquet"], tmp_path / "prefs-utf8.parquet")
    good_prefs = tmp_path / "prefs.tsv"
    runs = [SAMPLE / "runs" / f"input.sys0{i}" for i in (1, 2)]
    assert invoke("compare", "-q", "-o", good_prefs, SAMPLE / "qrels.txt", *runs).exit_code == 0
    for name, message in expected.items():
        path = tmp_path / name
        if name.startswith("metrics"):
            result = invoke("agree", "--prefs", good_prefs, "--metrics", path)
        else:
            result = invoke("order", "--prefs", path)
        assert result.exit_code == 2, (name, result.stderr, repr(result.exception))
        assert f"{path}: {message}" in result.stderr, result.stderr


@pytest.mark.parametrize("fmt", ["tsv", "csv", "jsonl", "parquet"])
def test_metrics_written_in_pieces_is_the_whole_table(fmt, monkeypatch, tmp_path):
    """metrics writes its rows a (measure, run) at a time, never the whole table: the
    same bytes as the API's table written whole, Parquet too (its row groups regrouped
    across the pieces: 7 rows here, so that groups span pieces)."""
    from prefeval.io import writers

    monkeypatch.setattr(writers, "PARQUET_GROUP_ROWS", 7)
    qrels = str(SAMPLE / "qrels.txt")
    runs = [str(r) for r in RUNS[:3]]
    out = tmp_path / f"metrics.{fmt}"
    for args, options in (
        (["-q"], {"per_query": True, "summary": True}),
        (["-q", "-n"], {"per_query": True}),
        ([], {}),
    ):
        result = invoke("metrics", *args, "-f", fmt, "-o", str(out), qrels, *runs)
        assert result.exit_code == 0, result.stderr
        table = prefeval.metrics(qrels, runs, notify=None, **options)
        assert len(table) > 7
        whole = tmp_path / f"whole.{fmt}"
        writers.write_table(table, str(whole), fmt, counts=lambda t: {"value": t.index < 0})
        assert out.read_bytes() == whole.read_bytes()
        if fmt == "parquet":
            groups = pq.ParquetFile(out).metadata
            assert groups.num_row_groups == -(-len(table) // 7)
