"""From run columns to rank positions of relevant documents.

A run is reduced, as soon as it is read, to the ranks of the judged-relevant
documents it retrieved and the number of documents it retrieved per query
(:class:`RunPositions`); whole runs are never kept.  Documents are ordered as
trec_eval orders them: score descending, ties broken by docno descending (plain
string order); ``max_docs`` keeps each ranking's top K after that sort.

:func:`position_matrix` stacks the runs into one integer matrix, runs x relevant
documents, where a relevant document a run did not retrieve gets
:data:`UNRETRIEVED`: pessimistic imputation (rpp-sigir2022 section 3, lexirecall
section 2.2) places it below everything retrieved, and two runs that both miss
their i-th relevant document tie at recall level i.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .arrays import found_codes, from_numpy, strings, to_numpy
from .limits import MAX_RANK
from .qrels import RelevantSet

#: Imputed position of an unretrieved relevant document: below any real rank (the
#: largest int32, ``np.iinfo(np.int32).max``)
UNRETRIEVED = MAX_RANK


@dataclass
class RunPositions:
    """Ranks of the relevant documents one run retrieved, at one relevance level.

    ``doc`` are global relevant-document numbers of the :class:`RelevantSet`,
    ``rank`` their 1-based ranks; ``retrieved[k]`` is how many documents the run
    returned for query ``k`` (after ``max_docs``).
    """

    name: str
    doc: np.ndarray
    rank: np.ndarray
    retrieved: np.ndarray

    def consistent(self, relevant: RelevantSet) -> bool:
        """Whether the arrays fit ``relevant`` (a check on data read back from a cache)."""
        n_docs = int(relevant.offsets[-1])
        return (
            self.doc.ndim == self.rank.ndim == self.retrieved.ndim == 1
            and len(self.doc) == len(self.rank)
            and len(self.retrieved) == relevant.n_queries
            and (len(self.doc) == 0 or (0 <= self.doc.min() and self.doc.max() < n_docs))
            and (len(self.rank) == 0 or self.rank.min() >= 1)
        )

    @property
    def missing_queries(self) -> int:
        """Evaluated queries for which the run returned nothing."""
        return int((self.retrieved == 0).sum())


def missing_notice(run: str, missing: int, evaluated: int) -> str:
    """The notice of a run with no results for ``missing`` of the ``evaluated`` queries,
    which are evaluated as an empty ranking (as ``trec_eval -c``): ``compare``'s and
    ``metrics``'."""
    return (
        f"run {run}: no results for {missing} of {evaluated} evaluated queries; evaluated "
        "as retrieving nothing"
    )


