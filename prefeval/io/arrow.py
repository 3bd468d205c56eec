"""Qrels and runs from tables in memory that export Arrow's C stream
(``__arrow_c_stream__``, the Arrow PyCapsule interface): a pyarrow Table, RecordBatch
or RecordBatchReader, a polars DataFrame, a DuckDB relation...

The object is read once, whole, into a pyarrow Table (``pyarrow.table``: no copy for a
pyarrow Table, none or little for a polars DataFrame; a RecordBatchReader is consumed,
a DuckDB relation's query run; polars' string views need pyarrow >= 16); nothing of
its library is imported here.  Its columns
are found by the names a Parquet file's are (ir-measures' ``query_id, doc_id, score`` /
``relevance[, iteration]`` or PyTerrier's ``qid, docno, score`` / ``label``; a ``run``
(or ``name``) column makes a table of many runs) and read by the Parquet reader's rules
(:mod:`prefeval.io.parquet`): ids are strings as the text reader sees them, scores and
grades float64.  Rows in messages are counted from 0, as the table's positions (those of
a run of a many-run table among that run's rows, as a many-run DataFrame's).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

from ..core.errors import InputError
from ..core.qrels import Qrels
from ..core.rows import is_pandas
from . import parquet
from .columns import DOC, QUERY, RUN, SCORE, RunColumns, run_from_arrays

#: what a run table's columns are, for the message of one missing
RUN_COLUMNS = "a run has columns query_id, doc_id, score (or qid, docno, score)"


def is_arrow(obj) -> bool:
    """Whether ``obj`` is a table read through Arrow's C stream: it has
    ``__arrow_c_stream__`` and is not a pandas DataFrame (pandas >= 2.2 exports one too;
    a DataFrame is read as such, :mod:`prefeval.io.frames`)."""
    return hasattr(obj, "__arrow_c_stream__") and not is_pandas(obj, "DataFrame")


def what(obj) -> str:
    """How messages name a table of ``obj``'s kind: its type's name (``Table``,
    ``DataFrame``, ``DuckDBPyRelation``...)."""
    return type(obj).__name__


#: the streams read so far that give their rows once (pyarrow RecordBatchReaders): read
#: again they would be an empty table, an empty run
_READ_ONCE: weakref.WeakSet = weakref.WeakSet()


def arrow_table(obj, where: str):
    """``obj`` (:func:`is_arrow`) as a pyarrow Table; an :class:`InputError` citing
    ``where`` when its stream cannot be read (whatever the exporting library raises: a
    DuckDB relation of DuckDB before 1.2 gives its rows once; pyarrow before 16 reads no
    string views, which polars exports)."""
    import pyarrow as pa

    one_shot = isinstance(obj, pa.RecordBatchReader)
    if one_shot and obj in _READ_ONCE:
        raise InputError(
            where,
            None,
            f"this {what(obj)} was read already: it gives its rows once (give a pyarrow "
            "Table to use the same rows again)",
        )
    try:
        table = pa.table(obj)
    except MemoryError:
        raise
    except Exception as error:  # the exporting library's own errors too
        message = " ".join(str(error).split())
        raise InputError(
            where, None, f"not a table Arrow can read ({message}; pyarrow {pa.__version__})"
        ) from None
    if one_shot:
        _READ_ONCE.add(obj)
    return table


def _column(table, name: str):
    """Column ``name`` of ``table``, a string or binary view (polars' strings) as its large
    type, a dictionary of them as one of that type (Arrow's kernels and pyarrow before 16
    take those)."""
    import pyarrow as pa

    column = table.column(name)
    kind = column.type
    value = kind.value_type if pa.types.is_dictionary(kind) else kind
    wide = _wide(value)
    if wide is None:
        return column
    if pa.types.is_dictionary(kind):
        chunks = [
            pa.DictionaryArray.from_arrays(chunk.indices, chunk.dictionary.cast(wide))
            for chunk in column.chunks
        ]
        return pa.chunked_array(chunks, pa.dictionary(kind.index_type, wide))
    return column.cast(wide)


def _wide(kind):
    """The large type a view type is read as (None for another type)."""
    import pyarrow as pa

    if str(kind) == "string_view":
        return pa.large_string()
    if str(kind) == "binary_view":
        return pa.large_binary()
    return None


def _names(table) -> list[str]:
    return list(table.schema.names)


def read_qrels(obj, name: str | None = None) -> Qrels:
    """Judgments of a table (:func:`is_arrow`) with columns ``query_id, doc_id,
    relevance[, iteration]`` (or ``qid, docno, label[, iteration]``), checked as the
    Parquet reader checks a file's (:func:`prefeval.io.parquet.table_qrels`)."""
    where = name or f"<qrels {what(obj)}>"
    table = arrow_table(obj, where)
    columns = parquet.qrels_columns(_names(table), where)
    table = _selected(table, columns)
    rows = parquet.table_qrels(table, columns, where, first_row=0)
    return Qrels.from_rows(rows, name=where)


def _selected(table, columns):
    """``table`` with only ``columns`` (None among them: absent), each as
    :func:`_column` reads it."""
    import pyarrow as pa

    kept = [c for c in columns if c is not None]
    return pa.table({c: _column(table, c) for c in kept})


@dataclass(eq=False)
class ArrowRun:
    """One run of a table held in memory, read when it is used (:meth:`read`): the table
    of its ``query``, ``doc`` and ``score`` columns, and for a run of a many-run table the
    checked run names of its rows (``labels``) and its own (``label``).  ``rows``: the
    run's rows (what :func:`prefeval.io.runs.rows_estimate` counts)."""

    table: Any
    rows: int
    labels: Any = None
    label: str | None = None

    def __len__(self) -> int:
        return self.rows

    def read(self, name: str) -> RunColumns:
        """The run's columns, named ``name``; its problems are :class:`InputError`\\ s
        citing ``<run NAME>`` and the row among the run's rows (from 0)."""
        import pyarrow.compute as pc

        where = f"<run {name}>"
        table = self.table
        if self.labels is not None:
            table = table.filter(pc.equal(self.labels, self.label))
        query, doc, score = table.column_names
        qid = parquet.ids(table.column(query), "query id", where, name=query, offset=-1)
        docno = parquet.ids(table.column(doc), "document id", where, name=doc, offset=-1)
        values = parquet.numbers(table.column(score), "score", where, name=score, offset=-1)
        return run_from_arrays(qid, docno, values, name, where)


def run_columns(names: list[str], where: str) -> list[str]:
    """The query, document and score columns of a run table with columns ``names``."""
    return [
        parquet.need_column(names, QUERY, where, RUN_COLUMNS),
        parquet.need_column(names, DOC, where, RUN_COLUMNS),
        parquet.need_column(names, SCORE, where, RUN_COLUMNS),
    ]


def table_runs(obj, where: str) -> tuple[ArrowRun | None, list[tuple[str, ArrowRun]] | None]:
    """(the one run, None) of a table (:func:`is_arrow`) without a ``run`` (or ``name``)
    column, or (None, [(name, run), ...]) of one with such a column, its runs in sorted
    name order (as a many-run Parquet table's); the columns are found and the run names
    checked here, each run's rows when it is read (:meth:`ArrowRun.read`)."""
    import pyarrow.compute as pc

    table = arrow_table(obj, where)
    names = _names(table)
    column = parquet.find_column(names, RUN, where)
    kept = _selected(table, run_columns(names, where))
    if column is None:
        return ArrowRun(kept, kept.num_rows), None
    labels = parquet.ids(_column(table, column), "run name", where, name=column, offset=-1)
    del table
    counts = pc.value_counts(labels)
    rows = dict(zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist()))
    return None, [
        (label, ArrowRun(kept, int(rows[label]), labels, label)) for label in sorted(rows)
    ]


def read_run(obj, name: str) -> RunColumns:
    """One run of a table (:func:`is_arrow`) ``query_id, doc_id, score`` (or ``qid, docno,
    score``), named ``name``; a table with a run column is an error."""
    one, many = table_runs(obj, f"<run {name}>")
    if many is not None:
        raise InputError(
            f"<run {name}>",
            None,
            "a table of many runs (a run column), not one run; give it as runs",
        )
    assert one is not None  # table_runs gives the one run or the many
    return one.read(name)
