"""The cache of reduced runs: hits give the same results, any change misses."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from helpers import as_other_user, readable_copies

from prefeval.engine import cache
from prefeval.engine.local import load_runs
from prefeval.io.runs import read_qrels

QRELS = "1 0 a 1\n1 0 b 2\n2 0 c 1\n"
RUN = "1 Q0 x 1 3.0 t\n1 Q0 a 2 2.0 t\n1 Q0 b 3 1.0 t\n2 Q0 c 1 1.0 t\n"
# same size, one byte different: b moves above a (scores 2.0 <-> 3.0 on a and x)
RUN2 = "1 Q0 x 1 2.0 t\n1 Q0 a 2 3.0 t\n1 Q0 b 3 1.0 t\n2 Q0 c 1 1.0 t\n"


def _entries(folder) -> int:
    """The cache entries under ``folder`` (not its secret, nor anyone's other files)."""
    return sum(name.endswith(".entry") for _, _, files in os.walk(folder) for name in files)


def test_hit_equals_miss_and_content_change_misses(tmp_path, _private_cache):
    qrels = tmp_path / "qrels"
    qrels.write_text(QRELS)
    run = tmp_path / "input.r"
    run.write_text(RUN)
    relevant = read_qrels(str(qrels)).relevant(None)
    before = _entries(_private_cache)
    first = load_runs([str(run)], relevant, notify=None, use_cache=True)[0]
    assert _entries(_private_cache) == before + 1
    again = load_runs([str(run)], relevant, notify=None, use_cache=True)[0]
    assert _entries(_private_cache) == before + 1  # served from the cache
    np.testing.assert_array_equal(first.rank, again.rank)
    np.testing.assert_array_equal(first.doc, again.doc)
    # a: rank 2, b: rank 3, c: rank 1 (docs numbered a, b | c)
    assert dict(zip(first.doc.tolist(), first.rank.tolist())) == {0: 2, 1: 3, 2: 1}
    # rewrite in place with the same size (and maybe the same mtime): must not hit
    run.write_text(RUN2)
    changed = load_runs([str(run)], relevant, notify=None, use_cache=True)[0]
    assert dict(zip(changed.doc.tolist(), changed.rank.tolist())) == {0: 1, 1: 3, 2: 1}
    # other judgments (-M or level) are other entries
    limited = load_runs([str(run)], relevant, max_docs=2, notify=None, use_cache=True)[0]
    assert dict(zip(limited.doc.tolist(), limited.rank.tolist())) == {0: 1, 2: 1}


def test_disabled_cache_writes_nothing(tmp_path, _private_cache):
    qrels = tmp_path / "qrels"
    qrels.write_text(QRELS)
    run = tmp_path / "input.s"
    run.write_text(RUN + "2 Q0 d 2 0.5 t\n")
    relevant = read_qrels(str(qrels)).relevant(None)
    before = _entries(_private_cache)
    load_runs([str(run)], relevant, notify=None, use_cache=False)
    assert _entries(_private_cache) == before


def _corrupt(folder, how: str) -> int:
    count = 0
    for base, _, files in os.walk(folder):
        for name in files:
            if not name.endswith(".entry"):
                continue
            path = os.path.join(base, name)
            data = bytearray(open(path, "rb").read())
            if how == "flip":
                data[len(data) // 2] ^= 0x10
            elif how == "truncate":
                data = data[: len(data) // 3]
            else:
                data = bytearray()
            with open(path, "wb") as handle:
                handle.write(bytes(data))
            count += 1
    return count


def test_corrupt_entries_are_misses(tmp_path, monkeypatch):
    """A flipped bit, a truncated or an empty entry (runs and cubes) is recomputed: the
    output equals the one from a sound cache, and the entry is written again."""
    from helpers import invoke

    folder = tmp_path / "cache"
    monkeypatch.setenv("PREFEVAL_CACHE_DIR", str(folder))
    sample = Path(__file__).resolve().parents[2] / "sample_data"
    args = [
        "order",
        "--no-baselines",
        sample / "qrels.txt",
        *(sample / "runs" / f"input.sys0{i}" for i in (1, 2, 3)),
    ]
    first = invoke(*args)
    assert first.exit_code == 0, first.stderr
    entries = _entries(folder)
    assert entries == 4  # three runs and one cube
    for how in ("flip", "truncate", "empty"):
        assert _corrupt(folder, how) == 4
        again = invoke(*args)
        assert again.exit_code == 0, again.stderr
        assert "Traceback" not in again.stderr
        assert again.stdout == first.stdout, how
        assert _entries(folder) == entries
        # every entry is sound again: a further run is served from the cache
        assert invoke(*args).stdout == first.stdout


def test_pruning_touches_only_its_own_entries(tmp_path, monkeypatch):
    """A cache folder shared with the user's files and a tiny size limit: pruning removes
    cache entries only, never files it did not write."""
    from helpers import invoke

    folder = tmp_path / "data"
    (folder / "sub").mkdir(parents=True)
    mine = {
        folder / "old-results.tsv": "x\n",
        folder / "sub" / "notes.npz": "y\n",
        folder / "0123.npz": "z\n",
    }
    for path, text in mine.items():
        path.write_text(text)
        os.utime(path, (0, 0))  # the oldest files of all
    monkeypatch.setenv("PREFEVAL_CACHE_DIR", str(folder))
    monkeypatch.setenv("PREFEVAL_CACHE_MAX_GB", "0.000001")  # about 1 kB
    sample = Path(__file__).resolve().parents[2] / "sample_data"
    runs = [sample / "runs" / f"input.sys0{i}" for i in (1, 2, 3)]
    result = invoke("order", "--no-baselines", sample / "qrels.txt", *runs)
    assert result.exit_code == 0, result.stderr
    for path, text in mine.items():
        assert path.read_text() == text
    own = list(folder.rglob("*.entry"))
    assert all(p.parents[2] == Path(cache.user_dir()) for p in own)
    assert sorted(p.name for p in folder.rglob("*") if p.is_file() and p not in own) == [
        "0123.npz",
        "notes.npz",
        "old-results.tsv",
        "secret",
    ]
    assert sum(p.stat().st_size for p in own) <= 1100 or len(own) <= 1


def test_bad_cache_size_setting_is_one_line(monkeypatch):
    from helpers import invoke

    monkeypatch.setenv("PREFEVAL_CACHE_MAX_GB", "abc")
    sample = Path(__file__).resolve().parents[2] / "sample_data"
    result = invoke(
        "compare",
        sample / "qrels.txt",
        sample / "runs" / "input.sys01",
        sample / "runs" / "input.sys02",
    )
    assert result.exit_code == 2
    assert result.stderr == (
        "prefeval: PREFEVAL_CACHE_MAX_GB='abc': must be a number of gigabytes >= 0\n"
    )


def test_changed_grade_misses_the_cube_cache(tmp_path, monkeypatch):
    """Two qrels that differ only in one grade: order must follow the grades (the cube
    cache is keyed on the grades, not the relevant set only)."""
    from helpers import invoke

    monkeypatch.setenv("PREFEVAL_CACHE_DIR", str(tmp_path / "cache"))
    qrels = tmp_path / "qrels"
    # query 1: a (grade g) and b (grade 1); run x finds a first, run y finds b first
    runs = []
    for name, order in (("x", "ab"), ("y", "ba"), ("z", "ab")):
        run = tmp_path / name
        run.write_text("".join(f"1 Q0 {d} {i + 1} {9 - i} r\n" for i, d in enumerate(order)))
        runs.append(run)

    def rpp_x_y(grade):
        qrels.write_text(f"1 0 a {grade}\n1 0 b 1\n")
        result = invoke("order", "--no-baselines", "-m", "rpp", "--method", "winrate", qrels, *runs)
        assert result.exit_code == 0, result.stderr
        return result.stdout

    graded = rpp_x_y(2)
    flat = rpp_x_y(1)
    assert graded != flat
    # the cached results equal fresh ones
    assert rpp_x_y(2) == graded and rpp_x_y(1) == flat


def test_concurrent_processes_share_one_cache(tmp_path):
    """Three processes fill one empty cache at the same time: every output equals the
    one computed without the cache, and no temporary file is left."""
    import subprocess
    import sys

    sample = Path(__file__).resolve().parents[2] / "sample_data"
    args = [
        sys.executable,
        "-m",
        "prefeval",
        "order",
        "--no-baselines",
        str(sample / "qrels.txt"),
        *(str(p) for p in sorted((sample / "runs").iterdir())),
    ]
    env = {**os.environ, "PREFEVAL_CACHE_DIR": str(tmp_path / "cache")}
    reference = subprocess.run([*args, "--no-cache"], capture_output=True, env=env, check=True)
    procs = [
        subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        for _ in range(3)
    ]
    outputs = [p.communicate(timeout=300)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert all(out == reference.stdout for out in outputs)
    assert not [p for p in (tmp_path / "cache").rglob(".prefeval-*")]
    # and served from the now warm cache
    warm = subprocess.run(args, capture_output=True, env=env, check=True)
    assert warm.stdout == reference.stdout


def test_digest_of_strings_is_unambiguous():
    """Digest.strings hashes lengths and bytes from Arrow's buffers: a split moved
    between strings, an empty string, non-ASCII text or a sliced array give their own
    digests, and a list, a pandas string Series and an Arrow array of the same strings
    the same one."""
    import pandas as pd
    import pyarrow as pa

    def digest(values):
        return cache.Digest("t").strings(values).hexdigest()

    cases = [[], [""], ["", ""], ["ab", "c"], ["a", "bc"], ["abc"], ["é"], ["e\u0301"],
             ["a#b", "c d"], ["x" * 64, "y"]]  # fmt: skip
    digests = [digest(c) for c in cases]
    assert len(set(digests)) == len(cases)
    for values in cases[1:]:
        same = {
            digest(values),
            digest(pd.Series(values, dtype="str")),
            digest(pa.array(values, pa.string())),
            digest(pa.array(["pad", *values], pa.string())[1:]),  # an offset into buffers
        }
        assert len(same) == 1, values
    with pytest.raises(ValueError, match="missing"):
        digest(pa.array(["a", None]))


def test_digest_of_arrays_takes_empty_and_transposed_arrays():
    """Shapes with a zero, and a non-contiguous view, hash (their bytes, dtype and
    shape): all different here, the view as its contiguous copy."""
    arrays = [np.zeros(0), np.zeros((0, 3)), np.zeros((3, 0)), np.zeros(0, dtype=np.int32),
              np.arange(6).reshape(2, 3), np.arange(6).reshape(3, 2)]  # fmt: skip
    digests = [cache.Digest("a").array(a).hexdigest() for a in arrays]
    assert len(set(digests)) == len(arrays)
    view = np.arange(6).reshape(2, 3).T
    assert cache.Digest("a").array(view).hexdigest() == (
        cache.Digest("a").array(np.ascontiguousarray(view)).hexdigest()
    )


_SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
#: the qrels and three runs :func:`_order` reads
_INPUTS = [_SAMPLE / "qrels.txt", *(_SAMPLE / "runs" / f"input.sys0{i}" for i in (1, 2, 3))]


def _order(tmp_path, *extra, inputs=_INPUTS):
    """order of three sample runs (``inputs``: the qrels and the runs, or copies of them
    another user can read), in-process (a result and its stdout)."""
    from helpers import invoke

    result = invoke("order", "--no-baselines", "-m", "rpp", *extra, *inputs)
    assert result.exit_code == 0, result.stderr
    return result


def _entry_files(folder) -> list[Path]:
    return sorted(Path(folder).rglob("*.entry"))


def test_altered_planted_or_moved_entries_are_misses(tmp_path, monkeypatch):
    """An entry is bound to its key and content by an HMAC with the user's secret: arrays
    altered under the right key (structurally sound, the issue's rpp -0.2508 turned
    into +0.1928), an entry signed with another secret, or a sound entry copied under
    another key are misses; the result is the one computed afresh."""
    import hashlib
    import hmac
    import io

    monkeypatch.setenv("PREFEVAL_CACHE_DIR", str(tmp_path / "cache"))
    fresh = _order(tmp_path, "--no-cache").stdout
    assert _order(tmp_path).stdout == fresh
    entries = _entry_files(tmp_path / "cache")
    assert len(entries) == 4
    head = len(cache.MAGIC) + 32

    def rewrite(path, change, secret=None):
        data = path.read_bytes()
        with np.load(io.BytesIO(data[head:]), allow_pickle=False) as npz:
            arrays = {n: npz[n] for n in npz.files}
        change(arrays)
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        payload = buffer.getvalue()
        tag = data[len(cache.MAGIC) : head]
        if secret is not None:  # a forger's own secret, signing exactly as prefeval does
            kind, key = path.parents[1].name, path.stem
            text = f"prefeval-cache|{cache.FORMAT_VERSION}|{kind}|{key}|".encode()
            tag = hmac.new(secret, text + payload, hashlib.sha256).digest()
        path.write_bytes(cache.MAGIC + tag + payload)

    def reverse(arrays):  # every array reversed: a consistent but other reduced run or cube
        for name, values in arrays.items():
            if values.ndim:
                arrays[name] = values[::-1].copy()

    for secret in (None, b"k" * 32):
        for path in entries:
            rewrite(path, reverse, secret)
        assert _order(tmp_path).stdout == fresh
        assert _entry_files(tmp_path / "cache") == entries  # written again, sound
        assert _order(tmp_path).stdout == fresh
    # a sound entry moved under the key of another run
    runs = [p for p in entries if p.parents[1].name == "runs"]
    runs[1].write_bytes(runs[0].read_bytes())
    assert _order(tmp_path).stdout == fresh
    assert runs[1].read_bytes() != runs[0].read_bytes()  # recomputed and rewritten


def test_secret_is_the_users_own(tmp_path, monkeypatch):
    """The secret is made once, 0600, in the user's own 0700 folder; a secret others may
    read (or that is not a regular file of this user) turns the cache off with one
    notice, and the results are right."""
    import stat

    monkeypatch.setenv("PREFEVAL_CACHE_DIR", str(tmp_path / "cache"))
    fresh = _order(tmp_path, "--no-cache").stdout
    _order(tmp_path)
    folder = Path(cache.user_dir())
    assert folder.parent == Path(cache.own_dir())
    secret = folder / "secret"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600 and secret.stat().st_size == 32
    before = secret.read_bytes()
    _order(tmp_path)
    assert secret.read_bytes() == before
    secret.chmod(0o644)
    cache._refused.clear()
    try:
        result = _order(tmp_path)
        assert result.stdout == fresh
        assert result.stderr.count("cache not used") == 1, result.stderr
        assert "secret" in result.stderr
    finally:
        cache._refused.clear()


def test_a_fifo_as_the_secret_is_refused_at_once(tmp_path):
    """A FIFO (no writer) where the secret should be: the command neither waits on it
    nor reads it; the cache is not used, with one notice, and the results are right."""
    import subprocess
    import sys

    sample = Path(__file__).resolve().parents[2] / "sample_data"
    runs = [str(sample / "runs" / f"input.sys0{i}") for i in (1, 2, 3)]
    args = [sys.executable, "-m", "prefeval", "order", "--no-baselines", "-m", "rpp"]
    args += [str(sample / "qrels.txt"), *runs]
    env = {**os.environ, "PREFEVAL_CACHE_DIR": str(tmp_path / "cache")}
    fresh = subprocess.run([*args, "--no-cache"], capture_output=True, env=env, check=True)
    subprocess.run(args, capture_output=True, env=env, check=True)
    secret = next((tmp_path / "cache").rglob("secret"))
    secret.unlink()
    os.mkfifo(secret, 0o600)
    result = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == fresh.stdout.decode()
    assert result.stderr.count("cache not used") == 1, result.stderr
    assert "secret is not a 32-byte file of this user (0600)" in result.stderr
    assert secret.is_fifo()


def _other_uid() -> int:
    return os.geteuid() + 4242


def test_foreign_and_unreadable_entries_are_left_alone(tmp_path, monkeypatch):
    """A shared cache folder: another user's folder and entries are never read, pruned or
    replaced; an entry of one's own folder that one cannot read, or that belongs to
    someone else, is a miss and left as it is (never taken for corrupt and deleted)."""
    import shutil

    if os.geteuid() != 0:
        pytest.skip("needs root to give files to another user (run the tests as root)")
    shared = tmp_path / "shared"
    monkeypatch.setenv("PREFEVAL_CACHE_DIR", str(shared))
    fresh = _order(tmp_path, "--no-cache").stdout
    assert _order(tmp_path).stdout == fresh
    mine = Path(cache.user_dir())
    other = mine.parent / f"user-{_other_uid()}"
    shutil.copytree(mine, other)
    for path in [other, *other.rglob("*")]:
        os.chown(path, _other_uid(), _other_uid(), follow_symlinks=False)
        os.utime(path, (0, 0), follow_symlinks=False)  # the oldest files of all
    theirs = {p: p.read_bytes() for p in other.rglob("*") if p.is_file()}
    # an entry of our folder that is someone else's and (to us) corrupt
    entry = _entry_files(mine)[0]
    entry.write_bytes(b"not for you")
    os.chown(entry, _other_uid(), _other_uid())
    monkeypatch.setenv("PREFEVAL_CACHE_MAX_GB", "0")  # prune all it may
    assert _order(tmp_path).stdout == fresh
    assert _order(tmp_path).stdout == fresh
    assert entry.read_bytes() == b"not for you"
    assert {p: p.read_bytes() for p in other.rglob("*") if p.is_file()} == theirs


def test_unreadable_entry_is_a_miss_not_deleted(tmp_path, monkeypatch):
    """An entry this user cannot read (mode 000; as root the test runs as user nobody,
    since root reads every file) is a miss: not deleted; the result is right."""
    import shutil
    import tempfile

    fresh = _order(tmp_path, "--no-cache").stdout  # (as root: imports all it needs)
    folder = Path(tempfile.mkdtemp(prefix="prefeval-cache-"))  # reachable by nobody
    folder.chmod(0o777)
    monkeypatch.setenv("PREFEVAL_CACHE_DIR", str(folder))

    try:
        with readable_copies(*_INPUTS) as inputs, as_other_user():
            assert _order(tmp_path, inputs=inputs).stdout == fresh
            entries = _entry_files(folder)
            assert len(entries) == 4
            for entry in entries:
                entry.chmod(0)
            try:
                assert _order(tmp_path, inputs=inputs).stdout == fresh
                assert all(entry.exists() for entry in entries)
            finally:
                for entry in entries:
                    entry.chmod(0o600)
    finally:
        shutil.rmtree(folder)


@pytest.mark.parametrize("shared", ["sticky", "group"])
def test_shared_folder_lets_every_user_have_their_own_folder(monkeypatch, shared):
    """PREFEVAL_CACHE_DIR on a folder others may write (1777 as /tmp, or group-writable):
    the first user's version folder gets its write bits and the sticky bit (not the
    umask's 0755, which would give every other user ``cache not used: Permission
    denied``), so a
    second user (nobody, as root) makes their own 0700 folder below it and uses the
    cache; nothing of the first user's is read, replaced or removed.  A version folder
    of another user that this user may not write is a notice that says so."""
    import shutil
    import stat
    import tempfile

    if os.geteuid() != 0:
        pytest.skip("needs root to run as a second user (run the tests as root)")
    fresh = _order(None, "--no-cache").stdout  # (as root: imports all it needs)
    folder = Path(tempfile.mkdtemp(prefix="prefeval-shared-"))  # reachable by nobody
    if shared == "sticky":
        folder.chmod(0o1777)
    else:  # root's, group nogroup (65534), group-writable; nobody's group is nogroup
        os.chown(folder, 0, 65534)
        folder.chmod(0o2775)
    monkeypatch.setenv("PREFEVAL_CACHE_DIR", str(folder))
    umask = os.umask(0o022)  # the usual one, which mkdir's mode does not escape
    cache._refused.clear()

    def as_nobody():
        with readable_copies(*_INPUTS) as inputs, as_other_user(group=True):
            return _order(None, inputs=inputs)

    try:
        first = _order(None)
        assert first.stdout == fresh and "cache not used" not in first.stderr
        version = Path(cache.own_dir())
        mode = stat.S_IMODE(version.stat().st_mode)
        assert mode & 0o1777 == (0o1777 if shared == "sticky" else 0o1775), oct(mode)
        roots = {p: p.read_bytes() for p in version.rglob("*") if p.is_file()}
        assert len([p for p in roots if p.suffix == ".entry"]) == 4
        for limit in ("0", "2"):  # misses (pruning all it may), misses, then hits
            monkeypatch.setenv("PREFEVAL_CACHE_MAX_GB", limit)
            second = as_nobody()
            assert second.stdout == fresh
            assert "cache not used" not in second.stderr, second.stderr
        theirs = version / "user-65534"
        assert theirs.stat().st_uid == 65534 and theirs.stat().st_mode & 0o777 == 0o700
        assert len(_entry_files(theirs)) == 4
        assert {p: p.read_bytes() for p in roots} == roots  # the first user's: untouched
        # the first user's own use is unchanged (another user's folder beside theirs)
        assert _order(None).stdout == fresh
        # a version folder of another user that this user may not write: told why
        shutil.rmtree(theirs)
        version.chmod(0o755)
        cache._refused.clear()
        refused = as_nobody()
        assert refused.stdout == fresh
        assert refused.stderr.count("cache not used") == 1, refused.stderr
        assert "it is user 0's folder of mode 0755, not writable for this user" in refused.stderr
    finally:
        os.umask(umask)
        cache._refused.clear()
        shutil.rmtree(folder)


@pytest.mark.parametrize("linked", ["runs", "cubes", "user", "version"])
def test_symlinked_cache_folders_are_never_followed(tmp_path, monkeypatch, linked):
    """A cache folder (runs, cubes, the user's or the version's) replaced by a symbolic
    link: the cache is not used, with one notice; nothing is written, read or pruned
    behind the link (files there named like entries stay), and the result is right."""
    monkeypatch.setenv("PREFEVAL_CACHE_DIR", str(tmp_path / "cache"))
    fresh = _order(tmp_path, "--no-cache").stdout
    _order(tmp_path)
    folder = {
        "runs": Path(cache.user_dir(), "runs"),
        "cubes": Path(cache.user_dir(), "cubes"),
        "user": Path(cache.user_dir()),
        "version": Path(cache.own_dir()),
    }[linked]
    elsewhere = tmp_path / "elsewhere"
    folder.rename(elsewhere)
    folder.symlink_to(elsewhere, target_is_directory=True)
    outside = {p: p.read_bytes() for p in elsewhere.rglob("*") if p.is_file()}
    for path in outside:
        os.utime(path, (0, 0))
    monkeypatch.setenv("PREFEVAL_CACHE_MAX_GB", "0")  # prune everything it may
    cache._refused.clear()
    try:
        result = _order(tmp_path, "-m", "dcgrpp")  # other cubes: written if it could
        assert result.stdout != fresh  # (another measure)
        assert "cache not used" in result.stderr
        assert result.stderr.count("cache not used") == 1, result.stderr
        assert {p: p.read_bytes() for p in elsewhere.rglob("*") if p.is_file()} == outside
        again = _order(tmp_path)
        assert again.stdout == fresh
    finally:
        cache._refused.clear()


def test_temporaries_of_killed_writers_are_swept(tmp_path, monkeypatch):
    """A temporary entry a killed process left (unlocked, ours, a minute old) is removed
    by the next pruning; one a live writer holds (locked) or a fresh one stays."""
    import fcntl
    import time

    monkeypatch.setenv("PREFEVAL_CACHE_DIR", str(tmp_path / "cache"))
    _order(tmp_path)
    folder = _entry_files(tmp_path / "cache")[0].parent
    stale, live, fresh = (folder / f".prefeval-{n}.tmp" for n in ("dead", "live", "new"))
    for path in (stale, live, fresh):
        path.write_bytes(b"partial entry")
    for path in (stale, live):
        os.utime(path, (time.time() - 3600,) * 2)
    with open(live, "rb") as holder:
        fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
        cache.prune()
    assert not stale.exists()
    assert live.exists() and fresh.exists()


def test_refusal_names_the_users_folder_for_its_secret(tmp_path, monkeypatch, capsys):
    """The notice of a cache not used names the folder the fault is in: the user's own
    folder when its secret is not what the cache made."""
    monkeypatch.setenv("PREFEVAL_CACHE_DIR", str(tmp_path))
    cache._refused.clear()
    try:
        user = Path(cache.user_dir())
        user.mkdir(parents=True, mode=0o700)
        (user / "secret").mkdir()
        assert cache._user_folder(create=True) is None
        assert capsys.readouterr().err == (
            f"prefeval: cache not used: {user}: secret is not a 32-byte file of this user (0600)\n"
        )
    finally:
        cache._refused.clear()


def test_refusal_names_the_users_folder_it_cannot_open(monkeypatch, capsys):
    """This user's own folder there but not openable (mode 0000): the notice names that
    folder and says what to do, not the version folder above it (as if it could not be
    made there)."""
    import shutil
    import stat
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="prefeval-own-"))  # reachable by nobody
    folder.chmod(0o1777)
    monkeypatch.setenv("PREFEVAL_CACHE_DIR", str(folder))
    cache._refused.clear()
    try:
        with as_other_user():  # root opens any folder: the test runs as nobody
            opened = cache._user_folder(create=True)
            assert opened is not None
            os.close(opened[0])
            user = Path(cache.user_dir())
            user.chmod(0)
            try:
                assert cache._user_folder(create=True) is None
            finally:
                user.chmod(stat.S_IRWXU)
        assert capsys.readouterr().err == (
            f"prefeval: cache not used: {user}: this user's folder of mode 0000 cannot be "
            "opened (it needs 0700; make it so, or remove it)\n"
        )
    finally:
        cache._refused.clear()
        shutil.rmtree(folder)
