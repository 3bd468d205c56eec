"""The Python API (prefeval.api): the same tables as the commands, every input flavour,
plain string ids, notices as warnings, clear errors for bad input."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import warnings
from pathlib import Path

import ir_measures
import numpy as np
import pandas as pd
import pytest
from helpers import invoke, read_tsv

import prefeval
from prefeval.core.errors import InputError, PrefevalWarning

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
QRELS = SAMPLE / "qrels.txt"
SUBTOPICS = SAMPLE / "qrels.subtopics.txt"
RUNS = sorted((SAMPLE / "runs").glob("input.*"))
NAMES = ["sys01", "sys02", "sys03", "sys04", "sys05", "sys06"]
TEXT_COLUMNS = {"measure", "run", "run_a", "run_b", "query_id", "method", "test", "correction"}
TEXT_COLUMNS |= {"measure_a", "measure_b", "baseline", "kind"}


def _cli_table(*args) -> pd.DataFrame:
    result = invoke(*args)
    assert result.exit_code == 0, result.stderr
    return read_tsv(result.stdout)


def assert_same_as_cli(frame: pd.DataFrame, cli: pd.DataFrame) -> None:
    """The API frame has the CLI's columns and rows in the same order, values exactly
    equal (the tsv writes shortest round-trip floats)."""
    assert list(frame.columns) == list(cli.columns)
    assert len(frame) == len(cli) > 0
    for column in frame.columns:
        got = frame[column].tolist()
        text = cli[column].tolist()
        if column in TEXT_COLUMNS:
            assert all(type(x) is str for x in got), column
            assert got == text, column
        else:
            want = [float(x) if x != "" else math.nan for x in text]  # NaN is written empty
            assert all((math.isnan(w) and math.isnan(g)) or w == g for g, w in zip(got, want)), (
                column
            )


def _read_run_frame(path: Path) -> pd.DataFrame:
    """A run file as pandas reads it: integer query ids."""
    return pd.read_csv(
        path,
        sep=r"\s+",
        header=None,
        names=["query_id", "iteration", "doc_id", "rank", "score", "tag"],
        compression="gzip" if path.read_bytes()[:2] == b"\x1f\x8b" else None,
    )


def _read_qrels_frame(path: Path) -> pd.DataFrame:
    return pd.read_csv(
        path, sep=r"\s+", header=None, names=["query_id", "iteration", "doc_id", "relevance"]
    )


@pytest.fixture(scope="module")
def frames():
    runs = {name: _read_run_frame(p) for name, p in zip(NAMES, RUNS)}
    assert runs["sys01"]["query_id"].dtype.kind == "i"  # ids read as integers
    return {"qrels": _read_qrels_frame(QRELS), "subtopics": _read_qrels_frame(SUBTOPICS), **runs}


def quiet(function, *args, **kwargs):
    return function(*args, notify=None, **kwargs)


# --------------------------------------------------------------------------- same as the CLI


@pytest.mark.parametrize(
    "options, kwargs",
    [
        ([], {}),
        (["-q"], {"per_query": True, "summary": True}),
        (["-q", "-n"], {"per_query": True}),  # per_query=True: the per-query rows only
        (["-q", "-n"], {"per_query": True, "summary": False}),
        (
            ["-q", "--binary", "-l", "2", "-M", "20", "-m", "rpp,LR", "-m", "rrLP"],
            {
                "per_query": True,
                "summary": True,
                "binary": True,
                "relevance_level": 2,
                "max_docs": 20,
                "measures": ["rpp,LR", "rrLP"],
            },
        ),
    ],
)
def test_compare_as_cli(options, kwargs):
    cli = _cli_table("compare", *options, QRELS, *RUNS)
    assert_same_as_cli(quiet(prefeval.compare, QRELS, RUNS, **kwargs), cli)


def test_compare_subtopics_as_cli():
    cli = _cli_table("compare", "-q", "-m", "ST-RPP,rpp", SUBTOPICS, *RUNS)
    api = quiet(
        prefeval.compare, str(SUBTOPICS), RUNS, measures="ST-RPP,rpp", per_query=True, summary=True
    )
    assert_same_as_cli(api, cli)


def test_metrics_as_cli():
    cli = _cli_table("metrics", "-B", "AP", "-B", "nDCG@10", "-M", "30", QRELS, *RUNS)
    api = quiet(prefeval.metrics, QRELS, RUNS, measures=["AP", "nDCG@10"], max_docs=30)
    assert_same_as_cli(api, cli)
    # trec_eval names and lists, per-query rows, no summary: as -m map,ndcg_cut_10 -q -n
    cli = _cli_table("metrics", "-m", "map,ndcg_cut_10", "-q", "-n", QRELS, *RUNS)
    api = quiet(prefeval.metrics, QRELS, RUNS, measures="map ndcg_cut_10", per_query=True)
    assert_same_as_cli(api, cli)
    assert set(api.measure) == {"AP", "nDCG@10"} and "all" not in set(api.query_id)
    # both, in the command's -q layout
    cli = _cli_table("metrics", "-m", "map", "-q", QRELS, *RUNS)
    api = quiet(prefeval.metrics, QRELS, RUNS, measures="map", per_query=True, summary=True)
    assert_same_as_cli(api, cli)


def test_against_and_both_directions_as_cli():
    cli = _cli_table("compare", "-q", "--against", "sys02", "--both-directions", QRELS, *RUNS)
    api = quiet(prefeval.compare, QRELS, RUNS, per_query=True, summary=True, against="sys02",
                both_directions=True)  # fmt: skip
    assert_same_as_cli(api, cli)
    cli = _cli_table("pairs", "--against", "sys01", "-B", "AP", "--ci", "0.9", QRELS, *RUNS)
    api = quiet(prefeval.pairs, QRELS, RUNS, against="sys01", baselines="AP", ci=0.9)
    assert_same_as_cli(api, cli)
    assert set(api.run_b) == {"sys01"}
    cli = _cli_table("discpower", "--against", "sys01", "-B", "AP", QRELS, *RUNS)
    api = quiet(prefeval.discpower, QRELS, RUNS, against=["sys01"], baselines="AP")
    assert_same_as_cli(api, cli)
    with pytest.raises(ValueError, match="tests=.hsd. with against=: the HSD ranks every run"):
        prefeval.discpower(QRELS, RUNS, against="sys01", tests="hsd")


ANALYSES = [
    ("order", [], {}),
    ("order", ["--method", "borda", "-B", "RR"], {"method": "borda", "baselines": "RR"}),
    ("order", ["--method", "copeland", "--no-baselines"], {"method": "copeland", "baselines": []}),
    ("discpower", ["--trials", "200", "--seed", "3", "-B", "AP"], {"trials": 200, "seed": 3}),
    (
        "discpower",
        ["--pairs", "--test", "sign", "--test", "ttest", "--correction", "holm", "-m", "rpp"],
        {"pairs": True, "tests": ["sign", "ttest"], "correction": "holm", "measures": "rpp"},
    ),
    ("tau", ["-B", "AP", "-B", "nDCG", "--method", "winrate"], {"method": "winrate"}),
    ("agree", ["-B", "AP", "-l", "2"], {"relevance_level": 2.0}),
    ("agree", ["--ties", "--binary", "--no-baselines"], {"ties": True, "binary": True}),
    (
        "robustness",
        ["--queries", "5,10", "--labels", "0.5", "--samples", "2", "--seed", "7", "-B", "AP"],
        {"queries": "5,10", "labels": [0.5], "samples": 2, "seed": 7},
    ),
]


@pytest.mark.parametrize("command, options, kwargs", ANALYSES)
def test_analysis_as_cli(command, options, kwargs):
    cli = _cli_table(command, *options, QRELS, *RUNS)
    if "-B" in options and "baselines" not in kwargs:
        kwargs = {
            **kwargs,
            "baselines": [options[i + 1] for i, o in enumerate(options) if o == "-B"],
        }
    if "--no-baselines" in options:
        kwargs = {**kwargs, "baselines": []}
    api = quiet(getattr(prefeval, command), QRELS, RUNS, **kwargs)
    assert_same_as_cli(api, cli)


def test_tables_as_inputs(tmp_path):
    """prefs= and metrics= take the API's own tables (DataFrames) as the CLI takes files."""
    prefs = tmp_path / "prefs.tsv"
    metrics = tmp_path / "metrics.tsv"
    assert invoke("compare", "-q", "-o", prefs, QRELS, *RUNS).exit_code == 0
    assert invoke("metrics", "-q", "-B", "AP", "-o", metrics, QRELS, *RUNS).exit_code == 0
    cli = _cli_table("order", "--prefs", prefs, "--metrics", metrics)
    api_prefs = quiet(prefeval.compare, QRELS, RUNS, per_query=True)
    api_metrics = quiet(prefeval.metrics, QRELS, RUNS, measures="AP", per_query=True)
    assert_same_as_cli(quiet(prefeval.order, prefs=api_prefs, metrics=api_metrics), cli)
    assert_same_as_cli(quiet(prefeval.order, prefs=prefs, metrics=str(metrics)), cli)
    # the same ordering as from the runs themselves
    assert_same_as_cli(quiet(prefeval.order, QRELS, RUNS, baselines="AP"), cli)
    agree = _cli_table("agree", "--prefs", prefs, "--metrics", metrics)
    assert_same_as_cli(quiet(prefeval.agree, prefs=api_prefs, metrics=api_metrics), agree)


