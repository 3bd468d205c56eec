"""The pairwise preference engine.

Per query, every pseudo-population (the binary one, the graded ones of
rpp-sigir2022 eq. 5, the subtopic ones of eq. 6) is a set of relevant documents;
its sorted position vectors for all runs form a runs x m matrix.  Populations of
equal size m are stacked and compared for all run pairs at once:
D = sgn(f'_i - f_i) is computed once and every measure is read off it.
The result is a :class:`PreferenceCube`, measures x pairs x queries.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from . import cache, limits, ties
from .errors import InputError
from .measures import Measure
from .measures.lexicographic import lexiprecision, lexirecall, rr_lexiprecision
from .measures.rpp import WEIGHTINGS, graded_populations, rpp_values, subtopic_populations
from .positions import RunPositions, position_matrix, run_positions
from .progress import progress_bar
from .qrels import Qrels, RelevantSet
from .readers import name_runs, parse_any_run, read_raw, read_run

COLUMNS = ["measure", "run_a", "run_b", "query_id", "value"]
SUMMARY_QUERY = "all"
# elements of one (populations x pairs x m) block: bounds the engine's working memory
_BLOCK = 1 << 22
#: stored bytes of a run file after which its freed parse memory is handed back at once
_TRIM_BYTES = 8 << 20
#: cube cells (measures x pairs x queries) of one query partition of compare: bounds the
#: memory of the preferences held at once (32 MiB of float64 values, ~4M rows of output)
PARTITION_CELLS = 1 << 22


def stderr_notice(message: str) -> None:
    print(f"prefeval: {message}", file=sys.stderr)


@dataclass
class PreferenceCube:
    """Preferences Delta(run_a, run_b) for every measure, run pair and query.

    ``values[k, p, q]`` is measure ``measures[k]`` for pair ``pairs[p]`` (indices
    into ``runs``; every unordered pair with run_a before run_b in input order, unless
    chosen otherwise: :func:`against_pairs`, :meth:`select_pairs`) on query
    ``query_ids[q]``; NaN where the measure does not apply to the query.
    """

    measures: list[str]
    runs: list[str]
    query_ids: list[str]
    pairs: np.ndarray
    values: np.ndarray

    def summary(self) -> np.ndarray:
        """Mean over evaluated queries, measures x pairs (summed in query order, so the
        same for any order of the runs; a mean that ties with 0 is 0.0)."""
        return ties.snap_zero(ties.defined_mean(self.values, axis=2))

    def arrays(self) -> dict[str, np.ndarray]:
        """The cube as named numpy arrays (what the cache stores)."""
        return {
            "measures": np.array(self.measures, dtype=str),
            "runs": np.array(self.runs, dtype=str),
            "query_ids": np.array(self.query_ids, dtype=str),
            "pairs": self.pairs,
            "values": self.values,
        }

    @classmethod
    def from_arrays(cls, arrays: dict) -> PreferenceCube | None:
        """The cube of :meth:`arrays`, or None when they are missing or inconsistent."""
        try:
            cube = cls(
                measures=[str(x) for x in arrays["measures"]],
                runs=[str(x) for x in arrays["runs"]],
                query_ids=[str(x) for x in arrays["query_ids"]],
                pairs=arrays["pairs"],
                values=arrays["values"],
            )
        except (KeyError, ValueError, TypeError):
            return None
        shape = (len(cube.measures), len(cube.pairs), len(cube.query_ids))
        if cube.values.shape != shape or cube.pairs.shape != (shape[1], 2):
            return None
        return cube

    def select_pairs(self, pairs: np.ndarray) -> PreferenceCube:
        """The preferences of ``pairs`` (run index pairs, either orientation of pairs of
        this cube): a reversed pair's values negated, exactly (0.0 stays 0.0)."""
        pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        n = len(self.runs)
        where = np.full((n, n), -1, dtype=np.int64)
        where[self.pairs[:, 0], self.pairs[:, 1]] = np.arange(len(self.pairs))
        forward = where[pairs[:, 0], pairs[:, 1]]
        backward = where[pairs[:, 1], pairs[:, 0]]
        if np.any((forward < 0) & (backward < 0)):
            raise ValueError("select_pairs: a pair this cube does not hold")
        values = self.values[:, np.where(forward >= 0, forward, backward), :]
        flip = forward < 0
        values[:, flip, :] = 0.0 - values[:, flip, :]
        return PreferenceCube(self.measures, self.runs, self.query_ids, pairs, values)

    def both_directions(self) -> PreferenceCube:
        """Every pair followed by its reverse, Delta(b, a) = -Delta(a, b) exactly."""
        pairs = np.empty((2 * len(self.pairs), 2), dtype=np.int64)
        pairs[0::2], pairs[1::2] = self.pairs, self.pairs[:, ::-1]
        return self.select_pairs(pairs)

    def reindex(self, query_ids: list[str]) -> PreferenceCube:
        """The same preferences over ``query_ids`` (NaN for queries without values)."""
        where = {q: i for i, q in enumerate(self.query_ids)}
        values = np.full((*self.values.shape[:2], len(query_ids)), np.nan)
        src = np.array([where.get(q, -1) for q in query_ids], dtype=np.int64)
        values[:, :, src >= 0] = self.values[:, :, src[src >= 0]]
        return PreferenceCube(self.measures, self.runs, list(query_ids), self.pairs, values)

    def to_frame(
        self, per_query: bool = False, summary: bool = True, means: np.ndarray | None = None
    ) -> pd.DataFrame:
        """Tidy rows ``measure, run_a, run_b, query_id, value``: per-query rows first
        (measure, pair, query order), then summary rows with query_id ``all`` (the
        ``means``, measures x pairs, when given: merged from query partitions)."""
        n_m, n_p, n_q = self.values.shape
        pairs = self.pairs if len(self.pairs) else np.zeros((0, 2), dtype=np.int64)
        defined = ~np.isnan(self.values) if per_query else None
        if summary:
            means = self.summary() if means is None else means
        # the codes of each column filled measure by measure in its smallest integer type
        # (as pandas keeps them): a partition's rows take no more than the frame itself
        counts = defined.sum(axis=(1, 2)) if per_query else np.zeros(n_m, dtype=np.int64)
        n_rows = int(counts.sum()) + (int((~np.isnan(means)).sum()) if summary else 0)
        m = np.empty(n_rows, dtype=_code_type(n_m))
        a = np.empty(n_rows, dtype=_code_type(len(self.runs)))
        b = np.empty(n_rows, dtype=a.dtype)
        q = np.empty(n_rows, dtype=_code_type(n_q + 1))
        v = np.empty(n_rows)
        at = 0
        for k in range(n_m) if per_query else ():
            flat = np.flatnonzero(defined[k])  # (pair, query) in pair, query order
            pair, query = np.divmod(flat, max(n_q, 1))
            end = at + len(flat)
            m[at:end] = k
            a[at:end], b[at:end] = pairs[pair, 0], pairs[pair, 1]
            q[at:end] = query
            v[at:end] = self.values[k].reshape(-1)[flat]
            at = end
        if summary:
            km, kp = np.nonzero(~np.isnan(means))
            m[at:], a[at:], b[at:] = km, pairs[kp, 0], pairs[kp, 1]
            q[at:] = n_q
            v[at:] = means[km, kp]
        return pd.DataFrame(
            {
                "measure": pd.Categorical.from_codes(m, self.measures),
                "run_a": pd.Categorical.from_codes(a, self.runs),
                "run_b": pd.Categorical.from_codes(b, self.runs),
                "query_id": pd.Categorical.from_codes(q, [*self.query_ids, SUMMARY_QUERY]),
                "value": v,
            }
        )


