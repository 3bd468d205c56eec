"""The whole study on one page (``prefeval report``): HTML, Markdown or LaTeX.

:func:`build` turns the evidence of an analysis (:func:`prefeval.analysis.evidence.gather_inputs`)
into a :class:`Report`, a format-free list of sections holding paragraphs, tables of
:class:`Cell` and matplotlib figures; :func:`render` writes it as

- ``html``: one self-contained page, figures embedded as SVG (``data:`` URIs, so no
  file or network access is needed to view it and figure ids cannot collide);
- ``md``: Markdown (GitHub/pandoc pipe tables), figures as SVG files beside it;
- ``tex``: booktabs tables and figures to ``\\input`` into a paper (needs the
  ``booktabs`` and ``graphicx`` packages), figures as PDF files beside it.

Figures beside ``OUT.ext`` are named ``OUT-<figure>.svg|pdf``.  The report ends with
the references of the measures and methods it used (a list in HTML and Markdown; in
LaTeX, comment lines and their BibTeX entries in ``OUT-references.bib`` beside it, for
the paper's own bibliography).  Past
:data:`MATRIX_MAX` runs each preference measure's runs x runs matrix is drawn as a heat
map (figure ``heatmap-<measure>``) and written whole, in every format, as
``OUT-matrix-<measure>.csv`` beside the report.  Every computation is the one of the
analysis commands: ``order`` (MC4, and the baselines' means), ``pairs`` (means),
``discpower`` (tests, corrections), ``tau``, ``agree`` and ``robustness``.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import os
import re
import stat
import unicodedata
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from ..analysis.agreement import agreement_table, tau_table, ties_table
from ..analysis.orderings import order
from ..analysis.robustness import robustness as run_robustness
from ..analysis.significance import discriminative_power, pair_summary, pair_tests, sample_caveats
from ..analysis.table import BETTER, GIVEN, WORSE, canonical_measure, runs_table
from ..core import progress as bars
from ..core import ties
from ..core.arrays import found_codes
from ..core.citations import METHOD_PAPERS, bibliography, cited
from ..core.errors import OutputError
from ..core.qrels import query_sort_key
from ..io.writers import (
    FILE_NAME_CHARS,
    TEX_FILE_NAME_CHARS,
    atomic_output,
    file_beside,
    file_name_part,
    output_target,
)
from ..measures import MEASURES
from ..options import SECTIONS, TESTS, Options
from .plots import (
    OVERLAY_MAX,
    discpower_panels_figure,
    figure_bytes,
    preference_heatmap_figure,
    robustness_figure,
    svg_text,
    tau_heatmap_figure,
)

#: report formats by file extension
FORMATS = {".html": "html", ".htm": "html", ".md": "md", ".markdown": "md", ".tex": "tex"}
#: the superscript marking a pair significant under each test
TEST_MARKS = {"ttest": "t", "sign": "s", "hsd": "h", "randomization": "r"}
_TEST_NAMES = {
    "ttest": "t-test",
    "sign": "sign test",
    "hsd": "randomized Tukey HSD",
    "randomization": "randomization test",
}
#: shares of the queries drawn by --robustness, and of the relevant labels kept
ROBUSTNESS_QUERY_SHARES = (0.1, 0.25, 0.5, 0.75)
ROBUSTNESS_LABELS = (0.1, 0.25, 0.5, 0.75)
#: up to this many runs a preference measure's matrix is a table of numbers; past it, a
#: heat map with the whole matrix in a CSV file beside the report
MATRIX_MAX = 10
#: a two-column paper's column and text widths (inches): the LaTeX figures are drawn at
#: the width they are printed at, so their text keeps its size (7 to 8 pt)
COLUMN_WIDTH = 3.3
TEXT_WIDTH = 7.0
#: LaTeX tables longer than this many rows are split into tables of at most as many
LATEX_ROWS = 40


def report_format(path) -> str:
    """``html``, ``md`` or ``tex`` from the extension of ``path`` (any case);
    ValueError for another."""
    if os.fspath(path) in ("", "-"):
        raise ValueError("a report is written to a file: give FILE.html, FILE.md or FILE.tex")
    ext = os.path.splitext(os.fspath(path))[1].lower()
    if ext not in FORMATS:
        problem = f"'{ext}' is not a report format" if ext else "a report needs an extension"
        raise ValueError(f"{problem}; use .html, .md or .tex")
    return FORMATS[ext]


@dataclass
class Cell:
    """One table cell: its text, bold or not, and significance marks (superscript)."""

    text: str
    bold: bool = False
    marks: str = ""
    number: bool = False


@dataclass
class Table:
    """A table with its caption and label; ``formats``: where it is shown;
    ``collapsed``: folded away in HTML (a ``<details>`` element) until opened."""

    caption: str
    header: list[str]
    rows: list[list[Cell]]
    label: str
    formats: tuple = ("html", "md", "tex")  # where the table is shown
    collapsed: bool = False
    own_marks: bool = False  # its caption says what its marks mean (not the legend)


@dataclass
class Figure:
    """A figure: ``draw(width)`` builds it (a matplotlib Figure) ``width`` inches wide,
    or at its own size for a page (``None``); ``wide``: across both columns of a paper
    (LaTeX ``figure*``); ``formats``: where it is shown."""

    name: str
    caption: str
    draw: Callable
    wide: bool = False
    formats: tuple = ("html", "md", "tex")


@dataclass
class Download:
    """A data file written beside the report, ``OUT-<name>.csv``, and linked from it."""

    name: str
    caption: str
    data: bytes


@dataclass
class References:
    """The works a report cites (:class:`prefeval.core.citations.Paper`), listed in HTML
    and Markdown; in LaTeX as comment lines, their BibTeX written beside the report as
    ``OUT-references.bib`` (a paper has one bibliography, which an ``\\input`` report
    must not open a second time)."""

    name: str
    papers: list


@dataclass
class Section:
    title: str
    blocks: list = field(default_factory=list)  # str paragraphs, Tables, Figures
    level: int = 2  # 2: a section, 3: a subsection


@dataclass
class Report:
    title: str
    sections: list[Section]
    legend: str = ""  # what the marks of the preference matrices mean


def _number(value, digits: int) -> str:
    """``%.{digits}f``, never ``-0``; empty for NaN."""
    if value is None or not np.isfinite(value):
        return ""
    text = f"{value:.{digits}f}"
    return text.lstrip("-") if text.lstrip("-") == f"{0:.{digits}f}" else text


def _percent(share, digits: int = 1) -> str:
    return "" if share is None or not np.isfinite(share) else f"{100 * share:.{digits}f}%"


def _data_section(inputs, sources: dict, label=str) -> Section:
    ev = inputs.evidence
    rows = []
    judged = inputs.qrels
    if judged is not None:
        rows.append(("Judgments", judged.name))
    if sources.get("prefs"):
        rows.append(("Preference table", sources["prefs"]))
    if sources.get("metrics"):
        rows.append(("Baseline table", sources["metrics"]))
    names = sorted(ev.runs)
    if any(label(run) != run for run in names):
        rows.append((f"Runs ({len(ev.runs)})", "by their short names: see the table of run names"))
    else:
        rows.append((f"Runs ({len(ev.runs)})", ", ".join(names)))
    evaluated = len(ev.query_ids)
    if judged is not None:
        judged_queries = judged.query_ids()
        dropped = sorted(set(judged_queries) - set(ev.query_ids), key=query_sort_key)
        text = f"{evaluated} evaluated of {len(judged_queries)} judged"
        if dropped:
            shown = ", ".join(dropped[:10]) + (", …" if len(dropped) > 10 else "")
            text += f"; {len(dropped)} dropped (no relevant item at the level): {shown}"
        rows.append(("Queries", text))
    else:
        rows.append(("Queries", f"{evaluated} evaluated"))
    if inputs.relevance_level is not None:
        rows.append(("Relevance level", f"relevant: grade ≥ {inputs.relevance_level:g}"))
    elif judged is not None:
        rows.append(("Relevance level", "relevant: grade > 0"))
    if inputs.max_docs is not None:
        rows.append(("Depth", f"first {inputs.max_docs} documents of each ranking"))
    binary = " (binary relevance)" if inputs.binary else ""
    rows.append(("Preference measures", ", ".join(ev.preference_measures) + binary))
    rows.append(("Baselines", ", ".join(ev.metrics) or "none"))
    table = Table(
        "Data: the inputs of the report.",
        ["", ""],
        [[Cell(k, bold=True), Cell(v)] for k, v in rows],
        "data",
    )
    return Section("Data", [table])


def _matrix_table(name, order_rows, pair_rows, tests, digits, label=str) -> Table:
    """Runs x runs mean Delta(row, column), rows and columns in MC4 order."""
    ranked, rank, matrix = _matrix(order_rows, pair_rows)
    marks = {}
    for (a, b), letters in tests.items():
        marks[a, b] = marks[b, a] = letters
    rows = []
    for i, a in enumerate(ranked):
        cells = [Cell(label(a), bold=rank[a] == 1)]
        for j, b in enumerate(ranked):
            if i == j:
                cells.append(Cell("–", number=True))
            else:
                text = _number(matrix[i, j], digits)
                cells.append(Cell(text, marks=marks.get((a, b), ""), number=True))
        rows.append(cells)
    return Table(
        f"{name}: mean preference Δ(row, column) over the queries; positive: the row's "
        f"run is preferred. Runs in MC4 order, the first in bold.",
        ["", *map(label, ranked)],
        rows,
        f"{name}-matrix",
    )


def _orderings_table(ev, name, orders, taus, digits, label=str) -> Table:
    """The measure's MC4 ordering beside each baseline's (rank of each run)."""
    mine = orders[orders["measure"] == name].sort_values(["rank", "run"], kind="stable")
    header = ["run", f"{name} (MC4)", *ev.metrics]
    rank_of = {
        m: dict(zip(part["run"], part["rank"])) for m, part in orders.groupby("measure", sort=False)
    }
    rows = []
    for run, rank in zip(mine["run"], mine["rank"]):
        cells = [Cell(label(run), bold=rank == 1), Cell(str(rank), bold=rank == 1, number=True)]
        for base in ev.metrics:
            r = rank_of[base][run]
            cells.append(Cell(str(r), bold=r == 1, number=True))
        rows.append(cells)
    if ev.metrics:
        rows.append(
            [Cell("Kendall's τ", bold=True), Cell(_number(1.0, digits), number=True)]
            + [Cell(_number(taus.get((name, b), np.nan), digits), number=True) for b in ev.metrics]
        )
    return Table(
        f"{name}: rank of each run under MC4 of {name} and under each baseline's mean "
        "(tied runs share a rank); last row: Kendall's τ-b with the MC4 ordering.",
        header,
        rows,
        f"{name}-orderings",
    )


def _significance(pair_table, name, alpha) -> dict:
    """(run_a, run_b) -> the marks of the tests finding the pair significant."""
    out: dict = {}
    part = pair_table[(pair_table["measure"] == name) & (pair_table["p_adjusted"] < alpha)]
    for test in TEST_MARKS:  # marks in a fixed order: t, s, h, r
        for a, b in part.loc[part["test"] == test, ["run_a", "run_b"]].itertuples(index=False):
            out[a, b] = out.get((a, b), "") + TEST_MARKS[test]
    return out


#: the corrections by the names of their authors
_CORRECTION_AUTHORS = {
    "holm": "Holm",
    "bonferroni": "Bonferroni",
    "bh": "Benjamini-Hochberg",
    "by": "Benjamini-Yekutieli",
}


def _how(test, correction, trials) -> str:
    if test == "hsd":
        return f"{trials} trials, family-wise"
    corrected = (
        "unadjusted" if correction == "none" else f"{_CORRECTION_AUTHORS[correction]}-corrected"
    )
    return f"{trials} trials, {corrected}" if test == "randomization" else corrected


def _legend(tests, correction, alpha, trials) -> str:
    """What the superscripts mean, naming only the tests that were run."""
    parts = [f"{TEST_MARKS[t]}: {_TEST_NAMES[t]} ({_how(t, correction, trials)})" for t in tests]
    on = []
    pairwise = [_TEST_NAMES[t] for t in tests if t != "hsd"]
    if pairwise:
        on.append(f"the {' and the '.join(pairwise)} on the per-query preferences Δ")
    if "hsd" in tests:
        on.append("the HSD on the per-query win rates")
    return (
        f"Superscripts mark the pairs significantly different at α = {alpha:g}: "
        + "; ".join(parts)
        + f". The tests: {', '.join(on)}."
    )


class Study:
    """What the sections of one report are built from: the inputs, the options, and the
    analyses each computed once, when a section first needs it (a section left out of
    ``--sections`` computes nothing); ``label(run)``: the name a run goes by in the
    report (:func:`short_names`)."""

    def __init__(self, inputs, options, sources, engine, against, labels):
        self.inputs, self.options, self.sources = inputs, options, sources
        self.engine, self.against, self.labels = engine, against, labels
        self.ev = inputs.evidence
        self.tests = [t for t in TESTS if t in options.tests]  # one order of marks: t, s, h, r

    def label(self, run: str) -> str:
        return self.labels.get(run, run)

    @cached_property
    def orders(self):
        return order(self.ev)

    @cached_property
    def taus_frame(self):
        return tau_table(self.ev)

    @cached_property
    def taus(self) -> dict:
        taus = {}
        for a, b, t in self.taus_frame.itertuples(index=False):
            taus[a, b] = taus[b, a] = t
        return taus

    @cached_property
    def pair_table(self):
        o = self.options
        return pair_tests(
            self.ev, self.tests, o.correction, o.trials, o.seed, progress=o.progress,
            jobs=o.jobs, engine=self.engine,
        )  # fmt: skip

    @cached_property
    def means(self):
        return pair_summary(self.ev)

    @cached_property
    def legend(self) -> str:
        o = self.options
        legend = _legend(self.tests, o.correction, o.alpha, o.trials)
        return legend + "".join(
            f" Caution: {caveat}." for caveat in sample_caveats(self.ev, self.tests)
        )


def _summary(study):
    s = study
    return [
        _summary_section(s.inputs, s.orders, s.taus, s.pair_table, s.means, s.legend,
                         s.options, s.label)
    ]  # fmt: skip


def _against(study):
    if study.against is None:
        return []
    return [_against_section(*study.against, study.options.digits, study.label)]


def _baselines(study):
    if not study.ev.metrics:
        return []
    return [_baselines_section(study.ev, study.orders, study.pair_table, study.options,
                               study.label)]  # fmt: skip


def _matrices(study):
    s = study
    return _preference_sections(
        s.ev, s.orders, s.taus, s.pair_table, s.means, s.tests, s.options, s.label
    )


def _discpower(study):
    return [_discpower_section(study.ev, study.pair_table, study.tests, study.options)]


def _tau(study):
    if len(study.ev.measures) < 2:
        return []
    return [_tau_section(study.ev, study.taus, study.taus_frame, study.options.digits)]


def _robustness(study):
    return [_robustness_section(study.inputs, study.options)] if study.options.robustness else []


#: section name (:data:`prefeval.options.SECTIONS`) -> its builder: a :class:`Study` ->
#: the report's sections (none when it does not apply)
SECTION_BUILDERS: dict[str, Callable] = {
    "summary": _summary,
    "table": lambda study: [_table_section(study)],
    "data": lambda study: [_data_section(study.inputs, study.sources, study.label)],
    "against": _against,
    "baselines": _baselines,
    "matrices": _matrices,
    "discpower": _discpower,
    "tau": _tau,
    "agreement": lambda study: [_agreement_section(study.ev)],
    "robustness": _robustness,
}


def build(
    inputs, options: Options, *, sources: dict | None = None, engine=None, against=None,
    abbreviate: bool = False,
) -> Report:  # fmt: skip
    """The report of ``inputs`` (a :class:`prefeval.analysis.evidence.Inputs`) with the
    settings of ``options`` (``tests``, ``correction``, ``alpha``, ``trials``, ``seed``,
    ``robustness``, ``samples``, ``digits``, ``progress``, ``sections``); ``sources``: the
    table paths it was read from (``prefs``, ``metrics``), for the data section;
    ``engine``: where the HSD's trials run (default this process); ``against``: (the table
    of :func:`prefeval.analysis.gate.gate`, its options) for the section "Against the
    reference" after the data, or None for none; ``abbreviate``: runs named by their
    :func:`short_names` when one is longer than :data:`NAME_MAX` (a LaTeX report), with
    the section "Run names" after the data mapping them to the full names."""

    ev = inputs.evidence
    labels = short_names(ev.runs) if abbreviate else {}
    study = Study(inputs, options, sources or {}, engine, against, labels)
    sections = []
    for name in SECTIONS:
        if name in options.sections and name in SECTION_BUILDERS:
            sections += SECTION_BUILDERS[name](study)
        if name == "data" and any(labels[run] != run for run in labels):
            sections.append(_names_section(labels))
    sections.append(_references_section(sections, study.ev.measures, study.tests, options, against))
    legend = study.legend if "pair_table" in study.__dict__ else ""
    if legend and "summary" not in options.sections:  # the legend before the first marks
        for section in sections:
            if any(isinstance(b, Table) and _marked(b) for b in section.blocks):
                section.blocks.insert(0, legend)
                break
    return Report("prefeval report", sections, legend)


def _marked(table: Table) -> bool:
    """Whether a table holds the marks the legend explains (or is the summary, which
    counts them); a table whose caption says what its own marks mean does not."""
    if table.own_marks:
        return False
    return table.label == "summary" or any(c.marks for r in table.rows for c in r)


#: in a LaTeX report, runs go by a short name when one name is longer than this
NAME_MAX = 14


def short_names(runs) -> dict[str, str]:
    """run -> the name it goes by in a LaTeX report: itself when no run name is longer
    than :data:`NAME_MAX` characters; otherwise a name longer than that is cut to its
    first ``NAME_MAX - 1`` characters and ``…``, and the names cut alike are told apart
    by a number after the ``…`` (1, 2, ... or 01, 02, ... in the order of the full names,
    the name cut shorter to make room; runs whose shorter cuts meet are numbered
    together), so that every run has one short name whatever the order of the runs;
    should two runs still go by one name, every run is ``R1``, ``R2``... in the order of
    the names."""
    runs = sorted(set(runs))
    if all(len(run) <= NAME_MAX for run in runs):
        return {run: run for run in runs}
    cut = {run: run if len(run) <= NAME_MAX else run[: NAME_MAX - 1] + "…" for run in runs}
    alike: dict[str, list[str]] = {}
    for run in runs:
        alike.setdefault(cut[run], []).append(run)
    groups = [group for group in alike.values() if len(group) > 1]
    while True:  # groups whose heads (cut shorter for the number) meet are numbered as one
        heads: dict[str, list[str]] = {}
        for group in groups:
            digits = len(str(len(group)))
            for run in group:
                heads.setdefault(run[: max(1, min(len(run), NAME_MAX) - 1 - digits)], []).append(
                    run
                )
        if len(heads) == len(groups):
            break
        groups = [sorted(group) for group in heads.values()]
    for head, group in heads.items():
        digits = len(str(len(group)))
        for i, run in enumerate(group, start=1):
            cut[run] = f"{head}…{i:0{digits}d}"
    if len(set(cut.values())) < len(runs):
        width = len(str(len(runs)))
        return {run: f"R{i:0{width}d}" for i, run in enumerate(runs, start=1)}
    return cut


def _names_section(labels: dict[str, str]) -> Section:
    """The section "Run names": each short name a run goes by and its full name."""
    rows = [
        [Cell(short), Cell(run)] for run, short in sorted(labels.items(), key=lambda item: item[1])
    ]
    caption = (
        f"Run names: the short name each run goes by in the tables and figures (a name "
        f"longer than {NAME_MAX} characters cut short and ended by …, then by a number "
        "where several are cut alike) and its full name."
    )
    return Section("Run names", [Table(caption, ["short", "run"], rows, "names")])


#: the methods each section of the report applies (:data:`METHOD_PAPERS`), by title;
#: a preference measure's subsection applies MC4 (its ordering) and the tests
_SECTION_METHODS = {
    "Summary": ("mc4", "tests"),
    "Runs x measures": ("mc4", "tests"),
    "Baselines": ("baselines", "tests"),
    "Preferences": ("mc4", "tests"),
    "Discriminative power": ("discpower", "tests"),
    "Agreement of orderings": ("mc4", "tau"),
    "Robustness": ("mc4", "tau"),
}


def _test_papers(tests, correction) -> list[str]:
    """The works behind ``tests`` and ``correction`` (which adjusts every test but the
    HSD): the randomized HSD, the randomization test, Holm, Benjamini-Hochberg or
    -Yekutieli."""
    keys = [METHOD_PAPERS[t] for t in tests if t in METHOD_PAPERS]
    if correction in METHOD_PAPERS and any(t != "hsd" for t in tests):
        keys.append(METHOD_PAPERS[correction])
    return keys


def _references_section(sections, measures, tests, options, against) -> Section:
    """The "References" section: the papers of the preference measures, then of the
    methods the report's ``sections`` apply (MC4, Kendall's τ, discriminative power,
    ir-measures, the tests and corrections of ``options``, those of the gate
    ``against``: (table, its options) or None)."""
    keys = [MEASURES[str(m)].paper for m in measures if str(m) in MEASURES]
    for section in sections:
        methods: tuple[str, ...] = _SECTION_METHODS.get(section.title, ("mc4", "tests"))
        if section.level == 2 and section.title not in _SECTION_METHODS:
            methods = ()
        for method in methods:
            if method == "tests":
                keys += _test_papers(tests, options.correction)
            else:
                keys.append(METHOD_PAPERS[method])
    if against is not None:
        keys += _test_papers(against[1].tests, against[1].correction)
    papers = cited(keys)
    intro = "The papers of the measures and of the methods this report applies."
    return Section("References", [intro, References("references", papers)])


def _ranked(orders, name) -> list[str]:
    """The runs of measure ``name`` in the order of ``order`` (rank, then name)."""
    mine = orders[orders["measure"] == name]
    return sorted(
        mine["run"], key=dict(zip(mine["run"], zip(mine["rank"], mine["run"]))).__getitem__
    )


def _beaten(leader, name, pair_table, means, alpha) -> dict[str, set]:
    """test -> the runs that ``leader`` is significantly better than under measure
    ``name``: the pair significant at ``alpha`` and its mean difference for ``leader``."""
    mine = means[means["measure"] == name]
    ahead = set()
    for a, b, mean in mine[["run_a", "run_b", "mean"]].itertuples(index=False):
        if leader in (a, b) and np.isfinite(mean) and not ties.is_zero(np.array([mean]))[0]:
            if (mean > 0) == (a == leader):
                ahead.add(b if a == leader else a)
    out = {}
    part = pair_table[(pair_table["measure"] == name) & (pair_table["p_adjusted"] < alpha)]
    for test, rows in part.groupby("test", sort=False):
        found = set()
        for a, b in rows[["run_a", "run_b"]].itertuples(index=False):
            other = b if a == leader else a if b == leader else None
            if other in ahead:
                found.add(other)
        out[test] = found
    return out


def _summary_section(
    inputs, orders, taus, pair_table, means, legend, options, label=str
) -> Section:
    """The "Summary" section: the data in one sentence; per measure the run ranked first
    (MC4 for a preference, the mean for a baseline), how many runs it is significantly
    better than under each test, and for a preference measure the baseline whose
    ordering agrees least with its own (Kendall's τ-b); then the legend of the marks."""
    ev = inputs.evidence
    tests = [t for t in TESTS if t in options.tests]
    n_runs, n_queries = len(ev.runs), len(ev.query_ids)
    facts = [f"{n_queries} queries", f"{n_runs} runs"]
    if inputs.qrels is not None:
        judged, n_relevant = _judged_counts(inputs, ev.query_ids)
        facts.append(f"{judged:,} judged documents ({n_relevant:,} relevant)")
    facts.append(
        f"{len(ev.preference_measures)} preference measures"
        + (f" and {len(ev.metrics)} baselines" if ev.metrics else "")
    )
    header = ["measure", "ranked first", *[TEST_MARKS[t] for t in tests]]
    if ev.metrics:
        header.append("least agreeing (τ)")
    rows = []
    undefined = False  # a preference measure whose τ with every baseline is undefined
    for name in ev.measures:
        ranked = _ranked(orders, name)
        mine = orders[orders["measure"] == name]
        first = sorted(mine.loc[mine["rank"] == 1, "run"])
        beaten = _beaten(ranked[0], name, pair_table, means, options.alpha)
        cells = [Cell(name, bold=ev.is_preference(name)), Cell(", ".join(map(label, first)))]
        cells += [Cell(f"{len(beaten.get(t, ()))}/{n_runs - 1}", number=True) for t in tests]
        if ev.metrics:
            text = ""
            defined = [b for b in ev.metrics if np.isfinite(taus.get((name, b), np.nan))]
            if ev.is_preference(name) and defined:
                least = min(defined, key=lambda b: (taus[name, b], b))
                text = f"{least} ({_number(taus[name, least], options.digits)})"
            elif ev.is_preference(name):
                text, undefined = "–", True
            cells.append(Cell(text))
        rows.append(cells)
    marks = ", ".join(TEST_MARKS[t] for t in tests)
    caption = (
        "Summary. The data: " + ", ".join(facts) + ". Per measure (preference measures in "
        "bold) the run ranked first (by MC4, or a baseline's mean; ties all named); "
        f"{marks}: of the other {n_runs - 1} runs, how many it is significantly better "
        "than by each test"
        + (
            "; for a preference measure, the baseline whose ordering agrees least with its "
            "own (Kendall's τ-b)"
            + (
                " (–: τ-b is undefined with every baseline: one of the two orderings "
                "ties all runs)."
                if undefined
                else "."
            )
            if ev.metrics
            else "."
        )
    )
    for name in ev.preference_measures:
        caption += _disagreement(
            name, orders[orders["measure"] == name], means[means["measure"] == name],
            options.digits, label,
        )  # fmt: skip
    return Section("Summary", [Table(caption, header, rows, "summary"), legend])


def _disagreement(name, order_rows, pair_rows, digits, label=str) -> str:
    """A sentence (with a leading space) when the run ranked first by MC4 under measure
    ``name`` is not the run with the highest mean preference over the other runs (the
    mean of its row of the matrix), or another run is preferred to it on average (a
    positive mean Δ(other, first)); empty otherwise."""
    ranked, _, matrix = _matrix(order_rows, pair_rows)
    if len(ranked) < 2:
        return ""
    with np.errstate(invalid="ignore"):
        row_means = np.array([np.nanmean(row) if np.isfinite(row).any() else np.nan
                              for row in matrix])  # fmt: skip
    first = 0
    finite = np.isfinite(row_means)
    best = int(np.nanargmax(np.where(finite, row_means, -np.inf))) if finite.any() else 0
    higher = (
        best != first
        and np.isfinite(row_means[first])
        and not ties.is_zero(np.array([row_means[best] - row_means[first]]))[0]
    )
    over = np.where(np.isfinite(matrix[:, first]), matrix[:, first], -np.inf)
    beater = int(np.argmax(over))
    beats = over[beater] > 0 and not ties.is_zero(np.array([over[beater]]))[0]
    if not higher and not beats:
        return ""
    lead = f" {name}: {label(ranked[0])} is ranked first by MC4 (from the queries each run wins)"
    if higher:
        text = (
            f"{lead}, but {label(ranked[best])} has the highest mean preference over the "
            f"other runs ({_number(row_means[best], digits)} against "
            f"{_number(row_means[first], digits)})"
        )
        if beats and beater == best:
            text += f" and is preferred to it by a mean Δ of {_number(over[beater], digits)}"
        elif beats:
            text += (
                f", and {label(ranked[beater])} is preferred to it by a mean Δ of "
                f"{_number(over[beater], digits)}"
            )
        return text + "."
    return (
        f"{lead}, but {label(ranked[beater])} is preferred to it by a mean Δ of "
        f"{_number(over[beater], digits)}."
    )


#: the title of the section of the runs x measures table
TABLE_TITLE = "Runs x measures"
#: the report's runs x measures table lists letters of significance up to this many runs
#: (past it a cell's letters, even as ranges, outgrow a page)
REPORT_LETTERS_MAX = 26


def _table_section(study) -> Section:
    """The section "Runs x measures": the table papers print (``prefeval table``), one row
    per run in the MC4 order of the first preference measure, one column per measure
    (MC4 scores, baselines' means), the best in bold, each run's letter and the letters
    of the runs it is significantly better than by the first of the report's tests (up
    to :data:`REPORT_LETTERS_MAX` runs; past it the values alone)."""
    ev, options = study.ev, study.options
    tested = study.pair_table[study.pair_table["test"] == study.tests[0]]
    frame = runs_table(ev, tested, study.means, alpha=options.alpha, orders=study.orders)
    block = runs_table_block(
        frame,
        trials=options.trials,
        queries=len(ev.query_ids),
        digits=options.digits,
        run_name=study.label,
        letters=len(ev.runs) <= REPORT_LETTERS_MAX,
    )
    return Section(TABLE_TITLE, [block])


def runs_table_block(
    frame,
    *,
    order_by: str | None = None,
    trials: int | None = None,
    queries: int | None = None,
    digits: int = 3,
    label: str = "table",
    run_name=str,
    letters: bool = True,
) -> Table:
    """The runs x measures table of ``frame`` (a table of
    :func:`prefeval.analysis.table.runs_table`) as a :class:`Table`: one row per run in
    the frame's row order, its name first (a LaTeX table split by width repeats it), then
    its letter (without a reference), one column per measure
    (values in ``digits`` decimals; the reference's own preferences as –), the best per
    measure in bold, the marks as superscripts; its caption says what the values and
    marks are (``order_by``: the measure the rows follow, as given to the table, None
    for the first preference measure; ``trials``: of the HSD or randomization test;
    ``queries``: their number, when known; ``run_name``: run -> the name it goes by;
    ``letters``: False to leave out the letters of significance, the caption saying so)."""
    against = "reference" in frame.columns
    letters = letters or against
    measures = list(dict.fromkeys(frame["measure"]))
    runs = list(dict.fromkeys(frame["run"]))
    kinds = dict(zip(frame["measure"], frame["kind"]))
    cells = {(r.run, r.measure): r for r in frame.itertuples(index=False)}
    reference = frame["reference"].iloc[0] if against and len(frame) else None
    where = {} if against else {cells[run, measures[0]].letter: i for i, run in enumerate(runs)}
    rows = []
    for run in runs:
        row = [Cell(run_name(run))]
        if not against and letters:
            row.append(Cell(cells[run, measures[0]].letter))
        for name in measures:
            got = cells[run, name]
            if run == reference and kinds[name] == "preference":
                row.append(Cell("–", number=True))
                continue
            marks = got.marks if against else letter_ranges(got.marks, where) if letters else ""
            row.append(
                Cell(_number(got.value, digits), bold=bool(got.best), marks=marks, number=True)
            )
        rows.append(row)
    header = (["run"] if against or not letters else ["run", "#"]) + measures
    shown = None if reference is None else run_name(reference)
    caption = _table_caption(frame, measures, kinds, order_by, trials, queries, shown, letters)
    return Table(caption, header, rows, label, own_marks=True)


def letter_ranges(marks: str, where: dict[str, int]) -> str:
    """A cell's letters as printed: as they are up to 26 runs (``bdf``); past 26 runs
    (letters separated by commas, ``where`` their rows) three or more letters of
    consecutive rows as ``first-last`` (``b,c,d,e,g`` -> ``b-e,g``)."""
    if "," not in marks and len(where) <= 26:
        return marks
    letters = [x for x in marks.split(",") if x]
    groups: list[list[str]] = []
    for x in letters:
        if groups and where[x] == where[groups[-1][-1]] + 1:
            groups[-1].append(x)
        else:
            groups.append([x])
    return ",".join(f"{g[0]}-{g[-1]}" if len(g) >= 3 else ",".join(g) for g in groups)


def _table_caption(
    frame, measures, kinds, order_by, trials, queries, reference, letters=True
) -> str:
    """What :func:`runs_table_block`'s table shows, in a paper's words."""
    preferences = [m for m in measures if kinds[m] == "preference"]
    over = f" over the {queries} queries" if queries is not None else " over the queries"
    if order_by is None:
        order_by = (preferences or measures or [""])[0]
    elif order_by != GIVEN:
        order_by = canonical_measure(order_by, measures)
    if order_by == GIVEN:
        rows = "runs in the order given"
    elif kinds.get(order_by) == "preference":
        rows = f"runs in the MC4 order of {order_by}"
    else:
        rows = f"runs in the order of their mean {order_by}"
    parts = []
    if preferences and reference is None:
        parts.append(
            "per preference measure each run's MC4 score (its share of the stationary "
            "distribution of the Markov chain over the per-query rankings; the scores sum "
            "to 1)"
        )
    elif preferences:
        parts.append(
            f"per preference measure each run's mean preference Δ(run, {reference})"
            f"{over} (positive: the run is preferred to {reference}; – for {reference} "
            "itself)"
        )
    if len(preferences) < len(measures):
        parts.append(f"per baseline its mean{over}")
    test = frame["test"].iloc[0] if len(frame) else ""
    correction = frame["correction"].iloc[0] if len(frame) else ""
    alpha = float(frame["alpha"].iloc[0]) if len(frame) else 0.05
    how = _TABLE_TESTS.get(test, test)
    if test in ("hsd", "randomization") and trials is not None:
        how += f", {trials} trials"
    if test == "hsd":
        corrected = "family-wise over all runs"
    elif reference is None:
        corrected = (
            f"{_CORRECTION_NAMES.get(correction, correction)} over all pairs of runs on the measure"
        )
    else:
        corrected = (
            f"{_CORRECTION_NAMES.get(correction, correction)} over the runs compared with "
            f"{reference} on the measure"
        )
    if reference is None and not letters:
        runs = len(frame["run"].unique())
        return (
            "Runs x measures: "
            + "; ".join(parts)
            + f"; {rows}; the best run of each measure in bold. With {runs} runs the letters "
            "of the runs each run is significantly better than are left out (they would "
            "not fit a page); the matrices mark the significant pairs."
        )
    if reference is None:
        marks = (
            "Each run has a letter (#); a superscript lists the letters of the runs it is "
            "significantly better than on that measure"
            + ("; b-e stands for the runs from b to e" if len(frame["run"].unique()) > 26 else "")
        )
    else:
        marks = (
            f"Superscript {BETTER}: significantly better than {reference} on that measure; "
            f"{WORSE}: significantly worse"
        )
    return (
        "Runs x measures: "
        + "; ".join(parts)
        + f"; {rows}; the best run of each measure in bold. {marks} ({how}, {corrected}, "
        f"α = {alpha:g})."
    )


#: the tests as the table's caption names them
_TABLE_TESTS = {
    "ttest": "two-sided t-test on the per-query differences",
    "sign": "two-sided sign test",
    "hsd": "randomized Tukey HSD",
    "randomization": "two-sided paired randomization test",
}


def runs_table_tex(frame, **given) -> str:
    """The runs x measures table of ``frame`` as a LaTeX table (booktabs) to ``\\input``
    into a paper (:func:`runs_table_block`'s, ``given`` its keywords)."""
    block = runs_table_block(frame, **given)
    head = [
        "% prefeval table: \\input{} this file; it needs \\usepackage{booktabs,graphicx}.",
        "",
    ]
    return "\n".join(head + _tex_table(block, "")).rstrip("\n") + "\n"


def _judged_counts(inputs, query_ids) -> tuple[int, int]:
    """The judged documents of the queries ``query_ids`` and how many are relevant at the
    inputs' level, counted by Arrow (a million queries: no Python set, no copy of the
    judgments)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    evaluated = pa.array(list(query_ids), pa.string())
    general = inputs.qrels.general()
    judged = pc.sum(pc.is_in(pa.array(general["query_id"], pa.string()), value_set=evaluated))
    relevant = inputs.qrels.relevant(inputs.relevance_level)
    at = pc.index_in(evaluated, value_set=pa.array(relevant.query_ids, pa.string()))
    at = found_codes(at)
    n_relevant = int(relevant.sizes()[at[at >= 0]].sum())
    return int(judged.as_py() or 0), n_relevant


#: the gate's tests, as its section names them
_GATE_TESTS = {
    "ttest": "one-sided paired t-test",
    "sign": "one-sided sign test",
    "randomization": "one-sided randomization (sign-flip) test",
}
_CORRECTION_NAMES = {
    "holm": "Holm's correction",
    "bonferroni": "Bonferroni's correction",
    "bh": "the Benjamini-Hochberg correction",
    "by": "the Benjamini-Yekutieli correction",
    "none": "no correction",
}


def _p_value(p) -> str:
    """A p-value in 3 decimals, or below 0.001 in scientific notation; empty for NaN."""
    if p is None or not np.isfinite(p):
        return ""
    return f"{p:.1e}" if p < 1e-3 else f"{p:.3f}"


def _against_section(table, gate: Options, digits: int, label=str) -> Section:
    """The section "Against the reference": the gate's table (``prefeval gate --against
    REF``): per measure and candidate the mean difference with REF, its interval, wins,
    ties and losses, the regression test's p-values and the verdict (a regression in
    bold)."""
    reference = label(gate.against[0])
    level = f"{100 * (1 - gate.alpha):g}%"
    rows = []
    for row in table.itertuples(index=False):
        rows.append(
            [
                Cell(row.measure),
                Cell(label(row.candidate)),
                Cell(str(int(row.queries)), number=True),
                Cell(_number(row.mean, digits), number=True),
                Cell(_number(row.ci_low, digits), number=True),
                Cell(_number(row.ci_high, digits), number=True),
                Cell(f"{int(row.wins)}/{int(row.ties)}/{int(row.losses)}", number=True),
                Cell(_p_value(row.p_value), number=True),
                Cell(_p_value(row.p_adjusted), number=True),
                Cell(row.verdict, bold=row.verdict == "regression"),
            ]
        )
    margin = f" by more than {gate.margin:g}" if gate.margin else ""
    interval = "t interval" if gate.ci == "t" else "percentile bootstrap interval"
    caption = (
        f"Against the reference {reference}: per measure and candidate run, the mean "
        f"per-query difference of the candidate with {reference} over the queries where "
        "it is defined (Δ(candidate, reference) for a preference, a baseline's difference "
        "of values, reversed where lower is better: negative favours the reference), its "
        f"two-sided {level} {interval} (ci), the queries the candidate wins, ties and "
        "loses, the "
        f"{_GATE_TESTS[gate.tests[0]]}'s p (H1: the candidate is worse{margin}) and that "
        f"p with {_CORRECTION_NAMES[gate.correction]} over every (candidate, measure), and "
        f"the verdict at α = {gate.alpha:g}: regression (in "
        "bold), improvement, no difference, or inconclusive with fewer than "
        f"{gate.min_queries} queries (not tested)."
    )
    header = [
        "measure", "candidate", "queries", "mean", "ci low", "ci high", "w/t/l", "p",
        "p adjusted", "verdict",
    ]  # fmt: skip
    return Section("Against the reference", [Table(caption, header, rows, "against")])


def _baselines_section(ev, orders, pair_table, options, label=str) -> Section:
    """The "Baselines" section: each baseline's mean per run (as ``order`` and ``metrics``
    compute it), runs in the order of the first baseline, the best per baseline in bold,
    marked with the tests finding a run significantly different from that best run."""
    digits, alpha = options.digits, options.alpha
    first = ev.metrics and next(iter(ev.metrics))
    runs = _ranked(orders, first)
    score: dict[str, dict] = {}  # baseline -> run -> its mean
    best: dict[str, set] = {}  # baseline -> its best runs
    marks: dict[str, dict[str, str]] = {}  # baseline -> run -> the tests' marks
    for base in ev.metrics:
        mine = orders[orders["measure"] == base]
        score[base] = dict(zip(mine["run"], mine["score"]))
        best[base] = set(mine.loc[mine["rank"] == 1, "run"])
        top = _ranked(orders, base)[0]
        marks[base] = {}
        part = pair_table[(pair_table["measure"] == base) & (pair_table["p_adjusted"] < alpha)]
        for test in TEST_MARKS:
            for a, b in part.loc[part["test"] == test, ["run_a", "run_b"]].itertuples(index=False):
                if top in (a, b):
                    other = b if a == top else a
                    marks[base][other] = marks[base].get(other, "") + TEST_MARKS[test]
    rows = [
        [Cell(label(run))]
        + [
            Cell(
                _number(score[base][run], digits),
                bold=run in best[base],
                marks=marks[base].get(run, ""),
                number=True,
            )
            for base in ev.metrics
        ]
        for run in runs
    ]
    caption = (
        f"Baselines: the mean of each baseline per run over the {len(ev.query_ids)} "
        f"queries, runs by their {first}; the best run "
        "per baseline in bold; superscripts: the tests finding the run significantly "
        "different from that best run."
    )
    table = Table(caption, ["run", *ev.metrics], rows, "baselines")
    return Section("Baselines", [table])


def _preference_sections(
    ev, orders, taus, pair_table, means, tests, options, label=str
) -> list[Section]:
    """The "Preferences" section and, per preference measure, its subsection: up to
    :data:`MATRIX_MAX` runs the runs x runs matrix of mean preferences with significance
    marks and its orderings; past it a heat map of the matrix (the numbers in a CSV file
    beside the report) and the orderings folded away."""
    alpha, digits = options.alpha, options.digits
    many = len(ev.runs) > MATRIX_MAX
    intro = (
        "Per preference measure: the runs x runs matrix of the mean preference "
        "Δ(row, column) over the queries (positive: the row's run is preferred), "
        "rows and columns in MC4 order"
        + (
            f", drawn as a heat map (more than {MATRIX_MAX} runs), its numbers in a CSV "
            "file beside the report; then the rank of each run under MC4 and under each "
            "baseline (folded)."
            if many
            else " with the first run in bold; then the rank of each run under MC4 and "
            "under each baseline."
        )
    )
    sections = [Section("Preferences", [intro])]
    for name in ev.preference_measures:
        order_rows = orders[orders["measure"] == name]
        section = Section(name, level=3)
        significance = _significance(pair_table, name, alpha)
        if many:
            section.blocks += _heatmap_blocks(
                name, order_rows, means[means["measure"] == name], significance, len(tests),
                label,
            )  # fmt: skip
        else:
            section.blocks.append(
                _matrix_table(
                    name,
                    order_rows,
                    means[means["measure"] == name],
                    significance,
                    digits,
                    label,
                )  # fmt: skip
            )
        orderings = _orderings_table(ev, name, orders, taus, digits, label)
        if many:
            orderings.collapsed = True
            orderings.formats = ("html", "md")  # a paper takes the CSV file's ranks
        section.blocks.append(orderings)
        sections.append(section)
    return sections


def _matrix(order_rows, pair_rows) -> tuple[list[str], dict, np.ndarray]:
    """(the runs in MC4 order (ties by name), run -> rank, the runs x runs matrix of mean
    Δ(row, column) in that order, NaN on the diagonal)."""
    rank = dict(zip(order_rows["run"], order_rows["rank"]))
    ranked = sorted(rank, key=lambda run: (rank[run], run))
    where = {run: i for i, run in enumerate(ranked)}
    matrix = np.full((len(ranked), len(ranked)), np.nan)
    for a, b, mean in pair_rows[["run_a", "run_b", "mean"]].itertuples(index=False):
        mean = ties.snap_zero(np.array([mean]))[0]
        matrix[where[a], where[b]] = mean
        matrix[where[b], where[a]] = -mean if np.isfinite(mean) and mean != 0 else mean
    return ranked, rank, matrix


def matrix_csv(ranked, rank, matrix) -> bytes:
    """The CSV file of a preference matrix: a header ``run,mc4_rank,<runs>``, then one
    row per run in MC4 order: its name, its rank and its mean Δ(row, column) over each
    column's run, at full precision (Python's shortest round-trip repr; the diagonal and
    undefined means empty)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["run", "mc4_rank", *ranked])
    for i, run in enumerate(ranked):
        values = ["" if not np.isfinite(v) else repr(float(v)) for v in matrix[i]]
        writer.writerow([run, rank[run], *values])
    return out.getvalue().encode("utf-8")


