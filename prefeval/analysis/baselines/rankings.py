"""A run as the baselines read it: each evaluated query's rows in trec order, cut at
``-M`` (:class:`Ranking`), in the input formats of the ir-measures providers, and the
corpus of documents the runs retrieved (the native metrics' corpus sizes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...core.positions import trec_order
from ...io.columns import RunColumns
from ...io.textpass import run_text_ranking

# --------------------------------------------------------------------------- runs


@dataclass
class Ranking:
    """One run restricted to the evaluated queries, cut at max_docs: rows grouped by
    query index (ascending, whatever the file's order of queries), in trec order within
    each query."""

    q: np.ndarray  # index into the evaluated query list, ascending
    doc_id: Any  # pyarrow string array
    score: np.ndarray
    bounds: np.ndarray  # rows of query k: bounds[k]:bounds[k+1]


def ranking_of(columns: RunColumns, qvals, max_docs: int | None) -> Ranking:
    import pyarrow as pa
    import pyarrow.compute as pc

    nq = len(qvals)
    if qvals.type != columns.query_id.type:  # large_string columns of huge runs
        qvals = qvals.cast(columns.query_id.type)
    qidx = np.asarray(pc.index_in(columns.query_id, value_set=qvals).fill_null(-1), np.int64)
    keep = np.flatnonzero(qidx >= 0)
    if len(keep) < len(qidx):
        q, score = qidx[keep], columns.score[keep]
        docno = pc.take(columns.doc_id, pa.array(keep))
    else:
        q, score, docno = qidx, columns.score, columns.doc_id
    order = trec_order(q, score, docno)
    # Rows must end up grouped by query *index*: bounds and the max_docs cut below slice
    # per query.  A file grouped by query and ranked within each block can come back in
    # the file's order of query blocks; a stable sort by query keeps the trec order
    # within each query (a no-op check when the blocks are already in query order).
    qs = q[order]
    if len(qs) > 1 and bool(np.any(qs[1:] < qs[:-1])):
        by_query = np.argsort(qs, kind="stable")
        order, qs = order[by_query], qs[by_query]
    if len(order) and not np.array_equal(order, np.arange(len(order))):
        q, score = qs, score[order]
        docno = pc.take(docno, pa.array(order))
    counts = np.bincount(q, minlength=nq)
    if max_docs is not None and len(q) and counts.max() > max_docs:
        starts = np.zeros(nq, dtype=np.int64)
        np.cumsum(counts[:-1], out=starts[1:])
        rank = np.arange(len(q), dtype=np.int64) - starts[q] + 1
        inside = np.flatnonzero(rank <= max_docs)
        q, score = q[inside], score[inside]
        docno = pc.take(docno, pa.array(inside))
        counts = np.minimum(counts, max_docs)
    bounds = np.zeros(nq + 1, dtype=np.int64)
    np.cumsum(counts, out=bounds[1:])
    return Ranking(q, docno, score, bounds)


def pass_ranking(run, qlist: list[str], max_docs: int | None) -> Ranking | None:
    """:func:`ranking_of` of a TREC text file read in one pass
    (:func:`prefeval.io.textpass.run_text_ranking`), or None where the pass declines it."""
    found = run_text_ranking(run, qlist, max_docs)
    if found is None:
        return None
    q, doc_id, score = found
    bounds = np.zeros(len(qlist) + 1, dtype=np.int64)
    np.cumsum(np.bincount(q, minlength=len(qlist)), out=bounds[1:])
    return Ranking(q, doc_id, score, bounds)


def run_input(ranking: Ranking, query_ids: list[str], intent_aware: bool):
    """The run in the ir-measures input format that its provider consumes fastest.

    trec_eval (pytrec_eval) takes a dict of dicts as is; ndeval (pyndeval) iterates over
    ScoredDoc tuples, which a lazy ``map`` builds most cheaply.  Both are ir-measures'
    documented run formats, hold exactly the rows of a DataFrame ``query_id, doc_id,
    score`` and are several times cheaper than ir-measures' row-by-row DataFrame
    conversion.  Documents stay in trec order within each query.
    """
    docs = ranking.doc_id.to_numpy(zero_copy_only=False).tolist()
    scores = ranking.score.tolist()
    if intent_aware:
        from ir_measures import ScoredDoc

        qids = np.asarray(query_ids, dtype=object)[ranking.q].tolist()
        return map(ScoredDoc, qids, docs, scores)
    b = ranking.bounds
    return {
        query_ids[k]: dict(zip(docs[b[k] : b[k + 1]], scores[b[k] : b[k + 1]]))
        for k in np.flatnonzero(np.diff(b)).tolist()
    }


class Corpus:
    """Distinct (query, document) pairs seen so far: per-query corpus sizes n.

    Documents get integer codes from one growing dictionary; a pair is the int64
    ``query << 32 | code``.  Rows are buffered and merged a few million at a time, so
    the dictionary lookup and the deduplication run a handful of times, not once per run.
    """

    BATCH = 1 << 21

    def __init__(self, n_queries: int):
        import pyarrow as pa

        self.n_queries = n_queries
        self.docs = pa.array([], pa.string())
        self.keys = np.zeros(0, dtype=np.int64)
        self.pending: list = []
        self.pending_rows = 0

    def add(self, q: np.ndarray, docno) -> None:
        if len(q):
            self.pending.append((np.asarray(q, dtype=np.int64), docno))
            self.pending_rows += len(q)
            if self.pending_rows >= self.BATCH:
                self._flush()

    def _flush(self) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        if not self.pending:
            return
        q = np.concatenate([part[0] for part in self.pending])
        docno = pa.concat_arrays(_one_string_type([part[1] for part in self.pending]))
        self.pending, self.pending_rows = [], 0
        encoded = pc.dictionary_encode(docno)
        values, self.docs = _one_string_type([encoded.dictionary, self.docs])
        code = np.asarray(pc.index_in(values, value_set=self.docs).fill_null(-1), np.int64)
        new = np.flatnonzero(code < 0)
        if len(new):
            code[new] = len(self.docs) + np.arange(len(new))
            self.docs = pa.concat_arrays([self.docs, pc.take(values, pa.array(new))])
        keys = np.unique(q << 32 | code[np.asarray(encoded.indices, dtype=np.int64)])
        self.keys = np.union1d(self.keys, keys)

    def sizes(self) -> np.ndarray:
        self._flush()
        return np.bincount(self.keys >> 32, minlength=self.n_queries)


def _one_string_type(arrays: list) -> list:
    """pyarrow string arrays of one type: all ``large_string`` when some are (the reader
    keeps a huge run's columns large), so that they concatenate and compare."""
    import pyarrow as pa

    if all(a.type == arrays[0].type for a in arrays):
        return arrays
    return [a.cast(pa.large_string()) for a in arrays]
