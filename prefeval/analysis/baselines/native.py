"""The native baselines ``TSE`` and ``ASL`` of each run, from the ranks of its relevant
documents (:func:`native_values`)."""

from __future__ import annotations

import numpy as np

from .names import EXPOSURES, Baseline

# --------------------------------------------------------------------------- natives


def native_values(
    baseline: Baseline, positions, relevant, n: np.ndarray, rel_to_q: np.ndarray, nq: int
):
    """Values of a native metric per evaluated query (NaN for queries with no relevant
    document); ``n`` are corpus sizes per evaluated query, ``rel_to_q`` maps the
    relevant set's queries to evaluated-query indices (-1: not evaluated)."""
    n_rel = relevant.n_queries
    qdoc = relevant.query_of_doc()[positions.doc]
    rank = positions.rank.astype(np.float64)
    found = np.bincount(qdoc, minlength=n_rel).astype(np.float64)
    inside = np.flatnonzero(rel_to_q >= 0)  # relevant-set queries that are evaluated
    m = relevant.sizes()[inside].astype(np.float64)
    unretrieved = m - found[inside]
    size = n[rel_to_q[inside]].astype(np.float64)
    if baseline.name == "ASL":
        rank_sum = np.bincount(qdoc, weights=rank, minlength=n_rel)[inside]
        # unretrieved documents at n-u+1 .. n: sum = u*n - u(u-1)/2
        imputed = unretrieved * size - unretrieved * (unretrieved - 1) / 2
        value = (rank_sum + imputed) / m
    else:
        params = dict(baseline.params)
        last = np.zeros(n_rel)
        np.maximum.at(last, qdoc, rank)
        last = np.where(unretrieved > 0, size, last[inside])
        value = EXPOSURES[params["exposure"]](last, params["gamma"])
    out = np.full(nq, np.nan)
    out[rel_to_q[inside]] = value
    return out
