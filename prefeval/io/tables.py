"""Reading back the tables prefeval writes: per-query preference tables
(``compare -q``) and per-query metric tables (``metrics``), in tsv, csv or jsonl.

A preference table must hold the complete grid: for every measure, a row for every
pair of the runs it names and every query it names (rows for both orders of one
pair are one row too many).  The one exception is a subtopic measure (``strpp``,
``stdcgrpp``, ``stinvrpp``): the engine gives it no value on a query without a
subtopic-relevant document, so it may leave out whole queries, but not some pairs
of a query.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..core import limits, ties
from ..core.cube import SUMMARY_QUERY, PreferenceCube
from ..core.errors import InputError
from ..core.qrels import query_sort_key
from ..core.rows import is_pandas
from ..measures import parse_measure
from . import parquet
from .columns import id_strings
from .frames import float_values
from .runs import alike, named_alike
from .source import BOM, is_parquet, read_raw, text_bytes

if TYPE_CHECKING:
    import pandas as pd

PREF_COLUMNS = ["measure", "run_a", "run_b", "query_id", "value"]
METRIC_COLUMNS = ["measure", "run", "query_id", "value"]

_NON_SPACE = re.compile(rb"\S")
_LINE_END = re.compile(rb"[\r\n]")
NO_METRIC_ROWS = "no per-query rows (summary rows only: write the table with metrics -q)"


def read_table(path: str, required: list[str]) -> pd.DataFrame:
    """A tsv/csv/jsonl table (format sniffed from its first line), or a Parquet table
    (by its magic bytes, :func:`prefeval.io.parquet.read_table`); text columns as str.

    A leading UTF-8 byte-order mark is skipped; ``\\n``, ``\\r\\n`` and ``\\r`` each end a
    line.  tsv fields are taken verbatim (the tsv writer does not quote, so a ``"`` is
    an ordinary character); csv fields may be quoted (``"a,b"``, ``""`` for a quote), as
    the csv writer quotes them.
    """
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.json as pajson

    raw = read_raw(path)
    if is_parquet(raw):
        return parquet.read_table(raw, path, required)
    data = text_bytes(raw, path)
    start = len(BOM) if data.startswith(BOM) else 0
    buffer = pa.py_buffer(data).slice(start)  # no copy of a large table
    first = _NON_SPACE.search(data, start)
    text_types = {c: pa.string() for c in required if c != "value"}
    try:
        if first is not None and first.group() == b"{":
            schema = pa.schema(
                [(c, pa.string() if c != "value" else pa.float64()) for c in required]
            )
            table = pajson.read_json(
                buffer,
                parse_options=pajson.ParseOptions(
                    explicit_schema=schema, unexpected_field_behavior="ignore"
                ),
            )
        else:
            # the header line: up to the first line end, \n, \r\n or \r (as Arrow reads them)
            end = _LINE_END.search(data, start)
            tsv = b"\t" in data[start : len(data) if end is None else end.start()]
            table = pacsv.read_csv(
                buffer,
                read_options=pacsv.ReadOptions(use_threads=limits.arrow_threads()),
                parse_options=pacsv.ParseOptions(
                    delimiter="\t" if tsv else ",", quote_char=False if tsv else '"'
                ),
                convert_options=pacsv.ConvertOptions(
                    column_types={**text_types, "value": pa.float64()}
                ),
            )
    except (pa.ArrowInvalid, pa.ArrowTypeError) as error:
        raise InputError(path, None, f"cannot parse table: {error}") from None
    missing = [c for c in required if c not in table.column_names]
    if missing:
        raise InputError(path, 1, f"missing columns {missing} (need {', '.join(required)})")
    frame = table.select(required).to_pandas()
    if frame[required].isna().any().any():
        row = int(np.flatnonzero(frame[required].isna().any(axis=1).to_numpy())[0])
        raise InputError(path, None, f"row {row + 1}: missing value")
    return frame


def is_subtopic_measure(name: str) -> bool:
    """Whether ``name`` is a subtopic measure (no value on a query without subtopic
    judgments); names prefeval does not know are not."""

    try:
        return parse_measure(str(name)).needs_subtopics
    except ValueError:
        return False


def cube_from_table(frame: pd.DataFrame, path: str = "<table>", measures=None):
    """Rebuild a PreferenceCube from per-query rows (summary rows are ignored).

    The whole table is checked (see the module docstring), then ``measures`` are
    kept.  Runs and measures come in the order of their first row, queries in
    :func:`~prefeval.core.qrels.query_sort_key` order: every query any row names, so a
    subtopic measure is NaN on the queries it leaves out.  Row numbers in errors
    count the rows of ``frame`` from 1 (the data rows of a file, header not counted).
    """

    frame, rows = _per_query_rows(frame, path)
    codes = _TableCodes.of(frame)
    _check_names(codes.runs, [frame["run_a"], frame["run_b"]], rows, path)
    raw = frame["value"].to_numpy(dtype=float)
    _check_preferences(codes, raw, rows, path)
    flat = _cells(codes, rows, path)
    _check_complete(codes, flat, path)
    values = np.full(codes.shape, np.nan)
    values.reshape(-1)[flat] = np.where(codes.a < codes.b, 1.0, -1.0) * raw
    measure_names = codes.measure_names
    if measures:
        wanted = list(dict.fromkeys(str(name) for name in measures))
        unknown = [name for name in wanted if name not in measure_names]
        if unknown:
            raise InputError(path, None, f"no rows for measure(s) {unknown}")
        keep = [k for k, name in enumerate(measure_names) if name in wanted]
        measure_names = [measure_names[k] for k in keep]
        values = values[keep]
    pairs = np.stack([codes.ia, codes.ja], 1)
    return PreferenceCube(measure_names, codes.runs, codes.query_ids, pairs, values)


def _check_names(runs: list, columns, rows, path: str) -> None:
    """InputError for two runs of ``runs`` that are one name written two ways
    (:func:`prefeval.io.runs.alike`, the rule of every run name), citing the first row
    of ``columns`` (rows of the table numbered ``rows``, from 0) that names each."""
    same = alike(runs)
    if same is None:
        return
    a, b = (runs[k] for k in same)

    def first(name) -> int:
        named = np.zeros(len(rows), dtype=bool)
        for column in columns:
            named |= (column == name).to_numpy()
        return int(rows[np.argmax(named)]) + 1

    where = sorted({first(a), first(b)})
    rows_shown = f"row {where[0]}" if len(where) == 1 else f"rows {where[0]} and {where[1]}"
    raise InputError(
        path, None, f"two runs are {named_alike(a, b)} ({rows_shown}); give runs distinct names"
    )


def _per_query_rows(frame: pd.DataFrame, path: str):
    """(the per-query rows of ``frame``, their row numbers from 0 in ``frame``);
    InputError when there are none or one lacks a key."""
    frame = frame.reset_index(drop=True)
    frame = frame[frame["query_id"] != SUMMARY_QUERY]
    if frame.empty:
        raise InputError(path, None, "no per-query rows (write the table with compare -q)")
    rows = frame.index.to_numpy()
    for column in ("measure", "run_a", "run_b", "query_id"):
        if frame[column].isna().any():
            row = rows[np.flatnonzero(frame[column].isna().to_numpy())[0]] + 1
            raise InputError(path, None, f"row {row}: missing value")
    return frame, rows


@dataclass
class _TableCodes:
    """The rows of a preference table as codes: measure ``m``, runs ``a`` and ``b``,
    query ``q`` into ``measure_names``, ``runs`` and ``query_ids``, and the run pairs
    (``ia[p]``, ``ja[p]``) of the cube with ``pair_index`` (runs x runs -> p)."""

    m: np.ndarray
    a: np.ndarray
    b: np.ndarray
    q: np.ndarray
    measure_names: list
    runs: list
    query_ids: list
    ia: np.ndarray
    ja: np.ndarray
    pair_index: np.ndarray

    @classmethod
    def of(cls, frame: pd.DataFrame) -> _TableCodes:
        """The codes of ``frame``'s rows: runs in the order they appear reading row by
        row, run_a before run_b, measures in order of first row, queries sorted."""
        import pandas as pd

        # codes by factorizing each column once (fast on millions of rows)
        m, measure_names = _first_seen(frame["measure"])
        n_rows = len(frame)
        both, runs = _first_seen(pd.concat([frame["run_a"], frame["run_b"]], ignore_index=True))
        a, b = both[:n_rows], both[n_rows:]
        first = np.full(len(runs), 2 * n_rows, dtype=np.int64)
        for codes, shift in ((a, 0), (b, 1)):
            seen, where = np.unique(codes, return_index=True)
            first[seen] = np.minimum(first[seen], 2 * where + shift)
        a, b, runs = _reorder(a, b, runs, np.argsort(first, kind="stable"))
        q, query_ids = _first_seen(frame["query_id"])
        order = sorted(range(len(query_ids)), key=lambda i: query_sort_key(query_ids[i]))
        q, _, query_ids = _reorder(q, q, query_ids, np.asarray(order, dtype=np.int64))
        n = len(runs)
        ia, ja = np.triu_indices(n, 1)
        pair_index = np.full((n, n), -1, dtype=np.int64)
        pair_index[ia, ja] = np.arange(len(ia))
        pair_index[ja, ia] = np.arange(len(ia))
        return cls(m, a, b, q, measure_names, runs, query_ids, ia, ja, pair_index)

    @property
    def shape(self) -> tuple[int, int, int]:
        """The cube's shape: measures x run pairs x queries."""
        return len(self.measure_names), len(self.ia), len(self.query_ids)

    def cell(self, index) -> tuple[int, str]:
        """(measure code, "measure M, runs A and B, query Q") of the cube's flat
        ``index``."""
        k, pp, qq = np.unravel_index(index, self.shape)
        runs = f"runs {self.runs[self.ia[pp]]} and {self.runs[self.ja[pp]]}"
        return k, f"measure {self.measure_names[k]}, {runs}, query {self.query_ids[qq]}"


