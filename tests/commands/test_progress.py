"""One progress bar per command, relabelled by stage, only after DELAY seconds of work."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import tqdm.auto
import tqdm.std
from helpers import invoke, on_terminal, run_on_terminal, screen

from prefeval.core import progress

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
INPUTS = [SAMPLE / "qrels.txt", *(SAMPLE / "runs" / f"input.sys0{i}" for i in (1, 2, 3))]


class Recorder(tqdm.auto.tqdm):
    """A tqdm that records its instances and every (label, unit, count) it showed."""

    instances: list = []
    stages: list = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        Recorder.instances.append(self)
        self._note()

    def _note(self):
        if Recorder.stages and Recorder.stages[-1][0] == self.desc and not Recorder.stages[-1][3]:
            Recorder.stages.pop()  # relabelled, then restarted: one stage
        Recorder.stages.append([self.desc, self.unit, self.total, 0])

    def reset(self, total=None):
        super().reset(total)
        self._note()

    def set_description_str(self, desc=None, refresh=True):
        super().set_description_str(desc, refresh)
        if Recorder.stages and desc != Recorder.stages[-1][0]:  # relabelled
            self._note()

    def update(self, n=1):
        Recorder.stages[-1][3] += n
        return super().update(n)


@pytest.fixture
def recorded(monkeypatch):
    Recorder.instances, Recorder.stages = [], []
    monkeypatch.setattr(tqdm.auto, "tqdm", Recorder)
    monkeypatch.setattr(progress, "_terminal", lambda: True)  # as if stderr were a tty
    monkeypatch.setattr(progress, "DELAY", 0.0)
    return Recorder


def test_one_bar_across_the_stages_of_a_command(recorded):
    result = invoke(
        "discpower", "--no-cache", "--test", "hsd", "--trials", "1500", "-m", "rpp,lexirecall",
        "-B", "AP", *INPUTS,
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert len(recorded.instances) == 1  # one bar, relabelled
    assert [stage[0] for stage in recorded.stages] == [
        "reading runs",
        "comparing runs",
        "baselines (ir-measures)",
        "HSD trials rpp (1 of 3)",
        "HSD trials lexirecall (2 of 3)",
        "HSD trials AP (3 of 3)",
    ]
    units = {desc: (unit, total, done) for desc, unit, total, done in recorded.stages}
    assert units["reading runs"] == ("run", 3, 3)
    assert units["baselines (ir-measures)"] == ("run", 3, 3)
    # the measures' trials are one stretch of the bar: counted on, the total all of them
    # (trials, not chunks), so the ETA covers the three
    assert units["HSD trials rpp (1 of 3)"] == ("trial", 4500, 1500)
    assert units["HSD trials AP (3 of 3)"] == ("trial", 4500, 1500)
    (bar,) = recorded.instances
    assert bar.n == bar.total == 4500
    unit, total, done = units["comparing runs"]
    assert unit == "query" and total == done == 20  # the sample has 20 queries
    assert "HSD trials AP" in result.stderr  # the bar went to stderr, not stdout
    assert "trial" not in result.stdout


def test_inner_stages_count_in_the_outer_one(recorded):
    result = invoke(
        "robustness", "--no-cache", "--no-baselines", "--labels", "0.5,0.8", "--samples", "3",
        "-m", "rpp", *INPUTS,
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    labels = [stage[0] for stage in recorded.stages]
    assert labels[-1] == "label samples"  # each sample's comparisons do not relabel it
    assert recorded.stages[-1][1:] == ["sample", 6, 6]


@pytest.mark.parametrize("ext", ["html", "md"])
def test_the_report_counts_its_figures_as_a_stage(recorded, tmp_path, ext):
    """After the tests, the report's figures are a stage of their own, counted to the
    end (the bar stayed at "HSD trials 100%" while they were drawn)."""
    pytest.importorskip("matplotlib")
    output = tmp_path / f"report.{ext}"
    result = invoke(
        "report", "--no-cache", "--trials", "200", "-B", "AP", "-m", "rpp", "-o", output,
        *INPUTS,
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    text = output.read_text()
    figures = text.count("<figure") if ext == "html" else text.count("](<report-")
    assert figures == 2  # discriminative power and tau, at 3 runs
    assert recorded.stages[-1] == ["figures", "figure", figures, figures]
    assert recorded.stages[-2][0].startswith("HSD trials")


def _bars(seen: bytes) -> list[str]:
    """Every state of the bar drawn on the terminal (the pieces between carriage
    returns that hold a bar), escape sequences dropped."""
    import re

    pieces = re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", seen).decode("utf-8", "replace")
    return [p.strip("\n") for p in re.split(r"[\r\n]", pieces) if "%|" in p]


@pytest.mark.parametrize("columns", [80, 120])
def test_the_bar_stays_readable_on_a_narrow_terminal(columns):
    """At 80 columns the bar leaves out the rate and keeps 10 characters of bar beside
    the longest label; at 120 it is tqdm's own line, the rate included."""
    code, seen, _ = on_terminal(
        "discpower", "--no-cache", "--test", "hsd", "--trials", "3000",
        "-m", "rpp,rrlexiprecision", "-B", "AP", *INPUTS, columns=columns,
    )  # fmt: skip
    assert code == 0
    bars = _bars(seen)
    assert any("HSD trials rrlexiprecision (2 of 3)" in b for b in bars), bars
    for line in bars:
        assert len(line) <= columns, line
        assert len(line.split("|")[1]) >= 10, line  # the bar itself
    rates = [line for line in bars if line.endswith("/s]")]
    assert bool(rates) == (columns == 120), bars


