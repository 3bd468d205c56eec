"""The Python API: one function per command, returning the DataFrame the command writes.

``prefeval.compare(qrels, runs, ...)`` gives exactly the rows of ``prefeval compare``
(same columns, rows and order), and so on for ``metrics``, ``order``, ``discpower``,
``tau``, ``agree`` and ``robustness``; keyword arguments are the commands' options.

Inputs (:mod:`prefeval.io.frames`): paths (``str`` or ``pathlib.Path``), DataFrames with
ir-measures (``query_id, doc_id, score``/``relevance[, iteration]``) or PyTerrier
(``qid, docno, score``/``label``) columns, tables with those columns that export Arrow's
C stream (pyarrow, polars, DuckDB: :mod:`prefeval.io.arrow`), iterables of
``ir_measures.ScoredDoc``/``Qrel``, ``{query_id: {doc_id: value}}`` dicts (pytrec_eval)
and ranx's ``Qrels``/``Run``; qrels also as an ir_datasets id ``"irds:ID"``
(:mod:`prefeval.io.irds`, ``pip install 'prefeval[irds]'``); several runs as a list, a
dict name -> run, or one DataFrame or table with a ``run`` (or ``name``) column.  The
analysis functions also take ``prefs=`` (a table of ``compare(..., per_query=True)``) and
``metrics=`` (a table of :func:`metrics`), as paths or DataFrames.

Outputs: ids, run and measure names are plain strings (pandas' string columns, not
categoricals), so ``table[table.query_id == "151"]`` selects query 151.  Notices (queries
not evaluated, runs without results for some queries) are issued as
:class:`~prefeval.core.errors.PrefevalWarning` (``notify=`` may redirect them, e.g. to
``logging``, or ``None`` drops them); ``progress=True`` shows tqdm bars (``tqdm.auto``,
so widgets in Jupyter); ``cache=False`` neither reads nor writes the cache of reduced runs
(default: the environment variable ``PREFEVAL_CACHE``); ``jobs=N`` computes on N cores
(``-j``; default the CPUs the process may use).  The keywords are judged into one
:class:`~prefeval.options.Options` (:func:`prefeval.options.judge`, the commands' rules);
a broken rule raises :class:`~prefeval.options.OptionError` (a ``ValueError``; a
``TypeError`` for a value of the wrong type).  Bad input raises
:class:`~prefeval.core.errors.InputError` (a ``ValueError``), ``ValueError`` or
``TypeError`` with a message saying what is wrong.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
import threading
import warnings
from collections.abc import Callable, Iterable
from dataclasses import replace
from types import FrameType

import pandas as pd

from . import EXPORTS
from .analysis.agreement import agreement_table, tau_table, ties_table
from .analysis.baselines import (
    default_baselines,
    is_measure,
    metrics_rows,
    no_metrics,
    parse_baseline,
    parse_baselines,
    without_runid,
)
from .analysis.evidence import gather_inputs
from .analysis.gate import Verdicts, needs_differences
from .analysis.gate import gate as gate_table
from .analysis.orderings import order as order_table
from .analysis.robustness import robustness as run_robustness
from .analysis.significance import (
    discriminative_power,
    pair_summary,
    pair_tests,
    sample_caveats,
)
from .analysis.table import GIVEN, known_measures, runs_table
from .core import progress as bars
from .core.cube import against_pairs
from .core.errors import PrefevalWarning, Regression
from .core.terminal import shown
from .engine import runtime
from .engine.engines import engine_for
from .engine.job import Job, compare_tables, whole_frame
from .io.runs import qrels_input, read_qrels, runs_input
from .measures import parse_measures
from .options import KEYWORDS, OptionError, Options, check, default, judge, text_list
from .present import plots as plotting
from .present import report as reports
from .present.explain import as_keyword
from .present.explain import explain as explain_table

#: the functions ``prefeval`` exports from here: its one list (:data:`prefeval.EXPORTS`)
__all__ = list(EXPORTS["api"])

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


#: the notices :func:`warn` has issued in this process
_WARNED: set[str] = set()
_WARNED_LOCK = threading.Lock()


def warn(message: str) -> None:
    """Issue a notice as a :class:`PrefevalWarning`, once per process (a session's calls
    on the same runs would repeat it; ``notify=`` a function of your own gets every
    one), attributed to the first caller outside the prefeval package (the user's
    line); its control characters escaped when stderr, where Python shows warnings, is a
    terminal (:func:`prefeval.core.terminal.shown`)."""
    with _WARNED_LOCK:
        if message in _WARNED:
            return
        _WARNED.add(message)
    try:
        _warn_user(shown(message, sys.stderr), PrefevalWarning)
    except BaseException:  # a warnings filter made it an error: raised again next time
        with _WARNED_LOCK:
            _WARNED.discard(message)
        raise


def _warn_user(message: str, category: type[Warning]) -> None:
    """``warnings.warn(message, category)`` attributed to the first caller outside the
    prefeval package (the user's line, which Python's default filters look at)."""
    level = 1
    frame: FrameType | None = sys._getframe(0)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    with bars.beside_bar():  # shown on a line of its own, the bar (progress=True) below
        warnings.warn(message, category, stacklevel=level)


Notify = Callable[[str], None] | None


# --------------------------------------------------------------------------- arguments


def _plain(frame: pd.DataFrame) -> pd.DataFrame:
    """Categorical (and object) text columns as pandas' plain string columns."""
    for column in frame.columns:
        dtype = frame[column].dtype
        if isinstance(dtype, pd.CategoricalDtype) or pd.api.types.is_object_dtype(dtype):
            frame[column] = frame[column].astype(str)
    return frame