# --------------------------------------------------------------------------- input flavours


def _scored_docs(frame):
    return [
        ir_measures.ScoredDoc(str(q), d, float(s))
        for q, d, s in zip(frame["query_id"], frame["doc_id"], frame["score"])
    ]


def _pytrec(frame, value):
    out: dict = {}
    for q, d, v in zip(frame["query_id"], frame["doc_id"], frame[value]):
        out.setdefault(int(q), {})[d] = v
    return out


def _run_flavours(frames):
    runs = {name: frames[name] for name in NAMES}
    many = pd.concat([f.assign(run=name) for name, f in runs.items()], ignore_index=True)
    shuffled = many.sample(frac=1.0, random_state=1).reset_index(drop=True)
    return {
        "paths": RUNS,
        "str paths": [str(p) for p in RUNS],
        "dict of path": dict(zip(NAMES, RUNS)),
        "ir-measures frames": runs,
        "pyterrier frames": {
            n: f.rename(columns={"query_id": "qid", "doc_id": "docno"}).astype({"qid": str})
            for n, f in runs.items()
        },
        "float ids": {n: f.astype({"query_id": float}) for n, f in runs.items()},
        "categorical ids": {n: f.astype({"query_id": "category"}) for n, f in runs.items()},
        "many-run frame": shuffled,
        "many-run frame, name column": shuffled.rename(columns={"run": "name"}),
        "many-run pyterrier": shuffled.rename(columns={"query_id": "qid", "doc_id": "docno"}),
        "namedtuple lists": {n: _scored_docs(f) for n, f in runs.items()},
        "namedtuple generators": {n: iter(_scored_docs(f)) for n, f in runs.items()},
        "pytrec_eval dicts": {n: _pytrec(f, "score") for n, f in runs.items()},
    }