def _check_preferences(codes: _TableCodes, raw: np.ndarray, rows, path: str) -> None:
    """InputError for the first row comparing a run with itself, without a value or
    with a value outside [-1, 1]."""
    a, b = codes.a, codes.b
    if np.any(a == b):
        row = rows[np.flatnonzero(a == b)[0]] + 1
        raise InputError(path, None, f"row {row}: a row compares a run with itself")
    if np.isnan(raw).any():
        raise InputError(path, None, f"row {rows[np.flatnonzero(np.isnan(raw))[0]] + 1}: no value")
    # every preference of the papers lies in [-1, 1] (a float sum may pass 1 by rounding)
    outside = ~(np.abs(raw) <= 1.0 + ties.TOLERANCE)
    if outside.any():
        k = int(np.flatnonzero(outside)[0])
        raise InputError(
            path,
            None,
            f"row {rows[k] + 1}: value {float(raw[k])!r} is not a preference (a preference "
            "lies in [-1, 1])",
        )


def _cells(codes: _TableCodes, rows, path: str) -> np.ndarray:
    """The flat index into the cube of each row; InputError for a cell two rows give."""
    import pandas as pd

    p = codes.pair_index[codes.a, codes.b]
    shape = codes.shape
    flat = (codes.m * shape[1] + p) * shape[2] + codes.q
    repeated = pd.Series(flat).duplicated().to_numpy()
    if repeated.any():
        second = int(np.flatnonzero(repeated)[0])
        earlier = int(np.flatnonzero(flat == flat[second])[0])
        _, cell = codes.cell(flat[second])
        note = (
            " (a pair in both orders counts twice)" if codes.a[earlier] != codes.a[second] else ""
        )
        raise InputError(
            path,
            None,
            f"{cell} appear more than once: rows {rows[earlier] + 1} and {rows[second] + 1}{note}",
        )
    return flat


