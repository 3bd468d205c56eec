"""The ``prefeval compare`` command line: options, formats, naming, output files."""

from __future__ import annotations

import gzip
import io
import json
import os

import oracle
import pandas as pd
import pytest
from helpers import COLUMNS, invoke, read_tsv, tsv_to_dict, write_qrels, write_run

import prefeval
from prefeval.io.source import run_name

# --------------------------------------------------------------------------- fixtures

# qids "001", "2", "10": "001" must stay the string "001" everywhere
QRELS = [
    ("001", 0, "a", 2),
    ("001", 0, "b", 1),
    ("001", 0, "c", 1),
    ("001", 0, "z", 0),
    ("2", 0, "a", 1),
    ("2", 0, "d", 3),
    ("2", 0, "e", -2),
    ("10", 0, "f", 1),
    ("10", 0, "g", 2),
    ("10", 0, "h", 1),
    ("10", 0, "i", 1),
    ("10", 0, "j", 1),
    ("10", 0, "k", 1),
    ("10", 0, "l", 1),
]
RUN_ROWS = {
    "sysA": [
        ("001", "x1", 9.0),
        ("001", "b", 8.0),
        ("001", "a", 7.0),
        ("001", "x2", 6.0),
        ("001", "c", 5.0),
        ("2", "d", 3.0),
        ("2", "x", 2.0),
        ("10", "f", 1.5),
        ("10", "q1", 1.4),
        ("10", "g", 1.3),
        ("10", "q2", 1.2),
        ("10", "q3", 1.1),
        ("10", "h", 1.0),
        ("10", "i", 0.5),
    ],
    "sysB": [
        ("001", "a", 3.0),
        ("001", "x1", 2.0),
        ("001", "c", 1.0),
        ("2", "x", 5.0),
        ("2", "a", 4.0),
        ("2", "y", 4.0),
        ("10", "k", 3.0),
        ("10", "l", 2.5),
        ("10", "q9", 2.0),
        ("10", "j", 1.0),
    ],
    "sysC": [
        ("001", "c", 1.0),
        ("001", "b", 1.0),
        ("001", "a", 1.0),
        ("10", "g", 8.0),
        ("10", "f", 7.0),
        ("999", "a", 1.0),  # a query that is not judged: ignored
    ],
}


@pytest.fixture
def collection(tmp_path):
    qrels = write_qrels(tmp_path / "qrels.txt", QRELS)
    runs = [write_run(tmp_path / f"input.{name}", rows) for name, rows in RUN_ROWS.items()]
    return qrels, runs


@pytest.fixture
def subtopic_qrels(tmp_path):
    rows = []
    for q, _it, d, g in QRELS:
        rows.append((q, 1, d, g))
        rows.append((q, 2, d, 1 if g > 0 and d in ("a", "f", "k", "j") else 0))
    return write_qrels(tmp_path / "qrels.subtopics.txt", rows)


def _api(qrels, runs, **kwargs) -> dict:
    return oracle.frame_to_dict(prefeval.compare(qrels, runs, notify=None, **kwargs))


# --------------------------------------------------------------------------- basics


def test_version():
    for flag in ("--version", "-V"):
        result = invoke(flag)
        assert result.exit_code == 0
        assert "prefeval" in result.stdout
        assert prefeval.__version__ in result.stdout


def test_compare_help():
    result = invoke("compare", "--help")
    assert result.exit_code == 0
    for option in (
        "--measure",
        "--relevance-level",
        "--max-docs",
        "--binary",
        "--per-query",
        "--no-summary",
        "--format",
        "--output",
    ):
        assert option in result.stdout, option


def test_cli_equals_api_and_oracle(collection):
    qrels, runs = collection
    result = invoke("compare", "-q", qrels, *runs)
    assert result.exit_code == 0, result.stderr
    got = tsv_to_dict(result.stdout)
    assert got == _api(qrels, runs, per_query=True, summary=True)
    expected = oracle.evaluate_files(qrels, runs)
    expected.update({(*k, "all"): v for k, v in oracle.summarize(expected).items()})
    oracle.assert_matches(got, expected, 1e-12)


def test_default_is_summary_only(collection):
    qrels, runs = collection
    result = invoke("compare", qrels, *runs)
    assert result.exit_code == 0, result.stderr
    got = tsv_to_dict(result.stdout)
    assert {k[3] for k in got} == {"all"}
    assert len(got) == 6 * 3  # measures x pairs