def _code_type(n: int):
    """The smallest signed integer type holding codes 0..n-1 (pandas' choice for n
    categories)."""
    for kind in (np.int8, np.int16, np.int32):
        if n < np.iinfo(kind).max:
            return kind
    return np.int64


def against_pairs(runs: Sequence[str], against: Sequence[str]) -> np.ndarray:
    """Run index pairs (a, R) for every run R of ``against`` (in that order) and every
    other run a (in ``runs`` order), R as run_b; the pair of two runs of ``against`` once,
    run_a the one listed first in ``runs``.  ValueError for a name not in ``runs``."""
    where = {name: i for i, name in enumerate(runs)}
    unknown = [name for name in against if name not in where]
    if unknown:
        raise ValueError(
            f"--against {unknown[0]}: no such run; the runs are {', '.join(map(str, runs))}"
        )
    chosen = [where[name] for name in dict.fromkeys(against)]
    pairs = [
        (a, r) for r in chosen for a in range(len(runs)) if a != r and not (a in chosen and a > r)
    ]
    return np.array(pairs, dtype=np.int64).reshape(-1, 2)


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


def load_runs(
    sources: Sequence,
    relevant: RelevantSet,
    max_docs: int | None = None,
    notify: Callable[[str], None] | None = stderr_notice,
    progress: bool | None = None,
) -> list[RunPositions]:
    """Read runs (on all cores), keeping only relevant positions and retrieved counts;
    run files already reduced against the same judgments come from the cache.

    ``sources`` are paths (TREC text, gzip or Parquet), pandas DataFrames, or a mapping
    name -> source.  A file's cache key is the digest of its stored bytes, Parquet too;
    the runs of a many-run Parquet table are read together, batch by batch
    (:func:`prefeval.parquet.table_positions`), and not cached.
    """
    from . import parquet

    named = name_runs(sources)
    items = [(None, source) for _, source in named]
    names = [name for name, _ in named]
    relevant.docnos()  # build the shared lookup before threads start
    tables: dict[str, dict] = {}  # many-run table -> its runs' positions, read once
    for _, source in named:
        if isinstance(source, parquet.TableRun) and source.path not in tables:
            tables[source.path] = parquet.table_positions(source.path, relevant, max_docs)

    def reduce(job):
        (_, source), name = job
        if isinstance(source, parquet.TableRun):
            found = tables[source.path][source.name]
            return RunPositions(name, found.doc, found.rank, found.retrieved)
        if isinstance(source, (str, os.PathLike)):
            path = os.fspath(source)
            raw = read_raw(path)
            key = cache.run_key(raw, relevant, max_docs) if cache.enabled() else None
            cached = cache.get("runs", key) if key else None
            if cached is not None:
                try:
                    positions = RunPositions(
                        name, cached["doc"], cached["rank"], cached["retrieved"]
                    )
                    if positions.consistent(relevant):
                        return positions
                except KeyError:
                    pass
                cache.invalid("runs", key)
            columns = parse_any_run(raw, path, name, known=relevant.docnos())
            large = len(raw) >= _TRIM_BYTES
            del raw  # the file's bytes: not needed while reducing (a whole run's worth)
            positions = run_positions(columns, relevant, max_docs)
            del columns
            if large:  # a trim costs about 1 ms: worth it after a large run only
                release_free_memory()
            if key:
                cache.put(
                    "runs",
                    key,
                    doc=positions.doc,
                    rank=positions.rank,
                    retrieved=positions.retrieved,
                )
            return positions
        return run_positions(read_run(source, name=name), relevant, max_docs)

    # runs are independent: read and reduce them on all cores (pyarrow and numpy
    # release the GIL), keeping at most a few whole runs in memory at once
    from concurrent.futures import ThreadPoolExecutor

    jobs = list(zip(items, names))
    # fewer threads where the open-files limit (ulimit -n) leaves too few descriptors
    workers = limits.reader_threads(min(len(jobs), os.cpu_count() or 1))
    with ThreadPoolExecutor(workers) as pool:
        results = pool.map(reduce, jobs)
        out = list(
            progress_bar(results, desc="reading runs", unit="run", enable=progress, total=len(jobs))
        )
    if cache.enabled():
        cache.prune()
    # the parse buffers are freed; hand them back to the system (Arrow's allocator keeps
    # them otherwise: some 300 MB after 21 recsys runs) before computing
    release_free_memory()
    for positions in out:
        missing = positions.missing_queries
        if missing and notify is not None:
            notify(
                f"run {positions.name}: no results for {missing} of {relevant.n_queries} "
                "evaluated queries; evaluated as retrieving nothing"
            )
    return out


