"""Qrels and runs from whatever the user gives (a path to TREC text or Parquet, a
many-run Parquet table, a DataFrame, a table of Arrow's C stream, records, a dict): the
format decided by the bytes, the runs of a command resolved once into a :class:`RunSet`
(:func:`resolve_runs`: named, each file opened once, parsed once)."""

from __future__ import annotations

import itertools
import os
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..core.errors import InputError
from ..core.qrels import Qrels
from ..core.rows import is_pandas
from . import arrow, parquet, text, textpass
from .arrow import is_arrow
from .columns import RUN, RunColumns, run_from_arrays
from .frames import (
    frame_column,
    frame_runs,
    is_named_dict,
    is_nested,
    is_records,
    named_dict,
    nested_frame,
    peek,
    qrels_from_frame,
    records_frame,
    run_frame,
)
from .irds import is_dataset_id, read_dataset_qrels
from .source import (
    GZIP_MAGIC,
    PARQUET_MAGIC,
    gunzip_blocks,
    is_frame,
    is_input,
    is_parquet,
    is_stream,
    read_raw,
    run_name,
    stored,
    text_bytes,
)
from .spill import STREAMING, Spill, Streaming
from .text import line_ends, parse_qrels, parse_run, split_fields

#: what a run of a :class:`RunSet` is: TREC text (plain or gzip-compressed), a Parquet
#: file of one run, one run of a many-run Parquet table, a DataFrame ``query_id, doc_id,
#: score``, a :class:`RunColumns`, a run of a table of Arrow's C stream
#: (:class:`~prefeval.io.arrow.ArrowRun`)
KINDS = ("text", "gzip", "parquet", "table", "frame", "columns", "arrow")


@dataclass(eq=False)
class Run:
    """One run of a :class:`RunSet`: its name, its kind (:data:`KINDS`) and its rows.

    ``path``: the path as given (what messages cite; None for a run in memory).
    ``data``: a file's stored bytes, the file opened once (:func:`prefeval.io.source.stored`:
    a stream's bytes or a :class:`~prefeval.io.source.StoredFile`, shared by the runs of a
    many-run table), or the DataFrame, RunColumns or ArrowRun itself.  ``error``: why the
    file cannot be read, raised when the run is read (its judgments are read and checked
    first, as always).  ``keep``: keep the parsed columns once read (:meth:`read`), for a
    second reader of the same command (the baselines)."""

    name: str
    kind: str
    path: str | None
    data: Any = None
    error: InputError | None = None
    keep: bool = False
    kept: RunColumns | None = field(default=None, repr=False)

    @property
    def where(self) -> str:
        """What messages about the run cite: its path, or ``<run NAME>`` in memory."""
        return self.path if self.path is not None else f"<run {self.name}>"

    def stored(self):
        """The file's stored bytes (:attr:`data`); the reading error of a file that cannot
        be read."""
        if self.error is not None:
            raise self.error
        return self.data

    def read(self, known=None) -> RunColumns:
        """The run's columns (:class:`RunColumns`), parsed from :attr:`data` (the kept ones
        when there are); ``known``: docnos to locate while parsing
        (:func:`prefeval.io.text.parse_run`)."""
        if self.kept is not None:
            return self.kept
        if self.kind == "columns":
            return self.data
        if self.kind == "frame":
            columns = _run_from_frame(self.data, self.name)
        elif self.kind == "arrow":
            columns = self.data.read(self.name)
        else:
            assert self.path is not None  # a file's run (the kinds above are in memory)
            if self.kind == "table":
                columns = parquet.table_run(self.path, self.name, self.data)
            else:
                columns = parse_any_run(self.stored(), self.path, self.name, known)
        if self.keep:
            self.kept = columns
        return columns

    def forget(self) -> None:
        """Let the kept columns go."""
        self.kept = None


