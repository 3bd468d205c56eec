"""Qrels and runs from whatever the user gives (a path to TREC text or Parquet, a
many-run Parquet table, a DataFrame, records, a dict): the format decided by the
bytes, the runs named once (:func:`name_runs`)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

import lazy_loader

from ..core.errors import InputError
from ..core.qrels import Qrels
from . import parquet
from .columns import RunColumns, id_strings, run_from_arrays
from .frames import (
    RUN,
    frame_column,
    is_nested,
    is_records,
    nested_frame,
    peek,
    qrels_from_frame,
    records_frame,
    run_frame,
)
from .source import is_frame, one_command, read_raw, run_name, text_bytes
from .text import parse_qrels, parse_run

pd = lazy_loader.load("pandas")


def run_names(runs) -> list[str]:
    """The names :func:`name_runs` gives the run paths ``runs``, a many-run Parquet table
    standing for its runs (only its run column is read)."""

    names: list[str] = []
    for path in runs:
        if parquet.has_runs_column(path):
            names.extend(parquet.run_names(path))
        else:
            names.append(run_name(path))
    return names


def name_runs(runs) -> list[tuple[str, object]]:
    """(name, source) of every run: a mapping's keys, else a path's :func:`run_name`, a
    :class:`RunColumns`' name, ``run{i}`` for another in-memory run at position i (from 1).

    One path, DataFrame or RunColumns alone is a list of one; two runs with one name are
    an error.  A path to a Parquet table with a ``run`` (or ``name``) column stands for
    its runs (named by that column, in sorted name order), each a
    :class:`prefeval.io.parquet.TableRun` read when needed.
    """

    if isinstance(runs, (str, os.PathLike, RunColumns)) or is_frame(runs):
        runs = [runs]
    items = list(runs.items()) if isinstance(runs, dict) else [(None, s) for s in runs]
    expanded = []
    for i, (name, source) in enumerate(items):
        if isinstance(source, (str, os.PathLike)) and parquet.has_runs_column(source):
            path = os.fspath(source)
            if name is not None:
                raise InputError(
                    path,
                    None,
                    f"a table of many runs (a run column) given as the one run {name!r}; "
                    "give it in a list of runs",
                )
            expanded.extend((i, name, run) for name, run in parquet.table_names(path))
        else:
            expanded.append((i, name, source))
    out: list[tuple[str, object]] = []
    seen: dict[str, int] = {}
    keys = [key for key, _ in items]
    for i, name, source in expanded:
        key = name
        if name is None:
            if isinstance(source, RunColumns):
                name = source.name
            elif isinstance(source, (str, os.PathLike)):
                name = run_name(source)
            else:
                name = f"run{i + 1}"
        name = str(name)
        if name in seen:
            where = source if isinstance(source, (str, os.PathLike)) else f"<run {name}>"
            if isinstance(source, (RunColumns, parquet.TableRun)):
                where = source.path
            other = keys[seen[name]]
            alike = (
                f": keys {other!r} and {key!r} are one name; give runs distinct names"
                if key is not None and other is not None and other != key
                else ""
            )
            raise InputError(
                os.fspath(where),
                None,
                f"two runs are named {name!r} (inputs {seen[name] + 1} and {i + 1}){alike}",
            )
        seen[name] = i
        out.append((name, source))
    return out


def read_qrels(source, *, name: str | None = None):
    """Read qrels from a path or a pandas DataFrame into a :class:`prefeval.core.qrels.Qrels`.

    A DataFrame uses ir-measures' column names ``query_id, doc_id, relevance`` (or
    PyTerrier's ``qid, docno, label``) and, optionally, ``iteration`` (``0``/``Q0`` or an
    integer subtopic id); see :mod:`prefeval.io.frames`.
    """

    if isinstance(source, Qrels):
        return source
    if is_frame(source):
        return qrels_from_frame(source, name=name or "<qrels DataFrame>")

    path = os.fspath(source)
    with one_command():
        raw = read_raw(path)
    if parquet.is_parquet(raw):
        rows = parquet.parse_qrels(raw, path)
    else:
        rows = parse_qrels(text_bytes(raw, path), path)
    return Qrels.from_rows(rows, name=name or path)


def read_run(source, *, name: str | None = None) -> RunColumns:
    """Read one run from a path or a pandas DataFrame (``query_id, doc_id, score``, or
    PyTerrier's ``qid, docno, score``: see :mod:`prefeval.io.frames`)."""

    if isinstance(source, RunColumns):
        return source
    if isinstance(source, parquet.TableRun):
        return parquet.table_run(source.path, source.name)
    if is_frame(source):
        return _run_from_frame(source, name or "run")
    path = os.fspath(source)
    with one_command():  # called alone: a FIFO is read anew next time
        raw = read_raw(path)
    return parse_any_run(raw, path, name)


def parse_any_run(raw: bytes, path: str, name: str | None = None, known=None) -> RunColumns:
    """One run from a file's stored bytes: Parquet (by its magic bytes), else TREC text
    (plain or gzip); see :func:`parse_run`."""

    if parquet.is_parquet(raw):
        return parquet.parse_run(raw, path, name or run_name(path), known)
    return parse_run(text_bytes(raw, path), path, name, known)


def _run_from_frame(frame, name: str) -> RunColumns:
    import pyarrow as pa

    where = f"<run {name}>"
    frame = run_frame(frame, where)
    qid = pa.array(frame["query_id"].tolist(), pa.string())
    docno = pa.array(frame["doc_id"].tolist(), pa.string())
    return run_from_arrays(qid, docno, frame["score"].to_numpy(dtype=float), name, where)


def qrels_input(qrels):
    """Qrels as a path (``str``) or a :class:`~prefeval.core.qrels.Qrels`."""

    where = "<qrels>"
    if isinstance(qrels, Qrels):
        return qrels
    if isinstance(qrels, (str, os.PathLike)):
        return os.fspath(qrels)
    if isinstance(qrels, pd.DataFrame):
        return qrels_from_frame(qrels, name="<qrels DataFrame>")
    if isinstance(qrels, Mapping):
        if not is_nested(qrels):
            raise TypeError(f"{where}: a dict must be {{query_id: {{doc_id: relevance}}}}")
        return qrels_from_frame(nested_frame(qrels, "relevance", where), name="<qrels dict>")
    if isinstance(qrels, Iterable):
        return qrels_from_frame(records_frame(qrels, "relevance", where), name="<qrels records>")
    raise TypeError(
        f"qrels: expected a path, a DataFrame, a {{query_id: {{doc_id: relevance}}}} dict or "
        f"ir_measures.Qrel rows, got {type(qrels).__name__}"
    )


def _one_run(run, where: str):
    """One run as a path (``str``), a RunColumns or a ``query_id, doc_id, score`` frame;
    None when ``run`` is not one run."""

    if isinstance(run, (str, os.PathLike)):
        return os.fspath(run)
    if isinstance(run, (pd.DataFrame, RunColumns)):
        return run if isinstance(run, RunColumns) else run_frame(run, where)
    if is_nested(run) or (isinstance(run, Mapping) and not run):
        return run_frame(nested_frame(run, "score", where), where)
    return None


def runs_input(runs) -> dict:
    """Runs as an ordered dict name -> path, RunColumns or ``query_id, doc_id, score``
    frame.

    Names: a dict's keys; a path's :func:`~prefeval.io.source.run_name`; ``run1``,
    ``run2``... by position for other in-memory runs of a list; for one DataFrame with a
    ``run`` (or ``name``) column, that column, runs taken in sorted name order (so the
    order of the rows changes nothing).  One run alone (a path, a DataFrame without a run
    column, records, a pytrec_eval dict) is a list of one.
    """

    if isinstance(runs, pd.DataFrame):
        column = frame_column(runs, RUN, "run", "<runs DataFrame>", required=False)
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
        first, runs = peek(runs)
        if is_records(first):
            return dict(
                name_runs(
                    [run_frame(records_frame(runs, "score", "<run records>"), "<run records>")]
                )
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
                source = run_frame(records_frame(run, "score", where), where)
            else:
                raise TypeError(
                    f"{where}: expected a path, a DataFrame, ir_measures.ScoredDoc rows or a "
                    f"{{query_id: {{doc_id: score}}}} dict, got {type(run).__name__}"
                )
        out.append((name, source))
    if isinstance(runs, Mapping):
        return dict(name_runs(dict(out)))  # out's keys: runs' keys, distinct
    return dict(name_runs([source for _, source in out]))