def release_free_memory() -> None:
    """Hand the memory freed so far back to the system: Arrow's pool (mimalloc) and the
    C heap's free pages (glibc's ``malloc_trim``; nothing elsewhere).  Called after each
    large run read (:data:`_TRIM_BYTES`) and after all of them, between query
    partitions and once the evidence of an analysis is made:
    without it what one step freed (parse buffers, a partition's rows and text) stays
    resident beside the next (two recsys runs read at once held 1.1 GB, not 0.9)."""
    import ctypes

    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    trim = limits.glibc("malloc_trim")
    if trim is not None:
        trim.argtypes = [ctypes.c_size_t]
        trim(0)


#: allocations of at least this many bytes that :func:`map_large_allocations` has glibc's
#: malloc map (and unmap when freed): glibc's initial threshold, held fixed
MMAP_THRESHOLD = 128 << 10


def map_large_allocations() -> None:
    """Hold glibc's mmap threshold at :data:`MMAP_THRESHOLD` bytes: every larger array
    is mapped and given back when freed.  By default each freed mapped block raises the
    threshold (up to 32 MiB), and the arrays of the next query partition then come from
    the heap, which keeps them after they are freed: a Dask client taking a million
    users' rows piece after piece held 170 MB more, and each worker up to 100 MB.  It
    costs page faults: about 16% more time for the local engine, and 2.2 times the time
    of the randomized HSD's trials, whose arrays are made anew each trial.  The CLI sets
    it for ``compare --engine dask`` only, before reading (nothing elsewhere than
    glibc)."""
    import ctypes

    mallopt = limits.glibc("mallopt")
    if mallopt is not None:
        mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        mallopt(-3, MMAP_THRESHOLD)  # M_MMAP_THRESHOLD


