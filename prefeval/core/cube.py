"""The preference cube (measures x run pairs x queries) and what is read off it
without computing anything new: its summary rows, the run pairs compared, the
per-query win rates W_q of rpp-sigir2022 eq. 7 and what keeps them as query
partitions come in."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from . import ties
from .rows import Coded, Rows

if TYPE_CHECKING:
    import pandas as pd

COLUMNS = ["measure", "run_a", "run_b", "query_id", "value"]

SUMMARY_QUERY = "all"


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
        rows, flip = pair_rows(self.pairs, pairs, len(self.runs))
        if (rows < 0).any():
            raise ValueError("select_pairs: a pair this cube does not hold")
        values = self.values[:, rows, :]
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

    def to_rows(
        self, per_query: bool = False, summary: bool = True, means: np.ndarray | None = None
    ) -> Rows:
        """Tidy rows ``measure, run_a, run_b, query_id, value``: per-query rows first
        (measure, pair, query order), then summary rows with query_id ``all`` (the
        ``means``, measures x pairs, when given: merged from query partitions)."""
        means = (self.summary() if means is None else means) if summary else None
        return self.schema().rows(self.values if per_query else None, means)

    def to_frame(
        self, per_query: bool = False, summary: bool = True, means: np.ndarray | None = None
    ) -> pd.DataFrame:
        """:meth:`to_rows` as a DataFrame (categorical columns)."""
        return self.to_rows(per_query, summary, means).to_frame()

    def schema(self) -> SummarySchema:
        """The cube's measures, runs, queries and pairs, without its values."""
        return SummarySchema(self.measures, self.runs, self.query_ids, self.pairs)


@dataclass(frozen=True)
class SummarySchema:
    """What compare's rows are named by, without values: the measures, the runs and the
    run pairs (indices into ``runs``), and the query ids (a partition's; the codes of
    ``query_id``, ``all`` after them)."""

    measures: list[str]
    runs: list[str]
    query_ids: list[str]
    pairs: np.ndarray

    def both_directions(self) -> SummarySchema:
        """Every pair followed by its reverse (as :meth:`PreferenceCube.both_directions`)."""
        pairs = np.empty((2 * len(self.pairs), 2), dtype=np.int64)
        pairs[0::2], pairs[1::2] = self.pairs, self.pairs[:, ::-1]
        return SummarySchema(self.measures, self.runs, self.query_ids, pairs)

    def frame(
        self, values: np.ndarray | None = None, means: np.ndarray | None = None
    ) -> pd.DataFrame:
        """:meth:`rows` as a DataFrame (categorical columns)."""
        return self.rows(values, means).to_frame()

    def rows(self, values: np.ndarray | None = None, means: np.ndarray | None = None) -> Rows:
        """Tidy rows ``measure, run_a, run_b, query_id, value``: the defined ``values``
        (measures x pairs x queries; per-query rows in measure, pair, query order), then
        the defined ``means`` (measures x pairs) with query_id ``all``; categorical
        columns, their categories the schema's names."""
        n_m, n_q = len(self.measures), len(self.query_ids)
        pairs = self.pairs if len(self.pairs) else np.zeros((0, 2), dtype=np.int64)
        defined = ~np.isnan(values) if values is not None else None
        # the codes of each column filled measure by measure in its smallest integer type
        # (as pandas keeps them): a partition's rows take no more than the frame itself
        counts = defined.sum(axis=(1, 2)) if defined is not None else np.zeros(n_m, dtype=np.int64)
        n_rows = int(counts.sum()) + (int((~np.isnan(means)).sum()) if means is not None else 0)
        m = np.empty(n_rows, dtype=_code_type(n_m))
        a = np.empty(n_rows, dtype=_code_type(len(self.runs)))
        b = np.empty(n_rows, dtype=a.dtype)
        q = np.empty(n_rows, dtype=_code_type(n_q + 1))
        v = np.empty(n_rows)
        at = 0
        if defined is not None:
            assert values is not None
            for k in range(n_m):
                flat = np.flatnonzero(defined[k])  # (pair, query) in pair, query order
                pair, query = np.divmod(flat, max(n_q, 1))
                end = at + len(flat)
                m[at:end] = k
                a[at:end], b[at:end] = pairs[pair, 0], pairs[pair, 1]
                q[at:end] = query
                v[at:end] = values[k].reshape(-1)[flat]
                at = end
        if means is not None:
            km, kp = np.nonzero(~np.isnan(means))
            m[at:], a[at:], b[at:] = km, pairs[kp, 0], pairs[kp, 1]
            q[at:] = n_q
            v[at:] = means[km, kp]
        return Rows(
            {
                "measure": Coded(m, list(self.measures)),
                "run_a": Coded(a, list(self.runs)),
                "run_b": Coded(b, list(self.runs)),
                "query_id": Coded(q, [*self.query_ids, SUMMARY_QUERY]),
                "value": v,
            }
        )


