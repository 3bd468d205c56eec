"""End to end on the real TREC Web 2012 data (../shared/data/web2012): the CLI's output
for every pair, query and measure equals the naive oracle."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import oracle
import pandas as pd
import pytest
from helpers import WEB2012_RUN_NAMES as RUN_NAMES
from helpers import invoke, tsv_to_dict

TOL = 1e-9


@pytest.fixture(scope="module")
def data(web2012):
    """Paths and oracle-parsed contents (parsed once for the module)."""
    runs = sorted((web2012 / "runs").glob("*.run.gz"))
    assert [oracle.run_name(p) for p in runs] == RUN_NAMES
    adhoc = web2012 / "qrels.adhoc.txt.gz"
    diversity = web2012 / "qrels.diversity-ndeval.txt.gz"
    return {
        "runs": runs,
        "adhoc": adhoc,
        "diversity": diversity,
        "adhoc_rows": oracle.parse_qrels_text(oracle.read_text(adhoc)),
        "diversity_rows": oracle.parse_qrels_text(oracle.read_text(diversity)),
        "run_rows": {oracle.run_name(p): oracle.parse_run_text(oracle.read_text(p)) for p in runs},
    }


def _expected(qrels_rows, run_rows, **kwargs) -> dict:
    values = oracle.evaluate(qrels_rows, run_rows, **kwargs)
    summary = {(m, a, b, "all"): v for (m, a, b), v in oracle.summarize(values).items()}
    return {**values, **summary}


def _jsonl_to_dict(text: str) -> dict:
    out = {}
    for line in text.splitlines():
        row = json.loads(line)
        assert set(row) == {"measure", "run_a", "run_b", "query_id", "value"}
        assert isinstance(row["query_id"], str)
        out[(row["measure"], row["run_a"], row["run_b"], row["query_id"])] = row["value"]
    return out


def _check_summary_is_mean(values: dict) -> None:
    per_query = defaultdict(list)
    for (m, a, b, q), v in values.items():
        if q != "all":
            per_query[(m, a, b)].append(v)
    summaries = {(m, a, b): v for (m, a, b, q), v in values.items() if q == "all"}
    assert set(summaries) == set(per_query)
    for key, vals in per_query.items():
        assert summaries[key] == pytest.approx(sum(vals) / len(vals), abs=1e-12), key


def _check_pair_order(values: dict) -> None:
    for _m, a, b, _q in values:
        assert RUN_NAMES.index(a) < RUN_NAMES.index(b)


def test_binary_level1_jsonl(data):
    result = invoke(
        "compare", "--binary", "-l", "1", "-q", "-f", "jsonl", data["adhoc"], *data["runs"]
    )
    assert result.exit_code == 0, result.stderr
    got = _jsonl_to_dict(result.stdout)
    expected = _expected(data["adhoc_rows"], data["run_rows"], level=1, binary=True)
    assert len(expected) == 6 * 28 * 51  # measures x pairs x (50 queries + summary)
    oracle.assert_matches(got, expected, TOL)
    _check_summary_is_mean(got)
    _check_pair_order(got)


def test_graded_default(data):
    result = invoke("compare", "-q", data["adhoc"], *data["runs"])
    assert result.exit_code == 0, result.stderr
    got = tsv_to_dict(result.stdout)
    expected = _expected(data["adhoc_rows"], data["run_rows"])
    assert {k[0] for k in got} == set(oracle.PLAIN_MEASURES)
    oracle.assert_matches(got, expected, TOL)
    _check_summary_is_mean(got)
    _check_pair_order(got)


def test_subtopic(data):
    result = invoke("compare", "-q", "-f", "csv", data["diversity"], *data["runs"])
    assert result.exit_code == 0, result.stderr
    frame = pd.read_csv(io.StringIO(result.stdout), dtype=str, keep_default_na=False)
    got = {
        (m, a, b, q): float(v)
        for m, a, b, q, v in frame[["measure", "run_a", "run_b", "query_id", "value"]].itertuples(
            index=False
        )
    }
    expected = _expected(data["diversity_rows"], data["run_rows"])
    assert {k[0] for k in got} == set(oracle.ALL_MEASURES)
    assert len({k[3] for k in got if k[0] == "strpp"}) == 51
    oracle.assert_matches(got, expected, TOL)
    _check_summary_is_mean(got)


def test_level2_drops_queries(data):
    result = invoke("compare", "-l", "2", "-q", "-m", "rpp,LR,rrLP", data["adhoc"], *data["runs"])
    assert result.exit_code == 0, result.stderr
    assert "2 of 50 queries" in result.stderr
    assert "grade >= 2" in result.stderr
    got = tsv_to_dict(result.stdout)
    queries = {k[3] for k in got} - {"all"}
    assert len(queries) == 48
    assert "177" not in queries and "195" not in queries
    expected = _expected(
        data["adhoc_rows"],
        data["run_rows"],
        measures=("rpp", "lexirecall", "rrlexiprecision"),
        level=2,
    )
    oracle.assert_matches(got, expected, TOL)
    _check_summary_is_mean(got)


def test_max_docs_cutoff(data):
    runs = data["runs"][:4]
    result = invoke("compare", "-q", "-M", "20", "-m", "rpp,invrpp,sgnLP", data["adhoc"], *runs)
    assert result.exit_code == 0, result.stderr
    expected = _expected(
        data["adhoc_rows"],
        {n: data["run_rows"][n] for n in RUN_NAMES[:4]},
        measures=("rpp", "invrpp", "lexiprecision"),
        max_docs=20,
    )
    oracle.assert_matches(tsv_to_dict(result.stdout), expected, TOL)


# Concrete values (computed with tests/oracle.py on this data), so that a regression
# affecting prefeval and the oracle alike still shows.  (options, qrels, run_a, run_b,
# {measure: summary value}); run_a is given first on the command line.
KNOWN = {
    "binary": (
        ("--binary", "-l", "1"),
        "adhoc",
        "ql-cata-filtered",
        "ql-cata",
        {
            "rpp": 0.09876346263218666,
            "invrpp": 0.2980897665182342,
            "lexirecall": -0.94,
            "lexiprecision": 0.38,
            "rrlexiprecision": 0.1552490887134208,
        },
    ),
    "graded": (
        (),
        "adhoc",
        "rm-catb",
        "ql-catb",
        {
            "rpp": 0.10837355454470453,
            "dcgrpp": 0.12304567503984618,
            "rrlexiprecision": -0.031118577302829867,
        },
    ),
    "subtopic": (
        (),
        "diversity",
        "rm-cata",
        "ql-cata-filtered",
        {
            "strpp": -0.033765353977547846,
            "stinvrpp": -0.2934653196300394,
            "rpp": -0.04314863100869202,
            "lexirecall": 0.88,
        },
    ),
}


@pytest.mark.parametrize("case", sorted(KNOWN))
def test_known_values(data, case):
    options, qrels, run_a, run_b, values = KNOWN[case]
    paths = [data["runs"][RUN_NAMES.index(run_a)], data["runs"][RUN_NAMES.index(run_b)]]
    result = invoke("compare", *options, "-m", ",".join(values), data[qrels], *paths)
    assert result.exit_code == 0, result.stderr
    got = tsv_to_dict(result.stdout)
    assert got == {(m, run_a, run_b, "all"): pytest.approx(v, abs=TOL) for m, v in values.items()}


def test_real_subprocess(data, tmp_path):
    """One real process: the installed console script, output to a file."""
    script = Path(sys.executable).with_name("prefeval")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "prefeval"]
    out = tmp_path / "prefs.tsv"
    proc = subprocess.run(
        [
            *command,
            "compare",
            "--binary",
            "-l",
            "1",
            "-m",
            "rpp,lexirecall",
            "-o",
            str(out),
            str(data["adhoc"]),
            str(data["runs"][0]),
            str(data["runs"][1]),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    got = tsv_to_dict(out.read_text())
    assert got == {
        ("rpp", RUN_NAMES[0], RUN_NAMES[1], "all"): pytest.approx(0.09876346263218666, abs=TOL),
        ("lexirecall", RUN_NAMES[0], RUN_NAMES[1], "all"): pytest.approx(-0.94, abs=TOL),
    }