def test_needs_two_runs(collection):
    qrels, runs = collection
    result = invoke("compare", qrels, runs[0])
    assert result.exit_code == 2


# --------------------------------------------------------------------------- measures


def test_measure_aliases_and_lists(collection):
    qrels, runs = collection
    result = invoke(
        "compare", "-q", "-m", "RPP", "-m", "dcgRPP,invRPP", "-m", "LR,sgnLP,rrLP", qrels, *runs
    )
    assert result.exit_code == 0, result.stderr
    frame = read_tsv(result.stdout)
    assert list(dict.fromkeys(frame["measure"])) == [
        "rpp",
        "dcgrpp",
        "invrpp",
        "lexirecall",
        "lexiprecision",
        "rrlexiprecision",
    ]
    canonical = invoke("compare", "-q", qrels, *runs)
    assert tsv_to_dict(result.stdout) == tsv_to_dict(canonical.stdout)


def test_measure_names_case_insensitive_and_deduplicated(collection):
    qrels, runs = collection
    result = invoke("compare", "-m", "Rpp,rpp", "-m", "LEXIRECALL, lr", qrels, *runs)
    assert result.exit_code == 0, result.stderr
    frame = read_tsv(result.stdout)
    assert list(frame["measure"]) == ["rpp"] * 3 + ["lexirecall"] * 3


def test_subtopic_aliases(collection, subtopic_qrels):
    _, runs = collection
    result = invoke("compare", "-q", "-m", "ST-RPP,stdcgrpp,STINVRPP", subtopic_qrels, *runs)
    assert result.exit_code == 0, result.stderr
    got = tsv_to_dict(result.stdout)
    assert {k[0] for k in got} == {"strpp", "stdcgrpp", "stinvrpp"}
    expected = oracle.evaluate_files(
        subtopic_qrels, runs, measures=("strpp", "stdcgrpp", "stinvrpp")
    )
    expected.update({(*k, "all"): v for k, v in oracle.summarize(expected).items()})
    oracle.assert_matches(got, expected, 1e-12)


def test_unknown_measure(collection):
    qrels, runs = collection
    result = invoke("compare", "-m", "rpp,nDCGpref", qrels, *runs)
    assert result.exit_code == 2
    assert "nDCGpref" in result.stderr
    assert result.stdout == ""


def test_subtopic_measure_on_plain_qrels(collection):
    qrels, runs = collection
    result = invoke("compare", "-m", "strpp", qrels, *runs)
    assert result.exit_code == 2
    assert "strpp" in result.stderr
    assert result.stdout == ""


def test_default_measures_with_subtopics(collection, subtopic_qrels):
    _, runs = collection
    result = invoke("compare", subtopic_qrels, *runs)
    assert result.exit_code == 0, result.stderr
    assert list(dict.fromkeys(read_tsv(result.stdout)["measure"])) == list(oracle.ALL_MEASURES)


# --------------------------------------------------------------------------- rows


def test_no_summary_with_per_query(collection):
    qrels, runs = collection
    result = invoke("compare", "-q", "-n", "-m", "rpp,lexirecall", qrels, *runs)
    assert result.exit_code == 0, result.stderr
    got = tsv_to_dict(result.stdout)
    assert len(got) == 2 * 3 * 3  # measures x pairs x queries
    assert "all" not in {k[3] for k in got}
    assert got == {
        k: v
        for k, v in _api(qrels, runs, per_query=True, measures="rpp,lexirecall").items()
        if k[3] != "all"
    }


def test_no_summary_without_per_query_is_a_usage_error(collection):
    """-n alone would leave no rows at all: a usage error, not a header-only table."""
    qrels, runs = collection
    result = invoke("compare", "-n", qrels, *runs)
    assert result.exit_code == 2
    assert "-n/--no-summary without -q" in result.stderr
    assert result.stdout == ""


