"""What a family of preference measures provides to the engine and to explain.

A family is a set of measures read off the same pseudo-populations of a query (sets of
its relevant documents) and the same comparison of the runs' sorted positions on them,
D = sgn(f'_i - f_i).  The engine (:mod:`prefeval.engine.local`) knows no measure: it
asks each family of the measures asked for its populations on a range of queries at
once (:meth:`Family.populations_of`, arrays), hands it the comparisons
of a block of populations (:meth:`Family.compare`), adds the contributions up per query
and lets the family turn the sums into values (:meth:`Family.finish`).  Explain asks
the families for their columns, their fields on a population and its recall levels,
and their lines of text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Populations:
    """The pseudo-populations of a family on a range of queries, as arrays: query by
    query, in the family's order within a query.  Population ``i`` is of query
    ``query[i]`` (an index of the :class:`~prefeval.core.qrels.RelevantSet`), weighs
    ``weight[i]`` and holds ``size[i]`` relevant documents of that query: the global
    document numbers ``docs[start[i]:start[i] + size[i]]``, in their order (``start``
    is the running sum of ``size``); ``key[i]`` is what its label is made of
    (:meth:`Family.label`)."""

    query: np.ndarray  # int64
    size: np.ndarray  # int64
    weight: np.ndarray  # float64
    docs: np.ndarray  # int64
    key: np.ndarray  # float64

    @property
    def start(self) -> np.ndarray:
        """Where each population's documents begin in :attr:`docs`."""
        return np.cumsum(self.size) - self.size

    @classmethod
    def whole(cls, relevant, queries: range) -> Populations:
        """One population per query of ``queries`` holding all its relevant documents,
        weight 1 (key NaN)."""
        offsets = relevant.offsets
        n = len(queries)
        return cls(
            query=np.arange(queries.start, queries.stop, dtype=np.int64),
            size=np.diff(offsets[queries.start : queries.stop + 1]).astype(np.int64),
            weight=np.ones(n),
            docs=np.arange(offsets[queries.start], offsets[queries.stop], dtype=np.int64),
            key=np.full(n, np.nan),
        )

    @classmethod
    def empty(cls) -> Populations:
        """No population."""
        ints = np.zeros(0, dtype=np.int64)
        return cls(ints, ints, np.zeros(0), ints, np.zeros(0))


@dataclass(frozen=True)
class Render:
    """How explain writes numbers and tables (the present layer's), for a family's text:
    ``numbers(values)`` the texts of floats as compare -q writes them (NaN ``-``),
    ``table(header, rows, right)`` aligned lines, ``values(values, names, how)`` the
    lines ``name = how = value`` of the measures of ``names`` found in ``values``."""

    numbers: Callable[[Sequence[float]], list[str]]
    table: Callable[[list[str], list[list[str]], Sequence[bool]], list[str]]
    values: Callable[[dict, Sequence[str], dict], list[str]]


