"""Robustness to incomplete data (rpp-sigir2022 section 6.2, lexirecall section 6.2.4).

Fewer queries: draw k queries at random and compare the system ordering with the
one on all queries.  Fewer labels: keep a fraction of each query's relevant
judgments (at least one), chosen uniformly (``uniform``) or removing first the
documents retrieved by the most runs (``pool``, ties in that count broken at
random), recompute preferences and baselines, and compare orderings (Kendall's
tau), ties, and agreement with the full-label preferences.
"""

from __future__ import annotations

import contextlib
import functools

import numpy as np
import pandas as pd

from ..core import ties
from ..core.cube import PackedSigns, arrays_set_aside, run_pairs
from ..core.errors import InputError
from ..core.positions import UNRETRIEVED
from ..core.progress import progress_bar
from ..core.qrels import Qrels
from ..engine import local, runtime
from ..engine.job import Partitions, Want, fold_evidence, partition_result
from ..engine.local import query_ranges
from ..options import POLICIES, Options
from .agreement import AGREEMENT_QUERIES, kendall_tau
from .baselines import metric_matrices
from .orderings import DEFAULT_METHOD, DEFAULT_TELEPORT, Evidence, orderings

COLUMNS = ["measure", "kind", "level", "samples", "tau_mean", "tau_std", "ties", "agreement"]


def _taus(full: dict, reduced: dict) -> dict:
    return {name: kendall_tau(full[name], reduced[name]) for name in full}


def query_robustness(
    evidence: Evidence,
    sizes,
    samples: int,
    rng,
    method: str = DEFAULT_METHOD,
    teleport: float = DEFAULT_TELEPORT,
    progress: bool | None = None,
) -> list[tuple]:
    """Rows for ``--queries``: tau between the ordering on k random queries and on all."""
    full = orderings(evidence, method, teleport)
    n_q = len(evidence.query_ids)
    rows = []
    sizes = list(sizes)
    for k in progress_bar(
        sizes,
        desc="query samples",
        unit="sample",
        enable=progress,
        total=len(sizes) * samples,
        count=lambda _: samples,
    ):
        if not 1 <= k <= n_q:
            raise ValueError(f"--queries {k}: must be between 1 and {n_q} (evaluated queries)")
        taus: dict[str, list] = {name: [] for name in full}
        for _ in range(samples):
            chosen = np.sort(rng.choice(n_q, size=k, replace=False))
            # one measure's values on the chosen queries at a time (all of them at once
            # would hold every measure's values on most of the queries)
            reduced = {}
            for name in full:
                reduced.update(orderings(evidence.restrict(chosen, [name]), method, teleport))
            for name, tau in _taus(full, reduced).items():
                taus[name].append(tau)
        for name, values in taus.items():
            rows.append((name, "queries", k, samples, *_mean_std(values), np.nan, np.nan))
    return rows


def _mean_std(values) -> tuple[float, float]:
    arr = np.asarray(values, dtype=float)
    ok = arr[~np.isnan(arr)]
    if len(ok) == 0:
        return np.nan, np.nan
    return float(ok.mean()), float(ok.std())


def keep_labels(relevant, matrix: np.ndarray, fraction: float, policy: str, rng) -> np.ndarray:
    """Global mask of relevant documents kept: max(1, floor(m * fraction)) per query."""
    keep = np.zeros(int(relevant.offsets[-1]), dtype=bool)
    # how many runs retrieve each document: only the pool policy asks (it is large)
    retrieved_by = (matrix != UNRETRIEVED).sum(axis=0) if policy == "pool" else None
    for k in range(relevant.n_queries):
        lo, hi = int(relevant.offsets[k]), int(relevant.offsets[k + 1])
        m = hi - lo
        n_keep = max(1, int(np.floor(m * fraction + 1e-9)))
        if policy == "uniform":
            chosen = rng.choice(m, size=n_keep, replace=False)
        elif policy == "pool":
            # remove the most-retrieved documents first: keep the least retrieved
            tiebreak = rng.random(m)
            assert retrieved_by is not None  # counted for this policy
            ranked = np.lexsort((tiebreak, retrieved_by[lo:hi]))
            chosen = ranked[:n_keep]
        else:
            raise ValueError(f"unknown policy {policy!r}; use one of {', '.join(POLICIES)}")
        keep[lo + chosen] = True
    return keep


