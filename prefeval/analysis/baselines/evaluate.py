"""Evaluating runs with ir-measures: the evaluators built once per call, the runs read
whole or spilled by query partition, the values of every baseline, query and run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ...core.errors import InputError
from ...core.positions import join_positions, missing_notice, run_positions, set_like
from ...core.progress import progress_bar
from ...core.qrels import Qrels, check_level, distinct_ids, is_relevant
from ...engine import runtime
from ...engine.local import unspilled_notice
from ...io.columns import RunColumns
from ...io.runs import read_qrels, resolve_runs, rows_estimate, spill_runs, streamed
from ...io.spill import STREAMING, Codes, Spill, query_buckets
from .names import (
    GM_MAP,
    MAX_CUTOFF,
    MIN_GEO_MEAN,
    NUM_REL_RET,
    Baseline,
    default_baselines,
    parse_all,
    provider_of,
)
from .native import native_values
from .rankings import Corpus, Ranking, pass_ranking, ranking_of, run_input

# --------------------------------------------------------------------------- API


def _rel_level(level) -> int:
    """``level`` as the ``rel`` of an ir-measures measure: an integer that pytrec_eval's
    C int holds, the bound :func:`_int_grades` sets on the grades these measures see
    (a level above every grade they can see would make nothing relevant)."""
    value = float(level)
    if not value.is_integer():
        raise ValueError(
            f"relevance level {level:g} is not an integer: ir-measures measures take an "
            "integer rel parameter (use an integer level, or set rel=... on the measure)"
        )
    if value > MAX_CUTOFF:
        shown = f"{value:.0f}" if value < 1e16 else f"{value:g}"
        raise ValueError(
            f"relevance level {shown} is beyond what the ir-measures baselines take "
            f"(<= {MAX_CUTOFF}, as their grades); use a smaller level, --no-baselines, "
            "or set rel=... on the measure"
        )
    return int(value)


def _with_level(measure, level):
    """``measure`` with ``rel=level`` when it has a default binary threshold the user
    did not set; unchanged otherwise."""
    info = measure.SUPPORTED_PARAMS.get("rel")
    if level is None or info is None or "rel" in measure.params:
        return measure
    from ir_measures.measures.base import _NOT_PROVIDED

    if info.default is _NOT_PROVIDED:
        # rel is optional with no default (RBP: graded gains; NumRet: all documents):
        # setting it would change what the measure is, not only its threshold
        return measure
    return measure(rel=_rel_level(level))


def _int_grades(frame: pd.DataFrame, qrels: Qrels) -> pd.DataFrame:
    grades = frame["relevance"].to_numpy(dtype=float)
    huge = np.abs(grades) > MAX_CUTOFF
    if huge.any():
        row = frame.iloc[int(np.flatnonzero(huge)[0])]
        raise InputError(
            qrels.name,
            None,
            f"grade {row['relevance']:g} of document {row['doc_id']!r} for query "
            f"{row['query_id']!r} is beyond what the ir-measures baselines take "
            f"(|grade| <= {MAX_CUTOFF}); use --no-baselines or smaller grades",
        )
    bad = grades != np.round(grades)
    if bad.any():
        raise InputError(
            qrels.name,
            None,
            f"grade {grades[bad][0]:g} is not an integer: ir-measures baselines need "
            "integer relevance grades",
        )
    return frame.assign(relevance=grades.astype(np.int64))


def evaluated_queries(qrels: Qrels, general: pd.DataFrame, level, relevant) -> list[str]:
    """``qrels.relevant(level).query_ids``: the judged queries with a relevant document,
    in prefeval's query order; read off the general qrels when the relevant set is not
    otherwise needed (building it costs more than the ir-measures baselines' own setup)."""
    if relevant is not None:
        return list(relevant.query_ids)
    wanted = set(
        distinct_ids(general.loc[is_relevant(general["relevance"].to_numpy(), level), "query_id"])
    )
    return [q for q in qrels.query_ids() if q in wanted]


#: trec_eval's one-document ranking for a query missing from the results (``-c``)
_BOGUS_DOCNO = "ceci_nest_pas_un_docno"
#: the grade-0 judgment added to a query whose judged grades are all negative
_PAD_DOCNO = "ceci_nest_pas_un_jugement"


def _unjudged_docno(base: str, judged) -> str:
    """``base``, lengthened until no judgment (``judged``: docnos) names it."""
    docno = base
    while bool((judged == docno).any()):
        docno += "_"
    return docno


def _pad_negative_queries(qrels_input: dict, judged, targets) -> tuple[dict, pd.Series]:
    """``qrels_input`` (pytrec_eval's dict of dicts, not changed) with a judgment of grade
    0 for an unjudged docno added to every query whose judged grades are all negative,
    and the docnos judged then (``judged`` and the added one), for the trec_eval measures
    ``targets``.

    trec_eval's te_form_res_rels (form_res_rels.c) sets ``num_rel_levels`` only in a
    loop over the grades 0 .. max_rel of the query's judgments, and keeps it in a
    static ``saved_res_rels``: with max_rel < 0 the query inherits the previous query's
    ``num_rel_levels`` over a ``rel_levels`` array zeroed for max_rel + 1 <= 0 entries,
    and ndcg's ideal-gain loop runs for ever (pytrec_eval never returns); as the first
    query, its rel_levels of max_rel + 1 <= 0 entries fail to allocate or overrun
    (trec_eval 9.0.8 stops with "Can't calculate measure", pytrec_eval crashes).
    Negative grades mean "in the pool, unjudged" to trec_eval, so a query with no grade
    >= 0 has num_rel = 0, and one more judged
    non-relevant document that no run retrieves changes none of the values of the
    measures ir-measures' pytrec_eval provider computes: P, RR, Rprec, AP, nDCG (the
    gain of grade 0 is 0), R, Bpref and infAP (they add up only at relevant retrieved
    documents), NumRet, NumQ, SetAP, SetF, SetP, SetR, Success, IPrec (all from num_rel,
    num_rel_ret, num_ret and the ranking's grades; judged_only drops unretrieved
    judgments anyway); NumRel is counted from the qrels (:func:`_num_rel`).  The query
    then has max_rel = 0, ``num_rel_levels`` = 1 and ``rel_levels[0]`` = 1, which every
    loop handles.  ``nDCG(gains=...)`` is evaluated on grades ir-measures maps first:
    its mapped grades are checked too, and a gains map that gives grade 0 a gain could
    not be padded this way (ValueError)."""
    maps = [
        m.params["gains"]
        for m in targets
        if m.NAME == "nDCG" and isinstance(m.params.get("gains"), dict)
    ]
    hazard = [
        q
        for q, grades in qrels_input.items()
        if max(grades.values()) < 0
        or any(max(g.get(v, v) for v in grades.values()) < 0 for g in maps)
    ]
    if not hazard:
        return qrels_input, judged
    if any(g.get(0, 0) != 0 for g in maps):
        raise ValueError(
            f"query {hazard[0]!r} has no judgment with a grade >= 0, which trec_eval "
            "cannot evaluate with an nDCG gains map that gives grade 0 a gain"
        )
    docno = _unjudged_docno(_PAD_DOCNO, judged)
    padded = dict(qrels_input)
    for q in hazard:
        padded[q] = {**qrels_input[q], docno: 0}
    return padded, pd.concat([judged, pd.Series([docno], dtype=object)], ignore_index=True)


def _level_target(baseline: Baseline, level):
    """The measure evaluated for ``baseline`` at ``level`` (see :func:`_with_level`);
    ValueError when no installed provider computes it at that level."""
    if baseline.name == NUM_REL_RET:
        # NumRet(rel=1) as parsed; rel is the level's (trec_eval's num_rel_ret)
        measure = baseline.measure
        if level is not None:
            measure = measure(rel=_rel_level(level))
        return measure
    measure = _with_level(baseline.measure, level)
    if measure is not baseline.measure and measure.NAME != "NumRel":
        try:
            provider_of(measure, str(measure))
        except ValueError:
            raise ValueError(
                f"baseline measure {baseline.name!r} at relevance level {level:g} is "
                f"{measure}, which no installed ir-measures provider computes; give it an "
                f"explicit rel (e.g. {baseline.name}(rel=1)) to keep its own threshold"
            ) from None
    return measure


def _num_rel(general: pd.DataFrame, rel, qpos: dict) -> np.ndarray:
    """``NumRel(rel=R)`` per evaluated query: its judged documents with grade >= R, as
    trec_eval's num_rel counts them at ``-l R`` (pytrec_eval computes R = 1 only)."""
    k = general["query_id"].map(qpos).to_numpy(dtype=float)
    keep = ~np.isnan(k) & (general["relevance"].to_numpy(dtype=float) >= rel)
    return np.bincount(k[keep].astype(np.int64), minlength=len(qpos)).astype(np.float64)


def _empty_ranking_values(targets: dict, qrels_input: dict, judged, nb: int, qpos) -> np.ndarray:
    """Values, baselines x evaluated queries, of the measures in ``targets`` for a query
    a run did not answer: their values on an empty ranking.

    trec_eval measures (ir-measures' pytrec_eval provider) get them as ``trec_eval -c``
    does: the query is evaluated on a ranking of one unjudged document (trec_eval's
    "bogus ranking" ``ceci_nest_pas_un_docno``), then ``num_ret`` (``NumRet`` without
    rel) is reset to 0; trec_eval's other clean-ups concern measures ir-measures lacks.
    That gives 1 for ``NumQ`` and 0 for every other measure, the empty ranking's values
    (``NumRel`` is counted from the qrels, by no evaluator).  (An empty
    ranking itself is no substitute: pytrec_eval answers NaN for ``IPrec@0`` on it, and
    other providers divide by its length.)  With ``judged_only`` the unjudged document is
    dropped and pytrec_eval sees the empty ranking: ``IPrec(judged_only=True)`` is NaN
    there, as for any ranking without a judged document.

    Other providers keep ir-measures' fill ``Measure.DEFAULT`` = 0, also their value on
    an empty ranking (ndeval's intent-aware measures are sums over the ranking).  Queries
    absent from the qrels stay 0: trec_eval never evaluates them.
    """
    import ir_measures

    out = np.zeros((nb, len(qpos)))
    trec = [m for m in targets if provider_of(m, str(m)).NAME == "pytrec_eval"]
    if not trec or not qrels_input:
        return out
    docno = _unjudged_docno(_BOGUS_DOCNO, judged)  # whatever the qrels hold
    bogus = {q: {docno: 1.0} for q in qrels_input}
    by_id = {id(m): targets[m] for m in trec}
    for metric in ir_measures.evaluator(trec, qrels_input).iter_calc(bogus):
        k = qpos.get(metric.query_id)
        members = by_id.get(id(metric.measure)) or targets.get(metric.measure, ())
        if k is None or not members:
            continue
        measure = metric.measure
        value = metric.value
        if measure.NAME == "NumRet" and "rel" not in measure.params:
            value = 0.0  # num_ret: the bogus document was not retrieved
        for i in members:
            out[i, k] = value
    return out


@dataclass
class _Group:
    """One ir-measures evaluator, built once for all runs, and the baselines it computes."""

    evaluator: Any
    targets: dict  # evaluated measure -> [baseline index]
    ia: bool  # intent-aware: subtopic qrels, ndeval
    qrels_input: Any
    judged: pd.Series  # docnos of the qrels rows
    _empty: np.ndarray | None = None

    @property
    def members(self) -> list[int]:
        return [i for indices in self.targets.values() for i in indices]

    def empty_values(self, nb: int, qpos: dict) -> np.ndarray:
        """:func:`_empty_ranking_values`, computed on first use (only runs that miss a
        query need them)."""
        if self._empty is None:
            self._empty = _empty_ranking_values(
                self.targets, self.qrels_input, self.judged, nb, qpos
            )
        return self._empty


def baseline_values(qrels, runs, baselines, query_ids, relevance_level, max_docs, progress, notify):
    """:func:`compute_metrics`' values: (baselines x queries x runs array, the parsed
    baselines, the run names, the query ids).

    Runs are evaluated one at a time, each read whole; when some run file is large
    (:func:`prefeval.io.runs.streamed`), the runs are spilled to temporary files by query
    and evaluated a partition of the queries at a time instead
    (:func:`_evaluate_partitions`): the same values, in memory bounded by a partition."""
    relevance_level = check_level(relevance_level)
    qrels, parsed = _qrels_and_baselines(qrels, baselines)
    items = list(resolve_runs(runs).items())
    natives = [i for i, b in enumerate(parsed) if b.kind == "native"]
    general = qrels.general()
    relevant = qrels.relevant(relevance_level) if natives else None
    if query_ids is None:
        qlist = evaluated_queries(qrels, general, relevance_level, relevant)
    else:
        qlist = list(dict.fromkeys(str(q) for q in query_ids))
    nq, nr, nb = len(qlist), len(items), len(parsed)
    qpos = {q: k for k, q in enumerate(qlist)}

    values = np.zeros((nb, nq, nr))  # per baseline, the queries x runs matrix analyses take
    args = (items, qrels, general, parsed, relevance_level, qlist, max_docs, progress, relevant)
    results = None
    if nq and streamed([run for _, run in items], STREAMING):
        try:
            results = _evaluate_partitions(values, *args, streaming=STREAMING)
        except OSError as error:  # no room or no right to write temporary files: read
            values[:] = 0.0  # the runs whole, as the engine does (with its notice)
            if notify is not None and error.errno is not None:  # Arrow's own have none
                notify(unspilled_notice(len(items), error.strerror or str(error)))
    if results is None:
        results = _evaluate_runs(values, *args)
    positions, answered, sizes = results
    _count_num_rel(values, parsed, general, relevance_level, qpos)
    if notify is not None:
        evaluated = evaluated_queries(qrels, general, relevance_level, relevant)
        rows = np.array([qpos[q] for q in evaluated if q in qpos], dtype=np.int64)
        for (name, _), answers in zip(items, answered):
            missing = int((~answers[rows]).sum())
            if missing:
                notify(missing_notice(name, missing, len(evaluated)))
    if natives:
        _native_metrics(values, parsed, natives, positions, relevant, sizes, qpos)
    for i, baseline in enumerate(parsed):
        if baseline.name == GM_MAP:  # trec_eval's per-query value of gm_map
            values[i] = np.log(np.maximum(values[i], MIN_GEO_MEAN))
    return values, parsed, [name for name, _ in items], qlist


def _qrels_and_baselines(qrels, baselines) -> tuple[Qrels, list[Baseline]]:
    """``qrels`` read (a :class:`~prefeval.core.qrels.Qrels` as given) and ``baselines``
    parsed (None: :func:`default_baselines`); ValueError for intent-aware measures on
    qrels without subtopics."""
    qrels = read_qrels(qrels) if not isinstance(qrels, Qrels) else qrels
    if baselines is None:
        baselines = default_baselines(qrels.has_subtopics)
    parsed = parse_all(baselines)
    intent_aware = [b.name for b in parsed if b.intent_aware]
    if intent_aware and not qrels.has_subtopics:
        raise ValueError(
            f"intent-aware measure(s) {', '.join(intent_aware)} need subtopic qrels "
            f"(iteration = subtopic id); {qrels.name} has none"
        )
    return qrels, parsed


def _count_num_rel(values, parsed, general, level, qpos: dict) -> None:
    """The ``NumRel`` baselines of ``parsed`` counted from the qrels into ``values``
    (baselines x queries x runs), whatever the runs retrieved (:func:`_num_rel`)."""
    for i, b in enumerate(parsed):
        if b.kind == "irm" and b.measure.NAME == "NumRel":
            values[i] = _num_rel(general, _level_target(b, level)["rel"], qpos)[:, None]


def _evaluators(qrels: Qrels, general, parsed, level, qpos: dict, judged=None) -> list[_Group]:
    """The ir-measures evaluators of the baselines ``parsed`` (but ``NumRel``, counted
    by :func:`_count_num_rel`) on the queries ``qpos``, one per qrels flavour and provider
    part, built once for all runs (``judged``: per flavour, the docnos judged for every
    evaluated query, when ``qpos`` are some of them)."""
    evaluators: list[_Group] = []
    groups: dict[bool, list] = {False: [], True: []}
    for i, b in enumerate(parsed):
        if b.kind == "irm" and b.measure.NAME != "NumRel":
            groups[b.intent_aware].append(i)
    for ia, members in groups.items():
        if not members:
            continue
        targets: dict = {}
        for i in members:  # a level no measure takes is an error, queries or none
            targets.setdefault(_level_target(parsed[i], level), []).append(i)
        if qpos:
            given = None if judged is None else judged[ia]
            evaluators.extend(_flavour_groups(qrels, general, targets, ia, qpos, given))
    return evaluators


def _of_queries(ids, qpos) -> np.ndarray:
    """Whether each of the query ``ids`` (a pandas column of strings) is one of ``qpos``
    (query ids, a dict's keys), by one Arrow hash table: pandas' ``isin`` made a Python
    scalar of every id asked for (a large transient at recommender scale)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    column = pa.array(ids)
    wanted = set_like(pa.array(list(qpos), pa.string()), column)
    return np.asarray(pc.is_in(column, value_set=wanted), dtype=bool)


def _judged(qrels: Qrels, general, parsed, qpos: dict) -> dict:
    """Per qrels flavour of the baselines ``parsed`` (intent-aware or not), the docnos
    judged for the queries ``qpos``, which name the documents the evaluators add
    (:func:`_unjudged_docno`)."""
    out = {}
    for ia in {b.intent_aware for b in parsed if b.kind == "irm"}:
        frame = qrels.subtopic_frame() if ia else general
        out[ia] = frame["doc_id"][_of_queries(frame["query_id"], qpos)]
    return out


def _flavour_groups(
    qrels: Qrels, general, targets: dict, ia: bool, qpos: dict, judged=None
) -> list[_Group]:
    """The :class:`_Group` evaluators of the measures ``targets`` (measure -> baseline
    indices) on one qrels flavour (``ia``: subtopic qrels) of the queries ``qpos``
    (``judged``: the docnos that name the documents added, by default those of ``qpos``'
    judgments)."""
    import ir_measures

    frame = qrels.subtopic_frame() if ia else general
    frame = _int_grades(frame[_of_queries(frame["query_id"], qpos)], qrels)
    # judgments in one canonical order: ndeval sums over them in the order given,
    # so the qrels file's line order must not reach the last bits of AP_IA & co
    keys = ["query_id", "iteration", "doc_id"] if ia else ["query_id", "doc_id"]
    frame = frame.sort_values(keys, kind="stable", ignore_index=True)
    qrels_input: list[Any] | dict[str, dict[str, float]]
    if ia:
        qrels_input = list(
            map(
                ir_measures.Qrel,
                frame["query_id"].tolist(),
                frame["doc_id"].tolist(),
                frame["relevance"].tolist(),
                frame["iteration"].astype(str).tolist(),
            )
        )
    else:
        qrels_input = {
            q: dict(zip(part["doc_id"].tolist(), part["relevance"].tolist()))
            for q, part in frame.groupby("query_id", sort=False)
        }
    out = []
    for part, pad in _provider_parts(targets, ia):
        if not part:
            continue
        given, docnos = qrels_input, frame["doc_id"] if judged is None else judged
        if pad:
            assert isinstance(qrels_input, dict)  # padded: general qrels only (not ia)
            given, docnos = _pad_negative_queries(qrels_input, docnos, part)
        evaluator = ir_measures.evaluator(list(part), given)
        out.append(_Group(evaluator, part, ia, given, docnos))
    return out


def _provider_parts(targets: dict, ia: bool) -> list[tuple[dict, bool]]:
    """``targets`` cut into the parts evaluated apart, each with whether its qrels are
    padded (:func:`_pad_negative_queries`): on general qrels, the trec_eval measures
    with ``judged_only``, those without, and the others; intent-aware ones together."""
    if ia:
        return [(targets, False)]
    # the trec_eval measures apart: their qrels never hold max_rel < 0
    trec = {m: v for m, v in targets.items() if provider_of(m, str(m)).NAME == "pytrec_eval"}
    # and judged_only ones apart from the others: ir-measures puts the measures
    # without the option (NumRet, NumQ, ...) into whichever pytrec_eval call it
    # makes first, so in one evaluator NumRet counted only judged documents or
    # all of them by the hash seed
    return [
        ({m: v for m, v in trec.items() if bool(m.params.get("judged_only")) is only}, True)
        for only in (True, False)
    ] + [({m: v for m, v in targets.items() if m not in trec}, False)]


def _relevant_corpus(general, level, qpos: dict, nq: int) -> Corpus:
    """The corpus of the native metrics with its relevant documents added: n is the
    distinct documents of all the rankings and the relevant documents (rpp-sigir2022
    section 5.5), not the judged non-relevant ones; the runs add theirs."""
    import pyarrow as pa

    corpus = Corpus(nq)
    rel = general[
        _of_queries(general["query_id"], qpos) & is_relevant(general["relevance"].to_numpy(), level)
    ]
    corpus.add(
        rel["query_id"].map(qpos).to_numpy(dtype=np.int64),
        pa.array(rel["doc_id"].tolist(), pa.string()),
    )
    return corpus


def _evaluate_run(
    values, r: int, ranking: Ranking, evaluators, qlist, qpos: dict, where=None
) -> None:
    """The ir-measures values of run ``r`` (its ``ranking`` of the queries ``qlist``,
    ``qpos`` their indices) written into ``values`` (baselines x queries x runs: query k
    of ``qlist`` at ``where[k]``, by default k), queries it did not answer given the
    empty ranking's."""
    where = np.arange(len(qlist)) if where is None else where
    missing = np.flatnonzero(np.diff(ranking.bounds) == 0)
    for group in evaluators:
        targets = group.targets
        # providers hand back the measure objects they were given: look up by id
        # first (hashing an ir-measures Measure formats its repr)
        by_id = {id(m): i for m, i in targets.items()}
        for metric in group.evaluator.iter_calc(run_input(ranking, qlist, group.ia)):
            k = qpos.get(metric.query_id)
            if k is not None:
                found = by_id.get(id(metric.measure))
                for i in targets.get(metric.measure, ()) if found is None else found:
                    values[i, where[k], r] = metric.value
        if len(missing) and not group.ia:
            # queries the run did not answer: the empty ranking's values, not
            # ir-measures' fill of 0 (NumQ)
            empty = group.empty_values(values.shape[0], qpos)
            for i in group.members:
                values[i, where[missing], r] = empty[i, missing]


def _evaluate_runs(
    values, items, qrels, general, parsed, level, qlist, max_docs, progress, relevant
) -> tuple:
    """Each run of ``items`` (name, :class:`~prefeval.io.runs.Run`) read whole, once, and
    evaluated into ``values`` (baselines x queries ``qlist`` x runs) by evaluators built
    once for all runs.  Returns, with native baselines among ``parsed`` (else empty),
    each run's positions of the ``relevant`` documents and the corpus size of each query
    (:class:`Corpus`); and per run whether it answered each query (a document left
    after ``max_docs``)."""
    import pyarrow as pa

    qpos = {q: k for k, q in enumerate(qlist)}
    qvals = pa.array(qlist, pa.string())
    evaluators = _evaluators(qrels, general, parsed, level, qpos)
    corpus = _relevant_corpus(general, level, qpos, len(qlist)) if relevant else None
    positions, answered = [], []
    for r, (name, source) in enumerate(
        progress_bar(items, desc="baselines (ir-measures)", unit="run", enable=progress)
    ):
        path = source.path
        ranking = pass_ranking(source, qlist, max_docs)  # a TREC text file in one pass
        if ranking is None:
            columns = source.read()
            path, ranking = columns.path, ranking_of(columns, qvals, max_docs)
        answered.append(np.diff(ranking.bounds) > 0)
        _evaluate_run(values, r, ranking, evaluators, qlist, qpos)
        if corpus is not None:
            corpus.add(ranking.q, ranking.doc_id)
            ordered = RunColumns(name, path, qvals.take(ranking.q), ranking.doc_id, ranking.score)
            positions.append(run_positions(ordered, relevant))
    return positions, answered, corpus.sizes() if corpus is not None else None


def _evaluate_partitions(
    values, items, qrels, general, parsed, level, qlist, max_docs, progress, relevant, streaming
) -> tuple:
    """:func:`_evaluate_runs`' results, in memory bounded by a partition of the queries:
    every run spilled to temporary files by query (:func:`prefeval.io.runs.spill_runs`,
    a many-run table in one pass), then each partition's queries evaluated, run by run,
    by evaluators of that partition's judgments only.  Every value is the one the whole
    runs give: a query's values, its rows and its corpus depend on that query alone.
    A problem of a run file is reported by reading that file whole, as
    :func:`_evaluate_runs` reads it (``streaming``: the pieces' and partitions' sizes)."""
    import pyarrow as pa

    runs = [run for _, run in items]
    rows = rows_estimate(runs)
    parts = streaming.parts(rows, evaluated=True)
    # a file per partition open while spilling: the soft limit raised to that; under a
    # low hard limit as many partitions as other spills
    if not runtime.spill_files(parts, "the baselines' spill"):
        parts = streaming.parts(rows)
    part_of = query_buckets(pa.array(qlist, pa.string()), parts)
    judged = _judged(qrels, general, parsed, {q: k for k, q in enumerate(qlist)})
    totals = _Totals(items, len(qlist), relevant)
    try:
        with Spill(parts) as spill:
            spill_runs(spill, runs, streaming)
            runtime.after_partition()  # the pieces' buffers: not beside the evaluation's
            bar = progress_bar(
                range(parts), desc="baselines (ir-measures)", unit="part", enable=progress
            )
            for k in bar:
                where = np.flatnonzero(part_of == k)
                if len(where):
                    mine = [qlist[j] for j in where.tolist()]
                    qpos = {q: j for j, q in enumerate(mine)}
                    evaluators = _evaluators(qrels, general, parsed, level, qpos, judged)
                    corpus = _relevant_corpus(general, level, qpos, len(mine)) if relevant else None
                    totals.add(
                        values, spill.partition(k), mine, qpos, where, evaluators, corpus,
                        max_docs,
                    )  # fmt: skip
                    del evaluators, corpus
                    runtime.after_partition()  # a partition's rows, rankings and judgments
    except InputError:
        for run in runs:  # the first problem where reading the files whole finds it
            run.read()
        raise
    return totals.results()


class _Totals:
    """What :func:`_evaluate_partitions` gathers over the partitions, run by run: the
    queries answered, the positions of the relevant documents and the corpus sizes
    (natives only: with a ``relevant`` set)."""

    def __init__(self, items, nq: int, relevant):
        self.names = [name for name, _ in items]
        self.at = {name: r for r, name in enumerate(self.names)}
        self.relevant = relevant
        self.answered = [np.zeros(nq, dtype=bool) for _ in items]
        self.codes = Codes(relevant) if relevant else None
        self.found: list[list[tuple]] = [[] for _ in items]
        self.retrieved = [np.zeros(relevant.n_queries if relevant else 0, np.int64) for _ in items]
        self.sizes = np.zeros(nq, dtype=np.int64)

    def add(
        self, values, partition, mine: list, qpos: dict, where, evaluators, corpus, max_docs
    ) -> None:
        """The runs' columns of one ``partition`` (the queries ``mine``, ``qpos`` their
        indices, at ``where`` among the evaluated ones) evaluated into ``values``; a run
        without rows there answered none of them."""
        import pyarrow as pa

        qvals = pa.array(mine, pa.string())
        seen = set()
        for columns in partition:
            r = self.at[columns.name]
            seen.add(r)
            ranking = ranking_of(columns, qvals, max_docs)
            self.answered[r][where] |= np.diff(ranking.bounds) > 0
            _evaluate_run(values, r, ranking, evaluators, mine, qpos, where)
            if corpus is not None:
                corpus.add(ranking.q, ranking.doc_id)
                ordered = RunColumns(
                    columns.name, columns.path, qvals.take(ranking.q), ranking.doc_id,
                    ranking.score,
                )  # fmt: skip
                assert self.codes is not None  # made with the relevant documents
                part = self.codes.positions(ordered, None)
                self.found[r].append((part.doc, part.rank))
                self.retrieved[r] += part.retrieved
            del columns
        for r in sorted(set(range(len(self.names))) - seen):
            _evaluate_run(values, r, _no_ranking(len(mine)), evaluators, mine, qpos, where)
        if corpus is not None:
            self.sizes[where] = corpus.sizes()

    def results(self) -> tuple:
        """(positions, queries answered, corpus sizes), as :func:`_evaluate_runs`'."""
        if self.relevant is None:
            return [], self.answered, None
        positions = [
            join_positions(name, self.found[r], self.retrieved[r])
            for r, name in enumerate(self.names)
        ]
        return positions, self.answered, self.sizes


def _no_ranking(nq: int) -> Ranking:
    """The :class:`Ranking` of a run without rows for any of ``nq`` queries."""
    import pyarrow as pa

    empty = np.zeros(0, dtype=np.int64)
    return Ranking(empty, pa.array([], pa.string()), np.zeros(0), np.zeros(nq + 1, np.int64))


def _native_metrics(values, parsed, natives, positions, relevant, sizes, qpos: dict) -> None:
    """The native baselines (indices ``natives`` of ``parsed``) of every run (its
    ``positions``) written into ``values``, on the corpus ``sizes`` of the queries."""
    rel_to_q = np.array([qpos.get(q, -1) for q in relevant.query_ids], dtype=np.int64)
    for i in natives:
        for r, pos in enumerate(positions):
            values[i, :, r] = native_values(
                parsed[i], pos, relevant, sizes, rel_to_q, values.shape[1]
            )
