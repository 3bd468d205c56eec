"""Registry of preference measures, modelled on ir-measures and trec_eval.

Each measure is a small entry (:class:`Measure`: its name, family, variant, the papers'
spelling and other aliases, paper and equation, help line), apart from the families
that compute it (:data:`FAMILIES`: :mod:`.rpp`, :mod:`.lexicographic`).  Names are
parsed case-insensitively, ``-`` and ``_`` ignored, with the papers' spellings as
aliases (``RPP``, ``dcgRPP``, ``invRPP``, ``ST-RPP``, ``LR``, ``sgnLP``, ``rrLP``).
Every measure Delta(a, b) is a preference: positive when run a is preferred, and
Delta(b, a) = -Delta(a, b).

Adding a measure: its variant in its family module (an RPP weighting in
:data:`.rpp.WEIGHTINGS`, a lexicographic kernel in :data:`.lexicographic.KERNELS`)
and its entry here (:func:`register`); the engine, explain, the ``-m`` help and
``prefeval measures`` take it from there.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import groupby
from typing import TYPE_CHECKING

from ..core.citations import PAPERS, Paper
from .family import Family
from .lexicographic import KERNELS, LEXICOGRAPHIC
from .rpp import GRADED, SUBTOPIC, WEIGHTINGS

if TYPE_CHECKING:
    import pandas as pd

#: the families, by ``Measure.family``, in the order the engine and explain ask them
FAMILIES: dict[str, Family] = {f.name: f for f in (GRADED, SUBTOPIC, LEXICOGRAPHIC)}
#: per family, the table of its variants
_VARIANTS: dict[str, Mapping[str, object]] = {
    "rpp": WEIGHTINGS,
    "strpp": WEIGHTINGS,
    "lexi": KERNELS,
}


@dataclass(frozen=True)
class Measure:
    """One preference measure.

    ``family`` is the key of its family in :data:`FAMILIES`: ``rpp`` (graded RPP,
    rpp-sigir2022 eq. 5; eq. 4 with --binary), ``strpp`` (subtopic RPP, eq. 6) or
    ``lexi`` (lexicographic measures).  ``variant`` is which member of the family it
    is: the recall-level distribution p(i) of the RPP families
    (:data:`.rpp.WEIGHTINGS`), the kernel of a lexicographic measure
    (:data:`.lexicographic.KERNELS`).  ``spelling`` is the papers' spelling, shown in
    the ``-m`` help; ``aliases`` other names accepted; ``paper`` (the key of its paper
    in :data:`prefeval.core.citations.PAPERS`) and ``equation`` where it is defined;
    ``description`` its help line.
    """

    name: str
    family: str
    variant: str
    description: str
    spelling: str | None = None
    aliases: tuple[str, ...] = ()
    paper: str = ""
    equation: str = ""

    @property
    def needs_subtopics(self) -> bool:
        return FAMILIES[self.family].needs_subtopics

    @property
    def names(self) -> tuple[str, ...]:
        """Every name it is known by: its own, its spelling, its aliases."""
        return (self.name, *([self.spelling] if self.spelling else []), *self.aliases)

    @property
    def citation(self) -> Paper | None:
        """Its paper (authors, title, venue, year, DOI, BibTeX), or None when ``paper``
        is not a key of :data:`prefeval.core.citations.PAPERS`."""
        return PAPERS.get(self.paper)

    def __str__(self) -> str:
        return self.name


_RPP = "rpp-sigir2022"
MEASURES: dict[str, Measure] = {}


_NAME = re.compile(r"^\s*([A-Za-z][A-Za-z0-9_\-]*)\s*(?:@\s*(\S+)|\((.*)\))?\s*$")


def canonical_name(text: str) -> str:
    """Lower-case, without '-' and '_': ``ST-RPP`` -> ``strpp``."""
    return text.lower().replace("-", "").replace("_", "")


def _lookup() -> dict[str, Measure]:
    """Every canonical name and alias -> its measure."""
    return {canonical_name(name): m for m in MEASURES.values() for name in m.names}


def register(measure: Measure) -> Measure:
    """Add ``measure`` to the registry (:data:`MEASURES`, after the others); ValueError
    when its family or variant is unknown or one of its names is taken."""
    if measure.family not in FAMILIES:
        raise ValueError(f"measure {measure.name!r}: unknown family {measure.family!r}")
    if measure.variant not in _VARIANTS[measure.family]:
        raise ValueError(f"measure {measure.name!r}: unknown variant {measure.variant!r}")
    taken = _lookup()
    for name in measure.names:
        if canonical_name(name) in taken:
            raise ValueError(f"measure name {name!r} is taken")
    MEASURES[measure.name] = measure
    return measure


for _measure in [
    Measure(
        "rpp", "rpp", "uniform", "recall-paired preference, p(i) = 1/m (eq. 4-5)",
        "RPP", (), _RPP, "eq. 4-5",
    ),
    Measure(
        "dcgrpp", "rpp", "dcg", "RPP with p(i) proportional to 1/log2(i+1)",
        "dcgRPP", ("dgcRPP",), _RPP, "eq. 4-5",
    ),
    Measure(
        "invrpp", "rpp", "inverse", "RPP with p(i) proportional to 1/i",
        "invRPP", (), _RPP, "eq. 4-5",
    ),
    Measure(
        "strpp", "strpp", "uniform", "subtopic RPP (eq. 6), p(i) = 1/m",
        "ST-RPP", (), _RPP, "eq. 6",
    ),
    Measure(
        "stdcgrpp", "strpp", "dcg", "subtopic RPP, p(i) proportional to 1/log2(i+1)",
        None, ("stdgcRPP",), _RPP, "eq. 6",
    ),
    Measure(
        "stinvrpp", "strpp", "inverse", "subtopic RPP, p(i) proportional to 1/i",
        None, (), _RPP, "eq. 6",
    ),
    Measure(
        "lexirecall", "lexi", "lexirecall", "lexicographic recall: deepest differing level",
        "LR", ("sgnLR", "LexR"), "lexirecall-recall-robustness", "eq. 11",
    ),
    Measure(
        "lexiprecision", "lexi", "lexiprecision", "sgnLP: first differing recall level decides",
        "sgnLP", ("LP",), "lexiprecision-evia2023", "eq. 3",
    ),
    Measure(
        "rrlexiprecision", "lexi", "rrlexiprecision",
        "rrLP: 1/p_i - 1/p'_i at the first difference",
        "rrLP", (), "lexiprecision-evia2023", "eq. 2",
    ),
]:  # fmt: skip
    register(_measure)


def parse_measure(text: str) -> Measure:
    """Parse one measure name (ir-measures syntax; our measures take no parameters)."""
    match = _NAME.match(text)
    if not match:
        raise ValueError(f"cannot parse measure {text!r}")
    measure = _lookup().get(canonical_name(match.group(1)))
    if measure is None:
        known = ", ".join(MEASURES)
        raise ValueError(f"unknown measure {text!r}; known measures: {known}")
    if match.group(2) is not None or match.group(3) is not None:
        raise ValueError(f"measure {match.group(1)!r} takes no cutoff or parameters (use -M)")
    return measure


def parse_measures(specs, has_subtopics: bool = False) -> list[Measure]:
    """Measures from repeatable, comma-separated specs; default: all the qrels support.

    Duplicates are dropped, order of first mention kept.  Subtopic measures are an
    error when the qrels carry no subtopics.

    >>> import prefeval
    >>> [m.name for m in prefeval.parse_measures(["RPP,LR", "rpp"])]
    ['rpp', 'lexirecall']
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


