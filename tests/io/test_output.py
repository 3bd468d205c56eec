"""Output files: written atomically, never replacing what prefeval does not own, every
failure one line and exit 2, checked before any computing, no temporary file left."""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from helpers import as_other_user, invoke, on_terminal, readable_copies

from prefeval.io import writers

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
ARGS = [SAMPLE / "qrels.txt", SAMPLE / "runs" / "input.sys01", SAMPLE / "runs" / "input.sys02"]
PREFEVAL = [sys.executable, "-m", "prefeval"]
#: a report on one measure and one baseline: every file it writes, a figure among them
FEW = ["--trials", "20", "-m", "rpp", "-B", "AP"]


#: ``python -m prefeval`` whose output file, once its first bytes are written (and
#: flushed), says so on descriptor READY (``w``) and waits on descriptor GO, which
#: never answers: a signal sent then arrives mid-write on any machine under any load
#: (watching the folder for the temporary file raced with a write that could finish
#: before the signal came).  Ctrl-C (SIGINT) raises KeyboardInterrupt, as in a process
#: started from a terminal, also where the suite runs in the background (``&``, nohup:
#: SIGINT ignored, and Python keeps ignoring a SIGINT ignored at its start)
HELD = """
import os
import signal
import sys

signal.signal(signal.SIGINT, signal.default_int_handler)

import prefeval.engine.cache  # imported first: the cache's entries are not held
from prefeval.cli import main
from prefeval.io import writers

READY, GO = int(sys.argv.pop(1)), int(sys.argv.pop(1))


class Held:
    def __init__(self, handle):
        self.handle, self.held = handle, False

    def write(self, data):
        written = self.handle.write(data)
        if not self.held:
            self.held = True
            self.handle.flush()
            os.write(READY, b"w")
            os.read(GO, 1)
        return written

    def __getattr__(self, name):
        return getattr(self.handle, name)


class HeldReplacement(writers.Replacement):
    def __init__(self, *args):
        super().__init__(*args)
        self.handle = Held(self.handle)


writers.Replacement = HeldReplacement
main()
"""


@pytest.fixture(scope="module")
def robust(tmp_path_factory):
    """A seeded synthetic collection whose compare -q table is tens of MB (read only)."""
    from prefeval.synthetic import generate

    data = tmp_path_factory.mktemp("robust")
    generate(data, "robust", scale=0.06, seed=3)
    return data


def _held_writer(args, **popen):
    """``prefeval ARGS`` (a Popen) once it has written the first bytes of its output
    file, where it waits (:data:`HELD`), and the descriptor it waits on: close it once
    the process has ended (before, it would let the write go on)."""
    import select

    ready, ready_w = os.pipe()
    go_r, go = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-c", HELD, str(ready_w), str(go_r), *args],
        pass_fds=(ready_w, go_r),
        **popen,
    )
    os.close(ready_w)
    os.close(go_r)
    try:
        # generous: the command computes its first partition first; at its end (a
        # failure) the descriptor reads as closed at once
        readable, _, _ = select.select([ready], [], [], 600)
        if not readable or os.read(ready, 1) != b"w":
            proc.kill()
            os.close(go)
            pytest.fail(f"compare ended or stalled before writing (status {proc.wait()})")
    finally:
        os.close(ready)
    return proc, go


def _expected() -> str:
    result = invoke("compare", *ARGS)
    assert result.exit_code == 0
    return result.stdout


def test_symlink_target_is_written_not_the_link(tmp_path):
    target = tmp_path / "target.tsv"
    target.write_text("old\n")
    os.chmod(target, 0o640)
    link = tmp_path / "link.tsv"
    link.symlink_to(target.name)
    result = invoke("compare", "-o", link, *ARGS)
    assert result.exit_code == 0, result.stderr
    assert link.is_symlink() and os.readlink(link) == target.name
    assert target.read_text() == _expected()
    assert stat.S_IMODE(target.stat().st_mode) == 0o640  # the file keeps its mode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.tsv", "target.tsv"]