def _check_complete(codes: _TableCodes, flat: np.ndarray, path: str) -> None:
    """InputError for the first cell (measure, run pair, query) without a row, except
    the queries a subtopic measure leaves out whole."""
    filled = np.zeros(codes.shape, dtype=bool)
    filled.reshape(-1)[flat] = True
    subtopic = np.array([is_subtopic_measure(name) for name in codes.measure_names])
    # a query a subtopic measure has no row for is left out; any other gap is missing
    needed = ~subtopic[:, None] | filled.any(axis=1)  # measures x queries
    missing = needed[:, None, :] & ~filled
    if missing.any():
        k, cell = codes.cell(int(np.argmax(missing)))
        count = int(missing.sum())
        rule = (
            "a subtopic measure may leave out a whole query, not some pairs of it"
            if subtopic[k]
            else "the table must hold every measure x run pair x query it names"
        )
        raise InputError(
            path,
            None,
            f"incomplete table: no row for {cell} ({count} missing in all; {rule})",
        )


def _first_seen(column: pd.Series) -> tuple[np.ndarray, list]:
    """(codes, distinct values in order of first appearance) of a column."""
    import pandas as pd

    codes, uniques = pd.factorize(column, sort=False)
    return codes.astype(np.int64), list(uniques)


def _reorder(a: np.ndarray, b: np.ndarray, values: list, order: np.ndarray):
    """Codes ``a``, ``b`` into ``values`` renumbered for ``values`` taken in ``order``."""
    renumber = np.empty(len(order), dtype=np.int64)
    renumber[order] = np.arange(len(order))
    return renumber[a], renumber[b], [values[i] for i in order]


