"""prefeval.core.qrels: judgments, relevance levels and the relevant documents of each
query, on a small qrels worked by hand."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from prefeval.core.qrels import Qrels, check_level, is_relevant, query_sort_key

# query 10 judges three documents, query 2 two, query "01" only non-relevant ones
ROWS = [
    ("10", "d3", 2), ("10", "d1", 1), ("10", "d20", 0), ("10", "d2", 3),
    ("2", "x", 1), ("2", "b", 2),
    ("01", "z", 0),
]  # fmt: skip


def qrels(rows=ROWS) -> Qrels:
    return Qrels([q for q, _, _ in rows], [0] * len(rows), [d for _, d, _ in rows],
                 [g for *_, g in rows])  # fmt: skip


def test_query_order_is_natural_and_total():
    ids = ["10", "2", "01", "1", "b", "a", "001", "Q3"]
    assert sorted(ids, key=query_sort_key) == ["001", "01", "1", "2", "10", "Q3", "a", "b"]


@given(st.lists(st.text(min_size=1, max_size=4), unique=True), st.randoms())
def test_query_order_does_not_depend_on_the_input_order(ids, rng):
    shuffled = list(ids)
    rng.shuffle(shuffled)
    assert sorted(ids, key=query_sort_key) == sorted(shuffled, key=query_sort_key)


def test_levels():
    assert check_level(None) is None and check_level(2) == 2.0
    for bad in (0, -1, float("inf"), float("nan"), "x"):
        with pytest.raises(ValueError):
            check_level(bad)
    grades = np.array([-1, 0, 1, 2, 3])
    assert is_relevant(grades, None).tolist() == [False, False, True, True, True]
    assert is_relevant(grades, 2).tolist() == [False, False, False, True, True]


def test_relevant_documents_by_hand():
    """Queries in natural order, each one's relevant documents sorted by docno and
    numbered globally; a query with none relevant at the level is dropped."""
    judged = qrels()
    assert judged.query_ids() == ["01", "2", "10"]
    relevant = judged.relevant()
    assert relevant.query_ids == ["2", "10"] and relevant.dropped == ["01"]
    assert relevant.offsets.tolist() == [0, 2, 5]
    assert relevant.doc_id.to_pylist() == ["b", "x", "d1", "d2", "d3"]
    assert relevant.grade.tolist() == [2.0, 1.0, 1.0, 3.0, 2.0]
    assert relevant.sizes().tolist() == [2, 3]
    assert relevant.query_of_doc().tolist() == [0, 0, 1, 1, 1]
    at2 = judged.relevant(2)
    assert at2.query_ids == ["2", "10"] and at2.doc_id.to_pylist() == ["b", "d2", "d3"]
    assert judged.relevant(3).query_ids == ["10"]
    assert judged.relevant(2) is at2  # built once per level


def test_lookup_of_query_and_docno():
    relevant = qrels().relevant()
    docnos = relevant.docnos().to_pylist()
    assert docnos == sorted(set(docnos)) == ["b", "d1", "d2", "d3", "x"]
    code = {d: i for i, d in enumerate(docnos)}
    query = np.array([0, 0, 1, 1, 0])
    found = relevant.lookup(query, np.array([code[d] for d in ["x", "d1", "d1", "d3", "b"]]))
    assert found.tolist() == [1, -1, 2, 4, 0]  # d1 is not relevant to query 2


def test_the_rows_order_changes_nothing():
    rows = list(ROWS)
    random.Random(3).shuffle(rows)
    a, b = qrels().relevant(), qrels(rows).relevant()
    assert a.query_ids == b.query_ids and a.doc_id.to_pylist() == b.doc_id.to_pylist()
    assert a.offsets.tolist() == b.offsets.tolist() and a.grade.tolist() == b.grade.tolist()


def test_subtopics():
    """ndeval qrels (iteration = subtopic): a document is relevant at its best grade, and
    each query's documents x subtopics matrix marks where it is relevant."""
    rows = [("1", 1, "a", 1), ("1", 2, "a", 0), ("1", 2, "b", 1), ("1", 3, "c", 0)]
    judged = Qrels(*(list(c) for c in zip(*rows)))
    assert judged.has_subtopics
    relevant = judged.relevant()
    assert relevant.doc_id.to_pylist() == ["a", "b"]
    assert relevant.subtopic_ids[0].tolist() == [1, 2]
    assert relevant.subtopics[0].tolist() == [[True, False], [False, True]]