def _qrels_flavours(frames, key):
    frame = frames[key]
    plain = frame["iteration"].eq(0).all()
    qrels = [
        ir_measures.Qrel(str(q), d, int(r), str(i))
        for q, d, r, i in zip(*(frame[c] for c in ["query_id", "doc_id", "relevance", "iteration"]))
    ]
    out = {
        "path": SAMPLE / f"{'qrels.txt' if key == 'qrels' else 'qrels.subtopics.txt'}",
        "ir-measures frame": frame,
        "pyterrier frame": frame.rename(
            columns={"query_id": "qid", "doc_id": "docno", "relevance": "label"}
        ),
        "Qrel list": qrels,
        "Qrel generator": iter(qrels),
    }
    if plain:
        out["pytrec_eval dict"] = _pytrec(frame, "relevance")
        out["frame without iteration"] = frame.drop(columns="iteration")
    return out


@pytest.fixture(scope="module")
def reference():
    return {
        "qrels": quiet(prefeval.compare, QRELS, RUNS, per_query=True),
        "subtopics": quiet(
            prefeval.compare, SUBTOPICS, RUNS, per_query=True, measures="strpp,rpp,lexirecall"
        ),
    }


def test_run_flavours(frames, reference):
    for flavour, runs in _run_flavours(frames).items():
        got = quiet(prefeval.compare, QRELS, runs, per_query=True)
        pd.testing.assert_frame_equal(got, reference["qrels"], obj=flavour)


@pytest.mark.parametrize("key", ["qrels", "subtopics"])
def test_qrels_flavours(frames, reference, key):
    measures = "strpp,rpp,lexirecall" if key == "subtopics" else None
    for flavour, qrels in _qrels_flavours(frames, key).items():
        got = quiet(prefeval.compare, qrels, RUNS, per_query=True, measures=measures)
        pd.testing.assert_frame_equal(got, reference[key], obj=flavour)


def test_flavours_in_analysis_and_metrics(frames):
    """The analysis functions and metrics take the same flavours (here: PyTerrier qrels,
    one many-run frame) and give what the paths give."""
    many = pd.concat([frames[n].assign(run=n) for n in NAMES], ignore_index=True)
    qrels = frames["qrels"].rename(columns={"query_id": "qid", "relevance": "label"})
    want = quiet(prefeval.order, QRELS, RUNS, baselines=["AP", "ASL"])
    pd.testing.assert_frame_equal(quiet(prefeval.order, qrels, many, baselines=["AP", "ASL"]), want)
    want = quiet(prefeval.metrics, QRELS, RUNS, measures="nDCG@10")
    pd.testing.assert_frame_equal(quiet(prefeval.metrics, qrels, many, measures="nDCG@10"), want)


def test_run_names():
    """Paths are named by their file (input. and .gz removed), other in-memory runs of a
    list run1, run2... by position; a many-run frame's runs in sorted name order."""
    frame = pd.DataFrame({"query_id": ["301"], "doc_id": ["doc3263378"], "score": [1.0]})
    got = quiet(prefeval.compare, QRELS, [frame, RUNS[5], frame.copy()])
    assert got[["run_a", "run_b"]].drop_duplicates().values.tolist() == [
        ["run1", "sys06"],
        ["run1", "run3"],
        ["sys06", "run3"],
    ]
    many = pd.concat([frame.assign(run="b"), frame.assign(run="a"), frame.assign(run="c")])
    got = quiet(prefeval.compare, QRELS, many, measures="rpp")
    assert got[["run_a", "run_b"]].values.tolist() == [["a", "b"], ["a", "c"], ["b", "c"]]
    with pytest.raises(InputError, match="two runs are named 'sys01'"):
        quiet(prefeval.compare, QRELS, [RUNS[0], str(RUNS[0])])