class RunSet(Mapping):
    """The runs of one command or call, resolved once (:func:`resolve_runs`): run name
    -> :class:`Run`, in the order given (a many-run table's runs in sorted name order)."""

    def __init__(self, runs: list[Run]):
        self._runs = {run.name: run for run in runs}

    def __getitem__(self, name: str) -> Run:
        return self._runs[name]

    def __iter__(self):
        return iter(self._runs)

    def __len__(self) -> int:
        return len(self._runs)

    def subset(self, names) -> RunSet:
        """The runs ``names`` (the same :class:`Run` objects), in that order."""
        return RunSet([self._runs[name] for name in names])

    def keep_columns(self, keep: bool = True) -> None:
        """Whether every run keeps its columns once parsed (:attr:`Run.keep`); False also
        lets the kept ones go.  A run the one-pass reader reads (:func:`textpass.reads`)
        keeps none: each reader reads it in one pass, cheaper than parsing its columns."""
        for run in self._runs.values():
            run.keep = keep and not textpass.reads(run)
            if not keep:
                run.forget()

    def stored_bytes(self) -> int:
        """The stored size of the run files (a many-run table counted once)."""
        seen = {id(r.data): len(r.data) for r in self._runs.values() if r.path and r.data}
        return sum(seen.values())


def streamed(runs, streaming: Streaming = STREAMING) -> bool:
    """Whether some run of ``runs`` is a file of more than ``streaming.above`` stored
    bytes (a many-run table: the table's), which :func:`spill_runs` reads in pieces."""
    return any(
        run.kind in ("text", "gzip", "parquet", "table")
        and run.error is None
        and len(run.data) > streaming.above
        for run in runs
    )


def rows_estimate(runs) -> int:
    """About how many rows ``runs`` hold, all together (a many-run table counted once):
    from Parquet footers, from the size of text."""
    total, seen = 0, set()
    for run in runs:
        if run.kind in ("frame", "arrow"):  # rows counted, not parsed (spill_runs parses it)
            total += len(run.data)
        elif run.kind == "columns":
            total += len(run.data.score)
        elif id(run.data) not in seen:
            seen.add(id(run.data))
            raw = run.stored()
            total += (
                parquet.row_count(raw, run.path) if is_parquet(raw) else text.rows_estimate(raw)
            )
    return total


def spill_runs(spill: Spill, runs, streaming: Streaming = STREAMING) -> None:
    """Every run of ``runs`` (:class:`Run`) written to ``spill`` by query, in pieces: a
    file of one run read piece by piece (:func:`prefeval.io.parquet.run_pieces`,
    :func:`prefeval.io.text.run_pieces`), the runs of a many-run table together in one
    pass over it (:func:`prefeval.io.parquet.table_pieces`), a run in memory as one
    piece.  Memory is bounded by a piece; a problem of a file is an
    :class:`~prefeval.core.errors.InputError` (its first problem in the file's order,
    though a document twice for a query is found only when a partition is read)."""
    import pyarrow as pa

    tables: dict[str, list[Run]] = {}
    for run in runs:
        if run.kind == "table":
            tables.setdefault(run.path, []).append(run)
            continue
        if run.kind in ("frame", "columns", "arrow"):
            columns = run.read()
            pieces = [(columns.query_id, columns.doc_id, columns.score)]
        else:
            raw = run.stored()
            if is_parquet(raw):
                pieces = parquet.run_pieces(raw, run.path, streaming.piece_rows)
            else:
                pieces = text.run_pieces(raw, run.path, streaming.piece_bytes)
        one = (
            (pa.array(np.zeros(len(score), dtype=np.int32)), qid, docno, score)
            for qid, docno, score in pieces
        )
        spill.add(run.where, one, [run.name])
    for path, group in tables.items():
        names = [run.name for run in group]
        spill.add(path, parquet.table_pieces(path, names, group[0].data), names)


#: bytes of run files a run set reads whole when it resolves them, their bytes held for
#: the command; beyond, files are read as they are used
#: (:class:`~prefeval.io.source.StoredFile`: no memory of the process held, but each
#: keeps a descriptor of its file: counted against ``ulimit -n``).  TREC-sized runs are
#: read whole; recommender-sized ones are not, as holding them raises the peak RSS (set
#: by bench/run.py's recsys case at a small ``--scale``; see bench/RESULTS.md)
READ_WHOLE = 4 << 20


#: how :func:`resolve_runs` names the runs of files (``--names``): ``file``, by the file
#: name (:func:`~prefeval.io.source.run_name`); ``tag``, by the run tag of its lines
#: (:func:`run_tag`: trec_eval's runid)
NAMINGS = ("file", "tag")
#: the tag column of a Parquet run (``--names tag``)
TAG = ("tag", "run_id")


