"""Checks and encodings shared by the readers of every format (TREC text, Parquet,
DataFrames): Arrow dictionary codes, duplicate rows, judgment rows, the columns of a
run, ids as strings, and the first error of a vectorized check."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.arrays import scalar, strings, to_numpy
from ..core.errors import InputError

#: the names a column may have in a table or DataFrame (ir-measures', then PyTerrier's)
QUERY = ("query_id", "qid")
DOC = ("doc_id", "docno")
SCORE = ("score",)
GRADE = ("relevance", "label")
ITERATION = ("iteration",)
RUN = ("run", "name")

#: query id of summary rows (as in trec_eval); not allowed as a real query id
RESERVED_QUERY = "all"


class FirstError:
    """Problems found by vectorized checks, each its first offending line; the one on
    the earliest line is reported, as a line-by-line reader would."""

    unit = "line"

    def __init__(self, path: str):
        self.path = path
        self.found: list[tuple[int, str]] = []

    def add(self, line: int, message: str) -> None:
        self.found.append((int(line), message))

    def check(self) -> None:
        if self.found:
            raise self.error(*min(self.found, key=lambda item: item[0]))

    def error(self, line: int, message: str) -> InputError:
        return InputError(self.path, line, message)


def dictionary_codes_with(column, known) -> tuple[np.ndarray, object, np.ndarray | None]:
    """:func:`dictionary_codes` of ``column`` in one hash pass with ``known`` (distinct
    strings, e.g. the relevant docnos) encoded first: also returns each row's index in
    ``known`` (-1 when absent), so matching a run against the judgments needs no
    second pass over its docnos."""
    import pyarrow as pa

    if known is None:
        code, values = dictionary_codes(column)
        return code, values, None
    known = known if known.type == column.type else known.cast(column.type)
    code, values = dictionary_codes(pa.concat_arrays([known, column]))
    code = code[len(known) :]
    return code, values, np.where(code < len(known), code, -1)


def dictionary_codes(column) -> tuple[np.ndarray, object]:
    """(int64 code of every string, the distinct strings) by Arrow's hash table."""
    import pyarrow.compute as pc

    encoded = pc.dictionary_encode(column)
    return to_numpy(encoded.indices).astype(np.int64), encoded.dictionary


def first_duplicate(*codes: np.ndarray) -> tuple[int, int] | None:
    """(row, earlier row) of the first row whose combination of non-negative integer
    ``codes`` (one array per column) appeared on an earlier row, or None.

    Only rows whose code in the most varied column occurs more than once can repeat a
    combination: where they are few (a TREC run rarely retrieves a document for two
    queries: 3% of the rows of the robust shape's runs), only they are sorted, the same
    answer in a tenth of the time."""
    n = len(codes[0])
    if n < 2:
        return None
    widths = [int(code.max()) + 1 for code in codes]
    if max(widths) <= n:  # a count per code: less memory than the sort's keys
        widest = codes[int(np.argmax(widths))]
        repeated = (np.bincount(widest) > 1)[widest]
        if np.count_nonzero(repeated) < n // 2:
            rows = np.flatnonzero(repeated)
            if len(rows) == 0:
                return None
            found = _first_duplicate([code[rows] for code in codes], widths)
            return None if found is None else (int(rows[found[0]]), int(rows[found[1]]))
        del repeated
    return _first_duplicate(codes, widths)


def _first_duplicate(codes, widths: list[int]) -> tuple[int, int] | None:
    """:func:`first_duplicate` by sorting every row's combination of codes, packed by
    ``widths`` (each above its column's codes)."""
    n = len(codes[0])
    if math.prod(widths) < (1 << 62):
        key = np.zeros(n, dtype=np.int64)
        for code, width in zip(codes, widths):
            key = key * width + code
    else:  # too many distinct values to pack into one integer: rank the tuples instead
        _, key = np.unique(np.stack(codes, axis=1), axis=0, return_inverse=True)
        key = key.reshape(-1)
    ranked = np.sort(key)
    if not (ranked[1:] == ranked[:-1]).any():
        return None
    order = np.argsort(key, kind="stable")  # only on the error path: which rows
    ranked = key[order]
    same = np.flatnonzero(ranked[1:] == ranked[:-1])
    later = order[same + 1]
    k = int(np.argmin(later))
    earlier = int(order[np.searchsorted(ranked, ranked[same[k]], side="left")])
    return int(later[k]), earlier


@dataclass(frozen=True)
class QrelsRows:
    """Judgment rows of a qrels file in file order (``iteration`` 0 = plain judgment)."""

    query_id: list
    iteration: np.ndarray
    doc_id: list
    relevance: np.ndarray