def test_a_many_run_frame_is_its_runs_in_every_position(frames):
    """A DataFrame with a run column stands for its runs wherever it is, alone or in a
    list (as a many-run Parquet table does), never for one run pooling their documents;
    given under a name as one run it is an error."""
    many = pd.concat([frames[n].assign(run=n) for n in NAMES[1:3]], ignore_index=True)
    many = many.sample(frac=1.0, random_state=2)
    first, last = frames[NAMES[0]], frames[NAMES[3]]
    named = {"run1": RUNS[0], **dict(zip(NAMES[1:4], RUNS[1:4]))}  # the same runs, by path
    for function in (prefeval.compare, prefeval.metrics):
        got = quiet(function, QRELS, [first, many, RUNS[3]])
        pd.testing.assert_frame_equal(got, quiet(function, QRELS, named))
    # first in the list, and a second many-run frame: runs named by the columns, in order
    got = quiet(prefeval.compare, QRELS, [many, last.assign(name="x")], measures="rpp")
    assert got[["run_a", "run_b"]].values.tolist() == [
        ["sys02", "sys03"], ["sys02", "x"], ["sys03", "x"]
    ]  # fmt: skip
    for runs in [{"a": many}, {"a": first, "b": many}]:
        with pytest.raises(InputError) as caught:
            quiet(prefeval.compare, QRELS, runs)
        assert str(caught.value) == (
            f"<run {list(runs)[-1]}>: a DataFrame of many runs (a run column) given as the "
            f"one run {list(runs)[-1]!r}; give it in a list of runs, or drop its run column"
        )


def test_integer_ids_are_the_texts_ids():
    """151 (int), 151.0 (float) and "151" are one query; so are int docnos and their text."""
    qrels = pd.DataFrame({"qid": [151, 151], "docno": [7, 8], "label": [1, 1]})
    run_a = {151.0: {7: 2.0, 8: 1.0}}
    run_b = pd.DataFrame({"query_id": ["151", "151"], "doc_id": ["8", "9"], "score": [2, 1]})
    got = quiet(prefeval.compare, qrels, {"a": run_a, "b": run_b}, measures="rpp",
                per_query=True, summary=True)  # fmt: skip
    # relevant positions a: (1, 2), b: (1, unretrieved): RPP(a, b) = (0 + 1) / 2
    assert got.values.tolist() == [
        ["rpp", "a", "b", "151", 0.5],
        ["rpp", "a", "b", "all", 0.5],
    ]


# --------------------------------------------------------------------------- outputs


def test_ids_are_plain_strings():
    got = quiet(prefeval.compare, QRELS, RUNS, per_query=True)
    for column in ["measure", "run_a", "run_b", "query_id"]:
        assert not isinstance(got[column].dtype, pd.CategoricalDtype)
        assert pd.api.types.is_string_dtype(got[column])
        assert all(type(x) is str for x in got[column])
    one = got[got.query_id == "301"]
    assert len(one) == 6 * 15  # every measure and pair of 6 runs on query 301
    assert set(one.query_id) == {"301"}
    assert "all" not in set(got.query_id)  # per_query=True: the per-query rows only
    summary = quiet(prefeval.compare, QRELS, RUNS)
    pivot = summary.pivot(index=["measure", "run_a"], columns="run_b")
    assert pivot.shape[0] > 0
    order = quiet(prefeval.order, QRELS, RUNS, baselines="AP")
    assert all(type(x) is str for x in order["run"]) and order["rank"].dtype.kind == "i"


# --------------------------------------------------------------------------- notices


def test_notices_are_warnings(capsys):
    """sys04 has no results for one query: a PrefevalWarning pointing at the caller,
    nothing on stdout or stderr."""
    with pytest.warns(PrefevalWarning, match="run sys04: no results for 1 of 20") as record:
        prefeval.compare(QRELS, RUNS)
    assert {Path(w.filename).name for w in record} == {Path(__file__).name}
    with pytest.warns(PrefevalWarning, match="have no relevant document"):
        prefeval.order(QRELS, RUNS[:2], relevance_level=4, baselines=[])
    assert capsys.readouterr() == ("", "")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prefeval.compare(QRELS, RUNS, notify=None)
    seen = []
    prefeval.compare(QRELS, RUNS, notify=seen.append)
    assert seen == ["run sys04: no results for 1 of 20 evaluated queries; evaluated as "
                    "retrieving nothing"]  # fmt: skip


