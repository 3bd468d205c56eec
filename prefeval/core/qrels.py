"""Relevance judgments: plain graded qrels and Web-track (ndeval) subtopic qrels.

:class:`Qrels` holds the judgment rows; :meth:`Qrels.relevant` derives, for one
relevance level, the :class:`RelevantSet`: per evaluated query, its relevant
documents with their general grade (maximum over subtopics) and, for subtopic
qrels, which subtopics each one is relevant to.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .arrays import from_numpy, small_strings, strings, to_numpy

if TYPE_CHECKING:
    import pandas as pd


def query_sort_key(qid: str):
    """Natural order of query ids, a total order: ASCII-digit ids first, by numeric
    value, equal values (``1``, ``01``, ``001``) by the string itself; then the other
    ids as strings.  Distinct ids never compare equal, so a sorted order never depends
    on the order (or the hash seed) the ids came in."""
    if qid.isascii() and qid.isdigit():
        digits = qid.lstrip("0")  # value order = (length, text) of the significant digits
        return (0, len(digits), digits, qid)
    return (1, 0, "", qid)


def check_level(level) -> float | None:
    """A relevance level as a float (None stays None: grade > 0); ValueError unless it is
    a finite number > 0.  Relevant means grade >= level, so a level <= 0 would make judged
    non-relevant (0) and negatively graded documents relevant; trec_eval's measures
    (pytrec_eval) take no such level either.  There is no upper bound, as the qrels
    readers take any finite grade; the ir-measures baselines, whose grades must fit a C
    int, take integer levels up to 2**31 - 1 (ValueError from them beyond)."""
    if level is None:
        return None
    try:
        value = float(level)
    except (TypeError, ValueError):
        raise ValueError(f"relevance level {level!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise ValueError(f"relevance level {level!r} must be a finite number > 0")
    return value


def is_relevant(grade: np.ndarray, level: float | None) -> np.ndarray:
    """Relevant means ``grade >= level``; with no level, ``grade > 0``."""
    grade = np.asarray(grade, dtype=float)
    return grade > 0 if level is None else grade >= level


@dataclass
class RelevantSet:
    """Relevant documents of every evaluated query at one relevance level.

    Documents are numbered globally; query ``k`` owns numbers
    ``offsets[k]:offsets[k+1]`` (its ``m`` relevant documents, sorted by docno).
    """

    level: float | None
    query_ids: list[str]
    offsets: np.ndarray
    doc_id: Any  # a pyarrow string array
    grade: np.ndarray
    dropped: list[str] = field(default_factory=list)
    # subtopic qrels only: per query a (m, T) boolean matrix and its subtopic ids
    subtopics: list[np.ndarray] | None = None
    subtopic_ids: list[np.ndarray] | None = None
    _keys: Any = None
    _gid: Any = None
    _docnos: Any = None

    @property
    def n_queries(self) -> int:
        return len(self.query_ids)

    @property
    def has_subtopics(self) -> bool:
        return self.subtopics is not None

    def sizes(self) -> np.ndarray:
        """Number of relevant documents per query."""
        return np.diff(self.offsets)

    def query_of_doc(self) -> np.ndarray:
        return np.repeat(np.arange(self.n_queries), self.sizes())

    def docnos(self):
        """pyarrow array of the distinct relevant docnos (any query), sorted."""
        self._lookup()
        return self._docnos

    def lookup(self, query: np.ndarray, docno_code: np.ndarray) -> np.ndarray:
        """Global relevant-document number of (query index, code in :meth:`docnos`)
        pairs, -1 where the document is not relevant to that query."""
        self._lookup()
        key = query.astype(np.int64) * len(self._docnos) + docno_code
        pos = np.searchsorted(self._keys, key)
        np.minimum(pos, len(self._keys) - 1, out=pos)  # in place: a block's arrays are large
        hit = self._keys[pos] == key
        del key
        hit &= docno_code >= 0
        found = self._gid[pos]
        found[~hit] = -1
        return found

    def _lookup(self) -> None:
        if self._docnos is not None:
            return
        import pyarrow as pa
        import pyarrow.compute as pc

        # codes into the sorted distinct docnos (code-point order, as Python sorts str;
        # UTF-8 byte order, which Arrow sorts by, is the same order)
        unique = pc.unique(self.doc_id)
        unique = unique.take(pc.sort_indices(unique))
        code = to_numpy(pc.index_in(self.doc_id, value_set=unique)).astype(np.int64)
        docnos = small_strings(unique.cast(pa.large_string()))
        key = self.query_of_doc().astype(np.int64) * len(unique) + code
        order = np.argsort(key, kind="stable")
        self._keys, self._gid = key[order], order.astype(np.int64)
        self._docnos = docnos

    def subset(self, keep: np.ndarray, query_ids: list[str] | None = None) -> RelevantSet:
        """The same judgments restricted to documents where ``keep`` (global mask) is true.

        Queries left with no relevant document are dropped.  ``query_ids`` may
        restrict the queries further.
        """
        keep = np.asarray(keep, dtype=bool).copy()
        wanted = None if query_ids is None else set(query_ids)
        qids, offsets, subs, sub_ids = [], [0], [], []
        for k, qid in enumerate(self.query_ids):
            lo, hi = self.offsets[k], self.offsets[k + 1]
            if wanted is not None and qid not in wanted:
                keep[lo:hi] = False
            n = int(keep[lo:hi].sum())
            if n == 0:
                continue
            qids.append(qid)
            offsets.append(offsets[-1] + n)
            if self.subtopics is not None:
                assert self.subtopic_ids is not None  # subtopic qrels hold both
                mat = self.subtopics[k][keep[lo:hi]]
                used = mat.any(axis=0)
                subs.append(mat[:, used])
                sub_ids.append(self.subtopic_ids[k][used])
        idx = np.flatnonzero(keep)
        return RelevantSet(
            level=self.level,
            query_ids=qids,
            offsets=np.asarray(offsets, dtype=np.int64),
            doc_id=self.doc_id.take(from_numpy(idx)),
            grade=self.grade[idx],
            dropped=list(self.dropped),
            subtopics=subs if self.subtopics is not None else None,
            subtopic_ids=sub_ids if self.subtopics is not None else None,
        )


def _strings(values) -> pd.Series:
    """Ids as a pandas string Series (Arrow-backed where pandas has it: a few bytes per
    id, not a Python object each), from a list, a Series or a pyarrow string array."""
    import pandas as pd

    if hasattr(values, "to_pandas"):  # pyarrow
        values = values.to_pylist() if len(values) == 0 else values.to_pandas()
    return pd.Series(values, dtype="str").reset_index(drop=True)


def distinct_ids(ids: pd.Series) -> list[str]:
    """The distinct ids of a column, as a list of str (converted at once: iterating an
    Arrow-backed column calls Python per element)."""
    return np.asarray(ids.unique(), dtype=object).tolist()


def _id_array(values):
    """Ids as a pyarrow string array, from a pyarrow string array (kept), a list or a
    pandas Series (as :func:`_strings` reads them)."""
    import pyarrow as pa

    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.Array) and pa.types.is_string(values.type):
        return values
    if isinstance(values, pa.Array) and pa.types.is_large_string(values.type):
        return values
    if isinstance(values, list) and all(isinstance(v, str) for v in values):
        return strings(values)
    series = _strings(values)
    if hasattr(series.array, "__arrow_array__"):  # Arrow-backed: its buffers, not copied
        return pa.array(series.array)
    return pa.array(series.to_numpy(dtype=object), pa.large_string())


class Qrels:
    """Judgment rows ``query_id, iteration, doc_id, relevance`` (iteration 0 = plain): the
    ids as pyarrow string arrays, the iterations and grades as numpy arrays, and
    :attr:`frame`, the same rows as a pandas DataFrame, built when first asked for."""

    def __init__(self, query_id, iteration, doc_id, relevance, name: str = "<qrels>"):
        self.name = name
        self.query_id = _id_array(query_id)
        self.iteration = np.asarray(iteration, dtype=np.int64)
        self.doc_id = _id_array(doc_id)
        self.relevance = np.asarray(relevance, dtype=float)
        self._relevant: dict = {}
        self._query_ids: list[str] | None = None

    @functools.cached_property
    def frame(self) -> pd.DataFrame:
        """The rows as a DataFrame ``query_id, iteration, doc_id, relevance`` (the ids as
        pandas strings)."""
        import pandas as pd

        return pd.DataFrame(
            {
                "query_id": _strings(self.query_id),
                "iteration": self.iteration,
                "doc_id": _strings(self.doc_id),
                "relevance": self.relevance,
            }
        )

    @classmethod
    def from_rows(cls, rows, name: str) -> Qrels:
        return cls(rows.query_id, rows.iteration, rows.doc_id, rows.relevance, name)

    @property
    def has_subtopics(self) -> bool:
        return bool((self.iteration != 0).any())

    def query_ids(self) -> list[str]:
        """The judged query ids in prefeval's query order (sorted once: a list of its own
        for each caller)."""
        if self._query_ids is None:
            import pyarrow.compute as pc

            self._query_ids = sorted(pc.unique(self.query_id).to_pylist(), key=query_sort_key)
        return list(self._query_ids)

    def judged(self) -> tuple[Any, Any, np.ndarray]:
        """One row per judged document, in the order of its first row: (query ids,
        docnos, grades), the grade the maximum over its rows (over subtopics for ndeval
        qrels)."""
        if not self.has_subtopics:  # one row per (query, document): duplicates are errors
            return self.query_id, self.doc_id, self.relevance
        import pyarrow as pa

        rows = pa.Table.from_arrays(
            [self.query_id, self.doc_id, from_numpy(self.relevance)], names=["q", "d", "g"]
        )
        # groups in the order they are first met (one thread)
        grouped = rows.group_by(["q", "d"], use_threads=False).aggregate([("g", "max")])
        return (
            grouped["q"].combine_chunks(),
            grouped["d"].combine_chunks(),
            to_numpy(grouped["g_max"]).copy(),
        )

    def general(self) -> pd.DataFrame:
        """:meth:`judged` as a DataFrame ``query_id, doc_id, relevance``."""
        import pandas as pd

        query_id, doc_id, grade = self.judged()
        return pd.DataFrame(
            {"query_id": _strings(query_id), "doc_id": _strings(doc_id), "relevance": grade}
        )

    def subtopic_frame(self) -> pd.DataFrame:
        """The subtopic rows only (``iteration`` > 0 is the subtopic id)."""
        return self.frame[self.frame["iteration"] != 0].reset_index(drop=True)

    def relevant(self, level: float | None = None) -> RelevantSet:
        """Relevant documents per query at ``level`` (cached per level); ValueError for a
        level that is not > 0 (:func:`check_level`)."""
        level = check_level(level)
        if level not in self._relevant:
            self._relevant[level] = self._build_relevant(level)
        return self._relevant[level]

    def _build_relevant(self, level: float | None) -> RelevantSet:
        import pyarrow as pa
        import pyarrow.compute as pc

        query_id, doc_id, grade = self.judged()
        keep = is_relevant(grade, level)
        mask = from_numpy(keep)
        rel_query, rel_doc, rel_grade = query_id.filter(mask), doc_id.filter(mask), grade[keep]
        all_q = self.query_ids()
        present = set(pc.unique(rel_query).to_pylist())
        query_ids = [q for q in all_q if q in present]
        dropped = [q for q in all_q if q not in present]
        known = strings(query_ids).cast(rel_query.type)
        qindex = to_numpy(pc.index_in(rel_query, value_set=known)).astype(np.int64)
        # by query, then docno in code-point order (as Python compares str; UTF-8 byte
        # order is the same order): Arrow's stable sort, which compares bytes
        by = pa.Table.from_arrays([from_numpy(qindex), rel_doc], names=["q", "d"])
        order = to_numpy(pc.sort_indices(by, [("q", "ascending"), ("d", "ascending")]))
        del by
        docs = rel_doc.take(from_numpy(order))
        grades_all = rel_grade[order]
        offsets = np.zeros(len(query_ids) + 1, dtype=np.int64)
        np.cumsum(np.bincount(qindex, minlength=len(query_ids)), out=offsets[1:])
        subtopics = subtopic_ids = None
        if self.has_subtopics:
            subtopics, subtopic_ids = [], []
            st = self.subtopic_frame()
            st = st[is_relevant(st["relevance"].to_numpy(), level)]
            st_by_q = dict(tuple(st.groupby("query_id", sort=False)))
            doc_list = docs.to_pylist()
            for k, q in enumerate(query_ids):
                qdocs = doc_list[offsets[k] : offsets[k + 1]]
                part = st_by_q.get(q)
                if part is None:
                    subtopics.append(np.zeros((len(qdocs), 0), dtype=bool))
                    subtopic_ids.append(np.zeros(0, dtype=np.int64))
                    continue
                ids = np.unique(part["iteration"].to_numpy())
                pos = {d: i for i, d in enumerate(qdocs)}
                mat = np.zeros((len(qdocs), len(ids)), dtype=bool)
                rows = part["doc_id"].map(pos).to_numpy()
                cols = np.searchsorted(ids, part["iteration"].to_numpy())
                mat[rows.astype(np.int64), cols] = True
                subtopics.append(mat)
                subtopic_ids.append(ids)
        return RelevantSet(
            level=level,
            query_ids=query_ids,
            offsets=offsets,
            doc_id=docs,
            grade=grades_all,
            dropped=dropped,
            subtopics=subtopics,
            subtopic_ids=subtopic_ids,
        )