def test_pairs_in_command_line_order(collection):
    qrels, runs = collection
    a, b, c = runs
    result = invoke("compare", "-q", "-m", "rpp", qrels, c, a, b)
    assert result.exit_code == 0, result.stderr
    frame = read_tsv(result.stdout)
    pairs = list(dict.fromkeys(zip(frame["run_a"], frame["run_b"])))
    assert pairs == [("sysC", "sysA"), ("sysC", "sysB"), ("sysA", "sysB")]
    # per-query rows first, then the summary rows
    is_summary = list(frame["query_id"] == "all")
    assert is_summary == sorted(is_summary)
    assert sum(is_summary) == 3
    # reversed order gives negated values
    forward = tsv_to_dict(invoke("compare", "-q", "-m", "rpp", qrels, a, c).stdout)
    backward = tsv_to_dict(result.stdout)
    for (m, x, y, q), v in forward.items():
        assert backward[(m, y, x, q)] == -v


def test_notice_when_run_misses_queries(collection):
    qrels, runs = collection
    result = invoke("compare", "-m", "rpp", qrels, *runs)
    assert result.exit_code == 0
    # sysC has no line for query 2; it is evaluated as retrieving nothing
    assert "sysC" in result.stderr
    assert "1 of 3" in result.stderr
    assert "sysA" not in result.stderr and "sysB" not in result.stderr
    values = _api(qrels, runs, per_query=True, measures="rpp,lexiprecision")
    # query 2: sysA finds d at 1 (a missed), sysC nothing: 1 U vs U U -> (1 + 0)/2 graded ...
    # relevant a (1), d (3): lambda=1 m=2: +1, 0 ; lambda=3 m=1: +1 -> (2 * 1/2 + 1 * 1)/3
    assert values[("rpp", "sysA", "sysC", "2")] == pytest.approx(2 / 3, abs=1e-12)
    assert values[("lexiprecision", "sysA", "sysC", "2")] == 1.0


def test_query_without_relevant_documents_everywhere_is_an_error(tmp_path, collection):
    _, runs = collection
    qrels = write_qrels(tmp_path / "nothing.txt", [("1", 0, "a", 0), ("2", 0, "b", -1)])
    result = invoke("compare", qrels, *runs)
    assert result.exit_code == 2
    assert str(qrels) in result.stderr


# --------------------------------------------------------------------------- formats


def _rows_tsv(text: str) -> list[tuple]:
    frame = read_tsv(text)
    assert list(frame.columns) == COLUMNS
    return list(frame.itertuples(index=False, name=None))


def _rows_csv(text: str) -> list[tuple]:
    frame = pd.read_csv(io.StringIO(text), sep=",", dtype=str, keep_default_na=False)
    assert list(frame.columns) == COLUMNS
    return list(frame.itertuples(index=False, name=None))


def _rows_jsonl(text: str) -> list[tuple]:
    rows = []
    for line in text.splitlines():
        obj = json.loads(line)
        assert list(obj) == COLUMNS
        assert all(isinstance(obj[k], str) for k in COLUMNS[:4])
        assert isinstance(obj["value"], (int, float))
        rows.append(tuple(obj[k] for k in COLUMNS))
    return rows


@pytest.mark.parametrize(
    "fmt, parse", [("tsv", _rows_tsv), ("csv", _rows_csv), ("jsonl", _rows_jsonl)]
)
def test_formats_round_trip(collection, fmt, parse):
    qrels, runs = collection
    result = invoke("compare", "-q", "-f", fmt, qrels, *runs)
    assert result.exit_code == 0, result.stderr
    rows = parse(result.stdout)
    frame = prefeval.compare(qrels, runs, per_query=True, summary=True, notify=None)
    assert len(rows) == len(frame)
    for row, expected in zip(rows, frame.itertuples(index=False, name=None)):
        assert row[:4] == tuple(str(x) for x in expected[:4])
        assert float(row[4]) == expected[4]  # exact: shortest round-trip text
    queries = {r[3] for r in rows}
    assert queries == {"001", "2", "10", "all"}
    # something that needs all 17 significant digits really is written in full
    long_values = [r[4] for r in rows if len(repr(float(r[4]))) > 12]
    assert long_values


def test_format_is_case_insensitive(collection):
    qrels, runs = collection
    upper = invoke("compare", "-f", "JSONL", qrels, *runs)
    lower = invoke("compare", "-f", "jsonl", qrels, *runs)
    assert upper.exit_code == 0
    assert upper.stdout == lower.stdout


def test_unknown_format(collection):
    qrels, runs = collection
    result = invoke("compare", "-f", "xml", qrels, *runs)
    assert result.exit_code == 2


