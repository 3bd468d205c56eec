"""Every command, fed bad input or a bad -o, answers with one message and exit status 2:
never a Python traceback, never a warning from numpy, never an output file.

The commands are taken from the click group, so a new command is swept too; its extra
required options go in EXTRA.
"""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import bad_parquet_inputs, invoke

from prefeval.cli import cli

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
QRELS = SAMPLE / "qrels.txt"
RUNS = [SAMPLE / "runs" / f"input.sys0{i}" for i in (1, 2, 3)]
#: every command that reads inputs (``measures`` lists the registry: see test_measures.py)
COMMANDS = sorted(set(cli.commands) - {"measures"})
#: options a command needs besides its inputs (kept cheap: these runs are many)
EXTRA = {
    "robustness": ["--queries", "5", "--samples", "2"],
    "discpower": ["--trials", "50"],
    "report": ["--trials", "50"],
    "gate": ["--against", "sys03"],  # a run of every case below
}
#: the output's name where the command needs an extension (report: .html, .md, .tex)
OUT_NAME = {"report": "out.html"}
#: the runs a command is given when it takes a fixed number (explain: RUN_A RUN_B)
RUNS_OF = {"explain": RUNS[:2]}
#: what discpower and report say on these inputs (20 queries) before their output: the
#: significance tests' small-sample notice (docs/output.md)
SMALL_SAMPLE = (
    "prefeval: significance tests on 20 queries, fewer than 25: their p-values are a weak guide\n"
)
NOTICE = {
    "discpower": SMALL_SAMPLE,
    "report": SMALL_SAMPLE,
    "table": SMALL_SAMPLE,
    # near-unanimous votes: t intervals past the range of a preference
    "pairs": "prefeval: t interval clipped to [-1, 1], the range of a preference's mean "
    "difference, on 2 of 3 run pairs (lexirecall 1, lexiprecision 2): the mean lies inside, "
    "so the clipped interval holds it whenever the t interval does\n",
    # fewer queries than gate's minimum: inconclusive verdicts, exit 0
    "gate": "prefeval: 2 of 2 verdicts inconclusive: 20 evaluated queries, fewer than the "
    "minimum of 25 (rpp sys01 vs sys03, rpp sys02 vs sys03)\n",
}


def _bad_inputs(folder: Path) -> dict[str, tuple[list, str]]:
    """name -> (QRELS RUN... arguments, a fragment of the expected message)."""
    good_run = RUNS[0].read_text()
    last = len(good_run.splitlines()) + 1
    files = {  # the message starts FILE:LINE:
        "qrels-3-fields": ("1 0 d1\n", "qrels-3-fields:1:"),
        "qrels-bad-grade": ("1 0 d1 1\n1 0 d2 x\n", "qrels-bad-grade:2:"),
        "run-bad-score": ("1 Q0 d1 1 high tag\n", "run-bad-score:1:"),
        "run-short-line": (good_run + "1 Q0 d9\n", f"run-short-line:{last}:"),
        "run-duplicate": ("1 Q0 d1 1 2.0 t\n1 Q0 d1 2 1.0 t\n", "run-duplicate:2:"),
        "run-nul": ("1 Q0 d\x001 1 2.0 t\n", "run-nul:1:"),
    }
    for name, (text, _) in files.items():
        (folder / name).write_text(text)
    (folder / "not-utf8").write_bytes(b"1 Q0 \xff\xfe 1 2.0 t\n")
    (folder / "truncated.gz").write_bytes(gzip.compress(good_run.encode())[:-12])
    (folder / "empty").write_bytes(b"")
    (folder / "adir").mkdir()
    q, r1, r2 = str(QRELS), str(RUNS[1]), str(RUNS[2])
    cases = {
        name: (
            [folder / name, r1, r2] if name.startswith("qrels") else [q, folder / name, r2],
            fragment,
        )
        for name, (_, fragment) in files.items()
    }
    cases["not-utf8"] = ([q, folder / "not-utf8", r2], "not-utf8:1:")
    cases["truncated-gzip"] = ([q, folder / "truncated.gz", r2], "truncated.gz")
    cases["empty-qrels"] = ([folder / "empty", r1, r2], "empty")
    cases["missing-run"] = ([q, folder / "no-such-run", r2], "no-such-run")
    cases["directory-run"] = ([q, folder / "adir", r2], "adir")
    # Parquet schemas and contents: duplicated column names, strings that are not UTF-8,
    # dictionary indices outside the dictionary
    for name, (kind, path, fragment) in bad_parquet_inputs(folder / "parquet").items():
        args = {"qrels": [path, r1, r2], "run": [q, path, r2], "runs": [q, path, r2]}[kind]
        cases[name] = (args, f"{path.name}: {fragment}")
    return cases


