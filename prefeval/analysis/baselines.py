"""Baseline (per-run) metrics next to the preferences: ir-measures plus two native metrics.

Any `ir-measures <https://ir-measur.es>`_ measure string works (``AP``, ``nDCG@10``,
``RR``, ``R@1000``, ``Rprec``, ``P@10``, ``ERR_IA@20``, ``alpha_nDCG@20``, ...).  Two
metrics of the papers that ir-measures lacks are computed here from rank positions:

``TSE``
    total search efficiency (lexirecall, eq. 3): the exposure ``e(p_m)`` of the *last*
    relevant document.  ``TSE`` uses ``e(k) = 1/log2(1+k)``, ``TSE(exposure=rr)``
    ``e(k) = 1/k`` and ``TSE(exposure=rbp,gamma=0.5)`` ``e(k) = gamma^(k-1)`` (gamma
    defaults to 0.5).  Higher is better.
``ASL``
    average search length (rpp-sigir2022, eq. 1 and section 5.5): the mean rank of the
    relevant documents.  Smaller is better.

and one of trec_eval that ir-measures lacks, computed from ir-measures' ``AP``:

``gm_map``
    geometric mean average precision (trec_eval's ``gm_map``, m_gm_map.c): per query
    ``log(max(AP, 0.00001))``, the value trec_eval (and pytrec_eval) computes per query
    and trec_eval -q does not print; the summary is ``exp`` of their mean, the geometric
    mean of AP with AP floored at ``MIN_GEO_MEAN`` = 0.00001.  The mean of the per-query
    values orders runs as the geometric mean does, so the analyses take it as they are.

TSE and ASL use pessimistic imputation: the ``u`` relevant documents a run did not retrieve take
positions ``n-u+1 .. n`` at the bottom of a corpus of ``n`` documents, where ``n`` is, per
query, the number of distinct documents in all the runs evaluated together (after
``max_docs``) and the relevant documents: "the number of unique items in union of all
rankings and the relevant items" (rpp-sigir2022 section 5.5, for ASL; the lexirecall paper
fixes no n, and TSE takes the same).  Judged non-relevant documents no run retrieved are not
counted.  A run that retrieved nothing for a query therefore still gets a (poor) value,
not 0.  Relevance is prefeval's: general grade
(maximum over subtopics) ``>= relevance_level``, or ``> 0`` without a level.

Which qrels an ir-measures measure sees
---------------------------------------
Standard measures get the general qrels, one row per judged document with the maximum
grade over its rows (:meth:`prefeval.core.qrels.Qrels.general`).  Intent-aware measures (those
ir-measures evaluates with ndeval: ``*_IA``, ``alpha_(n)DCG``, ``StRecall``, ``(n)NRBP``)
get the subtopic rows with the subtopic id as ``iteration``.  Subtopic rows are never fed
to a trec_eval measure: pytrec_eval keys judgments by (query, document), so one subtopic's
row would silently overwrite another's.

Runs are read with prefeval's fast reader, restricted to the evaluated queries, sorted as
trec_eval sorts them (score descending, docno descending) and cut at ``max_docs``; each
run is then handed to evaluators built once for all runs, as a dict of dicts (trec_eval
measures) or an iterator of ``ScoredDoc`` (ndeval), the formats those providers consume
without ir-measures' row-by-row DataFrame conversion.

Per-query slices of a run are always taken by query, whatever order its file lists the
queries in (query blocks in any order, lines shuffled).

Ties: trec_eval (pytrec_eval) ranks equal scores by docno descending, as prefeval does
(preferences, TSE, ASL).  pyndeval re-sorts every ranking by score and breaks ties by
docno *ascending*; the intent-aware values follow it, so they equal ir-measures' own
(only the ``max_docs`` cut itself is made in trec order).

A query a run did not answer is evaluated as ``trec_eval -c`` does, on an empty ranking:
see :func:`_empty_ranking_values`.
"""

from __future__ import annotations

import contextlib
import io
import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..core import limits
from ..core.errors import InputError, SystemLimitError
from ..core.positions import join_positions, missing_notice, run_positions, set_like, trec_order
from ..core.progress import progress_bar
from ..core.qrels import Qrels, check_level, distinct_ids, is_relevant
from ..engine.local import unspilled_notice
from ..engine.memory import release_free_memory
from ..io.columns import RunColumns
from ..io.runs import read_qrels, resolve_runs, rows_estimate, spill_runs, streamed
from ..io.spill import STREAMING, Codes, Spill, query_buckets
from ..io.tables import MAX_METRIC_VALUE, metrics_from_table
from ..io.textpass import run_text_ranking
from ..options import Options

__all__ = [
    "DEFAULT_BASELINES",
    "DEFAULT_SUBTOPIC_BASELINES",
    "GM_MAP",
    "NATIVE_BASELINES",
    "Baseline",
    "compute_metrics",
    "default_baselines",
    "higher_is_better",
    "is_measure",
    "metric_matrices",
    "metrics_rows",
    "metrics_frames",
    "metrics_summary",
    "no_metrics",
    "parse_baseline",
    "parse_baselines",
    "without_runid",
]

DEFAULT_BASELINES = ["AP", "nDCG", "RR", "R@1000", "Rprec"]
DEFAULT_SUBTOPIC_BASELINES = ["ERR_IA@20", "alpha_nDCG@20", "StRecall@20", "AP_IA"]
NATIVE_BASELINES = ["TSE", "ASL"]
COLUMNS = ["measure", "run", "query_id", "value"]

