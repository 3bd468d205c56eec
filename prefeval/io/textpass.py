"""A TREC text run reduced to rank positions in one pass over its text, by a compiled
extension (``prefeval/io/_textpass.c``): no columns of strings, no dictionary of every
docno, only the documents relevant at the level looked up, in a hash table built once
per :class:`~prefeval.core.qrels.RelevantSet` and shared by every run and thread (the
pass runs without the GIL).

The pass gives exactly what :func:`prefeval.core.positions.run_positions` gives for the
columns :func:`prefeval.io.text.parse_run` reads, or nothing: it declines (None) any file
it is not certain that reader reads the same way (a line of fewer than five fields, a
NUL byte, invalid UTF-8, a score other than a plain finite decimal number, a query whose
lines are not one contiguous block, a document twice for a query, no data line at all),
and the text reader then reads it and words any error (``FILE:LINE: ...``).  Where the
extension is not built (an install without a C compiler), or ``PREFEVAL_TEXT_PASS=0``
is set, every run is read by the text reader.
"""

from __future__ import annotations

import importlib
import os
import threading
import weakref
from typing import Any

import numpy as np

from ..core.positions import RunPositions
from ..core.qrels import RelevantSet
from .source import text_bytes

_textpass: Any
try:  # the compiled module beside this one (setup.py); not built: the text reader reads
    _textpass = importlib.import_module(f"{__package__}._textpass")
except ImportError:
    _textpass = None

#: whether the extension is built (installed with a C compiler, or from a wheel)
BUILT = _textpass is not None

#: the environment variable that turns the pass off (``0``)
ENV = "PREFEVAL_TEXT_PASS"

_tables: dict[int, object] = {}
_building = threading.Lock()


def available() -> bool:
    """Whether the pass is built and not turned off (:data:`ENV`)."""
    return BUILT and os.environ.get(ENV, "").strip() != "0"


def _table(relevant: RelevantSet):
    """The extension's hash table of ``relevant``'s (query, docno) pairs, built once per
    set (dropped with it); None where the set holds a pair twice."""
    key = id(relevant)
    with _building:
        if key in _tables:
            return _tables[key]
        docnos = [str(d).encode("utf-8", "surrogatepass") for d in relevant.doc_id.to_pylist()]
        query_ids = [q.encode("utf-8", "surrogatepass") for q in relevant.query_ids]
        offsets = [int(x) for x in relevant.offsets]
        try:
            table = _textpass.Relevant(query_ids, offsets, docnos)
        except ValueError:
            table = None
        _tables[key] = table
        weakref.finalize(relevant, _tables.pop, key, None)
        return table


def text_positions(
    data: bytes, relevant: RelevantSet, max_docs: int | None, name: str = ""
) -> RunPositions | None:
    """:class:`RunPositions` of run ``name`` from its text ``data`` (decompressed),
    exactly as the text reader's columns give them; None where the pass declines the file
    or is not available (:func:`available`)."""
    if not available():
        return None
    table = _table(relevant)
    if table is None:
        return None
    cut = -1 if max_docs is None else min(int(max_docs), 1 << 62)  # -1: no cut
    found = _textpass.positions(data, table, cut)
    if found is None:
        return None
    doc, rank, retrieved = found
    return RunPositions(
        name=name,
        doc=np.frombuffer(doc, dtype=np.int64).copy(),
        rank=np.frombuffer(rank, dtype=np.int32).copy(),
        retrieved=np.frombuffer(retrieved, dtype=np.int64).copy(),
    )


def reads(run) -> bool:
    """Whether the pass reads :class:`~prefeval.io.runs.Run` ``run``: a TREC text file
    (plain or gzip) that can be read, the pass available."""
    return (
        available() and run.kind in ("text", "gzip") and run.path is not None and run.error is None
    )


def run_text_positions(run, relevant: RelevantSet, max_docs: int | None) -> RunPositions | None:
    """:func:`text_positions` of a TREC text file :class:`~prefeval.io.runs.Run` (plain or
    gzip, its columns not kept: ``keep``); None for any other run, or where the pass
    declines the file (then :meth:`Run.read` reads it)."""
    if not reads(run) or run.keep or run.kept is not None:
        return None
    return text_positions(text_bytes(run.stored(), run.path), relevant, max_docs, run.name)


def _queries(query_ids: list[str]):
    """The extension's table of the evaluated ``query_ids`` (no documents); None where an
    id is given twice."""
    encoded = [q.encode("utf-8", "surrogatepass") for q in query_ids]
    try:
        return _textpass.Relevant(encoded, [0] * (len(encoded) + 1), [])
    except ValueError:
        return None


def text_ranking(data: bytes, query_ids: list[str], max_docs: int | None):
    """Every row of the queries ``query_ids`` in TREC text ``data`` (decompressed),
    grouped by query index (ascending) and in trec order within each query (score
    descending, ties by docno descending), the first ``max_docs`` of each: (query
    indices int64, docnos as a pyarrow string array, scores float64), exactly as the
    text reader's columns give them; None where the pass declines the file or is not
    available (:func:`available`)."""
    if not available():
        return None
    queries = _queries(query_ids)
    if queries is None:
        return None
    cut = -1 if max_docs is None else min(int(max_docs), 1 << 62)  # -1: no cut
    found = _textpass.ranking(data, queries, cut)
    if found is None:
        return None
    import pyarrow as pa

    q, score, offsets, docnos = found
    n = len(q) // 8
    ends = np.frombuffer(offsets, dtype=np.int64)
    if len(docnos) < (1 << 31):  # the text reader's type: string, large only when huge
        doc_id = pa.StringArray.from_buffers(
            n, pa.py_buffer(ends.astype(np.int32)), pa.py_buffer(docnos)
        )
    else:
        doc_id = pa.LargeStringArray.from_buffers(n, pa.py_buffer(ends), pa.py_buffer(docnos))
    return (
        np.frombuffer(q, dtype=np.int64).copy(),
        doc_id,
        np.frombuffer(score, dtype=np.float64).copy(),
    )


def run_text_ranking(run, query_ids: list[str], max_docs: int | None):
    """:func:`text_ranking` of a TREC text file :class:`~prefeval.io.runs.Run` (plain or
    gzip) whose columns are not kept; None for any other run, or where the pass declines
    the file (then :meth:`Run.read` reads it)."""
    if not reads(run) or run.kept is not None:
        return None
    return text_ranking(text_bytes(run.stored(), run.path), query_ids, max_docs)