def _message_lines(stderr: str) -> list[str]:
    """stderr without click's usage preamble (``Usage:``, ``Try ...``, blank lines)."""
    return [
        line
        for line in stderr.splitlines()
        if line.strip() and not line.startswith(("Usage:", "Try "))
    ]


def _no_trace(result) -> None:
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    # an uncaught exception would be kept here by click's test runner
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert "Traceback" not in result.stderr
    assert "Warning" not in result.stderr, result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("command", COMMANDS)
def test_bad_input_is_one_message(command, tmp_path):
    out = tmp_path / OUT_NAME.get(command, "out.tsv")
    for name, (args, fragment) in _bad_inputs(tmp_path).items():
        result = invoke(command, *EXTRA.get(command, []), "-o", out, *args)
        _no_trace(result)
        assert fragment.lower() in result.stderr.lower(), (name, result.stderr)
        assert len(_message_lines(result.stderr)) == 1, (name, result.stderr)
        assert not out.exists(), name


@pytest.mark.parametrize(
    "command", [c for c in COMMANDS if any(p.name == "baselines" for p in cli.commands[c].params)]
)
def test_a_baseline_pytrec_eval_cannot_compute_is_one_message(command, tmp_path):
    """pytrec_eval takes a relevance level >= 1 only: ``rel=0`` is refused by name."""
    out = tmp_path / OUT_NAME.get(command, "out.tsv")
    for measure, name, example in [
        ("AP(rel=0)", "AP", "AP(rel=1)"),
        ("P(rel=0)@5", "P", "P(rel=1)@5"),
    ]:
        result = invoke(command, *EXTRA.get(command, []), "-B", measure, "-o", out, QRELS, *RUNS)
        _no_trace(result)
        assert _message_lines(result.stderr) == [
            f"Error: baseline measure '{measure}': rel must be >= 1 (pytrec_eval, which "
            f"computes {name}, takes no lower relevance level), e.g. {example}"
        ], result.stderr
        assert not out.exists()


