"""Output files: written atomically, never replacing what prefeval does not own, every
failure one line and exit 2, checked before any computing, no temporary file left."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import invoke

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data"
ARGS = [SAMPLE / "qrels.txt", SAMPLE / "runs" / "input.sys01", SAMPLE / "runs" / "input.sys02"]
PREFEVAL = [sys.executable, "-m", "prefeval"]


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
def test_signal_while_writing_leaves_no_temporary_file(tmp_path, signum):
    """A signal while compare -q -o writes a large table: the old output stays intact,
    no .prefeval-*.tmp survives, and the cache holds no temporary entry."""
    from prefeval.synthetic import generate

    data = tmp_path / "data"
    generate(data, "robust", scale=0.06, seed=3)
    out = tmp_path / "out"
    out.mkdir()
    target = out / "prefs.tsv"
    target.write_text("old output\n")
    cache = tmp_path / "cache"
    env = {**os.environ, "PREFEVAL_CACHE_DIR": str(cache)}
    runs = sorted(str(p) for p in (data / "runs").iterdir())
    proc = subprocess.Popen(
        [*PREFEVAL, "compare", "-q", "-o", str(target), str(data / "qrels.txt"), *runs],
        env=env,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if any(p.name.startswith(".prefeval-") for p in out.iterdir()):
            break
        time.sleep(0.005)
    else:
        pytest.fail(f"compare finished or stalled before writing (status {proc.poll()})")
    # at once: the temporary file exists, so the table is being written (a pause here let
    # a fast machine finish the write before the signal came)
    proc.send_signal(signum)
    status = proc.wait(timeout=120)
    stderr = proc.stderr.read().decode()
    assert status != 0
    assert "Traceback" not in stderr, stderr
    assert target.read_text() == "old output\n"
    assert sorted(p.name for p in out.iterdir()) == ["prefs.tsv"]
    leftovers = [p for p in cache.rglob("*") if p.name.startswith(".tmp-")]
    assert leftovers == []