class NamedPath(str):
    """A run file's path given with the run's name (``NAME=PATH`` on the command line,
    :func:`run_argument`): the string is the path (what is opened and cited), :attr:`name`
    the run's name."""

    name: str

    def __new__(cls, path: str, name: str):
        self = super().__new__(cls, path)
        self.name = name
        return self

    def __getnewargs__(self):
        return (str(self), self.name)


#: what a run name given as ``NAME=`` may not hold: a path separator or a blank
_NOT_IN_NAME = re.compile(r"[\s/" + re.escape(os.sep + (os.altsep or "")) + "]")


def run_argument(text: str) -> str:
    """A RUN argument of the command line: ``NAME=PATH`` names the run of the file PATH
    NAME (a :class:`NamedPath`); anything else is a path, named by :func:`resolve_runs`.

    An argument that exists is a path, whatever ``=`` it holds (``k=10.txt``; a folder
    or a dangling link too, refused as such when read).  Otherwise the argument is cut
    at an ``=`` that has a name before it (not empty, no ``/`` or blank) and a path
    after it: at the one ``=`` whose right side is an input a reader opens
    (:func:`~prefeval.io.source.is_input`: a file, ``-``, a pipe; not a folder or a
    dangling link), so a name may hold ``=`` (``bm25_k1=0.9=runs/a.txt`` names a run
    ``bm25_k1=0.9``); when no right side is, at the first such ``=`` (the path is then
    what the error cites).  Two right sides that are both inputs are an
    :class:`InputError` (``./`` before the path says which is meant).  A ``/`` before
    every ``=`` makes a path: ``runs/k=10/bm25.txt``."""
    cuts = [
        (text[:at], text[at + 1 :])
        for at, char in enumerate(text)
        if char == "=" and at and at < len(text) - 1 and not _NOT_IN_NAME.search(text[:at])
    ]
    if not cuts or os.path.lexists(text):
        return text
    there = [(name, path) for name, path in cuts if is_input(path)]
    if len(there) > 1:
        shown = " or ".join(f"run {name!r} of {path!r}" for name, path in there)
        raise InputError(
            text,
            None,
            f"NAME=PATH names {shown}, as both files exist; write the path meant with ./ "
            "before it (NAME=./PATH)",
        )
    name, path = there[0] if there else cuts[0]
    return NamedPath(path, name)


def resolve_runs(runs, names: str = "file") -> RunSet:
    """The run set of ``runs``, each file opened once: the one function that names runs.

    ``runs``: a path (TREC text, gzip, Parquet; ``-``, a pipe, a FIFO, ``/dev/fd/N``), a
    DataFrame ``query_id, doc_id, score``, a table of Arrow's C stream
    (:mod:`prefeval.io.arrow`), a :class:`RunColumns` or a :class:`Run`, or a list of
    them, or a dict name -> one of them; a :class:`RunSet` is returned as it is.
    Names: a dict's keys or a :class:`NamedPath`'s name (``NAME=PATH``), else, for a file,
    ``names`` (:data:`NAMINGS`) decides: ``file``, its
    :func:`~prefeval.io.source.run_name` (the base name without ``input.``, ``.gz`` and
    one of :data:`~prefeval.io.source.RUN_SUFFIXES`), or ``tag``, its :func:`run_tag`;
    a RunColumns' or Run's name, ``run{i}`` for another in-memory run at position i
    (from 1).  A path to a Parquet table with a ``run`` (or ``name``) column stands for
    its runs (named by that column, in sorted name order), and so do a DataFrame and a
    table of Arrow's C stream with such a column
    (:func:`~prefeval.io.frames.frame_runs`, :func:`~prefeval.io.arrow.table_runs`); each
    given under a name, as one run, is an error.  Two runs with one name are an error
    that says how to name them.
    """

    if isinstance(runs, RunSet):
        return runs
    if names not in NAMINGS:
        raise ValueError(f"names: {names!r}; expected one of {', '.join(NAMINGS)}")
    if isinstance(runs, (str, os.PathLike, RunColumns, Run)) or is_frame(runs) or is_arrow(runs):
        runs = [runs]
    given = "key"  # what names the runs given by name: a dict's keys, or NAME=PATH
    if isinstance(runs, dict):
        items = list(runs.items())
    else:
        given = "NAME=PATH"
        items = [(s.name, s) if isinstance(s, NamedPath) else (None, s) for s in runs]
    expanded: list[tuple[int, Run]] = []
    held = 0  # bytes of the files read whole so far
    for i, (key, source) in enumerate(items):
        got = _resolve_one(key, source, i, max(0, READ_WHOLE - held))
        if key is None and names == "tag" and len(got) == 1 and got[0].kind in _TAGGED:
            got = [replace(got[0], name=run_tag(got[0]))]
        expanded.extend((i, run) for run in got)
        if got and got[0].path is not None and isinstance(got[0].data, bytes):
            held += len(got[0].data)  # a table's runs share its bytes
    keys = [key for key, _ in items]
    same = alike([run.name for _, run in expanded], exact=True)
    if same is not None:
        k, m = same
        raise _same_name(expanded[k], expanded[m], keys, names, given)
    return RunSet([run for _, run in expanded])


