"""In-memory qrels, runs and tables, normalized to what the readers take.

Accepted flavours:

- a path (``str`` or :class:`os.PathLike`): a TREC file, read as the command reads it;
- a DataFrame with ir-measures columns (``query_id, doc_id, score`` / ``relevance``
  ``[, iteration]``) or PyTerrier ones (``qid, docno, score`` / ``label``);
- an iterable (list, generator) of namedtuples with those fields, such as
  ``ir_measures.ScoredDoc`` / ``ir_measures.Qrel``;
- a ``{query_id: {doc_id: value}}`` dict, as pytrec_eval takes, or an object giving
  one by ``to_dict()`` with a ``name`` (a ranx ``Qrels`` or ``Run``);
- a table exporting Arrow's C stream (a pyarrow Table, a polars DataFrame, a DuckDB
  relation...), read by :mod:`prefeval.io.arrow`.

Several runs are a dict ``name -> run``, a list of runs, or one DataFrame with a
``run`` (or ``name``) column holding many runs.  Ids become strings exactly as the
text reader would see them: ``151`` (an integer, or an integral float such as
``151.0``) is ``"151"``; a column mixing strings and numbers, a missing or empty id,
or a fractional number is an error.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from ..core.errors import InputError
from ..core.qrels import Qrels
from ..core.rows import is_pandas
from .columns import DOC, GRADE, QUERY, RUN, SCORE, id_strings

if TYPE_CHECKING:
    import pandas as pd

#: kinds of pandas.api.types.infer_dtype that are numbers
_NUMERIC = ("integer", "floating", "mixed-integer-float", "decimal")


def frame_column(frame: pd.DataFrame, names: tuple, what: str, where: str, required: bool = True):
    """The one column of ``frame`` named by one of ``names`` (None when absent and not
    ``required``); two of them is ambiguous."""
    present = [name for name in names if name in frame.columns]
    if len(present) > 1:
        raise InputError(where, None, f"both {present[0]!r} and {present[1]!r} columns; keep one")
    if not present:
        if not required:
            return None
        wanted = " or ".join(repr(n) for n in names)
        raise InputError(
            where, None, f"no {what} column ({wanted}); the columns are {list(frame.columns)}"
        )
    return frame[present[0]]


def float_values(values, what: str, where: str) -> np.ndarray:
    """float64 values of a numeric column (booleans and text are errors)."""
    import pandas as pd

    values = pd.Series(values, copy=False)
    if len(values) == 0:
        return np.zeros(0)
    if pd.api.types.is_bool_dtype(values) or not (
        pd.api.types.is_numeric_dtype(values)
        or pd.api.types.infer_dtype(values, skipna=True) in _NUMERIC
    ):
        raise InputError(where, None, f"{what} column is not numeric ({values.dtype})")
    return values.to_numpy(dtype=float, na_value=np.nan)


def run_frame(frame: pd.DataFrame, where: str = "<run>") -> pd.DataFrame:
    """A run as ``query_id, doc_id, score`` (ir-measures or PyTerrier columns in)."""
    import pandas as pd

    return pd.DataFrame(
        {
            "query_id": id_strings(
                frame_column(frame, QUERY, "query id", where), "query id", where
            ),
            "doc_id": id_strings(
                frame_column(frame, DOC, "document id", where), "document id", where
            ),
            "score": float_values(frame_column(frame, SCORE, "score", where), "score", where),
        }
    )


def frame_runs(frame: pd.DataFrame, where: str) -> list[tuple[str, pd.DataFrame]] | None:
    """The runs of a DataFrame with a ``run`` (or ``name``) column, as a many-run Parquet
    table stands for its runs: (name, ``query_id, doc_id, score`` frame) per name of that
    column, in sorted name order (so the order of the rows changes nothing); None for a
    frame without such a column (one run)."""
    column = frame_column(frame, RUN, "run", where, required=False)
    if column is None:
        return None
    names = id_strings(column, "run name", where)
    frame = run_frame(frame, where)
    groups = frame.groupby(names, sort=False).indices
    return [(name, frame.iloc[groups[name]].reset_index(drop=True)) for name in sorted(groups)]


def qrels_frame(frame: pd.DataFrame, where: str = "<qrels>") -> pd.DataFrame:
    """Judgments as ``query_id, doc_id, relevance[, iteration]`` (ir-measures or
    PyTerrier columns in; ``iteration`` ``0``/``Q0`` or an integer subtopic id)."""
    import pandas as pd

    out = {
        "query_id": id_strings(frame_column(frame, QUERY, "query id", where), "query id", where),
        "doc_id": id_strings(frame_column(frame, DOC, "document id", where), "document id", where),
        "relevance": float_values(
            frame_column(frame, GRADE, "relevance", where), "relevance", where
        ),
    }
    iteration = frame_column(frame, ("iteration",), "iteration", where, required=False)
    if iteration is not None:
        out["iteration"] = id_strings(iteration, "iteration", where)
    return pd.DataFrame(out)


def records_frame(items, value: str, where: str) -> pd.DataFrame:
    """A DataFrame of an iterable of namedtuples (ir_measures.ScoredDoc, Qrel...)."""
    import pandas as pd

    items = list(items)
    if not items:
        return nested_frame({}, value, where)
    kind = type(items[0])
    fields = getattr(items[0], "_fields", None)
    if fields is None:
        raise TypeError(
            f"{where}: expected namedtuples such as ir_measures.ScoredDoc or Qrel, "
            f"got {kind.__name__}"
        )
    other = next((x for x in items if type(x) is not kind), None)
    if other is not None:
        raise TypeError(f"{where}: mixes {kind.__name__} and {type(other).__name__} rows")
    return pd.DataFrame.from_records(items, columns=list(fields))


def nested_frame(mapping: Mapping, value: str, where: str) -> pd.DataFrame:
    """A DataFrame of a pytrec_eval dict ``{query_id: {doc_id: value}}``."""
    import pandas as pd

    queries: list[object] = []
    docs: list[object] = []
    values: list[object] = []
    for query, ranking in mapping.items():
        if not isinstance(ranking, Mapping):
            raise TypeError(
                f"{where}: expected {{query_id: {{doc_id: {value}}}}}, but query {query!r} "
                f"maps to {type(ranking).__name__}"
            )
        queries.extend(itertools.repeat(query, len(ranking)))
        docs.extend(ranking.keys())
        values.extend(ranking.values())
    return pd.DataFrame(
        {
            "query_id": pd.Series(queries, dtype=object),
            "doc_id": pd.Series(docs, dtype=object),
            value: pd.Series(values, dtype=object).infer_objects(),
        }
    )


def is_nested(obj) -> bool:
    """A ``{query_id: {doc_id: value}}`` dict: values are dicts, of non-dicts (a dict of
    empty dicts is taken as runs by name, not as one run)."""
    if not isinstance(obj, Mapping) or not obj:
        return False
    if not all(isinstance(v, Mapping) for v in obj.values()):
        return False
    inner = next((v for v in obj.values() if v), None)
    return inner is not None and not isinstance(next(iter(inner.values())), Mapping)


def is_named_dict(obj) -> bool:
    """An object that gives its ``{query_id: {doc_id: value}}`` dict by ``to_dict()`` and
    has a ``name`` (a ranx ``Qrels`` or ``Run``, found by these two, ranx not imported);
    not a dict, a pandas object, or a table of Arrow's C stream (polars' DataFrame has a
    ``to_dict`` of its own)."""
    return (
        callable(getattr(obj, "to_dict", None))
        and hasattr(obj, "name")
        and not isinstance(obj, Mapping)
        and not is_pandas(obj, "DataFrame", "Series")
        and not hasattr(obj, "__arrow_c_stream__")
    )


def named_dict(obj, value: str, where: str) -> Mapping:
    """``obj.to_dict()`` (:func:`is_named_dict`), which must be ``{query_id: {doc_id:
    value}}``."""
    mapping = obj.to_dict()
    if not isinstance(mapping, Mapping) or (mapping and not is_nested(mapping)):
        raise TypeError(
            f"{where}: {type(obj).__name__}.to_dict() must give {{query_id: {{doc_id: "
            f"{value}}}}}, got {type(mapping).__name__}"
        )
    return mapping


def is_records(obj) -> bool:
    """An iterable of namedtuples (a list, tuple, generator...), peeked without consuming."""
    return hasattr(obj, "_fields")


def peek(obj):
    """(first element or None, an iterable equal to ``obj``), consuming nothing of ``obj``
    for the caller."""
    if isinstance(obj, (list, tuple)):
        return (obj[0] if obj else None), obj
    iterator = iter(obj)
    first = next(iterator, None)
    return first, (itertools.chain([first], iterator) if first is not None else [])


def _is_int64(value) -> bool:
    """Whether ``value`` (an iteration as text) converts to a 64-bit integer."""
    try:
        np.array([value]).astype(np.int64)
    except (ValueError, OverflowError):
        return False
    return True


def qrels_from_frame(frame: pd.DataFrame, name: str = "<qrels DataFrame>") -> Qrels:
    """From ir-measures' columns ``query_id, doc_id, relevance[, iteration]`` (or
    PyTerrier's ``qid, docno, label``; ids as strings, see :mod:`prefeval.io.frames`)."""
    frame = qrels_frame(frame, name)
    if "iteration" in frame.columns:
        raw = frame["iteration"]
        iteration = np.where(raw.isin(["0", "Q0"]), "0", raw)
        try:
            iteration = iteration.astype(np.int64)
        except (ValueError, OverflowError):  # OverflowError: beyond 64 bits
            row = next(k for k, v in enumerate(iteration) if not _is_int64(v))
            raise InputError(
                name,
                None,
                f"row {row}: iteration must be 0, Q0 or an integer (a subtopic id of "
                f"64 bits), not {raw.iloc[row]!r}",
            ) from None
    else:
        iteration = np.zeros(len(frame), dtype=np.int64)
    relevance = frame["relevance"].to_numpy(dtype=float)
    if not np.isfinite(relevance).all():
        row = int(np.argmax(~np.isfinite(relevance)))
        raise InputError(name, None, f"row {row}: relevance is not a finite number")
    qrels = Qrels(frame["query_id"], iteration, frame["doc_id"], relevance, name)
    if (qrels.frame["query_id"] == "all").any():
        raise InputError(name, None, "query id 'all' is reserved for summary rows")
    dup = qrels.frame.duplicated(["query_id", "iteration", "doc_id"])
    if dup.any():
        row = int(np.flatnonzero(dup.to_numpy())[0])
        raise InputError(name, None, f"row {row}: duplicate judgment")
    return qrels