class Family:
    """A family of measures: its populations, its kernel, its exact finishing, its
    explain rows.  Subclasses set :attr:`name` and implement the methods.

    Contract with the engine: a query's populations with every relevant document are
    merged into one (their weights added, their counts too), so :meth:`compare` gets per
    population its summed ``weight`` and ``count`` (how many of the family's populations
    it stands for).  Contributions are *added* per query, in a fixed order; ``sizes``
    is per query the sum over the family's populations of count x m (0: the family
    has no population on the query, its measures are undefined there).
    """

    #: the key of the family in :data:`prefeval.measures.FAMILIES` (``Measure.family``)
    name: str = ""
    #: what it is, in a few words (``prefeval measures NAME``)
    summary: str = ""
    #: whether its populations come from subtopic (ndeval) judgments
    needs_subtopics: bool = False
    #: explain: its columns on level rows, on population rows, and those of them that
    #: are true/false flags (the others are floats)
    level_columns: tuple[str, ...] = ()
    population_columns: tuple[str, ...] = ()
    flag_columns: tuple[str, ...] = ()

    def populations_of(self, relevant, queries: range, binary: bool) -> Populations:
        """The pseudo-populations of the queries of the range ``queries`` (indices of
        ``relevant``, a :class:`~prefeval.core.qrels.RelevantSet`)."""
        raise NotImplementedError

    def label(self, relevant, k: int, key: float) -> str:
        """The label explain shows of a population of query ``k`` (its
        :attr:`Populations.key`)."""
        return ""

    def populations(self, relevant, k: int, binary: bool) -> Iterator[tuple[str, Any, float]]:
        """The pseudo-populations of query ``k`` (:meth:`populations_of`): (label, mask
        over the query's relevant documents or None for all of them, weight)."""
        pops = self.populations_of(relevant, range(k, k + 1), binary)
        lo, hi = int(relevant.offsets[k]), int(relevant.offsets[k + 1])
        for i, start in enumerate(pops.start):
            mask = None
            if pops.size[i] != hi - lo:
                mask = np.zeros(hi - lo, dtype=bool)
                mask[pops.docs[start : start + pops.size[i]] - lo] = True
            yield self.label(relevant, k, pops.key[i]), mask, pops.weight[i]

    def kind(self, binary: bool) -> str:
        """What explain calls its populations: ``binary`` (the query's relevant
        documents at the level, one population), ``graded`` or ``subtopic``."""
        raise NotImplementedError

    def sums(self, measures: Sequence, n_queries: int, n_pairs: int) -> tuple[np.ndarray, ...]:
        """The zero sums of ``measures`` (the family's, in the order asked) over
        ``n_queries`` x ``n_pairs``: arrays with those two leading axes."""
        raise NotImplementedError

    def compare(
        self,
        measures: Sequence,
        sign_diff: np.ndarray,
        pos_a: np.ndarray,
        pos_b: np.ndarray,
        weight: np.ndarray,
        count: np.ndarray,
    ) -> tuple[np.ndarray, ...]:
        """The kernel: per population (axis 0) and pair (axis 1) the contributions to
        :meth:`sums`; ``sign_diff`` (populations x pairs x m) holds sgn(f'_i - f_i),
        ``pos_a``, ``pos_b`` the sorted positions f_i and f'_i."""
        raise NotImplementedError

    def finish(
        self, measures: Sequence, sums: tuple[np.ndarray, ...], sizes: np.ndarray
    ) -> list[np.ndarray]:
        """Per measure its values (queries x pairs; NaN where undefined) from the sums
        of every population of each query."""
        raise NotImplementedError

    def explain_fields(
        self, sign_diff: np.ndarray, pos_a: np.ndarray, pos_b: np.ndarray, binary: bool
    ) -> tuple[dict, list[dict]]:
        """Explain's fields of :attr:`population_columns` on a population and of
        :attr:`level_columns` on each of its levels; ``sign_diff``, ``pos_a``,
        ``pos_b``: its m levels; ``binary``: it is the binary population."""
        return {}, [{} for _ in range(len(sign_diff))]

    def level_text(self) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        """Explain's text of the binary population's level table: the columns
        (header, column of the level rows) and the marks (text, flag column)."""
        return [], []

    def binary_note(self, m: int) -> str | None:
        """Explain's text of the binary population of m documents, in its header."""
        return None

    def level_notes(self, levels, render: Render) -> list[str]:
        """Lines under the binary population's level table (``levels``: its rows)."""
        return []

    def blocks(
        self,
        pops,
        binary_pop,
        values: dict,
        kinds: dict,
        asked: Sequence[str],
        members: Sequence,
        render: Render,
    ) -> list[str]:
        """Explain's text of its populations: ``pops`` a query's population rows (of
        every family), ``binary_pop`` the binary population's row, ``values`` and
        ``kinds`` the measure rows' value and kind by measure name, ``asked`` the
        measure names asked, ``members`` the family's registered measures."""
        return []