#: the kinds of run named by their tag with ``names="tag"`` (a many-run table's runs are
#: named by its run column, in-memory runs as they are)
_TAGGED = ("text", "gzip", "parquet")


def _printed(name: str) -> str:
    """What tells run names apart: their Unicode NFC form, so that two names that
    print alike (``café`` composed and decomposed) are one name."""
    return unicodedata.normalize("NFC", name)


def alike(names, exact: bool = False) -> tuple[int, int] | None:
    """The positions (k, m), k < m, of the first name of ``names`` (in their order) that
    is one name with an earlier one (:func:`_printed`): equal once normalized but
    written otherwise, or, with ``exact``, written the same too; None when there is
    none.  Every source of run names refuses such names: :func:`resolve_runs`, and
    the ``--prefs``/``--metrics`` tables (:mod:`prefeval.io.tables`), whose rows name
    one run by writing its name the same."""
    seen: dict[str, tuple[int, str]] = {}
    for m, name in enumerate(names):
        k, first = seen.setdefault(_printed(str(name)), (m, name))
        if k != m and (exact or first != name):
            return k, m
    return None


def named_alike(a: str, b: str) -> str:
    """How a message words two run names that are one name (:func:`alike`): ``named
    'a'``, or, when written otherwise, both by their code points."""
    if a == b:
        return f"named {a!r}"
    return f"named alike, {ascii(a)} and {ascii(b)} (one Unicode NFC name)"


def _same_name(
    first: tuple[int, Run], second: tuple[int, Run], keys, names, given: str
) -> InputError:
    """The error of two runs named alike, saying how to name them apart; ``given``:
    what the names given came from (``key`` or ``NAME=PATH``)."""
    (i, a), (j, b) = first, second
    where = f"inputs {i + 1} and {j + 1}"
    if a.path is not None and b.path is not None and a.path != b.path:
        where += f": {a.path} and {b.path}"
    if keys[i] is not None and keys[j] is not None:
        how = "give runs distinct names"
        if keys[i] != keys[j]:
            shown = repr if str(keys[i]) == str(keys[j]) else ascii
            what = "keys" if given == "key" else "the names of NAME=PATH arguments"
            how = f"{what} {shown(keys[i])} and {shown(keys[j])} are one name; {how}"
    else:
        how = "name them NAME=PATH (in Python, a dict {name: run})"
        if names == "file":
            how += " or use --names tag (trec_eval's runid, each file's run tag)"
    named = named_alike(a.name, b.name)
    return InputError(b.where, None, f"two runs are {named} ({where}); {how}")


def run_tag(run: Run) -> str:
    """The run tag that names a file's ``run`` with ``--names tag``: the 6th column of a
    TREC run's lines (trec_eval's runid), the ``tag`` (or ``run_id``) column of a Parquet
    run.  Every line must have it, and the same one: else an :class:`InputError` at the
    first line that differs or lacks it."""
    raw = run.stored()
    assert run.path is not None  # --names tag names the runs of files
    if run.kind == "parquet":
        return _parquet_tag(raw, run.path)
    return _text_tag(raw, run.path)


#: bytes of a run's text split at a time for its tags (:func:`run_tag`)
TAG_CHUNK = 1 << 24

_TAG_FIELDS = "qid iter docno rank score tag, as --names tag needs"


