"""A large run file read in pieces and spilled by query (prefeval.io.spill) gives the
positions of the whole file's read, whatever its layout (one Parquet file per run, text,
gzip, CRLF, rows in any order), leaves no file behind, and reports a problem as the
whole read does."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prefeval.core.errors import InputError
from prefeval.core.positions import run_positions
from prefeval.engine.local import load_runs, streamed_positions
from prefeval.io.runs import read_qrels, read_run, resolve_runs
from prefeval.io.spill import Streaming

REPO = Path(__file__).resolve().parents[2]
QRELS = "\n".join(
    f"q{q} 0 d{d} {(q + d) % 3}" for q in range(5) for d in range(12) if (q * d) % 4 != 1
)
#: pieces and partitions of a few rows: every run here is read in many pieces
TINY = Streaming(above=0, piece_rows=7, piece_bytes=64, part_rows=9, max_parts=5)


def relevant(folder: Path):
    path = folder / "qrels.txt"
    path.write_text(QRELS + "\n")
    return read_qrels(str(path)).relevant(None)


def the_run(path: str):
    (run,) = resolve_runs([path]).values()
    return run


def same(got, want) -> None:
    for field in ("doc", "rank", "retrieved"):
        a, b = getattr(got, field), getattr(want, field)
        assert a.dtype == b.dtype and a.tolist() == b.tolist(), field


rows = st.lists(
    st.tuples(
        st.integers(0, 6),  # query: q5 and q6 are not evaluated
        st.integers(0, 14),  # document: d12 to d14 are judged nowhere
        st.sampled_from([0.5, 1.0, 1.0, 2.25, -3.0, 7.0]),  # ties, often
    ),
    max_size=60,
    unique_by=lambda row: row[:2],
)


def text_of(run_rows, crlf: bool, bom: bool, spaces: bool, comments: bool) -> bytes:
    end = "\r\n" if crlf else "\n"
    gap = "  " if spaces else " "
    lines = []
    for k, (q, d, s) in enumerate(run_rows):
        if comments and k % 5 == 0:
            lines.append("# a comment" if k % 2 else "")
        lines.append(gap.join([f"q{q}", "Q0", f"d{d}", str(k + 1), repr(s), "tag"]))
    text = end.join(lines) + (end if lines else "")
    return (b"\xef\xbb\xbf" if bom else b"") + text.encode()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows,
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.integers(1, 40),
    st.integers(1, 5),
)
def test_text_in_pieces_is_the_whole_read(
    run_rows, crlf, bom, spaces, comments, compressed, piece_bytes, parts
):
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        rel = relevant(folder)
        data = text_of(run_rows, crlf, bom, spaces, comments)
        path = folder / ("run.gz" if compressed else "run")
        path.write_bytes(gzip.compress(data) if compressed else data)
        want = run_positions(read_run(str(path)), rel)
        small = Streaming(above=0, piece_bytes=piece_bytes, part_rows=1, max_parts=parts)
        got = streamed_positions(the_run(str(path)), rel, None, small)
        assert got is not None
        same(got, want)


@pytest.mark.parametrize("gap", [" ", "\t", "  "])
@pytest.mark.parametrize("piece_bytes", [8, 1 << 20])
def test_a_byte_order_mark_in_the_data_is_kept_whatever_the_layout(gap, piece_bytes):
    """The BOM that starts a file is dropped; one more, or one that starts a later line,
    is part of the query id, whichever reader cuts the lines (Arrow's CSV reader drops
    one where its data starts: a second BOM, a piece starting at such a line)."""
    from prefeval.io.text import parse_run, run_pieces

    bom = "\ufeff"
    lines = [f"{bom}301{gap}Q0 d 1 10 t", "301 Q0 e 2 9 t", f"{bom}302 Q0 f 1 8 t"]
    data = (bom + "\n".join(lines) + "\n").encode()
    whole = parse_run(data, "run").query_id.to_pylist()
    assert whole == [f"{bom}301", "301", f"{bom}302"]
    pieces = [q for piece in run_pieces(data, "run", piece_bytes) for q in piece[0].to_pylist()]
    assert pieces == whole


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows, st.integers(1, 20), st.integers(1, 30), st.integers(1, 5), st.booleans())
def test_parquet_in_pieces_is_the_whole_read(run_rows, group, piece_rows, parts, numbers):
    """One Parquet file per run, rows in any order (hypothesis' order), row groups and
    pieces of any size, ids as strings or integers."""
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        rel = relevant(folder)
        qid = [q for q, _, _ in run_rows]
        table = pa.table(
            {
                "query_id": pa.array(qid, pa.int64())
                if numbers
                else pa.array([f"q{q}" for q in qid], pa.string()),
                "doc_id": pa.array([f"d{d}" for _, d, _ in run_rows], pa.string()),
                "score": pa.array([s for _, _, s in run_rows], pa.float64()),
            }
        )
        path = folder / "run.parquet"
        pq.write_table(table, path, row_group_size=group)
        want = run_positions(read_run(str(path)), rel)
        small = Streaming(above=0, piece_rows=piece_rows, part_rows=1, max_parts=parts)
        got = streamed_positions(the_run(str(path)), rel, 3 if numbers else None, small)
        if numbers:
            want = run_positions(read_run(str(path)), rel, 3)
        assert got is not None
        same(got, want)


def layouts(folder: Path) -> list[str]:
    """A run of 400 rows in four layouts: text in query order, text shuffled with CRLF,
    gzip, one Parquet file with its rows shuffled."""
    rng = np.random.default_rng(5)
    frame = pd.DataFrame(
        [(f"q{q}", f"d{d}", float(rng.integers(0, 6))) for q in range(20) for d in range(20)],
        columns=["query_id", "doc_id", "score"],
    )
    lines = [f"{q} Q0 {d} 1 {s} r" for q, d, s in frame.itertuples(index=False)]
    shuffled = [lines[k] for k in rng.permutation(len(lines))]
    (folder / "sorted").write_text("\n".join(lines) + "\n")
    (folder / "crlf").write_bytes(("\r\n".join(shuffled) + "\r\n").encode())
    (folder / "zipped.gz").write_bytes(gzip.compress(("\n".join(shuffled) + "\n").encode()))
    pq.write_table(
        pa.Table.from_pandas(frame.sample(frac=1, random_state=3), preserve_index=False),
        folder / "rows.parquet",
        row_group_size=13,
    )
    return [str(folder / name) for name in ("sorted", "crlf", "zipped.gz", "rows.parquet")]


@pytest.mark.parametrize("jobs", [1, 2])
def test_load_runs_in_pieces_is_the_whole_read(tmp_path, jobs):
    rel = relevant(tmp_path)
    paths = layouts(tmp_path)
    want = load_runs(paths, rel, notify=None, jobs=jobs)
    got = load_runs(paths, rel, notify=None, jobs=jobs, streaming=TINY)
    assert [p.name for p in got] == [p.name for p in want]
    for a, b in zip(got, want):
        same(a, b)


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """The folder of temporary files (``tempfile``'s), watched: the spill writes there."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def test_no_file_remains_after_success(tmp_path, scratch, monkeypatch):
    rel = relevant(tmp_path)
    seen = []
    real = tempfile.mkdtemp

    def watched(*args, **kw):
        made = real(*args, **kw)
        seen.append(made)
        return made

    monkeypatch.setattr(tempfile, "mkdtemp", watched)
    load_runs(layouts(tmp_path), rel, notify=None, streaming=TINY)
    assert len(seen) == 4 and all(Path(name).parent == scratch for name in seen)
    assert os.listdir(scratch) == []


FLAWS = {
    # a document twice for a query, in two pieces: found by the spilled partition
    "duplicate across pieces": lambda lines: [*lines, lines[3]],
    # a malformed line late in the file, after a duplicate across pieces: the whole
    # read's order of problems (the earlier line first)
    "duplicate, then a bad score": lambda lines: [*lines[:300], lines[3], *lines[300:350],
                                                  "q1 Q0 dx 1 high r", *lines[350:]],
    "bad score, then a duplicate": lambda lines: [*lines[:5], "q1 Q0 dx 1 high r",
                                                  *lines[5:], lines[200]],
    "too few columns at the end": lambda lines: [*lines, "q1 Q0 dz 1"],
}  # fmt: skip


@pytest.mark.parametrize("flaw", FLAWS)
@pytest.mark.parametrize("compressed", [False, True])
def test_a_problem_is_reported_as_the_whole_read_does(tmp_path, scratch, flaw, compressed):
    rel = relevant(tmp_path)
    lines = (tmp_path / layouts(tmp_path)[0]).read_text().splitlines()
    data = ("\n".join(FLAWS[flaw](lines)) + "\n").encode()
    path = tmp_path / ("flawed.gz" if compressed else "flawed")
    path.write_bytes(gzip.compress(data) if compressed else data)
    with pytest.raises(InputError) as whole:
        load_runs([str(path)], rel, notify=None)
    with pytest.raises(InputError) as pieces:
        load_runs([str(path)], rel, notify=None, streaming=TINY)
    assert str(pieces.value) == str(whole.value)
    assert str(whole.value).startswith(f"{path}:")
    assert os.listdir(scratch) == []


@pytest.mark.parametrize("at_end", [False, True])
def test_junk_after_a_gzip_member_is_reported_as_the_whole_read_does(tmp_path, scratch, at_end):
    """Bytes after a gzip member that start no other member: an error in pieces as in
    the whole read, not a run cut at the junk."""
    rel = relevant(tmp_path)
    data = (tmp_path / layouts(tmp_path)[0]).read_bytes()
    half = data.index(b"\n", len(data) // 2) + 1
    first, second = gzip.compress(data[:half]), gzip.compress(data[half:])
    path = tmp_path / "junk.gz"
    path.write_bytes(first + second + b"junk" if at_end else first + b"junk" + second)
    with pytest.raises(InputError) as whole:
        load_runs([str(path)], rel, notify=None)
    with pytest.raises(InputError) as pieces:
        load_runs([str(path)], rel, notify=None, streaming=TINY)
    at = len(first) + (len(second) if at_end else 0)
    assert str(pieces.value) == str(whole.value)
    assert str(whole.value).startswith(f"{path}: trailing garbage after gzip data at byte {at}:")
    assert os.listdir(scratch) == []


def test_a_parquet_problem_is_reported_as_the_whole_read_does(tmp_path, scratch):
    """A missing score in a late row group and a document twice in an early one: the
    whole read checks every score first, so reports the score."""
    rel = relevant(tmp_path)
    path = layouts(tmp_path)[3]
    table = pq.read_table(path)
    frame = table.to_pandas()
    frame = pd.concat([frame.iloc[:20], frame.iloc[5:6], frame.iloc[20:]], ignore_index=True)
    frame.loc[390, "score"] = None
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=13)
    with pytest.raises(InputError) as whole:
        load_runs([path], rel, notify=None)
    with pytest.raises(InputError) as pieces:
        load_runs([path], rel, notify=None, streaming=TINY)
    assert str(pieces.value) == str(whole.value) == f"{path}: row 391: missing score"
    assert os.listdir(scratch) == []


def test_interrupted_reading_leaves_no_file(tmp_path, scratch):
    """An interrupt (KeyboardInterrupt) in the middle of the first pass: the spill's
    folder is removed all the same."""
    rel = relevant(tmp_path)
    run = the_run(layouts(tmp_path)[1])
    from prefeval.io import spill

    def pieces():
        rows = pa.array(["q1", "q2"]), pa.array(["d1", "d2"]), np.array([1.0, 2.0])
        yield rows
        assert os.listdir(scratch)  # the first piece written
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        spill.spilled_positions(run.name, run.path, pieces(), rel, None, 3)
    assert os.listdir(scratch) == []


#: a process that spills and waits inside the spill (a line on stdout once there): the
#: folder it holds, as a command killed in the middle of a spill leaves it
SPILLING = """
import sys
from prefeval.io.spill import Spill
with Spill(2):
    print("spilling", flush=True)
    sys.stdin.read()
"""


def test_a_killed_spill_s_folder_is_swept_by_a_later_one(tmp_path, scratch):
    """kill -9 in the middle of a spill leaves its folder (nothing of the process runs
    to remove it); the next spill of this user removes it once it is stale (untouched
    a minute) and unlocked (its lock died with the process), and leaves a live spill's
    folder (locked), a fresh one, and what is not prefeval's alone."""
    import signal
    import time

    env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(scratch)}

    def spilling():
        proc = subprocess.Popen(
            [sys.executable, "-c", SPILLING], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            env=env,
        )  # fmt: skip
        assert proc.stdout.readline() == b"spilling\n"
        return proc

    def aged(folders):
        for folder in folders:
            os.utime(folder, (time.time() - 3600,) * 2)
        return folders

    killed = spilling()
    killed.send_signal(signal.SIGKILL)
    killed.wait(timeout=60)
    [left] = aged(list(scratch.iterdir()))
    assert left.name.startswith("prefeval-spill-")
    live = spilling()
    try:
        [held] = aged([p for p in scratch.iterdir() if p != left])
        unlocked = scratch / "prefeval-spill-nolock"  # killed before its lock was made
        unlocked.mkdir()
        (unlocked / "0-1.arrow").write_bytes(b"rows")
        aged([unlocked])
        fresh = scratch / "prefeval-spill-fresh"
        fresh.mkdir()
        others = [scratch / "prefeval-spill-link", scratch / "prefeval-notes.txt"]
        others[0].symlink_to(unlocked)
        others[1].write_text("not a folder\n")
        aged([unlocked])
        load_runs(layouts(tmp_path), relevant(tmp_path), notify=None, streaming=TINY)
        assert sorted(scratch.iterdir()) == sorted([held, fresh, *others])
    finally:
        live.kill()
        live.wait(timeout=60)
    load_runs(layouts(tmp_path), relevant(tmp_path), notify=None, streaming=TINY)
    assert sorted(scratch.iterdir()) == sorted([fresh, *others])  # the live one, killed


def test_a_stale_folder_is_swept_where_rmtree_takes_no_folder_descriptor(scratch, monkeypatch):
    """Python 3.10's ``shutil.rmtree`` has no ``dir_fd``: there a stale folder (unlocked,
    untouched an hour) is removed by its path, what it holds too."""
    import shutil
    import time

    pytest.importorskip("fcntl")
    from prefeval.io import writers

    stale = scratch / "prefeval-spill-stale"
    stale.mkdir()
    (stale / "0-1.arrow").write_bytes(b"rows")
    os.utime(stale, (time.time() - 3600,) * 2)
    rmtree = shutil.rmtree
    monkeypatch.setattr(shutil, "rmtree", lambda path: rmtree(path))  # 3.10's: no dir_fd
    monkeypatch.setattr(sys, "version_info", (3, 10, 0, "final", 0))
    assert writers.sweep_folders(str(scratch)) == 1
    assert list(scratch.iterdir()) == []


MEMORY = """
import sys
import pyarrow as pa
from prefeval.engine.local import load_runs
from prefeval.io.runs import read_qrels
from prefeval.io.spill import Streaming
rel = read_qrels(sys.argv[1]).relevant(None)
streaming = Streaming(above=0, piece_rows=20_000, piece_bytes=1 << 20, part_rows=20_000)
kw = {"streaming": streaming} if sys.argv[3] == "pieces" else {}
load_runs([sys.argv[2]], rel, notify=None, jobs=1, **kw)
print(pa.default_memory_pool().max_memory())
"""


@pytest.mark.parametrize("kind", ["text", "parquet"])
def test_memory_is_bounded_by_a_piece(tmp_path, kind):
    """Arrow's peak allocation reading a run of 300,000 rows (in a fresh process each):
    in pieces of 20,000 rows, a fraction of the whole file's read."""
    rng = np.random.default_rng(1)
    n_users, per = 15_000, 20
    qid = np.repeat([f"user{u:06d}" for u in range(n_users)], per)
    doc = [f"item{d:07d}" for d in rng.integers(0, 10**6, n_users * per)]
    frame = pd.DataFrame({"query_id": qid, "doc_id": doc, "score": rng.random(n_users * per)})
    frame = frame.drop_duplicates(["query_id", "doc_id"]).sample(frac=1, random_state=2)
    (tmp_path / "qrels.txt").write_text(
        "".join(f"{q} 0 {d} 1\n" for q, d in frame[["query_id", "doc_id"]].iloc[::7].values)
    )
    if kind == "text":
        path = tmp_path / "run"
        path.write_text(
            "".join(f"{q} Q0 {d} 1 {s!r} r\n" for q, d, s in frame.itertuples(index=False))
        )
    else:
        path = tmp_path / "run.parquet"
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)

    def peak(how: str) -> int:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        done = subprocess.run(
            [sys.executable, "-c", MEMORY, str(tmp_path / "qrels.txt"), str(path), how],
            capture_output=True, text=True, env=env, check=True,
        )  # fmt: skip
        return int(done.stdout.split()[-1])

    whole, pieces = peak("whole"), peak("pieces")
    assert pieces < whole / 3, (pieces, whole)


