"""Options: nonsense is a usage error naming what is wrong (exit 2), never a traceback
or a silent default; every command's --help works."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import invoke

from prefeval.cli import cli
from prefeval.core.positions import MAX_RANK

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
RUNS = [SAMPLE / "qrels.txt", *(SAMPLE / "runs" / f"input.sys0{i}" for i in (1, 2, 3))]
COMMANDS = sorted(cli.commands)  # a new command is covered too


@pytest.mark.parametrize(
    "args, message",
    [
        # one message per rule for the CLI and the API (prefeval.options): the value, not
        # the text typed, as in "0.0 is not in the range"
        (["order", "--teleport", "nan"], "Invalid value for '--teleport': nan is not a finite"),
        (["order", "--teleport", "0"], "--teleport"),
        (["discpower", "--alpha", "nan"], "Invalid value for '--alpha': nan is not a finite"),
        (["discpower", "--seed", "-1"], "--seed"),
        (["discpower", "--trials", "0"], "--trials"),
        (["compare", "-m", ","], "empty measure list"),
        (["compare", "-l", "inf"], "not a finite number"),
        (["compare", "-n"], "-n/--no-summary without -q"),
        (["robustness", "--queries", ","], "Invalid value for '--queries': ',' is an empty list."),
        (["robustness", "--queries", "5,x"], "'5,x' is not a comma-separated list of numbers."),
        (
            ["robustness", "--labels", "0.5,nan"],
            "Invalid value for '--labels': nan is not a finite",
        ),
        (["robustness"], "Error: give --queries and/or --labels\n"),
        (
            ["discpower", "--test", "hsd", "--against", "input.sys01"],
            "Error: --test hsd with "
            "--against: the HSD ranks every run by its win rate over all pairs; drop one of them",
        ),
        (["order", "--scheduler", "tcp://h:1"], "Error: --scheduler needs --engine dask\n"),
        (
            ["order", "--metrics", RUNS[0], "--no-baselines"],
            "Error: --metrics and --no-baselines contradict each other\n",
        ),
        (["order", "-B", "AP", "--no-baselines"], "contradict"),
        (["metrics", "-B", "P@0"], "cutoff @0"),
        (["metrics", "-B", "ERR_IA@0"], "cutoff @0"),
        (["metrics", "-B", "P@4294967296"], "cutoff @4294967296"),
    ],
)
def test_bad_options_are_usage_errors(args, message):
    result = invoke(*args, *RUNS)
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    assert message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


LEVEL_COMMANDS = [c for c in COMMANDS if any("-l" in p.opts for p in cli.commands[c].params)]


@pytest.mark.parametrize("level", ["0", "-1", "-0.5", "nan", "inf"])
@pytest.mark.parametrize("command", LEVEL_COMMANDS)
def test_relevance_level_is_judged_alike_by_every_command(command, level):
    """-l L means grade >= L with a finite L > 0 on every command (metrics too, and the
    analysis commands with their default baselines): anything else is a usage error
    naming -l, exit 2, before any input is read."""
    runs = RUNS[:3] if command == "explain" else RUNS
    result = invoke(command, "-l", level, *runs)
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and result.stdout == ""
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith("Error: Invalid value for '-l' / '--relevance-level': "), error
    assert ("is not in the range x>0." if level[0] in "0-" else "is not a finite number.") in error


def test_every_command_takes_a_level():
    assert set(COMMANDS) - set(LEVEL_COMMANDS) == {"measures"}  # reads no judgments


@pytest.mark.parametrize("function", ["compare", "metrics", "order", "agree", "explain"])
@pytest.mark.parametrize("level", [0, -1, math.nan])
def test_api_relevance_level_is_judged_alike(function, level):
    import prefeval

    runs = [str(r) for r in RUNS[1:3]]
    shown = (
        "nan is not a finite number."
        if math.isnan(level)
        else f"{float(level)!r} is not in the range x>0."
    )
    with pytest.raises(ValueError) as raised:
        getattr(prefeval, function)(RUNS[0], runs, relevance_level=level)
    assert str(raised.value) == f"relevance_level={shown}"


def test_prefs_with_engine_options_is_an_error(tmp_path):
    prefs = tmp_path / "prefs.tsv"
    assert invoke("compare", "-q", "-o", prefs, *RUNS).exit_code == 0
    for option in (["--binary"], ["-M", "5"], ["-l", "2"]):
        result = invoke("order", *option, "--prefs", prefs)
        assert result.exit_code == 2
        assert "cannot change preferences read with --prefs" in result.stderr
    # with the qrels, -l decides the evaluated queries: allowed
    result = invoke("order", "--no-baselines", "--prefs", prefs, RUNS[0])
    assert result.exit_code == 0, result.stderr


def test_huge_max_docs_cuts_nothing():
    plain = invoke("compare", *RUNS)
    huge = invoke("compare", "-M", "99999999999999999999", *RUNS)
    assert huge.exit_code == 0, huge.stderr
    assert huge.stdout == plain.stdout


def test_many_trials_do_not_need_memory_per_trial():
    """Trials are counted chunk by chunk: the result equals the same count in one run."""
    import numpy as np

    from prefeval.analysis.significance import hsd_pvalues

    rng = np.random.default_rng(1)
    scores = rng.random((6, 4))
    pairs = np.array([[0, 1], [0, 2], [1, 3]])
    one = hsd_pvalues(scores, pairs, trials=3000, seed=5)
    assert one.shape == (3,) and np.all((one > 0) & (one <= 1))
    assert np.array_equal(one, hsd_pvalues(scores, pairs, trials=3000, seed=5))


def test_huge_grade_is_an_error_for_baselines(tmp_path):
    qrels = tmp_path / "qrels"
    qrels.write_text("1 0 d1 1e19\n1 0 d2 1\n")
    runs = []
    for name, doc in (("a", "d1"), ("b", "d2")):
        run = tmp_path / name
        run.write_text(f"1 Q0 {doc} 1 2 r\n")
        runs.append(run)
    result = invoke("metrics", qrels, *runs)
    assert result.exit_code == 2
    assert "grade 1e+19" in result.stderr and "--no-baselines" in result.stderr
    assert invoke("compare", qrels, *runs).exit_code == 0  # preferences need no int grades


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_never_fails(command):
    args = [sys.executable, "-m", "prefeval", *([command] if command else []), "--help"]
    proc = subprocess.run(args, capture_output=True, text=True)
    assert proc.returncode == 0
    assert "Usage:" in proc.stdout
    assert "None]" not in proc.stdout  # no empty range shown as [x<=None]
    assert "Traceback" not in proc.stderr


# ------------------------------------------------------------- the one judge (prefeval.options)

LEVEL_FUNCTIONS = ["compare", "metrics", "order", "discpower", "tau", "agree", "robustness",
                   "pairs", "explain", "report"]  # fmt: skip


def test_options_are_frozen():
    import dataclasses

    from prefeval.options import Options, judge

    options = judge(relevance_level=2, max_docs=10**30, engine="LOCAL", tests="sign")
    assert (options.relevance_level, options.engine, options.tests) == (2.0, "local", ("sign",))
    assert options.max_docs == MAX_RANK  # beyond the largest rank: cuts nothing
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.relevance_level = 3
    assert judge() == Options(tests=("ttest", "sign", "hsd"))  # the commands' defaults
    assert judge(against=["a"]).tests == ("ttest", "sign")  # the HSD needs every pair
    # tests= as measures=: a list, or a comma list (the CLI repeats --test)
    assert judge(tests="ttest, sign").tests == judge(tests=["ttest", "sign"]).tests
    assert judge(tests=["hsd,ttest"]).tests == ("hsd", "ttest")
    with pytest.raises(ValueError, match="'' is not one of"):
        judge(tests="ttest,")


@pytest.mark.parametrize(
    "given, field, api",
    [
        ({"relevance_level": math.nan}, "relevance_level",
         "relevance_level=nan is not a finite number."),
        ({"relevance_level": 0}, "relevance_level", "relevance_level=0.0 is not in the range x>0."),
        ({"max_docs": 0}, "max_docs", "max_docs=0 is not in the range x>=1."),
        ({"teleport": 1.5}, "teleport", "teleport=1.5 is not in the range 0<x<=1."),
        ({"seed": -1}, "seed", "seed=-1 is not in the range 0<=x<=9223372036854775807."),
        ({"queries": ","}, "queries", "queries=',' is an empty list."),
        ({"labels": [0.5, math.inf]}, "labels", "labels=inf is not a finite number."),
        ({"method": "best"}, "method",
         "method='best' is not one of mc4, borda, winrate, copeland."),
        ({"engine": "spark"}, "engine", "engine='spark' is not one of local, dask."),
        ({"summary": False}, "summary", "summary=False without per_query=True leaves no rows"),
        ({"scheduler": "tcp://h:1"}, "scheduler", "scheduler= needs engine='dask'"),
        ({"baselines": ["AP"], "no_baselines": True}, "baselines",
         "baselines and baselines=[] (no baselines) contradict each other"),
        ({"metrics": "m.tsv", "baselines": []}, "metrics",
         "metrics= and baselines=[] (no baselines) contradict each other"),
        ({"prefs": "p.tsv", "binary": True, "max_docs": 5}, "binary",
         "binary, max_docs cannot change preferences read with prefs= (they were computed when "
         "the table was written); drop them"),
        ({"tests": "hsd", "against": "a"}, "tests",
         "tests='hsd' with against=: the HSD ranks every run by its win rate over all pairs; "
         "drop one of them"),
        ({"command": "robustness"}, "queries", "give queries= and/or labels="),
    ],
)  # fmt: skip
def test_each_rule_is_judged_once(given, field, api):
    """Every rule is written once, in prefeval.options: the judge raises one OptionError
    (a ValueError) naming the field, worded with the keywords for the API."""
    from prefeval.options import OptionError, judge

    with pytest.raises(OptionError) as raised:
        judge(**given)
    assert raised.value.field == field and isinstance(raised.value, ValueError)
    assert str(raised.value) == api


def test_prefs_with_qrels_takes_a_level():
    from prefeval.options import judge

    assert judge(prefs="p.tsv", qrels="q", relevance_level=2).relevance_level == 2.0


def test_wrong_types_are_type_errors():
    from prefeval.options import OptionError, judge

    for given in ({"alpha": True}, {"trials": 2.5}, {"measures": [1]}):
        with pytest.raises(TypeError) as raised:
            judge(**given)
        assert isinstance(raised.value, OptionError)


@pytest.mark.parametrize("function", LEVEL_FUNCTIONS)
def test_api_nan_level_is_one_answer(function, tmp_path):
    """relevance_level=nan: the same ValueError from every API function, before any input
    is read (the qrels do not exist)."""
    import prefeval

    extra = {"output": str(tmp_path / "r.html")} if function == "report" else {}
    if function == "robustness":
        extra["queries"] = [1]
    with pytest.raises(ValueError) as raised:
        getattr(prefeval, function)(
            tmp_path / "none", [str(r) for r in RUNS[1:3]], relevance_level=math.nan, **extra
        )
    assert str(raised.value) == "relevance_level=nan is not a finite number."


@pytest.mark.parametrize("command", LEVEL_FUNCTIONS)
def test_cli_nan_level_is_one_answer(command):
    runs = RUNS[:3] if command == "explain" else RUNS
    extra = ["-o", "r.html"] if command == "report" else []
    result = invoke(command, "-l", "nan", *extra, *runs)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.endswith(
        "Error: Invalid value for '-l' / '--relevance-level': nan is not a finite number.\n"
    ), result.stderr


def _entries(folder) -> int:
    import os

    return sum(name.endswith(".entry") for _, _, files in os.walk(folder) for name in files)


def _fresh_inputs(tmp_path, tag):
    """Two runs no earlier test cached (their contents are new)."""
    runs = []
    for name in ("a", "b"):
        run = tmp_path / f"{tag}.{name}"
        run.write_text("".join(f"301 Q0 {tag}{name}{i} {i} {9 - i} r\n" for i in range(1, 4)))
        runs.append(str(run))
    return str(SAMPLE / "qrels.txt"), runs


def test_api_cache_false_writes_no_entry(tmp_path, _private_cache):
    import prefeval

    qrels, runs = _fresh_inputs(tmp_path, "apicache")
    before = _entries(_private_cache)
    off = prefeval.compare(qrels, runs, cache=False, notify=None)
    assert _entries(_private_cache) == before
    on = prefeval.compare(qrels, runs, cache=True, notify=None)
    assert _entries(_private_cache) == before + 2  # one per reduced run
    assert off.equals(on)


def test_no_cache_does_not_leak_to_the_next_call(tmp_path, _private_cache):
    """--no-cache sets the field of one call: the next command in the same process (two
    CliRunner calls) reads and writes the cache again."""
    qrels, runs = _fresh_inputs(tmp_path, "clicache")
    before = _entries(_private_cache)
    assert invoke("compare", "--no-cache", qrels, *runs).exit_code == 0
    assert _entries(_private_cache) == before
    assert invoke("compare", qrels, *runs).exit_code == 0
    assert _entries(_private_cache) == before + 2


def test_cache_default_is_the_environment(monkeypatch):
    from prefeval.options import judge

    for text, on in (("0", False), ("off", False), ("FALSE", False), ("1", True), ("yes", True)):
        monkeypatch.setenv("PREFEVAL_CACHE", text)
        assert judge().cache is on
    monkeypatch.delenv("PREFEVAL_CACHE")
    assert judge().cache is True and judge(cache=False).cache is False