def _heatmap_blocks(name, order_rows, pair_rows, significance, n_tests, label=str) -> list:
    """The heat map of a measure's matrix and its CSV file."""
    ranked, rank, matrix = _matrix(order_rows, pair_rows)
    strong = np.zeros(matrix.shape, dtype=bool)
    where = {run: i for i, run in enumerate(ranked)}
    for (a, b), letters in significance.items():
        strong[where[a], where[b]] = strong[where[b], where[a]] = bool(letters)
    which = "by at least one test" if n_tests > 1 else "by the test"
    caption = (
        f"{name}: mean preference Δ(row, column) over the queries, runs in MC4 order "
        "(ties by name); red: the row's run is preferred, blue: the column's; a dot: "
        f"the pair is significantly different {which}."
    )
    csv_name = f"matrix-{name}"
    return [
        Figure(
            f"heatmap-{name}",
            caption,
            lambda width: preference_heatmap_figure(
                matrix, [label(run) for run in ranked], strong, width=width
            ),
        ),
        Download(
            csv_name,
            f"{name}: the whole matrix of means (CSV: run, mc4_rank, then one column per "
            "run, in MC4 order)",
            matrix_csv(ranked, rank, matrix),
        ),
    ]


def _discpower_section(ev, pair_table, tests, options) -> Section:
    """The "Discriminative power" section: the share of significant run pairs per
    measure and test (the highest per test in bold), and Sakai's curves."""
    correction, alpha, trials = options.correction, options.alpha, options.trials
    power = discriminative_power(pair_table, alpha)
    header = ["measure", *[_TEST_NAMES[t] for t in tests]]
    rows = []
    # the highest share per test, when some pair is significant at all
    best = {t: power.loc[power["test"] == t, "percent"].max() or np.nan for t in tests}
    for name in ev.measures:
        cells = [Cell(name)]
        for t in tests:
            row = power[(power["measure"] == name) & (power["test"] == t)]
            if row.empty:
                cells.append(Cell("", number=True))
                continue
            percent = float(row["percent"].iloc[0])
            counted = f"{int(row['significant'].iloc[0])}/{int(row['pairs'].iloc[0])}"
            cells.append(Cell(f"{percent:.1f}% ({counted})", bold=percent == best[t], number=True))
        rows.append(cells)
    how = "; ".join(f"{_TEST_NAMES[t]} {_how(t, correction, trials)}" for t in tests)
    return Section(
        "Discriminative power",
        [
            Table(
                f"Discriminative power: share of run pairs significantly different at "
                f"α = {alpha:g} ({how}); the highest per test in bold.",
                header,
                rows,
                "discpower",
            ),
            Figure(
                "discpower",
                "Discriminative-power curves (Sakai): each measure's adjusted p-values in "
                "ascending order, one row of panels per test and one column per family of "
                "measures (the other families in grey); a curve crosses the α line at its "
                "number of significant pairs. The p axis is logarithmic: p-values below "
                "0.0001, p = 0 included, lie on its floor.",
                lambda width: discpower_panels_figure(pair_table, alpha=alpha, width=width),
                wide=True,
            ),
        ],
    )