#: TSE exposure functions e(k) of a 1-based rank k (float array).
EXPOSURES: dict[str, Callable[[np.ndarray, float], np.ndarray]] = {
    "log2": lambda k, gamma: 1.0 / np.log2(1.0 + k),
    "rr": lambda k, gamma: 1.0 / k,
    "rbp": lambda k, gamma: np.power(gamma, k - 1.0),
}
_EXPOSURE_ALIASES = {"log2": "log2", "log": "log2", "dcg": "log2", "rr": "rr", "rbp": "rbp"}
DEFAULT_GAMMA = 0.5
# ndeval (pyndeval) computes cutoff measures up to rank 20 only
_NDEVAL_MAX_CUTOFF = 20
_MAX_CUTOFF = 2**31 - 1
#: trec_eval's geometric mean AP (:func:`gm_map`): its name, and the floor of AP
GM_MAP = "gm_map"
MIN_GEO_MEAN = 0.00001
#: the name of NumRet(rel=1) written without rel (NumRelRet, num_rel_ret): rel follows -l
_NUM_REL_RET = "NumRelRet"


@dataclass(frozen=True)
class Baseline:
    """One parsed baseline metric.

    ``name`` is the canonical string (ir-measures' own spelling for its measures), used
    as ``measure`` in :func:`compute_metrics`' table.  ``kind`` is ``'irm'`` (computed by
    ir-measures) or ``'native'`` (TSE, ASL); ``intent_aware`` measures use subtopic qrels.
    """

    name: str
    higher_is_better: bool
    kind: str
    intent_aware: bool
    #: the ir_measures Measure (``kind == 'irm'``)
    measure: Any = field(default=None, compare=False, repr=False)
    #: native parameters: ``(("exposure", ...), ("gamma", ...))`` for TSE
    params: tuple = field(default=(), compare=False, repr=False)

    def __str__(self) -> str:
        return self.name


def default_baselines(has_subtopics: bool) -> list[str]:
    """The baselines reported by default: standard ones, plus intent-aware ones for
    subtopic qrels."""
    return DEFAULT_BASELINES + (DEFAULT_SUBTOPIC_BASELINES if has_subtopics else [])


def is_measure(value) -> bool:
    """Whether ``value`` is an ir-measures measure object (``ir_measures.AP``,
    ``nDCG@10``), which :func:`parse_baseline` takes as its string."""
    import ir_measures

    return isinstance(value, ir_measures.Measure)


def higher_is_better(measure_name) -> bool:
    """Whether larger values of ``measure_name`` are better (False only for ASL)."""
    return parse_baseline(measure_name).higher_is_better


# --------------------------------------------------------------------------- parsing

_NATIVE_RE = re.compile(r"^(TSE|ASL)\s*(?:\((.*)\))?$", re.DOTALL)


def parse_baseline(text) -> Baseline:
    """Parse ``TSE``/``ASL`` (with parameters) or any ir-measures measure string.

    Raises ValueError for unknown measures, invalid parameters, measures no installed
    ir-measures provider computes, and ndeval measures without a cutoff or beyond @20.
    """
    if isinstance(text, Baseline):
        return text
    if not isinstance(text, str):
        import ir_measures

        if isinstance(text, ir_measures.Measure):
            return _parse_irm(text, str(text), from_text=False)
        raise ValueError(f"baseline measure must be a string, not {type(text).__name__}")
    text = text.strip()
    if text == GM_MAP:
        import ir_measures

        return Baseline(GM_MAP, True, "irm", False, measure=ir_measures.AP)
    match = _NATIVE_RE.match(text)
    if match:
        return _parse_native(match.group(1), match.group(2), text)
    return _parse_irm(None, text)


def _parse_native(name: str, args: str | None, text: str) -> Baseline:
    params: dict[str, str] = {}
    if args is not None and args.strip():
        for item in args.split(","):
            key, sep, value = item.partition("=")
            key, value = key.strip(), value.strip().strip("'\"")
            if not sep or not key or not value:
                raise ValueError(f"baseline {text!r}: parameters must be written key=value")
            if key in params:
                raise ValueError(f"baseline {text!r}: parameter {key!r} given twice")
            params[key] = value
    if name == "ASL":
        if params:
            raise ValueError(f"baseline {text!r}: ASL takes no parameters")
        return Baseline("ASL", False, "native", False)
    unknown = set(params) - {"exposure", "gamma"}
    if unknown:
        raise ValueError(
            f"baseline {text!r}: unknown parameter(s) {sorted(unknown)}; TSE takes exposure "
            "(log2, rr or rbp) and, with exposure=rbp, gamma"
        )
    exposure = _EXPOSURE_ALIASES.get(params.get("exposure", "log2").lower())
    if exposure is None:
        raise ValueError(
            f"baseline {text!r}: exposure must be log2, rr or rbp, not {params['exposure']!r}"
        )
    gamma = DEFAULT_GAMMA
    if "gamma" in params:
        if exposure != "rbp":
            raise ValueError(f"baseline {text!r}: gamma only applies to exposure=rbp")
        try:
            gamma = float(params["gamma"])
        except ValueError:
            gamma = math.nan
        if not 0.0 < gamma < 1.0:
            raise ValueError(f"baseline {text!r}: gamma must be a number in (0, 1)")
    shown = []
    if exposure != "log2":
        shown.append(f"exposure={exposure}")
    if gamma != DEFAULT_GAMMA:
        shown.append(f"gamma={gamma!r}")
    canonical = "TSE" + (f"({','.join(shown)})" if shown else "")
    return Baseline(
        canonical, True, "native", False, params=(("exposure", exposure), ("gamma", gamma))
    )


