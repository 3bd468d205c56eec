"""Robustness to incomplete data (rpp-sigir2022 section 6.2, lexirecall section 6.2.4).

Fewer queries: draw k queries at random and compare the system ordering with the
one on all queries.  Fewer labels: keep a fraction of each query's relevant
judgments (at least one), chosen uniformly (``uniform``) or removing first the
documents retrieved by the most runs (``pool``, ties in that count broken at
random), recompute preferences and baselines, and compare orderings (Kendall's
tau), ties, and agreement with the full-label preferences.
"""

from __future__ import annotations

import lazy_loader

from ..core import ties
from ..core.errors import InputError
from ..core.positions import UNRETRIEVED, position_matrix
from ..core.progress import progress_bar
from ..core.qrels import KEY_SEP, Qrels
from ..engine.local import cube_from_matrix
from ..io.tables import metrics_table_to_matrices
from ..options import POLICIES
from .agreement import kendall_tau
from .baselines import compute_metrics
from .orderings import DEFAULT_METHOD, DEFAULT_TELEPORT, Evidence, orderings

np = lazy_loader.load("numpy")
pd = lazy_loader.load("pandas")

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
        taus = {name: [] for name in full}
        for _ in range(samples):
            chosen = np.sort(rng.choice(n_q, size=k, replace=False))
            reduced = orderings(evidence.restrict(chosen), method, teleport)
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
    retrieved_by = (matrix != UNRETRIEVED).sum(axis=0)
    for k in range(relevant.n_queries):
        lo, hi = int(relevant.offsets[k]), int(relevant.offsets[k + 1])
        m = hi - lo
        n_keep = max(1, int(np.floor(m * fraction + 1e-9)))
        if policy == "uniform":
            chosen = rng.choice(m, size=n_keep, replace=False)
        elif policy == "pool":
            # remove the most-retrieved documents first: keep the least retrieved
            tiebreak = rng.random(m)
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
    """Rows for ``--labels``: tau, ties and agreement with full-label preferences."""
    if inputs.positions is None:
        raise InputError(
            "--prefs", None, "label sampling recomputes preferences: give QRELS RUN..."
        )
    evidence = inputs.evidence
    relevant = inputs.relevant
    matrix = position_matrix(inputs.positions, relevant)
    full = orderings(evidence, method, teleport)
    full_diff = {name: evidence.pair_differences(name) for name in evidence.measures}
    rows = []
    work = [(f, s) for f in fractions for s in range(samples)]
    results: dict = {}
    for fraction, _ in progress_bar(work, desc="label samples", unit="sample", enable=progress):
        if not 0 < fraction <= 1:
            raise ValueError(f"--labels {fraction}: must be in (0, 1]")
        keep = keep_labels(relevant, matrix, fraction, policy, rng)
        reduced_rel = relevant.subset(keep)
        cube = cube_from_matrix(
            matrix[:, keep], evidence.runs, reduced_rel, inputs.measures, binary=inputs.binary
        )
        reduced = Evidence(
            evidence.runs, evidence.query_ids, cube, {}, dict(evidence.higher_is_better)
        )
        if evidence.metrics:
            reduced.metrics = _reduced_metrics(inputs, relevant, keep)
        scores = orderings(reduced, method, teleport)
        for name in evidence.measures:
            diff = reduced.pair_differences(name)
            ok = ~np.isnan(diff)
            tied = float(ties.is_zero(diff[ok]).mean()) if ok.any() else np.nan
            ref = full_diff[name]
            decided = ok & ~np.isnan(ref) & ~ties.is_zero(ref)
            agree = (
                float((ties.sign(diff[decided]) == ties.sign(ref[decided])).mean())
                if decided.any()
                else np.nan
            )
            tau = kendall_tau(full[name], scores[name])
            results.setdefault((name, fraction), []).append((tau, tied, agree))
    for name in evidence.measures:
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


def _reduced_metrics(inputs, relevant, keep) -> dict[str, np.ndarray]:
    """Baselines recomputed with ir-measures on the qrels without the removed labels."""

    qids = np.repeat(np.asarray(relevant.query_ids, dtype=object), relevant.sizes())
    removed = {f"{q}{KEY_SEP}{d}" for q, d, k in zip(qids, relevant.doc_id, keep) if not k}
    frame = inputs.qrels.frame
    keys = frame["query_id"].astype(str) + KEY_SEP + frame["doc_id"].astype(str)
    kept = frame[~keys.isin(removed)]
    qrels = Qrels(
        kept["query_id"], kept["iteration"], kept["doc_id"], kept["relevance"], inputs.qrels.name
    )
    ev = inputs.evidence
    table = compute_metrics(
        qrels,
        {r: inputs.run_sources[r] for r in ev.runs},
        list(ev.metrics),
        query_ids=ev.query_ids,
        relevance_level=inputs.relevance_level,
        max_docs=inputs.max_docs,
    )
    return metrics_table_to_matrices(table, ev.runs, ev.query_ids)


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