def label_robustness(
    inputs,
    fractions,
    samples: int,
    rng,
    policy: str = "uniform",
    method: str = DEFAULT_METHOD,
    teleport: float = DEFAULT_TELEPORT,
    progress: bool | None = None,
) -> list[tuple]:
    """Rows for ``--labels``: tau, ties and agreement with full-label preferences.

    Each sample's preferences are computed a query partition at a time and folded as
    ``order`` folds them (:func:`_reduced_evidence`); ties and agreement are counted a
    stretch of queries at a time from the signs (:func:`_ties_and_agreement`): memory
    holds no cube, and the counts do not depend on the partitions."""
    if not inputs.has_positions():
        raise InputError(
            "--prefs", None, "label sampling recomputes preferences: give QRELS RUN..."
        )
    evidence = inputs.evidence
    full = orderings(evidence, method, teleport)
    names, baselines = evidence.measures, list(evidence.metrics)
    rows = []
    work = [(f, s) for f in fractions for s in range(samples)]
    results: dict = {}
    with _baselines_set_aside(evidence) as (reference, packed):
        for fraction, _ in progress_bar(work, desc="label samples", unit="sample", enable=progress):
            if not 0 < fraction <= 1:
                raise ValueError(f"--labels {fraction}: must be in (0, 1]")
            # the whole matrix, read back (or made) once the full baselines wait on disk,
            # only chooses the labels kept and gives their columns; it waits on disk again
            # during the sample (its preferences, beside the kept columns, and baselines)
            keep = keep_labels(inputs.relevant, inputs.position_matrix(), fraction, policy, rng)
            kept = inputs.matrix[:, keep]
            inputs.set_matrix_aside()
            reduced = _reduced_evidence(inputs, keep, kept)
            del kept
            mine: dict = {}
            if baselines:
                runtime.after_partition()  # the partitions' heap, handed back before ir-measures
                aside = [*packed, *evidence.signs.values(), *reduced.signs.values()]
                with _set_aside(aside):
                    reduced.metrics = _reduced_metrics(inputs, keep, baselines)
                    # what the sample uses of its baselines' values (their means and
                    # signs), the values let go before what waits comes back
                    scores = orderings(reduced, method, teleport)
                    mine = _packed_signs(reduced, baselines)
                    reduced.metrics = {}
                del aside
            else:
                scores = orderings(reduced, method, teleport)
            sample = _signs_reader(reduced, mine)
            for name in names:
                tau = kendall_tau(full[name], scores[name])
                tied, agree = _ties_and_agreement(reference, sample, len(evidence.query_ids), name)
                results.setdefault((name, fraction), []).append((tau, tied, agree))
            del reduced, mine, sample
    for name in names:
        for fraction in fractions:
            values = np.array(results[(name, fraction)], dtype=float)
            tau_mean, tau_std = _mean_std(values[:, 0])
            rows.append(
                (
                    name,
                    "labels",
                    fraction,
                    samples,
                    tau_mean,
                    tau_std,
                    float(ties.defined_mean(values[:, 1])),
                    float(ties.defined_mean(values[:, 2])),
                )
            )
    return rows


@contextlib.contextmanager
def _baselines_set_aside(evidence: Evidence):
    """While label samples compute their own baselines, the full labels' values wait in
    a temporary file (a float64 per query, run and baseline), put back after:
    yields the reference signs (of ``Evidence.signs_of``) of every measure, a baseline's
    packed (:class:`~prefeval.core.cube.PackedSigns`), and the list of the baselines'
    packed signs, both emptied before the values come back."""
    names = list(evidence.metrics)
    packed = _packed_signs(evidence, names)
    listed = list(packed.values())
    reference = _signs_reader(evidence, packed)
    values = [evidence.metrics[name] for name in names]
    evidence.metrics = {}  # with ``values``, the last references (see arrays_set_aside)
    try:
        with arrays_set_aside(values):
            try:
                yield reference, listed
            finally:
                packed.clear()  # the packed signs, and the heap the samples freed, handed
                listed.clear()  # back before the values come back
                runtime.after_partition()
    finally:
        evidence.metrics = dict(zip(names, values))


def _packed_signs(evidence: Evidence, names) -> dict[str, PackedSigns]:
    """The signs (:meth:`Evidence.signs_of`) of each measure of ``names`` packed, a
    stretch of queries at a time."""
    n_q, packed = len(evidence.query_ids), {}
    for name in names:
        packed[name] = PackedSigns(len(evidence.pairs()))
        for lo in range(0, n_q, AGREEMENT_QUERIES):
            packed[name].append(
                PackedSigns.piece(evidence.signs_of(name, lo, lo + AGREEMENT_QUERIES))
            )
    return packed


def _signs_reader(evidence: Evidence, packed: dict):
    """``signs(name, lo, hi)``: a measure's signs on queries ``lo`` to ``hi``, from its
    ``packed`` signs where given, else from ``evidence``."""

    def signs(name: str, lo: int, hi: int) -> np.ndarray:
        return packed[name].signs(lo, hi) if name in packed else evidence.signs_of(name, lo, hi)

    return signs


@contextlib.contextmanager
def _set_aside(signs: list[PackedSigns]):
    """While a label sample's baselines fill their values (a float64 per query, run and
    baseline), what only the samples' agreement uses waits in temporary files: the
    packed ``signs`` (two bits per pair and query a measure: the full labels' and the
    sample's); the runs' position matrix waits there already
    (``Inputs.set_matrix_aside``)."""
    with contextlib.ExitStack() as stack:
        for packed in signs:
            stack.enter_context(packed.set_aside())
        yield


