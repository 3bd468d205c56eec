"""Registry of preference measures, modelled on ir-measures.

Each measure is a small named object; names are parsed case-insensitively, with
the papers' spellings as aliases (``RPP``, ``dcgRPP``, ``invRPP``, ``ST-RPP``,
``LR``, ``sgnLP``, ``rrLP``).  Every measure Delta(a, b) is a preference: positive
when run a is preferred, and Delta(b, a) = -Delta(a, b).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Measure:
    """One preference measure.

    ``family`` is ``rpp`` (graded RPP, rpp-sigir2022 eq. 5; eq. 4 with --binary),
    ``strpp`` (subtopic RPP, eq. 6) or ``lexi`` (lexicographic measures).
    ``weighting`` is the recall-level distribution p(i) of the RPP families.
    """

    name: str
    family: str
    weighting: str | None
    description: str

    @property
    def needs_subtopics(self) -> bool:
        return self.family == "strpp"

    def __str__(self) -> str:
        return self.name


MEASURES: dict[str, Measure] = {
    m.name: m
    for m in [
        Measure("rpp", "rpp", "uniform", "recall-paired preference, p(i) = 1/m (eq. 4-5)"),
        Measure("dcgrpp", "rpp", "dcg", "RPP with p(i) proportional to 1/log2(i+1)"),
        Measure("invrpp", "rpp", "inverse", "RPP with p(i) proportional to 1/i"),
        Measure("strpp", "strpp", "uniform", "subtopic RPP (eq. 6), p(i) = 1/m"),
        Measure("stdcgrpp", "strpp", "dcg", "subtopic RPP, p(i) proportional to 1/log2(i+1)"),
        Measure("stinvrpp", "strpp", "inverse", "subtopic RPP, p(i) proportional to 1/i"),
        Measure("lexirecall", "lexi", None, "lexicographic recall: deepest differing level"),
        Measure("lexiprecision", "lexi", None, "sgnLP: first differing recall level decides"),
        Measure("rrlexiprecision", "lexi", None, "rrLP: 1/p_i - 1/p'_i at the first difference"),
    ]
}

_ALIASES = {
    "dgcrpp": "dcgrpp",
    "stdgcrpp": "stdcgrpp",
    "lr": "lexirecall",
    "sgnlr": "lexirecall",
    "lexr": "lexirecall",
    "sgnlp": "lexiprecision",
    "lp": "lexiprecision",
    "rrlp": "rrlexiprecision",
}

_NAME = re.compile(r"^\s*([A-Za-z][A-Za-z0-9_\-]*)\s*(?:@\s*(\S+)|\((.*)\))?\s*$")


def canonical_name(text: str) -> str:
    """Lower-case, without '-' and '_': ``ST-RPP`` -> ``strpp``."""
    return text.lower().replace("-", "").replace("_", "")


def parse_measure(text: str) -> Measure:
    """Parse one measure name (ir-measures syntax; our measures take no parameters)."""
    match = _NAME.match(text)
    if not match:
        raise ValueError(f"cannot parse measure {text!r}")
    key = canonical_name(match.group(1))
    key = _ALIASES.get(key, key)
    if key not in MEASURES:
        known = ", ".join(MEASURES)
        raise ValueError(f"unknown measure {text!r}; known measures: {known}")
    if match.group(2) is not None or match.group(3) is not None:
        raise ValueError(f"measure {match.group(1)!r} takes no cutoff or parameters (use -M)")
    return MEASURES[key]


def parse_measures(specs, has_subtopics: bool = False) -> list[Measure]:
    """Measures from repeatable, comma-separated specs; default: all the qrels support.

    Duplicates are dropped, order of first mention kept.  Subtopic measures are an
    error when the qrels carry no subtopics.
    """
    names: list[str] = []
    for spec in specs or []:
        parts = [part for part in str(spec).split(",") if part.strip()]
        if not parts:
            raise ValueError(f"empty measure list {str(spec)!r}")
        names.extend(parts)
    if not names:
        return default_measures(has_subtopics)
    out: list[Measure] = []
    for name in names:
        measure = parse_measure(name)
        if measure.needs_subtopics and not has_subtopics:
            raise ValueError(f"measure {measure.name!r} needs subtopic qrels (ndeval format)")
        if measure not in out:
            out.append(measure)
    return out


def default_measures(has_subtopics: bool) -> list[Measure]:
    return [m for m in MEASURES.values() if has_subtopics or not m.needs_subtopics]
