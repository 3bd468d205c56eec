"""Lexicographic preferences over sorted positions of relevant items.

lexirecall (Diaz & Mitra, eq. 11): the deepest recall level where the position
vectors differ decides, +1 or -1 (leximin: the worst-off user decides).
lexiprecision, sgnLP (Diaz, EVIA 2023, eq. 3): the first differing level decides.
rrLP (eq. 2): 1/p_i - 1/p'_i at that first differing level, an unretrieved item
counting 0.
"""

from __future__ import annotations

import lazy_loader

from ..core.positions import UNRETRIEVED

np = lazy_loader.load("numpy")


def first_difference(sign_diff: np.ndarray) -> np.ndarray:
    """Index of the first nonzero entry along the last axis (0 where all are zero)."""
    return np.argmax(sign_diff != 0, axis=-1)


def last_difference(sign_diff: np.ndarray) -> np.ndarray:
    """Index of the last nonzero entry along the last axis (m-1 where all are zero)."""
    m = sign_diff.shape[-1]
    return m - 1 - np.argmax(sign_diff[..., ::-1] != 0, axis=-1)


def at(values: np.ndarray, index: np.ndarray) -> np.ndarray:
    return np.take_along_axis(values, index[..., None], axis=-1)[..., 0]


def lexiprecision(sign_diff: np.ndarray) -> np.ndarray:
    """sgnLP: sgn(f'_i* - f_i*) at the first differing recall level i*, else 0."""
    return at(sign_diff, first_difference(sign_diff)).astype(np.float64)


def lexirecall(sign_diff: np.ndarray) -> np.ndarray:
    """Lexirecall: sgn(f'_i - f_i) at the deepest differing recall level, else 0."""
    return at(sign_diff, last_difference(sign_diff)).astype(np.float64)


def rr_lexiprecision(sign_diff: np.ndarray, pos_a: np.ndarray, pos_b: np.ndarray) -> np.ndarray:
    """rrLP: 1/f_i* - 1/f'_i* at the first differing level i* (an unretrieved item,
    position ``UNRETRIEVED``, counts 0), else 0."""

    first = first_difference(sign_diff)
    fa = at(pos_a, first).astype(np.float64)
    fb = at(pos_b, first).astype(np.float64)
    with np.errstate(divide="ignore"):
        inv_a = np.where(fa == UNRETRIEVED, 0.0, 1.0 / fa)
        inv_b = np.where(fb == UNRETRIEVED, 0.0, 1.0 / fb)
    return np.where(at(sign_diff, first) != 0, inv_a - inv_b, 0.0)
