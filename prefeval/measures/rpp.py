"""Recall-paired preference (Diaz & Ferraro, SIGIR 2022).

RPP(pi, pi') = sum_i p(i) sgn(f'_i - f_i)                       (eq. 3-4)
graded:    sum_lambda p(lambda) RPP_lambda, p(lambda) ~ m_lambda     (eq. 5, section 5.3)
subtopic:  sum_t p(t) RPP_t over subtopics and background t*, p(t) ~ m_t   (eq. 6)
"""

from __future__ import annotations

from functools import lru_cache

import lazy_loader

np = lazy_loader.load("numpy")

WEIGHTINGS = ("uniform", "dcg", "inverse")


@lru_cache(maxsize=4096)
def recall_weights(m: int) -> np.ndarray:
    """(m, 3) matrix: p(i) for i = 1..m under uniform, DCG (1/log2(i+1)) and inverse (1/i)."""
    i = np.arange(1, m + 1, dtype=float)
    raw = np.stack([np.ones(m), 1.0 / np.log2(i + 1.0), 1.0 / i], axis=1)
    weights = raw / raw.sum(axis=0)
    weights.setflags(write=False)
    return weights


def rpp_values(sign_diff: np.ndarray) -> np.ndarray:
    """Weighted RPP (eq. 4) for every population and pair: ``sign_diff`` is (..., m) with
    entries sgn(f'_i - f_i); returns (..., 2), DCG-like and inverse p(i).

    Each value is an elementwise product summed along the recall levels, so it depends
    only on its own sign vector (a matrix product could round differently with the
    shape of the batch, i.e. with which other runs are compared).  Uniform RPP is
    computed exactly from the integer sum of signs by the engine.
    """
    m = sign_diff.shape[-1]
    weights = recall_weights(m)
    d = sign_diff.astype(np.float64)
    return np.stack([(d * weights[:, 1]).sum(axis=-1), (d * weights[:, 2]).sum(axis=-1)], -1)


def graded_populations(grades: np.ndarray):
    """Pseudo-populations of eq. 5: for each distinct grade lambda, the documents with
    grade >= lambda, weighted p(lambda) proportional to m_lambda (section 5.3).

    Yields (lambda, mask, weight) by increasing lambda; weights sum to 1.
    """
    levels = np.unique(grades)
    masks = [grades >= lam for lam in levels]
    sizes = np.array([mask.sum() for mask in masks], dtype=float)
    for lam, mask, size in zip(levels, masks, sizes):
        yield float(lam), mask, size / sizes.sum()


def subtopic_populations(members: np.ndarray):
    """Pseudo-populations of eq. 6: each subtopic t with a relevant document, plus the
    background t* of documents relevant to any subtopic, p(t) proportional to m_t.

    ``members`` is the (m, T) relevance of the query's documents to its subtopics.
    Yields (t, mask, weight): t the column of the subtopic, None for the background t*
    (last); nothing when no document is relevant to a subtopic.
    """
    background = members.any(axis=1)
    columns = [t for t in range(members.shape[1]) if members[:, t].any()]
    if not background.any():
        return
    masks = [members[:, t] for t in columns] + [background]
    sizes = np.array([mask.sum() for mask in masks], dtype=float)
    for t, mask, size in zip([*columns, None], masks, sizes):
        yield t, mask, size / sizes.sum()
