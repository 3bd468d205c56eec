"""A cache of reduced runs, so a pipeline parses each run file once.

Parsing a run is most of the cost of every command; what the engine keeps of it
(:class:`~prefeval.positions.RunPositions`: ranks of judged-relevant documents and
retrieved counts) is tiny.  It is stored under a key made of the run file's
content (size, CRC-32 and Adler-32 of its bytes: a few ms per 10 MB), a digest of
the relevant documents it was matched against (queries and docnos at the
relevance level), ``max_docs`` and the cache format version, so any change to the
file or to the judgments misses the cache, whatever the file's name or
modification time.  Entries are written atomically.

Location: ``$PREFEVAL_CACHE_DIR``, else ``$XDG_CACHE_HOME/prefeval``, else
``~/.cache/prefeval``.  ``PREFEVAL_CACHE=0`` (or the CLI's ``--no-cache``) turns it off.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zlib

import numpy as np

from .positions import RunPositions

FORMAT_VERSION = 2  # 2: exact uniform RPP, runs grouped by query
_ENABLED = os.environ.get("PREFEVAL_CACHE", "1").lower() not in ("0", "no", "off", "false")


def set_enabled(flag: bool) -> None:
    global _ENABLED
    _ENABLED = bool(flag)


def cache_dir() -> str:
    if os.environ.get("PREFEVAL_CACHE_DIR"):
        return os.environ["PREFEVAL_CACHE_DIR"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "prefeval")


def relevant_digest(relevant) -> str:
    """Digest of the queries and relevant documents positions are matched against."""
    if getattr(relevant, "_digest", None) is None:
        h = hashlib.sha256()
        # JSON quotes every string: no separator a query id or docno could contain
        h.update(json.dumps(list(relevant.query_ids)).encode())
        h.update(np.asarray(relevant.offsets, dtype=np.int64).tobytes())
        h.update(json.dumps(list(relevant.doc_id)).encode())
        relevant._digest = h.hexdigest()
    return relevant._digest


def _key(raw: bytes, relevant, max_docs) -> str:
    ident = (
        f"{len(raw)}|{zlib.crc32(raw)}|{zlib.adler32(raw)}|"
        f"{relevant_digest(relevant)}|{max_docs}|{FORMAT_VERSION}"
    )
    return hashlib.sha256(ident.encode()).hexdigest()


def _discard(entry: str) -> None:
    """Remove an unreadable cache entry (it is recomputed and stored again)."""
    try:
        os.unlink(entry)
    except OSError:
        pass


def load(raw: bytes, name: str, relevant, max_docs) -> RunPositions | None:
    """The cached reduction of the run file whose bytes are ``raw``, or None."""
    if not _ENABLED:
        return None
    key = _key(raw, relevant, max_docs)
    entry = os.path.join(cache_dir(), key[:2], key + ".npz")
    try:
        with np.load(entry, allow_pickle=False) as data:
            doc, rank, retrieved = data["doc"], data["rank"], data["retrieved"]
    except FileNotFoundError:
        return None
    except Exception:  # noqa: BLE001 - a corrupt entry (truncated, bit flip) is a miss
        _discard(entry)
        return None
    if len(retrieved) != relevant.n_queries or len(doc) != len(rank):
        _discard(entry)
        return None
    return RunPositions(name=name, doc=doc, rank=rank, retrieved=retrieved)


def _write_entry(path: str, **arrays) -> None:
    """Write an .npz entry atomically (temporary file, fsync, rename); the temporary
    file is removed on any failure or interruption.  OSError (read-only home, full
    disk) is swallowed: the cache is an optimisation."""
    folder = os.path.dirname(path)
    tmp = None
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".npz", dir=folder)
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
            try:
                os.unlink(tmp)
            except OSError:
                pass


def store(raw: bytes, positions: RunPositions, relevant, max_docs) -> None:
    """Save a reduction; failures (read-only home, full disk) are silently skipped."""
    if not _ENABLED:
        return
    key = _key(raw, relevant, max_docs)
    _write_entry(
        os.path.join(cache_dir(), key[:2], key + ".npz"),
        doc=positions.doc,
        rank=positions.rank,
        retrieved=positions.retrieved,
    )


# --------------------------------------------------------------------------- cubes

#: total size the cache may reach before its oldest entries are removed
MAX_BYTES = int(float(os.environ.get("PREFEVAL_CACHE_MAX_GB", "2")) * (1 << 30))


def cube_key(positions, relevant, measures, binary: bool) -> str:
    """Key of a preference cube: exactly the reduced runs it is computed from."""
    h = hashlib.sha256()
    h.update(f"{relevant_digest(relevant)}|{binary}|{FORMAT_VERSION}|".encode())
    # the grades (graded populations) and subtopic assignments (subtopic populations)
    h.update(np.asarray(relevant.grade, dtype=np.float64).tobytes())
    if relevant.subtopics is not None:
        for members, ids in zip(relevant.subtopics, relevant.subtopic_ids):
            h.update(np.asarray(members.shape, dtype=np.int64).tobytes())
            h.update(np.packbits(members).tobytes() + np.asarray(ids, np.int64).tobytes())
    h.update(json.dumps([m.name for m in measures]).encode())
    for run in positions:
        h.update(json.dumps(run.name).encode())
        for array in (run.doc, run.rank, run.retrieved):
            h.update(np.int64(len(array)).tobytes() + np.ascontiguousarray(array).tobytes())
    return "cube-" + h.hexdigest()


def load_cube(key: str):
    """A cached PreferenceCube, or None."""
    if not _ENABLED:
        return None
    from .engine import PreferenceCube

    entry = os.path.join(cache_dir(), "cubes", key + ".npz")
    try:
        with np.load(entry, allow_pickle=False) as data:
            cube = PreferenceCube(
                measures=[str(x) for x in data["measures"]],
                runs=[str(x) for x in data["runs"]],
                query_ids=[str(x) for x in data["query_ids"]],
                pairs=data["pairs"],
                values=data["values"],
            )
        shape = (len(cube.measures), len(cube.pairs), len(cube.query_ids))
        if cube.values.shape != shape or cube.pairs.shape != (shape[1], 2):
            _discard(entry)
            return None
        os.utime(entry)  # recently used: pruned last
        return cube
    except FileNotFoundError:
        return None
    except Exception:  # noqa: BLE001 - a corrupt entry (truncated, bit flip) is a miss
        _discard(entry)
        return None


def store_cube(key: str, cube) -> None:
    if not _ENABLED:
        return
    _write_entry(
        os.path.join(cache_dir(), "cubes", key + ".npz"),
        measures=np.array(cube.measures, dtype=str),
        runs=np.array(cube.runs, dtype=str),
        query_ids=np.array(cube.query_ids, dtype=str),
        pairs=cube.pairs,
        values=cube.values,
    )
    prune()


def prune(max_bytes: int | None = None) -> None:
    """Remove the least recently used entries while the cache exceeds ``max_bytes``."""
    limit = MAX_BYTES if max_bytes is None else max_bytes
    entries = []
    for folder, _, files in os.walk(cache_dir()):
        for name in files:
            path = os.path.join(folder, name)
            try:
                st = os.stat(path)
            except OSError:
                continue
            entries.append((st.st_mtime, st.st_size, path))
    total = sum(size for _, size, _ in entries)
    for _, size, path in sorted(entries):
        if total <= limit:
            break
        try:
            os.unlink(path)
            total -= size
        except OSError:
            pass
