"""The pairwise preference engine.

Per query, every pseudo-population (the binary one, the graded ones of
rpp-sigir2022 eq. 5, the subtopic ones of eq. 6) is a set of relevant documents;
its sorted position vectors for all runs form a runs x m matrix.  Populations of
equal size m are stacked and compared for all run pairs at once:
D = sgn(f'_i - f_i) is computed once and every measure is read off it.
The result is a :class:`PreferenceCube`, measures x pairs x queries.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Generator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ..core import ties
from ..core.cube import PreferenceCube, run_pairs
from ..core.errors import InputError
from ..core.parallel import in_order, usable_cpus
from ..core.positions import RunPositions, missing_notice, position_matrix, run_positions
from ..core.progress import progress_bar, stderr_notice
from ..core.qrels import Qrels, RelevantSet
from ..io import parquet, text
from ..io.runs import Run, resolve_runs
from ..io.source import is_parquet
from ..io.spill import STREAMING, Codes, Streaming, spilled_positions
from ..io.textpass import run_text_positions
from ..measures import Measure, families_of
from ..measures.family import Family
from ..options import PARTITION_CELLS
from . import cache, runtime
from .job import (
    Job,
    PartitionResult,
    Partitions,
    Want,
    blocks_here,
    partition_result,
    summary_schema,
)

# elements of one (populations x pairs x m) block: bounds the engine's working memory
_BLOCK = 1 << 22
#: stored bytes of a run file after which its freed parse memory is handed back at once
_TRIM_BYTES = 8 << 20


# --------------------------------------------------------------------------- loading


def relevant_with_notice(qrels: Qrels, level: float | None, notify=stderr_notice) -> RelevantSet:
    """``qrels.relevant(level)``, saying how many queries are dropped for lack of a
    relevant document; an error when none is left."""
    relevant = qrels.relevant(level)
    if relevant.dropped and notify is not None:
        what = "grade > 0" if level is None else f"grade >= {level:g}"
        notify(
            f"{len(relevant.dropped)} of {len(relevant.dropped) + relevant.n_queries} queries "
            f"in {qrels.name} have no relevant document ({what}) and are not evaluated"
        )
    if relevant.n_queries == 0:
        raise InputError(qrels.name, None, "no query has a relevant document to evaluate")
    return relevant


def reduce_run(run: Run, relevant: RelevantSet, max_docs: int | None) -> RunPositions:
    """One run reduced to rank positions, the plain step: a TREC text file in one pass
    (:func:`~prefeval.io.textpass.run_text_positions`), any other run file (or one the
    pass declines) read whole and reduced (:func:`~prefeval.core.positions.run_positions`),
    its docnos matched against the relevant ones as they are read; a run in memory
    reduced as it is."""
    if run.path is None:
        return run_positions(run.read(), relevant, max_docs)
    positions = run_text_positions(run, relevant, max_docs)
    if positions is None:
        columns = run.read(known=relevant.docnos())
        positions = run_positions(columns, relevant, max_docs)
        del columns
    return positions


@dataclass(frozen=True)
class ReadPolicy:
    """How :func:`load_runs` reads a run file around :func:`reduce_run`: from the cache
    where it is there (``use_cache``), in pieces spilled by query where it is larger
    than ``streaming.above`` stored bytes, the freed memory handed back after a large
    one; the reduced run written to the cache."""

    use_cache: bool = False
    streaming: Streaming = STREAMING

    def positions(
        self, run: Run, relevant: RelevantSet, max_docs: int | None, codes, unspilled: list
    ) -> RunPositions:
        """``run`` reduced (``codes``: the lookups of the runs read in pieces, shared;
        ``unspilled``: why a large run could not be spilled, for one notice)."""
        if run.path is None:  # a run in memory: nothing to cache or stream
            return reduce_run(run, relevant, max_docs)
        raw = run.stored()
        key = cache.run_key(raw, relevant, max_docs) if self.use_cache else None
        cached = _cached(key, run.name, relevant) if key else None
        if cached is not None:
            return cached
        large = len(raw) >= _TRIM_BYTES
        pieces = not run.keep and len(raw) > self.streaming.above  # kept columns: whole
        del raw
        positions = (
            streamed_positions(run, relevant, max_docs, self.streaming, codes, unspilled)
            if pieces
            else None
        )
        if positions is None:
            positions = reduce_run(run, relevant, max_docs)
        if large:  # a trim costs about 1 ms: worth it after a large run only
            runtime.after_run()
        if key:
            cache.put(
                "runs",
                key,
                doc=positions.doc,
                rank=positions.rank,
                retrieved=positions.retrieved,
            )
        return positions


def _cached(key: str, name: str, relevant: RelevantSet) -> RunPositions | None:
    """The run ``name`` reduced against ``relevant`` from the cache entry ``key``; None
    where there is none, or it does not fit ``relevant`` (then removed)."""
    cached = cache.get("runs", key)
    if cached is None:
        return None
    try:
        positions = RunPositions(name, cached["doc"], cached["rank"], cached["retrieved"])
        if positions.consistent(relevant):
            return positions
    except KeyError:
        pass
    cache.invalid("runs", key)
    return None


def load_runs(
    sources,
    relevant: RelevantSet,
    max_docs: int | None = None,
    notify: Callable[[str], None] | None = stderr_notice,
    progress: bool | None = None,
    use_cache: bool = False,
    jobs: int | None = None,
    streaming: Streaming = STREAMING,
) -> list[RunPositions]:
    """Read runs (on ``jobs`` threads; default all cores), keeping only relevant
    positions and retrieved counts, each by :class:`ReadPolicy` (``use_cache``,
    ``Options.cache``: run files already reduced against the same judgments come from
    the cache; a run file larger than ``streaming.above`` stored bytes is read in pieces,
    :func:`streamed_positions`: memory is bounded by a piece per thread, not by the run).

    ``sources``: a :class:`~prefeval.io.runs.RunSet`, or what
    :func:`~prefeval.io.runs.resolve_runs` takes.  A file's cache key is the digest of
    its stored bytes, Parquet too; the runs of a many-run Parquet table are read
    together, batch by batch (:func:`prefeval.io.parquet.table_positions`), and not
    cached.
    """

    runs = list(resolve_runs(sources).values())
    policy = ReadPolicy(use_cache, streaming)
    unspilled: list[str] = []  # why a large run could not be spilled (read whole instead)
    relevant.docnos()  # build the shared lookup before threads start
    codes = Codes(relevant)  # the lookups of the runs read in pieces, built once
    tables: dict[str, dict] = {}  # many-run table -> its runs' positions, read once
    for run in runs:
        if run.kind == "table" and run.path not in tables:
            tables[run.path] = parquet.table_positions(
                run.path,
                relevant,
                max_docs,
                run.data,
                runtime.reader_threads(jobs or usable_cpus()),
            )

    def reduce(run):
        if run.kind == "table":
            found = tables[run.path][run.name]
            return RunPositions(run.name, found.doc, found.rank, found.retrieved)
        return policy.positions(run, relevant, max_docs, codes, unspilled)

    # runs are independent: read and reduce them on all cores (pyarrow and numpy
    # release the GIL), keeping at most a few whole runs in memory at once

    # fewer threads where the open-files limit (ulimit -n) leaves too few descriptors
    workers = runtime.reader_threads(min(len(runs), jobs or usable_cpus()))
    with ThreadPoolExecutor(workers) as pool:
        results = pool.map(reduce, runs)
        out = list(
            progress_bar(results, desc="reading runs", unit="run", enable=progress, total=len(runs))
        )
    if use_cache:
        cache.prune()
    # the parse buffers are freed; hand them back to the system (Arrow's allocator keeps
    # them otherwise) before computing
    runtime.after_reading()
    if unspilled and notify is not None:
        notify(unspilled_notice(len(unspilled), unspilled[0]))
    for positions in out:
        missing = positions.missing_queries
        if missing and notify is not None:
            notify(missing_notice(positions.name, missing, relevant.n_queries))
    return out


def unspilled_notice(runs: int, reason: str) -> str:
    """The notice for ``runs`` run files read whole, not spilled: ``reason``, why the
    temporary files could not be written."""
    import tempfile

    files = "a run file" if runs == 1 else f"{runs} run files"
    return (
        f"cannot write temporary files in {tempfile.gettempdir()} ({reason}): {files} read "
        "whole, in more memory; set TMPDIR to a folder with room"
    )


def streamed_positions(
    run: Run,
    relevant: RelevantSet,
    max_docs: int | None,
    streaming: Streaming = STREAMING,
    codes: Codes | None = None,
    unspilled: list | None = None,
) -> RunPositions | None:
    """The positions of a run file (Parquet or text, plain or gzip) read in pieces and
    spilled to temporary files by query (:func:`prefeval.io.spill.spilled_positions`):
    the arrays the whole file gives, in memory bounded by a piece and a partition.  None
    when the file has a problem: the caller then reads it whole, and the whole read
    reports it as it always has (its first problem in the file's order, at its line or
    row), so a problem costs the memory of a whole read, once; so does a temporary
    folder that cannot be written (``$TMPDIR`` full or read-only): its reason is then
    added to ``unspilled``, for one notice."""
    raw = run.stored()
    try:
        assert run.path is not None  # streamed: a file's run
        if is_parquet(raw):
            pieces = parquet.run_pieces(raw, run.path, streaming.piece_rows)
            rows = parquet.row_count(raw, run.path)
        else:
            pieces = text.run_pieces(raw, run.path, streaming.piece_bytes)
            rows = text.rows_estimate(raw)
        parts = streaming.parts(rows)
        return spilled_positions(
            run.name, run.path, pieces, relevant, max_docs, parts, codes, runtime.after_partition
        )
    except InputError:
        return None
    except OSError as error:  # no room or no right to write temporary files (an errno;
        if unspilled is not None and error.errno is not None:  # Arrow's own have none)
            unspilled.append(error.strerror or str(error))
        return None


# --------------------------------------------------------------------------- computing


@dataclass
class _Populations:
    """The pseudo-populations of a query partition, as the engine compares them, in
    order: population ``i`` is of query ``query[i]`` (numbered from 0 in the
    partition) and holds the ``size[i]`` documents ``members[start[i]:][:size[i]]``;
    per family (axis 0, in the order asked) its weight (p(lambda), p(t), ...; summed
    over the family's populations it stands for) and how many of them it stands for
    (``count``; 0: none), a query's populations with all its relevant documents being
    one."""

    query: np.ndarray
    size: np.ndarray
    start: np.ndarray
    members: np.ndarray
    weight: np.ndarray
    count: np.ndarray

    def block(self, at: slice) -> _Populations:
        """The populations of ``at`` (the members shared)."""
        return _Populations(
            self.query[at], self.size[at], self.start[at], self.members,
            self.weight[:, at], self.count[:, at],
        )  # fmt: skip

    def docs(self) -> np.ndarray:
        """(populations x m) their documents, all of size m."""
        m = int(self.size[0]) if len(self.size) else 0
        return self.members[self.start[:, None] + np.arange(m)]


def query_populations(
    relevant: RelevantSet, k: int, binary: bool, families: Sequence[Family]
) -> list[tuple[Family, str, np.ndarray, float]]:
    """The pseudo-populations of query ``k`` of each of ``families``, in their order:
    (family, label, mask over the query's relevant documents or None for all of them,
    weight) (:meth:`~prefeval.measures.family.Family.populations`)."""
    return [
        (family, label, mask, weight)
        for family in families
        for label, mask, weight in family.populations(relevant, k, binary)
    ]


def _populations(
    relevant: RelevantSet, binary: bool, families: Sequence[Family], queries: range | None = None
) -> _Populations:
    """Every query's populations (:meth:`~prefeval.measures.family.Family.populations_of`
    of each family; of the query indices ``queries``, numbered from 0 in that range),
    by size m, then by query, those of a query in the families' order and each
    family's, those of all its relevant documents merged into one ahead of the others
    (its weights summed, in order); a query none of whose populations has all its
    documents has no such one."""
    queries = range(relevant.n_queries) if queries is None else queries
    n, n_f = len(queries), len(families)
    offsets = relevant.offsets
    lo = int(offsets[queries.start])
    m = np.diff(offsets[queries.start : queries.stop + 1]).astype(np.int64)
    # the merged ones: one per query, its members the query's documents
    whole_weight = np.zeros((n_f, n))
    whole_count = np.zeros((n_f, n), dtype=np.int64)
    members = [np.arange(lo, int(offsets[queries.stop]), dtype=np.int64)]
    query, slot, size, start, weight, count = [], [], [], [], [], []
    at = len(members[0])
    for f, family in enumerate(families):
        pops = family.populations_of(relevant, queries, binary)
        q = pops.query - queries.start
        whole = pops.size == m[q]
        np.add.at(whole_weight[f], q[whole], pops.weight[whole])  # in order
        np.add.at(whole_count[f], q[whole], 1)
        part = ~whole
        query.append(q[part])
        slot.append(np.full(int(part.sum()), f))
        size.append(pops.size[part])
        start.append(at + pops.start[part])
        shares = np.zeros((n_f, int(part.sum())))
        shares[f] = pops.weight[part]
        weight.append(shares)
        counts = np.zeros((n_f, int(part.sum())), dtype=np.int64)
        counts[f] = 1
        count.append(counts)
        members.append(pops.docs)
        at += len(pops.docs)
    merged = np.flatnonzero(whole_count.any(axis=0))
    query.insert(0, merged)
    slot.insert(0, np.full(len(merged), -1))
    size.insert(0, m[merged])
    start.insert(0, offsets[queries.start + merged] - lo)
    weight.insert(0, whole_weight[:, merged])
    count.insert(0, whole_count[:, merged])
    query_, slot_, size_ = np.concatenate(query), np.concatenate(slot), np.concatenate(size)
    order = np.lexsort((np.arange(len(query_)), slot_, query_, size_))
    return _Populations(
        query=query_[order],
        size=size_[order],
        start=np.concatenate(start).astype(np.int64)[order],
        members=np.concatenate(members),
        weight=np.concatenate(weight, axis=1)[:, order],
        count=np.concatenate(count, axis=1)[:, order],
    )


def compute_cube(
    runs: list[RunPositions],
    relevant: RelevantSet,
    measures: Sequence[Measure],
    binary: bool = False,
    progress: bool | None = None,
    pairs: np.ndarray | None = None,
    threads: int | None = None,
) -> PreferenceCube:
    """All measures for all run pairs (or only ``pairs``, run index pairs (a, b)) and
    queries (vectorized over pairs and populations; on ``threads`` threads, default all
    cores)."""
    return cube_from_matrix(
        position_matrix(runs, relevant),
        [r.name for r in runs],
        relevant,
        measures,
        binary=binary,
        progress=progress,
        pairs=pairs,
        threads=threads,
    )


def cube_from_matrix(
    matrix: np.ndarray,
    run_names: list[str],
    relevant: RelevantSet,
    measures: Sequence[Measure],
    binary: bool = False,
    progress: bool | None = None,
    pairs: np.ndarray | None = None,
    queries: range | None = None,
    threads: int | None = None,
) -> PreferenceCube:
    """:func:`compute_cube` on a position matrix (runs x relevant documents of ``relevant``);
    ``queries``: only the queries of that range of query indices (a partition);
    ``threads``: how many compare its blocks (default all cores)."""
    part = range(relevant.n_queries) if queries is None else queries
    n_runs, n_q = len(run_names), len(part)
    chosen = run_pairs(n_runs, pairs)
    ia, ja = chosen[:, 0], chosen[:, 1]
    n_p = len(ia)
    asked = families_of(measures)
    families = [family for family, _ in asked]
    # per family its sums (the family's kernel's contributions added per query, in a
    # fixed order) and per query the sum of its populations' sizes (count x m)
    sums = {f.name: f.sums(mine, n_q, n_p) for f, mine in asked}
    sizes = {f.name: np.zeros(n_q, dtype=np.int64) for f in families}

    pops = _populations(relevant, binary, families, part)
    for f, family in enumerate(families):
        np.add.at(sizes[family.name], pops.query, pops.count[f] * pops.size)
    blocks: list = []
    # equal sizes are consecutive (by increasing m): blocks of at most _BLOCK elements
    edges = [0, *(np.flatnonzero(np.diff(pops.size)) + 1).tolist(), len(pops.size)]
    for lo, hi in zip(edges[:-1], edges[1:]) if len(pops.size) else ():
        step = max(1, _BLOCK // max(1, n_p * int(pops.size[lo])))
        blocks.extend(pops.block(slice(i, min(i + step, hi))) for i in range(lo, hi, step))
    # progress in queries: a query counts when the first block holding one of its
    # populations is done
    first = np.full(n_q, len(blocks))
    for i, block in enumerate(blocks):
        np.minimum.at(first, block.query, i)
    new_queries = np.bincount(first[first < len(blocks)], minlength=len(blocks)).tolist()
    seen = int((first < len(blocks)).sum())

    if n_p:
        # blocks are independent: compare on all cores (numpy releases the GIL in the
        # large array operations); accumulate in this thread, in block order

        def work(block):
            return _compare_block(block, matrix, ia, ja, asked)

        with ThreadPoolExecutor(max(1, min(len(blocks), threads or usable_cpus()))) as pool:
            results = pool.map(work, blocks)
            for _fresh, parts in progress_bar(
                zip(new_queries, results),
                desc="comparing runs",
                unit="query",
                enable=progress,
                total=seen,
                count=lambda item: item[0],
            ):
                for name, queries, contribution in parts:
                    for acc, part_sum in zip(sums[name], contribution):
                        _accumulate(acc, queries, part_sum)

    values = np.full((len(measures), n_p, n_q), np.nan)
    where = {m.name: k for k, m in enumerate(measures)}
    for family, mine in asked:
        finished = family.finish(mine, sums[family.name], sizes[family.name])
        for measure, value in zip(mine, finished):
            values[where[measure.name]] = value.T
    return PreferenceCube(
        measures=[m.name for m in measures],
        runs=list(run_names),
        query_ids=list(relevant.query_ids[part.start : part.stop]),
        pairs=chosen,
        values=values,
    )


#: the cube cells a query counts for at least, per run, in sizing partitions
RUN_CELLS = 16


def query_ranges(
    n_queries: int, n_runs: int, n_measures: int, pairs=None, cells: int = PARTITION_CELLS
) -> list[range]:
    """The ranges of query indices compare computes one at a time
    (:func:`cell_ranges`) for that many runs and measures and those ``pairs``
    (default all); :func:`prefeval.engine.dask.compare_partition` is the kernel that
    computes one of them.  A query counts for its cube cells (measures x pairs), and at
    least :data:`RUN_CELLS` per run: a partition also holds every run's positions and
    populations on its queries, which grow with the runs, not the pairs (sized by the cube
    alone, the partitions of the few pairs of ``--against`` would hold a third of the
    queries each; :data:`RUN_CELLS` is set by the 1M-user ``pairs --against`` and
    ``gate`` cases, see bench/RESULTS.md)."""
    per_query = max(n_measures * max(1, len(run_pairs(n_runs, pairs))), RUN_CELLS * n_runs)
    return cell_ranges(n_queries, per_query, cells)


def cell_ranges(n_queries: int, cells_per_query: int, cells: int = PARTITION_CELLS) -> list[range]:
    """Consecutive ranges of query indices holding at most ``cells`` cube cells each
    (``Options.partition_cells``), or one :data:`~prefeval.core.ties.SUM_BLOCK` of queries
    when that is more: the partitions compare computes one at a time."""
    block = ties.SUM_BLOCK  # whole blocks: the summed means do not depend on partitions
    size = max(1, cells // max(1, cells_per_query) // block) * block
    return [range(lo, min(lo + size, n_queries)) for lo in range(0, n_queries, size)]


def matrix_partitions(
    matrix: np.ndarray,
    names: list[str],
    relevant: RelevantSet,
    measures: Sequence[Measure],
    binary: bool = False,
    progress: bool | None = None,
    pairs: np.ndarray | None = None,
    cells: int = PARTITION_CELLS,
    jobs: int = 1,
    finish: Callable | None = None,
):
    """:func:`compute_cube` one query partition (:func:`query_ranges`) at a time, from the
    runs' :func:`~prefeval.core.positions.position_matrix` (the reduced runs themselves no
    longer needed): the cube of each, in query order, so that memory is bounded by a
    partition.  Between partitions the memory the
    previous one's rows and text freed is handed back
    (:func:`~prefeval.engine.runtime.released`).

    ``jobs``: the threads computing partitions at once, each one partition (its blocks
    on ``jobs`` threads when it is the only one); the cubes come in query order, at most
    ``jobs`` computed ahead of the one the caller holds, so memory grows by at most one
    partition per thread.  The cubes do not depend on ``jobs``.  ``finish``: what is
    yielded for each cube instead, made on the thread that computed it (so that the
    caller's thread only merges)."""
    ranges = query_ranges(relevant.n_queries, len(names), len(measures), pairs, cells)
    workers = max(1, min(jobs, len(ranges)))
    finish = finish or (lambda cube: cube)

    def cube(part: range, progress=progress, threads=1) -> tuple[int, object]:
        """(queries of the partition, ``finish`` of its cube)."""
        made = cube_from_matrix(
            matrix, names, relevant, measures, binary=binary, progress=progress, pairs=pairs,
            queries=part, threads=threads,
        )  # fmt: skip
        return len(made.query_ids), finish(made)

    if workers == 1:
        for part in runtime.released(ranges):
            yield cube(part, threads=jobs)[1]
        return
    # the kernels release the GIL in their large numpy operations: threads share the
    # matrix (docs/architecture.md, "parallel local engine", on threads vs processes)
    with ThreadPoolExecutor(workers) as pool:
        cubes = in_order(pool, functools.partial(cube, progress=False), ranges, workers)
        try:
            for done in runtime.released(
                progress_bar(
                    cubes, desc="comparing runs", unit="query", enable=progress,
                    total=relevant.n_queries, count=lambda done: done[0],
                )
            ):  # fmt: skip
                yield done[1]
        finally:  # stopped early (an error, a closed output): the partitions not started
            cubes.close()  # are dropped


def _accumulate(acc: np.ndarray, queries: np.ndarray | range, contribution: np.ndarray) -> None:
    ordered = np.sort(queries)
    if not (ordered[1:] == ordered[:-1]).any():  # each query once
        acc[queries] += contribution
    else:
        np.add.at(acc, queries, contribution)


def _compare_block(block, matrix, ia, ja, asked) -> list[tuple]:
    """Compare all run pairs on a block of equal-size populations.

    Returns (family name, queries, contributions) for each family of ``asked``
    (:func:`prefeval.measures.families_of`) with populations in the block: its
    kernel's (:meth:`~prefeval.measures.family.Family.compare`) on them.
    """
    docs = block.docs()  # (B, m)
    # sorted position vectors: (B, runs, m)
    positions = np.sort(np.moveaxis(matrix[:, docs], 0, 1), axis=-1)
    pos_a = positions[:, ia, :]
    pos_b = positions[:, ja, :]
    sign_diff = np.sign(pos_b - pos_a).astype(np.int8)  # sgn(f'_i - f_i): + when a is earlier
    out = []
    for f, (family, mine) in enumerate(asked):
        count = block.count[f]
        if count.any():
            sel = count > 0
            weight = block.weight[f][sel]
            contribution = family.compare(
                mine, sign_diff[sel], pos_a[sel], pos_b[sel], weight, count[sel]
            )
            out.append((family.name, block.query[sel], contribution))
    return out


# --------------------------------------------------------------------------- the engine


class LocalEngine:
    """The local engine: this process, ``Options.jobs`` query partitions at a time on
    as many threads (:func:`matrix_partitions`), or the whole cube at once where the
    analysis keeps it whole (``Want.values``, a cube in the cache, one partition), that
    cube cached with ``Options.cache``."""

    def prepare(self) -> None:
        """Nothing to prepare here."""

    def __enter__(self) -> LocalEngine:
        return self

    def __exit__(self, *exc) -> None:
        """Nothing held."""

    blocks = staticmethod(blocks_here)

    def partitions(self, job: Job, want: Want) -> Partitions:
        options = job.options
        assert job.qrels is not None  # the local engine keeps the job's judgments
        relevant = relevant_with_notice(job.qrels, options.relevance_level, job.notify)
        positions = load_runs(
            job.runs, relevant, options.max_docs, notify=job.notify,
            progress=options.progress, use_cache=options.cache, jobs=options.jobs,
        )  # fmt: skip
        names = [p.name for p in positions]
        measures = [m.name for m in job.measures]
        chosen = run_pairs(len(names), job.pairs)
        ranges = query_ranges(
            relevant.n_queries, len(names), len(measures), job.pairs, options.partition_cells
        )
        both = want.both_directions
        schema = summary_schema(measures, names, relevant.query_ids, ranges, chosen, both)
        if want.values or want.rates:
            # analysis commands often run one after another on the same runs: the cube
            key = None
            if options.cache:
                key = cache.cube_key(positions, relevant, job.measures, options.binary)
            cube = _cached_cube(key) if key else None
            if want.values or cube is not None or len(ranges) <= 1:
                if cube is None:
                    cube = compute_cube(
                        positions, relevant, job.measures, binary=options.binary,
                        progress=options.progress, pairs=job.pairs, threads=options.jobs,
                    )  # fmt: skip
                    if job.pairs is None:  # with --against: not the cube the cache keeps
                        if key:
                            cache.put("cubes", key, **cube.arrays())
                        if options.cache:
                            cache.prune()
                elif job.pairs is not None:
                    cube = cube.select_pairs(job.pairs)
                whole = PartitionResult(None, None, None, {}, values=cube.values)
                return Partitions(
                    relevant, names, measures, cube.pairs, [range(relevant.n_queries)], schema,
                    _one(whole), positions=positions,
                )  # fmt: skip
        # the reduced runs are let go once their position matrix is made: at a million
        # users they weigh three times the matrix (kept for label sampling instead)
        matrix = position_matrix(positions, relevant)
        del positions
        results = matrix_partitions(
            matrix, names, relevant, job.measures, binary=options.binary,
            progress=options.progress, pairs=job.pairs, cells=options.partition_cells,
            jobs=options.jobs, finish=functools.partial(_computed, want=want),
        )  # fmt: skip
        return Partitions(
            relevant, names, measures, chosen, ranges, schema, results,
            matrix=matrix if want.positions else None,
        )  # fmt: skip


def _one(result: PartitionResult) -> Generator[PartitionResult, None, None]:
    yield result


def _computed(cube: PreferenceCube, want: Want) -> PartitionResult:
    """The :class:`~prefeval.engine.job.PartitionResult` of a partition's cube."""
    return partition_result(cube.both_directions() if want.both_directions else cube, want)


def _cached_cube(key: str) -> PreferenceCube | None:
    """The cube stored under ``key``, or None (an inconsistent entry is removed)."""
    arrays = cache.get("cubes", key)
    if arrays is None:
        return None
    cube = PreferenceCube.from_arrays(arrays)
    if cube is None:
        cache.invalid("cubes", key)
    return cube