def test_no_room_for_temporary_files_reads_whole(tmp_path, monkeypatch):
    """A temporary folder that cannot be written: the run is read whole, as before."""
    rel = relevant(tmp_path)
    paths = layouts(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing"))
    got = load_runs(paths, rel, notify=None, streaming=TINY)
    for a, b in zip(got, load_runs(paths, rel, notify=None)):
        same(a, b)


def test_partitions_do_not_each_keep_a_count_per_query(tmp_path):
    """A run of many queries spilled to many partitions: what the reduction keeps of a
    partition is its positions, not its documents retrieved per query (an array as long
    as the evaluated queries, so kept per partition it would grow with partitions x
    queries), which are summed as each partition is reduced (numpy's allocations, as
    tracemalloc sees them)."""
    import tracemalloc

    from prefeval.io.spill import Codes

    n = 20_000
    (tmp_path / "qrels.txt").write_text("".join(f"u{u} 0 i{u % 97} 1\n" for u in range(n)))
    rel = read_qrels(str(tmp_path / "qrels.txt")).relevant(None)
    frame = pd.DataFrame(
        {
            "query_id": [f"u{u}" for u in range(n) for _ in range(2)],
            "doc_id": [f"i{(u + k) % 97}" for u in range(n) for k in range(2)],
            "score": [2.0 - k for _ in range(n) for k in range(2)],
        }
    )
    path = tmp_path / "run.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
    codes = Codes(rel)
    want = run_positions(read_run(str(path)), rel)

    def peak(parts: int) -> int:
        streaming = Streaming(above=0, piece_rows=4096, part_rows=1, max_parts=parts)
        tracemalloc.start()
        try:
            got = streamed_positions(the_run(str(path)), rel, None, streaming, codes)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
            same(got, want)

    peak(2)  # the lookups built once per command (Codes, the judgments' keys)
    few, many = peak(2), peak(40)
    assert many - few < 10 * n * 8, (few, many)  # 38 more partitions' counts: 38 * n * 8


def test_a_spill_raises_the_open_files_limit_it_needs(monkeypatch):
    """A spill keeps a file per partition open while it writes (256 for the baselines at
    a million users): a soft limit below that is raised where the hard limit allows;
    where it does not, the baselines spill into as many partitions as other spills."""
    from types import SimpleNamespace

    from prefeval.analysis import baselines
    from prefeval.core import limits
    from prefeval.io.spill import Spill

    resource = pytest.importorskip("resource", reason="resource limits are POSIX")
    raised = []
    seen = SimpleNamespace(**vars(resource))
    seen.getrlimit = lambda which: (
        (100, 200) if which == resource.RLIMIT_NOFILE else resource.getrlimit(which)
    )
    seen.setrlimit = lambda which, value: raised.append((which, value))
    monkeypatch.setattr(limits, "_resource", lambda: seen)
    with Spill(30):  # 94 files: under the soft limit
        pass
    with Spill(100):
        pass
    with Spill(256):  # beyond the hard limit: opening the files will tell
        pass
    assert raised == [(resource.RLIMIT_NOFILE, (164, 200))]
    # the baselines: 150 partitions wanted, 214 files beyond the hard limit: 7
    made = []

    class Counted(Spill):
        def __init__(self, parts):
            made.append(parts)
            super().__init__(parts)

    monkeypatch.setattr(baselines.evaluate, "Spill", Counted)
    monkeypatch.setattr(
        baselines.evaluate,
        "STREAMING",
        Streaming(above=0, piece_rows=7, part_rows=5, max_parts=7, max_evaluated_parts=150),
    )
    sample = Path(__file__).resolve().parents[2] / "sample_data"
    runs = sorted(str(p) for p in (sample / "runs").glob("input.*"))
    qrels = read_qrels(str(sample / "qrels.txt"))
    few = baselines.metric_matrices(qrels, resolve_runs(runs), ["AP"])
    assert made == [7]
    monkeypatch.setattr(limits, "_resource", lambda: resource)
    made.clear()
    assert np.array_equal(
        baselines.metric_matrices(qrels, resolve_runs(runs), ["AP"])["AP"], few["AP"]
    )
    assert made == [150]


@pytest.mark.parametrize("jobs", [1, 2])
def test_no_room_to_spill_reads_whole_with_one_notice(tmp_path, monkeypatch, jobs):
    """Where the temporary files cannot be written (a full or read-only $TMPDIR), large
    runs are read whole, the same positions, and one notice says so and why."""
    import errno

    rel = relevant(tmp_path)
    paths = layouts(tmp_path)
    want = load_runs(paths, rel, notify=None, jobs=jobs)

    def full(*args, **kw):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tempfile, "mkdtemp", full)
    notices: list[str] = []
    got = load_runs(paths, rel, notify=notices.append, jobs=jobs, streaming=TINY)
    for a, b in zip(got, want, strict=True):
        same(a, b)
    assert notices == [
        f"cannot write temporary files in {tempfile.gettempdir()} (No space left on device): "
        "4 run files read whole, in more memory; set TMPDIR to a folder with room"
    ]