def _code_type(n: int) -> type[np.signedinteger]:
    """The smallest signed integer type holding codes 0..n-1 (pandas' choice for n
    categories)."""
    kinds: tuple[type[np.signedinteger], ...] = (np.int8, np.int16, np.int32)
    for kind in kinds:
        if n < np.iinfo(kind).max:
            return kind
    return np.int64


def pair_rows(held: np.ndarray, pairs: np.ndarray, n_runs: int) -> tuple[np.ndarray, np.ndarray]:
    """Where each of ``pairs`` (run index pairs) stands among the ``held`` pairs, in either
    orientation: (its row there, -1 when neither orientation is held; whether it is held
    reversed, Delta(b, a) = -Delta(a, b))."""
    where = np.full((n_runs, n_runs), -1, dtype=np.int64)
    where[held[:, 0], held[:, 1]] = np.arange(len(held))
    forward, backward = where[pairs[:, 0], pairs[:, 1]], where[pairs[:, 1], pairs[:, 0]]
    return np.where(forward >= 0, forward, backward), forward < 0


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


def run_pairs(n_runs: int, pairs=None) -> np.ndarray:
    """(pairs x 2) run indices: ``pairs`` as given, else every unordered pair, a < b."""
    if pairs is not None:
        return np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    ia, ja = np.triu_indices(n_runs, 1)
    return np.stack([ia, ja], axis=1).astype(np.int64)


class SummaryAccumulator:
    """The summary of compare merged from query partitions (of whole
    :data:`~prefeval.core.ties.SUM_BLOCK` s): per measure and pair the running
    :func:`~prefeval.core.ties.defined_sum` and count of the defined values, so the means are
    exactly :meth:`PreferenceCube.summary` of the whole cube."""

    def __init__(self):
        self.sums = None
        self.counts = None
        self.schema: SummarySchema | None = None

    def add(self, cube: PreferenceCube) -> None:
        self.add_blocks(
            ties.block_sums(cube.values, axis=2),
            np.sum(~np.isnan(cube.values), axis=2),
            cube.schema(),
        )

    def add_blocks(self, sums: np.ndarray, counts: np.ndarray, schema: SummarySchema) -> None:
        """Merge the next partition's block sums (blocks x measures x pairs) and counts of
        defined values; ``schema``: the summary's measures, runs and pairs."""
        self.sums = ties.running_sum(sums, self.sums)
        self.counts = counts if self.counts is None else self.counts + counts
        self.schema = schema

    def means(self) -> np.ndarray:
        """Mean over the defined values, measures x pairs; NaN where none (as
        :func:`prefeval.core.ties.defined_mean`), a mean tying with 0 is 0.0."""
        means = np.where(self.counts > 0, self.sums / np.maximum(self.counts, 1), np.nan)
        return ties.snap_zero(means)

    def rows(self) -> Rows:
        """The summary rows (query_id ``all``), as :meth:`PreferenceCube.to_rows`."""
        assert self.schema is not None  # rows were added
        return self.schema.rows(means=self.means())


def win_rates(values: np.ndarray, pairs: np.ndarray, n_runs: int) -> np.ndarray:
    """W_q(a) = sum_b Delta(a, b) (rpp-sigir2022 eq. 7) from pair values (pairs x queries).

    Queries where any pair is undefined (NaN) are dropped.  Each sum is taken over its
    sorted terms (:func:`prefeval.core.ties.ordered_sum`), so it does not depend on the order
    of the runs.
    """
    keep = ~np.isnan(values).any(axis=0)
    v = values[:, keep]
    full = np.zeros((v.shape[1], n_runs, n_runs))
    full[:, pairs[:, 0], pairs[:, 1]] = v.T
    full[:, pairs[:, 1], pairs[:, 0]] = -v.T
    return ties.ordered_sum(full, axis=-1)


