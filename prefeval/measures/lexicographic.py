"""Lexicographic preferences over sorted positions of relevant items: the family.

lexirecall (Diaz & Mitra, eq. 11): the deepest recall level where the position
vectors differ decides, +1 or -1 (leximin: the worst-off user decides).
lexiprecision, sgnLP (Diaz, EVIA 2023, eq. 3): the first differing level decides.
rrLP (eq. 2): 1/p_i - 1/p'_i at that first differing level, an unretrieved item
counting 0.

A measure of the family is one kernel of :data:`KERNELS` (its ``variant``), read on
the binary population of each query; adding one is one entry there and one measure in
the registry.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..core.positions import UNRETRIEVED
from .family import Family, Populations


def first_difference(sign_diff: np.ndarray) -> np.ndarray:
    """Index of the first nonzero entry along the last axis (0 where all are zero)."""
    return np.argmax(sign_diff != 0, axis=-1)


def last_difference(sign_diff: np.ndarray) -> np.ndarray:
    """Index of the last nonzero entry along the last axis (m-1 where all are zero)."""
    m = sign_diff.shape[-1]
    return m - 1 - np.argmax(sign_diff[..., ::-1] != 0, axis=-1)


def at(values: np.ndarray, index: np.ndarray) -> np.ndarray:
    return np.take_along_axis(values, index[..., None], axis=-1)[..., 0]


def lexiprecision(sign_diff: np.ndarray, pos_a=None, pos_b=None) -> np.ndarray:
    """sgnLP: sgn(f'_i* - f_i*) at the first differing recall level i*, else 0."""
    return at(sign_diff, first_difference(sign_diff)).astype(np.float64)


def lexirecall(sign_diff: np.ndarray, pos_a=None, pos_b=None) -> np.ndarray:
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


#: the kernels of the family: name -> f(sign_diff, pos_a, pos_b), the values (float64)
#: of every population and pair from sgn(f'_i - f_i) and the sorted positions f_i,
#: f'_i (each ``(..., m)``)
KERNELS: dict[str, Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]] = {
    "lexirecall": lexirecall,
    "lexiprecision": lexiprecision,
    "rrlexiprecision": rr_lexiprecision,
}


class Lexicographic(Family):
    """The lexicographic measures: each a kernel of :data:`KERNELS` on the binary
    population (grade >= level) of a query; its sum is its value."""

    name = "lexi"
    summary = "lexicographic, on the binary population (grade >= level)"
    level_columns = ("lexiprecision_decides", "lexirecall_decides", "rr_term")
    flag_columns = ("lexiprecision_decides", "lexirecall_decides")

    def kind(self, binary):
        return "binary"

    def populations_of(self, relevant, queries, binary):
        return Populations.whole(relevant, queries)

    def sums(self, measures, n_queries, n_pairs):
        return (np.zeros((n_queries, n_pairs, len(measures))),)

    def compare(self, measures, sign_diff, pos_a, pos_b, weight, count):
        columns = [KERNELS[m.variant](sign_diff, pos_a, pos_b) for m in measures]
        return (np.stack(columns, axis=-1),)

    def finish(self, measures, sums, sizes):
        defined = sizes > 0
        return [np.where(defined[:, None], sums[0][:, :, j], np.nan) for j in range(len(measures))]

    def explain_fields(self, sign_diff, pos_a, pos_b, binary):
        first = last = -1
        rr = np.nan
        if binary and sign_diff.any():
            first = int(first_difference(sign_diff))
            last = int(last_difference(sign_diff))
            rr = float(rr_lexiprecision(sign_diff[None], pos_a[None], pos_b[None])[0])
        levels = [
            {
                "lexiprecision_decides": i == first,
                "lexirecall_decides": i == last,
                "rr_term": rr if i == first else np.nan,
            }
            for i in range(len(sign_diff))
        ]
        return {}, levels

    def level_text(self):
        return [], [
            ("lexiprecision", "lexiprecision_decides"),
            ("lexirecall", "lexirecall_decides"),
        ]

    def level_notes(self, levels, render):
        decided = levels[levels["lexiprecision_decides"]]
        if not len(decided):
            return ["  lexiprecision, lexirecall: every level ties (0)"]
        row = decided.iloc[0]
        rr = render.numbers([row["rr_term"]])[0]
        lines = [
            f"  lexiprecision: level {int(row['level'])} decides, sgn {int(row['sgn']):+d}; "
            f"rrLP = {_rr_text(row)} = {rr}"
        ]
        row = levels[levels["lexirecall_decides"]].iloc[0]
        lines.append(f"  lexirecall: level {int(row['level'])} decides, sgn {int(row['sgn']):+d}")
        return lines


def _rr_text(row) -> str:
    import pandas as pd

    def inverse(pos):
        return "0" if pd.isna(pos) else f"1/{int(pos)}"

    return f"{inverse(row['pos_a'])} - {inverse(row['pos_b'])}"


LEXICOGRAPHIC = Lexicographic()