#: the keywords of the API's functions, in the order their signatures give them: each
#: with its annotation (None: none) and its default (:data:`_OPTION`: the
#: :class:`~prefeval.options.Options` field's default for the function's command,
#: :func:`prefeval.options.default`)
_OPTION = object()
_DECLARED: dict[str, tuple[str | None, object]] = {
    "output": (None, None),
    "prefs": (None, None),
    "metrics": (None, None),
    "measures": (None, None),
    "baselines": (None, None),
    "queries": (None, None),
    "top": ("int | None", None),
    "relevance_level": ("float | None", None),
    "max_docs": ("int | None", None),
    "binary": ("bool", _OPTION),
    "per_query": ("bool", _OPTION),
    "summary": ("bool | None", None),
    "method": ("str", _OPTION),
    "teleport": ("float", _OPTION),
    "tests": (None, None),
    "test": ("str", _OPTION),
    "margin": ("float", _OPTION),
    "correction": ("str", _OPTION),
    "alpha": ("float", _OPTION),
    "min_queries": ("int", _OPTION),
    "ci": (None, _OPTION),  # a kind of interval, or a number (pairs: its level)
    "level": ("float | None", None),
    "resamples": ("int", _OPTION),
    "trials": ("int", _OPTION),
    "seed": ("int", _OPTION),
    "pairs": ("bool", _OPTION),
    "ties": ("bool", _OPTION),
    "labels": (None, None),
    "policy": ("str", _OPTION),
    "samples": ("int", _OPTION),
    "robustness": ("bool", _OPTION),
    "digits": ("int", _OPTION),
    "sections": (None, None),
    "order_by": ("str | None", None),
    "check": ("bool", False),
    "against": (None, None),
    "both_directions": ("bool", _OPTION),
    "engine": ("str", _OPTION),
    "scheduler": ("str | None", None),
    "cache": ("bool | None", None),
    "jobs": ("int | None", None),
    "progress": ("bool", _OPTION),
    "notify": ("Notify", warn),
}
#: the API's keyword of an :class:`~prefeval.options.Options` field of another name
_FIELD_OF = {"pairs": "per_pair", "test": "tests"}
#: the inputs of the analysis functions besides ``qrels, runs``: tables already computed
_INPUTS = ("prefs", "metrics")
#: what the analysis functions compare: the measures, the baselines, the judgments' level
_COMPARED = ("measures", "baselines", "relevance_level", "max_docs", "binary")
#: the significance tests' settings
_TESTS = ("tests", "correction", "alpha", "trials", "seed")
#: where and how a function computes, and what it tells along the way
_RUNNING = ("engine", "scheduler", "cache", "jobs", "progress", "notify")


def _default(name: str, command: str):
    """The default of the keyword ``name`` of the function of ``command``."""
    _, value = _DECLARED[name]
    if value is not _OPTION:
        return value
    found = default(_FIELD_OF.get(name, name), command)
    return found[0] if name == "test" else found  # one test: the first of the command's


def _signature(func, command: str, keywords: tuple[str, ...], runs_required: bool, required):
    """The signature of the API function of ``command``: ``qrels, runs`` (None by default
    where ``prefs=`` may stand for them), then the keyword-only ``keywords``."""
    positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
    given = inspect.Parameter.empty if runs_required else None
    parameters = [inspect.Parameter(n, positional, default=given) for n in ("qrels", "runs")]
    for name in keywords:
        annotation, _ = _DECLARED[name]
        parameters.append(
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=inspect.Parameter.empty if name in required else _default(name, command),
                annotation=inspect.Parameter.empty if annotation is None else annotation,
            )
        )
    returned = inspect.signature(func).return_annotation
    return inspect.Signature(parameters, return_annotation=returned)


def _command(command: str, *keywords: str, runs_required: bool = False, required=()):
    """The API function of ``command``, its keywords ``keywords`` declared once
    (:data:`_DECLARED`; its signature, which ``help()`` shows, made from them): the call
    bound to that signature (TypeError for a keyword it does not take), its defaults
    applied, and the function given every argument by name.  One progress bar for the
    whole call (``progress=True``; ``tqdm.auto``), as the command shows one on a
    terminal; the cache as ``cache`` says (default: the environment variable
    ``PREFEVAL_CACHE``); ``notify`` checked to be callable or None."""

    def made(func):
        signature = _signature(func, command, keywords, runs_required, required)

        @functools.wraps(func)
        def call(*args, **kwargs):
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError as error:  # as Python words it, naming the function
                raise TypeError(f"{command}() {error}") from None
            bound.apply_defaults()
            arguments = bound.arguments
            notify = arguments["notify"]
            if notify is not None and not callable(notify):
                raise TypeError(
                    f"notify={notify!r} is not callable: give a function of one message (a "
                    "str), or None for no notices"
                )
            arguments["cache"] = check("cache", arguments["cache"])
            progress = arguments["progress"]
            if progress is None:  # the caller's bar (the command's, on a terminal)
                return func(**arguments)
            arguments["progress"] = bool(progress)
            with bars.command(bool(progress)):
                return func(**arguments)

        call.__signature__ = signature  # type: ignore[attr-defined]
        return call

    return made


def _judged(command: str, given: dict, keywords: dict[str, str] | None = None) -> Options:
    """The :class:`~prefeval.options.Options` of an API function's call, judged from its
    arguments ``given`` (its ``locals()``): those the judge takes, with the API's own
    readings: ``baselines`` may hold ir-measures measure objects (:func:`_measure_names`),
    and ``summary=None`` (the default) means ``not per_query``: per-query rows alone, or
    the summary rows alone.  ``keywords``: the function's own keyword of a judge keyword
    it passes under another name, which its errors name (``metrics``' ``measures``)."""
    given = {k: v for k, v in given.items() if k in KEYWORDS}
    for key in ("measures", "baselines"):  # measures=AP: refused by the judge, by name
        if key in given:
            given[key] = _measure_names(given[key])
    if "summary" in given and given["summary"] is None:
        given["summary"] = not given.get("per_query")
    try:
        return judge(command=command, **given)
    except OptionError as error:
        if not keywords:
            raise
        raise error.renamed(keywords) from None


def _measure_names(value):
    """Baseline measures as the judge takes them (a string or strings): an ir-measures
    measure object (``ir_measures.AP``, ``nDCG@10``), alone or in a list, as its name
    (``AP(rel=2)`` keeps its ``rel``); anything else as given, for the judge to check."""
    if is_measure(value):
        value = [value]
    elif value is None or isinstance(value, str) or not isinstance(value, Iterable):
        return value
    return [parse_baseline(v).name if is_measure(v) else v for v in value]


