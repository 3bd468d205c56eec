"""A many-run Parquet table read on several threads gives what one thread gives: the
same positions, the same first error."""

from __future__ import annotations

import threading

import numpy as np
import pandas as pd
import pytest
from test_parquet import QRELS, RUNS, _blocks_reversed, all_runs, shuffled, write

import prefeval
from prefeval.core.errors import InputError
from prefeval.io import parquet
from prefeval.io.runs import read_qrels
from prefeval.io.source import StoredFile, stored


def relevant():
    return read_qrels(QRELS).relevant(None)


def outcome(path, jobs, max_docs=None):
    """The positions (as plain values) or the error message of ``table_positions``."""
    try:
        found = parquet.table_positions(path, relevant(), max_docs, jobs=jobs)
    except InputError as error:
        return str(error)
    return {
        name: (p.doc.tolist(), p.rank.tolist(), p.retrieved.tolist()) for name, p in found.items()
    }


def flawed(frame, row, column, value):
    frame = frame.copy()
    frame[column] = frame[column].astype(object)
    frame.loc[row, column] = value
    return frame


FRAMES = {
    "run by run": lambda f: f,
    "blocks reversed": _blocks_reversed,
    "rows shuffled": shuffled,
    "duplicate row 900": lambda f: pd.concat([f.iloc[:900], f.iloc[899:]], ignore_index=True),
    "duplicate row 900, a missing score at row 2000": lambda f: flawed(
        pd.concat([f.iloc[:900], f.iloc[899:]], ignore_index=True), 1999, "score", None
    ),
    "an empty docno at row 3000, a missing score at row 2500": lambda f: flawed(
        flawed(f, 2999, "doc_id", ""), 2499, "score", None
    ),
    "a block split at row 4000, a duplicate after it": lambda f: pd.concat(
        [f.iloc[1:4000], f.iloc[:1], f.iloc[4000:4500], f.iloc[4499:]], ignore_index=True
    ),
}


@pytest.mark.parametrize("jobs", [2, 3])
@pytest.mark.parametrize("batch", [64, 1000])
@pytest.mark.parametrize("layout", FRAMES)
def test_threads_read_what_one_thread_reads(layout, batch, jobs, monkeypatch, tmp_path):
    monkeypatch.setattr(parquet, "BATCH_ROWS", batch)
    path = write(FRAMES[layout](all_runs()), tmp_path / "t.parquet", row_group_size=50)
    one = outcome(path, 1, max_docs=7)
    assert outcome(path, jobs, max_docs=7) == one
    if layout == "run by run":
        assert isinstance(one, dict) and len(one) == 6
    if "duplicate row 900" in layout:
        assert "row 901: document" in one
    if "empty docno" in layout:
        assert "row 2500: missing score" in one


def test_jobs_read_on_several_threads(monkeypatch, tmp_path):
    """With jobs > 1 the batches are checked on other threads than the caller's; with
    jobs = 1 on the caller's only."""
    monkeypatch.setattr(parquet, "BATCH_ROWS", 200)
    path = write(all_runs(), tmp_path / "t.parquet", row_group_size=50)
    seen = {}
    checked = parquet.ids

    def ids(*a, **kw):
        seen.setdefault(seen["jobs"], set()).add(threading.get_ident())
        return checked(*a, **kw)

    monkeypatch.setattr(parquet, "ids", ids)
    for jobs in (1, 2):
        seen["jobs"] = jobs
        parquet.table_positions(path, relevant(), jobs=jobs)
    assert seen[1] == {threading.get_ident()}
    assert threading.get_ident() not in seen[2] and len(seen[2]) >= 1
    assert np.all([isinstance(t, int) for t in seen[2]])


def test_compare_jobs_on_a_table(monkeypatch, tmp_path):
    """``jobs=`` reaches the table's reading: every N gives the figures of -j 1 (and of
    the text runs)."""
    monkeypatch.setattr(parquet, "BATCH_ROWS", 128)
    path = write(all_runs(), tmp_path / "t.parquet", row_group_size=40)
    kw = dict(per_query=True, summary=True, notify=None)
    one = prefeval.compare(QRELS, path, jobs=1, **kw)
    assert one.equals(prefeval.compare(QRELS, RUNS, jobs=1, **kw))
    calls = []
    positions = parquet.table_positions
    monkeypatch.setattr(
        parquet, "table_positions", lambda *a, **k: calls.append(a[4:]) or positions(*a, **k)
    )
    assert prefeval.compare(QRELS, path, jobs=2, **kw).equals(one)
    assert calls == [(2,)]


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_stored_table_is_read_as_it_is_used(jobs, monkeypatch, tmp_path):
    """A many-run table is read from its stored file batch by batch, on every thread,
    its bytes held by no map of the process (a mapped table's pages would stay resident
    till the end of its reading); the positions are those
    read from the path."""
    monkeypatch.setattr(parquet, "BATCH_ROWS", 200)
    frame = all_runs()
    path = write(frame, tmp_path / "t.parquet", row_group_size=50)
    data = stored(path)
    assert isinstance(data, StoredFile)
    found = parquet.table_positions(path, relevant(), 7, data=data, jobs=jobs)
    assert {
        n: (p.doc.tolist(), p.rank.tolist(), p.retrieved.tolist()) for n, p in found.items()
    } == (outcome(path, 1, max_docs=7))