def _parse_irm(measure, text: str, from_text: bool = True) -> Baseline:
    """``measure`` (parsed from ``text`` when None) checked; ``from_text``: ``text`` is
    what the user wrote (not a Measure object), so ``NumRelRet``/``num_rel_ret`` without
    a written ``rel=`` is the measure that follows the relevance level."""
    import ir_measures

    hint = (
        "use an ir-measures measure (e.g. AP, nDCG@10, RR, R@1000, P@10, ERR_IA@20), "
        f"a trec_eval name (map, ndcg_cut_10, P_10, recip_rank) or {' or '.join(NATIVE_BASELINES)}"
    )
    if measure is None:
        try:
            measure = ir_measures.parse_measure(text)
        except (ValueError, NameError, SyntaxError, KeyError, TypeError) as error:
            detail = str(error).strip("'\"")
            raise ValueError(
                f"unknown baseline measure {text!r} ({detail}){_close_names(text)}; {hint}"
            ) from None
    missing = [
        (key, info)
        for key, info in measure.SUPPORTED_PARAMS.items()
        if getattr(info, "required", False) and key not in measure.params
    ]
    if missing:
        key, info = missing[0]
        desc = f" ({info.desc})" if getattr(info, "desc", None) else ""
        raise ValueError(
            f"baseline measure {text!r}: {measure.NAME} needs its parameter {key}{desc}, "
            f"as in {measure.NAME}({key}=...): ir-measures has no default for it"
        )
    try:
        measure.validate_params()
    except AssertionError as error:
        raise ValueError(f"baseline measure {text!r}: {error}") from None
    except (KeyError, TypeError) as error:
        raise ValueError(f"baseline measure {text!r}: unsupported parameter {error}") from None
    for key, value in measure.params.items():
        # pytrec_eval and pyndeval take C ints: a cutoff must be a rank they can hold
        if (
            key == "cutoff"
            and value is not None
            and not (isinstance(value, int) and 1 <= value <= _MAX_CUTOFF)
        ):
            raise ValueError(
                f"baseline measure {text!r}: cutoff @{value} must be an integer from 1 "
                f"to {_MAX_CUTOFF}"
            )
    if measure.NAME == "NumRel":  # counted from the qrels at any rel: _num_rel
        return Baseline(_irm_name(measure), True, "irm", False, measure=measure)
    if (
        from_text
        and measure.NAME == "NumRet"
        and measure.params.get("rel") == 1
        and not re.search(r"\brel\s*=", text)
    ):
        # ir-measures' NumRelRet is NumRet(rel=1); as trec_eval's num_rel_ret it counts
        # the retrieved documents that are relevant at the relevance level
        _provider(measure, text)
        return Baseline(_NUM_REL_RET, True, "irm", False, measure=measure)
    provider = _provider(measure, text)
    rel = measure.params.get("rel")
    if provider.NAME == "pytrec_eval" and isinstance(rel, int) and rel < 1:
        # pytrec_eval takes a positive relevance level only (its TypeError otherwise)
        example = re.sub(r"rel=-?[0-9]+", "rel=1", str(measure))
        raise ValueError(
            f"baseline measure {text!r}: rel must be >= 1 (pytrec_eval, which computes "
            f"{measure.NAME}, takes no lower relevance level), e.g. {example}"
        )
    intent_aware = provider.NAME == "pyndeval"
    if intent_aware and "cutoff" in measure.SUPPORTED_PARAMS:
        cutoff = measure.params.get("cutoff")
        if cutoff is None:
            raise ValueError(
                f"baseline measure {text!r} needs a cutoff, e.g. {measure.NAME}@20 "
                f"(ndeval computes at most @{_NDEVAL_MAX_CUTOFF})"
            )
        if cutoff > _NDEVAL_MAX_CUTOFF:
            raise ValueError(
                f"baseline measure {text!r}: ndeval computes intent-aware measures up to "
                f"@{_NDEVAL_MAX_CUTOFF} only"
            )
    return Baseline(_irm_name(measure), True, "irm", intent_aware, measure=measure)


def _provider(measure, text: str):
    """The provider ir-measures' default pipeline would use for ``measure``."""
    import ir_measures

    unavailable = []
    for provider in ir_measures.DefaultPipeline.providers:
        if provider.supports(measure):
            if provider.is_available():
                return provider
            unavailable.append(provider)
    if unavailable:
        how = "; ".join(
            f"{p.NAME}: {p.install_instructions() or 'not installed'}" for p in unavailable
        )
        raise ValueError(
            f"baseline measure {text!r} needs an ir-measures provider that is not installed ({how})"
        )
    raise ValueError(f"baseline measure {text!r}: no ir-measures provider computes it")


def _irm_name(measure) -> str:
    """ir-measures' spelling, except that an explicit ``rel`` stays visible even at its
    default: it opts the measure out of ``relevance_level`` (see :func:`compute_metrics`)."""
    name = str(measure)
    info = measure.SUPPORTED_PARAMS.get("rel")
    if info is not None and "rel" in measure.params and measure.params["rel"] == info.default:
        rel = f"rel={measure.params['rel']!r}"
        head, at, cutoff = name.partition("@")
        if head.endswith(")"):
            head = head.replace("(", f"({rel},", 1)
        else:
            head = f"{head}({rel})"
        name = head + at + cutoff
    return name