def test_values_not_rounded(tmp_path):
    # one query with 7 relevant documents; A finds one at rank 1, B none:
    # RPP = 1/7 = 0.14285714285714285 (printed in full, not 0.1429)
    qrels = write_qrels(tmp_path / "q", [("1", 0, f"r{i}", 1) for i in range(7)])
    a = write_run(tmp_path / "A", [("1", "r3", 1.0)])
    b = write_run(tmp_path / "B", [("1", "n", 1.0)])
    result = invoke("compare", "-m", "rpp", qrels, a, b)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[1].split("\t") == ["rpp", "A", "B", "all", repr(1 / 7)]


# --------------------------------------------------------------------------- output file


def test_output_file(collection, tmp_path):
    qrels, runs = collection
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "prefs.tsv"
    result = invoke("compare", "-q", "-o", out, qrels, *runs)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    assert os.listdir(out_dir) == ["prefs.tsv"]  # no temporary file left behind
    assert out.read_text() == invoke("compare", "-q", qrels, *runs).stdout
    # an existing file is replaced as a whole
    out.write_text("old content that is longer than nothing\n" * 1000)
    result = invoke("compare", "-m", "rpp", "-o", out, qrels, *runs)
    assert result.exit_code == 0
    assert out.read_text() == invoke("compare", "-m", "rpp", qrels, *runs).stdout
    assert os.listdir(out_dir) == ["prefs.tsv"]


def test_output_file_untouched_when_writing_fails(collection, tmp_path, monkeypatch):
    """A failure in the middle of writing leaves no partial output and no temp file."""
    import prefeval.io.writers as writers

    qrels, runs = collection
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "prefs.tsv"
    out.write_text("previous\n")
    real = writers.iter_chunks

    def failing(*args, **kwargs):
        chunks = real(*args, **kwargs)
        yield next(chunks)
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(writers, "iter_chunks", failing)
    result = invoke("compare", "-q", "-o", out, qrels, *runs)
    assert result.exit_code != 0
    assert out.read_text() == "previous\n"
    assert os.listdir(out_dir) == ["prefs.tsv"]
    fresh = out_dir / "new.tsv"
    result = invoke("compare", "-q", "-o", fresh, qrels, *runs)
    assert result.exit_code != 0
    assert not fresh.exists()
    assert os.listdir(out_dir) == ["prefs.tsv"]


# --------------------------------------------------------------------------- run files


def test_gzip_run_named_without_gz(collection, tmp_path):
    qrels, runs = collection
    zipped = tmp_path / "zipped"
    zipped.mkdir()
    plain_text = runs[0].read_bytes()
    target = zipped / "input.sysA"
    target.write_bytes(gzip.compress(plain_text))
    assert target.read_bytes()[:2] == b"\x1f\x8b"
    with_gzip = invoke("compare", "-q", qrels, target, runs[1], runs[2])
    plain = invoke("compare", "-q", qrels, *runs)
    assert with_gzip.exit_code == 0, with_gzip.stderr
    assert with_gzip.stdout == plain.stdout
    # and a file named .gz that is not compressed is read as plain text
    fake = zipped / "input.sysB.gz"
    fake.write_bytes(runs[1].read_bytes())
    result = invoke("compare", "-q", qrels, runs[0], fake, runs[2])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == plain.stdout


@pytest.mark.parametrize(
    "filename, name",
    [
        ("input.alpha.gz", "alpha"),
        ("beta.run.gz", "beta"),
        ("input.gamma", "gamma"),
        ("delta", "delta"),
        ("x.input.gz.txt", "x.input.gz"),
        ("input.input.e.gz.gz", "input.e.gz"),
    ],
)
def test_run_name_rule(filename, name, tmp_path, collection):
    qrels, runs = collection
    assert run_name(f"/some/dir/{filename}") == name
    folder = tmp_path / "named"
    folder.mkdir()
    path = folder / filename
    data = runs[0].read_bytes()
    path.write_bytes(gzip.compress(data) if filename.endswith(".gz") else data)
    result = invoke("compare", "-m", "rpp", qrels, path, runs[1])
    assert result.exit_code == 0, result.stderr
    frame = read_tsv(result.stdout)
    assert list(frame["run_a"]) == [name]
    assert list(frame["run_b"]) == ["sysB"]