def _tau_section(ev, taus, taus_frame, digits) -> Section:
    """The "Agreement of orderings" section: Kendall's τ-b between the run orderings of
    every two measures, as a heat map; in LaTeX as the table of its lower triangle
    instead when that fits a column of a two-column paper (the heat map otherwise)."""
    names = ev.measures
    tau_rows = [
        [Cell(a)] + [Cell(_number(taus[a, b], digits), number=True) for b in names[:i]]
        + [Cell("", number=True)] * (len(names) - 1 - i)
        for i, a in enumerate(names[1:], start=1)
    ]  # fmt: skip
    table = Table(
        "Kendall's τ-b between the run orderings of every two measures (preferences by "
        "MC4, baselines by their mean).",
        ["", *names[:-1]],
        tau_rows,
        "tau",
        formats=("tex",),  # the heat map shows the values elsewhere
    )
    groups, wide, _ = _tex_column_groups(table, rotated=True)
    fits = len(groups) == 1 and not wide
    figure = Figure(
        "tau",
        "Kendall's τ-b between the run orderings of every two measures "
        "(preferences by MC4, baselines by their mean).",
        lambda width: tau_heatmap_figure(taus_frame, width=width),
        formats=("html", "md") if fits else ("html", "md", "tex"),
    )
    return Section("Agreement of orderings", [figure, table] if fits else [figure])


