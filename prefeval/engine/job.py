"""The one engine interface: a :class:`Job` is streamed as query partitions
(:class:`Partitions`, each a :class:`PartitionResult` reduced where it was computed: in
this process or on a Dask worker), and folded here, in query order, by the same code
whatever the engine: compare's tables (:func:`compare_frames`, :func:`whole_frame`) and
the analysis commands' evidence (:func:`fold_evidence`).

An engine is anything with ``partitions(job, want) -> Partitions`` and ``blocks`` (other
work in independent blocks: the randomized HSD's trials) (:class:`Engine`):
:class:`prefeval.engine.local.LocalEngine` and :class:`prefeval.engine.dask.DaskEngine`,
chosen from the options in one place (:func:`prefeval.engine.engines.engine_for`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ..core import ties
from ..core.cube import (
    PackedSigns,
    PreferenceCube,
    SummaryAccumulator,
    SummarySchema,
    rate_keeper,
    win_rates,
)
from ..core.moments import BlockMoments, PairMoments
from ..core.parallel import in_order
from ..core.positions import RunPositions
from ..core.progress import stderr_notice
from ..core.qrels import Qrels, RelevantSet
from ..core.rows import Rows, as_frame
from ..io.runs import RunSet
from ..options import Options

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class Job:
    """One computation of preferences: the judgments, the runs (a resolved
    :class:`~prefeval.io.runs.RunSet`), the measures (:class:`~prefeval.measures.Measure`),
    the run index pairs (None: all), the settings, and where notices go."""

    qrels: Qrels | None  # None once the Dask tasks carry their judgments
    runs: RunSet
    measures: list
    options: Options
    pairs: np.ndarray | None = None
    notify: Callable[[str], None] | None = stderr_notice


@dataclass(frozen=True)
class Want:
    """What each partition brings back besides its sums: ``rows``, its per-query rows
    (compare; ``both_directions``: each pair then its reverse); ``values``, its
    preferences (the whole cube, for the API and the analysis); ``rates``, per measure
    its win rates and block moments (``order``, ``discpower``: the cube never whole;
    without ``win_rates`` only the rates' tally is kept, with ``spill`` in a temporary
    file; with ``signs`` also the preferences' signs, packed: ``agree``);
    ``positions``, the reduced runs."""

    rows: bool = False
    both_directions: bool = False
    values: bool = False
    rates: bool = False
    win_rates: bool = True
    signs: bool = False
    spill: bool = False
    positions: bool = False


@dataclass
class PartitionResult:
    """What one partition gives back: its per-query rows in pieces (None without
    ``Want.rows``), the sums of its :data:`~prefeval.core.ties.SUM_BLOCK` blocks of
    queries (blocks x measures x pairs), the counts of defined values (measures x pairs),
    and per run the number of its queries the run has no results for."""

    #: the per-query rows, piece by piece: each :class:`~prefeval.core.rows.Rows` (or a
    #: DataFrame of plain strings); a list of one piece where the partition was computed,
    #: the pieces fetched one after the other from a Dask worker
    rows: Iterable[Rows | pd.DataFrame] | None
    block_sums: np.ndarray | None  # None: a whole cube given as ``values``
    counts: np.ndarray | None
    missing: dict[str, int]
    #: with ``Want.values``: the partition's preferences (measures x pairs x its queries)
    values: np.ndarray | None = None
    #: with ``Want.rates``: per measure its win rates
    #: (:func:`prefeval.core.cube.win_rates`) and its :class:`~prefeval.core.moments.BlockMoments`
    rates: dict | None = None
    #: with ``Want.rates`` and ``signs``: per measure its preferences' signs
    #: (:meth:`prefeval.core.cube.PackedSigns.piece`)
    signs: dict | None = None
    #: with ``positions``: each run's :class:`~prefeval.core.positions.RunPositions` on the
    #: partition's relevant documents (numbered from 0 in the partition)
    positions: list | None = None


@dataclass(frozen=True)
class Partitions:
    """A job's partitions as an engine streams them: the evaluated judgments
    (:class:`~prefeval.core.qrels.RelevantSet`), the run names, the measure names, the
    pairs computed, the query ranges, the summary's schema (the last
    partition's queries, ``both_directions`` applied), the results in query order (a
    result's ``rows``: its pieces, read before the next
    result is asked for), the whole runs' positions (or their position matrix) when the
    engine keeps them, and whether the fold keeps win rates in a temporary file
    (:func:`~prefeval.core.cube.rate_keeper`; the Dask engine's choice)."""

    relevant: RelevantSet | None  # None: compare on Dask (the tasks carry the judgments)
    names: list[str]
    measures: list[str]
    pairs: np.ndarray
    ranges: list[range]
    summary: SummarySchema | None
    results: Generator[PartitionResult, None, None]
    positions: list | None = None
    spill: bool = False
    #: with ``Want.positions``, where the engine keeps it instead of ``positions``: the
    #: runs' :func:`~prefeval.core.positions.position_matrix` (runs x relevant documents)
    matrix: np.ndarray | None = None


class Engine(Protocol):
    """Computes a job's preferences partition by partition (:class:`Partitions`), and
    independent blocks of other work (:meth:`blocks`: the randomized HSD's trials).
    Used as a context manager (``with engine_for(options) as engine``), it holds what it
    computes on (a Dask cluster) from its first use to the end of the ``with``, for the
    partitions and the blocks that follow them; otherwise each call lets it go."""

    def prepare(self) -> None:
        """Called by a command that streams its output, before it reads its inputs."""

    def partitions(self, job: Job, want: Want) -> Partitions:
        """The job's partitions, each bringing back what ``want`` asks for."""

    def blocks(
        self, work: Callable, shared, items: Sequence, *, threads: int = 1, ready: Iterable = ()
    ) -> Iterator:
        """``work(shared, item)`` for each of ``items`` (a module-level function: it may
        run in another process), the results in the items' order: on ``threads`` threads
        here (:func:`blocks_here`), or where the engine computes (``shared`` sent there
        once); ``ready``: what to yield first while the work gets ready here (its kernel
        compiling), where it runs here."""

    def __enter__(self) -> Engine: ...

    def __exit__(self, *exc) -> None: ...


def blocks_here(
    work: Callable, shared, items: Sequence, *, threads: int = 1, ready: Iterable = ()
) -> Iterator:
    """:meth:`Engine.blocks` in this process: ``ready``'s items, then ``work(shared,
    item)`` for each item on ``threads`` threads (work that releases the GIL), results in
    the items' order, at most two per thread ahead; the calls not started are dropped
    when the caller stops (an error, Ctrl-C)."""
    yield from ready
    workers = max(1, min(threads, len(items)))
    if workers == 1:
        yield from (work(shared, item) for item in items)
        return
    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        yield from in_order(pool, functools.partial(work, shared), items, 2 * workers)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def partition_result(
    cube: PreferenceCube,
    want: Want,
    *,
    sum_block: int | None = None,
    plain: bool = False,
    missing: dict[str, int] | None = None,
    positions: list | None = None,
) -> PartitionResult:
    """What a partition gives back (:class:`PartitionResult`), from its cube
    (``both_directions`` already applied), wherever it was computed: its per-query rows
    (one piece; ``plain``: a DataFrame of the ids as plain strings), its block sums
    (of ``sum_block`` queries) and counts, its values, its win rates and block moments,
    and the ``missing`` queries and ``positions`` of its runs."""
    values = cube.values
    frame = None
    if want.rows:
        frame = cube.to_rows(per_query=True, summary=False)
        if plain:  # a DataFrame of plain strings
            frame = frame.to_frame()
            for column in ("measure", "run_a", "run_b", "query_id"):
                frame[column] = frame[column].astype(str)
    rates = None
    if want.rates:
        rates = {
            name: (
                win_rates(values[k], cube.pairs, len(cube.runs)),
                BlockMoments.of(values[k], block=sum_block),
            )
            for k, name in enumerate(cube.measures)
        }
    signs = None
    if want.rates and want.signs:
        signs = {name: PackedSigns.piece(values[k]) for k, name in enumerate(cube.measures)}
    return PartitionResult(
        None if frame is None else [frame],
        ties.block_sums(values, axis=2, block=sum_block),
        np.sum(~np.isnan(values), axis=2),
        missing or {},
        values=values if want.values else None,
        rates=rates,
        signs=signs,
        positions=positions,
    )


def compare_tables(engine: Engine, job: Job, per_query: bool, summary: bool, both: bool):
    """compare on ``engine``, for the CLI and the API alike: (the tables of
    :func:`compare_frames`, memory bounded by a partition; the summary's schema, for
    :func:`whole_frame`)."""
    parts = engine.partitions(job, Want(rows=per_query, both_directions=both))
    return compare_frames(parts, per_query, summary), parts.summary


def summary_schema(
    measures: list[str], names: list[str], query_ids, ranges: list[range], pairs, both: bool
) -> SummarySchema:
    """The schema of compare's summary: its measures, runs and ``pairs``, the last
    partition's queries (a Parquet output's dictionary of query ids is that partition's
    ids and ``all``, as the partition's own rows give)."""
    last = list(query_ids[ranges[-1].start : ranges[-1].stop]) if ranges else []
    schema = SummarySchema(measures, names, last, pairs)
    return schema.both_directions() if both else schema


def compare_frames(
    parts: Partitions, per_query: bool, summary: bool
) -> Iterator[Rows | pd.DataFrame]:
    """compare's tables (:class:`~prefeval.core.rows.Rows`, or DataFrames where a Dask
    worker computed them): the per-query rows of each partition (with ``per_query``), as
    they come, then the summary rows (with ``summary``), added block by block in query
    order (:class:`~prefeval.core.cube.SummaryAccumulator`): memory holds one partition."""
    schema = parts.summary
    assert schema is not None  # compare's partitions carry the summary's schema
    total = SummaryAccumulator()
    try:
        for result in parts.results:
            # compare's partitions are streamed: each with its sums and counts
            assert result.block_sums is not None and result.counts is not None
            total.add_blocks(result.block_sums, result.counts, schema)
            if per_query:
                assert result.rows is not None  # asked for with ``per_query``
                yield from result.rows
    finally:
        parts.results.close()  # a Dask client and its cluster, also when writing stops
    if summary:
        yield total.rows()


def whole_frame(frames: Iterable[Rows | pd.DataFrame], schema: SummarySchema, summary: bool):
    """The rows of :func:`compare_frames` in the order of the whole cube's
    :meth:`~prefeval.core.cube.PreferenceCube.to_frame` (measure, pair, query, then the
    summary rows): the API's table."""
    tables = [as_frame(frame) for frame in frames]
    tail = [tables.pop()] if summary and tables else []
    lookup = np.full((len(schema.runs), len(schema.runs)), -1, dtype=np.int64)
    lookup[schema.pairs[:, 0], schema.pairs[:, 1]] = np.arange(len(schema.pairs))
    keys = []
    for frame in tables:  # codes into the cube's measures and runs
        m = frame["measure"].cat.codes.to_numpy(np.int64)
        pair = lookup[frame["run_a"].cat.codes.to_numpy(), frame["run_b"].cat.codes.to_numpy()]
        keys.append(m * max(1, len(schema.pairs)) + pair)
    tables += tail
    if not tables:
        return schema.frame()
    import pandas as pd

    whole = pd.concat(tables, ignore_index=True) if len(tables) > 1 else tables[0]
    if keys:
        order = np.argsort(np.concatenate(keys), kind="stable")
        order = np.concatenate([order, np.arange(len(order), len(whole))])
        whole = whole.take(order).reset_index(drop=True)
    return whole


@dataclass
class Gathered:
    """What :func:`fold_evidence` folds: the evaluated judgments, the run names, and the whole
    cube, or the streamed win rates and moments, and the reduced runs (or their position
    matrix)."""

    relevant: RelevantSet
    names: list[str]
    cube: PreferenceCube | None = None
    streamed: dict | None = None
    streamed_pairs: np.ndarray | None = None
    signs: dict | None = None
    positions: list | None = None
    matrix: np.ndarray | None = None


def fold_evidence(parts: Partitions, want: Want) -> Gathered:
    """The analysis commands' evidence, folded from the partitions in query order: the
    whole cube (from their ``values``), or per measure the win rates stacked (without
    ``win_rates`` only their :class:`~prefeval.core.cube.RankTally`) and the pair moments
    merged block by block (from their ``streamed`` rates and
    :class:`~prefeval.core.moments.BlockMoments`: the same bits as from the whole cube),
    and with ``signs`` their :class:`~prefeval.core.cube.PackedSigns`; with
    ``positions`` the reduced runs, the engine's or merged from the partitions' (or the
    position matrix the engine kept)."""
    relevant = parts.relevant
    assert relevant is not None  # the analyses' partitions carry the judgments
    names, n_queries = parts.measures, relevant.n_queries
    n_runs = len(parts.names)
    values: list = []
    rates: dict = {}
    moments: dict = {}
    signs: dict = {}
    pieces: list[list] | None = None

    def start(name: str) -> None:  # what keeps a streamed measure's rates and moments
        rates[name] = rate_keeper(n_queries, n_runs, want.win_rates, parts.spill or want.spill)
        moments[name] = PairMoments(len(parts.pairs))

    for k, result in enumerate(parts.results):  # to the end: notices, then closing
        if result.values is not None:
            values.append(result.values)
        if result.rates is not None:
            for name, (rows, blocks) in result.rates.items():
                if name not in rates:
                    start(name)
                rates[name].add(rows)
                moments[name].merge(blocks)
        for name, piece in (result.signs or {}).items():
            signs.setdefault(name, PackedSigns(len(parts.pairs))).append(piece)
        if result.positions is not None:
            pieces = pieces or [[] for _ in parts.names]
            shift = int(relevant.offsets[parts.ranges[k].start])
            for i, run in enumerate(result.positions):
                pieces[i].append((run.doc + shift, run.rank, run.retrieved))
    gathered = Gathered(relevant, list(parts.names), positions=parts.positions, matrix=parts.matrix)
    if rates or (not values and want.rates):
        for name in names:  # a measure without partitions: nothing added
            if name not in rates:
                start(name)
        gathered.streamed = {name: (rates[name], moments[name]) for name in names}
        gathered.streamed_pairs = parts.pairs
        if want.signs:
            gathered.signs = {
                name: signs.get(name) or PackedSigns(len(parts.pairs)) for name in names
            }
    else:
        shape = (len(names), len(parts.pairs), 0)
        whole = values[0] if len(values) == 1 else None
        if whole is None:
            whole = np.concatenate(values, axis=2) if values else np.zeros(shape)
        gathered.cube = PreferenceCube(
            names, list(parts.names), list(relevant.query_ids), parts.pairs, whole
        )
    if pieces is not None:
        empty = (np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int64))
        gathered.positions = [
            RunPositions(name, *(np.concatenate([p[j] for p in run_pieces] or [empty[j]])
                                 for j in range(3)))
            for name, run_pieces in zip(parts.names, pieces)
        ]  # fmt: skip
    return gathered