def _baselines(names) -> list[str]:
    """Baseline names as the commands' -B takes them (ir-measures strings, trec_eval
    names, comma or blank lists), canonical and each once."""

    return [b.name for b in parse_baselines(list(names or ()))]


def _runs(runs):

    if runs is None:
        raise ValueError("runs: no run given")
    return runs_input(runs)


# --------------------------------------------------------------------------- commands


@_command(
    "compare",
    "measures",
    "relevance_level",
    "max_docs",
    "binary",
    "per_query",
    "summary",
    "against",
    "both_directions",
    *_RUNNING,
    runs_required=True,
)
def compare(qrels, runs, *, notify, **rest) -> pd.DataFrame:
    """Preference of every pair of runs (``prefeval compare``): rows ``measure, run_a,
    run_b, query_id, value``; value > 0 prefers run_a (RPP: rpp-sigir2022 eq. 4-6;
    lexirecall eq. 11; lexiprecision).

    Pairs follow the order of ``runs``.  Without ``per_query`` the summary rows
    (query_id ``"all"``, the mean over the evaluated queries); with ``per_query=True``
    the per-query rows only (as ir-measures' ``iter_calc``), so ``groupby().mean()``
    sees no summary row; ``per_query=True, summary=True`` gives both, per-query rows
    first, as the command's ``-q`` writes them.  ``measures``: names or a comma list
    (default: all the qrels support).  ``against``: run name(s); only the pairs (a, RUN),
    RUN as run_b, are computed.  ``both_directions``: each pair then its reverse
    (Delta(b, a) = -Delta(a, b)), for a runs x runs pivot.

    >>> import prefeval
    >>> runs = ["sample_data/runs/input.sys01", "sample_data/runs/input.sys02"]
    >>> prefeval.compare("sample_data/qrels.txt", runs, measures="rpp,lexirecall")
          measure  run_a  run_b query_id    value
    0         rpp  sys01  sys02      all -0.25082
    1  lexirecall  sys01  sys02      all -0.35000
    >>> prefs = prefeval.compare("sample_data/qrels.txt", runs, measures="rpp",
    ...                          per_query=True)
    >>> len(prefs), round(float(prefs.value.mean()), 5)  # 20 queries; their mean
    (20, -0.25082)
    """

    options = _judged("compare", {**locals(), **rest})
    sources = _runs(runs)
    if len(sources) < 2:
        raise ValueError(
            "need at least two runs to compare (one DataFrame of several runs needs a "
            "'run' or 'name' column)"
        )
    judged = read_qrels(qrels_input(qrels))
    measure_list = parse_measures(list(options.measures), judged.has_subtopics)
    pairs = against_pairs(list(sources), options.against) if options.against else None
    job = Job(judged, sources, measure_list, options, pairs, notify)
    # the command's path: partition by partition, put in the whole cube's row order
    frames, schema = compare_tables(
        engine_for(options), job, options.per_query, options.summary, options.both_directions
    )
    return _plain(whole_frame(frames, schema, options.summary))


@_command(
    "metrics",
    "measures",
    "relevance_level",
    "max_docs",
    "per_query",
    "summary",
    "cache",
    "progress",
    "notify",
    "baselines",
    runs_required=True,
)
def metrics(qrels, runs, *, measures, notify, baselines, **rest) -> pd.DataFrame:
    """Baseline metrics with ir-measures (``prefeval metrics``): rows ``measure, run,
    query_id, value``.  Without ``per_query`` the summary rows, as trec_eval -c and
    ir-measures' ``calc_aggregate`` (query_id ``"all"``: the mean over every judged
    query, or the sum for NumQ/NumRel/NumRet/NumRelRet); with ``per_query=True`` the
    per-query rows only, as ir-measures' ``iter_calc`` (every run's value on every
    evaluated query: those with a relevant document); ``per_query=True, summary=True``
    gives both, per-query rows first, as the command's ``-q`` writes them
    (:func:`prefeval.analysis.baselines.metrics_rows`).  The summary is not the mean of
    the per-query rows where some judged query has no relevant document.

    ``measures`` (``-m``): ir-measures measures (``ir_measures.AP``, ``nDCG@10``), their
    strings (``"AP"``, ``"nDCG@10"``), trec_eval names (``map``, ``ndcg_cut_10``),
    comma lists, or the native ``TSE``/``ASL``, alone or in a list; default AP nDCG RR
    R@1000 Rprec (+ the intent-aware ones on subtopic qrels).  ``baselines=`` is its old
    name: it still works, with a :class:`DeprecationWarning`.  A ``per_query=True``
    table is a ``metrics=`` table for the analysis functions.

    >>> import prefeval
    >>> from ir_measures import AP, nDCG
    >>> prefeval.metrics("sample_data/qrels.txt", "sample_data/runs/input.sys01",
    ...                  measures=[AP, nDCG@10])
       measure    run query_id     value
    0       AP  sys01      all  0.095394
    1  nDCG@10  sys01      all  0.096487
    >>> rows = prefeval.metrics("sample_data/qrels.txt", "sample_data/runs/input.sys01",
    ...                         measures="map", per_query=True)
    >>> rows.query_id.nunique(), "all" in set(rows.query_id)
    (20, False)
    """

    if baselines is not None:
        if measures is not None:
            raise TypeError("metrics() got measures= and baselines=: give measures= only")
        _warn_user(
            "metrics(baselines=...) is deprecated: use measures=... (the metrics to compute, "
            "as `prefeval metrics -m`)",
            DeprecationWarning,
        )
        measures = baselines
    given = {**locals(), **rest, "measures": None, "baselines": measures}
    options = _judged("metrics", given, None if baselines is not None else _AS_MEASURES)
    wanted, runid = without_runid(options.baselines or ())
    names = _baselines(wanted)
    sources = _runs(runs)
    judged = read_qrels(qrels_input(qrels))
    if runid:
        if notify is not None:
            notify(RUNID_NOTICE)
        if not names:  # runid alone: no values
            return _plain(no_metrics())
    table = metrics_rows(
        judged, sources, names or default_baselines(judged.has_subtopics), options, notify=notify
    )
    return _plain(table)


