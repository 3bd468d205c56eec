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

Layout: ``ROOT/prefeval-cache-v{VERSION}/user-<uid>/{runs,cubes}/xx/<64 hex
digits>.entry`` where ROOT is ``$PREFEVAL_CACHE_DIR``, else ``$XDG_CACHE_HOME/prefeval``,
else ``~/.cache/prefeval``.  Each user has a folder of their own (mode 0700) in a
shared ROOT (the version folder takes ROOT's write bits and the sticky bit), and a
secret there (``secret``, 32 random bytes, mode 0600).  An entry is
``MAGIC``, an HMAC-SHA256 with that secret of (kind, key, the arrays' npz bytes), then
those bytes: an entry planted or altered by anyone without the secret, copied from
another key, truncated or bit-flipped fails the check and is a miss.  Entries are
written through :class:`prefeval.io.writers.Replacement` (temporary file, fsync, rename),
every folder below ROOT is opened without following symbolic links (a link in their
place turns the cache off with a notice) and nothing outside the user's own folder is
ever read, written or removed.  A corrupt entry of ours is removed and recomputed; one
we cannot read is a miss and left alone.  Pruning removes the least recently used
entries beyond ``$PREFEVAL_CACHE_MAX_GB`` (default 2) and touches nothing but files
named like its own entries (and stale temporary files, see
:func:`prefeval.io.writers.sweep_temporaries`) inside the user's folder.
``PREFEVAL_CACHE=0`` (or the CLI's ``--no-cache``) turns it off; deleting the folder is
always safe.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import io
import json
import math
import os
import re
import stat
import threading

import numpy as np

from ..core.arrays import strings
from ..core.errors import CacheSettingError
from ..core.progress import stderr_notice
from ..io.source import StoredFile
from ..io.writers import Replacement, sweep_temporaries

# 3: own folder, SHA-256 content keys, exact uniform RPP; 4: a folder per user, entries
# signed with the user's secret; 5: a gzip file with bytes after a member that start no
# other member is an input error (an entry of 4 holds what was read before them)
FORMAT_VERSION = 5
KINDS = ("runs", "cubes")
_ENTRY = re.compile(r"^[0-9a-f]{64}\.entry$")
MAGIC = b"prefeval-cache-4\n"
_TAG = hashlib.sha256().digest_size
_SECRET = "secret"
_SECRET_BYTES = 32
DEFAULT_MAX_GB = 2.0
#: bytes of a stored run file hashed at a time
_HASH_BLOCK = 8 << 20


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
        """Bytes, or anything read by slices as bytes are (a run's
        :class:`~prefeval.io.source.StoredFile`, read a block at a time)."""
        if isinstance(data, StoredFile):
            self._h.update(len(data).to_bytes(8, "little"))
            for at in range(0, len(data), _HASH_BLOCK):
                self._h.update(data[at : at + _HASH_BLOCK])
            return self
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

        if isinstance(values, pa.Array):
            array = values
        elif isinstance(values, list) and all(isinstance(v, str) for v in values):
            array = strings(values)
        else:
            array = pa.array(values, pa.large_string())
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

_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
#: user folders found unusable (notice given once per folder and process)
_refused: set[str] = set()
_refusing = threading.Lock()


def _uid() -> int:
    return os.geteuid() if hasattr(os, "geteuid") else 0


def user_dir() -> str:
    """The folder of this user's entries and secret inside :func:`own_dir`."""
    return os.path.join(own_dir(), f"user-{_uid()}")


class _Unusable(OSError):
    """The cache's folders are not what the cache made them (a symbolic link, another
    user's folder or secret): the cache is not used, with a notice."""


def _subfolder(parent_fd: int | None, name: str, create: bool, mode: int = 0o700) -> int:
    """Descriptor of the folder ``name`` in ``parent_fd`` (a path when None), never
    following a symbolic link; made (``mode``) when ``create``."""
    try:
        return os.open(name, _DIR_FLAGS | _NOFOLLOW, dir_fd=parent_fd)
    except FileNotFoundError:
        if not create:
            raise
    try:
        os.mkdir(name, mode, dir_fd=parent_fd)
    except FileExistsError:
        pass
    return os.open(name, _DIR_FLAGS | _NOFOLLOW, dir_fd=parent_fd)


def _open_folder(parent_fd: int | None, name: str, create: bool, mode: int = 0o700) -> int:
    """:func:`_subfolder`, a symbolic link (or a file) in its place being
    :class:`_Unusable`."""
    try:
        return _subfolder(parent_fd, name, create, mode)
    except FileNotFoundError:
        raise
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            raise _Unusable(f"{name} is a symbolic link or not a folder") from None
        raise


def _read_secret(folder_fd: int) -> bytes:
    """The user's secret (made when missing): a regular file of this user that no one
    else may read or write.  Opened without blocking (a FIFO in its place is refused at
    once, never waited on) and checked on the descriptor before it is read."""
    flags = os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(_SECRET, flags, dir_fd=folder_fd)
    except FileNotFoundError:
        new = Replacement(folder_fd, _SECRET + ".new", 0o600)
        # open (Replacement raises otherwise) until committed or abandoned
        assert new.handle is not None and new.tmp is not None
        try:
            new.handle.write(os.urandom(_SECRET_BYTES))
            new.handle.flush()
            os.fsync(new.handle.fileno())
            new.handle.close()
            # a link, not a rename: a secret another process of ours made first stays
            os.link(new.tmp, _SECRET, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
        except FileExistsError:
            pass
        finally:
            new.abandon()
        fd = os.open(_SECRET, flags, dir_fd=folder_fd)
    try:
        info = os.fstat(fd)
        if (
            not stat.S_ISREG(info.st_mode)
            or info.st_uid != _uid()
            or info.st_mode & 0o077
            or info.st_size != _SECRET_BYTES
        ):
            raise _Unusable(f"{_SECRET} is not a {_SECRET_BYTES}-byte file of this user (0600)")
        return os.read(fd, _SECRET_BYTES + 1)
    finally:
        os.close(fd)


def _user_folder(create: bool) -> tuple[int, bytes] | None:
    """This user's folder (a descriptor the caller closes) and secret; None when there
    is none yet (``create`` False), when the process is short of descriptors (a miss, as
    any other failure to open an entry), or when the cache cannot be used (a notice says
    why, once per process).  One folder descriptor is held at a time (besides the one
    being opened): the threads reading runs share the open-files limit."""
    path = user_dir()
    if path in _refused:
        return None
    fd = None
    where = own_dir()  # the folder a fault is in, which the notice names
    try:
        if create:
            os.makedirs(cache_dir(), exist_ok=True)
        fd = os.open(cache_dir(), _DIR_FLAGS)  # ROOT: where the user points
        # the version folder may be shared by the users of ROOT; the user's own is 0700
        root, fd = fd, None
        try:
            fd = _version_folder(root, create)
        finally:
            os.close(root)
        version, fd = fd, None
        try:
            fd = _open_folder(version, os.path.basename(path), create)
        except PermissionError:
            if _own_entry(version, os.path.basename(path)):
                where = path  # there, but this user may not open it
                raise _Unusable(_not_openable(version, os.path.basename(path))) from None
            raise _Unusable(_not_writable(version)) from None
        finally:
            os.close(version)
        if os.fstat(fd).st_uid != _uid():
            raise _Unusable(f"{os.path.basename(path)} belongs to another user")
        where = path  # the secret's
        secret = _read_secret(fd)
    except FileNotFoundError:
        _close(fd)
        return None
    except OSError as error:
        _close(fd)
        if error.errno in (errno.EMFILE, errno.ENFILE):
            return None  # a resource of this process, not a fault of the folder
        _refuse(where, str(error) if isinstance(error, _Unusable) else _describe(error))
        return None
    return fd, secret


def _close(fd: int | None) -> None:
    if fd is not None:
        os.close(fd)


def _version_folder(root_fd: int, create: bool) -> int:
    """Descriptor of the version folder in ROOT (``root_fd``).  Where ROOT lets others
    write (group- or other-writable, as a shared folder or /tmp), the version folder of
    this user gets the same write (and search) bits and the sticky bit, whatever the
    umask: every user of ROOT makes their own folder in it, and none can remove or
    rename another's.  Another user's version folder is used as it is."""
    fd = _open_folder(root_fd, os.path.basename(own_dir()), create, 0o777)
    try:
        shared = os.fstat(root_fd).st_mode & 0o022
        info = os.fstat(fd)
        mode = stat.S_IMODE(info.st_mode)
        wanted = mode | shared | shared >> 1 | stat.S_ISVTX
        if shared and info.st_uid == _uid() and mode != wanted:
            try:
                os.fchmod(fd, wanted)
            except OSError:  # (a read-only file system) for the others' sake only
                pass
    except OSError:
        os.close(fd)
        raise
    return fd


def _own_entry(folder_fd: int, name: str) -> bool:
    """Whether ``name`` in ``folder_fd`` exists and is this user's."""
    try:
        return os.stat(name, dir_fd=folder_fd, follow_symlinks=False).st_uid == _uid()
    except OSError:
        return False


def _not_openable(version_fd: int, name: str) -> str:
    """Why this user cannot open their own folder ``name``, which is there."""
    mode = stat.S_IMODE(os.stat(name, dir_fd=version_fd, follow_symlinks=False).st_mode)
    return (
        f"this user's folder of mode {mode:04o} cannot be opened (it needs 0700; make it so, "
        "or remove it)"
    )


def _not_writable(version_fd: int) -> str:
    """Why this user cannot open or make their folder in the version folder."""
    name = os.path.basename(user_dir())
    try:
        if os.stat(name, dir_fd=version_fd, follow_symlinks=False).st_uid != _uid():
            return f"{name} belongs to another user"
    except OSError:
        pass
    info = os.fstat(version_fd)
    mode = stat.S_IMODE(info.st_mode)
    whose = "this user's" if info.st_uid == _uid() else f"user {info.st_uid}'s"
    return (
        f"cannot make {name} in it: it is {whose} folder of mode "
        f"{mode:04o}, not writable for this user (its owner may make it 1777, or remove it)"
    )


def _refuse(where: str, reason: str) -> None:
    """Turn the cache off for this process's commands in this folder, with a notice (one:
    the threads reading runs may find the same fault at once)."""

    with _refusing:
        if user_dir() in _refused:
            return
        _refused.add(user_dir())
    stderr_notice(f"cache not used: {where}: {reason}")


def _describe(error: OSError) -> str:
    return error.strerror or str(error) or type(error).__name__


def _entry(kind: str, key: str) -> tuple[str, str, str]:
    """(kind, folder, file name) of the entry of ``key``, relative to the user folder."""
    if kind not in KINDS or not re.fullmatch(r"[0-9a-f]{64}", key):
        raise ValueError(f"bad cache entry {kind}/{key}")
    return kind, key[:2], key + ".entry"


def _entry_folder(kind: str, sub: str, create: bool) -> tuple[int, bytes] | None:
    """Descriptor of the folder of an entry (the caller closes it) and the secret; one
    folder descriptor held at a time."""
    opened = _user_folder(create)
    if opened is None:
        return None
    folder, secret = opened
    fd: int | None = folder
    try:
        for name in (kind, sub):
            parent, fd = fd, None
            assert parent is not None  # the folder opened last (or the user's)
            try:
                fd = _open_folder(parent, name, create)
            finally:
                os.close(parent)
        assert fd is not None  # the entry's folder, opened last
        return fd, secret
    except _Unusable as error:
        _refuse(os.path.join(user_dir(), kind), str(error))
        return None
    except OSError:
        return None


def _mac(secret: bytes, kind: str, key: str):
    """The HMAC-SHA256 of an entry's payload, bound to its kind and key."""
    return hmac.new(secret, f"prefeval-cache|{FORMAT_VERSION}|{kind}|{key}|".encode(), "sha256")


def _tag(secret: bytes, kind: str, key: str, payload: bytes) -> bytes:
    mac = _mac(secret, kind, key)
    mac.update(payload)
    return mac.digest()


def _verify(handle, secret: bytes, kind: str, key: str) -> bool:
    """Whether the entry open in ``handle`` carries the tag of its payload under this
    key; the handle is left at the payload (read in pieces: no copy of a large cube)."""
    head = handle.read(len(MAGIC) + _TAG)
    if len(head) != len(MAGIC) + _TAG or head[: len(MAGIC)] != MAGIC:
        return False
    mac = _mac(secret, kind, key)
    while piece := handle.read(1 << 20):
        mac.update(piece)
    handle.seek(len(head))
    return hmac.compare_digest(head[len(MAGIC) :], mac.digest())


def _discard(folder_fd: int, name: str) -> None:
    """Remove an entry of ours (never another user's)."""
    try:
        if os.stat(name, dir_fd=folder_fd, follow_symlinks=False).st_uid == _uid():
            os.unlink(name, dir_fd=folder_fd)
    except OSError:
        pass


def get(kind: str, key: str) -> dict[str, np.ndarray] | None:
    """The arrays stored under ``key``, or None: absent, unreadable (left alone),
    or failing its check (corrupt, altered, planted: removed when it is ours)."""
    kind, sub, name = _entry(kind, key)
    opened = _entry_folder(kind, sub, create=False)
    if opened is None:
        return None
    folder, secret = opened
    try:
        try:
            fd = os.open(name, os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
        except OSError:  # absent, not ours to read, a link: a miss
            return None
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO or a device: a miss
            os.close(fd)
            return None
        with os.fdopen(fd, "rb") as handle:
            try:
                sound = _verify(handle, secret, kind, key)
            except OSError:
                return None
            try:
                if not sound:
                    raise ValueError("check failed")
                with np.load(handle, allow_pickle=False) as arrays:
                    result = {n: arrays[n] for n in arrays.files}
            except Exception:  # noqa: BLE001 - corrupt, altered or planted: a miss
                _discard(folder, name)
                return None
        try:
            os.utime(name, dir_fd=folder, follow_symlinks=False)  # recently used
        except (OSError, NotImplementedError):
            pass
        return result
    finally:
        os.close(folder)


def invalid(kind: str, key: str) -> None:
    """Remove an entry (of ours) whose arrays the caller found inconsistent."""
    kind, sub, name = _entry(kind, key)
    opened = _entry_folder(kind, sub, create=False)
    if opened is not None:
        _discard(opened[0], name)
        os.close(opened[0])


def put(kind: str, key: str, **arrays) -> None:
    """Store ``arrays`` under ``key`` atomically, signed.  OSError (read-only home, full
    disk) is ignored: the cache is an optimisation.  The temporary file is removed on
    any failure or interruption.  Call :func:`prune` once after a batch of puts."""

    kind, sub, name = _entry(kind, key)
    try:
        opened = _entry_folder(kind, sub, create=True)
    except OSError:
        return
    if opened is None:
        return
    folder, secret = opened
    try:
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        payload = buffer.getvalue()
        try:
            if os.stat(name, dir_fd=folder, follow_symlinks=False).st_uid != _uid():
                return  # another user's file is never replaced
        except FileNotFoundError:
            pass
        entry = Replacement(folder, name, 0o600)
        assert entry.handle is not None  # open until committed or abandoned
        try:
            entry.handle.write(MAGIC + _tag(secret, kind, key, payload))
            entry.handle.write(payload)
        except BaseException:
            entry.abandon()
            raise
        entry.commit()
    except OSError:
        pass
    finally:
        os.close(folder)


def prune(limit: int | None = None) -> None:
    """Remove the least recently used entries while the user's entries exceed ``limit``
    bytes.  Only files named like entries inside the user's own folder are ever
    considered (and temporary files that killed processes left there), and no symbolic
    link is followed."""
    limit = max_bytes() if limit is None else limit
    opened = _user_folder(create=False)
    if opened is None:
        return
    mine = opened[0]
    try:
        _prune(mine, limit)
    except OSError:  # short of descriptors, say: pruned by a later command
        pass
    finally:
        os.close(mine)


_SUB = re.compile(r"^[0-9a-f]{2}$")


def _prune(mine: int, limit: int) -> None:
    """:func:`prune` in the user's folder ``mine``: entries live in ``KIND/xx/``; at
    most that folder, a KIND and an xx folder are open at once (not :func:`os.fwalk`,
    which holds two descriptors more)."""

    sweep_temporaries(mine)
    entries = []
    for kind in KINDS:
        try:
            kind_fd = _open_folder(mine, kind, create=False)
        except OSError:  # absent, or a link (refused when an entry is read or written)
            continue
        try:
            subs = os.listdir(kind_fd)
            sweep_temporaries(kind_fd, subs)
            for sub in filter(_SUB.match, subs):
                try:
                    sub_fd = _open_folder(kind_fd, sub, create=False)
                except OSError:
                    continue
                try:
                    files = os.listdir(sub_fd)
                    sweep_temporaries(sub_fd, files)
                    for name in filter(_ENTRY.match, files):
                        try:
                            info = os.stat(name, dir_fd=sub_fd, follow_symlinks=False)
                        except OSError:
                            continue
                        if stat.S_ISREG(info.st_mode) and info.st_uid == _uid():
                            entries.append((info.st_mtime, info.st_size, kind, sub, name))
                finally:
                    os.close(sub_fd)
        finally:
            os.close(kind_fd)
    total = sum(size for _, size, *_ in entries)
    for _, size, kind, folder, name in sorted(entries):
        if total <= limit:
            break
        try:
            kind_fd = _open_folder(mine, kind, create=False)
            try:
                sub_fd = _open_folder(kind_fd, folder, create=False)
            finally:
                os.close(kind_fd)
        except OSError:
            continue
        try:
            _discard(sub_fd, name)
        finally:
            os.close(sub_fd)
        total -= size