def _reduced_evidence(inputs, keep: np.ndarray, kept: np.ndarray) -> Evidence:
    """The evidence on the judgments without the removed labels (``keep``: the relevant
    documents kept; ``kept``: their columns of the position matrix) but its baselines:
    per preference measure its win rates' tally, pair moments and packed signs, folded
    from query partitions computed on ``Options.jobs`` threads (the same bits as from
    the whole cube: ``order``'s path)."""
    evidence = inputs.evidence
    options = inputs.options or Options()
    relevant = inputs.relevant.subset(keep)
    want = Want(rates=True, win_rates=False, signs=True)
    chosen = run_pairs(len(evidence.runs))
    ranges = query_ranges(
        relevant.n_queries, len(evidence.runs), len(inputs.measures), None,
        options.partition_cells,
    )  # fmt: skip
    names = [m.name for m in inputs.measures]
    parts = Partitions(
        relevant, list(evidence.runs), names, chosen, ranges, None,
        local.matrix_partitions(
            kept, list(evidence.runs), relevant, inputs.measures,
            binary=inputs.binary, progress=False, cells=options.partition_cells,
            jobs=options.jobs, finish=functools.partial(partition_result, want=want),
        ),
    )  # fmt: skip
    got = fold_evidence(parts, want)
    reduced = Evidence(
        evidence.runs, evidence.query_ids, None, {}, dict(evidence.higher_is_better),
        streamed=got.streamed or {}, streamed_pairs=got.streamed_pairs, signs=got.signs or {},
    )  # fmt: skip
    return reduced


def _ties_and_agreement(reference, sample, n_q: int, name: str) -> tuple[float, float]:
    """Of measure ``name`` on the reduced judgments (``sample(name, lo, hi)``: its signs
    on queries ``lo`` to ``hi`` of ``n_q``): the share of its defined (pair, query)
    preferences that tie, and the share of those the full judgments decide
    (``reference``: their signs) where both prefer the same run; counted a stretch of
    queries at a time."""
    tied = defined = agreed = decided = 0
    for lo in range(0, n_q, AGREEMENT_QUERIES):
        hi = min(n_q, lo + AGREEMENT_QUERIES)
        sign, ref = sample(name, lo, hi), reference(name, lo, hi)
        ok = ~np.isnan(sign)
        defined += int(ok.sum())
        tied += int((sign == 0).sum())
        both = ok & ~np.isnan(ref) & (ref != 0)
        decided += int(both.sum())
        agreed += int((sign[both] == ref[both]).sum())
    return (
        tied / defined if defined else np.nan,
        agreed / decided if decided else np.nan,
    )


def _reduced_metrics(inputs, keep, baselines) -> dict[str, np.ndarray]:
    """Baselines recomputed with ir-measures on the qrels without the removed labels
    (every judgment row of a removed relevant document)."""
    frame = inputs.qrels.frame
    kept = frame[~_removed_rows(inputs, keep)]
    qrels = Qrels(
        kept["query_id"], kept["iteration"], kept["doc_id"], kept["relevance"], inputs.qrels.name
    )
    del kept
    ev = inputs.evidence
    return metric_matrices(
        qrels,
        inputs.run_sources.subset(ev.runs),
        baselines,
        query_ids=ev.query_ids,
        relevance_level=inputs.relevance_level,
        max_docs=inputs.max_docs,
    )


def _removed_rows(inputs, keep) -> np.ndarray:
    """The judgment rows (of ``inputs.qrels``) of the relevant documents not in ``keep``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    relevant, frame = inputs.relevant, inputs.qrels.frame
    # each row's relevant-document number (-1: not a relevant document), by codes
    query = pd.Index(relevant.query_ids, dtype=object).get_indexer(frame["query_id"])
    docnos = relevant.docnos()
    code = pc.index_in(pa.array(frame["doc_id"], type=docnos.type), docnos)
    code = code.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    number = np.full(len(frame), -1, dtype=np.int64)
    known = query >= 0
    number[known] = relevant.lookup(query[known], code[known])
    removed = number >= 0
    removed[removed] = ~keep[number[removed]]
    return removed


def robustness(
    inputs,
    queries=(),
    labels=(),
    samples: int = 10,
    seed: int | None = 0,
    policy: str = "uniform",
    method: str = DEFAULT_METHOD,
    teleport: float = DEFAULT_TELEPORT,
    progress: bool | None = None,
) -> pd.DataFrame:
    """Rows ``measure, kind, level, samples, tau_mean, tau_std, ties, agreement``."""
    rng = np.random.default_rng(seed)
    rows = []
    if queries:
        rows += query_robustness(inputs.evidence, queries, samples, rng, method, teleport, progress)
    if labels:
        rows += label_robustness(inputs, labels, samples, rng, policy, method, teleport, progress)
    return pd.DataFrame(rows, columns=COLUMNS)