def test_quick_work_shows_nothing(monkeypatch):
    """Work shorter than DELAY by the clock prints no bar: the clock (prefeval's and
    tqdm's) stands still here, so the command is quick on any machine under any load
    (a DELAY of 60 s stood for "far more than this command takes")."""
    monkeypatch.setattr(progress, "_terminal", lambda: True)
    monkeypatch.setattr(progress, "time", SimpleNamespace(monotonic=lambda: 1000.0))
    monkeypatch.setattr(tqdm.std, "time", lambda: 1000.0)
    result = invoke("compare", "--no-cache", *INPUTS)
    assert result.exit_code == 0
    assert result.stderr == ""
    # the same command on a clock past DELAY at each look shows its bar
    ticks = iter(range(0, 10**6, 2))
    monkeypatch.setattr(tqdm.std, "time", lambda: float(next(ticks)))
    assert "comparing runs" in invoke("compare", "--no-cache", *INPUTS).stderr


def test_no_bar_off_a_terminal(monkeypatch):
    monkeypatch.setattr(progress, "DELAY", 0.0)
    result = invoke("compare", "--no-cache", *INPUTS)  # the runner's stderr is no tty
    assert result.exit_code == 0
    assert result.stderr == ""


def test_notices_and_the_table_stay_readable_on_a_terminal():
    """On a terminal (stdout and stderr), notices printed while the bar shows are on
    lines of their own, the table is intact and no piece of a bar stays on the screen
    (no bar frozen at "0%" in front of the notice or of the table's header)."""
    runs = [SAMPLE / "runs" / f"input.sys0{i}" for i in (1, 2, 3, 4)]  # sys04 misses one
    code, seen, _ = on_terminal(
        "discpower", "--no-cache", "--test", "hsd", "--trials", "3000", "-m", "rpp,lexirecall",
        "-B", "AP", SAMPLE / "qrels.txt", *runs,
    )  # fmt: skip
    assert code == 0
    assert b"HSD trials lexirecall (2 of 3)" in seen  # the bar did show
    assert screen(seen) == [
        "prefeval: run sys04: no results for 1 of 20 evaluated queries; evaluated as "
        "retrieving nothing",
        "prefeval: significance tests on 20 queries, fewer than 25: their p-values are a "
        "weak guide",
        "measure     test  correction  alpha  significant  pairs  percent",
        "rpp         hsd   tukey        0.05            4      6  66.6667",
        "lexirecall  hsd   tukey        0.05            3      6  50.0000",
        "AP          hsd   tukey        0.05            4      6  66.6667",
    ]


