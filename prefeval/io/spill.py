"""A large run file reduced to positions in bounded memory, whatever its layout and the
order of its rows (docs/memory.md).

A run file beyond :attr:`Streaming.above` stored bytes is read in pieces (Parquet row
batches, text cut at line ends: :func:`prefeval.io.parquet.run_pieces`,
:func:`prefeval.io.text.run_pieces`), each checked as the whole file's read checks it.
A first pass writes each piece's rows to one of a few temporary Arrow IPC files, chosen
by a hash of the query id, so that all the rows of a query land in one file whatever
their order in the run; a second pass reduces one file at a time
(:func:`prefeval.core.positions.reduce_rows`, as ``run_positions`` reduces a whole
run: ranks depend only on each query's rows) and joins the positions
(:func:`prefeval.core.positions.join_positions`), the same arrays as the whole file
gives.  The temporary folder (:class:`prefeval.io.writers.TemporaryFolder`) is removed
when the reduction ends, on success, on an error and on an interrupt alike; one a killed
command left is removed by a later one.
"""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass

import numpy as np

from ..core import limits
from ..core.errors import InputError, SystemLimitError
from ..core.positions import RunPositions, join_positions, reduce_rows, set_like
from .columns import RunColumns, duplicate_message
from .writers import TemporaryFolder