#: queries ranked at once by MC4 and Borda (their counts are sums over queries)
_ROWS = 1 << 16


def pairwise_counts(scores: np.ndarray) -> np.ndarray:
    """above[a, b]: the queries (rows of ``scores``) that rank run a strictly above run b
    (:mod:`prefeval.core.ties`); counted by chunks of queries, in bounded memory."""
    n = scores.shape[1]
    above = np.zeros((n, n), dtype=np.int64)
    for lo in range(0, len(scores), _ROWS):
        g = ties.groups(scores[lo : lo + _ROWS])
        for a in range(n):
            above[a] += (g[:, a, None] > g).sum(axis=0)
    return above


def borda(scores: np.ndarray) -> np.ndarray:
    """Sum over queries of Borda points (tied runs share, :func:`prefeval.core.ties.rank_points`;
    halves, so the sum is exact in any order, here by chunks of queries)."""
    total = np.zeros(scores.shape[1])
    for lo in range(0, len(scores), _ROWS):
        total += ties.rank_points(scores[lo : lo + _ROWS]).sum(axis=0)
    return total


class RankTally:
    """What ``order``'s methods need of a measure's win rates, added partition by
    partition (rows of queries, in query order) so that the queries x runs matrix is
    never held: MC4's :func:`pairwise_counts`, the Borda points, and the sums of the
    win rates taken block by block as :func:`prefeval.core.ties.defined_sum` takes them (the
    rows of an unfinished block carried over).  The same bits as from the matrix."""

    def __init__(self, n_runs: int):
        self.above = np.zeros((n_runs, n_runs), dtype=np.int64)
        self.points = np.zeros(n_runs)
        self._sum = np.zeros(n_runs)
        self._carry = np.zeros((0, n_runs))
        self.rows = 0

    def add(self, rates: np.ndarray) -> None:
        """Count the next queries' win rates (rows x runs)."""
        self.above += pairwise_counts(rates)
        self.points += borda(rates)  # halves: exact in any order
        data = np.concatenate([self._carry, rates])
        whole = len(data) // ties.SUM_BLOCK * ties.SUM_BLOCK
        self._sum = ties.defined_sum(data[:whole], axis=0, start=self._sum)
        self._carry = data[whole:].copy()
        self.rows += len(rates)

    def mean(self) -> np.ndarray:
        """The mean win rate of each run (NaN without queries), as
        :func:`prefeval.core.ties.defined_mean` of the matrix."""
        total = ties.defined_sum(self._carry, axis=0, start=self._sum.copy())
        return total / self.rows if self.rows else np.full(len(total), np.nan)


def rate_keeper(n_queries: int, n_runs: int, rates: bool, spill: bool = False):
    """What keeps a measure's win rates as the partitions' rows come in (``add``): with
    ``rates`` the rows themselves (:class:`StackedRates`, or :class:`SpilledRates` with
    ``spill``), else only their :class:`RankTally`."""
    if not rates:
        return RankTally(n_runs)
    return SpilledRates(n_runs) if spill else StackedRates(n_queries, n_runs)


class StackedRates:
    """A measure's win rates filled in place, partition by partition, in one
    (at most ``n_queries``) x runs array: stacking the partitions' rows at the end would
    hold them twice."""

    def __init__(self, n_queries: int, n_runs: int):
        self._rates = np.empty((n_queries, n_runs))
        self.rows = 0

    def add(self, rates: np.ndarray) -> None:
        """Append the next queries' win rates (rows x runs)."""
        self._rates[self.rows : self.rows + len(rates)] = rates
        self.rows += len(rates)

    def load(self) -> np.ndarray:
        """Every row added, in order (queries x runs)."""
        return self._rates[: self.rows]


class SpilledRates:
    """A measure's win rates (rows of queries x runs) kept in an anonymous temporary file
    (no name in the file system; gone when closed) while they are gathered, and read
    back whole when asked for: memory holds one measure's at a time, not every
    measure's."""

    def __init__(self, n_runs: int):

        self.n_runs = n_runs
        self.rows = 0
        import tempfile

        self._file = tempfile.TemporaryFile()

    def add(self, rates: np.ndarray) -> None:
        """Append the next queries' win rates (rows x runs)."""
        self._file.write(np.ascontiguousarray(rates, dtype=np.float64).tobytes())
        self.rows += len(rates)

    def load(self) -> np.ndarray:
        """Every row added, in order (queries x runs)."""
        self._file.seek(0)
        out = np.empty((self.rows, self.n_runs))
        self._file.readinto(out.data.cast("B"))
        return out

    def close(self) -> None:
        self._file.close()


