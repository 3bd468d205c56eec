"""Readers for TREC qrels and run files (plain or gzip, detected by magic bytes).

Runs are parsed by a fast columnar path (pyarrow.csv) when a file is regularly
single-space separated; anything else (tabs, repeated blanks, trailing blanks,
mixed column counts) or any error goes through a careful line-by-line parser
that reports the first problem as ``FILE:LINE: message``.  Both paths give the
same columns: query id, docno and score, in file order.
"""

from __future__ import annotations

import gzip
import math
import os
import zlib
from dataclasses import dataclass

import numpy as np

from .errors import InputError

GZIP_MAGIC = b"\x1f\x8b"
#: query id of summary rows (as in trec_eval); not allowed as a real query id
RESERVED_QUERY = "all"


def read_raw(path: str | os.PathLike) -> bytes:
    """The bytes of ``path`` as stored (possibly gzip-compressed)."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as error:
        raise InputError(path, None, f"cannot read file: {error.strerror or error}") from None


def decompress(data: bytes, path: str) -> bytes:
    """``data`` gunzipped when it starts with the gzip magic bytes."""
    if data[:2] == GZIP_MAGIC:
        try:
            return gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as error:
            raise InputError(path, None, f"corrupt gzip data: {error}") from None
    return data


def read_bytes(path: str | os.PathLike) -> bytes:
    """The whole content of ``path``, gunzipped when it starts with the gzip magic bytes."""
    path = os.fspath(path)
    return decompress(read_raw(path), path)


def run_name(path: str | os.PathLike) -> str:
    """Run name from a file name: basename without a leading ``input.`` and a trailing ``.gz``.

    This is the rule of the reference implementation (pref_eval), restricted to the
    start and the end of the name.
    """
    name = os.path.basename(os.fspath(path))
    if name.startswith("input."):
        name = name[len("input.") :]
    if name.endswith(".gz"):
        name = name[: -len(".gz")]
    return name


def _lines(data: bytes):
    """(line number, decoded fields) for each non-blank line."""
    for number, raw in enumerate(data.split(b"\n"), start=1):
        fields = raw.split()
        if fields:
            yield number, fields


def _decode(token: bytes, path: str, number: int) -> str:
    try:
        return token.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(path, number, "not valid UTF-8 text") from None


def _number(token: bytes, what: str, path: str, number: int) -> float:
    try:
        value = float(token)
    except ValueError:
        value = None
    if value is None or math.isnan(value):
        text = token.decode("utf-8", "replace")
        raise InputError(path, number, f"{what} {text!r} is not a number")
    return value


# --------------------------------------------------------------------------- qrels


@dataclass(frozen=True)
class QrelsRows:
    """Judgment rows of a qrels file in file order (``iteration`` 0 = plain judgment)."""

    query_id: list
    iteration: np.ndarray
    doc_id: list
    relevance: np.ndarray


def parse_qrels(data: bytes, path: str) -> QrelsRows:
    """Parse ``qid iter docno grade`` lines; ``#`` lines and blank lines are skipped.

    ``iter`` is ``0`` or ``Q0`` for plain judgments; any other integer is a
    Web-track (ndeval) subtopic id.
    """
    fast = _fast_qrels(data)
    if fast is not None:
        return fast
    qids: list[str] = []
    iters: list[int] = []
    docs: list[str] = []
    grades: list[float] = []
    seen: dict[tuple[str, int, str], int] = {}
    for number, fields in _lines(data):
        if fields[0].startswith(b"#"):
            continue
        if len(fields) != 4:
            raise InputError(
                path, number, f"expected 4 columns (qid iter docno grade), found {len(fields)}"
            )
        qid = _decode(fields[0], path, number)
        if qid == RESERVED_QUERY:
            raise InputError(
                path, number, f"query id {qid!r} is reserved for summary rows; rename the query"
            )
        docno = _decode(fields[2], path, number)
        it = fields[1]
        if it in (b"0", b"Q0"):
            subtopic = 0
        else:
            try:
                subtopic = int(it)
            except ValueError:
                raise InputError(
                    path,
                    number,
                    f"iteration {it.decode('utf-8', 'replace')!r} is neither 0, Q0 "
                    "nor an integer subtopic id",
                ) from None
        grade = _number(fields[3], "grade", path, number)
        key = (qid, subtopic, docno)
        if key in seen:
            raise InputError(
                path,
                number,
                f"duplicate judgment of document {docno!r} for query {qid!r}"
                + (f" subtopic {subtopic}" if subtopic else "")
                + f" (first at line {seen[key]})",
            )
        seen[key] = number
        qids.append(qid)
        iters.append(subtopic)
        docs.append(docno)
        grades.append(grade)
    return QrelsRows(qids, np.asarray(iters, dtype=np.int64), docs, np.asarray(grades, float))


def _fast_qrels(data: bytes) -> QrelsRows | None:
    """Columnar parse of a regular qrels file (pandas' C parser), else None.

    Anything unusual (comment lines, wrong column counts, non-numeric grades,
    unknown iterations, duplicates) returns None so that the line-by-line parser
    reports it precisely.
    """
    import io

    import pandas as pd

    if not data.strip() or data.startswith(b"#") or b"\n#" in data:
        return None
    try:
        frame = pd.read_csv(
            io.BytesIO(data),
            sep=r"\s+",
            header=None,
            dtype=str,
            engine="c",
            names=["q", "i", "d", "g"],
            keep_default_na=False,
            na_filter=False,
            skip_blank_lines=True,
            on_bad_lines="error",
        )
    except (ValueError, pd.errors.ParserError, UnicodeDecodeError):
        return None
    if (frame == "").any().any():
        return None
    grades = pd.to_numeric(frame["g"], errors="coerce").to_numpy(dtype=float)
    if np.isnan(grades).any():
        return None
    it = frame["i"].where(frame["i"] != "Q0", "0")
    iters = pd.to_numeric(it, errors="coerce")
    if iters.isna().any() or not np.all(iters.to_numpy() == np.floor(iters.to_numpy())):
        return None
    if not it.str.fullmatch(r"[+-]?\d+").all():
        return None
    iters = iters.to_numpy().astype(np.int64)
    frame["i"] = iters
    if frame.duplicated(["q", "i", "d"]).any() or (frame["q"] == RESERVED_QUERY).any():
        return None
    return QrelsRows(frame["q"].tolist(), iters, frame["d"].tolist(), grades)


def read_qrels(source, *, name: str | None = None):
    """Read qrels from a path or a pandas DataFrame into a :class:`prefeval.qrels.Qrels`.

    A DataFrame uses ir-measures' column names ``query_id, doc_id, relevance`` and,
    optionally, ``iteration`` (``0``/``Q0`` or an integer subtopic id).
    """
    from .qrels import Qrels

    if isinstance(source, Qrels):
        return source
    if _is_frame(source):
        return Qrels.from_frame(source, name=name or "<qrels DataFrame>")
    path = os.fspath(source)
    rows = parse_qrels(read_bytes(path), path)
    return Qrels.from_rows(rows, name=name or path)


# --------------------------------------------------------------------------- runs


@dataclass
class RunColumns:
    """The three columns of a run that evaluation needs, in file order.

    ``query_id`` and ``doc_id`` are pyarrow string arrays, ``score`` a float64
    numpy array.  The rank and tag columns are not kept (trec_eval ignores ranks).
    """

    name: str
    path: str
    query_id: object
    doc_id: object
    score: np.ndarray
    _doc_hash: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.score)

    @property
    def doc_hash(self) -> np.ndarray:
        """64-bit hash of every docno (:func:`string_hashes`), computed once."""
        if self._doc_hash is None:
            self._doc_hash = string_hashes(self.doc_id)
        return self._doc_hash


# byte sequences a single-space separated file never contains
def _fast_columns(data: bytes):
    """Columns by pyarrow.csv for regular single-space files, else None.

    Irregular spacing shows up as an empty field (repeated, leading or trailing
    blanks shift or add fields) or as whitespace other than a space inside one;
    single bytes are found with memchr-fast scans, empty fields from the parsed
    columns, so no multi-byte pattern search over the whole file is needed.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

    if b"\t" in data or b"\x0b" in data or b"\x0c" in data:
        return None
    if b"\r" in data and data.count(b"\r") != data.count(b"\r\n"):
        return None  # a lone carriage return: the careful parser decides
    first_end = data.find(b"\n")
    first = data[: first_end if first_end >= 0 else len(data)].rstrip(b"\r")
    if not first or b"\t" in first or b"  " in first or first[:1] == b" " or first[-1:] == b" ":
        return None
    ncols = first.count(b" ") + 1
    if ncols not in (5, 6):
        return None
    try:
        table = pacsv.read_csv(
            pa.py_buffer(data),
            read_options=pacsv.ReadOptions(
                column_names=[f"c{i}" for i in range(ncols)], block_size=1 << 24
            ),
            parse_options=pacsv.ParseOptions(
                delimiter=" ", quote_char=False, escape_char=False, ignore_empty_lines=True
            ),
            convert_options=pacsv.ConvertOptions(
                column_types={
                    "c0": pa.string(),
                    "c1": pa.string(),
                    "c2": pa.string(),
                    "c3": pa.string(),
                    "c4": pa.float64(),
                },
                include_columns=["c0", "c1", "c2", "c3", "c4"],
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
                null_values=[],
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError):
        return None
    score = table.column("c4").to_numpy()
    if np.isnan(score).any():
        return None
    for name in ("c0", "c1", "c2", "c3"):
        column = table.column(name)
        if column.null_count or pc.min(pc.binary_length(column)).as_py() == 0:
            return None  # an empty field: irregular spacing
    qid = table.column("c0").combine_chunks()
    docno = table.column("c2").combine_chunks()
    doc_hash = string_hashes(docno)
    if _has_duplicates(qid, doc_hash):
        return None
    return qid, docno, score, doc_hash


def string_hashes(array) -> np.ndarray:
    """64-bit hash of every string of a pyarrow string array, computed from its buffers
    eight bytes at a time (no Python object per string)."""
    n = len(array)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int32)[array.offset : array.offset + n + 1]
    start = offsets[:-1].astype(np.int64)
    length = np.diff(offsets).astype(np.int64)
    data = array.buffers()[2]
    padded = np.zeros(offsets[-1] + 8, dtype=np.uint8)
    padded[: offsets[-1]] = np.frombuffer(data, dtype=np.uint8)[: offsets[-1]]
    windows = np.lib.stride_tricks.as_strided(
        padded, shape=(len(padded) - 7, 8), strides=(1, 1), writeable=False
    )
    h = np.full(n, 0xCBF29CE484222325, dtype=np.uint64) ^ length.astype(np.uint64)
    with np.errstate(over="ignore"):
        for word in range(int((length.max() + 7) // 8)):
            chunk = np.ascontiguousarray(windows[start + 8 * word]).view(np.uint64)[:, 0]
            keep = np.clip(length - 8 * word, 0, 8)
            mask = np.where(
                keep >= 8,
                np.uint64(0xFFFFFFFFFFFFFFFF),
                (np.uint64(1) << (8 * keep).astype(np.uint64)) - np.uint64(1),
            )
            h = (h ^ (chunk & mask)) * np.uint64(0x100000001B3)
            h ^= h >> np.uint64(29)
    return h


def _has_duplicates(qid, doc_hash) -> bool:
    """Whether some (query, docno) pair may occur twice (hash-based, linear time).

    A hash collision gives a false alarm only, which the careful parser then clears.
    """
    import pyarrow.compute as pc

    if len(qid) < 2:
        return False
    qcode = pc.dictionary_encode(qid).indices.to_numpy().astype(np.uint64)
    # query code (first-appearance order) in the high bits: a run grouped by query is
    # then nearly sorted already, which the stable (merge-based) sort exploits
    key = (qcode << np.uint64(40)) | (doc_hash >> np.uint64(24))
    key.sort(kind="stable")
    return bool((key[1:] == key[:-1]).any())


def _slow_columns(data: bytes, path: str):
    """Careful line-by-line parse; raises InputError at the first bad line."""
    import pyarrow as pa

    qids: list[str] = []
    docs: list[str] = []
    scores: list[float] = []
    seen: dict[tuple[str, str], int] = {}
    for number, fields in _lines(data):
        if len(fields) not in (5, 6):
            raise InputError(
                path,
                number,
                f"expected 5 or 6 columns (qid iter docno rank score [tag]), found {len(fields)}",
            )
        qid = _decode(fields[0], path, number)
        docno = _decode(fields[2], path, number)
        score = _number(fields[4], "score", path, number)
        key = (qid, docno)
        if key in seen:
            raise InputError(
                path,
                number,
                f"document {docno!r} appears twice for query {qid!r} (first at line {seen[key]})",
            )
        seen[key] = number
        qids.append(qid)
        docs.append(docno)
        scores.append(score)
    return pa.array(qids, pa.string()), pa.array(docs, pa.string()), np.asarray(scores, float)


def parse_run(data: bytes, path: str, name: str | None = None) -> RunColumns:
    """Parse run text ``qid iter docno rank score [tag]`` into :class:`RunColumns`."""
    columns = _fast_columns(data)
    if columns is None:
        columns = _slow_columns(data, path)
    return RunColumns(name or run_name(path), path, *columns)


def read_run(source, *, name: str | None = None) -> RunColumns:
    """Read one run from a path or a pandas DataFrame (``query_id, doc_id, score``)."""
    if isinstance(source, RunColumns):
        return source
    if _is_frame(source):
        return _run_from_frame(source, name or "run")
    path = os.fspath(source)
    return parse_run(read_bytes(path), path, name)


def _run_from_frame(frame, name: str) -> RunColumns:
    import pyarrow as pa

    missing = {"query_id", "doc_id", "score"} - set(frame.columns)
    if missing:
        raise InputError(f"<run {name}>", None, f"missing columns {sorted(missing)}")
    qid = pa.array(frame["query_id"].astype(str).tolist(), pa.string())
    docno = pa.array(frame["doc_id"].astype(str).tolist(), pa.string())
    try:
        score = np.asarray(frame["score"], dtype=float)
    except (TypeError, ValueError):
        raise InputError(f"<run {name}>", None, "score column is not numeric") from None
    where = f"<run {name}>"
    if np.isnan(score).any():
        row = int(np.flatnonzero(np.isnan(score))[0])
        raise InputError(where, None, f"row {row}: score is not a number")
    if _has_duplicates(qid, string_hashes(docno)):
        dup = np.flatnonzero(frame.duplicated(["query_id", "doc_id"]).to_numpy())
        if len(dup):
            raise InputError(
                where, None, f"row {int(dup[0])}: document appears twice for its query"
            )
    return RunColumns(name, where, qid, docno, score)


def _is_frame(obj) -> bool:
    return type(obj).__name__ == "DataFrame" and hasattr(obj, "columns")
