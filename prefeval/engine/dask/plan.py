"""The plan of a Dask job: the query partitions (the local engine's), the judgments of
each, and the tasks that read the runs of each (:mod:`.reading`) and compare them
(:mod:`.kernel`)."""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...core import ties
from ...core.arrays import found_codes
from ...core.qrels import Qrels, RelevantSet
from ...measures import parse_measures
from ..local import query_ranges, relevant_with_notice
from .kernel import QRELS_COLUMNS, worker_judgments
from .reading import (
    SPLIT_GROUPS,
    ParquetInput,
    TextInput,
    groups_by_partition,
    open_input,
    partition_task,
    run_inputs,
    split_groups,
    split_table,
    stretch_task,
    text_task,
)


@dataclass
class Plan:
    """The client's side of a Dask computation: the evaluated queries, the runs, the
    partitions (the local engine's) and one delayed kernel call per partition."""

    relevant: RelevantSet | None  # None once the tasks carry all that is needed
    names: list[str]
    measures: list
    parts: list[range]
    tasks: _Tasks
    #: whether tasks share the tasks splitting a table by partition (computed together)
    shared: bool = False

    @property
    def n_queries(self) -> int:
        return self.parts[-1].stop if self.parts else 0


class _Tasks:
    """The delayed :func:`partition_task` of each partition, made when asked for
    (``tasks[k]``, ``tasks[a:b]``): the client holds one copy of the judgments, not one
    more split by partition in tasks waiting to be submitted.  The stretches of row
    groups a partition's task takes (:func:`stretch_task`) are submitted with the first
    partition that takes one (``submit``: delayed -> future, set by the caller), and
    their results held until the last such partition is done (:meth:`done`): each
    stretch is read once."""

    def __init__(self, reads: list, qrels, call: tuple, options: dict):
        self.reads: list | None = reads
        self.qrels, self.call, self.options = qrels, call, options
        self.count = len(reads)
        #: (source, :class:`_Stretch`), the partitions' query ranges, and the stretch
        #: tasks' other arguments (run names, relevance level, max_docs, run files)
        self.stretches: list = []
        self.parts: list[range] = []
        self.reader: tuple = ()
        #: the text run files the workers read (:class:`TextInput`), and the evaluated
        #: judgments they are reduced against
        self.texts: list = []
        self.relevant: RelevantSet | None = None
        #: delayed -> future, and data -> its future on every worker (set by the caller)
        self.submit: Callable | None = None
        self.scatter: Callable | None = None
        self.started: dict = {}
        self.read_texts: list | None = None
        self.judged: dict = {}  # the stretches' judgments, by their partitions
        self.last = {n: k for k, read in enumerate(reads) for n, _ in read[-1]}

    def __len__(self) -> int:
        return self.count

    def release(self) -> None:
        """Every task is submitted: let the judgments and the query ids go."""
        self.reads = self.qrels = self.relevant = None

    def done(self, k: int) -> None:
        """Partition ``k``'s result is taken: let go of the stretches no later
        partition takes."""
        gone = [self.started.pop(n, None) for n, last in self.last.items() if last == k]
        if k == self.count - 1 and self.read_texts:
            gone += self.read_texts
            self.read_texts = None
        gone += [self.judged.pop(ks) for ks in list(self.judged) if (ks or (0,))[-1] == k]
        for future in gone:
            if callable(getattr(type(future), "release", None)):  # a future, not delayed
                future.release()

    def _stretch(self, n: int):
        """Stretch ``n``'s task: submitted on first use (a future), else made (delayed)."""
        import dask

        if n not in self.started:
            source, stretch = self.stretches[n]
            names, level, *reader = self.reader
            ks = tuple(stretch.parts)
            if ks not in self.judged:  # one copy of the judgments per chain of queries
                rows = pd.concat([self.qrels(k) for k in ks or (0,)], ignore_index=True)
                task = dask.delayed(worker_judgments, pure=False)(
                    rows if ks else rows.iloc[:0], level
                )
                self.judged[ks] = self._submitted(task)
            starts = np.cumsum([0] + [len(self.parts[k]) for k in ks])
            ranges = [range(int(a), int(b)) for a, b in zip(starts[:-1], starts[1:])]
            task = dask.delayed(stretch_task, pure=False)(
                source, stretch.groups, self.judged[ks], ranges, names, *reader
            )
            self.started[n] = self._submitted(task)
        return self.started[n]

    def _texts(self) -> list:
        """The text run files' tasks (:func:`text_task`), submitted on first use:
        the judgments sent to every worker once, beforehand (a worker that fetched them
        from another, busy parsing, waited for them)."""
        import dask

        if self.read_texts is None and not self.texts:
            self.read_texts = []
        if self.read_texts is None:
            whole = self.relevant
            if self.scatter is not None:
                whole = self.scatter(whole)
            else:
                whole = dask.delayed(whole, traverse=False)  # one copy in the graph
            tasks = [
                dask.delayed(text_task)(source, whole, self.parts, self.reader[2])
                for source in self.texts
            ]
            self.read_texts = [self._submitted(task) for task in tasks] + [whole]
        return self.read_texts[:-1]

    def _submitted(self, task):
        """``task`` submitted (a future), or as it is without ``submit``."""
        return task if self.submit is None else self.submit(task)

    def __getitem__(self, k):
        import dask

        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        direct, pieces, queries, refs = self.reads[k]
        texts = [(text, k) for text in self._texts()]
        stretches = [(self._stretch(n), place) for n, place in refs]
        return dask.delayed(partition_task)(
            direct, pieces, texts, queries, stretches, self.qrels(k), *self.call, **self.options
        )


