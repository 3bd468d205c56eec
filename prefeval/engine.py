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

from . import cache
from .errors import InputError
from .measures import Measure, parse_measures
from .measures.lexicographic import lexiprecision, lexirecall, rr_lexiprecision
from .measures.rpp import WEIGHTINGS, graded_populations, rpp_values, subtopic_populations
from .positions import RunPositions, position_matrix, run_positions
from .progress import progress_bar
from .qrels import Qrels, RelevantSet
from .readers import decompress, parse_run, read_qrels, read_raw, read_run, run_name

COLUMNS = ["measure", "run_a", "run_b", "query_id", "value"]
SUMMARY_QUERY = "all"
# elements of one (populations x pairs x m) block: bounds the engine's working memory
_BLOCK = 1 << 22


def stderr_notice(message: str) -> None:
    print(f"prefeval: {message}", file=sys.stderr)


@dataclass
class PreferenceCube:
    """Preferences Delta(run_a, run_b) for every measure, run pair and query.

    ``values[k, p, q]`` is measure ``measures[k]`` for pair ``pairs[p]`` (indices
    into ``runs``, run_a before run_b in input order) on query ``query_ids[q]``;
    NaN where the measure does not apply to the query.
    """

    measures: list[str]
    runs: list[str]
    query_ids: list[str]
    pairs: np.ndarray
    values: np.ndarray

    def summary(self) -> np.ndarray:
        """Mean over evaluated queries, measures x pairs."""
        counts = np.sum(~np.isnan(self.values), axis=2)
        sums = np.nansum(self.values, axis=2)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)

    def reindex(self, query_ids: list[str]) -> PreferenceCube:
        """The same preferences over ``query_ids`` (NaN for queries without values)."""
        where = {q: i for i, q in enumerate(self.query_ids)}
        values = np.full((*self.values.shape[:2], len(query_ids)), np.nan)
        src = np.array([where.get(q, -1) for q in query_ids], dtype=np.int64)
        values[:, :, src >= 0] = self.values[:, :, src[src >= 0]]
        return PreferenceCube(self.measures, self.runs, list(query_ids), self.pairs, values)

    def to_frame(self, per_query: bool = False, summary: bool = True) -> pd.DataFrame:
        """Tidy rows ``measure, run_a, run_b, query_id, value``: per-query rows first
        (measure, pair, query order), then summary rows with query_id ``all``."""
        n_m, n_p, n_q = self.values.shape
        parts = []
        if per_query:
            m = np.repeat(np.arange(n_m), n_p * n_q)
            p = np.tile(np.repeat(np.arange(n_p), n_q), n_m)
            q = np.tile(np.arange(n_q), n_m * n_p)
            v = self.values.reshape(-1)
            ok = ~np.isnan(v)
            parts.append((m[ok], p[ok], q[ok], v[ok]))
        if summary:
            means = self.summary()
            m = np.repeat(np.arange(n_m), n_p)
            p = np.tile(np.arange(n_p), n_m)
            v = means.reshape(-1)
            ok = ~np.isnan(v)
            parts.append((m[ok], p[ok], np.full(int(ok.sum()), n_q), v[ok]))
        if parts:
            m, p, q, v = (np.concatenate(cols) for cols in zip(*parts))
        else:
            m = p = q = np.zeros(0, dtype=np.int64)
            v = np.zeros(0)
        pairs = self.pairs if len(self.pairs) else np.zeros((0, 2), dtype=np.int64)
        return pd.DataFrame(
            {
                "measure": pd.Categorical.from_codes(m, self.measures),
                "run_a": pd.Categorical.from_codes(pairs[p, 0], self.runs),
                "run_b": pd.Categorical.from_codes(pairs[p, 1], self.runs),
                "query_id": pd.Categorical.from_codes(q, [*self.query_ids, SUMMARY_QUERY]),
                "value": v,
            }
        )


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

    ``sources`` are paths, pandas DataFrames, or a mapping name -> source.
    """
    items = list(sources.items()) if isinstance(sources, dict) else [(None, s) for s in sources]
    names = []
    for name, source in items:
        if name is None:
            name = run_name(source) if not hasattr(source, "columns") else f"run{len(names) + 1}"
        names.append(name)
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        if name in seen:
            where = items[i][1] if isinstance(items[i][1], str) else f"<run {name}>"
            raise InputError(
                str(where),
                None,
                f"two runs are named {name!r} (inputs {seen[name] + 1} and {i + 1})",
            )
        seen[name] = i
    relevant.docnos()  # build the shared lookup before threads start

    def reduce(job):
        (_, source), name = job
        if isinstance(source, (str, os.PathLike)):
            path = os.fspath(source)
            raw = read_raw(path)
            cached = cache.load(raw, name, relevant, max_docs)
            if cached is not None:
                return cached
            columns = parse_run(decompress(raw, path), path, name)
            positions = run_positions(columns, relevant, max_docs)
            cache.store(raw, positions, relevant, max_docs)
            return positions
        return run_positions(read_run(source, name=name), relevant, max_docs)

    # runs are independent: read and reduce them on all cores (pyarrow and numpy
    # release the GIL), keeping at most a few whole runs in memory at once
    from concurrent.futures import ThreadPoolExecutor

    jobs = list(zip(items, names))
    workers = max(1, min(len(jobs), os.cpu_count() or 1))
    with ThreadPoolExecutor(workers) as pool:
        results = pool.map(reduce, jobs)
        out = list(
            progress_bar(results, desc="reading runs", unit="run", enable=progress, total=len(jobs))
        )
    for positions in out:
        missing = positions.missing_queries
        if missing and notify is not None:
            notify(
                f"run {positions.name}: no results for {missing} of {relevant.n_queries} "
                "evaluated queries; evaluated as retrieving nothing"
            )
    return out


# --------------------------------------------------------------------------- computing


@dataclass
class _Population:
    query: int
    docs: np.ndarray
    rpp: float = 0.0  # weight in the rpp family (graded or binary)
    strpp: float = 0.0  # weight in the subtopic family
    lexi: bool = False  # the binary population, where lexicographic measures are read


def _populations(relevant: RelevantSet, binary: bool, want: set[str]) -> list[_Population]:
    pops: list[_Population] = []
    for k in range(relevant.n_queries):
        lo, hi = int(relevant.offsets[k]), int(relevant.offsets[k + 1])
        docs = np.arange(lo, hi)
        base = _Population(k, docs, lexi="lexi" in want)
        pops.append(base)
        if "rpp" in want:
            if binary:
                base.rpp = 1.0
            else:
                for mask, weight in graded_populations(relevant.grade[lo:hi]):
                    if mask.all():
                        base.rpp += weight
                    else:
                        pops.append(_Population(k, docs[mask], rpp=weight))
        if "strpp" in want and relevant.has_subtopics:
            for mask, weight in subtopic_populations(relevant.subtopics[k]):
                if mask.all():
                    base.strpp += weight
                else:
                    pops.append(_Population(k, docs[mask], strpp=weight))
    return pops


def compute_cube(
    runs: list[RunPositions],
    relevant: RelevantSet,
    measures: Sequence[Measure],
    binary: bool = False,
    progress: bool | None = None,
) -> PreferenceCube:
    """All measures for all run pairs and queries (vectorized over pairs and populations)."""
    return cube_from_matrix(
        position_matrix(runs, relevant),
        [r.name for r in runs],
        relevant,
        measures,
        binary=binary,
        progress=progress,
    )


def cube_from_matrix(
    matrix: np.ndarray,
    run_names: list[str],
    relevant: RelevantSet,
    measures: Sequence[Measure],
    binary: bool = False,
    progress: bool | None = None,
) -> PreferenceCube:
    """:func:`compute_cube` on a position matrix (runs x relevant documents of ``relevant``)."""
    n_runs, n_q = len(run_names), relevant.n_queries
    ia, ja = np.triu_indices(n_runs, 1)
    n_p = len(ia)
    want = {m.family for m in measures}
    rpp_acc = np.zeros((n_q, n_p, 3)) if "rpp" in want else None
    st_acc = np.zeros((n_q, n_p, 3)) if "strpp" in want else None
    st_seen = np.zeros(n_q, dtype=bool)
    lexi_acc = np.zeros((n_q, n_p, 3)) if "lexi" in want else None

    pops = [p for p in _populations(relevant, binary, want) if p.rpp or p.strpp or p.lexi]
    by_size: dict[int, list[_Population]] = {}
    for pop in pops:
        by_size.setdefault(len(pop.docs), []).append(pop)
    blocks = []
    for m, group in sorted(by_size.items()):
        step = max(1, _BLOCK // max(1, n_p * m))
        blocks.extend(group[i : i + step] for i in range(0, len(group), step))

    if n_p:
        # blocks are independent: compare on all cores (numpy releases the GIL in the
        # large array operations); accumulate in this thread, in block order
        from concurrent.futures import ThreadPoolExecutor

        def work(block):
            return _compare_block(block, matrix, ia, ja, want)

        accumulators = {"rpp": rpp_acc, "strpp": st_acc}
        with ThreadPoolExecutor(max(1, min(len(blocks), os.cpu_count() or 1))) as pool:
            results = pool.map(work, blocks)
            for block, parts in progress_bar(
                zip(blocks, results),
                desc="comparing",
                unit="block",
                enable=progress,
                total=len(blocks),
            ):
                for family, queries, contribution in parts:
                    if family == "lexi":
                        lexi_acc[queries] = contribution
                    else:
                        _accumulate(accumulators[family], queries, contribution)
                for pop in block:
                    if pop.strpp:
                        st_seen[pop.query] = True

    values = np.full((len(measures), n_p, n_q), np.nan)
    for k, measure in enumerate(measures):
        if measure.family == "rpp":
            values[k] = rpp_acc[:, :, WEIGHTINGS.index(measure.weighting)].T
        elif measure.family == "strpp":
            values[k] = st_acc[:, :, WEIGHTINGS.index(measure.weighting)].T
            values[k][:, ~st_seen] = np.nan
        else:
            column = ["lexirecall", "lexiprecision", "rrlexiprecision"].index(measure.name)
            values[k] = lexi_acc[:, :, column].T
    return PreferenceCube(
        measures=[m.name for m in measures],
        runs=list(run_names),
        query_ids=list(relevant.query_ids),
        pairs=np.stack([ia, ja], axis=1).astype(np.int64),
        values=values,
    )


def _accumulate(acc: np.ndarray, queries: np.ndarray, contribution: np.ndarray) -> None:
    if len(np.unique(queries)) == len(queries):
        acc[queries] += contribution
    else:
        np.add.at(acc, queries, contribution)


def _compare_block(block, matrix, ia, ja, want: set[str]) -> list[tuple]:
    """Compare all run pairs on a block of equal-size populations.

    Returns (family, queries, values) contributions: weighted RPP values (pairs x 3
    weightings) per population for ``rpp``/``strpp``, and the three lexicographic
    measures of the binary populations for ``lexi``.
    """
    queries = np.array([p.query for p in block])
    docs = np.stack([p.docs for p in block])  # (B, m)
    # sorted position vectors: (B, runs, m)
    positions = np.sort(np.moveaxis(matrix[:, docs], 0, 1), axis=-1)
    pos_a = positions[:, ia, :]
    pos_b = positions[:, ja, :]
    sign_diff = np.sign(pos_b - pos_a).astype(np.int8)  # sgn(f'_i - f_i): + when a is earlier
    out = []
    weights = {"rpp": np.array([p.rpp for p in block]), "strpp": np.array([p.strpp for p in block])}
    if any(weights[f].any() for f in ("rpp", "strpp") if f in want):
        values = rpp_values(sign_diff)  # (B, pairs, 3)
        for family in ("rpp", "strpp"):
            w = weights[family]
            if family in want and w.any():
                sel = w > 0
                out.append((family, queries[sel], values[sel] * w[sel, None, None]))
    sel = np.array([p.lexi for p in block])
    if "lexi" in want and sel.any():
        d, a, b = sign_diff[sel], pos_a[sel], pos_b[sel]
        columns = [lexirecall(d), lexiprecision(d), rr_lexiprecision(d, a, b)]
        out.append(("lexi", queries[sel], np.stack(columns, axis=-1)))
    return out


# --------------------------------------------------------------------------- API


def evaluate(
    qrels,
    runs,
    measures=None,
    *,
    relevance_level: float | None = None,
    max_docs: int | None = None,
    binary: bool = False,
    notify: Callable[[str], None] | None = stderr_notice,
    progress: bool | None = None,
) -> PreferenceCube:
    """Preferences for every pair of ``runs`` on ``qrels`` as a :class:`PreferenceCube`.

    ``qrels``: a path, a :class:`Qrels` or a DataFrame (ir-measures columns);
    ``runs``: paths, DataFrames, or a mapping name -> path/DataFrame.
    """
    qrels = read_qrels(qrels) if not isinstance(qrels, Qrels) else qrels
    measure_list = parse_measures(
        [measures] if isinstance(measures, str) else measures, qrels.has_subtopics
    )
    relevant = relevant_with_notice(qrels, relevance_level, notify)
    positions = load_runs(runs, relevant, max_docs, notify=notify, progress=progress)
    return compute_cube(positions, relevant, measure_list, binary=binary, progress=progress)


def compare(
    qrels,
    runs,
    measures=None,
    per_query: bool = False,
    *,
    summary: bool = True,
    relevance_level: float | None = None,
    max_docs: int | None = None,
    binary: bool = False,
    notify: Callable[[str], None] | None = stderr_notice,
    progress: bool | None = None,
) -> pd.DataFrame:
    """Preference table ``measure, run_a, run_b, query_id, value`` (see ``prefeval compare``).

    Without ``per_query`` only the summary rows (query_id ``all``, mean over evaluated
    queries); with it, per-query rows and then the summary rows.
    """
    cube = evaluate(
        qrels,
        runs,
        measures,
        relevance_level=relevance_level,
        max_docs=max_docs,
        binary=binary,
        notify=notify,
        progress=progress,
    )
    return cube.to_frame(per_query=per_query, summary=summary)