def first_uncastable(column, type_) -> int:
    """Index of the first element of ``column`` Arrow cannot cast to ``type_`` (binary
    search over slices: the error path only)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    lo, hi = 0, len(column)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            pc.cast(column.slice(lo, mid - lo), type_)
            lo = mid
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            hi = mid
    return lo


def qrels_rows(qid, it, docno, grades, errors, line) -> QrelsRows:
    """The checks of judgment rows shared by the text and Parquet readers: ``qid``,
    ``it``, ``docno`` string arrays, ``grades()`` the float grades (adding its problems
    to ``errors``), ``line`` each row's line number (None: rows counted from 1)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if line is None:
        line = np.arange(1, len(qid) + 1)
    reserved = to_numpy(pc.equal(qid, scalar(RESERVED_QUERY)))
    if reserved.any():
        k = int(np.flatnonzero(reserved)[0])
        errors.add(
            line[k],
            f"query id {RESERVED_QUERY!r} is reserved for summary rows; rename the query",
        )
    plain = pc.is_in(it, value_set=strings(["0", "Q0"]).cast(it.type))
    it_text = pc.if_else(plain, scalar("0").cast(it.type), it)
    try:
        iteration = to_numpy(pc.cast(it_text, pa.int64()))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        k = first_uncastable(it_text, pa.int64())
        errors.add(
            line[k],
            f"iteration {it[k].as_py()!r} is neither 0, Q0 nor an integer subtopic id",
        )
        iteration = np.zeros(len(it), dtype=np.int64)
        iteration[:k] = to_numpy(pc.cast(it_text.slice(0, k), pa.int64()))
        iteration[k:] = -np.arange(1, len(it) - k + 1)  # distinct: no false duplicates
    relevance = grades()
    qcode, _ = dictionary_codes(qid)
    dcode, _ = dictionary_codes(docno)
    _, icode = np.unique(iteration, return_inverse=True)
    duplicate = first_duplicate(qcode, icode.reshape(-1), dcode)
    if duplicate is not None:
        row, earlier = duplicate
        subtopic = int(iteration[row])
        errors.add(
            line[row],
            f"duplicate judgment of document {docno[row].as_py()!r} for query "
            f"{qid[row].as_py()!r}"
            + (f" subtopic {subtopic}" if subtopic else "")
            + f" (first at {errors.unit} {int(line[earlier])})",
        )
    errors.check()
    return QrelsRows(qid, iteration, docno, relevance)


@dataclass
class RunColumns:
    """The three columns of a run that evaluation needs, in file order.

    ``query_id`` and ``doc_id`` are pyarrow string arrays (``large_string`` beyond
    2 GiB of text), ``score`` a float64 numpy array.  The rank and tag columns are not
    kept (trec_eval ignores ranks).  ``doc_code``/``doc_values``: the docnos
    dictionary-encoded (codes into the distinct docnos), when the reader has them.
    """

    name: str
    path: str
    query_id: Any
    doc_id: Any
    score: np.ndarray
    doc_code: np.ndarray | None = None
    doc_values: Any = None
    query_code: np.ndarray | None = None
    query_values: Any = None
    #: (the ``known`` array given to :func:`prefeval.io.text.parse_run`, each row's index
    #: in it or -1)
    known: tuple | None = None

    def __len__(self) -> int:
        return len(self.score)

    def doc_codes(self) -> tuple[np.ndarray, Any]:
        """(code of every row's docno, the distinct docnos), computed once."""
        if self.doc_code is None:
            self.doc_code, self.doc_values = dictionary_codes(self.doc_id)
        return self.doc_code, self.doc_values

    def query_codes(self) -> tuple[np.ndarray, Any]:
        """(code of every row's query id, the distinct query ids), computed once."""
        if self.query_code is None:
            self.query_code, self.query_values = dictionary_codes(self.query_id)
        return self.query_code, self.query_values


def duplicate_message(qid, docno, codes, where, run_of=None) -> tuple[int, str] | None:
    """(row, message) for the first row repeating an earlier row's ``codes`` (query,
    docno and, in a table of many runs, run), or None; ``where(i)`` names row i in the
    message, ``run_of(i)`` its run (None: one run)."""
    duplicate = first_duplicate(*codes)
    if duplicate is None:
        return None
    row, earlier = duplicate
    of_run = f" of run {run_of(row)!r}" if run_of is not None else ""
    return row, (
        f"document {docno[row].as_py()!r} appears twice for query {qid[row].as_py()!r}"
        f"{of_run} (first at {where(earlier)})"
    )


def run_from_arrays(qid, docno, score: np.ndarray, name: str, where: str) -> RunColumns:
    """A run of Arrow string arrays ``qid``, ``docno`` and float scores, checked as a
    DataFrame run is (no NaN score, no document twice in a query); errors cite
    ``where`` and the row number."""
    if np.isnan(score).any():
        row = int(np.flatnonzero(np.isnan(score))[0])
        raise InputError(where, None, f"row {row}: score is not a number")
    qcode, qvalues = dictionary_codes(qid)
    dcode, dvalues = dictionary_codes(docno)
    duplicate = duplicate_message(qid, docno, (qcode, dcode), lambda row: f"row {row}")
    if duplicate is not None:
        raise InputError(where, None, f"row {duplicate[0]}: {duplicate[1]}")
    return RunColumns(name, where, qid, docno, score, dcode, dvalues, qcode, qvalues)


def id_strings(values, what: str, where: str, first_row: int = 0) -> np.ndarray:
    """Ids as an object array of ``str``, as the text reader sees them (see module doc);
    rows in errors are counted from ``first_row`` (0 as pandas' positions)."""
    import pandas as pd

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
