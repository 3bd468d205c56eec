"""A content-addressed store of numpy arrays, so a pipeline parses each run file once.

This module knows nothing of runs or preferences: it stores and loads named arrays
under a key, and builds keys from everything that changes a result.  The engine
caches each reduced run (ranks of judged-relevant documents, retrieved counts: tiny
next to the run) and the analysis commands the preference cube they compute.

Keys are SHA-256 digests (hashlib) of the inputs' content: a run file's bytes (as
stored, so a gzip file is hashed compressed), the judgments it is matched against
(queries, relevant docnos, grades and subtopic assignments), the relevance level,
``max_docs``, ``--binary``, the measures, and the cache format's version.  A file
changed in any way, under the same name and modification time or not, misses.

Layout: ``ROOT/prefeval-cache-v{VERSION}/{runs,cubes}/xx/<64 hex digits>.npz`` where
ROOT is ``$PREFEVAL_CACHE_DIR``, else ``$XDG_CACHE_HOME/prefeval``, else
``~/.cache/prefeval``.  Entries are written atomically (temporary file, fsync,
rename); a corrupt, truncated or unreadable entry is a miss, removed and recomputed.
Pruning removes the least recently used entries beyond ``$PREFEVAL_CACHE_MAX_GB``
(default 2) and touches nothing but files named like its own entries inside its
own folder.  ``PREFEVAL_CACHE=0`` (or the CLI's ``--no-cache``) turns it off;
deleting the folder is always safe.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import tempfile

import numpy as np

FORMAT_VERSION = 3  # 3: own folder, SHA-256 content keys, exact uniform RPP
KINDS = ("runs", "cubes")
_ENTRY = re.compile(r"^[0-9a-f]{64}\.npz$")
_TEMP = re.compile(r"^\.tmp-[A-Za-z0-9_]+\.npz$")
_ENABLED = os.environ.get("PREFEVAL_CACHE", "1").lower() not in ("0", "no", "off", "false")
DEFAULT_MAX_GB = 2.0


class CacheSettingError(ValueError):
    """An environment variable of the cache has a value that makes no sense."""


def set_enabled(flag: bool) -> None:
    global _ENABLED
    _ENABLED = bool(flag)


def enabled() -> bool:
    return _ENABLED


def cache_dir() -> str:
    """The folder the user points the cache to (the cache itself lives in a subfolder)."""
    if os.environ.get("PREFEVAL_CACHE_DIR"):
        return os.environ["PREFEVAL_CACHE_DIR"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "prefeval")


def own_dir() -> str:
    """The folder this version of the cache owns and prunes."""
    return os.path.join(cache_dir(), f"prefeval-cache-v{FORMAT_VERSION}")


def max_bytes() -> int:
    """``$PREFEVAL_CACHE_MAX_GB`` in bytes (default 2 GB)."""
    text = os.environ.get("PREFEVAL_CACHE_MAX_GB", "").strip()
    if not text:
        return int(DEFAULT_MAX_GB * (1 << 30))
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise CacheSettingError(
            f"PREFEVAL_CACHE_MAX_GB={text!r}: must be a number of gigabytes >= 0"
        )
    return int(min(value, 1 << 20) * (1 << 30))


# --------------------------------------------------------------------------- keys


class Digest:
    """A SHA-256 digest fed with typed, length-prefixed parts (no two different inputs
    give the same byte stream)."""

    def __init__(self, kind: str):
        self._h = hashlib.sha256(f"prefeval-cache|{FORMAT_VERSION}|{kind}".encode())

    def text(self, value) -> Digest:
        return self.bytes(json.dumps(value).encode())

    def bytes(self, data) -> Digest:
        view = memoryview(data).cast("B")
        self._h.update(len(view).to_bytes(8, "little"))
        self._h.update(view)
        return self

    def array(self, array) -> Digest:
        array = np.ascontiguousarray(array)
        self.text([str(array.dtype), list(array.shape)])
        return self.bytes(array.reshape(-1).view(np.uint8))  # its bytes, not copied

    def strings(self, values) -> Digest:
        """A sequence of strings (a list, a pandas string Series or an Arrow array): its
        count, the lengths of its UTF-8 texts and their bytes, from Arrow's buffers (no
        Python object per string)."""
        import pyarrow as pa

        array = values if isinstance(values, pa.Array) else pa.array(values, pa.large_string())
        array = array.cast(pa.large_string())
        if array.null_count:
            raise ValueError("Digest.strings: a missing string")
        offsets = np.frombuffer(array.buffers()[1], dtype=np.int64)[
            array.offset : array.offset + len(array) + 1
        ]
        data = array.buffers()[2]
        self.text(["strings", len(array)]).array(np.diff(offsets))
        start, stop = (int(offsets[0]), int(offsets[-1])) if len(array) else (0, 0)
        return self.bytes(memoryview(data)[start:stop] if data is not None else b"")

    def hexdigest(self) -> str:
        return self._h.hexdigest()


def judgments_digest(relevant) -> str:
    """Digest of a relevant set: queries, relevant docnos, grades and subtopics."""
    if getattr(relevant, "_digest", None) is None:
        d = Digest("judgments").strings(relevant.query_ids).array(relevant.offsets)
        d.strings(relevant.doc_id).array(np.asarray(relevant.grade, dtype=np.float64))
        d.text(None if relevant.level is None else float(relevant.level))
        if relevant.subtopics is not None:
            for members, ids in zip(relevant.subtopics, relevant.subtopic_ids):
                d.array(members).array(np.asarray(ids, dtype=np.int64))
        relevant._digest = d.hexdigest()
    return relevant._digest


def run_key(raw: bytes, relevant, max_docs) -> str:
    """Key of a reduced run: the file's bytes, the judgments and ``max_docs``."""
    return Digest("run").bytes(raw).text(judgments_digest(relevant)).text(max_docs).hexdigest()