class PackedSigns:
    """A measure's sign per (pair, query) (:func:`prefeval.core.ties.sign`: -1, 0, +1, or
    undefined), added partition by partition in query order, two bits each: what the
    agreement with the baselines needs of a streamed measure's preferences, not the
    preferences themselves (two bits per pair and query, not a float64).  A value's two
    bits are "above 0" and "below 0"; both set: undefined (NaN)."""

    def __init__(self, n_pairs: int):
        self.n_pairs = n_pairs
        self.queries = 0
        self._pieces: list[tuple[int, int, np.ndarray, np.ndarray]] = []

    @staticmethod
    def piece(values: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
        """One partition's (pairs x queries) preferences packed: (queries, the "above"
        bits, the "below" bits), what :meth:`append` takes (a Dask worker packs them)."""
        signs = ties.sign(values)
        undefined = np.isnan(signs)
        above = np.packbits((signs > 0) | undefined, axis=1)
        below = np.packbits((signs < 0) | undefined, axis=1)
        return values.shape[1], above, below

    def append(self, piece: tuple[int, np.ndarray, np.ndarray]) -> None:
        """Add the next queries' :meth:`piece`."""
        n, above, below = piece
        self._pieces.append((self.queries, n, above, below))
        self.queries += n

    @contextlib.contextmanager
    def set_aside(self):
        """Meanwhile its bits wait in an anonymous temporary file, out of memory, and are
        read back after."""
        where = [(start, n) for start, n, _, _ in self._pieces]
        bits = [b for _, _, above, below in self._pieces for b in (above, below)]
        self._pieces = []  # with ``bits``, the last references (see arrays_set_aside)
        try:
            with arrays_set_aside(bits):
                yield
        finally:
            self._pieces = [(*w, *bits[2 * i : 2 * i + 2]) for i, w in enumerate(where)]

    def signs(self, lo: int, hi: int) -> np.ndarray:
        """(pairs x queries ``lo`` to ``hi``) signs as :func:`prefeval.core.ties.sign`
        gives them: -1.0, 0.0, 1.0, NaN where undefined."""
        hi = min(hi, self.queries)
        out = np.empty((self.n_pairs, max(0, hi - lo)))
        for start, n, above, below in self._pieces:
            a, b = max(lo, start) - start, min(hi, start + n) - start
            if a >= b:
                continue
            first = a // 8  # the whole bytes of the piece's bits covering a to b
            skip, stop = a - 8 * first, b - 8 * first
            up, down = (
                np.unpackbits(bits[:, first : (b + 7) // 8], axis=1)[:, skip:stop]
                for bits in (above, below)
            )
            part = up.astype(np.float64) - down
            part[(up & down).astype(bool)] = np.nan
            out[:, start + a - lo : start + b - lo] = part
        return out


@contextlib.contextmanager
def arrays_set_aside(arrays: list):
    """The numpy ``arrays`` (a list) wait in an anonymous temporary file meanwhile, out
    of memory, and are read back after, in place: the list is emptied (the arrays are
    freed where it held their last references) and refilled with equal arrays."""
    import tempfile

    with tempfile.TemporaryFile() as held:
        shapes = [(a.shape, a.dtype) for a in arrays]
        _write_arrays(held, arrays)
        arrays.clear()
        try:
            yield
        finally:
            held.seek(0)
            arrays.extend(
                np.fromfile(held, dtype, int(np.prod(shape))).reshape(shape)
                for shape, dtype in shapes
            )


def _write_arrays(held, arrays: list) -> None:
    """Each array's bytes written to ``held`` in order, without a copy of a contiguous
    one (a function: no loop variable outlives it to keep the last array alive), and
    flushed: a full disk raises its ``OSError`` (ENOSPC) here, before any array is let
    go (numpy's ``tofile`` lost it in C's buffer, or raised it without its errno)."""
    for a in arrays:
        held.write(np.ascontiguousarray(a).reshape(-1).view(np.uint8))
    held.flush()