def _text_tag(raw, path: str) -> str:
    """The one tag of a TREC run's lines (:func:`run_tag`), read a chunk of lines at a
    time (:func:`_tag_chunks`)."""
    import pyarrow.compute as pc

    first, first_line = None, 0
    lines = 0  # lines before the chunk
    for chunk in _tag_chunks(raw, path):
        try:
            fields = split_fields(chunk, path, 6, False, _TAG_FIELDS)
            fields.errors.check()
        except InputError as error:
            line = None if error.line is None else error.line + lines
            raise InputError(path, line, error.message) from None
        tags = fields.columns[5]
        if len(tags):
            if first is None:
                first, first_line = tags[0].as_py(), int(fields.line[0]) + lines
            other = pc.not_equal(tags, first)
            if pc.any(other).as_py():
                k = int(pc.index(other, True).as_py())
                raise InputError(
                    path,
                    int(fields.line[k]) + lines,
                    f"run tag {tags[k].as_py()!r}, not {first!r} as on line {first_line}: "
                    "--names tag names a run by the one tag of its lines; name it NAME=PATH",
                )
        lines += len(line_ends(chunk))
    if first is None:
        raise InputError(path, None, "no result line, so no run tag to name the run by")
    return first


def _tag_chunks(raw, path: str):
    """The text of a run's stored bytes ``raw`` in chunks, each up to the first line end
    at least :data:`TAG_CHUNK` bytes after its start (the last up to the end): a
    gzip-compressed run decompressed as it is read (:func:`gunzip_blocks`), so that a
    chunk and the next block are all the text held, whatever the run's size."""
    blocks: Iterator[bytes]
    if raw[:2] != GZIP_MAGIC:
        blocks = (raw[at : at + TAG_CHUNK] for at in range(0, len(raw), TAG_CHUNK))
    else:
        blocks = gunzip_blocks(raw, path, TAG_CHUNK)
        head = next(blocks, b"")
        if head.startswith(PARQUET_MAGIC):  # text_bytes says whether it is Parquet
            blocks = iter([text_bytes(raw, path)])
        else:
            blocks = itertools.chain([head], blocks)
    held = bytearray()
    for block in blocks:
        held += block
        while len(held) > TAG_CHUNK:
            end = held.find(b"\n", TAG_CHUNK)
            if end < 0:
                break  # the line goes on in the next block
            yield bytes(held[: end + 1])
            del held[: end + 1]
    if held:  # the rest: no line end TAG_CHUNK bytes after its start
        yield bytes(held)


