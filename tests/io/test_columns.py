"""The duplicate check every reader shares (:func:`prefeval.io.columns.first_duplicate`)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from prefeval.io.columns import first_duplicate


def _first_duplicate_by_hand(*codes):
    seen = {}
    for row, combination in enumerate(zip(*(c.tolist() for c in codes))):
        if combination in seen:
            return row, seen[combination]
        seen[combination] = row
    return None


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(1, 300),
    columns=st.lists(st.integers(1, 2000), max_size=2),
    repeats=st.integers(0, 60),
    seed=st.integers(0, 2**32 - 1),
)
def test_first_duplicate_is_the_first_repeated_combination(n, columns, repeats, seed):
    # a docno-like column, distinct codes but ``repeats`` rows copying another row's
    # (few: only the rows with a repeated code are sorted; many: every row), beside
    # columns of 1 (every row alike) to far more codes than rows
    rng = np.random.default_rng(seed)
    docno = rng.permutation(n)
    docno[rng.integers(0, n, size=repeats)] = docno[rng.integers(0, n, size=repeats)]
    codes = [rng.integers(0, width, size=n) for width in columns] + [docno]
    assert first_duplicate(*codes) == _first_duplicate_by_hand(*codes)


def test_a_run_repeating_one_document_of_thousands():
    # a TREC run's shape: documents rarely retrieved for two queries
    query = np.repeat(np.arange(50), 100)
    doc = np.arange(5000)
    doc[4321] = doc[17]  # another query: no duplicate
    assert first_duplicate(query, doc) is None
    doc[150] = doc[120]  # query 1 twice: rows 120 and 150
    assert first_duplicate(query, doc) == (150, 120)