#: ``metrics``' keyword of the judge's ``baselines``
_AS_MEASURES = {"baselines": "measures"}
#: the notice of ``metrics(measures="runid")``
RUNID_NOTICE = (
    "runid: no rows; the run column names each run (trec_eval's runid is the run's tag, "
    "not a value)"
)


def _evidence_only(*args, **kw):
    """Only the evidence of :func:`_checked_inputs`: the judgments and runs are let go, and the
    heap they held handed back, before the analysis runs."""

    kw.setdefault("positions", False)  # the reduced runs: only label sampling needs them
    evidence = _checked_inputs(*args, **kw).evidence
    runtime.after_evidence()
    return evidence


def _checked_inputs(qrels, runs, prefs, metrics, options: Options, notify, **kw):
    """The evidence of an analysis function, with the checks of its inputs."""

    if runs is not None and qrels is None:
        raise ValueError("runs= needs qrels (to compute preferences or baselines)")
    sources = _runs(runs) if runs is not None else {}
    if prefs is None and (qrels is None or len(sources) < 2):
        raise ValueError("give qrels and at least two runs, or prefs=")
    if options.baselines:  # canonical names, each once
        options = replace(options, baselines=tuple(_baselines(options.baselines)))
    return gather_inputs(
        qrels_input(qrels) if qrels is not None else None,
        sources,
        prefs=prefs,
        metrics=metrics,
        options=options,
        notify=notify,
        **kw,
    )


@_command("order", *_INPUTS, *_COMPARED, "method", "teleport", *_RUNNING)
def order(qrels, runs, *, prefs, metrics, notify, **rest) -> pd.DataFrame:
    """System orderings (``prefeval order``): rows ``measure, method, rank, run, score``,
    rank 1 best, tied scores sharing a rank.

    Per query the win rate W_q(a) = sum_b Delta(a, b) (rpp-sigir2022 eq. 7) ranks the
    runs; ``method`` ``mc4`` (teleport ``teleport``), ``borda``, ``winrate`` or
    ``copeland`` aggregates them.  Baselines (``baselines``, default set; ``[]`` for
    none; or ``metrics=`` a table) are ordered by their mean.  Preferences come from
    ``qrels, runs`` or ``prefs=`` (a per-query :func:`compare` table).

    >>> import prefeval, glob
    >>> runs = sorted(glob.glob("sample_data/runs/input.*"))
    >>> from ir_measures import AP
    >>> prefeval.order("sample_data/qrels.txt", runs, measures="rpp", baselines=AP)
       measure method  rank    run     score
    0      rpp    mc4     1  sys06  0.800000
    1      rpp    mc4     2  sys03  0.109091
    2      rpp    mc4     3  sys04  0.043290
    3      rpp    mc4     4  sys05  0.023229
    4      rpp    mc4     5  sys02  0.014489
    5      rpp    mc4     6  sys01  0.009901
    6       AP   mean     1  sys06  0.527486
    7       AP   mean     2  sys03  0.404890
    8       AP   mean     3  sys04  0.310597
    9       AP   mean     4  sys05  0.307428
    10      AP   mean     5  sys02  0.148218
    11      AP   mean     6  sys01  0.095394
    """

    options = _judged("order", {**locals(), **rest})
    evidence = _evidence_only(
        qrels, runs, prefs, metrics, options, notify, stream=True, win_rates=False
    )
    return _plain(order_table(evidence, method=options.method, teleport=options.teleport))


@_command("discpower", *_INPUTS, *_COMPARED, *_TESTS, "pairs", "against", *_RUNNING)
def discpower(qrels, runs, *, prefs, metrics, pairs, progress, notify, **rest) -> pd.DataFrame:
    """Discriminative power (``prefeval discpower``, Sakai): rows ``measure, test,
    correction, alpha, significant, pairs, percent``; with ``pairs=True`` one row per run
    pair instead: ``measure, test, run_a, run_b, p_value, p_adjusted``.

    ``tests``: any of ``ttest``, ``sign``, ``hsd`` (randomized Tukey HSD, ``trials``,
    ``seed``), ``randomization`` (the two-sided paired sign-flip test of the mean
    difference, exact where 2**queries <= ``trials``, else ``trials`` random flips from
    ``seed``), as a list or a comma list (``"ttest,sign"``); default ttest, sign and
    hsd.  ``correction`` of the t, sign and randomization tests: ``bonferroni``,
    ``holm`` (family-wise error), ``bh`` (Benjamini-Hochberg), ``by``
    (Benjamini-Yekutieli) (false discovery rate) or ``none``.  ``against``: run name(s);
    only the pairs with them are tested and corrected for (default tests then ttest and
    sign: the HSD needs every pair).  The randomization test needs every pair's
    per-query differences: the preferences are then held whole (measures x pairs x
    queries), not streamed.  Inputs as :func:`order`.

    >>> import prefeval, glob
    >>> runs = sorted(glob.glob("sample_data/runs/input.*"))
    >>> from ir_measures import AP, nDCG
    >>> prefeval.discpower("sample_data/qrels.txt", runs, measures="rpp,lexirecall",
    ...                    baselines=[AP, nDCG@10], tests="ttest")
          measure   test  correction  alpha  significant  pairs    percent
    0         rpp  ttest  bonferroni   0.05            9     15  60.000000
    1  lexirecall  ttest  bonferroni   0.05            4     15  26.666667
    2          AP  ttest  bonferroni   0.05            9     15  60.000000
    3     nDCG@10  ttest  bonferroni   0.05            9     15  60.000000
    """

    options = _judged("discpower", {**locals(), **rest, "per_pair": pairs}, {"per_pair": "pairs"})
    with engine_for(options) as active:  # a Dask cluster held for the HSD's trials
        # the HSD's win rates in temporary files: one measure's read at a time
        hsd = "hsd" in options.tests
        # the randomization test flips each pair's per-query differences: the whole cube
        stream = "randomization" not in options.tests
        evidence = _evidence_only(
            qrels, runs, prefs, metrics, options, notify, stream=stream, win_rates=hsd,
            spill=hsd, engine=active,
        )  # fmt: skip
        table = pair_tests(
            evidence, list(options.tests), options.correction, options.trials, options.seed,
            progress=progress, jobs=options.jobs, notify=notify, engine=active,
        )  # fmt: skip
    return _plain(table if options.per_pair else discriminative_power(table, options.alpha))