def parse_baselines(texts) -> list[Baseline]:
    """Every baseline that ``texts`` (one string or ir-measures measure, or several) name,
    in order, each once (``map`` and ``AP`` are one measure).

    A string is one measure (:func:`parse_baseline`, e.g. ``TSE(exposure=rbp,gamma=0.5)``),
    else a trec_eval name (``map``, ``ndcg_cut_10``, ``P_10``, ``recip_rank``, ``P``:
    P@5..P@1000, ``official``; ir-measures' ``parse_trec_measure``), else a list of
    either separated by commas or blanks outside parentheses (``'AP nDCG@10'``,
    ``AP,nDCG@10``).  ValueError names the first measure neither understands.
    """
    if isinstance(texts, (str, Baseline)) or is_measure(texts):
        texts = [texts]
    out: dict[str, Baseline] = {}
    for text in texts:
        for baseline in _expand(text):
            out.setdefault(baseline.name, baseline)
    return list(out.values())


_parse_all = parse_baselines

#: trec_eval's ``runid`` (``runid all TAG``): a run's tag, not a value; the run column of
#: prefeval's tables is where a run's name goes (its tag with ``--names tag``)
RUNID = "runid"


def without_runid(texts) -> tuple[list, bool]:
    """``texts`` (what :func:`parse_baselines` takes) without trec_eval's ``runid``, and
    whether it was among them (alone or in a list)."""
    if isinstance(texts, (str, Baseline)):
        texts = [texts]
    out: list
    out, found = [], False
    for text in texts:
        pieces = _split_list(text.strip()) if isinstance(text, str) else [text]
        if RUNID in pieces:
            found = True
            out.extend(p for p in pieces if p != RUNID)
        else:
            out.append(text)
    return out, found


def _expand(text) -> list[Baseline]:
    if not isinstance(text, str):
        return [parse_baseline(text)]
    text = text.strip()
    if text == RUNID:
        raise ValueError(
            "runid (trec_eval's run tag) is not a value: the run column names each run "
            "(--names tag: by its run tag)"
        )
    try:
        return [parse_baseline(text)]
    except ValueError as error:
        first = error
    trec = _parse_trec(text)
    if trec:
        return trec
    pieces = _split_list(text)
    if len(pieces) > 1:
        return [b for piece in pieces for b in _expand(piece)]
    if not pieces:
        raise ValueError(f"empty baseline measure {text!r}")
    raise first


def _split_list(text: str) -> list[str]:
    """``text`` cut at commas and blanks outside parentheses."""
    current: list[str]
    pieces, depth, current = [], 0, []
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and (ch == "," or ch.isspace()):
            pieces.append("".join(current))
            current = []
        else:
            current.append(ch)
    pieces.append("".join(current))
    return [p for p in pieces if p]


_TREC_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:[._][0-9.,]+)?")


def _close_names(text: str) -> str:
    """``; close names: ...``: the measures whose names are close to ``text``'s (those
    of ir-measures, trec_eval and prefeval's own), else nothing."""
    import difflib

    import ir_measures
    import pytrec_eval

    name = re.split(r"[@(]", text, maxsplit=1)[0].strip()
    trec = re.sub(r"_\d+(?:\.\d+)?$", "", name)  # trec_eval's cutoff suffix (P_10)
    known = {*ir_measures.measures.registry, *pytrec_eval.supported_measures}
    known |= {*NATIVE_BASELINES, GM_MAP}
    if name in known or trec in known:
        return ""
    close = difflib.get_close_matches(name, sorted(known), n=3)
    if not close:
        folded = {k.lower(): k for k in sorted(known)}
        close = [folded[n] for n in difflib.get_close_matches(trec.lower(), folded, n=3)]
    return f"; close names: {', '.join(close)}" if close else ""


def _parse_trec(text: str) -> list[Baseline] | None:
    """The measures of a trec_eval name, or None when it is not one."""

    import ir_measures

    if not _TREC_NAME.fullmatch(text):
        return None
    said = io.StringIO()
    try:
        with contextlib.redirect_stdout(said):  # nicknames print what they skip
            measures = ir_measures.parse_trec_measure(text)
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    parsed = [_parse_irm(m, text) for m in measures]
    if GM_MAP in _nickname_members(text):  # the nickname's gm_map, which ir-measures skips
        parsed.append(parse_baseline(GM_MAP))
    return parsed or None


def _nickname_members(text: str) -> set[str]:
    """The trec_eval measures of the nickname ``text`` (``official``...), or none."""
    import pytrec_eval

    return set(pytrec_eval.supported_nicknames.get(text, ()))


# --------------------------------------------------------------------------- runs


@dataclass
class _Ranking:
    """One run restricted to the evaluated queries, cut at max_docs: rows grouped by
    query index (ascending, whatever the file's order of queries), in trec order within
    each query."""

    q: np.ndarray  # index into the evaluated query list, ascending
    doc_id: Any  # pyarrow string array
    score: np.ndarray
    bounds: np.ndarray  # rows of query k: bounds[k]:bounds[k+1]