def _agreement_section(ev) -> Section:
    """The "Agreement and ties" section: the sign agreement of each preference measure
    with each baseline (when there are both), and each measure's share of ties."""
    agreement = agreement_table(ev)
    tie_shares = ties_table(ev)
    blocks = []
    if ev.metrics and ev.preference_measures:
        rows = []
        for name in ev.preference_measures:
            part = agreement[agreement["measure"] == name]
            rows.append(
                [Cell(name)]
                + [Cell(_percent(s), number=True) for s in part["agreement"].to_numpy(dtype=float)]
            )
        blocks.append(
            Table(
                "Agreement: among the (query, run pair) comparisons a baseline separates, "
                "the share where the preference has the same sign (a tied preference "
                "disagrees).",
                ["measure", *ev.metrics],
                rows,
                "agreement",
            )
        )
    blocks.append(
        Table(
            "Ties: share of (query, run pair) comparisons where the measure does not "
            "separate the runs.",
            ["measure", "ties", "comparisons"],
            [
                [Cell(m), Cell(_percent(t), number=True), Cell(str(c), number=True)]
                for m, t, c in tie_shares.itertuples(index=False)
            ],
            "ties",
        )
    )
    return Section("Agreement and ties", blocks)


def _robustness_section(inputs, options) -> Section:
    """The "Robustness" section: Kendall's τ of the orderings on samples of fewer
    queries (and of fewer relevance labels, when the runs are known) with the full one."""
    samples = options.samples
    ev = inputs.evidence
    n = len(ev.query_ids)
    sizes = sorted({max(2, round(share * n)) for share in ROBUSTNESS_QUERY_SHARES} - {n})
    sizes = [s for s in sizes if s < n]
    labels = ROBUSTNESS_LABELS if inputs.has_positions() else ()
    kinds = [
        *(["fewer queries"] if sizes else []),
        *(["fewer relevance labels"] if labels else []),
    ]
    block: str | Figure
    if not kinds:
        block = "Too few queries to sample fewer (and no runs to sample labels from)."
    else:
        table = run_robustness(
            inputs, queries=sizes, labels=labels, samples=samples, seed=options.seed,
            progress=options.progress,
        )  # fmt: skip
        block = Figure(
            "robustness",
            f"Robustness to {' or '.join(kinds)}: Kendall's τ between the ordering on "
            f"{samples} sample{'' if samples == 1 else 's'} and the full ordering, "
            "mean ± standard deviation.",
            lambda width: robustness_figure(table, width=width),
            wide=len(ev.measures) > OVERLAY_MAX,
        )
    return Section("Robustness", [block])