def trec_order(q: np.ndarray, score: np.ndarray, docno) -> np.ndarray:
    """Permutation sorting rows by query index (ascending, whatever the file's order of
    query blocks), then score descending, then docno descending (trec_eval's order)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(q)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    identity = False
    brk = q[1:] != q[:-1]
    in_order = bool(np.all(brk | (score[1:] <= score[:-1])))
    if in_order:
        # grouped by query? (each query one contiguous block)
        n_blocks = int(brk.sum()) + 1
        in_order = n_blocks == int(np.count_nonzero(np.bincount(q)))
    if in_order:
        # already ranked within blocks: put the blocks in query order
        starts = np.flatnonzero(np.concatenate([[True], brk]))
        block_q = q[starts]
        if np.all(block_q[1:] > block_q[:-1]):
            order = np.arange(n, dtype=np.int64)
            identity = True
        else:
            lengths = np.diff(np.append(starts, n))
            by_q = np.argsort(block_q, kind="stable")
            first = np.repeat(starts[by_q], lengths[by_q])
            within = np.arange(n) - np.repeat(
                np.cumsum(lengths[by_q]) - lengths[by_q], lengths[by_q]
            )
            order = (first + within).astype(np.int64)
    else:
        order = np.lexsort((-score, q))
    qs, ss = (q, score) if identity else (q[order], score[order])
    tie = (ss[1:] == ss[:-1]) & (qs[1:] == qs[:-1])
    if tie.any():
        # slots that belong to a run of equal scores, grouped; reorder each group by docno desc
        member = np.zeros(n, dtype=bool)
        member[1:] |= tie
        member[:-1] |= tie
        slots = np.flatnonzero(member)
        start = np.ones(len(slots), dtype=bool)
        start[1:] = ~tie[slots[1:] - 1]
        group = np.cumsum(start)
        rows = order[slots]
        table = pa.Table.from_arrays(
            [from_numpy(group), pc.take(docno, from_numpy(rows))], names=["g", "d"]
        )
        perm = pc.sort_indices(table, sort_keys=[("g", "ascending"), ("d", "descending")])
        order[slots] = rows[to_numpy(perm)]
    return order


def set_like(values, like):
    """``values`` (a pyarrow string array) as the string type of ``like``."""
    return values if values.type == like.type else values.cast(like.type)


def run_positions(columns, relevant: RelevantSet, max_docs: int | None = None) -> RunPositions:
    """Reduce one run (:class:`prefeval.io.columns.RunColumns`) to :class:`RunPositions`.

    Rows are grouped by query index (never by their order in the file), ranked in trec
    order within each query, and matched to the relevant documents of that query.
    """
    import pyarrow.compute as pc

    qvals = strings(relevant.query_ids)
    # evaluated-query index of every distinct query id of the run, then of every row
    query_code, query_values = columns.query_codes()
    value_q = pc.index_in(query_values, value_set=set_like(qvals, query_values))
    qidx = found_codes(value_q)[query_code]
    known = getattr(columns, "known", None)
    if known is not None and known[0] is relevant.docnos():
        row_code = known[1]  # located in the reader's hash pass
    else:
        # relevant-docno code of every distinct docno of the run, then of every row
        doc_code, doc_values = columns.doc_codes()
        value_set = set_like(relevant.docnos(), doc_values)
        value_code = pc.index_in(doc_values, value_set=value_set)
        row_code = found_codes(value_code)[doc_code]
    keep = np.flatnonzero(qidx >= 0)
    if len(keep) < len(qidx):
        q = qidx[keep]
        score = columns.score[keep]
        docno = pc.take(columns.doc_id, from_numpy(keep))
        code = row_code[keep]
    else:
        q, score, docno = qidx, columns.score, columns.doc_id
        code = row_code
    return reduce_rows(columns.name, q, score, docno, code, relevant, max_docs)


def reduce_rows(
    name: str, q, score, docno, code, relevant: RelevantSet, max_docs: int | None = None
) -> RunPositions:
    """:class:`RunPositions` of one run's rows of evaluated queries: ``q`` their query
    indices, ``score``, ``docno`` (pyarrow strings) and ``code`` their relevant-docno
    codes (-1: not a relevant docno).  Rows of a query must all be given at once; a
    query without rows retrieved nothing."""
    nq = relevant.n_queries
    order = trec_order(q, score, docno)
    counts = np.bincount(q, minlength=nq)
    # `order` holds the queries as contiguous blocks in query order: query k's block
    # starts at the number of rows of the queries before it
    block_start = np.zeros(nq, dtype=np.int64)
    np.cumsum(counts[:-1], out=block_start[1:])
    # ranks of the rows with a relevant docno only (a run's other rows need none)
    where = np.flatnonzero((code >= 0)[order])  # their places in trec order
    rows = order[where]
    rank = where - block_start[q[rows]] + 1
    # judged-relevant rows: (query, relevant-docno code) lookup
    found = relevant.lookup(q[rows], code[rows])
    hit = found >= 0
    doc, rel_rank = found[hit], rank[hit]
    retrieved = counts
    if max_docs is not None:
        inside = rel_rank <= max_docs
        doc, rel_rank = doc[inside], rel_rank[inside]
        retrieved = np.minimum(counts, max_docs)
    # a canonical order (by relevant document), whatever the file's line order
    by_doc = np.argsort(doc, kind="stable")
    return RunPositions(
        name=name,
        doc=doc[by_doc].astype(np.int64),
        rank=rel_rank[by_doc].astype(np.int32),
        retrieved=retrieved.astype(np.int64),
    )


def join_positions(name: str, parts: list[tuple], retrieved) -> RunPositions:
    """One run's positions from the (doc, rank) arrays of the positions of disjoint sets
    of its queries (``parts``, emptied: their arrays let go once joined) and its
    documents retrieved per query (``retrieved``, summed by the caller): the documents
    in their canonical order (by relevant document), as :func:`reduce_rows` gives them
    for the whole run (parts already in that order are joined as they are)."""
    doc = np.concatenate([d for d, _ in parts]) if parts else np.zeros(0, np.int64)
    rank = np.concatenate([r for _, r in parts]) if parts else np.zeros(0, np.int32)
    parts.clear()
    if np.any(doc[1:] < doc[:-1]):
        by_doc = np.argsort(doc, kind="stable")
        doc, rank = doc[by_doc], rank[by_doc]
    return RunPositions(name, doc, rank, retrieved)


def position_matrix(runs: list[RunPositions], relevant: RelevantSet) -> np.ndarray:
    """Runs x relevant documents matrix of ranks, :data:`UNRETRIEVED` where not retrieved."""
    total = int(relevant.offsets[-1])
    matrix = np.full((len(runs), total), UNRETRIEVED, dtype=np.int32)
    for i, run in enumerate(runs):
        matrix[i, run.doc] = run.rank
    return matrix