@dataclass(frozen=True)
class Streaming:
    """When a run file is read in pieces, and how large its pieces and partitions are.

    ``above``: stored bytes (as on disk, compressed or not) beyond which a run file is
    read in pieces, the one threshold (TREC-sized runs, a few MB, stay below and are
    read whole, the faster way); ``piece_rows``: rows of a Parquet piece;
    ``piece_bytes``: bytes of text of a text piece (decompressed); ``part_rows``: rows
    a spilled partition is made to hold (the file's rows estimated); ``max_parts``:
    partitions at most (each an open file while the first pass writes);
    ``max_evaluated_parts``: the same for the ir-measures baselines, whose partition
    holds every run's rows and hands them to ir-measures as Python dicts (about 150
    bytes a row), so more, smaller partitions hold less in no more CPU time (set by the
    1M-user ``agree`` case of bench/RESULTS.md)."""

    above: int = 16 << 20
    piece_rows: int = 1 << 18
    piece_bytes: int = 8 << 20
    part_rows: int = 1 << 19
    max_parts: int = 64
    max_evaluated_parts: int = 256

    def parts(self, rows: int, evaluated: bool = False) -> int:
        """The number of partitions for a file of about ``rows`` rows (``evaluated``: for
        the baselines' evaluation)."""
        most = self.max_evaluated_parts if evaluated else self.max_parts
        return max(1, min(most, -(-rows // self.part_rows)))


#: the settings of every command (tests give smaller ones)
STREAMING = Streaming()

#: files a spill may need open besides one per partition (the run files being read, the
#: output, the interpreter's own)
SPARE_FILES = 64


def _schema():
    """The columns a partition's file holds: the run (its index among the names), the
    query id, the docno, the score."""
    import pyarrow as pa

    return pa.schema(
        [
            ("run", pa.int32()),
            ("query_id", pa.string()),
            ("doc_id", pa.string()),
            ("score", pa.float64()),
        ]
    )


def spilled_positions(
    name: str,
    path: str,
    pieces,
    relevant,
    max_docs: int | None,
    parts: int,
    codes=None,
    release=None,
) -> RunPositions:
    """:func:`~prefeval.core.positions.run_positions` of the run ``name`` of file ``path``
    given as ``pieces`` ((query ids, docnos) as Arrow string arrays, scores as float64,
    each piece checked by its reader), in memory bounded by a piece and a partition
    (:func:`spilled_runs`)."""
    import pyarrow as pa

    def of_run(piece):
        qid, docno, score = piece
        return pa.array(np.zeros(len(score), dtype=np.int32)), qid, docno, score

    pieces = map(of_run, pieces)
    return spilled_runs(path, pieces, [name], relevant, max_docs, parts, codes, release)[name]


def spilled_runs(
    path: str,
    pieces,
    names: list[str],
    relevant,
    max_docs: int | None,
    parts: int,
    codes=None,
    release=None,
) -> dict[str, RunPositions]:
    """run name -> :func:`~prefeval.core.positions.run_positions` of each of the runs
    ``names`` of file ``path``, given as ``pieces`` (each row's run as an int32 index
    into ``names``, query ids and docnos as Arrow string arrays, scores as float64; each
    piece checked by its reader), in memory bounded by a piece and a partition: the rows
    written to ``parts`` temporary files by query, then reduced file by file, run by run
    (``codes``: the :class:`Codes` of ``relevant`` shared by the files of a command;
    ``release()``, when given, is called after each partition: the caller's way to hand
    the memory it freed back to the system).

    A document twice for a query is an :class:`InputError` without its line (the
    caller reads the file again as it always has to say where: see
    :func:`prefeval.engine.local.streamed_positions`).
    """
    # per run its partitions' (doc, rank); not their ``retrieved``, which is as long
    # as the evaluated queries: summed at once, not kept per partition
    reduced: list[list[tuple]] = [[] for _ in names]
    retrieved = [np.zeros(relevant.n_queries, dtype=np.int64) for _ in names]
    at = {name: r for r, name in enumerate(names)}
    codes = codes or Codes(relevant)
    with Spill(parts) as spill:
        spill.add(path, pieces, names)
        for k in range(parts):
            written = spill.had(k)
            for columns in spill.partition(k):
                r = at[columns.name]
                part = codes.positions(columns, max_docs)
                del columns
                retrieved[r] += part.retrieved
                reduced[r].append((part.doc, part.rank))
                del part
            if release is not None and written:
                release()
    return {name: join_positions(name, reduced[r], retrieved[r]) for r, name in enumerate(names)}


class Spill:
    """The rows of one or more run files spilled to temporary files by query: ``parts``
    partitions, the same for every file (a hash of the query id), so that partition k of
    every file holds all the rows of the same queries, whatever the files' row order.

    A context manager: its temporary folder is removed when it ends, on success, on an
    error and on an interrupt alike.  :meth:`add` writes a file's rows;
    :meth:`partition` reads one partition back, run by run."""

    def __init__(self, parts: int):
        self.parts = parts
        self._folder: TemporaryFolder | None = None  # while entered
        self._files: list[tuple[str, list[str], dict[int, str]]] = []

    def __enter__(self) -> Spill:
        # one file per partition open while a file's rows are written: the soft limit
        # raised to that where the hard limit allows (else opening the files tells)
        with contextlib.suppress(SystemLimitError):
            limits.open_files(self.parts + SPARE_FILES, "a spill")
        self._folder = TemporaryFolder("spill")
        return self

    def __exit__(self, *exc) -> None:
        assert self._folder is not None  # set by __enter__
        self._folder.cleanup()

    def add(self, path: str, pieces, names: list[str]) -> None:
        """The rows of the runs ``names`` of file ``path`` given as ``pieces`` (each
        row's run as an int32 index into ``names``, query ids and docnos as Arrow string
        arrays, scores as float64; each piece checked by its reader) written to the
        partitions."""
        assert self._folder is not None  # written inside its with block (__enter__)
        base = os.path.join(self._folder.name, str(len(self._files)))
        files = [f"{base}-{k}.arrow" for k in range(self.parts)]
        written = _spill(pieces, files)
        self._files.append((path, names, {k: files[k] for k in written}))

    def had(self, k: int) -> bool:
        """Whether some file had rows in partition ``k``."""
        return any(k in written for _, _, written in self._files)

    def partition(self, k: int):
        """The :class:`RunColumns` of each run with rows in partition ``k`` (all the rows
        of its queries), file by file in the order added, run by run in the order of
        ``names``; each file is removed once read.  A document twice for a query of a
        run is an :class:`InputError` (without its line)."""
        for path, names, written in self._files:
            file = written.pop(k, None)
            if file is not None:
                yield from _partition_runs(names, path, file)


def _spill(pieces, files: list[str]) -> list[int]:
    """Each piece's rows appended to ``files[k]``, k a hash of the row's query id modulo
    the number of files; the indices of the files written, in order."""
    import pyarrow as pa

    schema = _schema()
    sinks: dict[int, tuple] = {}
    try:
        for run, qid, docno, score in pieces:
            if not len(score):
                continue
            part = query_buckets(qid, len(files))
            order = np.argsort(part, kind="stable")
            counts = np.bincount(part, minlength=len(files))
            # a piece's ids are far below 2 GiB: plain strings
            table = pa.table(
                [run, qid.cast(pa.string()), docno.cast(pa.string()), score], schema=schema
            ).take(pa.array(order))
            at = 0
            for k in np.flatnonzero(counts).tolist():
                if k not in sinks:
                    sink = pa.OSFile(files[k], "wb")
                    sinks[k] = (sink, pa.ipc.new_stream(sink, schema))
                sinks[k][1].write_table(table.slice(at, int(counts[k])))
                at += int(counts[k])
            del table
    finally:
        for sink, writer in sinks.values():
            writer.close()
            sink.close()
    return sorted(sinks)


def query_buckets(qid, parts: int) -> np.ndarray:
    """The partition of each of the query ids ``qid`` (an Arrow string array): a hash of
    the id (pandas' ``hash_array``, the same for the same id in every piece and file)
    modulo ``parts``."""
    import pandas as pd
    import pyarrow.compute as pc

    if parts == 1:
        return np.zeros(len(qid), dtype=np.int64)
    encoded = pc.dictionary_encode(qid)
    distinct = encoded.dictionary.to_numpy(zero_copy_only=False)
    of_value = (pd.util.hash_array(distinct, categorize=False) % np.uint64(parts)).astype(np.int64)
    return of_value[np.asarray(encoded.indices, dtype=np.int64)]


class Codes:
    """The evaluated query ids and the relevant docnos of a
    :class:`~prefeval.core.qrels.RelevantSet` as pandas indexes, built once (on first
    use) and shared by every file and thread of a command; lookups are made one thread
    at a time (an index builds its hash table on first use)."""

    def __init__(self, relevant):
        self.relevant = relevant
        self.lock = threading.Lock()
        self._indexes = None

    def indexes(self):
        """(the evaluated query ids' index, the relevant docnos' index); call under
        :attr:`lock`."""
        import pandas as pd

        if self._indexes is None:
            import pyarrow as pa

            queries = pd.Index(pa.array(self.relevant.query_ids, pa.string()).to_pandas())
            self._indexes = queries, pd.Index(self.relevant.docnos().to_pandas())
        return self._indexes

    def positions(self, columns: RunColumns, max_docs) -> RunPositions:
        """:func:`~prefeval.core.positions.run_positions` of ``columns`` (the same
        reduction, :func:`~prefeval.core.positions.reduce_rows`, its codes looked up in
        the indexes built once)."""
        import pyarrow as pa

        qcode, qvalues = columns.query_codes()
        dcode, dvalues = columns.doc_codes()
        with self.lock:
            queries, docnos = self.indexes()
            qidx = queries.get_indexer(qvalues.to_pandas()).astype(np.int64)[qcode]
        code = judged_codes(dvalues, self.relevant.docnos(), docnos, self.lock)[dcode]
        keep = np.flatnonzero(qidx >= 0)
        docno = columns.doc_id if len(keep) == len(qidx) else columns.doc_id.take(pa.array(keep))
        return reduce_rows(
            columns.name, qidx[keep], columns.score[keep], docno, code[keep], self.relevant,
            max_docs,
        )  # fmt: skip


def judged_codes(dvalues, docnos, judged, lock=None) -> np.ndarray:
    """The code of each docno of ``dvalues`` (distinct, Arrow strings) among the relevant
    ``docnos`` (-1: none), by Arrow's ``index_in`` when hashing ``docnos`` again is the
    cheaper (at most 4 times as many), else by their pandas index ``judged`` (its
    hash table built once; ``lock``: held around it, for an index shared by threads)."""
    import pyarrow.compute as pc

    if len(judged) <= 4 * len(dvalues):
        code = pc.index_in(dvalues, value_set=set_like(docnos, dvalues))
        return np.asarray(code.fill_null(-1), dtype=np.int64)
    with lock or contextlib.nullcontext():
        return judged.get_indexer(dvalues.to_pandas()).astype(np.int64)


def _partition_runs(names: list[str], path: str, file: str):
    """The :class:`RunColumns` of each run with rows in one partition's ``file`` (all the
    rows of its queries; the file removed once read); a document twice for a query of a
    run is an :class:`InputError`."""
    import pyarrow as pa

    with pa.OSFile(file, "rb") as source:
        table = pa.ipc.open_stream(source).read_all()
    os.remove(file)  # its disk space back at once
    # each column joined into one array and its chunks let go before the next: the
    # partition is held about once, not twice
    joined = []
    while table.num_columns:
        joined.append(table.column(0).combine_chunks())
        table = table.remove_column(0)
    del table
    run = np.asarray(joined[0], dtype=np.int32)
    qid, docno = joined[1], joined[2]
    score = np.asarray(joined[3], dtype=np.float64)
    del joined
    present = np.flatnonzero(np.bincount(run, minlength=len(names)))
    for r in present.tolist():
        if len(present) > 1:
            rows = np.flatnonzero(run == r)
            take = pa.array(rows)
            columns = RunColumns(names[r], path, qid.take(take), docno.take(take), score[rows])
        else:
            columns = RunColumns(names[r], path, qid, docno, score)
        qcode, _ = columns.query_codes()
        dcode, _ = columns.doc_codes()
        duplicate = duplicate_message(
            columns.query_id, columns.doc_id, (qcode, dcode), lambda row: "an earlier row"
        )
        if duplicate is not None:
            raise InputError(path, None, duplicate[1])
        yield columns