# --------------------------------------------------------------------------- computing


@dataclass
class _Population:
    """One pseudo-population of a query: its relevant documents and its place in each
    family.  ``rpp``/``strpp``: the weight p(lambda) or p(t) (weighted RPP);
    ``rpp_n``/``strpp_n``: how many populations of the family it stands for (the
    integer form of uniform RPP, where eq. 5 and 6 reduce to a sum of signs over all
    populations divided by the sum of their sizes)."""

    query: int
    docs: np.ndarray
    rpp: float = 0.0
    strpp: float = 0.0
    rpp_n: int = 0
    strpp_n: int = 0
    lexi: bool = False  # the binary population, where lexicographic measures are read


def query_populations(
    relevant: RelevantSet, k: int, binary: bool, want: set[str]
) -> list[tuple[str, str, np.ndarray, float]]:
    """The pseudo-populations of query ``k`` for the RPP families in ``want``:
    (family, label, mask over the query's relevant documents, weight).  ``rpp``: the
    binary population (label ``""``, weight 1) with ``binary``, else one per grade
    lambda (label lambda, p(lambda), eq. 5); ``strpp``: one per subtopic t (label its
    id, p(t)) and the background (label ``*``), eq. 6."""
    lo, hi = int(relevant.offsets[k]), int(relevant.offsets[k + 1])
    out = []
    if "rpp" in want:
        if binary:
            out.append(("rpp", "", np.ones(hi - lo, dtype=bool), 1.0))
        else:
            for lam, mask, weight in graded_populations(relevant.grade[lo:hi]):
                out.append(("rpp", f"{lam:g}", mask, weight))
    if "strpp" in want and relevant.has_subtopics:
        ids = relevant.subtopic_ids[k]
        for t, mask, weight in subtopic_populations(relevant.subtopics[k]):
            out.append(("strpp", "*" if t is None else str(ids[t]), mask, weight))
    return out