def _parquet_tag(raw, path: str) -> str:
    """The one value of a Parquet run's tag column (:func:`run_tag`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    pfile = parquet.open_parquet(path, raw)
    columns = list(pfile.schema_arrow.names)
    column = parquet.find_column(columns, TAG, path)
    if column is None:
        raise InputError(
            path,
            None,
            "column tag: missing ('tag' or 'run_id'), which names the run with --names tag; "
            f"the columns are {columns}; name it NAME=PATH",
        )
    try:
        values = pfile.read(columns=[column]).column(0)
    except (pa.ArrowException, OSError, ValueError) as error:
        raise parquet.unreadable(path, error) from None
    tags = parquet.ids(values, "run tag", path, name=column)
    if not len(tags):
        raise InputError(path, None, "no rows, so no run tag to name the run by")
    other = pc.not_equal(tags, tags[0])
    if pc.any(other).as_py():
        k = int(pc.index(other, True).as_py())
        raise InputError(
            path,
            None,
            f"row {k + 1}: run tag {tags[k].as_py()!r}, not {tags[0].as_py()!r} as on row 1: "
            "--names tag names a run by the one tag of its rows; name it NAME=PATH",
        )
    return tags[0].as_py()


def _resolve_one(key, source, i: int, whole: int) -> list[Run]:
    """The run(s) of one item of :func:`resolve_runs` (a many-run table: its runs)."""
    name = None if key is None else str(key)
    if isinstance(source, Run):
        return [source if name is None else replace(source, name=name)]
    if isinstance(source, RunColumns):
        return [Run(name or str(source.name), "columns", source.path, source)]
    if is_arrow(source):
        kind = arrow.what(source)
        where = f"<runs {kind} {i + 1}>" if name is None else f"<run {name}>"
        one, many = arrow.table_runs(source, where)
        if many is None:
            return [Run(name or f"run{i + 1}", "arrow", None, one)]
        if name is not None:
            raise InputError(
                where,
                None,
                f"a {kind} of many runs (a run column) given as the one run {name!r}; "
                "give it in a list of runs, or drop its run column",
            )
        return [Run(label, "arrow", None, run) for label, run in many]
    if is_frame(source):
        where = f"<runs DataFrame {i + 1}>" if name is None else f"<run {name}>"
        runs = frame_runs(source, where)
        if runs is None:
            return [Run(name or f"run{i + 1}", "frame", None, source)]
        if name is not None:
            raise InputError(
                where,
                None,
                f"a DataFrame of many runs (a run column) given as the one run {name!r}; "
                "give it in a list of runs, or drop its run column",
            )
        return [Run(run, "frame", None, frame) for run, frame in runs]
    if not isinstance(source, (str, os.PathLike)):
        return [Run(name or f"run{i + 1}", "frame", None, source)]
    path = str(os.fspath(source))  # a NamedPath's plain path
    try:
        data = stored(path, whole)
    except InputError as error:
        if is_stream(path):
            raise
        return [Run(name or run_name(path), "text", path, error=error)]
    if not is_parquet(data):
        kind = "gzip" if data[:2] == GZIP_MAGIC else "text"
        return [Run(name or run_name(path), kind, path, data)]
    if parquet.runs_column(data, path) is None:
        return [Run(name or run_name(path), "parquet", path, data)]
    if name is not None:
        how = "give it in a list of runs"
        if isinstance(source, NamedPath):  # the command line's words
            how = "give its path alone, without NAME=: its run column names its runs"
        raise InputError(
            path,
            None,
            f"a table of many runs (a run column) given as the one run {name!r}; {how}",
        )
    return [Run(table, "table", path, data) for table in parquet.run_names(path, data)]


def read_qrels(source, *, name: str | None = None):
    """Read qrels from a path, an ir_datasets id ``irds:ID`` (:mod:`prefeval.io.irds`), a
    pandas DataFrame or a table of Arrow's C stream
    (:mod:`prefeval.io.arrow`) into a :class:`prefeval.core.qrels.Qrels`.

    A DataFrame or table uses ir-measures' column names ``query_id, doc_id, relevance`` (or
    PyTerrier's ``qid, docno, label``) and, optionally, ``iteration`` (``0``/``Q0`` or an
    integer subtopic id); see :mod:`prefeval.io.frames`.

    >>> import prefeval
    >>> qrels = prefeval.read_qrels("sample_data/qrels.txt")
    >>> len(qrels.query_ids()), qrels.has_subtopics
    (20, False)
    """

    if isinstance(source, Qrels):
        return source
    if is_arrow(source):
        return arrow.read_qrels(source, name)
    if is_frame(source):
        return qrels_from_frame(source, name=name or "<qrels DataFrame>")
    if is_dataset_id(source):
        return read_dataset_qrels(source, name=name)

    path = os.fspath(source)
    raw = read_raw(path)
    if is_parquet(raw):
        rows = parquet.parse_qrels(raw, path)
    else:
        rows = parse_qrels(text_bytes(raw, path), path)
    return Qrels.from_rows(rows, name=name or path)


def read_run(source, *, name: str | None = None) -> RunColumns:
    """Read one run from a path, a pandas DataFrame or a table of Arrow's C stream
    (``query_id, doc_id, score``, or PyTerrier's ``qid, docno, score``: see
    :mod:`prefeval.io.frames`).

    >>> import prefeval
    >>> run = prefeval.read_run("sample_data/runs/input.sys01")
    >>> run.name, len(run.doc_id)
    ('sys01', 1000)
    """

    if isinstance(source, RunColumns):
        return source
    if isinstance(source, Run):
        return source.read()
    if is_arrow(source):
        return arrow.read_run(source, name or "run")
    if is_frame(source):
        return _run_from_frame(source, name or "run")
    path = os.fspath(source)
    return parse_any_run(stored(path), path, name)


def parse_any_run(raw, path: str, name: str | None = None, known=None) -> RunColumns:
    """One run from a file's stored bytes: Parquet (by its magic bytes), else TREC text
    (plain or gzip); see :func:`parse_run`."""

    if is_parquet(raw):
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
    if is_pandas(qrels, "DataFrame"):
        return qrels_from_frame(qrels, name="<qrels DataFrame>")
    if isinstance(qrels, Mapping):
        if not is_nested(qrels):
            raise TypeError(f"{where}: a dict must be {{query_id: {{doc_id: relevance}}}}")
        return qrels_from_frame(nested_frame(qrels, "relevance", where), name="<qrels dict>")
    if is_arrow(qrels):
        return arrow.read_qrels(qrels)
    if is_named_dict(qrels):
        where = f"<qrels {type(qrels).__name__}>"
        mapping = named_dict(qrels, "relevance", where)
        return qrels_from_frame(nested_frame(mapping, "relevance", where), name=where)
    if isinstance(qrels, Iterable):
        return qrels_from_frame(records_frame(qrels, "relevance", where), name="<qrels records>")
    raise TypeError(
        f"qrels: expected a path, a DataFrame, a table of Arrow's C stream (pyarrow, polars, "
        f"DuckDB), a {{query_id: {{doc_id: relevance}}}} dict, a ranx Qrels or "
        f"ir_measures.Qrel rows, got {type(qrels).__name__}"
    )


def _one_run(run, where: str):
    """One run as a path (``str``), a RunColumns, a ``query_id, doc_id, score`` frame, a
    table of Arrow's C stream (a many-run one: its runs, :func:`resolve_runs`) or, for a
    ranx Run with a name, a :class:`Run` of that name; None when ``run`` is not one run."""

    if isinstance(run, (str, os.PathLike)):
        return os.fspath(run)
    if isinstance(run, (RunColumns, Run)) or is_arrow(run):
        return run
    if is_named_dict(run):
        frame = run_frame(nested_frame(named_dict(run, "score", where), "score", where), where)
        return frame if run.name is None else Run(str(run.name), "frame", None, frame)
    if is_pandas(run, "DataFrame"):  # one with a run column: its runs (resolve_runs)
        many = frame_column(run, RUN, "run", where, required=False) is not None
        return run if many else run_frame(run, where)
    if is_nested(run) or (isinstance(run, Mapping) and not run):
        return run_frame(nested_frame(run, "score", where), where)
    return None


def runs_input(runs) -> RunSet:
    """The API's runs as a :class:`RunSet` (:func:`resolve_runs`) of paths, RunColumns and
    ``query_id, doc_id, score`` frames.

    Names: a dict's keys; a path's :func:`~prefeval.io.source.run_name`; a ranx Run's
    ``name`` (:func:`~prefeval.io.frames.is_named_dict`) when it has one; ``run1``,
    ``run2``... by position for other in-memory runs of a list; for a DataFrame or a
    table of Arrow's C stream with a ``run`` (or ``name``) column, alone or in a list,
    that column, runs taken in sorted name order (so the order of the rows changes
    nothing).  One run alone (a path, a DataFrame or table without a run column, records,
    a pytrec_eval dict, a ranx Run) is a list of one.
    """

    if isinstance(runs, RunSet):
        return runs
    if is_pandas(runs, "DataFrame"):
        many = frame_runs(runs, "<runs DataFrame>")
        if many is None:
            return resolve_runs([run_frame(runs, "<run DataFrame>")])
        return resolve_runs(dict(many))
    single = _one_run(runs, "<run>")
    if single is not None:
        return resolve_runs([single])
    if isinstance(runs, Mapping):
        items = list(runs.items())  # keys kept: resolve_runs refuses two that print alike
    elif isinstance(runs, Iterable):
        first, runs = peek(runs)
        if is_records(first):
            return resolve_runs(
                [run_frame(records_frame(runs, "score", "<run records>"), "<run records>")]
            )
        items = [(None, run) for run in runs]
    else:
        raise TypeError(
            f"runs: expected paths, DataFrames, tables of Arrow's C stream (pyarrow, polars, "
            f"DuckDB), ir_measures.ScoredDoc rows, {{query_id: {{doc_id: score}}}} dicts or "
            f"ranx Runs (a list, or a dict name -> run), "
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
                    f"{where}: expected a path, a DataFrame, a table of Arrow's C stream, "
                    f"ir_measures.ScoredDoc rows, a {{query_id: {{doc_id: score}}}} dict or a "
                    f"ranx Run, got {type(run).__name__}"
                )
        out.append((name, source))
    if isinstance(runs, Mapping):
        return resolve_runs(dict(out))  # out's keys: runs' keys, distinct
    return resolve_runs([source for _, source in out])