# ---------------------------------------------------------------- rendering

_LATEX_SPECIALS = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
    "–": r"\textendash{}",
    "`": r"\textasciigrave{}",
    "≥": r"$\geq$",
    "τ": r"$\tau$",
    "Δ": r"$\Delta$",
    "α": r"$\alpha$",
    "±": r"$\pm$",
    "…": r"\ldots{}",
}
#: any of them, or a character outside printable ASCII
_LATEX_PATTERN = re.compile("|".join(re.escape(k) for k in _LATEX_SPECIALS) + "|[^ -~]")
#: the non-ASCII characters pdflatex typesets without packages, besides the letters of
#: Latin-1 and Latin Extended-A that are an ASCII letter with one accent it knows
#: (:func:`_latex_char`)
_LATEX_TEXT = frozenset("\u00a0¡¢£¤¥¦§¨©ª¬®¯°±²³´µ¶·¸¹º¼½¾¿×÷ßæÆøØœŒŁłı")
#: those accents (combining grave, acute, circumflex, tilde, macron, breve, dot above,
#: diaeresis, ring, double acute, caron, cedilla)
_LATEX_ACCENTS = frozenset(
    "\u0300\u0301\u0302\u0303\u0304\u0306\u0307\u0308\u030a\u030b\u030c\u0327"
)
#: the characters that can start Markdown markup inside a line (emphasis, code, links,
#: HTML and entities, tables, GFM strikethrough, pandoc math); CommonMark lets a backslash
#: escape any ASCII punctuation
_MD_SPECIALS = re.compile(r"([\\`*_\[\]<>|#!&~$])")
#: the control characters (C0, DEL, C1), which would end or break a line of a table
_MD_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f]")