@pytest.mark.skipif(not os.path.exists("/dev/null"), reason="no /dev/null")
def test_device_is_written_through_not_replaced(tmp_path):
    device = tmp_path / "null"
    try:
        os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except (PermissionError, OSError) as error:
        pytest.skip(f"cannot create a device node here: {error}")
    result = invoke("compare", "-o", device, *ARGS)
    assert result.exit_code == 0, result.stderr
    assert stat.S_ISCHR(device.stat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null"]


def test_fifo_is_written_through(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    result = invoke("compare", "-o", fifo, *ARGS)
    out, _ = reader.communicate(timeout=60)
    assert result.exit_code == 0, result.stderr
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert out.decode() == _expected()


@pytest.mark.parametrize(
    "where, reason",
    [
        ("missing/out.tsv", "no such directory"),
        ("/dev/full", "No space left on device"),
        (".", "is a directory"),
    ],
)
def test_write_failures_are_one_line(tmp_path, where, reason):
    if where == "/dev/full" and not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    path = where if where.startswith("/") else str(tmp_path / where)
    result = invoke("compare", "-o", path, *ARGS)
    assert result.exit_code == 2
    if where == ".":  # click's own check of the option, a usage error
        assert f"File '{path}' is a directory" in result.stderr
    else:
        assert result.stderr.startswith(f"prefeval: cannot write {path}: {reason}")
        assert result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_output_checked_before_computing(tmp_path):
    """A bad -o fails at once, before the (here malformed) inputs are even read."""
    bad = tmp_path / "bad.run"
    bad.write_text("not a run\n")
    result = invoke("compare", "-o", tmp_path / "no" / "out.tsv", ARGS[0], ARGS[1], bad)
    assert result.exit_code == 2
    assert "cannot write" in result.stderr and "bad.run" not in result.stderr


def test_output_naming_an_input_is_an_error(tmp_path):
    run = tmp_path / "input.mine"
    run.write_bytes(ARGS[1].read_bytes())
    before = run.read_bytes()
    result = invoke("compare", "-o", run, ARGS[0], run, ARGS[2])
    assert result.exit_code == 2
    assert "would overwrite the input" in result.stderr
    assert run.read_bytes() == before


def test_stdout_failures(tmp_path):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    with open("/dev/full", "wb") as full:
        proc = subprocess.run(
            [*PREFEVAL, "compare", *map(str, ARGS)], stdout=full, stderr=subprocess.PIPE
        )
    assert proc.returncode == 2
    assert proc.stderr.decode().strip() == (
        "prefeval: cannot write <stdout>: No space left on device"
    )
    # a reader that goes away (| head) ends the output quietly
    proc = subprocess.Popen(
        [*PREFEVAL, "compare", "-q", *map(str, ARGS)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.readline()
    proc.stdout.close()
    assert proc.wait(timeout=120) == 0
    assert b"Traceback" not in proc.stderr.read()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_signal_while_writing_leaves_no_temporary_file(tmp_path, robust, signum):
    """A signal while compare -q -o writes a large table: the old output stays intact,
    no .prefeval-*.tmp survives, and the cache holds no temporary entry."""
    data = robust
    out = tmp_path / "out"
    out.mkdir()
    target = out / "prefs.tsv"
    target.write_text("old output\n")
    cache = tmp_path / "cache"
    env = {**os.environ, "PREFEVAL_CACHE_DIR": str(cache)}
    runs = sorted(str(p) for p in (data / "runs").iterdir())
    args = ["compare", "-q", "-o", str(target), str(data / "qrels.txt"), *runs]
    proc, go = _held_writer(args, env=env, stderr=subprocess.PIPE)
    assert sorted(p.name.startswith(".prefeval-") for p in out.iterdir()) == [False, True]
    proc.send_signal(signum)  # while the table is being written
    try:
        status = proc.wait(timeout=120)
    finally:
        os.close(go)
    stderr = proc.stderr.read().decode()
    assert status != 0
    assert "Traceback" not in stderr, stderr
    assert target.read_text() == "old output\n"
    assert sorted(p.name for p in out.iterdir()) == ["prefs.tsv"], stderr
    leftovers = [p for p in cache.rglob("*") if p.name.startswith(".prefeval-")]
    assert leftovers == []


@pytest.mark.parametrize("how", ["append", "truncate", "pipe"])
@pytest.mark.parametrize("name", ["/dev/stdout", "/dev/fd/1", "link"])
def test_dev_stdout_writes_to_the_open_stream(tmp_path, how, name):
    """-o /dev/stdout (or /dev/fd/1, or a link to it) writes to standard output as it is
    open: appended to a log after its earlier lines, into a pipe; never a replaced file."""
    if name == "link":
        name = str(tmp_path / "to-stdout.tsv")
        os.symlink("/dev/stdout", name)
    args = [*PREFEVAL, "compare", "-o", name, *map(str, ARGS)]
    if how == "pipe":
        proc = subprocess.run(args, capture_output=True)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.decode() == _expected()
        return
    log = tmp_path / "log"
    log.write_text("earlier line\n")
    with open(log, "ab" if how == "append" else "r+b") as stream:
        proc = subprocess.run(args, stdout=stream, stderr=subprocess.PIPE)
    assert proc.returncode == 0, proc.stderr
    before = "earlier line\n" if how == "append" else ""
    # a stream opened without O_APPEND is written from its offset, as `>` does
    assert log.read_text() == before + _expected()


def test_dev_fd_writes_to_that_descriptor(tmp_path):
    """-o /dev/fd/N appends to what N is open on; a descriptor that is not open, or not
    for writing, is one line and exit 2."""
    log = tmp_path / "log"
    log.write_text("earlier line\n")
    with open(log, "ab") as stream:
        fd = stream.fileno()
        proc = subprocess.run(
            [*PREFEVAL, "compare", "-o", f"/dev/fd/{fd}", *map(str, ARGS)],
            pass_fds=(fd,),
            capture_output=True,
        )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b""
    assert log.read_text() == "earlier line\n" + _expected()
    with open(log, "rb") as stream:
        fd = stream.fileno()
        proc = subprocess.run(
            [*PREFEVAL, "compare", "-o", f"/dev/fd/{fd}", *map(str, ARGS)],
            pass_fds=(fd,),
            capture_output=True,
        )
    assert proc.returncode == 2
    assert proc.stderr.decode() == (
        f"prefeval: cannot write /dev/fd/{fd}: file descriptor {fd} is not open for writing\n"
    )
    proc = subprocess.run(
        [*PREFEVAL, "compare", "-o", "/dev/fd/97", *map(str, ARGS)], capture_output=True
    )
    assert proc.returncode == 2
    assert proc.stderr.decode() == (
        "prefeval: cannot write /dev/fd/97: file descriptor 97 is not open\n"
    )
    assert log.read_text() == "earlier line\n" + _expected()


def test_empty_output_name_is_a_usage_error():
    result = invoke("compare", "-o", "", *ARGS)
    assert result.exit_code == 2
    assert "-o needs a file name ('-' for standard output)" in result.stderr
    assert "is a directory" not in result.stderr


def _big_compare(tmp_path, data):
    """A compare -q of the runs in ``data`` writing a table of tens of MB to out/prefs.tsv
    (command, out, target)."""
    out = tmp_path / "out"
    out.mkdir()
    target = out / "prefs.tsv"
    runs = sorted(str(p) for p in (data / "runs").iterdir())
    args = [*PREFEVAL, "compare", "-q", "--no-cache", "-o", str(target)]
    return [*args, str(data / "qrels.txt"), *runs], out, target


def _age(path, seconds=3600):
    past = time.time() - seconds
    os.utime(path, (past, past))


def test_killed_writer_leaves_a_temporary_that_the_next_writer_removes(tmp_path, robust):
    """kill -9 during -o FILE: the old file survives and the writer's temporary file is
    left (nothing can run in a killed process); the next prefeval writing in that folder
    removes it, once it is provably stale: unlocked (its writer is dead), ours, and
    untouched for a minute."""
    import fcntl

    args, out, target = _big_compare(tmp_path, robust)
    target.write_text("old output\n")
    proc, go = _held_writer(args[len(PREFEVAL) :], stderr=subprocess.PIPE)
    (temporary,) = [p for p in out.iterdir() if p.name.startswith(".prefeval-")]
    assert temporary.stat().st_size > 0  # written to, the first bytes on disk
    proc.kill()  # while the table is being written
    try:
        proc.wait(timeout=60)
    finally:
        os.close(go)
    assert target.read_text() == "old output\n"
    (killed,) = [p for p in out.iterdir() if p.name != "prefs.tsv"]
    # beside it: a temporary file a live writer holds (locked), one just made, another
    # user's, and a file of the user that merely looks alike: all stay
    live, young, foreign = (out / f".prefeval-{n}.tmp" for n in ("live", "young", "other"))
    alike = out / ".prefeval-notes.txt"
    for path in (live, young, foreign, alike):
        path.write_text("x")
    for path in (killed, live, foreign, alike):
        _age(path)
    if os.geteuid() == 0:
        os.chown(foreign, 12345, 12345)
    else:
        foreign.unlink()  # only root can give a file away
    holder = open(live, "rb")  # noqa: SIM115 - held while the next writer runs
    try:
        fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
        result = invoke("compare", "-o", target, *ARGS)
    finally:
        holder.close()
    assert result.exit_code == 0, result.stderr
    assert target.read_text() == _expected()
    left = sorted(p.name for p in out.iterdir())
    expected = {"prefs.tsv", live.name, young.name, foreign.name, alike.name}
    assert left == sorted(n for n in expected if (out / n).exists())
    assert not killed.exists()


@pytest.mark.parametrize("what", ["-o", "--plot", "report figure", "report page"])
def test_read_only_files_are_never_replaced(what):
    """One rule for every file prefeval writes: a file this user may not write (read-only,
    or another user's) is refused, before any computing, even where the folder would let
    a rename replace it (a group-writable shared folder)."""
    import shutil
    import tempfile

    pytest.importorskip("matplotlib")
    folder = Path(tempfile.mkdtemp(prefix="prefeval-shared-"))  # reachable by nobody
    try:
        folder.chmod(0o777)  # anyone may create and rename files here (no sticky bit)
        name = {"-o": "out.tsv", "--plot": "curves.png", "report figure": "r-tau.svg"}
        victim = folder / name.get(what, "r.md")
        victim.write_text("not yours\n")
        victim.chmod(0o444 if os.geteuid() else 0o644)  # root's: read-only for nobody
        runs = [str(ARGS[0]), str(ARGS[1]), str(ARGS[2])]
        args = {
            "-o": ["compare", "-o", victim, *runs],
            "--plot": ["discpower", "--trials", "20", "--plot", victim, *runs],
        }.get(what, ["report", *FEW, "-o", folder / "r.md", *runs])
        # the same command once, writing elsewhere, imports everything it needs
        warm = [str(a).replace(str(folder), str(folder / "warm")) for a in args]
        (folder / "warm").mkdir()
        assert invoke(*warm).exit_code == 0
        with as_other_user():
            result = invoke(*args)
        assert result.exit_code == 2, result.stderr
        assert "Traceback" not in result.stderr
        assert ("not writable" in result.stderr) or ("read-only" in result.stderr)
        assert victim.read_text() == "not yours\n"
        assert sorted(p.name for p in folder.iterdir()) == sorted([victim.name, "warm"])
    finally:
        shutil.rmtree(folder)


@pytest.mark.parametrize("what", ["-o", "--plot", "report figure"])
def test_another_users_file_in_a_sticky_folder_is_refused_up_front(what):
    """A file of another user that this user may write (mode 666) in a sticky folder of
    someone else (/tmp, 1777): the rename over it would fail (EPERM) after the whole
    computation; it is refused at once, saying why (here before a malformed run is even
    read), and left as it is."""
    import shutil
    import tempfile

    if os.geteuid() != 0:
        pytest.skip("needs root to run as a second user (run the tests as root)")
    pytest.importorskip("matplotlib")
    folder = Path(tempfile.mkdtemp(prefix="prefeval-sticky-"))  # root's, reachable by nobody
    # the inputs copied where nobody may read them
    with readable_copies(*ARGS) as inputs:
        try:
            folder.chmod(0o1777)
            name = {"-o": "out.tsv", "--plot": "curves.png", "report figure": "r-tau.svg"}[what]
            victim = folder / name
            victim.write_text("not yours\n")
            victim.chmod(0o666)  # root's, writable by anyone
            bad = folder / "bad.run"
            bad.write_text("not a run\n")
            bad.chmod(0o644)
            runs = [str(inputs[0]), str(inputs[1]), str(bad)]
            args = {
                "-o": ["compare", "-o", victim, *runs],
                "--plot": ["discpower", "--trials", "20", "--plot", victim, *runs],
            }.get(what, ["report", *FEW, "-o", folder / "r.md", *runs])
            warm = [a if a != str(bad) else str(inputs[2]) for a in args]
            warm = [str(a).replace(str(folder), str(folder / "warm")) for a in warm]
            (folder / "warm").mkdir()
            assert invoke(*warm).exit_code == 0  # imports everything the command needs
            with as_other_user():
                result = invoke(*args)
            assert result.exit_code == 2, result.stderr
            assert (
                f"cannot write {victim}: it belongs to another user and directory "
                f"'{folder}' is sticky (only its owner may replace or remove it): write "
                "another file\n"
            ) in result.stderr
            assert "Traceback" not in result.stderr and "bad.run" not in result.stderr
            assert victim.read_text() == "not yours\n"
            assert sorted(p.name for p in folder.iterdir()) == sorted(
                [victim.name, "bad.run", "warm"]
            )
            # a file of one's own there is replaced as ever
            os.chown(victim, 65534, 65534)
            good = [a if a != str(bad) else str(inputs[2]) for a in args]
            with as_other_user():
                result = invoke(*good)
            assert result.exit_code == 0, result.stderr
            assert victim.read_bytes() != b"not yours\n"
        finally:
            shutil.rmtree(folder)


def test_tsv_refuses_names_it_cannot_hold(tmp_path):
    """A run name holding a tab or a line break: tsv refuses it with one line naming the
    value and the formats that hold it (nothing written, exit 2: also by metrics, which
    writes its rows in pieces); csv and jsonl write it, and --prefs reads them back."""
    import shutil

    weird = {"tab": "a\tb", "newline": "c\nd", "return": "e\rf"}
    for label, name in weird.items():
        run = tmp_path / f"input.{name}"
        shutil.copy(ARGS[1], run)
        target = tmp_path / "out.tsv"
        for output in (["-o", target], []):
            result = invoke("compare", "-q", *output, ARGS[0], run, ARGS[2])
            assert result.exit_code == 2, label
            where = target if output else "<stdout>"
            assert result.stderr == (
                f"prefeval: cannot write {where}: a value of run_a, {name!r}, holds a tab "
                "or a line break, which tsv cannot hold; use -f csv, jsonl or parquet\n"
            )
            assert result.stdout == ""
            assert not target.exists()
            # metrics writes a (measure, run) at a time: refused before the first run's
            result = invoke("metrics", "-q", *output, ARGS[0], ARGS[2], run)
            assert result.exit_code == 2, label
            assert result.stderr == (
                f"prefeval: cannot write {where}: a value of run, {name!r}, holds a tab "
                "or a line break, which tsv cannot hold; use -f csv, jsonl or parquet\n"
            )
            assert result.stdout == ""
            assert not target.exists()
        for fmt in ("csv", "jsonl"):
            table = tmp_path / f"prefs.{fmt}"
            result = invoke("compare", "-q", "-f", fmt, "-o", table, ARGS[0], run, ARGS[2])
            assert result.exit_code == 0, result.stderr
            back = invoke("order", "--no-baselines", "-f", "jsonl", "--prefs", table)
            assert back.exit_code == 0, back.stderr
            assert name in {json.loads(line)["run"] for line in back.stdout.splitlines()}
    # names without them are written as before
    assert invoke("compare", *ARGS).stdout == _expected()


def test_dev_stdout_on_a_terminal_and_to_a_reader_that_leaves(tmp_path):
    """-o /dev/stdout is standard output: Parquet to a terminal is refused as without -o
    (one line, exit 2), and a reader that goes away (| head) ends the output quietly."""
    import pty

    leader, follower = pty.openpty()
    try:
        proc = subprocess.run(
            [*PREFEVAL, "compare", "-f", "parquet", "-o", "/dev/stdout", *map(str, ARGS)],
            stdout=follower,
            stderr=subprocess.PIPE,
        )
    finally:
        os.close(follower)
        os.close(leader)
    assert proc.returncode == 2
    assert proc.stderr.decode() == (
        "prefeval: cannot write /dev/stdout: -f parquet writes binary: give -o FILE or "
        "redirect standard output\n"
    )
    runs = sorted(str(p) for p in (SAMPLE / "runs").iterdir())
    for fmt in ("tsv", "parquet"):
        proc = subprocess.Popen(
            [*PREFEVAL, "compare", "-q", "-f", fmt, "-o", "/dev/stdout", str(ARGS[0]), *runs],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        proc.stdout.read(10)
        proc.stdout.close()
        assert proc.wait(timeout=120) == 0
        assert b"Traceback" not in proc.stderr.read()


# ------------------------------------------------------- for people and for machines

QRELS, SYS01, SYS02 = ARGS


def test_a_terminal_shows_an_aligned_table_with_4_decimals():
    """tsv to a terminal is the readable view: aligned, 4 decimals, counts as integers;
    -p N sets the decimals there too."""
    code, seen, _ = on_terminal("metrics", "-m", "num_q,num_rel,map", *ARGS, delay=60)
    assert code == 0
    assert seen.decode().replace("\r\n", "\n") == (
        "measure  run    query_id   value\n"
        "NumQ     sys01  all           20\n"
        "NumQ     sys02  all           20\n"
        "NumRel   sys01  all          167\n"
        "NumRel   sys02  all          167\n"
        "AP       sys01  all       0.0954\n"
        "AP       sys02  all       0.1482\n"
    )
    code, seen, _ = on_terminal("metrics", "-p", "2", "-m", "num_q,map", *ARGS, delay=60)
    assert code == 0
    assert seen.decode().replace("\r\n", "\n") == (
        "measure  run    query_id  value\n"
        "NumQ     sys01  all          20\n"
        "NumQ     sys02  all          20\n"
        "AP       sys01  all        0.10\n"
        "AP       sys02  all        0.15\n"
    )
    args = ["--queries", "2", "--labels", "0.5", "--samples", "2", "--no-baselines", "-m", "rpp"]
    code, seen, _ = on_terminal("robustness", *args, *ARGS, delay=60)
    assert code == 0
    assert seen.decode().replace("\r\n", "\n") == (
        "measure  kind     level  samples  tau_mean  tau_std    ties  agreement\n"
        "rpp      queries      2        2    1.0000   0.0000\n"
        "rpp      labels     0.5        2    1.0000   0.0000  0.1750     0.7188\n"
    )


def test_small_p_values_read_below_the_smallest_decimal_on_a_terminal_only():
    """A p-value above 0 that 4 decimals would show as 0.0000 (or round up to 0.0001)
    reads <0.0001 on a terminal (<0.01 with -p 2); 0 stays 0.0000, other columns and
    the machine formats keep the values."""
    from prefeval.io.writers import iter_chunks, readable_chunks

    frame = pd.DataFrame(
        {
            "mean": [3e-7, 0.0, 0.5],
            "p_value": [3e-7, 0.0, 0.00007],
            "p_adjusted": [0.0001, 0.004, 0.5],
        }
    )
    assert b"".join(readable_chunks([frame])).decode() == (
        "  mean  p_value  p_adjusted\n"
        "0.0000  <0.0001      0.0001\n"
        "0.0000   0.0000      0.0040\n"
        "0.5000  <0.0001      0.5000\n"
    )
    assert b"".join(readable_chunks([frame], precision=2)).decode() == (
        "mean  p_value  p_adjusted\n"
        "0.00    <0.01       <0.01\n"
        "0.00     0.00       <0.01\n"
        "0.50    <0.01        0.50\n"
    )
    assert b"".join(iter_chunks(frame, "tsv")).decode() == (
        "mean\tp_value\tp_adjusted\n3e-07\t3e-07\t0.0001\n0.0\t0.0\t0.004\n0.5\t7e-05\t0.5\n"
    )
    sys03 = SAMPLE / "runs" / "input.sys03"
    args = ["--pairs", "--test", "ttest", "-m", "rpp", "--no-baselines", *ARGS, sys03]
    code, seen, _ = on_terminal("discpower", *args, delay=60)
    assert code == 0
    # the sample's rpp t-test p-values: 0.01995... (sys01 vs sys02), 9.9e-12, 6.7e-09;
    # Bonferroni over 3 pairs: 0.05986..., 3.0e-11, 2.0e-08
    assert (
        seen.decode()
        .replace("\r\n", "\n")
        .endswith(
            "measure  test   correction  run_a  run_b  p_value  p_adjusted\n"
            "rpp      ttest  bonferroni  sys01  sys02   0.0200      0.0599\n"
            "rpp      ttest  bonferroni  sys01  sys03  <0.0001     <0.0001\n"
            "rpp      ttest  bonferroni  sys02  sys03  <0.0001     <0.0001\n"
        )
    )


def test_explain_text_is_rounded_on_a_terminal_only():
    args = ["explain", "--query", "302", "-m", "rrlexiprecision", QRELS, SYS01, SYS02]
    code, seen, _ = on_terminal(*args, delay=60)
    assert code == 0
    assert "  rrlexiprecision  -0.1000\r\n" in seen.decode()
    piped = invoke(*args)  # not a terminal: full precision, as before
    assert "  rrlexiprecision  -0.1\n" in piped.stdout


def test_a_terminal_on_stderr_only_keeps_the_machine_format(tmp_path):
    """Only standard output decides: a pipe or -o FILE gets the machine format, with the
    same bytes, while stderr is a terminal."""
    code, _, redirected = on_terminal("compare", *ARGS, stdout=tmp_path / "redirected")
    assert code == 0
    assert redirected.decode() == _expected()
    code, seen, _ = on_terminal("compare", "-o", tmp_path / "out.tsv", *ARGS, delay=60)
    assert code == 0 and seen == b""
    assert (tmp_path / "out.tsv").read_text() == _expected()


def test_control_characters_are_escaped_on_a_terminal_only(tmp_path):
    """Names from the data holding control characters (a file name, NAME=PATH, a run's
    missing queries, a bad path, a usage error) reach a terminal escaped, on stdout and
    stderr alike; a redirected stdout gets the exact bytes."""
    clear, title = "\x1b[2J", "\x1b]0;owned\x07"
    named = tmp_path / f"x{title}.run"
    named.write_bytes(ARGS[1].read_bytes())
    short = tmp_path / "short.run"
    short.write_text("301 Q0 FBIS3-10082 1 2.5 t\n")
    args = ["compare", "-m", "rpp", ARGS[0], named, f"a{clear}={ARGS[2]}", f"b\u202e={short}"]
    code, seen, _ = on_terminal(*args, delay=60)
    assert code == 0
    assert seen.decode().replace("\r\n", "\n") == (
        "prefeval: run b\\u202e: no results for 19 of 20 evaluated queries; evaluated as "
        "retrieving nothing\n"
        "measure  run_a              run_b     query_id    value\n"
        "rpp      x\\x1b]0;owned\\x07  a\\x1b[2J  all       -0.2508\n"
        "rpp      x\\x1b]0;owned\\x07  b\\u202e   all        0.4444\n"
        "rpp      a\\x1b[2J           b\\u202e   all        0.6282\n"
    )
    code, seen, redirected = on_terminal(*args, stdout=tmp_path / "out", delay=60)
    assert code == 0
    assert redirected.decode().splitlines()[1].split("\t")[:3] == ["rpp", f"x{title}", f"a{clear}"]
    assert b"\x1b" not in seen and "b\\u202e" in seen.decode()
    code, seen, _ = on_terminal("compare", ARGS[0], ARGS[1], f"no{clear}.run", delay=60)
    assert code == 2
    assert seen.decode().strip() == "no\\x1b[2J.run: cannot read file: No such file or directory"
    code, seen, _ = on_terminal("compare", "--against", f"z{clear}", *ARGS, delay=60)
    assert code == 2
    assert b"\x1b" not in seen and "z\\x1b[2J" in seen.decode()


def test_counts_are_integers_in_every_format(tmp_path):
    """The one change to files and pipes: counts are written as integers (NumQ 20, not
    20.0; a robustness level of 2 queries, not 2.0); every other value as before, in its
    shortest round-trip form.  Parquet keeps float64 in a column that mixes counts and
    fractions."""
    import pandas as pd

    result = invoke("metrics", "-m", "num_q,num_rel_ret,map", *ARGS)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (
        "measure\trun\tquery_id\tvalue\n"
        "NumQ\tsys01\tall\t20\n"
        "NumQ\tsys02\tall\t20\n"
        "NumRelRet\tsys01\tall\t87\n"
        "NumRelRet\tsys02\tall\t98\n"
        "AP\tsys01\tall\t0.09539353049424394\n"
        "AP\tsys02\tall\t0.14821757697179921\n"
    )
    jsonl = invoke("metrics", "-f", "jsonl", "-m", "num_q,map", *ARGS).stdout.splitlines()
    assert [json.loads(line)["value"] for line in jsonl] == [
        20, 20, 0.09539353049424394, 0.14821757697179921,
    ]  # fmt: skip
    assert '"value": 20}' in jsonl[0]
    csv = invoke("metrics", "-f", "csv", "-p", "3", "-m", "num_q,map", *ARGS).stdout
    assert csv == (
        "measure,run,query_id,value\nNumQ,sys01,all,20\nNumQ,sys02,all,20\n"
        "AP,sys01,all,0.095\nAP,sys02,all,0.148\n"
    )
    path = tmp_path / "metrics.parquet"
    assert invoke("metrics", "-f", "parquet", "-o", path, "-m", "num_q,map", *ARGS).exit_code == 0
    table = pd.read_parquet(path)
    assert table["value"].dtype == "float64" and table["value"].tolist()[:2] == [20.0, 20.0]

    args = ["--queries", "2", "--labels", "0.5", "--samples", "2", "--no-baselines", "-m", "rpp"]
    result = invoke("robustness", *args, *ARGS)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[1:] == [
        "rpp\tqueries\t2\t2\t1.0\t0.0\t\t",
        "rpp\tlabels\t0.5\t2\t1.0\t0.0\t0.175\t0.71875",
    ]


@pytest.mark.parametrize(
    "name", ["rpp", "lexirecall", "heatmap-rpp", "matrix-nDCG@10", "a_b.c+d=e,f"]
)
def test_a_safe_name_is_its_own_file_name_part(name):
    assert writers.file_name_part(name) == name


@pytest.mark.parametrize(
    "name,part",
    [
        ("x/../../victim", "x_____victim--30ead3ec5a"),
        ("..", "_--5ec1f7e700"),
        (".hidden", "_hidden--1692419006"),
        ("-rf", "_rf--686c39acd6"),
        ("a--b", "a-b--90827a2e56"),
        ("\x1b[2J", "__2J--05704e8a84"),
        ("", "_--e3b0c44298"),
        ("ab\n", "ab_--a63d8014db"),
    ],
)
def test_an_unsafe_name_becomes_a_safe_part_with_its_hash(name, part):
    assert writers.file_name_part(name) == part


def test_file_name_parts_are_safe_and_distinct():
    """Any text: one name (no separator, no ``..``, not hidden, no control or other
    character outside the allowed ones) that stays in the folder; distinct texts,
    distinct parts."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    seen = {}

    @settings(max_examples=400, deadline=None)
    @given(st.text(alphabet=st.sampled_from("aZ09._-/\\$ \x00\x1b\n=é~"), max_size=12) | st.text())
    def check(text):
        for chars in (writers.FILE_NAME_CHARS, writers.TEX_FILE_NAME_CHARS):
            part = writers.file_name_part(text, chars)
            assert re.fullmatch(f"[{chars}]+", part) and ".." not in part
            assert not part.startswith((".", "-")) and len(part) <= 112
            assert writers.file_beside("some/dir/out.html", part) == f"some/dir/{part}"
            assert seen.setdefault((chars, part), text) == text

    check()