@_command("tau", *_INPUTS, *_COMPARED, "method", *_RUNNING)
def tau(qrels, runs, *, prefs, metrics, notify, **rest) -> pd.DataFrame:
    """Kendall's tau-b between the run orderings of every pair of measures (``prefeval
    tau``, rpp-sigir2022 Table 2): rows ``measure_a, measure_b, tau``.

    Preferences are ordered by ``method`` (as :func:`order`), baselines by their mean.

    >>> import prefeval, glob
    >>> runs = sorted(glob.glob("sample_data/runs/input.*"))
    >>> from ir_measures import AP, nDCG
    >>> prefeval.tau("sample_data/qrels.txt", runs, measures="rpp,lexirecall",
    ...              baselines=[AP, nDCG@10])
        measure_a   measure_b  tau
    0         rpp  lexirecall  1.0
    1         rpp          AP  1.0
    2         rpp     nDCG@10  1.0
    3  lexirecall          AP  1.0
    4  lexirecall     nDCG@10  1.0
    5          AP     nDCG@10  1.0
    """

    options = _judged("tau", {**locals(), **rest})
    evidence = _evidence_only(
        qrels, runs, prefs, metrics, options, notify, stream=True, win_rates=False
    )
    return _plain(tau_table(evidence, method=options.method))


@_command("agree", *_INPUTS, *_COMPARED, "ties", "against", *_RUNNING)
def agree(qrels, runs, *, prefs, metrics, ties, notify, **rest) -> pd.DataFrame:
    """Sign agreement of preferences with baseline differences (``prefeval agree``):
    rows ``measure, baseline, agreement, compared`` — among the (query, run pair)
    comparisons where the baseline differs, the share where the preference has the same
    sign.  ``ties=True``: rows ``measure, ties, comparisons`` instead.  ``against``:
    run name(s); only the pairs with them.

    >>> import prefeval, glob
    >>> runs = sorted(glob.glob("sample_data/runs/input.*"))
    >>> from ir_measures import AP
    >>> prefeval.agree("sample_data/qrels.txt", runs, measures="rpp,lexirecall",
    ...                baselines=[AP, "ndcg_cut_10"])
          measure baseline  agreement  compared
    0         rpp       AP   0.929293       297
    1         rpp  nDCG@10   0.890511       274
    2  lexirecall       AP   0.858586       297
    3  lexirecall  nDCG@10   0.795620       274
    """

    options = _judged("agree", {**locals(), **rest})
    none = options.baselines == ()
    if not ties and metrics is None and (none or qrels is None or runs is None):
        raise ValueError(
            "agree compares preferences with baselines: give qrels and runs, or metrics= "
            "(or ties=True, which needs none)"
        )
    evidence = _evidence_only(
        qrels, runs, prefs, metrics, options, notify, stream=True, win_rates=False,
        signs=not options.ties,
    )  # fmt: skip
    return _plain(ties_table(evidence) if options.ties else agreement_table(evidence))


@_command(
    "robustness", *_INPUTS, *_COMPARED, "queries", "labels", "policy", "samples", "seed", *_RUNNING
)
def robustness(qrels, runs, *, prefs, metrics, progress, notify, **rest) -> pd.DataFrame:
    """Robustness to fewer queries or labels (``prefeval robustness``, rpp-sigir2022
    §6.2): rows ``measure, kind, level, samples, tau_mean, tau_std, ties, agreement``.

    ``queries``: numbers of queries to draw (``[5, 10]`` or ``"5,10"``); ``labels``:
    fractions of each query's relevant judgments to keep, removed ``uniform``-ly or
    most-retrieved first (``policy="pool"``); ``samples`` draws each, ``seed``.

    >>> import prefeval, glob
    >>> runs = sorted(glob.glob("sample_data/runs/input.*"))
    >>> prefeval.robustness("sample_data/qrels.txt", runs, measures="rpp", baselines="AP",
    ...                     queries=[5, 10], samples=3)
      measure     kind  level  samples  tau_mean   tau_std  ties  agreement
    0     rpp  queries      5        3  0.899808  0.046869   NaN        NaN
    1      AP  queries      5        3  0.866667  0.108866   NaN        NaN
    2     rpp  queries     10        3  0.988697  0.015984   NaN        NaN
    3      AP  queries     10        3  0.955556  0.062854   NaN        NaN
    """

    options = _judged("robustness", {**locals(), **rest})
    # streamed: query samples need only the win rates (read from temporary files one
    # measure at a time, the rows of the sampled queries where the measure is defined, by
    # its signs); label samples recompute preferences by partitions from the position
    # matrix, compared with the full judgments' signs
    got = _checked_inputs(
        qrels, runs, prefs, metrics, options, notify, positions=bool(options.labels),
        stream=True, signs=True, spill=True,
    )  # fmt: skip
    table = run_robustness(
        got,
        queries=list(options.queries),
        labels=list(options.labels),
        samples=options.samples,
        seed=options.seed,
        policy=options.policy,
        progress=progress,
    )
    return _plain(table)