def latex_escape(text: str) -> str:
    """``text`` as LaTeX (text mode): its ten special characters and the few non-ASCII
    symbols the report uses replaced, and every character pdflatex cannot typeset
    without packages (a control character, CJK, most of Unicode: :func:`_latex_char`)
    written as its code point, ``U+65E5`` in typewriter type, so that any name
    compiles."""
    text = _LATEX_PATTERN.sub(lambda m: _latex_char(m.group(0)), text)
    return re.sub("-(?=-)", "-{}", text)  # "--" and "---" are dashes in LaTeX


def _latex_char(char: str) -> str:
    """One character of :data:`_LATEX_PATTERN` as LaTeX."""
    if char in _LATEX_SPECIALS:
        return _LATEX_SPECIALS[char]
    if char in _LATEX_TEXT:
        return char
    if "\u00c0" <= char <= "\u017f":
        decomposed = unicodedata.normalize("NFD", char)
        letter, accents = decomposed[0], decomposed[1:]
        if letter.isascii() and letter.isalpha() and len(accents) == 1:
            if accents[0] in _LATEX_ACCENTS:
                return char
    return f"\\texttt{{U+{ord(char):04X}}}"


def markdown_escape(text: str) -> str:
    """``text`` as literal Markdown within a line: the characters that can start markup
    backslash-escaped, control characters (C0, DEL, C1: newline, CR, tab, NUL...) as spaces."""
    return _MD_SPECIALS.sub(r"\\\1", _MD_CONTROLS.sub(" ", text))


#: the figures a report may have (``OUT-<name>.svg|pdf`` beside a .md or .tex report)
FIGURE_NAMES = (
    "discpower",
    "tau",
    "robustness",
    *(f"heatmap-{name}" for name in MEASURES),
)
#: the data files a report may have beside it, in every format (``OUT-<name>.csv``)
DOWNLOAD_NAMES = tuple(f"matrix-{name}" for name in MEASURES)


def figure_path(output, name: str, ext: str) -> str:
    r"""The path of figure (or data file) ``name`` of the report ``output``, beside it:
    ``OUT-<name>.<ext>``, ``name`` made a safe file-name part
    (:func:`~prefeval.io.writers.file_name_part`: a measure's name from a preference table
    is untrusted); for a LaTeX report (pdf) the characters of OUT's file name that
    ``\includegraphics`` cannot take (anything but letters, digits, ``.``, ``_``, ``-``)
    become ``_``, and ``name`` keeps only those."""
    base = os.path.basename(os.path.splitext(os.fspath(output))[0])
    chars = FILE_NAME_CHARS
    if ext in ("pdf", "bib"):
        base = re.sub(r"[^A-Za-z0-9._-]", "_", base)
        chars = TEX_FILE_NAME_CHARS
    return file_beside(output, f"{base}-{file_name_part(name, chars)}.{ext}")


def output_paths(output) -> list[str]:
    """Every path a report written to ``output`` may write: its figures, its CSV files,
    then itself."""
    fmt = report_format(output)
    ext = {"html": None, "md": "svg", "tex": "pdf"}[fmt]
    figures = [figure_path(output, name, ext) for name in FIGURE_NAMES] if ext else []
    downloads = [figure_path(output, name, "csv") for name in DOWNLOAD_NAMES]
    bib = [figure_path(output, "references", "bib")] if fmt == "tex" else []
    return [*figures, *downloads, *bib, os.fspath(output)]


def check_targets(output, inputs, paths=None) -> None:
    """ValueError when the report or one of its side files would be written over one of
    the ``inputs`` (paths; ``-`` and paths that do not exist are skipped); ``paths``: the
    files the report writes (default :func:`output_paths`, whose side files are those of
    the built-in measures; :func:`write` checks the ones it renders)."""

    given = [os.fspath(p) for p in inputs if p is not None and os.fspath(p) != "-"]
    for path in output_paths(output) if paths is None else paths:
        target = output_target(path)
        if not os.path.exists(target):
            continue
        for source in given:
            if os.path.exists(source) and os.path.samefile(source, target):
                kind = "file" if path.endswith(".csv") else "figure"
                what = "the report" if path == os.fspath(output) else f"its {kind} {path}"
                raise ValueError(f"{output}: {what} would overwrite the input {source}")


def render(report: Report, output) -> dict[str, bytes]:
    """path -> bytes of every file of the report written to ``output`` (the report
    itself last)."""

    fmt = report_format(output)
    with bars.counted(_figures(report), desc="figures", unit="figure") as drawn:
        return _render(report, output, fmt, drawn)


def _figures(report: Report) -> int:
    """How many figures ``report`` draws (the progress bar's stage "figures")."""
    return sum(isinstance(b, Figure) for section in report.sections for b in section.blocks)


def _render(report: Report, output, fmt: str, drawn: Callable) -> dict[str, bytes]:
    """:func:`render` in format ``fmt``, calling ``drawn()`` after each figure."""
    ext = {"html": None, "md": "svg", "tex": "pdf"}[fmt]
    files: dict[str, bytes] = {}
    paths: dict[str, str] = {}  # figure or download name -> its file name, beside the report
    named: dict[str, str] = {}  # path -> the figure or download name it was made from
    for section in report.sections:
        for block in section.blocks:
            if isinstance(block, References):
                if fmt == "tex":
                    path = figure_path(output, block.name, "bib")
                    files[path] = bibliography(p.key for p in block.papers).encode("utf-8")
                    paths[block.name] = os.path.basename(path)
                continue
            if isinstance(block, Download):
                path = figure_path(output, block.name, "csv")
            elif isinstance(block, Figure) and ext and fmt in block.formats:
                path = figure_path(output, block.name, ext)
            else:
                continue
            if named.setdefault(path, block.name) != block.name:
                raise ValueError(
                    f"{path}: both {named[path]!r} and {block.name!r} would be written here"
                )
            if isinstance(block, Download):
                files[path] = block.data
            else:
                assert ext is not None  # a figure is written beside a .md or .tex report only
                width = None if fmt == "md" else TEXT_WIDTH if block.wide else COLUMN_WIDTH
                files[path] = figure_bytes(block.draw(width), ext)
                drawn()
            paths[block.name] = os.path.basename(path)
    if fmt == "html":
        files[os.fspath(output)] = _html(report, paths, drawn).encode("utf-8")
        return files
    writer = {"md": _markdown, "tex": _latex}[fmt]
    files[os.fspath(output)] = writer(report, paths).encode("utf-8")
    return files


class InlineReport:
    """A report written nowhere, shown where it is displayed: :attr:`html` is the page a
    ``.html`` report holds (self-contained, figures as inline SVG), the CSV files of the
    whole matrices inline too (links to ``data:`` URLs).  Jupyter displays it
    (``_repr_html_``) in a frame of its own (``<iframe srcdoc>``), so that the page's
    style sheet does not restyle the notebook."""

    def __init__(self, report: Report):
        self.title = report.title
        with bars.counted(_figures(report), desc="figures", unit="figure") as drawn:
            self.html = _html(report, None, drawn)

    def _repr_html_(self) -> str:
        return (
            f'<iframe title="{html.escape(self.title)}" srcdoc="{html.escape(self.html)}" '
            'style="width:100%;height:80vh;border:1px solid #ddd"></iframe>'
        )

    def __repr__(self) -> str:
        return f"<InlineReport {self.title!r}: {len(self.html)} characters of HTML>"


def write(report: Report, output, inputs=()) -> list[str]:
    """Write the report's files (figures and CSV files first, then the report), each
    atomically, then remove the files an earlier report written to ``output`` left
    beside it that this one does not write (:func:`earlier_files`); returns the paths
    written.  ValueError, before anything is written, when one of them would be written
    over one of the ``inputs`` (paths, as :func:`check_targets`): a side file's name
    holds a measure's name, known only now."""

    files = render(report, output)
    check_targets(output, inputs, files)
    earlier = _earlier_report(output)
    for path, data in files.items():
        with atomic_output(path) as handle:
            handle.write(data)
    for path in earlier_files(output, files, earlier):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as error:
            reason = error.strerror or str(error)
            raise OutputError(
                path, f"a file of an earlier report cannot be removed: {reason}"
            ) from None
    return list(files)


#: the side files of a report by kind: the names after ``OUT-`` (before the extension),
#: and how the file begins or ends (what prefeval writes there: the matrix's CSV header,
#: matplotlib's metadata in a figure)
_SIDE_NAMES = {
    "csv": re.compile(r"matrix-.+", re.S),
    "figure": re.compile(r"(?:discpower|tau|robustness|heatmap-.+)", re.S),
}
_SIDE_MARKS = {"csv": (b"run,mc4_rank,", None), "figure": (None, b"Matplotlib")}
_SIDE_PEEK = 1 << 14


def _earlier_report(output) -> bytes | None:
    """The bytes of the report at ``output`` before it is replaced, or None when there is
    none or it is not a regular file that can be read."""
    try:
        with open(output, "rb", opener=lambda p, flags: os.open(p, flags | os.O_NONBLOCK)) as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None
            return f.read()
    except OSError:
        return None


def _references(fmt: str, name: str) -> list[str]:
    r"""How a report in format ``fmt`` names its side file ``name`` (a file name beside
    it): an HTML link's ``href``, a Markdown link or image target, LaTeX's
    ``\includegraphics`` argument (with or without the extension) or the comment line
    of a CSV file."""
    if fmt == "html":
        return [f'href="{_html_href(name)}"']
    if fmt == "md":
        return [f"(<{_md_target(name)}>)"]
    return [f"{{{name}}}", f"{{{os.path.splitext(name)[0]}}}", f"% {name}: "]