#: the largest magnitude of a metric value: sums over queries of values, of differences
#: and of their squares stay finite (4e200 a square, 1.8e308 the largest float)
MAX_METRIC_VALUE = 1e100


def metrics_from_table(
    frame: pd.DataFrame, runs: list[str], query_ids: list[str], path: str = "<table>", measures=None
) -> dict[str, np.ndarray]:
    """measure -> (queries x runs) matrix aligned on ``runs`` and ``query_ids``.

    Summary rows (query_id ``all``) are ignored; a table of summary rows only is an
    error.  One row per (measure, run, query): a second one is an error, whichever value it
    has; a value must be finite (an infinity is an error), and at most MAX_METRIC_VALUE in
    magnitude (a sum or mean over queries must not overflow to one).  Row numbers in
    errors count the rows of ``frame`` from 1."""
    import pandas as pd

    frame = frame.reset_index(drop=True)
    frame = frame[frame["query_id"] != "all"]
    if frame.empty:
        raise InputError(path, None, NO_METRIC_ROWS)
    # an infinity ties with every number (prefeval.core.ties): it would rank first with any run;
    # so would a sum or mean over queries that overflows to one: magnitudes are bounded so
    # that the statistics' sums of (squared) differences stay finite
    values = frame["value"].to_numpy(dtype=float)
    bad = np.isinf(values) | (np.abs(values) > MAX_METRIC_VALUE)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        value = float(values[k])
        what = (
            "is not a metric value (a metric value is a finite number)"
            if np.isinf(value)
            else f"is too large for a metric value (|value| <= {MAX_METRIC_VALUE:g}, so that "
            "sums over queries cannot overflow)"
        )
        raise InputError(path, None, f"row {int(frame.index[k]) + 1}: value {value!r} {what}")
    _check_names(list(pd.unique(frame["run"])), [frame["run"]], frame.index.to_numpy(), path)
    repeated = frame.duplicated(["measure", "run", "query_id"]).to_numpy()
    if repeated.any():
        second = frame.iloc[int(np.flatnonzero(repeated)[0])]
        same = (
            (frame["measure"] == second["measure"])
            & (frame["run"] == second["run"])
            & (frame["query_id"] == second["query_id"])
        )
        first = int(frame.index[same.to_numpy()][0])
        raise InputError(
            path,
            None,
            f"metric {second['measure']}, run {second['run']}, query {second['query_id']} "
            f"appears more than once: rows {first + 1} and {int(second.name) + 1}",
        )
    names = list(dict.fromkeys(frame["measure"]))
    if measures:
        unknown = [m for m in measures if m not in names]
        if unknown:
            raise InputError(path, None, f"no rows for metric(s) {unknown}")
        names = [n for n in names if n in set(measures)]
    out = {}
    for name in names:
        part = frame[frame["measure"] == name]
        table = part.pivot(index="query_id", columns="run", values="value")
        missing_runs = [r for r in runs if r not in table.columns]
        missing_q = [q for q in query_ids if q not in table.index]
        if missing_runs or missing_q:
            what = f"runs {missing_runs}" if missing_runs else f"queries {missing_q[:5]}"
            raise InputError(path, None, f"metric {name} has no values for {what}")
        # one memory layout whatever the order of ``runs`` (pandas gives one or the
        # other): numpy sums a column of either layout in another order, to other bits
        matrix = np.ascontiguousarray(table.loc[query_ids, runs].to_numpy(dtype=float))
        if np.isnan(matrix).any():
            raise InputError(path, None, f"metric {name} has missing (run, query) values")
        out[name] = matrix
    return out


def table_input(table, required: list[str], what: str):
    """(frame, name for messages) of a ``--prefs``/``--metrics`` table given as a path or a
    DataFrame (as returned by :func:`prefeval.api.compare` / :func:`prefeval.api.metrics`)."""
    if isinstance(table, (str, os.PathLike)):
        path = os.fspath(table)
        return read_table(path, required), path
    if not is_pandas(table, "DataFrame"):
        raise TypeError(f"{what}: expected a path or a DataFrame, got {type(table).__name__}")
    where = f"<{what} DataFrame>"
    missing = [c for c in required if c not in table.columns]
    if missing:
        raise InputError(where, None, f"missing columns {missing} (need {', '.join(required)})")
    out = {
        c: id_strings(table[c], c, where) if c != "value" else float_values(table[c], c, where)
        for c in required
    }
    undefined = np.isnan(out["value"])
    if undefined.any():
        raise InputError(where, None, f"row {int(np.argmax(undefined))}: missing value")
    import pandas as pd

    return pd.DataFrame(out), where
