"""Assembling the evidence the analysis commands need, from runs or from tables.

Preferences come from ``QRELS RUN...`` (computed by the engine) or from a
per-query table written by ``compare -q`` (``--prefs``); baselines from
ir-measures on ``QRELS RUN...`` or from a table written by ``prefeval metrics``
(``--metrics``), so a Makefile computes each once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..core.cube import against_pairs, arrays_set_aside
from ..core.errors import InputError
from ..core.positions import position_matrix
from ..core.progress import stderr_notice
from ..core.qrels import Qrels, RelevantSet, query_sort_key
from ..engine.engines import engine_for
from ..engine.job import Engine, Job, Want, fold_evidence
from ..engine.local import relevant_with_notice
from ..io.runs import RunSet, read_qrels, resolve_runs
from ..io.tables import (
    METRIC_COLUMNS,
    NO_METRIC_ROWS,
    PREF_COLUMNS,
    cube_from_table,
    is_subtopic_measure,
    metrics_from_table,
    table_input,
)
from ..measures import parse_measures
from ..options import Options
from .baselines import default_baselines, higher_is_better, metric_matrices
from .orderings import Evidence


@dataclass
class Inputs:
    """Evidence plus what is needed to recompute it (robustness experiments)."""

    evidence: Evidence
    qrels: Qrels | None = None
    run_sources: RunSet = field(default_factory=lambda: RunSet([]))
    relevant: RelevantSet | None = None
    positions: list | None = None
    measures: list | None = None
    baselines: list[str] = field(default_factory=list)
    relevance_level: float | None = None
    max_docs: int | None = None
    binary: bool = False
    #: the runs' position matrix, where the engine kept it instead of ``positions``
    matrix: np.ndarray | None = None
    options: Options | None = None
    #: the matrix while it waits in a temporary file (:meth:`set_matrix_aside`)
    _aside: list = field(default_factory=list, repr=False)

    def position_matrix(self) -> np.ndarray | None:
        """The runs' :func:`~prefeval.core.positions.position_matrix` on ``relevant``
        (runs x relevant documents; None without the reduced runs), made once, or read
        back where it was set aside."""
        if self._aside:
            waiting, held = self._aside
            self._aside = []
            waiting.close()  # reads the matrix back into ``held``
            self.matrix = held.pop()
        if self.matrix is None and self.positions is not None:
            assert self.relevant is not None  # set with the positions
            self.matrix = position_matrix(self.positions, self.relevant)
        return self.matrix

    def has_positions(self) -> bool:
        """Whether :meth:`position_matrix` has a matrix to give (without reading it)."""
        return self.matrix is not None or bool(self._aside) or self.positions is not None

    def set_matrix_aside(self) -> None:
        """The position matrix (only label samples use it; it grows with queries x
        runs) waits in an anonymous temporary file until :meth:`position_matrix` asks
        for it, out of memory while the baselines fill their values and a report's
        sections are made."""
        if self.matrix is None or self._aside:
            return
        held = [self.matrix]
        self.matrix = None  # with ``held``, the last reference (see arrays_set_aside)
        waiting = contextlib.ExitStack()
        try:
            waiting.enter_context(arrays_set_aside(held))
        except BaseException:  # no room: the matrix stays (the error goes on)
            self.matrix = held[0]
            raise
        self._aside = [waiting, held]


def gather_inputs(
    qrels=None,
    runs=(),
    *,
    prefs=None,
    metrics=None,
    options: Options | None = None,
    notify: Callable[[str], None] | None = stderr_notice,
    stream: bool = False,
    win_rates: bool = True,
    signs: bool = False,
    spill: bool = False,
    positions: bool = True,
    engine: Engine | None = None,
) -> Inputs:
    """Preferences and baselines aligned on runs and queries (see module docstring).

    ``runs``: a :class:`~prefeval.io.runs.RunSet`, or what
    :func:`prefeval.io.runs.resolve_runs` takes (paths, DataFrames, or a dict name ->
    run); ``prefs``/``metrics``: tables as paths or DataFrames.
    ``against``: run names; only the pairs with them
    (:func:`~prefeval.core.cube.against_pairs`) are kept, and only those computed when
    the full cube is not cached.  ``stream``: the caller needs only win rates and pair
    moments (``order``, ``discpower``): when the preferences span more than one query
    partition and are not cached, they are computed partition by partition and never
    held whole; without ``win_rates`` (``order``: no randomized HSD) only their
    :class:`~prefeval.core.cube.RankTally` is kept, not the queries x runs matrices;
    with ``signs`` (``agree``) the preferences' signs are kept, packed
    (:class:`~prefeval.core.cube.PackedSigns`); with ``spill`` the win rates are kept
    in temporary files, each measure's read when used.  The options' ``engine``,
    ``"local"`` or ``"dask"`` (on the Dask ``scheduler``, default a local cluster),
    streams the job's partitions and :func:`prefeval.engine.job.fold_evidence` folds
    them, the same values; with ``positions`` the reduced runs (``Inputs.positions``, or
    their position matrix ``Inputs.matrix`` where the local engine streams: label
    sampling needs them), and Dask does not use the cache.
    ``engine``: the engine to compute on (one held open for what follows, the HSD;
    default ``engine_for(options)``).
    Baselines are computed here either way.
    The settings are ``options``' (:class:`~prefeval.options.Options`, judged):
    ``measures``, ``baselines`` (canonical names; None: the default set; (): none),
    ``relevance_level``, ``max_docs``, ``binary``, ``against``, ``engine``,
    ``scheduler``, ``cache``, ``partition_cells`` and ``progress``.
    """
    options = options or Options()
    judged = read_qrels(qrels) if qrels is not None else None
    sources = resolve_runs(runs) if len(runs) else RunSet([])
    inputs = Inputs(
        Evidence([], []),
        judged,
        sources,
        relevance_level=options.relevance_level,
        max_docs=options.max_docs,
        binary=options.binary,
        options=options,
    )
    metrics_table = None
    if prefs is not None:
        cube, metrics_table, metrics = _cube_from_prefs(prefs, metrics, judged, options, notify)
    else:
        want = Want(
            values=not stream, rates=stream, win_rates=win_rates, signs=signs, spill=spill,
            positions=positions,
        )  # fmt: skip
        cube = _computed_cube(inputs, metrics, options, notify, want, engine)
    if cube is not None:
        inputs.evidence = Evidence(list(cube.runs), list(cube.query_ids), cube)
    inputs.set_matrix_aside()
    if options.baselines == ():
        return inputs
    _add_baselines(inputs, prefs, metrics, metrics_table, options, notify)
    return inputs


def _cube_from_prefs(prefs, metrics, judged, options: Options, notify):
    """(cube, metrics table or None, ``metrics``' name) of the preference table
    ``prefs`` on the queries the qrels ``judged`` (or else the metrics table
    ``metrics``) evaluate, with ``options``' measures and pairs ``against``."""
    measures, against = list(options.measures), options.against
    metrics_table = None
    wanted = [m.name for m in parse_measures(measures, True)] if measures else []
    prefs_table, prefs = table_input(prefs, PREF_COLUMNS, "prefs")
    cube = cube_from_table(prefs_table, prefs, wanted)
    # the evaluated queries are the qrels' (or the metrics table's), not only those with
    # rows: a subtopic measure has no rows for a query without subtopic judgments
    if judged is not None:
        relevant = relevant_with_notice(judged, options.relevance_level, None)
        with_subtopics = None
        if relevant.has_subtopics:
            with_subtopics = {
                q for q, s in zip(relevant.query_ids, relevant.subtopics or []) if s.shape[1]
            }
        cube = _on_queries(cube, relevant.query_ids, prefs, notify, judged.name, with_subtopics)
    elif metrics is not None:
        metrics_table, metrics = table_input(metrics, METRIC_COLUMNS, "metrics")
        names = metrics_table["query_id"].unique()
        queries = sorted((q for q in names if q != "all"), key=query_sort_key)
        if not queries:
            raise InputError(metrics, None, NO_METRIC_ROWS)
        cube = _on_queries(cube, queries, prefs, notify, metrics)
    if against:
        cube = cube.select_pairs(against_pairs(cube.runs, against))
    return cube, metrics_table, metrics


def _computed_cube(inputs: Inputs, metrics, options: Options, notify, want: Want, engine=None):
    """The preference cube the engine computes from ``inputs``' qrels and runs (None
    when ``want`` streams: ``inputs.evidence`` then gets the streamed rates instead), its
    measures, relevant documents and positions set on ``inputs``."""
    judged, sources = inputs.qrels, inputs.run_sources
    if judged is None or len(sources) < 2:
        raise InputError("<arguments>", None, "give QRELS and two or more RUNs, or --prefs")
    measures = parse_measures(list(options.measures), judged.has_subtopics)
    inputs.measures = measures
    # the baselines read the runs again: from the columns the engine parsed, where
    # they fit (KEEP_COLUMNS), else parsed again from the bytes the run set holds
    no_baselines, against = options.baselines == (), options.against
    sources.keep_columns(not no_baselines and metrics is None and _columns_fit(sources))
    chosen = against_pairs(list(sources), against) if against else None
    job = Job(judged, sources, measures, options, chosen, notify)
    # the whole cube, or with ``stream`` the win rates and moments merged partition
    # by partition (memory then holds one partition's preferences)
    got = fold_evidence((engine or engine_for(options)).partitions(job, want), want)
    inputs.relevant, inputs.positions, inputs.matrix = got.relevant, got.positions, got.matrix
    if got.cube is None:
        inputs.evidence = Evidence(
            got.names, list(got.relevant.query_ids), streamed=got.streamed or {},
            streamed_pairs=got.streamed_pairs, signs=got.signs or {},
        )  # fmt: skip
    return got.cube


def _add_baselines(inputs: Inputs, prefs, metrics, metrics_table, options: Options, notify):
    """``inputs``' evidence given its baseline values: read from the metrics table
    ``metrics`` (``metrics_table`` when already read), or computed by ir-measures on
    the qrels and runs (then the parsed run columns are let go), or a notice."""
    evidence, judged, sources = inputs.evidence, inputs.qrels, inputs.run_sources
    baselines = options.baselines or ()
    if metrics is not None:
        if metrics_table is None:
            metrics_table, metrics = table_input(metrics, METRIC_COLUMNS, "metrics")
        evidence.metrics = metrics_from_table(
            metrics_table, evidence.runs, evidence.query_ids, metrics, list(baselines) or None
        )
    elif judged is not None and sources:
        missing = [r for r in evidence.runs if r not in sources]
        if missing:
            raise InputError(
                prefs or "<arguments>",
                None,
                f"runs {missing} of the preferences are not among the RUNs given",
            )
        names = list(baselines) or default_baselines(judged.has_subtopics)
        evidence.metrics = metric_matrices(
            judged,
            sources.subset(evidence.runs),
            names,
            query_ids=evidence.query_ids,
            relevance_level=options.relevance_level,
            max_docs=options.max_docs,
            progress=options.progress,
        )
        inputs.baselines = names
        sources.keep_columns(False)
    elif notify is not None:
        notify("no baselines: give QRELS RUN... or --metrics FILE (or --no-baselines)")
    if evidence.metrics:
        evidence.higher_is_better = {name: higher_is_better(name) for name in evidence.metrics}


#: bytes of parsed run columns (about 1.5 times the runs' stored text) kept from the
#: engine's reading for the baselines; beyond, the baselines parse each run again from
#: the bytes its run set holds, one run at a time.  Keeping the columns saves one parse
#: per run and raises the peak RSS by about their size, so recommender-scale runs are
#: parsed again and TREC-scale ones kept (set by ``order`` on bench/run.py's recsys
#: shape at a small ``--scale``; see bench/RESULTS.md).
KEEP_COLUMNS = 64 << 20


def _columns_fit(sources) -> bool:
    """Whether the parsed columns of ``sources`` may be kept for the baselines."""
    return 1.5 * sources.stored_bytes() <= KEEP_COLUMNS


def _on_queries(cube, query_ids, where, notify, source, with_subtopics=None):
    """``cube`` (read from table ``where``) on the queries ``source`` evaluates.

    Queries the table has and ``source`` does not are dropped (with a notice).  A
    query ``source`` evaluates that the table has no row for, for a measure other
    than a subtopic one, is an error: the engine gives those measures a value on
    every evaluated query, so the table was written from other judgments or at
    another relevance level and would be analysed on other queries than the
    baselines.  A subtopic measure may lack a query, except one of
    ``with_subtopics`` (the queries with a subtopic-relevant document, when the
    qrels are known), where the engine gives it a value.
    """
    evaluated = set(query_ids)
    extra = [q for q in cube.query_ids if q not in evaluated]
    if extra and notify is not None:
        notify(f"{where}: {len(extra)} queries are not evaluated here and are ignored")
    cube = cube.reindex(list(query_ids))
    absent = np.isnan(cube.values).all(axis=1)  # measures x queries: no row at all
    for k, name in enumerate(cube.measures):
        if is_subtopic_measure(name):
            if with_subtopics is None:
                continue
            absent[k] &= np.array([q in with_subtopics for q in cube.query_ids], dtype=bool)
        if absent[k].any():
            lacking = np.flatnonzero(absent[k])
            why = (
                f"has subtopic-relevant documents in {source}"
                if is_subtopic_measure(name)
                else f"{source} evaluates"
            )
            raise InputError(
                where,
                None,
                f"incomplete table: no rows for measure {name}, query "
                f"{cube.query_ids[lacking[0]]} ({len(lacking)} such queries), which {why}: "
                "was the table written from other judgments or at another relevance level?",
            )
    return cube