def earlier_files(output, written, earlier: bytes | None) -> list[str]:
    r"""The files beside ``output`` that a report written to it writes (``OUT-matrix-*.csv``
    in every format, ``OUT-<figure>.svg`` beside a .md report, ``.pdf`` beside a .tex one)
    and that are not among ``written``: those of an earlier report (more runs, other
    measures, --robustness), which would be read as this one's.  ``earlier``: the bytes
    of the earlier report at ``output`` (None: none), the list of its side files; only
    the files it names (a link, an image, ``\includegraphics``, a CSV file's comment)
    and that hold what prefeval writes there are listed: a CSV file starting with the
    matrix's header, a figure with matplotlib's metadata.  A file of a report written to
    another path (``OUT.html`` beside ``OUT.md``, ``OUT-matrix-x.html`` beside
    ``OUT.html``) or of the user is never listed."""
    if not earlier:
        return []
    fmt = report_format(output)
    kinds = {
        "csv": "csv",
        **({"figure": {"md": "svg", "tex": "pdf"}[fmt]} if fmt != "html" else {}),
    }
    written = {os.path.normpath(p) for p in written}
    folder = os.path.dirname(os.fspath(output))
    try:
        names = sorted(os.listdir(folder or "."))
    except OSError:
        return []
    found = []
    for kind, ext in kinds.items():
        prefix = os.path.basename(figure_path(output, "x", ext))[: -len(f"x.{ext}")]
        head, tail = _SIDE_MARKS[kind]
        for name in names:
            stem = name[len(prefix) : -len(ext) - 1]
            if not (
                name.startswith(prefix)
                and name.endswith(f".{ext}")
                and _SIDE_NAMES[kind].fullmatch(stem)
            ):
                continue
            path = os.path.join(folder, name)
            if os.path.normpath(path) in written or not any(
                ref.encode("utf-8", "surrogateescape") in earlier for ref in _references(fmt, name)
            ):
                continue
            if not _holds(path, head, tail):
                continue
            found.append(path)
    return found


def _holds(path: str, head: bytes | None, tail: bytes | None) -> bool:
    """Whether the regular file ``path`` starts with ``head`` or holds ``tail`` in its
    first or last :data:`_SIDE_PEEK` bytes; False when it cannot be read."""
    try:
        with open(
            path, "rb", opener=lambda p, flags: os.open(p, flags | os.O_NONBLOCK | os.O_NOFOLLOW)
        ) as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return False
            first = handle.read(_SIDE_PEEK)
            if head is not None:
                return first.startswith(head)
            assert tail is not None  # each kind of _SIDE_MARKS has a head or a tail
            handle.seek(max(0, os.fstat(handle.fileno()).st_size - _SIDE_PEEK))
            return tail in first or tail in handle.read(_SIDE_PEEK)
    except OSError:
        return False


