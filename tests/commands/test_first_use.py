"""The first use of prefeval in a fresh interpreter: from several threads at once, or
interrupted by Ctrl-C, leaves every module whole (numpy, pandas and prefeval's own are
imported by Python's import system, which is safe under threads and removes a module
whose import was interrupted), and the command line answers Ctrl-C without a traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
QRELS = str(SAMPLE / "qrels.txt")
RUNS = [str(SAMPLE / "runs" / f"input.sys0{i}") for i in (1, 2)]
ENV = {**os.environ, "PREFEVAL_CACHE": "0"}

THREADS = """
import sys, threading
import prefeval

qrels, runs = sys.argv[1], sys.argv[2:]
results, errors = [], []
start = threading.Barrier(8)

def call():
    start.wait()
    try:
        results.append(prefeval.compare(qrels, runs, measures="rpp").to_csv(index=False))
    except BaseException as error:
        errors.append(repr(error))

threads = [threading.Thread(target=call) for _ in range(8)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(len(results), len(set(results)), errors)
"""


def test_first_calls_from_eight_threads_at_once_all_succeed():
    """Eight threads call ``prefeval.compare`` at the same moment in a fresh interpreter:
    every one gets the same table."""
    proc = subprocess.run(
        [sys.executable, "-c", THREADS, QRELS, *RUNS],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "8 1 []", proc.stderr


INTERRUPTED = """
import sys, threading, time, _thread
delay, qrels, runs = float(sys.argv[1]), sys.argv[2], sys.argv[3:]
timer = threading.Timer(delay, _thread.interrupt_main)
first = "finished"
try:
    timer.start()
    import prefeval
    prefeval.compare(qrels, runs, measures="rpp")
    timer.join()
    time.sleep(1)  # the interrupt comes here when the first call was faster
except KeyboardInterrupt:
    first = "interrupted"
import pandas
import prefeval
table = prefeval.compare(qrels, runs, measures="rpp")
print(first, round(float(table["value"].iloc[0]), 5), pandas.DataFrame({"a": [1]}).shape)
"""


@pytest.mark.parametrize("delay", [0.0, 0.1, 0.2, 0.3, 0.4, 0.6, 0.8])
def test_an_interrupted_first_call_leaves_every_module_whole(delay):
    """Ctrl-C at any moment of the first call (while numpy, pandas and prefeval are
    being imported, or while computing): the next call gives the right value, and the
    user's own ``pandas.DataFrame`` works."""
    proc = subprocess.run(
        [sys.executable, "-c", INTERRUPTED, str(delay), QRELS, *RUNS],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["interrupted", "-0.25082", "(1,", "1)"], proc.stderr


#: ``prefeval`` as started from a terminal: Ctrl-C raises KeyboardInterrupt (a suite run
#: in the background inherits SIGINT ignored, and Python keeps it so); ``ready`` on
#: stderr once prefeval's entry point is imported, as the console script's first line
#: does (a Ctrl-C before it is Python's own start: its traceback is the interpreter's)
MAIN = (
    "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "import sys; sys.argv[0] = 'prefeval'; from prefeval.cli import main; "
    "print('ready', file=sys.stderr, flush=True); main()"
)
#: Python's own report of a Ctrl-C in :data:`MAIN` after ``ready``, before ``main()``
#: has begun (as in a console script's line that calls it)
BEFORE_MAIN = (
    'Traceback (most recent call last):\n  File "<string>", line 1, in <module>\n'
    "KeyboardInterrupt\n"
)


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.2, 0.4, 0.8])
def test_ctrl_c_in_the_first_second_prints_no_traceback(delay, tmp_path):
    """SIGINT while the command imports its libraries or starts computing: one line, a
    non-zero status, no traceback and no output file."""
    out = tmp_path / "prefs.tsv"
    proc = subprocess.Popen(
        [sys.executable, "-c", MAIN, "compare", "-q", "-o", str(out), QRELS, *RUNS],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    assert proc.stderr.readline() == "ready\n"
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    if stderr == BEFORE_MAIN:
        return  # the signal came between 'ready' and main(): the script's own line
    assert "Traceback" not in stderr, stderr
    assert stdout == ""
    # a fast machine may finish first: then the signal comes after the command's work,
    # at worst while the interpreter exits, with its default action (no message)
    finished = proc.returncode in (0, -signal.SIGINT) and stderr == ""
    if not finished:
        assert proc.returncode == 1 and stderr.strip().splitlines()[-1] == "Aborted!", stderr
        assert list(tmp_path.iterdir()) == []


HELP = (
    "import atexit, sys\n"
    "atexit.register(lambda: print(sorted(m for m in ('numpy', 'pandas', 'pyarrow') "
    "if m in sys.modules), file=sys.stderr))\n"
    "sys.argv[0] = 'prefeval'\n"
    "from prefeval.cli import main\n"
    "main()\n"
)


def test_the_group_s_help_imports_no_library():
    """``prefeval --help`` lists every command without importing them (nor numpy,
    pandas or pyarrow with them); a command's own help imports it."""
    listing = subprocess.run(
        [sys.executable, "-c", HELP, "--help"], capture_output=True, text=True, env=ENV
    )
    assert listing.returncode == 0, listing.stderr
    assert listing.stderr.strip() == "[]"
    assert "  compare     Preference of every pair of RUNs on QRELS.\n" in listing.stdout
    own = subprocess.run(
        [sys.executable, "-c", HELP, "compare", "--help"], capture_output=True, text=True, env=ENV
    )
    assert own.returncode == 0 and own.stderr.strip() == "['numpy']"


#: what ``compare`` on TREC text runs does without: pandas (a quarter of a second to
#: import), numba, scipy, ir-measures, matplotlib, Dask
UNNEEDED = ("dask", "ir_measures", "matplotlib", "numba", "pandas", "scipy")

#: compare's calls in one process (each twice: with the cache, computed then read), then
#: the modules of UNNEEDED it imported
LOADED = """
import sys
from prefeval.cli import main
for args in ARGS:
    for _ in range(2):
        try:
            main(args)
        except SystemExit as done:
            assert not done.code, (args, done.code)
print(sorted(m for m in UNNEEDED if m in sys.modules))
"""


@pytest.mark.parametrize("pass_", ["1", "0"], ids=["one-pass reader", "Arrow reader"])
@pytest.mark.parametrize("cache", ["0", "1"], ids=["cache off", "cache on"])
def test_compare_on_text_runs_imports_no_library_it_does_not_need(tmp_path, pass_, cache):
    """compare on TREC text runs, whichever reader reads them, cache on or off, in the
    text formats, summary and per-query rows: its output without importing pandas (nor
    numba, scipy, ir-measures); the values are the same as with pandas (tests/fidelity)."""
    env = {
        **os.environ, "PREFEVAL_CACHE": cache, "PREFEVAL_TEXT_PASS": pass_,
        "PREFEVAL_CACHE_DIR": str(tmp_path / "cache"),
    }  # fmt: skip
    options = [[], ["-q"], ["-q", "--both-directions", "-f", "jsonl"], ["-f", "csv", "-p", "3"]]
    outputs = [tmp_path / f"out{k}" for k in range(len(options))]
    calls = [
        ["compare", *given, "-o", str(out), QRELS, *RUNS] for given, out in zip(options, outputs)
    ]
    script = f"ARGS = {calls!r}\nUNNEEDED = {UNNEEDED!r}\n" + LOADED
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    # 6 measures (the plain qrels' default) x 1 pair; -q: per query (20) and the summary
    m, q = 6, 20
    assert [out.read_text().count("sys01") for out in outputs] == [
        m,
        m * (q + 1),
        2 * m * (q + 1),
        m,
    ]


@pytest.mark.parametrize("limit", [20, 45, 74, 200])
def test_the_group_s_listing_is_each_command_s_own_summary(limit):
    """The line of each command in ``prefeval --help``, read from its module's source,
    is the one click makes of the imported command, whatever the width."""
    from prefeval.cli.group import COMMANDS, Commands

    unloaded, loaded = Commands(COMMANDS), Commands(COMMANDS)
    for name in COMMANDS:
        assert unloaded.summary(name, limit) == loaded[name].get_short_help_str(limit)
    assert list(unloaded) == list(COMMANDS)