def test_api_warnings_stay_readable_beside_the_bar(tmp_path):
    """The API's notices (PrefevalWarning, printed by Python's warnings) with
    progress=True on a terminal: on lines of their own, no frozen bar."""
    import sys

    code = (
        "import glob, prefeval\n"
        "from prefeval.core import progress\n"
        "progress.DELAY = 0\n"
        f"runs = sorted(glob.glob({str(SAMPLE / 'runs' / 'input.sys0*')!r}))[:4]\n"
        f"prefeval.discpower({str(SAMPLE / 'qrels.txt')!r}, runs, tests='hsd', trials=2000,\n"
        "                   measures=['rpp'], baselines=['AP'], progress=True, cache=False)\n"
    )
    status, seen, _ = run_on_terminal([sys.executable, "-W", "default::UserWarning", "-c", code])
    assert status == 0
    assert b"HSD trials" in seen  # the bar did show
    lines = screen(seen)
    assert not [line for line in lines if "%|" in line or "trials" in line], lines
    notice = "PrefevalWarning: run sys04: no results for 1 of 20 evaluated queries; evaluated"
    assert any(line.endswith(f"{notice} as retrieving nothing") for line in lines), lines


def test_api_warnings_escape_control_characters_on_a_terminal(tmp_path):
    """A notice of the API naming a run that holds ESC reaches a terminal escaped;
    caught off a terminal, its message keeps the name as it is."""
    import sys
    import warnings

    import prefeval

    short = tmp_path / "short.run"
    short.write_text("301 Q0 FBIS3-10082 1 2.5 t\n")
    runs = {"a\x1b[2J": str(short), "b": str(SAMPLE / "runs" / "input.sys01")}
    code = (
        "import prefeval\n"
        f"prefeval.compare({str(SAMPLE / 'qrels.txt')!r}, {runs!r}, measures='rpp', "
        "cache=False)\n"
    )
    status, seen, _ = run_on_terminal([sys.executable, "-W", "default::UserWarning", "-c", code])
    assert status == 0
    assert b"\x1b" not in seen
    assert "PrefevalWarning: run a\\x1b[2J: no results for 19 of 20" in seen.decode()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        prefeval.compare(SAMPLE / "qrels.txt", runs, measures="rpp", cache=False)
    assert [str(w.message) for w in caught if "a\x1b[2J: no results" in str(w.message)]


def test_an_unfinished_stage_outside_a_command_holds_no_command_s_place():
    """A stage opened outside any command (a library function called directly) and left
    unfinished, as after an error, holds no command's place: the bar of whatever runs
    meanwhile is its own, and collecting the stage mid-way through another command does
    not end that command's bar."""
    import gc

    from prefeval.core import progress

    left = progress.progress_bar(range(10), desc="left", unit="it")
    assert next(left) == 0
    assert progress._current is None
    with progress.command(False) as mine:
        assert progress._current is mine
        del left
        gc.collect()
        assert progress._current is mine
    assert progress._current is None


def test_control_characters_escaped_as_a_terminal_shows_them():
    """What reaches a terminal from the data: C0 (ESC), DEL, C1, bidirectional controls
    and bytes that are not UTF-8 as their escapes; line breaks and tabs kept between
    lines; other text, backslashes included, as it is."""
    from prefeval.core.terminal import LINES, escaped, shown

    text = "a\x1b[2J\x07\x7f\x9b\u202e\u2066\u200fé\\ b\n\tc" + b"\xff".decode(
        "utf-8", "surrogateescape"
    )
    assert escaped(text) == "a\\x1b[2J\\x07\\x7f\\x9b\\u202e\\u2066\\u200fé\\ b\\x0a\\x09c\\xff"
    assert escaped(text, LINES) == "a\\x1b[2J\\x07\\x7f\\x9b\\u202e\\u2066\\u200fé\\ b\n\tc\\xff"

    class Stream:
        def __init__(self, tty):
            self.tty = tty

        def isatty(self):
            return self.tty

    assert shown(text, Stream(True)) == escaped(text, LINES)
    assert shown(text, Stream(False)) is text


def test_python_warnings_escape_control_characters_on_a_terminal():
    """A library's warning quoting a name (matplotlib's missing glyph) is written by the
    command with its control characters escaped on a terminal, exact elsewhere."""
    import io
    import warnings

    from prefeval.cli import _show_warning

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal, pipe = Terminal(), io.StringIO()
    for stream in (terminal, pipe):
        _show_warning(UserWarning("Glyph 27 (\x1b) missing"), UserWarning, "f.py", 3, stream)
    expected = warnings.formatwarning("Glyph 27 (\x1b) missing", UserWarning, "f.py", 3)
    assert pipe.getvalue() == expected
    assert terminal.getvalue() == expected.replace("\x1b", "\\x1b")
