"""prefeval.core.positions: trec_eval's order (score descending, ties by docno
descending) and a run reduced to the ranks of its relevant documents, by hand and
against a plain sort."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from prefeval.core.positions import (
    UNRETRIEVED,
    RunPositions,
    join_positions,
    position_matrix,
    reduce_rows,
    trec_order,
)
from prefeval.core.qrels import Qrels

rows = st.lists(
    st.tuples(st.integers(0, 3), st.sampled_from([0.0, 0.5, 1.0, 2.0]), st.text("abc", max_size=3)),
    max_size=40,
    unique_by=lambda r: (r[0], r[2]),
)


@settings(max_examples=200, deadline=None)
@given(rows)
def test_trec_order_is_query_then_score_then_docno_descending(found):
    """Whatever the rows' order: by query index, score descending, docno descending
    (byte-wise, as trec_eval compares with strcmp)."""
    q = np.array([r[0] for r in found], dtype=np.int64)
    score = np.array([r[1] for r in found])
    docno = pa.array([r[2] for r in found], pa.string())
    order = trec_order(q, score, docno)
    got = [found[i] for i in order]
    expected = sorted(found, key=lambda r: (r[0], -r[1], [-b for b in r[2].encode()] + [1]))
    assert got == expected


def relevant_of(rows):
    judged = Qrels(*(list(c) for c in zip(*[(q, 0, d, g) for q, d, g in rows])))
    return judged.relevant()


def test_a_run_reduced_by_hand():
    """Query 1 (relevant d2, d3): the run ranks d1 (3.0), then d3 and d2 tied at 2.0 — d3
    first, docno descending — so d3 at 2, d2 at 3.  Query 2 (relevant x): not retrieved,
    3 documents retrieved for query 1, none for query 2."""
    relevant = relevant_of([("1", "d2", 1), ("1", "d3", 1), ("2", "x", 1)])
    q = np.array([0, 0, 0], dtype=np.int64)
    score = np.array([2.0, 3.0, 2.0])
    docno = pa.array(["d2", "d1", "d3"])
    code_of = {d: i for i, d in enumerate(relevant.docnos().to_pylist())}
    code = np.array([code_of.get(d, -1) for d in docno.to_pylist()], dtype=np.int64)
    found = reduce_rows("run", q, score, docno, code, relevant)
    assert found.doc.tolist() == [0, 1] and found.rank.tolist() == [3, 2]
    assert found.retrieved.tolist() == [3, 0] and found.missing_queries == 1
    assert found.consistent(relevant)
    cut = reduce_rows("run", q, score, docno, code, relevant, max_docs=2)
    assert cut.doc.tolist() == [1] and cut.rank.tolist() == [2]
    assert cut.retrieved.tolist() == [2, 0]
    matrix = position_matrix([found, cut], relevant)
    assert matrix.tolist() == [[3, 2, UNRETRIEVED], [UNRETRIEVED, 2, UNRETRIEVED]]


def test_positions_of_parts_join_to_the_whole():
    whole = RunPositions("r", np.array([0, 2, 3]), np.array([5, 1, 2], np.int32), np.array([9, 4]))
    parts = [
        (np.array([2, 3]), np.array([1, 2], np.int32)),
        (np.array([0]), np.array([5], np.int32)),
    ]
    joined = join_positions("r", parts, np.array([9, 4]))
    assert joined.doc.tolist() == whole.doc.tolist() and joined.rank.tolist() == [5, 1, 2]
    assert parts == []  # let go once joined


def test_inconsistent_positions_are_seen():
    relevant = relevant_of([("1", "a", 1)])
    bad = RunPositions("r", np.array([1]), np.array([1], np.int32), np.array([1]))
    assert not bad.consistent(relevant)  # document 1 does not exist