# --------------------------------------------------------------------------- -M and -l


def test_max_docs_cuts_after_sorting(tmp_path):
    # query 1, relevant d1 only.  Run A lists d1 first with rank 1 in the file, but all
    # three documents tie on score, so docno descending decides: d2 (1), d1 (2), d0 (3).
    # Run B retrieves only non-relevant documents.
    qrels = write_qrels(tmp_path / "q", [("1", 0, "d1", 1), ("1", 0, "d0", 0)])
    a = write_run(tmp_path / "A", [("1", "d1", 1.0), ("1", "d0", 1.0), ("1", "d2", 1.0)])
    b = write_run(tmp_path / "B", [("1", "n1", 5.0), ("1", "n2", 4.0), ("1", "n3", 3.0)])
    expected = {
        # -M 1: d1 at rank 2 = K+1 counts as unretrieved: a tie
        1: {"rpp": 0.0, "lexirecall": 0.0, "rrlexiprecision": 0.0},
        # -M 2: d1 retrieved at rank 2: A preferred, rrLP = 1/2 - 0
        2: {"rpp": 1.0, "lexirecall": 1.0, "rrlexiprecision": 0.5},
        None: {"rpp": 1.0, "lexirecall": 1.0, "rrlexiprecision": 0.5},
    }
    for k, values in expected.items():
        options = ("-M", k) if k is not None else ()
        result = invoke("compare", *options, "-m", "rpp,lexirecall,rrlp", qrels, a, b)
        assert result.exit_code == 0, result.stderr
        got = tsv_to_dict(result.stdout)
        assert got == {(m, "A", "B", "all"): v for m, v in values.items()}, k


def test_max_docs_must_be_positive(collection):
    qrels, runs = collection
    assert invoke("compare", "-M", "0", qrels, *runs).exit_code == 2


def test_fractional_relevance_level(collection):
    qrels, runs = collection
    result = invoke("compare", "-q", "-l", "1.5", qrels, *runs)
    assert result.exit_code == 0, result.stderr
    expected = oracle.evaluate_files(qrels, runs, level=1.5)
    expected.update({(*k, "all"): v for k, v in oracle.summarize(expected).items()})
    oracle.assert_matches(tsv_to_dict(result.stdout), expected, 1e-12)
    # grade >= 1.5: query 001 keeps a, query 2 keeps d, query 10 keeps g
    assert {k[3] for k in expected} == {"001", "2", "10", "all"}


# --------------------------------------------------------------------------- query ids


def test_query_named_all(tmp_path):
    """A query id that happens to be "all" must not crash the program (a traceback);
    prefeval either reports it as an input problem (exit 2) or evaluates it."""
    qrels = write_qrels(tmp_path / "q", [("all", 0, "a", 1), ("1", 0, "a", 1)])
    a = write_run(tmp_path / "A", [("all", "a", 1.0), ("1", "a", 1.0)])
    b = write_run(tmp_path / "B", [("all", "b", 1.0), ("1", "a", 1.0)])
    result = invoke("compare", "-q", "-m", "rpp", qrels, a, b)
    assert result.exit_code in (0, 2), repr(result.exception)
    if result.exit_code == 2:
        assert str(qrels) in result.stderr
    else:
        frame = read_tsv(result.stdout)
        assert len(frame) == 3  # two per-query rows and the summary


def test_digit_like_query_ids(tmp_path):
    """Query ids are strings: "1²" (str.isdigit() is true, int() fails) and "٣" must work."""
    qrels = write_qrels(tmp_path / "q", [("1²", 0, "a", 1), ("٣", 0, "a", 1), ("2", 0, "a", 1)])
    a = write_run(tmp_path / "A", [("1²", "a", 1.0), ("٣", "a", 1.0), ("2", "a", 1.0)])
    b = write_run(tmp_path / "B", [("1²", "b", 1.0), ("٣", "b", 1.0)])
    result = invoke("compare", "-q", "-m", "rpp", qrels, a, b)
    assert result.exit_code == 0, repr(result.exception)
    got = tsv_to_dict(result.stdout)
    assert got == {
        ("rpp", "A", "B", "1²"): 1.0,
        ("rpp", "A", "B", "٣"): 1.0,
        ("rpp", "A", "B", "2"): 1.0,
        ("rpp", "A", "B", "all"): 1.0,
    }