def _qrels_by_partition(judged: Qrels, ids, parts: list[range]):
    """A function k -> the judgment rows of partition k's queries (``ids[part]``), in
    file order."""
    import pyarrow as pa
    import pyarrow.compute as pc

    rows = judged.frame[QRELS_COLUMNS]
    at = pc.index_in(pa.array(rows["query_id"], pa.string()), value_set=ids)
    at = found_codes(at)
    starts = np.array([part.start for part in parts] + [len(ids)], dtype=np.int64)
    part_of = np.where(at >= 0, np.searchsorted(starts, at, side="right") - 1, -1)
    order = np.argsort(part_of, kind="stable")  # by partition, in file order within
    cuts = np.searchsorted(part_of[order], np.arange(len(parts) + 1))
    del at, part_of

    def qrels(k: int) -> pd.DataFrame:
        return rows.iloc[order[cuts[k] : cuts[k + 1]]].reset_index(drop=True)

    return qrels


def job_plan(
    judged: Qrels, runs, measures, relevance_level, pairs, notify, cells, **kernel
) -> Plan:
    """Read the judgments, name the runs and make the partitions' tasks (the runs are
    read by the workers: Parquet) or here (TREC text, sent with the tasks)."""
    import dask
    import pyarrow as pa

    relevant = relevant_with_notice(judged, relevance_level, notify)
    queries = list(relevant.query_ids)
    names, inputs, files = run_inputs(runs)
    measure_list = parse_measures(measures, judged.has_subtopics)
    parts = query_ranges(len(queries), len(names), len(measure_list), pairs, cells)
    # text run files: read and reduced by the workers, one task each, split by partition
    texts = [x for x in inputs if isinstance(x, TextInput)] if parts else []
    # other text runs (streams, read here) split by partition here
    ids = pa.array(queries, pa.string())
    part_of = np.repeat(np.arange(len(parts)), [len(p) for p in parts])
    local: list[list] = [[] for _ in parts]
    for table in (x for x in inputs if isinstance(x, pa.Table)):
        for k, piece in enumerate(split_table(table, ids, part_of, len(parts))):
            if piece is not None:
                local[k].append(piece)
    # Parquet inputs read by the workers: a table laid out by query, by each partition's
    # task (the row groups its queries may be in; those of no partition's queries by the
    # first, for their checks); another, row groups at a time, split by partition
    direct: list[list] = [[] for _ in parts]
    splits = []
    stretches: list = []  # (source, _Stretch): each read by a task of its own
    refs: list[list] = [[] for _ in parts]  # per partition: (stretch, its place there)
    lookup = dask.delayed((ids, part_of), pure=True)  # one copy in the graph
    for source in (x for x in inputs if isinstance(x, ParquetInput)):
        groups = groups_by_partition(source, parts, queries)
        if groups is not None and groups[2] is not None and parts:
            for stretch in groups[2]:
                for place, k in enumerate(stretch.parts):
                    refs[k].append((len(stretches), place))
                if not stretch.parts:  # the queries of no partition: for its checks
                    refs[0].append((len(stretches), None))
                stretches.append((source, stretch))
            continue
        if groups is not None:
            chosen, unread, _ = groups
            for k in range(len(parts)):
                if chosen[k]:
                    direct[k].append((source, chosen[k]))
            if unread and parts:
                direct[0].append((source, unread))
            continue
        count = open_input(source).metadata.num_row_groups
        for lo in range(0, count, SPLIT_GROUPS):
            groups = list(range(lo, min(count, lo + SPLIT_GROUPS)))
            splits.append(dask.delayed(split_groups)(source, groups, lookup, len(parts)))
    reads = [
        (
            direct[k],
            local[k] + [dask.delayed(operator.getitem)(split, k) for split in splits],
            queries[part.start : part.stop],
            refs[k],
        )
        for k, part in enumerate(parts)
    ]
    kernel["run_files"] = files
    options = dict(
        relevance_level=relevance_level,
        pairs=pairs,
        has_subtopics=judged.has_subtopics,
        sum_block=ties.SUM_BLOCK,  # the client's: the blocks the partitions are made of
        **kernel,
    )
    call = (names, [m.name for m in measure_list])
    reader = (relevance_level, kernel["max_docs"], files)
    tasks = _Tasks(reads, _qrels_by_partition(judged, ids, parts), call, options)
    tasks.stretches, tasks.reader, tasks.parts = stretches, (names, *reader), parts
    tasks.texts, tasks.relevant = texts, relevant if texts else None
    return Plan(relevant, names, measure_list, parts, tasks, shared=bool(splits or texts))
