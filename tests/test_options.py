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

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data"
RUNS = [SAMPLE / "qrels.txt", *(SAMPLE / "runs" / f"input.sys0{i}" for i in (1, 2, 3))]
COMMANDS = sorted(cli.commands)  # a new command is covered too


@pytest.mark.parametrize(
    "args, message",
    [
        (["order", "--teleport", "nan"], "'nan' is not a finite number"),
        (["order", "--teleport", "0"], "--teleport"),
        (["discpower", "--alpha", "nan"], "'nan' is not a finite number"),
        (["discpower", "--seed", "-1"], "--seed"),
        (["discpower", "--trials", "0"], "--trials"),
        (["compare", "-m", ","], "empty measure list"),
        (["compare", "-l", "inf"], "not a finite number"),
        (["compare", "-n"], "-n/--no-summary without -q"),
        (["robustness", "--queries", ","], "empty list"),
        (["robustness", "--labels", "0.5,nan"], "not a finite number"),
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
    message = "not a finite number" if math.isnan(level) else "must be 0 < relevance_level"
    with pytest.raises(ValueError, match=message):
        getattr(prefeval, function)(RUNS[0], runs, relevance_level=level)


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