def _ranking(columns: RunColumns, qvals, max_docs: int | None) -> _Ranking:
    import pyarrow as pa
    import pyarrow.compute as pc

    nq = len(qvals)
    if qvals.type != columns.query_id.type:  # large_string columns of huge runs
        qvals = qvals.cast(columns.query_id.type)
    qidx = np.asarray(pc.index_in(columns.query_id, value_set=qvals).fill_null(-1), np.int64)
    keep = np.flatnonzero(qidx >= 0)
    if len(keep) < len(qidx):
        q, score = qidx[keep], columns.score[keep]
        docno = pc.take(columns.doc_id, pa.array(keep))
    else:
        q, score, docno = qidx, columns.score, columns.doc_id
    order = trec_order(q, score, docno)
    # Rows must end up grouped by query *index*: bounds and the max_docs cut below slice
    # per query.  A file grouped by query and ranked within each block can come back in
    # the file's order of query blocks; a stable sort by query keeps the trec order
    # within each query (a no-op check when the blocks are already in query order).
    qs = q[order]
    if len(qs) > 1 and bool(np.any(qs[1:] < qs[:-1])):
        by_query = np.argsort(qs, kind="stable")
        order, qs = order[by_query], qs[by_query]
    if len(order) and not np.array_equal(order, np.arange(len(order))):
        q, score = qs, score[order]
        docno = pc.take(docno, pa.array(order))
    counts = np.bincount(q, minlength=nq)
    if max_docs is not None and len(q) and counts.max() > max_docs:
        starts = np.zeros(nq, dtype=np.int64)
        np.cumsum(counts[:-1], out=starts[1:])
        rank = np.arange(len(q), dtype=np.int64) - starts[q] + 1
        inside = np.flatnonzero(rank <= max_docs)
        q, score = q[inside], score[inside]
        docno = pc.take(docno, pa.array(inside))
        counts = np.minimum(counts, max_docs)
    bounds = np.zeros(nq + 1, dtype=np.int64)
    np.cumsum(counts, out=bounds[1:])
    return _Ranking(q, docno, score, bounds)


def _text_ranking(run, qlist: list[str], max_docs: int | None) -> _Ranking | None:
    """:func:`_ranking` of a TREC text file read in one pass
    (:func:`prefeval.io.textpass.run_text_ranking`), or None where the pass declines it."""
    found = run_text_ranking(run, qlist, max_docs)
    if found is None:
        return None
    q, doc_id, score = found
    bounds = np.zeros(len(qlist) + 1, dtype=np.int64)
    np.cumsum(np.bincount(q, minlength=len(qlist)), out=bounds[1:])
    return _Ranking(q, doc_id, score, bounds)


def _run_input(ranking: _Ranking, query_ids: list[str], intent_aware: bool):
    """The run in the ir-measures input format that its provider consumes fastest.

    trec_eval (pytrec_eval) takes a dict of dicts as is; ndeval (pyndeval) iterates over
    ScoredDoc tuples, which a lazy ``map`` builds most cheaply.  Both are ir-measures'
    documented run formats, hold exactly the rows of a DataFrame ``query_id, doc_id,
    score`` and are several times cheaper than ir-measures' row-by-row DataFrame
    conversion.  Documents stay in trec order within each query.
    """
    docs = ranking.doc_id.to_numpy(zero_copy_only=False).tolist()
    scores = ranking.score.tolist()
    if intent_aware:
        from ir_measures import ScoredDoc

        qids = np.asarray(query_ids, dtype=object)[ranking.q].tolist()
        return map(ScoredDoc, qids, docs, scores)
    b = ranking.bounds
    return {
        query_ids[k]: dict(zip(docs[b[k] : b[k + 1]], scores[b[k] : b[k + 1]]))
        for k in np.flatnonzero(np.diff(b)).tolist()
    }


class _Corpus:
    """Distinct (query, document) pairs seen so far: per-query corpus sizes n.

    Documents get integer codes from one growing dictionary; a pair is the int64
    ``query << 32 | code``.  Rows are buffered and merged a few million at a time, so
    the dictionary lookup and the deduplication run a handful of times, not once per run.
    """

    BATCH = 1 << 21

    def __init__(self, n_queries: int):
        import pyarrow as pa

        self.n_queries = n_queries
        self.docs = pa.array([], pa.string())
        self.keys = np.zeros(0, dtype=np.int64)
        self.pending: list = []
        self.pending_rows = 0

    def add(self, q: np.ndarray, docno) -> None:
        if len(q):
            self.pending.append((np.asarray(q, dtype=np.int64), docno))
            self.pending_rows += len(q)
            if self.pending_rows >= self.BATCH:
                self._flush()

    def _flush(self) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        if not self.pending:
            return
        q = np.concatenate([part[0] for part in self.pending])
        docno = pa.concat_arrays(_one_string_type([part[1] for part in self.pending]))
        self.pending, self.pending_rows = [], 0
        encoded = pc.dictionary_encode(docno)
        values, self.docs = _one_string_type([encoded.dictionary, self.docs])
        code = np.asarray(pc.index_in(values, value_set=self.docs).fill_null(-1), np.int64)
        new = np.flatnonzero(code < 0)
        if len(new):
            code[new] = len(self.docs) + np.arange(len(new))
            self.docs = pa.concat_arrays([self.docs, pc.take(values, pa.array(new))])
        keys = np.unique(q << 32 | code[np.asarray(encoded.indices, dtype=np.int64)])
        self.keys = np.union1d(self.keys, keys)

    def sizes(self) -> np.ndarray:
        self._flush()
        return np.bincount(self.keys >> 32, minlength=self.n_queries)


def _one_string_type(arrays: list) -> list:
    """pyarrow string arrays of one type: all ``large_string`` when some are (the reader
    keeps a huge run's columns large), so that they concatenate and compare."""
    import pyarrow as pa

    if all(a.type == arrays[0].type for a in arrays):
        return arrays
    return [a.cast(pa.large_string()) for a in arrays]


# --------------------------------------------------------------------------- natives