@_command("pairs", *_INPUTS, *_COMPARED, "ci", "level", "resamples", "seed", "against", *_RUNNING)
def pairs(qrels, runs, *, prefs, metrics, notify, **rest) -> pd.DataFrame:
    """Per run pair (``prefeval pairs``): rows ``measure, run_a, run_b, queries, mean,
    ci_low, ci_high, wins, ties, losses, effect`` — the mean per-query difference
    (Delta(a, b) for a preference, the metric's a - b, or b - a when lower is better),
    its two-sided confidence interval at ``level`` (default 0.95), the queries won, tied
    and lost by run_a, and the effect size mean / sd of the differences (sd with ddof 1;
    NaN below two queries or when the differences all tie).  ``ci``: ``"t"`` (Student's
    t interval) or ``"bootstrap"`` (the percentile bootstrap of the mean, ``resamples``
    resamples seeded by ``seed``; it holds every pair's per-query differences: the
    preferences whole, not streamed); a number as ``ci`` is the level of a t interval.
    A preference's interval is clipped to [-1, 1], the range of its mean (``notify`` is
    told on how many run pairs).
    ``against``: run name(s); only the pairs (a, RUN).  Inputs as :func:`order`.

    >>> import prefeval, glob
    >>> runs = sorted(glob.glob("sample_data/runs/input.*"))
    >>> table = prefeval.pairs("sample_data/qrels.txt", runs, measures="rpp",
    ...                        baselines="map", against="sys01")
    >>> table[["measure", "run_a", "run_b", "wins", "ties", "losses"]].head(5)
      measure  run_a  run_b  wins  ties  losses
    0     rpp  sys02  sys01    12     4       4
    1     rpp  sys03  sys01    20     0       0
    2     rpp  sys04  sys01    18     1       1
    3     rpp  sys05  sys01    17     1       2
    4     rpp  sys06  sys01    20     0       0
    """

    options = _judged("pairs", {**locals(), **rest})
    # the bootstrap resamples each pair's per-query differences: the whole cube
    evidence = _evidence_only(
        qrels, runs, prefs, metrics, options, notify, stream=options.ci == "t",
        win_rates=False,
    )  # fmt: skip
    table = pair_summary(
        evidence, options.level, options.ci, options.resamples, options.seed, notify
    )
    return _plain(table)


@_command(
    "gate",
    "against",
    *_INPUTS,
    *_COMPARED,
    "test",
    "margin",
    "correction",
    "alpha",
    "min_queries",
    "ci",
    "resamples",
    "trials",
    "seed",
    "check",
    *_RUNNING,
    required=("against",),
)
def gate(
    qrels, runs, *, against, prefs, metrics, measures, baselines, test, check, notify, **rest
) -> pd.DataFrame:
    """The regression gate (``prefeval gate``): is any run worse than the reference run
    ``against``?  Rows ``measure, candidate, reference, queries, mean, ci_low, ci_high,
    wins, ties, losses, effect, test, p_value, p_adjusted, verdict`` per gated measure
    (``measures``, default ``rpp``; ``baselines``, default none) and candidate (every
    other run, by name).

    Per query the difference candidate vs reference (as :func:`pairs` with ``against``),
    tested one-sided and paired by ``test`` (``ttest``, ``sign`` or ``randomization``:
    ``trials`` sign flips, ``seed``; every flip when 2**n <= trials): H1 the candidate
    is worse, its mean difference below ``-margin`` (a non-inferiority margin in the
    measure's units; not with ``sign``).  p-values are corrected (``correction``:
    ``holm``, ``bonferroni``, ``bh``, ``by`` or ``none``) over every (candidate, measure)
    tested; below ``alpha`` the verdict is ``regression``; the opposite one-sided test
    (mean above ``+margin``), corrected the same way, makes it ``improvement``; else
    ``no difference``; with fewer than ``min_queries`` evaluated queries
    ``inconclusive`` (not tested; ``notify`` says why).  ``ci``: the two-sided (1 -
    alpha) interval of the mean, ``t`` or the percentile ``bootstrap`` (``resamples``,
    ``seed``); effect: mean / sd.  ``check=True`` raises :class:`prefeval.Regression`
    (an AssertionError) listing the regressions, if any.  Inputs as :func:`order`.

    >>> import prefeval, glob
    >>> runs = sorted(glob.glob("sample_data/runs/input.*"))
    >>> table = prefeval.gate("sample_data/qrels.txt", runs, against="sys03", min_queries=20)
    >>> table[["measure", "candidate", "mean", "p_adjusted", "verdict"]]
      measure candidate      mean    p_adjusted        verdict
    0     rpp     sys01 -0.774219  2.463473e-11     regression
    1     rpp     sys02 -0.686049  1.342222e-08     regression
    2     rpp     sys04 -0.208734  1.637873e-01  no difference
    3     rpp     sys05 -0.379847  3.119088e-03     regression
    4     rpp     sys06  0.249267  9.572542e-01  no difference
    """

    if isinstance(against, (str, os.PathLike)) or against is None:
        reference = against
    else:
        names = list(text_list(against, "against"))
        if len(names) != 1:
            raise ValueError(f"against={against!r}: gate compares with one reference run")
        reference = names[0]
    if not isinstance(reference, str) or not reference:
        raise ValueError("against: give the reference run's name")
    if measures is None:
        measures = "rpp"
    if baselines is None and metrics is None:
        baselines = ()  # no baseline gated unless asked for
    given = {**locals(), **rest, "tests": test, "against": reference}
    options = _judged("gate", given, keywords={"tests": "test"})
    if options.baselines and metrics is None and (qrels is None or runs is None):
        # a gate must not pass on measures it could not test
        raise OptionError(
            "baselines",
            "{value}: the gate has no values of these baselines to test; give the qrels and "
            "the runs, or {metrics=}",
            ",".join(options.baselines),
        )
    if prefs is None and runs is not None:
        runs = _runs(runs)  # resolved once: an iterator or a reader gives its runs once
        names = list(runs)
        against_pairs(names, [reference])  # an unknown reference before any run is read
        if len(names) < 2:
            raise ValueError(f"gate: give at least one candidate run besides {reference}")
    evidence = _evidence_only(
        qrels, runs, prefs, metrics, options, notify, stream=not needs_differences(options),
        win_rates=False,
    )  # fmt: skip
    if len(evidence.runs) < 2:
        raise ValueError(f"gate: give at least one candidate run besides {reference}")
    table = _plain(gate_table(evidence, reference, options, notify))
    if check:
        verdicts = Verdicts.of(table)
        if len(verdicts.regressions):
            lines = verdicts.lines()
            raise Regression(
                f"{len(lines)} regression{'s' if len(lines) > 1 else ''}:\n" + "\n".join(lines),
                table,
            )
    return table


