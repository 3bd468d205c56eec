"""Recall-paired preference (Diaz & Ferraro, SIGIR 2022): the RPP families.

RPP(pi, pi') = sum_i p(i) sgn(f'_i - f_i)                       (eq. 3-4)
graded:    sum_lambda p(lambda) RPP_lambda, p(lambda) ~ m_lambda     (eq. 5, section 5.3)
subtopic:  sum_t p(t) RPP_t over subtopics and background t*, p(t) ~ m_t   (eq. 6)

A measure of a family is one weighting p(i) of :data:`WEIGHTINGS` (its ``variant``);
adding a weighting is one entry there and one measure in the registry.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np

from ..core import ties
from .family import Family, Populations, Render

#: the recall-level distributions p(i): name -> p(i) up to a constant, of the recall
#: levels i = 1..m (floats); normalized over i by :func:`recall_weights`
WEIGHTINGS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "uniform": lambda i: np.ones_like(i),
    "dcg": lambda i: 1.0 / np.log2(i + 1.0),
    "inverse": lambda i: 1.0 / i,
}
#: the weighting computed exactly, from integer sums: with p(i) = 1/m, eq. 5 and 6
#: reduce to the sum of the signs over the family's populations over the sum of their m
EXACT = "uniform"


def recall_weights(m: int) -> np.ndarray:
    """(m, W) matrix: p(i) for i = 1..m under each of :data:`WEIGHTINGS`, in its order
    (uniform, DCG 1/log2(i+1), inverse 1/i, then any added)."""
    return _recall_weights(m, tuple(WEIGHTINGS.items()))


@lru_cache(maxsize=4096)
def _recall_weights(m: int, weightings: tuple) -> np.ndarray:
    i = np.arange(1, m + 1, dtype=float)
    raw = np.stack([p(i) for _, p in weightings], axis=1)
    weights = raw / raw.sum(axis=0)
    weights.setflags(write=False)
    return weights


def weighted_columns(weightings: Sequence[str] | None = None) -> list[int]:
    """The columns of :func:`recall_weights` of ``weightings`` (default: every one but
    :data:`EXACT`)."""
    names = list(WEIGHTINGS)
    if weightings is None:
        weightings = [w for w in names if w != EXACT]
    return [names.index(w) for w in weightings]


def rpp_values(sign_diff: np.ndarray, columns: Sequence[int] | None = None) -> np.ndarray:
    """Weighted RPP (eq. 4) for every population and pair: ``sign_diff`` is (..., m) with
    entries sgn(f'_i - f_i); returns (..., len(columns)), one value per column of
    :func:`recall_weights` (default :func:`weighted_columns`: DCG-like and inverse p(i)).

    Each value is an elementwise product summed along the recall levels, so it depends
    only on its own sign vector (a matrix product could round differently with the
    shape of the batch, i.e. with which other runs are compared).  Uniform RPP is
    computed exactly from the integer sum of signs (:meth:`RPPFamily.finish`).
    """
    m = sign_diff.shape[-1]
    weights = recall_weights(m)
    columns = weighted_columns() if columns is None else columns
    d = sign_diff.astype(np.float64)
    values = [(d * weights[:, j]).sum(axis=-1) for j in columns]
    return np.stack(values, -1) if values else np.zeros((*d.shape[:-1], 0))


def graded_populations(relevant, queries: range) -> Populations:
    """Pseudo-populations of eq. 5 of the queries of ``queries``: for each distinct grade
    lambda of a query, its documents with grade >= lambda, weighted p(lambda)
    proportional to m_lambda (section 5.3); by increasing lambda (the key), the weights
    of a query summing to 1."""
    offsets = relevant.offsets
    lo, hi = int(offsets[queries.start]), int(offsets[queries.stop])
    grade = relevant.grade[lo:hi]
    m = np.diff(offsets[queries.start : queries.stop + 1])
    query = np.repeat(np.arange(queries.start, queries.stop, dtype=np.int64), m)
    # the distinct (query, grade) pairs, by query and increasing grade: the levels
    order = np.lexsort((grade, query))
    q, g = query[order], grade[order]
    new = np.ones(len(q), dtype=bool)
    new[1:] = (q[1:] != q[:-1]) | (g[1:] != g[:-1])
    level_query, level = q[new], g[new]
    # a level's documents: those of its query with grade >= lambda, in their order
    width = m[level_query - queries.start]
    of_level = np.repeat(np.arange(len(level_query)), width)
    within = np.arange(len(of_level)) - np.repeat(np.cumsum(width) - width, width)
    candidate = np.repeat(offsets[level_query], width) + within
    keep = relevant.grade[candidate] >= level[of_level]
    size = np.bincount(of_level[keep], minlength=len(level_query)).astype(np.int64)
    # sum of m_lambda per query: integers, exact as the floats' sum
    total = np.zeros(len(queries), dtype=np.int64)
    np.add.at(total, level_query - queries.start, size)
    weight = size.astype(float) / total[level_query - queries.start].astype(float)
    return Populations(level_query, size, weight, candidate[keep], level.astype(float))


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


class RPPFamily(Family):
    """An RPP family: its measures are the weightings p(i) of :data:`WEIGHTINGS`.

    Sums per query and pair: the integer sum over populations of their signs times
    their count (uniform RPP, exact), and per weighting asked the sum of p(lambda)
    (or p(t)) x RPP of each population, in floating point (snapped to 0 when it ties
    with 0, :func:`prefeval.core.ties.snap_zero`)."""

    @property
    def level_columns(self):
        return tuple(f"p_{w}" for w in WEIGHTINGS)

    @property
    def population_columns(self):
        return tuple(f"rpp_{w}" for w in WEIGHTINGS)

    #: explain's text: the title of its populations' block, the name of their weight
    title = ""
    weight_name = ""
    #: explain's text when the query has none of its populations but one of its
    #: measures was asked (None: nothing)
    undefined_note: str | None = None

    def sums(self, measures, n_queries, n_pairs):
        n_weighted = len(self._weighted(measures))
        return (
            np.zeros((n_queries, n_pairs), dtype=np.int64),
            np.zeros((n_queries, n_pairs, n_weighted)),
        )

    @staticmethod
    def _weighted(measures) -> list[str]:
        return list(dict.fromkeys(m.variant for m in measures if m.variant != EXACT))

    def compare(self, measures, sign_diff, pos_a, pos_b, weight, count):
        uniform = sign_diff.sum(axis=-1, dtype=np.int64) * count[:, None]
        columns = weighted_columns(self._weighted(measures))
        return uniform, rpp_values(sign_diff, columns) * weight[:, None, None]

    def finish(self, measures, sums, sizes):
        signs, weighted = sums
        defined = sizes > 0
        columns = self._weighted(measures)
        out = []
        for measure in measures:
            value = np.full(signs.shape, np.nan)
            if measure.variant == EXACT:
                value[defined] = signs[defined] / sizes[defined, None]
            else:
                column = columns.index(measure.variant)
                value[defined] = ties.snap_zero(weighted[defined, :, column])
            out.append(value)
        return out

    def explain_fields(self, sign_diff, pos_a, pos_b, binary):
        m = len(sign_diff)
        p = recall_weights(m)
        weighted = iter(float(x) for x in rpp_values(sign_diff[None, :])[0])
        total = int(sign_diff.sum(dtype=np.int64))
        population = {f"rpp_{w}": total / m if w == EXACT else next(weighted) for w in WEIGHTINGS}
        levels = [{f"p_{w}": float(p[i, j]) for j, w in enumerate(WEIGHTINGS)} for i in range(m)]
        return population, levels

    def binary_note(self, m):
        return f"p(i) {EXACT} = 1/{m}"

    def level_text(self):
        return [(f"p(i) {w}", f"p_{w}") for w in WEIGHTINGS if w != EXACT], []

    def blocks(self, pops, binary_pop, values, kinds, asked, members, render: Render):
        names = [m.name for m in members]
        lines: list[str] = []
        if any(kinds.get(name) == "binary" for name in names):
            sgn, m = int(binary_pop["sgn"]), int(binary_pop["size"])
            how = {
                mm.name: f"sum sgn / m = {sgn}/{m}"
                if mm.variant == EXACT
                else f"sum sgn x p(i) {mm.variant}"
                for mm in members
            }
            lines.append("  binary RPP (eq. 4):")
            lines += render.values(values, names, how)
        mine = pops[pops["family"] == self.kind(False)]
        if not len(mine):
            if self.undefined_note and set(names) & set(asked):
                lines += ["", self.undefined_note]
            return lines
        sgn, size = int(mine["sgn"].sum()), int(mine["size"].sum())
        how = {
            mm.name: f"sum sgn / sum m = {sgn}/{size}"
            if mm.variant == EXACT
            else f"sum {self.weight_name} x RPP {mm.variant}"
            for mm in members
        }
        lines += ["", self.title]
        lines += self._population_table(mine, render)
        lines += render.values(values, names, how)
        return lines

    def _population_table(self, pops, render: Render) -> list[str]:
        total = int(pops["size"].sum())
        texts = [render.numbers(pops[f"rpp_{w}"]) for w in WEIGHTINGS]
        rows = [
            [label, str(int(m)), f"{int(m)}/{total}", str(int(s)), *cells]
            for label, m, s, *cells in zip(pops["population"], pops["size"], pops["sgn"], *texts)
        ]
        header = ["population", "m", self.weight_name, "sum sgn"]
        header += [f"RPP {w}" for w in WEIGHTINGS]
        return render.table(header, rows, [False, True, True, True] + [False] * len(WEIGHTINGS))


class GradedRPP(RPPFamily):
    """RPP over the graded populations of eq. 5 (one population, grade >= level, eq. 4,
    with --binary)."""

    name = "rpp"
    summary = "graded RPP, eq. 5; binary RPP, eq. 4, with --binary"
    title = "graded RPP (eq. 5), p(lambda) = m_lambda / sum m"
    weight_name = "p(lambda)"

    def kind(self, binary):
        return "binary" if binary else "graded"

    def populations_of(self, relevant, queries, binary):
        if binary:
            return Populations.whole(relevant, queries)
        return graded_populations(relevant, queries)

    def label(self, relevant, k, key):
        return "" if np.isnan(key) else f"grade>={float(key):g}"


class SubtopicRPP(RPPFamily):
    """RPP over the subtopic populations of eq. 6 and their background t*."""

    name = "strpp"
    summary = "subtopic RPP, eq. 6, over subtopics and their background"
    needs_subtopics = True
    title = "subtopic RPP (eq. 6), p(t) = m_t / sum m"
    weight_name = "p(t)"
    undefined_note = "subtopic RPP: no subtopic-relevant document, undefined here"

    def kind(self, binary):
        return "subtopic"

    def populations_of(self, relevant, queries, binary):
        if not relevant.has_subtopics:
            return Populations.empty()
        # per query: the judgments hold a matrix of each query
        query, size, weight, docs, key = [], [], [], [], []
        for k in queries:
            lo = int(relevant.offsets[k])
            for t, mask, w in subtopic_populations(relevant.subtopics[k]):
                members = lo + np.flatnonzero(mask)
                query.append(k)
                size.append(len(members))
                weight.append(w)
                docs.append(members)
                key.append(-1 if t is None else t)
        if not query:
            return Populations.empty()
        return Populations(
            np.array(query, dtype=np.int64),
            np.array(size, dtype=np.int64),
            np.array(weight, dtype=np.float64),
            np.concatenate(docs).astype(np.int64),
            np.array(key, dtype=np.float64),
        )

    def label(self, relevant, k, key):
        return "subtopic=*" if key < 0 else f"subtopic={relevant.subtopic_ids[k][int(key)]}"


GRADED = GradedRPP()
SUBTOPIC = SubtopicRPP()
