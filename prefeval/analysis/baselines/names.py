"""Baseline names: what ``-B``/``baselines=`` accept (ir-measures measures, trec_eval
names and nicknames, the native ``TSE`` and ``ASL``), parsed into :class:`Baseline`."""

from __future__ import annotations

import contextlib
import io
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

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
MAX_CUTOFF = 2**31 - 1
#: trec_eval's geometric mean AP (:func:`gm_map`): its name, and the floor of AP
GM_MAP = "gm_map"
MIN_GEO_MEAN = 0.00001
#: the name of NumRet(rel=1) written without rel (NumRelRet, num_rel_ret): rel follows -l
NUM_REL_RET = "NumRelRet"


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
            and not (isinstance(value, int) and 1 <= value <= MAX_CUTOFF)
        ):
            raise ValueError(
                f"baseline measure {text!r}: cutoff @{value} must be an integer from 1 "
                f"to {MAX_CUTOFF}"
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
        provider_of(measure, text)
        return Baseline(NUM_REL_RET, True, "irm", False, measure=measure)
    provider = provider_of(measure, text)
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


def provider_of(measure, text: str):
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


parse_all = parse_baselines

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