@_command(
    "explain",
    "measures",
    "queries",
    "top",
    "relevance_level",
    "max_docs",
    "binary",
    "cache",
    "jobs",
    "progress",
    "notify",
    runs_required=True,
)
def explain(
    qrels,
    runs,
    *,
    measures,
    queries,
    top,
    relevance_level,
    max_docs,
    binary,
    cache,
    jobs,
    progress,
    notify,
    **rest,
) -> pd.DataFrame:
    """Why two runs' preferences are what they are (``prefeval explain``): per query the
    aligned recall levels of the binary population (positions, sgn, p(i)), the levels
    deciding lexiprecision and lexirecall, and the graded (eq. 5) and subtopic (eq. 6)
    populations; every ``compare`` value of the pair is recomputed from these rows.

    ``runs``: the two runs, A first (a list, a dict name -> run, or one many-run
    DataFrame of two runs).  ``queries``: the ids to explain, else the ``top`` N (default
    5) by |Delta| under the first of ``measures``.

    >>> import prefeval
    >>> rows = prefeval.explain("sample_data/qrels.txt", ["sample_data/runs/input.sys01",
    ...                         "sample_data/runs/input.sys02"], queries=["301"])
    >>> rows.loc[rows.row == "measure", ["query_id", "measure", "value"]]
      query_id          measure     value
    0      301              rpp  0.000000
    1      301           dcgrpp  0.100638
    2      301           invrpp  0.230011
    3      301       lexirecall  1.000000
    4      301    lexiprecision  1.000000
    5      301  rrlexiprecision  0.233333
    """

    options = judge(
        command="explain", measures=measures, top=top, relevance_level=relevance_level,
        max_docs=max_docs, binary=binary, cache=cache, jobs=jobs, progress=progress,
    )  # fmt: skip
    sources = _runs(runs)
    if len(sources) != 2:
        raise ValueError(f"explain compares two runs, not {len(sources)}")
    table = explain_table(
        read_qrels(qrels_input(qrels)),
        sources,
        options,
        queries=list(text_list(queries, "queries")) or None,
        notify=notify,
        cited=as_keyword,
    )
    return _plain(table)


@_command(
    "report",
    "output",
    *_INPUTS,
    *_COMPARED,
    *_TESTS,
    "robustness",
    "samples",
    "digits",
    "sections",
    "against",
    *_RUNNING,
)
def report(
    qrels, runs, *, output, prefs, metrics, notify, **rest
) -> list[str] | reports.InlineReport:
    """The whole study in one document (``prefeval report``), written to ``output``:
    ``.html`` (self-contained, figures as inline SVG), ``.md`` (figures as SVG beside it)
    or ``.tex`` (booktabs tables, figures as PDF beside it, ``OUT-<figure>.pdf``).
    Returns the paths written, the report last; the side files an earlier report to
    ``output`` left and this one does not write are removed (``docs/report.md``).
    Without ``output`` nothing is written: it returns an
    :class:`~prefeval.present.report.InlineReport`, which a Jupyter notebook displays
    inline (``_repr_html_``) and whose ``html`` is the page an ``.html`` report holds
    (the CSV files of the whole matrices inline too).

    Sections: a summary; the data; the baselines' means per run; per preference measure
    the runs x runs matrix of mean Delta with significance marks (``tests``,
    ``correction``, ``alpha``, ``trials``, ``seed`` as :func:`discpower`; past 10 runs a
    heat map, the whole matrix in ``OUT-matrix-<measure>.csv`` beside the report, among
    the paths returned) and its MC4 ordering beside each baseline's; discriminative power
    (table and curves); Kendall's tau between all measures (a heat map; in ``.tex`` a
    table when it fits); agreement and ties; with ``robustness=True`` the robustness
    curves (``samples`` draws).  With
    ``against`` (one run name) a section "Against the reference" after the data: the table
    of :func:`gate` against that run, of every measure of the report, with the gate's
    defaults (one-sided paired t-test, Holm's correction, ``alpha``, at least 25 queries);
    the other sections are the same.  ``sections``: the sections to print (a list or a
    comma list of :data:`~prefeval.options.SECTIONS`, printed in that order; default all
    that apply); those left out are not computed.  In a ``.tex`` report, when a run name
    is longer than :data:`~prefeval.present.report.NAME_MAX` characters every run goes by
    a short name in its tables and figures, and a table after the data maps the short
    names to the full ones (``docs/report.md``).  Inputs as :func:`order`; needs
    matplotlib (``pip install 'prefeval[plot]'``).

    >>> import prefeval, glob
    >>> runs = sorted(glob.glob("sample_data/runs/input.*"))
    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> written = prefeval.report("sample_data/qrels.txt", runs, baselines="AP",
    ...                           tests="ttest", output=os.path.join(folder, "report.html"))
    >>> [os.path.basename(path) for path in written]
    ['report.html']
    >>> shown = prefeval.report("sample_data/qrels.txt", runs, baselines="AP", tests="ttest")
    >>> "<h2>Summary</h2>" in shown.html  # a notebook displays it inline
    True
    """

    if output is not None:
        reports.report_format(output)
    tables = [t for t in (prefs, metrics) if isinstance(t, (str, os.PathLike))]
    paths = [qrels] if isinstance(qrels, (str, os.PathLike)) else []
    if isinstance(runs, (str, os.PathLike)):
        paths.append(runs)
    elif isinstance(runs, (list, tuple)):
        paths += [r for r in runs if isinstance(r, (str, os.PathLike))]
    elif isinstance(runs, dict):
        paths += [r for r in runs.values() if isinstance(r, (str, os.PathLike))]
    if output is not None:
        reports.check_targets(output, [*paths, *tables])
    plotting.require("a report")
    options = _judged("report", {**locals(), **rest})
    # ``against`` names the reference of a section; every pair is still compared
    reference = options.against[0] if options.against else None
    options = replace(options, against=())
    if reference is not None and runs is not None and prefs is None:
        runs = _runs(runs)  # resolved once: an iterator or a reader gives its runs once
        against_pairs(list(runs), [reference])  # an unknown name before any computing
    # the sections that run the significance tests (the others do not need their inputs)
    tested = bool(set(options.sections) & {"summary", "table", "baselines", "matrices",
                                           "discpower"})  # fmt: skip
    with engine_for(options) as active:  # a Dask cluster held for the HSD's trials
        # preferences streamed (never the whole cube) unless the randomization test
        # flips each pair's per-query differences
        got = _checked_inputs(
            qrels, runs, prefs, metrics, options, notify, positions=options.robustness,
            engine=active, stream=not (tested and "randomization" in options.tests),
            win_rates=(tested and "hsd" in options.tests) or options.robustness, signs=True,
            spill=True,
        )  # fmt: skip
        if not got.evidence.preference_measures:
            raise ValueError("no preference measure to report")
        sources = {"prefs": _source_name(prefs), "metrics": _source_name(metrics)}
        caveats = sample_caveats(got.evidence, options.tests) if tested else []
        if notify is not None:
            for caveat in caveats:
                notify(caveat)
        gated = None
        if reference is not None and "against" in options.sections:
            against_pairs(got.evidence.runs, [reference])  # a --prefs table's runs
            settings = _judged(
                "gate",
                {"correction": default("correction", "gate"), "alpha": options.alpha,
                 "against": (reference,)},
            )  # fmt: skip
            evidence = got.evidence.against(reference)
            gated = (_plain(gate_table(evidence, reference, settings, notify)), settings)
        document = reports.build(
            got, options, sources=sources, engine=active, against=gated,
            abbreviate=output is not None and reports.report_format(output) == "tex",
        )  # fmt: skip
    if output is None:
        return reports.InlineReport(document)
    return reports.write(document, output, inputs=[*paths, *tables])