def families_of(measures) -> list[tuple[Family, list[Measure]]]:
    """The families of ``measures``, in :data:`FAMILIES` order, each with its measures
    among them (in the order given)."""
    return [
        (family, mine)
        for family in FAMILIES.values()
        if (mine := [m for m in measures if m.family == family.name])
    ]


def members(family: Family) -> list[Measure]:
    """The registered measures of ``family``, in registry order."""
    return [m for m in MEASURES.values() if m.family == family.name]


def measure_help(default: str | None = None) -> str:
    """The help of ``-m/--measure``: the default measures (those needing subtopic qrels
    in brackets; ``default``: a command's own default instead) and the papers'
    spellings, from the registry."""
    parts = []
    for subtopic, group in groupby(MEASURES.values(), key=lambda m: m.needs_subtopics):
        names = " ".join(m.name for m in group)
        parts.append(f"[{names}]" if subtopic else names)
    spellings = ", ".join(m.spelling for m in MEASURES.values() if m.spelling)
    if default is None:
        default = f"every measure the qrels support ({' '.join(parts)})"
    return (
        f"Preference measure(s); repeatable, comma lists allowed. Default: {default}. "
        f"Case-insensitive; aliases {spellings}."
    )


def describe(measure: Measure) -> str:
    """One measure's description, as ``trec_eval -h -m NAME`` prints one: its name and
    help line, then its family, names and where it is defined, then its paper in full
    and as BibTeX (when the paper is in the citations registry)."""
    family = FAMILIES[measure.family]
    other = measure.names[1:]
    lines = [
        f"{measure.name}: {measure.description}",
        f"  family: {measure.family} ({family.summary})",
        f"  aliases: {', '.join(other) if other else '-'}",
        f"  defined in: {measure.paper}, {measure.equation}",
    ]
    if measure.needs_subtopics:
        lines.append("  needs subtopic qrels (ndeval format)")
    paper = measure.citation
    if paper is None:
        return "\n".join(lines) + "\n"
    lines.append(f"  paper: {paper.reference}")
    if paper.note:
        lines.append(f"  note: {paper.note}")
    return "\n".join(lines) + "\n\n" + paper.bibtex


def measure_table() -> pd.DataFrame:
    """The registry as a table (``prefeval measures``): per measure its name, family,
    other names (``aliases``, comma-separated), paper (its key), equation, description,
    then its paper as a short citation (``citation``, ``Diaz & Ferraro, SIGIR 2022``)
    and its DOI (``doi``), empty when the paper is not in the citations registry or
    has no DOI."""
    import pandas as pd

    rows = []
    for m in MEASURES.values():
        paper = m.citation
        rows.append(
            [m.name, m.family, ",".join(m.names[1:]), m.paper, m.equation, m.description]
            + ([paper.short, paper.doi] if paper else ["", ""])
        )
    columns = [
        "measure", "family", "aliases", "paper", "equation", "description", "citation", "doi",
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=columns)