def _native_values(
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
    if value > _MAX_CUTOFF:
        shown = f"{value:.0f}" if value < 1e16 else f"{value:g}"
        raise ValueError(
            f"relevance level {shown} is beyond what the ir-measures baselines take "
            f"(<= {_MAX_CUTOFF}, as their grades); use a smaller level, --no-baselines, "
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
    huge = np.abs(grades) > _MAX_CUTOFF
    if huge.any():
        row = frame.iloc[int(np.flatnonzero(huge)[0])]
        raise InputError(
            qrels.name,
            None,
            f"grade {row['relevance']:g} of document {row['doc_id']!r} for query "
            f"{row['query_id']!r} is beyond what the ir-measures baselines take "
            f"(|grade| <= {_MAX_CUTOFF}); use --no-baselines or smaller grades",
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


def _evaluated_queries(qrels: Qrels, general: pd.DataFrame, level, relevant) -> list[str]:
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
    if baseline.name == _NUM_REL_RET:
        # NumRet(rel=1) as parsed; rel is the level's (trec_eval's num_rel_ret)
        measure = baseline.measure
        if level is not None:
            measure = measure(rel=_rel_level(level))
        return measure
    measure = _with_level(baseline.measure, level)
    if measure is not baseline.measure and measure.NAME != "NumRel":
        try:
            _provider(measure, str(measure))
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
    trec = [m for m in targets if _provider(m, str(m)).NAME == "pytrec_eval"]
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


def compute_metrics(
    qrels,
    runs,
    baselines=None,
    *,
    query_ids: Sequence[str] | None = None,
    relevance_level: float | None = None,
    max_docs: int | None = None,
    progress: bool | None = None,
    notify: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """Baseline metric values per run and query: rows ``measure, run, query_id, value``.

    ``qrels``: a :class:`~prefeval.core.qrels.Qrels`, a path or a DataFrame; ``runs``: a
    :class:`~prefeval.io.runs.RunSet` (its runs read from the bytes it holds, or their
    columns kept by the engine), or what :func:`~prefeval.io.runs.resolve_runs` takes.
    ``baselines``: measure strings (see
    :func:`parse_baseline`); None means :func:`default_baselines`.

    There is one row for every (baseline, run, query of ``query_ids``), in that order.
    ``query_ids`` defaults to the queries prefeval evaluates
    (``qrels.relevant(relevance_level).query_ids``); run lines for other queries are
    ignored.  A query a run has no line for (or none left after ``max_docs``) gets each
    ir-measures measure's value on an empty ranking, as ``trec_eval -c`` evaluates it
    (:func:`_empty_ranking_values`): 0, except ``NumQ`` (1) and ``NumRel`` (the number of
    judged documents with grade >= rel, counted from the qrels at any rel:
    :func:`_num_rel`), the only measures of ir-measures' pytrec_eval and pyndeval
    providers with a non-zero value on an empty ranking.  The native TSE and ASL impute
    its relevant documents at the bottom of the corpus instead, and are NaN for a query
    with no relevant document.

    ``max_docs`` (trec_eval ``-M``) keeps each ranking's top K after sorting by score
    descending, docno descending; every metric, and the corpus sizes of the native ones,
    then see the runs as if their files held only those K lines per query.

    ``relevance_level`` L (prefeval's ``-l``: relevant means grade >= L) decides the
    evaluated queries and the native metrics' relevant documents, and is passed to every
    ir-measures measure that has a binary ``rel`` threshold the measure string did not set
    (``AP``, ``RR``, ``Rprec``, ``R@k``, ``P@k``, ``ERR_IA@k``, ...: ``AP`` is computed as
    ``AP(rel=L)`` but still reported as ``AP``).  An explicit ``rel`` wins (``AP(rel=1)``
    stays at 1).  Measures without such a threshold are unaffected: ``nDCG`` uses the
    grades as gains, and measures whose ``rel`` is optional with no default (``RBP``:
    graded; ``NumRet``: all documents) are left as written, except ``NumRelRet`` (trec_eval's
    ``num_rel_ret``, ir-measures' ``NumRet(rel=1)``) written without rel, which counts the
    retrieved documents with grade >= L as trec_eval does at ``-l L``.  ir-measures only
    accepts an integer rel, so a non-integer L raises ValueError when some measure needs
    it; L must be a finite number > 0 (:func:`prefeval.core.qrels.check_level`).

    ``notify`` (when given) is told, as ``compare`` tells it, of each run without results
    for some of the queries prefeval evaluates (:func:`~prefeval.core.positions.missing_notice`).
    """
    values, parsed, names, qlist = _values(
        qrels, runs, baselines, query_ids, relevance_level, max_docs, progress, notify
    )
    return _metrics_frame(values, parsed, names, qlist)


def metric_matrices(
    qrels,
    runs,
    baselines=None,
    *,
    query_ids: Sequence[str] | None = None,
    relevance_level: float | None = None,
    max_docs: int | None = None,
    progress: bool | None = None,
    notify: Callable[[str], None] | None = None,
) -> dict[str, np.ndarray]:
    """:func:`compute_metrics`' values as :func:`prefeval.io.tables.metrics_from_table`
    reads them back from its table: measure -> (queries x runs) matrix, in the order of
    the runs and of ``query_ids``, without the table (at a million users, its rows of
    Python objects take gigabytes).  Values the table would refuse (NaN, infinities,
    none at all) go through it, for its error."""
    values, parsed, names, qlist = _values(
        qrels, runs, baselines, query_ids, relevance_level, max_docs, progress, notify
    )
    # NaN fails both bounds; no temporary copy of values (gigabytes at a million users)
    if not values.size or not (
        -MAX_METRIC_VALUE <= values.min() <= values.max() <= MAX_METRIC_VALUE
    ):
        return metrics_from_table(
            _metrics_frame(values, parsed, names, qlist), names, qlist, "<metrics>"
        )
    return {b.name: values[i] for i, b in enumerate(parsed)}


def _values(qrels, runs, baselines, query_ids, relevance_level, max_docs, progress, notify):
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
        qlist = _evaluated_queries(qrels, general, relevance_level, relevant)
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
        evaluated = _evaluated_queries(qrels, general, relevance_level, relevant)
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
    parsed = _parse_all(baselines)
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
    trec = {m: v for m, v in targets.items() if _provider(m, str(m)).NAME == "pytrec_eval"}
    # and judged_only ones apart from the others: ir-measures puts the measures
    # without the option (NumRet, NumQ, ...) into whichever pytrec_eval call it
    # makes first, so in one evaluator NumRet counted only judged documents or
    # all of them by the hash seed
    return [
        ({m: v for m, v in trec.items() if bool(m.params.get("judged_only")) is only}, True)
        for only in (True, False)
    ] + [({m: v for m, v in targets.items() if m not in trec}, False)]


def _relevant_corpus(general, level, qpos: dict, nq: int) -> _Corpus:
    """The corpus of the native metrics with its relevant documents added: n is the
    distinct documents of all the rankings and the relevant documents (rpp-sigir2022
    section 5.5), not the judged non-relevant ones; the runs add theirs."""
    import pyarrow as pa

    corpus = _Corpus(nq)
    rel = general[
        _of_queries(general["query_id"], qpos) & is_relevant(general["relevance"].to_numpy(), level)
    ]
    corpus.add(
        rel["query_id"].map(qpos).to_numpy(dtype=np.int64),
        pa.array(rel["doc_id"].tolist(), pa.string()),
    )
    return corpus


def _evaluate_run(
    values, r: int, ranking: _Ranking, evaluators, qlist, qpos: dict, where=None
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
        for metric in group.evaluator.iter_calc(_run_input(ranking, qlist, group.ia)):
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
    (:class:`_Corpus`); and per run whether it answered each query (a document left
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
        ranking = _text_ranking(source, qlist, max_docs)  # a TREC text file in one pass
        if ranking is None:
            columns = source.read()
            path, ranking = columns.path, _ranking(columns, qvals, max_docs)
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
    try:  # a file per partition open while spilling: the soft limit raised to that
        limits.open_files(parts + 64, "the baselines' spill")
    except SystemLimitError:  # a low hard limit: as many partitions as other spills
        parts = streaming.parts(rows)
    part_of = query_buckets(pa.array(qlist, pa.string()), parts)
    judged = _judged(qrels, general, parsed, {q: k for k, q in enumerate(qlist)})
    totals = _Totals(items, len(qlist), relevant)
    try:
        with Spill(parts) as spill:
            spill_runs(spill, runs, streaming)
            release_free_memory()  # the pieces' buffers: not beside the evaluation's
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
                    release_free_memory()  # a partition's rows, rankings and judgments
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
            ranking = _ranking(columns, qvals, max_docs)
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


def _no_ranking(nq: int) -> _Ranking:
    """The :class:`_Ranking` of a run without rows for any of ``nq`` queries."""
    import pyarrow as pa

    empty = np.zeros(0, dtype=np.int64)
    return _Ranking(empty, pa.array([], pa.string()), np.zeros(0), np.zeros(nq + 1, np.int64))


def _native_metrics(values, parsed, natives, positions, relevant, sizes, qpos: dict) -> None:
    """The native baselines (indices ``natives`` of ``parsed``) of every run (its
    ``positions``) written into ``values``, on the corpus ``sizes`` of the queries."""
    rel_to_q = np.array([qpos.get(q, -1) for q in relevant.query_ids], dtype=np.int64)
    for i in natives:
        for r, pos in enumerate(positions):
            values[i, :, r] = _native_values(
                parsed[i], pos, relevant, sizes, rel_to_q, values.shape[1]
            )


def _metrics_frame(values, parsed, runs: list, qlist: list) -> pd.DataFrame:
    """The rows ``measure, run, query_id, value`` of ``values`` (baselines x queries x
    runs), baseline by baseline, run by run."""
    nb, nq, nr = values.shape
    b_idx = np.repeat(np.arange(nb), nr * nq)
    r_idx = np.tile(np.repeat(np.arange(nr), nq), nb)
    q_idx = np.tile(np.arange(nq), nb * nr)
    return pd.DataFrame(
        {
            "measure": np.array([b.name for b in parsed], dtype=object)[b_idx],
            "run": np.array(runs, dtype=object)[r_idx],
            "query_id": np.array(qlist, dtype=object)[q_idx],
            "value": values.transpose(0, 2, 1).reshape(-1),
        },
        columns=COLUMNS,
    )


def metrics_rows(
    qrels: Qrels,
    runs,
    baselines,
    options: Options | None = None,
    *,
    notify: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """The table of ``prefeval metrics``: per-query rows (``per_query``) of the queries
    prefeval evaluates (those with a relevant document at the level, the rows the
    analysis commands read back with ``--metrics``), then the summary rows
    (``summary``), which average over *every judged query* as ``trec_eval -c`` does: a
    query with no relevant document at the level counts with its values (0 for AP,
    1 for NumQ, ...), a query a run did not answer with the empty ranking's.  The native
    TSE and ASL are undefined on a query with no relevant document and average over the
    others.  The settings are ``options``' ``relevance_level``, ``max_docs``,
    ``per_query``, ``summary`` and ``progress``."""
    return pd.concat(
        list(metrics_frames(qrels, runs, baselines, options, notify=notify)), ignore_index=True
    )


def metrics_frames(
    qrels: Qrels,
    runs,
    baselines,
    options: Options | None = None,
    *,
    notify: Callable[[str], None] | None = None,
) -> Iterator[pd.DataFrame]:
    """:func:`metrics_rows`' table in pieces, one (measure, run) of per-query rows at a
    time, then the summary rows: the command writes them as they come, never the whole
    table (at a million users its rows of Python objects take gigabytes).  The values
    are computed, and every error raised, before the first piece."""
    options = options or Options()
    relevance_level, max_docs = check_level(options.relevance_level), options.max_docs
    per_query, summary, progress = options.per_query, options.summary, options.progress
    judged = qrels.query_ids()
    if not judged:
        raise InputError(qrels.name, None, "no query is judged")
    # the relevant set's queries, read off the judgments (the set itself, large at
    # recommender scale, is not needed)
    evaluated = _evaluated_queries(qrels, qrels.general(), relevance_level, None)
    dropped = len(judged) - len(evaluated)
    what = "grade > 0" if relevance_level is None else f"grade >= {relevance_level:g}"
    if notify is not None and not evaluated:
        notify(f"no query in {qrels.name} has a relevant document ({what})")
    elif notify is not None and dropped and per_query:
        natives = [b.name for b in _parse_all(baselines) if b.kind == "native"]
        counted = "summary rows count them, as trec_eval -c"
        if natives:  # undefined without a relevant document: averaged where defined
            counted = (
                f"summary rows count them, as trec_eval -c, except those of "
                f"{', '.join(natives)}, undefined there, which average the other queries"
            )
        notify(
            f"{dropped} of {len(judged)} queries "
            f"in {qrels.name} have no relevant document ({what}): no per-query rows (the "
            f"{counted})"
        )
    values, parsed, names, qlist = _values(
        qrels, runs, baselines, judged, relevance_level, max_docs, progress, notify
    )
    return _metrics_pieces(values, parsed, names, qlist, evaluated, per_query, summary)


def _metrics_pieces(values, parsed, runs, qlist, evaluated, per_query: bool, summary: bool):
    """The pieces of :func:`metrics_frames` from ``values`` (baselines x queries ``qlist``
    x runs): each (baseline, run)'s rows on the ``evaluated`` queries, then the summary
    rows, each summed as the whole table's group (:func:`metrics_summary`)."""
    queries = np.asarray(qlist, dtype=object)
    chosen = pd.Index(queries).isin(list(evaluated))
    sums = []
    if not per_query and not summary or not len(parsed) or not len(runs):
        yield _no_rows()
    for b, baseline in enumerate(parsed):
        for r, run in enumerate(runs):
            whole = pd.DataFrame(
                {"measure": baseline.name, "run": run, "query_id": queries,
                 "value": values[b, :, r]},
                columns=COLUMNS,
            )  # fmt: skip
            if summary:
                sums.append(metrics_summary(whole))
            if per_query:
                yield whole[chosen].reset_index(drop=True)
    if summary:
        yield pd.concat(sums, ignore_index=True) if sums else metrics_summary(_no_rows())


def _no_rows() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=float if c == "value" else object) for c in COLUMNS})


def no_metrics() -> pd.DataFrame:
    """The table of :func:`metrics_rows` without rows (``metrics -m runid``)."""
    return pd.DataFrame(
        {c: pd.Series(dtype=float if c == "value" else str) for c in COLUMNS}, columns=COLUMNS
    )


def count_measure(name: str) -> bool:
    """Whether the baseline ``name`` counts (ir-measures' ``NumQ``, ``NumRel``, ``NumRet``,
    ``NumRelRet``, whose aggregator sums): its values are integers, its summary a sum."""
    from ir_measures.measures.base import SumAgg

    baseline = parse_baseline(name)
    return baseline.kind == "irm" and isinstance(baseline.measure.aggregator(), SumAgg)


def metrics_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Summary rows ``measure, run, 'all', value`` of a :func:`compute_metrics` table, one
    per (measure, run) in the table's order, as trec_eval prints them: the mean over the
    queries with a value, except that ir-measures' count measures (``NumQ``, ``NumRel``,
    ``NumRet``, ``NumRelRet``, whose aggregator sums) are summed and ``gm_map`` is ``exp``
    of the mean (its per-query values are logarithms: the geometric mean)."""
    summed = {name: count_measure(str(name)) for name in table["measure"].unique()}
    groups = table.groupby(["measure", "run"], sort=False)["value"]
    means, sums = groups.mean(), groups.sum()  # NaN (no value) skipped
    keys = means.index
    use_sum = np.array([summed[m] for m in keys.get_level_values(0)], dtype=bool)
    value = np.where(use_sum, sums.to_numpy(dtype=float), means.to_numpy(dtype=float))
    geometric = keys.get_level_values(0).to_numpy(dtype=object) == GM_MAP
    value[geometric] = np.exp(value[geometric])
    return pd.DataFrame(
        {
            "measure": keys.get_level_values(0).to_numpy(dtype=object),
            "run": keys.get_level_values(1).to_numpy(dtype=object),
            "query_id": "all",
            "value": value,
        },
        columns=COLUMNS,
    )