@_command(
    "table",
    *_INPUTS,
    *_COMPARED,
    "order_by",
    "against",
    "test",
    "correction",
    "alpha",
    "trials",
    "seed",
    *_RUNNING,
)
def table(qrels, runs, *, prefs, metrics, test, progress, notify, **rest) -> pd.DataFrame:
    """The runs x measures table papers print (``prefeval table``), tidy: one row per run
    and measure, ``row, run, letter, measure, kind, method, value, rank, best, marks,
    test, correction, alpha``, rows in the table's order (``row``), then the measures'.

    Rows: the runs in the MC4 order of ``order_by`` (a preference measure, or a
    baseline's mean; default the first preference measure), ties by name, or with
    ``order_by="given"`` in the order given.  ``value``: a preference measure's MC4 score
    (``method`` ``mc4``, as :func:`order`), a baseline's mean over the queries (``mean``,
    as :func:`metrics`); ``rank`` 1 is the best of the measure (``best``).  Each run has a
    ``letter`` (a, b, ... z, aa, ab, ... in row order); ``marks``: the letters of the
    runs it is significantly better than on the measure by ``test`` (``ttest``, ``sign``,
    ``hsd`` or ``randomization``, as :func:`discpower`), ``correction`` over every pair
    of runs of the measure, at ``alpha``; separated by commas past 26 runs.

    ``against`` (one run name, REF): a preference measure's value is the run's mean
    preference Δ(run, REF) (``method`` ``delta``, as :func:`pairs` with ``against``; 0
    for REF), ranked by it; ``marks`` ``+`` (significantly better than REF) or ``-``
    (worse), the test's ``p_value`` and ``p_adjusted`` (corrected over the pairs of the
    measure with REF, as :func:`discpower` with ``against``) beside them; columns
    ``letter`` out, ``reference, p_value, p_adjusted`` in.  Inputs as :func:`order`.

    >>> import prefeval, glob
    >>> runs = sorted(glob.glob("sample_data/runs/input.*"))
    >>> rows = prefeval.table("sample_data/qrels.txt", runs, measures="rpp", baselines="AP")
    >>> rows[rows.measure == "rpp"][["letter", "run", "marks", "value", "best"]]
       letter    run marks     value   best
    0       a  sys06   def  0.800000   True
    2       b  sys03   def  0.109091  False
    4       c  sys04    ef  0.043290  False
    6       d  sys05     f  0.023229  False
    8       e  sys02        0.014489  False
    10      f  sys01        0.009901  False
    """

    given = {**locals(), **rest, "tests": test}
    options = _judged("table", given, keywords={"tests": "test"})
    reference = options.against[0] if options.against else None
    if options.order_by not in (None, GIVEN) and len(known_measures(options.order_by)) != 1:
        raise OptionError(
            "order_by",
            f"{{value}} is not a measure; give a preference measure, a baseline or "
            f"{GIVEN!r} (the runs in the order given)",
            options.order_by,
        )
    # every pair is compared (MC4 orders the rows); ``against`` names the reference
    options = replace(options, against=())
    if reference is not None and runs is not None and prefs is None:
        runs = _runs(runs)  # resolved once: an iterator or a reader gives its runs once
        against_pairs(list(runs), [reference])  # an unknown name before any computing
    test = options.tests[0]
    with engine_for(options) as active:  # a Dask cluster held for the HSD's trials
        evidence = _evidence_only(
            qrels, runs, prefs, metrics, options, notify, stream=test != "randomization",
            win_rates=test == "hsd", spill=test == "hsd", engine=active,
        )  # fmt: skip
        tested = evidence
        if reference is not None:
            against_pairs(evidence.runs, [reference])  # a prefs table's runs
            tested = evidence.against(reference)
        pair_table = pair_tests(
            tested, [test], options.correction, options.trials, options.seed,
            progress=progress, jobs=options.jobs, notify=notify, engine=active,
        )  # fmt: skip
    frame = runs_table(
        evidence, pair_table, pair_summary(tested), order_by=options.order_by, reference=reference,
        alpha=options.alpha,
    )  # fmt: skip
    return _plain(frame)


def _source_name(table) -> str | None:
    """A table's path for the report's data section; "a DataFrame" for one in memory."""
    if table is None:
        return None
    return os.fspath(table) if isinstance(table, (str, os.PathLike)) else "a DataFrame"