@pytest.mark.parametrize("command", COMMANDS)
def test_bad_output_is_one_message_before_any_work(command, tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    name = OUT_NAME.get(command, "out.tsv")
    targets = [tmp_path / "missing" / name, tmp_path, QRELS]
    if os.geteuid() != 0:  # root writes anywhere
        targets.append(folder / name)
    for target in targets:
        result = invoke(
            command, *EXTRA.get(command, []), "-o", target, QRELS, *RUNS_OF.get(command, RUNS)
        )
        _no_trace(result)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ro"]
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize("command", COMMANDS)
def test_full_device_is_one_message(command, tmp_path):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    target = "/dev/full"
    if command in OUT_NAME:  # a link with the extension the command needs
        target = str(tmp_path / OUT_NAME[command])
        os.symlink("/dev/full", target)
    args = [sys.executable, "-m", "prefeval", command, *EXTRA.get(command, [])]
    proc = subprocess.run(
        [*args, "-o", target, str(QRELS), *map(str, RUNS_OF.get(command, RUNS))],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2, proc.stderr
    stderr = proc.stderr.removeprefix(NOTICE.get(command, ""))
    assert stderr.strip() == f"prefeval: cannot write {target}: No space left on device"
    assert proc.stdout == ""


def test_undefined_mean_is_empty_not_a_warning(tmp_path):
    """Two copies of one run: every reference difference ties with 0, so label sampling
    has no decided comparison to agree with, in any sample. The mean of those undefined
    agreements is undefined (an empty field), not numpy's "Mean of empty slice"
    (pytest turns RuntimeWarnings into errors, see pyproject.toml)."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(RUNS[0].read_bytes())
    b.write_bytes(RUNS[0].read_bytes())
    result = invoke("robustness", "--labels", "0.5", "--samples", "2", "-B", "AP", QRELS, a, b)
    assert result.exit_code == 0, result.stderr
    rows = [line.split("\t") for line in result.stdout.splitlines()[1:]]
    assert rows and all(row[6] == "1.0" and row[7] == "" for row in rows), rows


@pytest.mark.parametrize("command", COMMANDS)
def test_dev_stdout_appended_and_piped(command, tmp_path):
    """-o /dev/stdout (report: a link FILE.html to it) writes to standard output as it
    is open, for every command: a log appended to (``>> log``) keeps its earlier lines
    and gets exactly the file -o FILE writes; a pipe gets the same bytes."""
    name = OUT_NAME.get(command, "out.tsv")
    reference = tmp_path / name
    args = [*EXTRA.get(command, []), str(QRELS), *map(str, RUNS_OF.get(command, RUNS))]
    result = invoke(command, "-o", reference, *args)
    assert result.exit_code == 0, result.stderr
    expected = reference.read_bytes()
    target = "/dev/stdout"
    if command in OUT_NAME:  # the extension the command needs, on a link
        target = str(tmp_path / f"stdout-{name}")
        os.symlink("/dev/stdout", target)
    argv = [sys.executable, "-m", "prefeval", command, "-o", target, *args]
    log = tmp_path / "log"
    log.write_bytes(b"earlier line\n")
    with open(log, "ab") as stream:
        proc = subprocess.run(argv, stdout=stream, stderr=subprocess.PIPE)
    assert proc.returncode == 0, proc.stderr
    assert log.read_bytes() == b"earlier line\n" + expected
    proc = subprocess.run(argv, capture_output=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        {name, "log", os.path.basename(target)} - {"stdout"}
    )


# --------------------------------------------------------------------------- resource limits


#: seconds after which a process under a resource limit is taken to hang: generous, as
#: the suite may run in parallel on a loaded machine
HANG_SECONDS = 300


def _limited(limits: dict, args: list, tmp_path: Path, timeout: float = HANG_SECONDS):
    """``python -m prefeval ARGS`` in a process with ``limits`` (RLIMIT name -> soft and
    hard limit), killed after ``timeout`` s (a hang fails the test): (status, stdout, stderr,
    seconds)."""
    import time

    resource = pytest.importorskip("resource", reason="resource limits are POSIX")

    def limit():
        for name, value in limits.items():
            resource.setrlimit(getattr(resource, name), (value, value))

    start = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "prefeval", *map(str, args)],
            capture_output=True,
            timeout=timeout,
            preexec_fn=limit,
            cwd=tmp_path,
        )
    except subprocess.TimeoutExpired:  # the child is killed by subprocess.run
        pytest.fail(f"{args[0]} under {limits} did not end within {timeout} s")
    return proc.returncode, proc.stdout, proc.stderr.decode(), time.monotonic() - start


def _ran_or_one_line(status, stdout, stderr, expected: bytes, what) -> None:
    """A run with the unlimited output, or exit 2 with one line and no output."""
    if status == 0:
        assert stdout == expected, what
        return
    assert status == 2, (what, status, stderr[-2000:])
    stderr = stderr.removeprefix(SMALL_SAMPLE)  # discpower's notice, when it got that far
    assert stdout == b"" and len(stderr.splitlines()) == 1, (what, stderr[-2000:])
    assert stderr.startswith("prefeval: "), (what, stderr)


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ulimit -v as on Linux")
def test_address_space_limits_end_in_a_run_or_one_line(tmp_path):
    """ulimit -v (a batch scheduler's h_vmem): OpenBLAS, loaded late in a process near the
    limit, can retry its buffer for ever; MemoryError and libraries that cannot be mapped
    can raise tracebacks.  Every limit ends in discpower's output or in one line, exit
    2."""
    args = ["discpower", "--trials", "50", QRELS, *RUNS]
    expected = subprocess.run(
        [sys.executable, "-m", "prefeval", *map(str, args)], capture_output=True, check=True
    ).stdout
    compare = ["compare", QRELS, *RUNS]
    expected_compare = invoke(*compare).stdout.encode()
    for kib in (300_000, 400_000, 500_000, 600_000, 700_000):
        for argv, out in ((args, expected), (compare, expected_compare)):
            # twice: the same outcome every time (malloc arenas, Arrow's I/O threads and
            # the reading threads made it a matter of chance: a run, a hang, an abort)
            outcomes = set()
            for _ in range(2):
                status, stdout, stderr, _ = _limited({"RLIMIT_AS": kib << 10}, argv, tmp_path)
                _ran_or_one_line(status, stdout, stderr, out, (kib, argv[0]))
                if status == 2:
                    assert f"under the address-space limit of {kib} KiB (ulimit -v)" in stderr
                outcomes.add(status)
            assert len(outcomes) == 1, (kib, argv[0], outcomes)
    # far below what the libraries need: told before anything is loaded
    status, _, stderr, _ = _limited({"RLIMIT_AS": 150_000 << 10}, args, tmp_path)
    assert status == 2, stderr
    # a generous limit runs (with one BLAS thread), the output unchanged
    assert _limited({"RLIMIT_AS": 4_000_000 << 10}, args, tmp_path)[:2] == (0, expected)


@pytest.mark.slow
@pytest.mark.parametrize("files", [16, 32, 48])
def test_dask_under_few_open_files_is_one_line(tmp_path, files, monkeypatch):
    """ulimit -n: a local Dask cluster short of files floods stderr with the scheduler's
    failed accepts (16) or dies with ``Nanny failed to start`` (32); prefeval says so in
    one line, exit 2, at once: before any cluster is started.  The local engine runs
    with 5, and a soft limit is raised to what the cluster needs."""
    distributed = pytest.importorskip("distributed", reason="the dask extra is not installed")
    args = ["compare", "--engine", "dask", QRELS, *RUNS]
    status, stdout, stderr, _ = _limited({"RLIMIT_NOFILE": files}, args, tmp_path)
    assert (status, stdout) == (2, b""), stderr[-2000:]
    assert len(stderr.splitlines()) == 1, stderr[-2000:]
    assert stderr.startswith("prefeval: --engine dask (a local cluster of "), stderr
    assert f"open files, the limit is {files} (ulimit -n)" in stderr
    # at once: the same limit seen in this process refuses before a cluster is made (a
    # wall-clock bound on the process above said so only on a machine not too loaded)
    from prefeval.core import limits

    resource = pytest.importorskip("resource", reason="resource limits are POSIX")
    seen = SimpleNamespace(**vars(resource))  # the open-files limit of the process above
    seen.getrlimit = lambda which: (
        (files, files) if which == resource.RLIMIT_NOFILE else resource.getrlimit(which)
    )
    started = []
    monkeypatch.setattr(limits, "_resource", lambda: seen)
    monkeypatch.setattr(distributed, "LocalCluster", lambda *a, **k: started.append(a))
    result = invoke(*args)
    assert (result.exit_code, result.stdout, started) == (2, "", []), result.stderr
    assert result.stderr == stderr
    monkeypatch.undo()
    local = _limited({"RLIMIT_NOFILE": 5}, args[:1] + args[3:], tmp_path)
    expected = invoke("compare", QRELS, *RUNS).stdout.encode()
    assert local[:2] == (0, expected), local[2]


@pytest.mark.slow
def test_dask_raises_a_soft_open_files_limit(tmp_path):
    resource = pytest.importorskip("resource", reason="resource limits are POSIX")
    pytest.importorskip("distributed", reason="the dask extra is not installed")
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 256:
        pytest.skip(f"the hard limit on open files is {hard}")

    def soft():
        resource.setrlimit(resource.RLIMIT_NOFILE, (16, hard))

    proc = subprocess.run(
        [sys.executable, "-m", "prefeval", "compare", "--engine", "dask", QRELS, *RUNS],
        capture_output=True,
        timeout=HANG_SECONDS,
        preexec_fn=soft,
    )
    assert (proc.returncode, proc.stderr) == (0, b"")
    assert proc.stdout.decode() == invoke("compare", QRELS, *RUNS).stdout


@pytest.mark.slow
def test_local_engine_under_few_open_files_is_the_same_every_time(tmp_path, monkeypatch):
    """ulimit -n 5 to 10, several tries each: the threads reading runs and the cache's
    folder descriptors share the limit (unchecked, some tries end in ``cannot read file:
    Too many open files``, and every try says ``cache not used``); the threads are as
    many as the limit allows and the cache holds one folder at a time:
    every try prints the same table and notices as without a limit, reading the runs
    afresh or from the cache, which is used."""
    runs = sorted((SAMPLE / "runs").glob("input.sys0[1-6]*"))
    args = ["compare", QRELS, *runs]
    monkeypatch.setenv("PREFEVAL_CACHE_DIR", str(tmp_path / "unlimited"))
    expected = subprocess.run(
        [sys.executable, "-m", "prefeval", *map(str, args)], capture_output=True
    )
    assert expected.returncode == 0 and "cache" not in expected.stderr.decode()
    for files in range(5, 11):
        for attempt in ("afresh", "afresh", "afresh", "cached"):
            if attempt == "afresh":
                folder = tmp_path / f"cache-{files}-{len(os.listdir(tmp_path))}"
            monkeypatch.setenv("PREFEVAL_CACHE_DIR", str(folder))
            status, stdout, stderr, _ = _limited({"RLIMIT_NOFILE": files}, args, tmp_path)
            assert (status, stderr) == (0, expected.stderr.decode()), (files, stderr)
            assert stdout == expected.stdout, files
            if files >= 8:
                assert len(list(folder.rglob("*.entry"))) == len(runs), files


@pytest.mark.slow
def test_every_command_under_few_open_files_runs_or_is_one_line(tmp_path):
    """ulimit -n as low as Python starts with: each command runs (the local engine needs no
    more) or says so in one line, exit 2 (report's and --plot's image libraries opened
    files past 5: a traceback)."""
    files = 5
    status, _, stderr, _ = _limited({"RLIMIT_NOFILE": files}, ["--version"], tmp_path)
    if status != 0:
        pytest.skip(f"Python does not start with {files} open files here: {stderr[-200:]}")
    for command in COMMANDS:
        out = tmp_path / OUT_NAME.get(command, "out.tsv")
        args = [command, *EXTRA.get(command, []), "-o", out, QRELS, *RUNS_OF.get(command, RUNS)]
        status, stdout, stderr, _ = _limited({"RLIMIT_NOFILE": files}, args, tmp_path)
        if status == 0:
            assert out.exists() and stderr == NOTICE.get(command, ""), (command, stderr)
            out.unlink()
            continue
        assert (status, stdout) == (2, b""), (command, status, stderr[-2000:])
        assert stderr.removeprefix(NOTICE.get(command, "")) == (
            f"prefeval: too many open files (the limit is {files}, ulimit -n): raise the limit\n"
        ), (command, stderr[-2000:])
        assert not out.exists(), command


@pytest.mark.skipif(sys.platform != "linux", reason="a file name of bytes that are not UTF-8")
def test_run_file_name_not_utf8_names_the_run_with_a_replacement_character(tmp_path):
    """A run file whose name is not UTF-8 (a Latin-1 file system) is no UnicodeEncodeError
    traceback: its name is the file name decoded with U+FFFD for the bad bytes."""
    name = os.fsdecode(b"g\x85h")
    shutil.copy(RUNS[0], tmp_path / name)
    proc = subprocess.run(
        [sys.executable, "-m", "prefeval", "compare", QRELS, tmp_path / name, RUNS[1]],
        capture_output=True,
    )
    assert proc.returncode == 0, proc.stderr
    rows = [line.split("\t") for line in proc.stdout.decode().splitlines()[1:]]
    assert {r[1] for r in rows} == {"g\ufffdh"}
    expected = invoke("compare", QRELS, RUNS[0], RUNS[1]).stdout.replace("sys01", "g\ufffdh")
    assert proc.stdout.decode() == expected


def test_a_library_that_cannot_initialise_near_the_limit_is_out_of_memory(monkeypatch):
    """Under an address-space limit, an extension module whose initialisation could not
    allocate may fail without an exception set (SystemError, "error return without
    exception set": seen once at 300,000 KiB in the test above): it is memory running
    out, the one-line message, not a traceback."""
    import importlib

    from prefeval.core import limits

    def failing(name):
        raise SystemError("error return without exception set")

    monkeypatch.setattr(limits, "address_space", lambda: 300_000 << 10)
    monkeypatch.setattr(limits, "glibc", lambda name: None)  # this process's malloc as is
    monkeypatch.setattr(limits, "importlib", type(importlib)("importlib"))
    limits.importlib.import_module = failing
    with pytest.raises(MemoryError) as caught:
        limits.under_address_limit()
    assert limits.limit_message(caught.value).startswith(
        "prefeval: out of memory under the address-space limit of 300000 KiB"
    )


#: scripts run before the CLI: no room at a temporary file's creation (ENOSPC), or a
#: write that fails over a file size limit (EFBIG, as on a full disk the error comes at
#: the write: numpy's tofile lost it, and the read-back failed as a reshape error)
NO_ROOM = (
    "import errno, tempfile\n"
    "def full(*args, **kwargs):\n"
    "    raise OSError(errno.ENOSPC, 'No space left on device')\n"
    "tempfile.TemporaryFile = full\n"
)
FILE_SIZE_LIMIT = (
    "import resource, signal\n"
    "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
    "resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))\n"
)


@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX file size limit")
@pytest.mark.parametrize(
    "prelude,command,line",
    [
        (NO_ROOM, "robustness", "no space left on device for temporary files in {tmp}: free "
         "some, or set TMPDIR to a folder with room"),
        (FILE_SIZE_LIMIT, "robustness", "a temporary file in {tmp} would pass the file size "
         "limit (ulimit -f): raise it"),
        (FILE_SIZE_LIMIT, "report", "a temporary file in {tmp} would pass the file size "
         "limit (ulimit -f): raise it"),
    ],
    ids=["no room", "file size limit", "file size limit, report"],
)  # fmt: skip
def test_no_room_for_temporary_files_is_one_line(tmp_path, prelude, command, line):
    """Label samples keep the position matrix, values and signs in anonymous temporary
    files meanwhile (so do query samples at scale); a full $TMPDIR (ENOSPC) or a file
    size limit is one line and exit status 2, not a misleading reshape error or a
    traceback, and leaves no output."""
    script = prelude + "import sys\nfrom prefeval.cli import main\n"
    script += "sys.argv[0] = 'prefeval'\nmain()\n"
    out = tmp_path / ("out.tsv" if command == "robustness" else "report.html")
    flags = ["--labels", "0.5"] if command == "robustness" else ["--robustness"]
    proc = subprocess.run(
        [sys.executable, "-c", script, command, *flags, "--samples", "1", "-o", str(out),
         str(QRELS), *map(str, RUNS)],
        capture_output=True, text=True, env={**os.environ, "PREFEVAL_CACHE": "0"},
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines()[-1] == "prefeval: " + line.format(tmp=tempfile.gettempdir())
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert list(tmp_path.iterdir()) == []