def test_a_notice_is_shown_once_per_process():
    """The same notice from every call of a session (the README's example) is shown the
    first time only, as Python shows a warning once per place; notify= gets every one,
    and a filter that makes it an error raises it every time."""
    script = f"""
import warnings
import prefeval
qrels, runs = {str(QRELS)!r}, {[str(r) for r in RUNS]!r}
prefs = prefeval.compare(qrels, runs, per_query=True)
prefeval.compare(qrels, runs)
prefeval.order(prefs=prefs, baselines=[])
seen = []
prefeval.compare(qrels, runs, notify=seen.append)
print(len(seen))
with warnings.catch_warnings():
    warnings.simplefilter("error")
    for _ in range(2):
        try:
            prefeval.metrics(qrels, runs, measures="AP", relevance_level=9)
        except prefeval.PrefevalWarning as error:
            print("raised:", error)
"""
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
        env={**os.environ, "PREFEVAL_CACHE": "0"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    notices = [line for line in proc.stderr.splitlines() if "PrefevalWarning" in line]
    assert len(notices) == 1 and notices[0].endswith(
        "PrefevalWarning: run sys04: no results for 1 of 20 evaluated queries; evaluated as "
        "retrieving nothing"
    ), proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "1"
    assert len(lines) == 3 and lines[1] == lines[2] and lines[1].startswith("raised: ")


def test_progress(capsys, monkeypatch):
    """progress=True shows bars (tqdm.auto; on stderr outside Jupyter); False shows none."""
    from prefeval.core import progress

    monkeypatch.setattr(progress, "DELAY", 0)
    quiet(prefeval.compare, QRELS, RUNS, progress=True)
    assert "reading runs" in capsys.readouterr().err
    quiet(prefeval.compare, QRELS, RUNS)
    assert capsys.readouterr() == ("", "")


# --------------------------------------------------------------------------- bad input

FRAME = pd.DataFrame({"query_id": ["301"], "doc_id": ["d"], "score": [1.0]})


@pytest.mark.parametrize(
    "runs, error, message",
    [
        ([FRAME.drop(columns="score"), FRAME], InputError, r"<run 1>: no score column"),
        (
            [FRAME.rename(columns={"doc_id": "x"}), FRAME],
            InputError,
            r"no document id column \('doc_id' or 'docno'\)",
        ),
        ([FRAME.assign(qid="301"), FRAME], InputError, "both 'query_id' and 'qid' columns"),
        (
            [pd.DataFrame({"query_id": [301, "302"], "doc_id": "d", "score": 1.0}), FRAME],
            InputError,
            r"query id column mixes or has unusable types \(int, str\)",
        ),
        ([FRAME.assign(query_id=301.5), FRAME], InputError, "301.5 is not an integer"),
        ([FRAME.assign(query_id=None), FRAME], InputError, "row 0: missing query id"),
        ([FRAME.assign(score="high"), FRAME], InputError, "score column is not numeric"),
        ([FRAME.assign(score=np.nan), FRAME], InputError, "score is not a number"),
        ([[("301", "d", 1.0)], FRAME], TypeError, "expected namedtuples"),
        ([42, FRAME], TypeError, "<run 1>: expected a path, a DataFrame"),
        ([{"301": ["d"]}, FRAME], TypeError, "<run 1>: expected a path, a DataFrame"),
        ({"a": {"301": ["d"]}, "b": FRAME}, TypeError, "<run a>: expected a path"),
        ({"301": {"d": 1.0}, "302": ["d"]}, TypeError, "<run 301>: expected a path"),
        (42, TypeError, "runs: expected paths"),
        (FRAME, ValueError, "need at least two runs"),
        ([], ValueError, "no run given"),
        (FRAME.assign(run="a", name="b"), InputError, "both 'run' and 'name' columns"),
    ],
)
def test_bad_runs(runs, error, message):
    with pytest.raises(error, match=message):
        quiet(prefeval.compare, QRELS, runs)


@pytest.mark.parametrize(
    "qrels, error, message",
    [
        (pd.DataFrame({"qid": ["1"], "docno": ["d"]}), InputError, "no relevance column"),
        ({"1": 3}, TypeError, "a dict must be"),
        (3.5, TypeError, "qrels: expected a path"),
        (
            pd.DataFrame({"qid": ["1"], "docno": ["d"], "label": [1], "iteration": ["x"]}),
            InputError,
            "iteration must be 0, Q0 or an integer",
        ),
        (pd.DataFrame({"qid": ["1"], "docno": ["d"], "label": [math.inf]}), InputError, "finite"),
    ],
)
def test_bad_qrels(qrels, error, message):
    with pytest.raises(error, match=message):
        quiet(prefeval.compare, qrels, RUNS)


@pytest.mark.parametrize(
    "function, kwargs, message",
    [
        ("compare", {"summary": False}, "leaves no rows"),
        ("compare", {"max_docs": 0}, "max_docs=0 is not in the range x>=1."),
        ("compare", {"relevance_level": math.nan}, "not a finite number"),
        ("compare", {"measures": "nope"}, "nope"),
        ("order", {"method": "best"}, "method='best' is not one of mc4"),
        ("order", {"teleport": 0}, "teleport=0.0 is not in the range 0<x<=1."),
        ("discpower", {"tests": ["ttest", "z"]}, "tests='z'"),
        ("discpower", {"alpha": 1}, "alpha=1.0"),
        ("robustness", {}, "give queries= and/or labels="),
        ("robustness", {"queries": "5,x"}, "is not a comma-separated list of numbers"),
        ("robustness", {"queries": 50}, "between 1 and 20"),
        ("agree", {"metrics": "m.tsv", "baselines": []}, "contradict"),
    ],
)
def test_bad_arguments(function, kwargs, message):
    with pytest.raises(ValueError, match=message):
        quiet(getattr(prefeval, function), QRELS, RUNS[:2], **kwargs)


def test_bad_analysis_inputs():
    with pytest.raises(ValueError, match="give qrels and at least two runs, or prefs="):
        quiet(prefeval.order, QRELS, RUNS[:1])
    with pytest.raises(ValueError, match="binary cannot change preferences"):
        quiet(prefeval.order, prefs=FRAME, binary=True)
    with pytest.raises(InputError, match=r"<prefs DataFrame>: missing columns \['measure'"):
        quiet(prefeval.order, prefs=FRAME)
    with pytest.raises(TypeError, match="prefs: expected a path or a DataFrame"):
        quiet(prefeval.order, prefs=[1, 2])


# --------------------------------------------------------------------------- real data


def test_web2012_order_as_cli(web2012):
    """API order on one many-run DataFrame (pandas-read, integer query ids) equals the
    CLI's on the run files."""
    paths = sorted((web2012 / "runs").glob("*.run.gz"))
    qrels = web2012 / "qrels.adhoc.txt.gz"
    cli = _cli_table("order", "-B", "AP", "-B", "nDCG@20", qrels, *paths)
    many = pd.concat(
        [_read_run_frame(p).assign(run=p.name[: -len(".run.gz")]) for p in paths], ignore_index=True
    )
    api = quiet(prefeval.order, qrels, many, baselines=["AP", "nDCG@20"])
    assert_same_as_cli(api, cli)


def test_empty_run_retrieves_nothing():
    """A run with no rows (an empty frame, an empty dict, no ScoredDocs) is a run that
    retrieves nothing, like an empty file."""
    empty = pd.DataFrame({"query_id": [], "doc_id": [], "score": []}, dtype=object)
    run = pd.DataFrame({"query_id": ["301"], "doc_id": ["doc3263378"], "score": [1.0]})
    for flavour in (empty, {}, []):
        got = quiet(prefeval.compare, QRELS, {"none": flavour, "one": run}, measures="LR")
        # query 301 has relevant doc3263378: "one" finds it, "none" nothing; elsewhere ties
        assert got.values.tolist() == [["lexirecall", "none", "one", "all", -1 / 20]]


def test_explain_as_cli(tmp_path):
    """The API's table, written as the command writes it, is the command's output."""
    from prefeval.io.writers import write_table

    args = ["--query", "301", "--query", "305", "-m", "rpp,lexiprecision"]
    cli = invoke("explain", "-f", "tsv", *args, QRELS, RUNS[0], RUNS[1])
    assert cli.exit_code == 0, cli.stderr
    api = quiet(prefeval.explain, QRELS, RUNS[:2], queries=["301", "305"],
                measures="rpp,lexiprecision")  # fmt: skip
    assert set(api.query_id) == {"301", "305"} and api.query_id.map(type).eq(str).all()
    write_table(api, str(tmp_path / "api.tsv"), "tsv")
    assert (tmp_path / "api.tsv").read_text() == cli.stdout
    with pytest.raises(ValueError, match="two runs"):
        prefeval.explain(QRELS, RUNS[:3])


def test_run_keys_that_print_alike_are_an_error():
    """A dict of runs keyed 1 and "1" names two runs '1': an error, not one run lost."""
    other = FRAME.assign(doc_id="e")
    with pytest.raises(InputError, match=r"two runs are named '1' .*keys 1 and '1'"):
        quiet(prefeval.compare, QRELS, {1: FRAME, "x": other, "1": other})
    with pytest.raises(InputError, match="two runs are named '1'"):
        quiet(prefeval.metrics, QRELS, {"1": FRAME, 1: other})


@pytest.mark.parametrize("iteration", [10**30, 2**63, -(2**70), "99999999999999999999"])
def test_huge_iteration_is_an_input_error(iteration):
    """An iteration beyond 64 bits is an InputError naming the row, not an OverflowError."""
    qrels = pd.DataFrame(
        {
            "qid": ["1", "1"],
            "docno": ["d", "e"],
            "label": [1, 0],
            "iteration": [type(iteration)(0), iteration],
        }
    )
    with pytest.raises(InputError, match="row 1: iteration must be 0, Q0 or an integer"):
        quiet(prefeval.compare, qrels, RUNS)


# --------------------------------------------------------------------------- ir-measures


@pytest.mark.parametrize(
    "given",
    [
        ir_measures.AP,  # alone: a KeyError from inside ir-measures before
        [ir_measures.AP, ir_measures.nDCG @ 10],
        "AP",
        ["AP", "nDCG@10"],
        "map,ndcg_cut_10",
        [ir_measures.AP, "ndcg_cut_10"],
        (m for m in [ir_measures.AP, ir_measures.nDCG @ 10]),
    ],
)
def test_metrics_takes_ir_measures(given):
    got = quiet(prefeval.metrics, QRELS, RUNS[:2], measures=given)
    measures = ["AP"] if given is ir_measures.AP or given == "AP" else ["AP", "nDCG@10"]
    assert got.measure.tolist() == [m for m in measures for _ in range(2)]
    assert got.run.tolist() == ["sys01", "sys02"] * len(measures)
    # the sample data's values, as ir-measures' own calc_aggregate gives them
    assert got.value.round(6).tolist()[:2] == [0.095394, 0.148218]
    if len(measures) == 2:
        assert got.value.round(6).tolist()[2:] == [0.096487, 0.171888]


def test_metrics_values_are_ir_measures_calc_aggregate():
    """measures= means what ir_measures.calc_aggregate(measures, qrels, run) means."""
    measures = [ir_measures.AP, ir_measures.nDCG @ 10, ir_measures.P @ 5]
    qrels = list(ir_measures.read_trec_qrels(str(QRELS)))
    run = list(ir_measures.read_trec_run(str(RUNS[0])))
    want = ir_measures.calc_aggregate(measures, qrels, run)
    got = quiet(prefeval.metrics, QRELS, RUNS[0], measures=measures)
    assert dict(zip(got.measure, got.value)) == pytest.approx(
        {str(m): v for m, v in want.items()}, abs=1e-12
    )


def test_explicit_rel_of_a_measure_object_is_kept():
    """AP(rel=1) as an object opts out of relevance_level, as the string does."""
    obj = quiet(prefeval.metrics, QRELS, RUNS[:2], measures=ir_measures.AP(rel=1),
                relevance_level=3)  # fmt: skip
    text = quiet(prefeval.metrics, QRELS, RUNS[:2], measures="AP(rel=1)", relevance_level=3)
    level = quiet(prefeval.metrics, QRELS, RUNS[:2], measures="AP", relevance_level=3)
    pd.testing.assert_frame_equal(obj, text)
    assert obj.measure.tolist() == ["AP(rel=1)"] * 2
    assert obj.value.tolist() != level.value.tolist()


@pytest.mark.parametrize("command", ["order", "discpower", "tau", "agree", "pairs"])
def test_analysis_takes_ir_measures(command):
    kwargs = (
        {"measures": "rpp", "tests": "ttest"} if command == "discpower" else {"measures": "rpp"}
    )
    want = quiet(getattr(prefeval, command), QRELS, RUNS, baselines=["AP", "nDCG@10"], **kwargs)
    for given in ([ir_measures.AP, ir_measures.nDCG @ 10], "map ndcg_cut_10"):
        got = quiet(getattr(prefeval, command), QRELS, RUNS, baselines=given, **kwargs)
        pd.testing.assert_frame_equal(got, want)
    one = quiet(getattr(prefeval, command), QRELS, RUNS, baselines=ir_measures.AP, **kwargs)
    pd.testing.assert_frame_equal(
        one, quiet(getattr(prefeval, command), QRELS, RUNS, baselines="AP", **kwargs)
    )


def test_robustness_and_report_take_ir_measures(tmp_path):
    got = quiet(prefeval.robustness, QRELS, RUNS, measures="rpp", baselines=ir_measures.AP,
                queries=[5], samples=2)  # fmt: skip
    assert got.measure.tolist() == ["rpp", "AP"]
    written = quiet(prefeval.report, QRELS, RUNS, measures="rpp", tests="ttest",
                    baselines=[ir_measures.AP, ir_measures.nDCG @ 10],
                    output=tmp_path / "r.html")  # fmt: skip
    page = Path(written[-1]).read_text()
    assert "nDCG@10" in page


def test_metrics_baselines_keyword_is_deprecated():
    with pytest.warns(DeprecationWarning, match=r"use measures=") as caught:
        old = quiet(prefeval.metrics, QRELS, RUNS[:2], baselines="AP")
    assert caught[0].filename == __file__  # attributed to the caller's line
    pd.testing.assert_frame_equal(old, quiet(prefeval.metrics, QRELS, RUNS[:2], measures="AP"))
    with pytest.raises(TypeError, match="give measures= only"):
        quiet(prefeval.metrics, QRELS, RUNS[:2], measures="AP", baselines="AP")


def test_bad_measures_are_clear_errors():
    with pytest.raises(ValueError, match="unknown baseline measure 'nope'"):
        quiet(prefeval.metrics, QRELS, RUNS[:2], measures=["AP", "nope"])
    with pytest.raises(TypeError, match="is not a string or a list of strings"):
        quiet(prefeval.order, QRELS, RUNS, baselines=[ir_measures.AP, 5])
    # pytrec_eval takes rel >= 1 only: a usage error naming the measure, as a string or not
    rel0 = r"baseline measure .*: rel must be >= 1 \(pytrec_eval, which computes AP,"
    with pytest.raises(ValueError, match=rel0):
        quiet(prefeval.metrics, QRELS, RUNS[:2], measures="AP(rel=0)")
    with pytest.raises(ValueError, match=r"baseline measure 'AP\(rel=0\)': rel must be"):
        quiet(prefeval.order, QRELS, RUNS, baselines=[ir_measures.AP(rel=0)])


def test_errors_name_the_keyword_given():
    """An error about a keyword names the keyword the caller gave: metrics' measures=
    (passed down as the judge's baselines), baselines= where the caller used that,
    explain's queries=, a notify= that is not callable."""
    with pytest.raises(TypeError) as caught:
        prefeval.metrics(QRELS, RUNS[:2], measures=5)
    assert str(caught.value) == "measures=5 is not a string or a list of strings."
    assert isinstance(caught.value, ValueError)  # an OptionError still
    with pytest.raises(TypeError) as caught, pytest.warns(DeprecationWarning):
        prefeval.metrics(QRELS, RUNS[:2], baselines=5)
    assert str(caught.value) == "baselines=5 is not a string or a list of strings."
    with pytest.raises(ValueError) as caught:
        prefeval.explain(QRELS, RUNS[:2], queries="999")
    assert str(caught.value) == "queries='999': no such query in the qrels"
    with pytest.raises(TypeError) as caught:
        prefeval.compare(QRELS, RUNS[:2], notify=5)
    assert str(caught.value) == (
        "notify=5 is not callable: give a function of one message (a str), or None for no notices"
    )


def test_metrics_runid_as_the_command():
    """measures="AP,runid" computes AP and notifies that runid is no value, as
    ``metrics -m AP,runid`` does; runid alone is the table without rows."""
    told = []
    table = prefeval.metrics(QRELS, RUNS[:2], measures="AP,runid", notify=told.append)
    expected = quiet(prefeval.metrics, QRELS, RUNS[:2], measures="AP")
    pd.testing.assert_frame_equal(table, expected)
    assert told == [
        "runid: no rows; the run column names each run (trec_eval's runid is the run's tag, "
        "not a value)"
    ]
    alone = prefeval.metrics(QRELS, RUNS[:2], measures=["runid"], notify=None)
    assert list(alone.columns) == ["measure", "run", "query_id", "value"] and alone.empty


def test_per_query_rows_only():
    """per_query=True: the per-query rows (as iter_calc), the summary a separate call (as
    calc_aggregate); for compare the summary is their mean."""
    rows = quiet(prefeval.compare, QRELS, RUNS, measures="rpp", per_query=True)
    summary = quiet(prefeval.compare, QRELS, RUNS, measures="rpp")
    assert "all" not in set(rows.query_id) and set(summary.query_id) == {"all"}
    means = rows.groupby(["run_a", "run_b"], sort=False)["value"].mean()
    assert means.tolist() == pytest.approx(summary.value.tolist(), abs=1e-15)
    assert summary.value.iloc[0] == pytest.approx(-0.25081994494028204, abs=1e-15)
    with pytest.raises(ValueError, match="leaves no rows"):
        quiet(prefeval.compare, QRELS, RUNS, per_query=False, summary=False)


def test_dir_lists_the_commands():
    from prefeval.cli import cli

    names = dir(prefeval)
    assert set(cli.commands) - {"measures"} <= set(names)  # measures: MEASURES
    assert {"MEASURES", "read_qrels", "PrefevalWarning", "__version__"} <= set(names)
    assert all(getattr(prefeval, name) is not None for name in names)


def test_docstring_examples_run(monkeypatch):
    """Every public function's docstring has an example, and it gives what it shows (run
    from the repository root, where sample_data/ is)."""
    import doctest
    import inspect

    monkeypatch.chdir(SAMPLE.parent)
    functions = [
        getattr(prefeval, n) for n in dir(prefeval) if inspect.isfunction(getattr(prefeval, n))
    ]
    assert len(functions) == 15
    finder, runner = (
        doctest.DocTestFinder(),
        doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE),
    )
    tests = [t for f in functions for t in finder.find(f) if t.examples]
    assert sorted(t.name for t in tests) == sorted(f.__name__ for f in functions)
    tests += finder.find(prefeval)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrefevalWarning)
        for test in tests:
            runner.run(test)
    assert runner.summarize(verbose=False).failed == 0