_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;max-width:84rem;margin:2rem auto;
padding:0 1rem;color:#1b1b1b;line-height:1.45}
h1{font-size:1.6rem}h3{font-size:1.05rem;margin-top:1.5rem}
h2{font-size:1.25rem;border-bottom:1px solid #ddd;padding-bottom:.2rem;
margin-top:2rem}
div.table{overflow-x:auto;margin:.8rem 0;max-width:100%}
table{border-collapse:collapse;font-size:.9rem}
caption{caption-side:top;text-align:left;color:#444;padding-bottom:.3rem;max-width:60rem}
th,td{padding:.2rem .6rem;border-bottom:1px solid #e4e4e4;text-align:left;white-space:nowrap}
thead th{white-space:normal;overflow-wrap:anywhere;max-width:8rem;vertical-align:bottom}
table#data td{white-space:normal}
tbody th,thead th:first-child{position:sticky;left:0;background:#fff}
thead th{border-bottom:2px solid #999}tbody th{font-weight:normal}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
sup{color:#a33;font-size:.7em;margin-left:.1em}
figure{margin:1rem 0}figcaption{color:#444;font-size:.9rem;max-width:60rem}
figure img{max-width:100%;height:auto}
p.legend{color:#444;font-size:.9rem;max-width:60rem}
details{margin:.8rem 0}summary{cursor:pointer;color:#444;font-size:.9rem}
@media print{body{max-width:none;margin:0;font-size:9pt}div.table{overflow:visible}
table{font-size:7.5pt}th,td{padding:.1rem .3rem}h2,h3{break-after:avoid}
figure,tr{break-inside:avoid}tbody th,thead th:first-child{position:static}}
"""


def _html_cell(cell: Cell, tag: str = "td") -> str:
    text = html.escape(cell.text)
    if cell.bold:
        text = f"<strong>{text}</strong>"
    if cell.marks:
        text += f"<sup>{html.escape(cell.marks)}</sup>"
    css = ' class="num"' if cell.number else ""
    return f"<{tag}{css}>{text}</{tag}>"


def _html_table(block: Table) -> list[str]:
    out = []
    if block.collapsed:
        out.append(f"<details><summary>{html.escape(block.caption)}</summary>")
    out.append(f'<div class="table"><table id="{html.escape(block.label)}">')
    if block.caption:
        out.append(f"<caption>{html.escape(block.caption)}</caption>")
    if any(block.header):
        numeric = [i > 0 and any(r[i].number for r in block.rows) for i in range(len(block.header))]
        cells = "".join(
            ('<th class="num">' if n else "<th>") + f"{html.escape(h)}</th>"
            for h, n in zip(block.header, numeric)
        )
        out.append(f"<thead><tr>{cells}</tr></thead>")
    out.append("<tbody>")
    for row in block.rows:
        first = _html_cell(row[0], "th")
        out.append("<tr>" + first + "".join(_html_cell(c) for c in row[1:]) + "</tr>")
    out.append("</tbody></table></div>")
    if block.collapsed:
        out.append("</details>")
    return out


def _html_href(name: str) -> str:
    """The ``href`` of a file ``name`` beside an HTML report (quoted, then escaped)."""
    return html.escape(urllib.parse.quote(name))


def _html(report: Report, files: dict[str, str] | None, drawn: Callable = lambda: None) -> str:
    """The HTML page of ``report``, figures inline; ``files``: figure or download name ->
    its file name beside the report, None for a page written nowhere
    (:class:`InlineReport`: the CSV files inline too, as ``data:`` links); ``drawn()``
    is called after each figure."""

    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(report.title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(report.title)}</h1>",
    ]
    for section in report.sections:
        level = section.level
        out.append(f"<h{level}>{html.escape(section.title)}</h{level}>")
        for block in section.blocks:
            if isinstance(block, str):
                out.append(f'<p class="legend">{html.escape(block)}</p>')
            elif isinstance(block, Table):
                if "html" in block.formats:
                    out += _html_table(block)
            elif isinstance(block, References):
                out += _html_references(block)
            elif isinstance(block, Download) and files is None:  # inline: the file in the link
                name = f"report-{file_name_part(block.name, FILE_NAME_CHARS)}.csv"
                data = base64.b64encode(block.data).decode("ascii")
                out.append(
                    f'<p class="legend"><a href="data:text/csv;base64,{data}" '
                    f'download="{html.escape(name)}">{html.escape(name)}</a>: '
                    f"{html.escape(block.caption)}.</p>"
                )
            elif isinstance(block, Download) and files is not None:
                target = _html_href(files[block.name])
                out.append(
                    f'<p class="legend"><a href="{target}" download>'
                    f"{html.escape(files[block.name])}</a>: {html.escape(block.caption)}.</p>"
                )
            elif "html" in block.formats:
                svg = svg_text(block.draw(None))
                drawn()
                svg = base64.b64encode(svg.encode("utf-8")).decode("ascii")
                out.append(
                    f'<figure id="{html.escape(block.name)}"><img '
                    f'alt="{html.escape(block.caption)}" src="data:image/svg+xml;base64,{svg}">'
                    f"<figcaption>{html.escape(block.caption)}</figcaption></figure>"
                )
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _html_references(block: References) -> list[str]:
    """The references as a numbered list; DOIs as text, not links (the page links
    nothing outside itself)."""
    out = ['<ol class="references">']
    for paper in block.papers:
        out.append(f'<li id="ref-{html.escape(paper.key)}">{html.escape(paper.reference)}</li>')
    return out + ["</ol>"]


def _styled(text: str, cell: Cell, bold: str, marks: str) -> str:
    """A Markdown or LaTeX cell: its ``text`` (escaped), set in the format's ``bold``
    template (``%s``: the text) when the cell is bold and not empty, then its marks in the
    format's ``marks`` template."""
    if cell.bold and text:
        text = bold % text
    if cell.marks:
        text += marks % cell.marks
    return text


def _md_cell(cell: Cell) -> str:
    text = markdown_escape(cell.text) if cell.text else ""
    return _styled(text, cell, "**%s**", "<sup>%s</sup>")


def _md_target(name: str) -> str:
    """The target of a Markdown link to the file ``name`` beside the report, written
    between ``<`` and ``>``."""
    return name.replace("<", "%3C").replace(">", "%3E")


def _markdown(report: Report, files: dict[str, str]) -> str:
    out = [f"# {markdown_escape(report.title)}", ""]
    for section in report.sections:
        out += ["#" * section.level + f" {markdown_escape(section.title)}", ""]
        for block in section.blocks:
            if isinstance(block, str):
                out += [f"*{markdown_escape(block)}*", ""]
            elif isinstance(block, Table):
                if "md" not in block.formats:
                    continue
                if block.caption:
                    out += [markdown_escape(block.caption), ""]
                header = [markdown_escape(h) for h in block.header]
                align = [":--"] + [
                    "--:" if any(r[i].number for r in block.rows) else ":--"
                    for i in range(1, len(header))
                ]
                out.append("| " + " | ".join(header) + " |")
                out.append("| " + " | ".join(align) + " |")
                for row in block.rows:
                    out.append("| " + " | ".join(_md_cell(c) for c in row) + " |")
                out.append("")
            elif isinstance(block, References):
                for k, paper in enumerate(block.papers, 1):
                    out.append(f"{k}. {markdown_escape(paper.reference)}")
                out.append("")
            elif isinstance(block, Download):
                target = _md_target(files[block.name])
                name = markdown_escape(files[block.name])
                out += [f"[{name}](<{target}>): {markdown_escape(block.caption)}.", ""]
            elif "md" in block.formats:
                alt = markdown_escape(block.caption)
                target = _md_target(files[block.name])
                out += [f"![{alt}](<{target}>)", "", f"*{alt}*", ""]
    return "\n".join(out)


def _tex_cell(cell: Cell) -> str:
    text = latex_escape(cell.text)
    if cell.number and text.startswith("-") and not text.startswith("--"):
        text = "$-$" + text[1:]  # a minus sign, not a hyphen
    return _styled(text, cell, r"\textbf{%s}", r"$^{\mathrm{%s}}$")


#: the widths a LaTeX table's estimated width must fit (points): a two-column paper's
#: \columnwidth (about 240 pt) or \textwidth (about 505 pt, a ``table*``), and the 12%
#: that \resizebox may take off \footnotesize (8 pt type printed at 7 pt or more); one
#: character and a cell's padding in \footnotesize
_TEX_COLUMN_PT = 270.0
_TEX_TEXT_PT = 570.0
_TEX_CHAR_PT = 3.8
_TEX_PAD_PT = 6.0
#: a column of text (not numbers) wider than this wraps, in a \parbox this wide
_TEX_WRAP_PT = 100.0


def _tex_head_lines(header: str) -> list[str]:
    """A LaTeX column header as printed: longer than 10 characters, on two lines split
    at the space nearest its middle."""
    spaces = [i for i, c in enumerate(header) if c == " "]
    if len(header) <= 10 or not spaces:
        return [header]
    cut = min(spaces, key=lambda i: abs(2 * i - len(header)))
    return [header[:cut], header[cut + 1 :]]


def _tex_head(header: str) -> str:
    lines = [latex_escape(line) for line in _tex_head_lines(header)]
    if len(lines) == 1:
        return lines[0]
    return r"\begin{tabular}[b]{@{}c@{}}" + r"\\".join(lines) + r"\end{tabular}"


def _tex_width(cells: list[Cell], header: str = "", rotated: bool = False) -> float:
    """A LaTeX column's estimated width in points: its longest cell (marks at 0.6 of a
    character), and its header's longest line unless it is rotated."""
    chars = max((len(c.text) + 0.6 * len(c.marks) for c in cells), default=0)
    if not rotated:
        chars = max(chars, *map(len, _tex_head_lines(header)))
    return chars * _TEX_CHAR_PT + _TEX_PAD_PT


def _tex_widths(block: Table, rotated: bool = False) -> list[float]:
    """Every column's :func:`_tex_width`, the first included."""
    return [
        _tex_width([r[i] for r in block.rows], block.header[i], rotated)
        for i in range(len(block.header))
    ]


def _tex_wrapped(block: Table, widths: list[float]) -> set[int]:
    """The columns (after the first) set wrapped in a table wider than a paper's column
    (``widths``: :func:`_tex_widths`): those of text (not numbers) wider than
    :data:`_TEX_WRAP_PT`."""
    if sum(widths) <= _TEX_COLUMN_PT:
        return set()
    return {
        i
        for i in range(1, len(block.header))
        if widths[i] > _TEX_WRAP_PT and not any(r[i].number for r in block.rows)
    }


def _balanced(columns: list[int], k: int) -> list[list[int]]:
    """``columns`` in ``k`` consecutive groups whose sizes differ by one at most."""
    size, extra = divmod(len(columns), k)
    groups, at = [], 0
    for g in range(k):
        n = size + (g < extra)
        groups.append(columns[at : at + n])
        at += n
    return groups


def _tex_column_groups(block: Table, rotated: bool) -> tuple[list[list[int]], bool, set[int]]:
    """The columns of a table (after the first) in groups, each printed as a table beside
    the first column, and whether they are printed across both columns of a two-column
    paper (``table*``): one group in a column when the table fits it, else one group
    across both columns when it fits them, else as few groups as fit both columns, of
    about equal size and never of one column alone (a table of many columns: groups of
    two, shrunk to fit); and the columns set wrapped (:func:`_tex_wrapped`)."""
    stub = _tex_width([r[0] for r in block.rows], block.header[0])
    measured = _tex_widths(block, rotated)
    wrapped = _tex_wrapped(block, measured)
    widths = {i: _TEX_WRAP_PT if i in wrapped else measured[i] for i in range(1, len(block.header))}
    columns = list(range(1, len(block.header)))
    total = stub + sum(widths.values())
    if total <= _TEX_COLUMN_PT or len(columns) <= 1:
        return [columns] if columns else [[]], _TEX_COLUMN_PT < total, wrapped
    for k in range(1, len(columns) // 2 + 1):
        groups = _balanced(columns, k)
        if all(stub + sum(widths[i] for i in g) <= _TEX_TEXT_PT for g in groups):
            return groups, True, wrapped
    return _balanced(columns, len(columns) // 2), True, wrapped


def _tex_row(cells: list[str]) -> str:
    r"""One LaTeX table row: ``cells`` joined by ``&``, ended by ``\\``; a first cell
    starting with ``[`` or ``*`` gets ``{}`` before it, so that the ``\\`` (or
    ``\midrule``) before the row does not read it as its optional argument
    (``\\[<length>]``, ``\\*``)."""
    row = " & ".join(cells) + r" \\"
    return "{}" + row if row.startswith(("[", "*")) else row


def _tex_table(block: Table, note: str) -> list[str]:
    r"""One LaTeX table, or several when it is wider than a paper's column (its columns
    split, the first repeated: :func:`_tex_column_groups`; a ``table*`` across both
    columns when one is too narrow) or longer than :data:`LATEX_ROWS` rows: each with its
    ``\caption`` (``note`` appended), then its ``\label``; the rows whose cells in a part
    are all empty are left out of it."""
    matrix = block.label.endswith("-matrix") or block.label == "tau"  # run or measure names
    data = block.label == "data"
    if data:
        groups, wide, wraps = [list(range(1, len(block.header)))], False, set[int]()
    else:
        groups, wide, wraps = _tex_column_groups(block, matrix)
    env = "table*" if wide else "table"
    chunks = [block.rows[i : i + LATEX_ROWS] for i in range(0, len(block.rows), LATEX_ROWS)]
    label = _tex_label(block.label)
    caption = latex_escape(block.caption) + (" " + note if note else "")
    out = []
    parts = [(g, c) for c in range(len(chunks)) for g in range(len(groups))]
    for k, (g, c) in enumerate(parts):
        columns = [0, *groups[g]]
        where = []
        if len(chunks) > 1:
            first = c * LATEX_ROWS + 1
            where.append(f"rows {first}--{first + len(chunks[c]) - 1} of {len(block.rows)}")
        if len(groups) > 1:
            where.append(f"columns {groups[g][0]}--{groups[g][-1]} of {len(block.header) - 1}")
        text = caption if k == 0 else latex_escape(block.caption.split(":")[0]) + " (continued)."
        if where:
            text += " (" + "; ".join(where) + ".)"
        spec = "l" + "".join(
            "r" if any(r[i].number for r in block.rows) else "l" for i in columns[1:]
        )
        if data:  # long lists (runs, measures) wrap
            spec = r"lp{0.58\linewidth}"
        out += [
            rf"\begin{{{env}}}[tbp]",
            r"\centering\footnotesize\setlength{\tabcolsep}{3pt}",
            rf"\caption{{{text}}}",
            rf"\label{{tab:prefeval-{label}{'' if k == 0 else f'-{k + 1}'}}}",
            # shrunk to the column when still wider (a very long run name), never enlarged
            r"\resizebox{\ifdim\width>\linewidth\linewidth\else\width\fi}{!}{%",
            rf"\begin{{tabular}}{{{spec}}}",
            r"\toprule",
        ]
        if any(block.header):
            heads = [latex_escape(block.header[0])]
            if matrix:
                heads += [
                    rf"\rotatebox{{90}}{{{latex_escape(block.header[i])}}}" for i in columns[1:]
                ]
            else:
                heads += [_tex_head(block.header[i]) for i in columns[1:]]
            out += [_tex_row(heads), r"\midrule"]
        shown = [r for r in chunks[c] if any(r[i].text for i in columns[1:])]
        lines = [
            _tex_row([_tex_parbox(r[i]) if i in wraps else _tex_cell(r[i]) for i in columns])
            for r in shown
        ]
        if data:  # paths break after their slashes
            lines = [line.replace("/", r"/\allowbreak{}") for line in lines]
        out += lines
        out += [r"\bottomrule", r"\end{tabular}}", rf"\end{{{env}}}", ""]
    return out


def _tex_references(block: References, bib: str) -> list[str]:
    """The references as comment lines (a paper that inputs the report has its own
    bibliography) and how to cite them from ``bib``, their BibTeX file beside it."""
    keys = ",".join(p.key for p in block.papers)
    stem = os.path.splitext(bib)[0]
    out = [f"% [{k}] {p.reference}" for k, p in enumerate(block.papers, 1)]
    return out + [
        f"% Their BibTeX entries: {bib}; add it to the paper's bibliography",
        f"% (\\bibliography{{yours,{stem}}}) and cite them: \\cite{{{keys}}}",
        "",
    ]


def _tex_parbox(cell: Cell) -> str:
    r"""A cell of a column of long text: set ragged right in a ``\parbox`` of
    :data:`_TEX_WRAP_PT`, its lines broken after the commas of a list."""
    return rf"\parbox[t]{{{_TEX_WRAP_PT - _TEX_PAD_PT:g}pt}}{{\raggedright " + _tex_cell(cell) + "}"


def _tex_label(name: str) -> str:
    """``name`` as a LaTeX label: letters, digits and ``:.-`` only, distinct for distinct
    names (:func:`~prefeval.io.writers.file_name_part`)."""
    return file_name_part(name, "A-Za-z0-9:.-")


def _latex(report: Report, files: dict[str, str]) -> str:
    out = [
        "% prefeval report: \\input{} this file; it needs \\usepackage{booktabs,graphicx}.",
        "% Figures and CSV files are read from the folder of the main .tex file.",
        "",
    ]
    legend_at = None  # the label of the table whose caption holds the legend
    for section in report.sections:
        out += [f"% ---- {section.title}", ""]
        for block in section.blocks:
            if isinstance(block, str):
                out += [f"% {line}" for line in block.splitlines()] + [""]
            elif isinstance(block, Download):
                out += [f"% {files[block.name]}: {' '.join(block.caption.splitlines())}", ""]
            elif isinstance(block, References):
                out += _tex_references(block, files[block.name])
            elif isinstance(block, Table):
                if "tex" not in block.formats:
                    continue
                note = ""
                marked = _marked(block)
                if marked and legend_at is None:
                    legend_at = _tex_label(block.label)
                    note = latex_escape(report.legend)
                elif marked:
                    note = rf"Marks as in Table~\ref{{tab:prefeval-{legend_at}}}."
                out += _tex_table(block, note)
            elif "tex" in block.formats:
                env = "figure*" if block.wide else "figure"
                out += [
                    rf"\begin{{{env}}}[tbp]",
                    r"\centering",
                    rf"\includegraphics[width=\linewidth]{{{files[block.name]}}}",
                    rf"\caption{{{latex_escape(block.caption)}}}",
                    rf"\label{{fig:prefeval-{_tex_label(block.name)}}}",
                    rf"\end{{{env}}}",
                    "",
                ]
    return "\n".join(out)