def _populations(
    relevant: RelevantSet, binary: bool, want: set[str], queries: range | None = None
) -> list[_Population]:
    """Every query's populations (:func:`query_populations`; of the query indices
    ``queries``, numbered from 0 in that range), those of all its relevant documents
    merged into one (its weights summed, in order)."""
    pops: list[_Population] = []
    queries = range(relevant.n_queries) if queries is None else queries
    for k in queries:
        lo, hi = int(relevant.offsets[k]), int(relevant.offsets[k + 1])
        docs = np.arange(lo, hi)
        at = k - queries.start
        base = _Population(at, docs, lexi="lexi" in want)
        pops.append(base)
        for family, _label, mask, weight in query_populations(relevant, k, binary, want):
            if mask.all():
                setattr(base, family, getattr(base, family) + weight)
                setattr(base, f"{family}_n", getattr(base, f"{family}_n") + 1)
            else:
                pops.append(_Population(at, docs[mask], **{family: weight, f"{family}_n": 1}))
    return pops


def compute_cube(
    runs: list[RunPositions],
    relevant: RelevantSet,
    measures: Sequence[Measure],
    binary: bool = False,
    progress: bool | None = None,
    pairs: np.ndarray | None = None,
) -> PreferenceCube:
    """All measures for all run pairs (or only ``pairs``, run index pairs (a, b)) and
    queries (vectorized over pairs and populations)."""
    return cube_from_matrix(
        position_matrix(runs, relevant),
        [r.name for r in runs],
        relevant,
        measures,
        binary=binary,
        progress=progress,
        pairs=pairs,
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
) -> PreferenceCube:
    """:func:`compute_cube` on a position matrix (runs x relevant documents of ``relevant``);
    ``queries``: only the queries of that range of query indices (a partition)."""
    part = range(relevant.n_queries) if queries is None else queries
    n_runs, n_q = len(run_names), len(part)
    chosen = run_pairs(n_runs, pairs)
    ia, ja = chosen[:, 0], chosen[:, 1]
    n_p = len(ia)
    want = {m.family for m in measures}
    families = [f for f in ("rpp", "strpp") if f in want]
    # uniform RPP exactly: integer sums of signs and, per query, the sum of population
    # sizes; weighted RPP (DCG, inverse) in floating point, summed in a fixed order
    signs = {f: np.zeros((n_q, n_p), dtype=np.int64) for f in families}
    sizes = {f: np.zeros(n_q, dtype=np.int64) for f in families}
    weighted = {f: np.zeros((n_q, n_p, 2)) for f in families}
    lexi_acc = np.zeros((n_q, n_p, 3)) if "lexi" in want else None

    pops = [p for p in _populations(relevant, binary, want, part) if p.rpp_n or p.strpp_n or p.lexi]
    for pop in pops:
        for family in families:
            sizes[family][pop.query] += getattr(pop, f"{family}_n") * len(pop.docs)
    by_size: dict[int, list[_Population]] = {}
    for pop in pops:
        by_size.setdefault(len(pop.docs), []).append(pop)
    blocks = []
    for m, group in sorted(by_size.items()):
        step = max(1, _BLOCK // max(1, n_p * m))
        blocks.extend(group[i : i + step] for i in range(0, len(group), step))
    # progress in queries: a query counts when the first block holding one of its
    # populations is done
    seen: set[int] = set()
    new_queries = []
    for block in blocks:
        fresh = {int(p.query) for p in block} - seen
        seen |= fresh
        new_queries.append(len(fresh))

    if n_p:
        # blocks are independent: compare on all cores (numpy releases the GIL in the
        # large array operations); accumulate in this thread, in block order
        from concurrent.futures import ThreadPoolExecutor

        def work(block):
            return _compare_block(block, matrix, ia, ja, want)

        with ThreadPoolExecutor(max(1, min(len(blocks), os.cpu_count() or 1))) as pool:
            results = pool.map(work, blocks)
            for _fresh, parts in progress_bar(
                zip(new_queries, results),
                desc="comparing runs",
                unit="query",
                enable=progress,
                total=len(seen),
                count=lambda item: item[0],
            ):
                for family, queries, contribution in parts:
                    if family == "lexi":
                        lexi_acc[queries] = contribution
                    else:
                        count, weighted_part = contribution
                        _accumulate(signs[family], queries, count)
                        _accumulate(weighted[family], queries, weighted_part)

    values = np.full((len(measures), n_p, n_q), np.nan)
    for k, measure in enumerate(measures):
        if measure.family in families:
            family = measure.family
            defined = sizes[family] > 0
            if measure.weighting == "uniform":
                value = signs[family][defined] / sizes[family][defined, None]
            else:
                column = WEIGHTINGS.index(measure.weighting) - 1
                value = ties.snap_zero(weighted[family][defined, :, column])
            values[k][:, defined] = value.T
        elif measure.family == "lexi":
            column = ["lexirecall", "lexiprecision", "rrlexiprecision"].index(measure.name)
            values[k] = lexi_acc[:, :, column].T
    return PreferenceCube(
        measures=[m.name for m in measures],
        runs=list(run_names),
        query_ids=list(relevant.query_ids[part.start : part.stop]),
        pairs=chosen,
        values=values,
    )


def run_pairs(n_runs: int, pairs=None) -> np.ndarray:
    """(pairs x 2) run indices: ``pairs`` as given, else every unordered pair, a < b."""
    if pairs is not None:
        return np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    ia, ja = np.triu_indices(n_runs, 1)
    return np.stack([ia, ja], axis=1).astype(np.int64)


def compare_partitions(n_queries: int, n_runs: int, n_measures: int, pairs=None) -> list[range]:
    """The query partitions compare computes (:func:`query_partitions`) for that many
    runs and measures and those ``pairs`` (default all)."""
    cells = n_measures * max(1, len(run_pairs(n_runs, pairs)))
    return query_partitions(n_queries, cells)


def query_partitions(n_queries: int, cells_per_query: int) -> list[range]:
    """Consecutive ranges of query indices holding at most :data:`PARTITION_CELLS` cube
    cells each, or one :data:`~prefeval.ties.SUM_BLOCK` of queries when that is more:
    the partitions compare computes one at a time."""
    block = ties.SUM_BLOCK  # whole blocks: the summed means do not depend on partitions
    size = max(1, PARTITION_CELLS // max(1, cells_per_query) // block) * block
    return [range(lo, min(lo + size, n_queries)) for lo in range(0, n_queries, size)]


def partitioned_cubes(
    runs: list[RunPositions],
    relevant: RelevantSet,
    measures: Sequence[Measure],
    binary: bool = False,
    progress: bool | None = None,
    pairs: np.ndarray | None = None,
):
    """:func:`compute_cube` one query partition (:func:`query_partitions`) at a time:
    yields the cube of each, in query order, so that memory is bounded by a partition."""
    names = [r.name for r in runs]
    yield from matrix_partitions(
        position_matrix(runs, relevant), names, relevant, measures, binary, progress, pairs
    )


def matrix_partitions(
    matrix: np.ndarray,
    names: list[str],
    relevant: RelevantSet,
    measures: Sequence[Measure],
    binary: bool = False,
    progress: bool | None = None,
    pairs: np.ndarray | None = None,
):
    """:func:`partitioned_cubes` from the runs' :func:`~prefeval.positions.position_matrix`
    (the reduced runs themselves no longer needed).  Between partitions the memory the
    previous one's rows and text freed is handed back (:func:`release_free_memory`)."""
    for i, part in enumerate(
        compare_partitions(relevant.n_queries, len(names), len(measures), pairs)
    ):
        if i:
            release_free_memory()
        yield cube_from_matrix(
            matrix, names, relevant, measures, binary=binary, progress=progress, pairs=pairs,
            queries=part,
        )  # fmt: skip


class SummaryAccumulator:
    """The summary of compare merged from query partitions (of whole
    :data:`~prefeval.ties.SUM_BLOCK` s): per measure and pair the running
    :func:`~prefeval.ties.defined_sum` and count of the defined values, so the means are
    exactly :meth:`PreferenceCube.summary` of the whole cube."""

    def __init__(self):
        self.sums = None
        self.counts = None
        self.cube = None

    def add(self, cube: PreferenceCube) -> None:
        self.add_blocks(
            ties.block_sums(cube.values, axis=2), np.sum(~np.isnan(cube.values), axis=2), cube
        )

    def add_blocks(self, sums: np.ndarray, counts: np.ndarray, like: PreferenceCube) -> None:
        """Merge the next partition's block sums (blocks x measures x pairs) and counts of
        defined values; ``like``: a cube with the summary's measures, runs and pairs."""
        self.sums = ties.running_sum(sums, self.sums)
        self.counts = counts if self.counts is None else self.counts + counts
        self.cube = like

    def means(self) -> np.ndarray:
        """Mean over the defined values, measures x pairs; NaN where none (as
        :func:`prefeval.ties.defined_mean`), a mean tying with 0 is 0.0."""
        means = np.where(self.counts > 0, self.sums / np.maximum(self.counts, 1), np.nan)
        return ties.snap_zero(means)

    def frame(self) -> pd.DataFrame:
        """The summary rows (query_id ``all``), as :meth:`PreferenceCube.to_frame`."""
        return self.cube.to_frame(per_query=False, summary=True, means=self.means())


def _accumulate(acc: np.ndarray, queries: np.ndarray, contribution: np.ndarray) -> None:
    if len(np.unique(queries)) == len(queries):
        acc[queries] += contribution
    else:
        np.add.at(acc, queries, contribution)


def _compare_block(block, matrix, ia, ja, want: set[str]) -> list[tuple]:
    """Compare all run pairs on a block of equal-size populations.

    Returns (family, queries, values) contributions: for ``rpp``/``strpp`` per
    population the integer sum of signs times its multiplicity (pairs) and the weighted
    DCG and inverse RPP times p(lambda) (pairs x 2); for ``lexi`` the three
    lexicographic measures of the binary populations.
    """
    queries = np.array([p.query for p in block])
    docs = np.stack([p.docs for p in block])  # (B, m)
    # sorted position vectors: (B, runs, m)
    positions = np.sort(np.moveaxis(matrix[:, docs], 0, 1), axis=-1)
    pos_a = positions[:, ia, :]
    pos_b = positions[:, ja, :]
    sign_diff = np.sign(pos_b - pos_a).astype(np.int8)  # sgn(f'_i - f_i): + when a is earlier
    out = []
    for family in ("rpp", "strpp"):
        count = np.array([getattr(p, f"{family}_n") for p in block])
        if family in want and count.any():
            sel = count > 0
            d = sign_diff[sel]
            weight = np.array([getattr(p, family) for p in block])[sel]
            uniform = d.sum(axis=-1, dtype=np.int64) * count[sel, None]
            out.append((family, queries[sel], (uniform, rpp_values(d) * weight[:, None, None])))
    sel = np.array([p.lexi for p in block])
    if "lexi" in want and sel.any():
        d, a, b = sign_diff[sel], pos_a[sel], pos_b[sel]
        columns = [lexirecall(d), lexiprecision(d), rr_lexiprecision(d, a, b)]
        out.append(("lexi", queries[sel], np.stack(columns, axis=-1)))
    return out