def cube_key(positions, relevant, measures, binary: bool) -> str:
    """Key of a preference cube: exactly the reduced runs, judgments and measures."""
    d = Digest("cube").text(judgments_digest(relevant)).text(bool(binary))
    d.text([str(getattr(m, "name", m)) for m in measures])
    for run in positions:
        d.text(run.name).array(run.doc).array(run.rank).array(run.retrieved)
    return d.hexdigest()


# --------------------------------------------------------------------------- entries


def _entry(kind: str, key: str) -> str:
    if kind not in KINDS or not re.fullmatch(r"[0-9a-f]{64}", key):
        raise ValueError(f"bad cache entry {kind}/{key}")
    return os.path.join(own_dir(), kind, key[:2], key + ".npz")


def _discard(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def get(kind: str, key: str) -> dict[str, np.ndarray] | None:
    """The arrays stored under ``key``, or None (off, absent, or unreadable: removed)."""
    if not _ENABLED:
        return None
    path = _entry(kind, key)
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
    except FileNotFoundError:
        return None
    except Exception:  # noqa: BLE001 - corrupt (truncated, bit flip, not a zip): a miss
        _discard(path)
        return None
    try:
        os.utime(path)  # recently used: pruned last
    except OSError:
        pass
    return arrays


def invalid(kind: str, key: str) -> None:
    """Remove an entry whose arrays the caller found inconsistent."""
    _discard(_entry(kind, key))


def put(kind: str, key: str, **arrays) -> None:
    """Store ``arrays`` under ``key`` atomically.  OSError (read-only home, full disk) is
    ignored: the cache is an optimisation.  The temporary file is removed on any failure
    or interruption.  Call :func:`prune` once after a batch of puts."""
    if not _ENABLED:
        return
    path = _entry(kind, key)
    tmp = None
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".npz", dir=os.path.dirname(path))
        with os.fdopen(fd, "wb") as handle:
            np.savez(handle, **arrays)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        tmp = None
    except OSError:
        pass
    finally:
        if tmp is not None:
            _discard(tmp)


def prune(limit: int | None = None) -> None:
    """Remove the least recently used entries while the cache's own entries exceed
    ``limit`` bytes.  Only files named like entries, inside the cache's own folder,
    are ever considered (and temporary files a killed process left over an hour ago)."""
    import time

    limit = max_bytes() if limit is None else limit
    entries = []
    stale = time.time() - 3600
    for kind in KINDS:
        for folder, _, files in os.walk(os.path.join(own_dir(), kind)):
            for name in files:
                path = os.path.join(folder, name)
                if _TEMP.match(name):
                    try:
                        if os.stat(path).st_mtime < stale:
                            _discard(path)
                    except OSError:
                        pass
                    continue
                if not _ENTRY.match(name):
                    continue
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                entries.append((st.st_mtime, st.st_size, path))
    total = sum(size for _, size, _ in entries)
    for _, size, path in sorted(entries):
        if total <= limit:
            break
        _discard(path)
        total -= size
