"""In-memory qrels, runs and tables, normalized to what the readers take.

Accepted flavours:

- a path (``str`` or :class:`os.PathLike`): a TREC file, read as the command reads it;
- a DataFrame with ir-measures columns (``query_id, doc_id, score`` / ``relevance``
  ``[, iteration]``) or PyTerrier ones (``qid, docno, score`` / ``label``);
- an iterable (list, generator) of namedtuples with those fields, such as
  ``ir_measures.ScoredDoc`` / ``ir_measures.Qrel``;
- a ``{query_id: {doc_id: value}}`` dict, as pytrec_eval takes.

Several runs are a dict ``name -> run``, a list of runs, or one DataFrame with a
``run`` (or ``name``) column holding many runs.  Ids become strings exactly as the
text reader would see them: ``151`` (an integer, or an integral float such as
``151.0``) is ``"151"``; a column mixing strings and numbers, a missing or empty id,
or a fractional number is an error.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from ..core.errors import InputError

QUERY = ("query_id", "qid")
DOC = ("doc_id", "docno")
SCORE = ("score",)
GRADE = ("relevance", "label")
RUN = ("run", "name")
#: kinds of pandas.api.types.infer_dtype that are numbers
_NUMERIC = ("integer", "floating", "mixed-integer-float", "decimal")


def _column(frame: pd.DataFrame, names: tuple, what: str, where: str, required: bool = True):
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


def id_strings(values, what: str, where: str, first_row: int = 0) -> np.ndarray:
    """Ids as an object array of ``str``, as the text reader sees them (see module doc);
    rows in errors are counted from ``first_row`` (0 as pandas' positions)."""
    values = pd.Series(values, copy=False).reset_index(drop=True)
    if isinstance(values.dtype, pd.CategoricalDtype):
        codes = values.cat.codes.to_numpy()
        if (codes < 0).any():
            raise InputError(
                where, None, f"row {first_row + int(np.argmax(codes < 0))}: missing {what}"
            )
        return id_strings(values.cat.categories.to_series(), what, where, first_row)[codes]
    missing = values.isna().to_numpy()
    if missing.any():
        raise InputError(where, None, f"row {first_row + int(np.argmax(missing))}: missing {what}")
    kind = pd.api.types.infer_dtype(values, skipna=False)
    if kind in ("string", "empty"):
        out = values.to_numpy(dtype=object)
    elif kind == "integer":
        out = values.astype(str).to_numpy(dtype=object)
    elif kind in ("floating", "mixed-integer-float"):
        number = values.to_numpy(dtype=float)
        bad = (np.mod(number, 1) != 0) | (np.abs(number) >= 2.0**53)
        if bad.any():
            row = int(np.argmax(bad))
            raise InputError(
                where,
                None,
                f"row {first_row + row}: {what} {float(number[row])!r} is not an integer; "
                "give ids as strings",
            )
        out = pd.Series(number.astype(np.int64)).astype(str).to_numpy(dtype=object)
    else:
        kinds = {type(v).__name__ for v in values.head(1000)}
        raise InputError(
            where,
            None,
            f"{what} column mixes or has unusable types ({', '.join(sorted(kinds))}); "
            "give ids as strings or integers",
        )
    empty = out == ""
    if empty.any():
        raise InputError(where, None, f"row {first_row + int(np.argmax(empty))}: empty {what}")
    return out


def _numbers(values, what: str, where: str) -> np.ndarray:
    """float64 values of a numeric column (booleans and text are errors)."""
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
    return pd.DataFrame(
        {
            "query_id": id_strings(_column(frame, QUERY, "query id", where), "query id", where),
            "doc_id": id_strings(_column(frame, DOC, "document id", where), "document id", where),
            "score": _numbers(_column(frame, SCORE, "score", where), "score", where),
        }
    )


def qrels_frame(frame: pd.DataFrame, where: str = "<qrels>") -> pd.DataFrame:
    """Judgments as ``query_id, doc_id, relevance[, iteration]`` (ir-measures or
    PyTerrier columns in; ``iteration`` ``0``/``Q0`` or an integer subtopic id)."""
    out = {
        "query_id": id_strings(_column(frame, QUERY, "query id", where), "query id", where),
        "doc_id": id_strings(_column(frame, DOC, "document id", where), "document id", where),
        "relevance": _numbers(_column(frame, GRADE, "relevance", where), "relevance", where),
    }
    iteration = _column(frame, ("iteration",), "iteration", where, required=False)
    if iteration is not None:
        out["iteration"] = id_strings(iteration, "iteration", where)
    return pd.DataFrame(out)


def _records(items, value: str, where: str) -> pd.DataFrame:
    """A DataFrame of an iterable of namedtuples (ir_measures.ScoredDoc, Qrel...)."""
    items = list(items)
    if not items:
        return _nested({}, value, where)
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


def _nested(mapping: Mapping, value: str, where: str) -> pd.DataFrame:
    """A DataFrame of a pytrec_eval dict ``{query_id: {doc_id: value}}``."""
    queries, docs, values = [], [], []
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


def _is_nested(obj) -> bool:
    """A ``{query_id: {doc_id: value}}`` dict: values are dicts, of non-dicts (a dict of
    empty dicts is taken as runs by name, not as one run)."""
    if not isinstance(obj, Mapping) or not obj:
        return False
    if not all(isinstance(v, Mapping) for v in obj.values()):
        return False
    inner = next((v for v in obj.values() if v), None)
    return inner is not None and not isinstance(next(iter(inner.values())), Mapping)


def _is_records(obj) -> bool:
    """An iterable of namedtuples (a list, tuple, generator...), peeked without consuming."""
    return hasattr(obj, "_fields")


def _peek(obj):
    """(first element or None, an iterable equal to ``obj``), consuming nothing of ``obj``
    for the caller."""
    if isinstance(obj, (list, tuple)):
        return (obj[0] if obj else None), obj
    iterator = iter(obj)
    first = next(iterator, None)
    return first, (itertools.chain([first], iterator) if first is not None else [])


def qrels_input(qrels):
    """Qrels as a path (``str``) or a :class:`~prefeval.qrels.Qrels`."""
    from ..core.qrels import Qrels

    where = "<qrels>"
    if isinstance(qrels, Qrels):
        return qrels
    if isinstance(qrels, (str, os.PathLike)):
        return os.fspath(qrels)
    if isinstance(qrels, pd.DataFrame):
        return Qrels.from_frame(qrels, name="<qrels DataFrame>")
    if isinstance(qrels, Mapping):
        if not _is_nested(qrels):
            raise TypeError(f"{where}: a dict must be {{query_id: {{doc_id: relevance}}}}")
        return Qrels.from_frame(_nested(qrels, "relevance", where), name="<qrels dict>")
    if isinstance(qrels, Iterable):
        return Qrels.from_frame(_records(qrels, "relevance", where), name="<qrels records>")
    raise TypeError(
        f"qrels: expected a path, a DataFrame, a {{query_id: {{doc_id: relevance}}}} dict or "
        f"ir_measures.Qrel rows, got {type(qrels).__name__}"
    )


def _one_run(run, where: str):
    """One run as a path (``str``), a RunColumns or a ``query_id, doc_id, score`` frame;
    None when ``run`` is not one run."""
    from .text import RunColumns

    if isinstance(run, (str, os.PathLike)):
        return os.fspath(run)
    if isinstance(run, (pd.DataFrame, RunColumns)):
        return run if isinstance(run, RunColumns) else run_frame(run, where)
    if _is_nested(run) or (isinstance(run, Mapping) and not run):
        return run_frame(_nested(run, "score", where), where)
    return None


def runs_input(runs) -> dict:
    """Runs as an ordered dict name -> path, RunColumns or ``query_id, doc_id, score``
    frame.

    Names: a dict's keys; a path's :func:`~prefeval.readers.run_name`; ``run1``,
    ``run2``... by position for other in-memory runs of a list; for one DataFrame with a
    ``run`` (or ``name``) column, that column, runs taken in sorted name order (so the
    order of the rows changes nothing).  One run alone (a path, a DataFrame without a run
    column, records, a pytrec_eval dict) is a list of one.
    """
    from .text import name_runs

    if isinstance(runs, pd.DataFrame):
        column = _column(runs, RUN, "run", "<runs DataFrame>", required=False)
        if column is None:
            return dict(name_runs([run_frame(runs, "<run DataFrame>")]))
        names = id_strings(column, "run name", "<runs DataFrame>")
        frame = run_frame(runs, "<runs DataFrame>")
        groups = frame.groupby(names, sort=False).indices
        return {name: frame.iloc[groups[name]].reset_index(drop=True) for name in sorted(groups)}
    single = _one_run(runs, "<run>")
    if single is not None:
        return dict(name_runs([single]))
    if isinstance(runs, Mapping):
        items = list(runs.items())  # keys kept: name_runs refuses two that print alike
    elif isinstance(runs, Iterable):
        first, runs = _peek(runs)
        if _is_records(first):
            return dict(
                name_runs([run_frame(_records(runs, "score", "<run records>"), "<run records>")])
            )
        items = [(None, run) for run in runs]
    else:
        raise TypeError(
            f"runs: expected paths, DataFrames, ir_measures.ScoredDoc rows or "
            f"{{query_id: {{doc_id: score}}}} dicts (a list, or a dict name -> run), "
            f"got {type(runs).__name__}"
        )
    if not items:
        raise ValueError("runs: no run given")
    out = []
    for i, (name, run) in enumerate(items):
        where = f"<run {name if name is not None else i + 1}>"
        source = _one_run(run, where)
        if source is None:
            if isinstance(run, Iterable) and not isinstance(run, Mapping):
                source = run_frame(_records(run, "score", where), where)
            else:
                raise TypeError(
                    f"{where}: expected a path, a DataFrame, ir_measures.ScoredDoc rows or a "
                    f"{{query_id: {{doc_id: score}}}} dict, got {type(run).__name__}"
                )
        out.append((name, source))
    if isinstance(runs, Mapping):
        return dict(name_runs(dict(out)))  # out's keys: runs' keys, distinct
    return dict(name_runs([source for _, source in out]))


def table_input(table, required: list[str], what: str):
    """(frame, name for messages) of a ``--prefs``/``--metrics`` table given as a path or a
    DataFrame (as returned by :func:`prefeval.api.compare` / :func:`prefeval.api.metrics`)."""
    from .tables import read_table

    if isinstance(table, (str, os.PathLike)):
        path = os.fspath(table)
        return read_table(path, required), path
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"{what}: expected a path or a DataFrame, got {type(table).__name__}")
    where = f"<{what} DataFrame>"
    missing = [c for c in required if c not in table.columns]
    if missing:
        raise InputError(where, None, f"missing columns {missing} (need {', '.join(required)})")
    out = {
        c: id_strings(table[c], c, where) if c != "value" else _numbers(table[c], c, where)
        for c in required
    }
    missing = np.isnan(out["value"])
    if missing.any():
        raise InputError(where, None, f"row {int(np.argmax(missing))}: missing value")
    return pd.DataFrame(out), where
