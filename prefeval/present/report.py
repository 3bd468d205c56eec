"""The whole study on one page (``prefeval report``): HTML, Markdown or LaTeX.

:func:`build` turns the evidence of an analysis (:func:`prefeval.analysis.evidence.gather_inputs`)
into a :class:`Report`, a format-free list of sections holding paragraphs, tables of
:class:`Cell` and matplotlib figures; :func:`render` writes it as

- ``html``: one self-contained page, figures embedded as SVG (``data:`` URIs, so no
  file or network access is needed to view it and figure ids cannot collide);
- ``md``: Markdown (GitHub/pandoc pipe tables), figures as SVG files beside it;
- ``tex``: booktabs tables and figures to ``\\input`` into a paper (needs the
  ``booktabs`` and ``graphicx`` packages), figures as PDF files beside it.

Figures beside ``OUT.ext`` are named ``OUT-<figure>.svg|pdf``.  Every computation is
the one of the analysis commands: ``order`` (MC4), ``pairs`` (means), ``discpower``
(tests, corrections), ``tau``, ``agree`` and ``robustness``.
"""

from __future__ import annotations

import base64
import html
import os
import re
from dataclasses import dataclass, field

import lazy_loader

from ..analysis.agreement import agreement_table, tau_table, ties_table
from ..analysis.orderings import order
from ..analysis.robustness import robustness as run_robustness
from ..analysis.significance import discriminative_power, pair_summary, pair_tests
from ..core import ties
from ..core.qrels import query_sort_key
from ..io.writers import atomic_output, output_target
from ..options import TESTS, Options
from .plots import discpower_figure, figure_bytes, robustness_figure, svg_text, tau_heatmap_figure

np = lazy_loader.load("numpy")

#: report formats by file extension
FORMATS = {".html": "html", ".htm": "html", ".md": "md", ".markdown": "md", ".tex": "tex"}
#: the superscript marking a pair significant under each test
TEST_MARKS = {"ttest": "t", "sign": "s", "hsd": "h"}
_TEST_NAMES = {"ttest": "t-test", "sign": "sign test", "hsd": "randomized Tukey HSD"}
#: shares of the queries drawn by --robustness, and of the relevant labels kept
ROBUSTNESS_QUERY_SHARES = (0.1, 0.25, 0.5, 0.75)
ROBUSTNESS_LABELS = (0.1, 0.25, 0.5, 0.75)


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
    caption: str
    header: list[str]
    rows: list[list[Cell]]
    label: str
    formats: tuple = ("html", "md", "tex")  # where the table is shown


@dataclass
class Figure:
    name: str
    caption: str
    figure: object  # matplotlib.figure.Figure


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


def _data_section(inputs, sources: dict) -> Section:
    ev = inputs.evidence
    rows = []
    judged = inputs.qrels
    if judged is not None:
        rows.append(("Judgments", judged.name))
    if sources.get("prefs"):
        rows.append(("Preference table", sources["prefs"]))
    if sources.get("metrics"):
        rows.append(("Baseline table", sources["metrics"]))
    rows.append((f"Runs ({len(ev.runs)})", ", ".join(sorted(ev.runs))))
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
        "",
        ["", ""],
        [[Cell(k, bold=True), Cell(v)] for k, v in rows],
        "data",
    )
    return Section("Data", [table])


def _matrix_table(name, order_rows, pair_rows, tests, digits) -> Table:
    """Runs x runs mean Delta(row, column), rows and columns in MC4 order."""
    rank = dict(zip(order_rows["run"], order_rows["rank"]))
    ranked = sorted(rank, key=lambda run: (rank[run], run))  # ties by name
    means, marks = {}, {}
    for row in pair_rows.itertuples(index=False):
        means[row.run_a, row.run_b] = row.mean
        means[row.run_b, row.run_a] = -row.mean if np.isfinite(row.mean) else row.mean
    for (a, b), letters in tests.items():
        marks[a, b] = marks[b, a] = letters
    rows = []
    for a in ranked:
        cells = [Cell(a, bold=rank[a] == 1)]
        for b in ranked:
            if a == b:
                cells.append(Cell("–", number=True))
            else:
                mean = ties.snap_zero(np.array([means[a, b]]))[0]
                cells.append(Cell(_number(mean, digits), marks=marks.get((a, b), ""), number=True))
        rows.append(cells)
    return Table(
        f"{name}: mean preference Δ(row, column) over the queries; positive: the row's "
        f"run is preferred. Runs in MC4 order, the first in bold.",
        ["", *ranked],
        rows,
        f"{name}-matrix",
    )


def _orderings_table(ev, name, orders, taus, digits) -> Table:
    """The measure's MC4 ordering beside each baseline's (rank of each run)."""
    mine = orders[orders["measure"] == name].sort_values(["rank", "run"], kind="stable")
    header = ["run", f"{name} (MC4)", *ev.metrics]
    rank_of = {
        m: dict(zip(part["run"], part["rank"])) for m, part in orders.groupby("measure", sort=False)
    }
    rows = []
    for run, rank in zip(mine["run"], mine["rank"]):
        cells = [Cell(run, bold=rank == 1), Cell(str(rank), bold=rank == 1, number=True)]
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
    for test in TEST_MARKS:  # marks in a fixed order: t, s, h
        for a, b in part.loc[part["test"] == test, ["run_a", "run_b"]].itertuples(index=False):
            out[a, b] = out.get((a, b), "") + TEST_MARKS[test]
    return out


def _how(test, correction, trials) -> str:
    if test == "hsd":
        return f"{trials} trials, family-wise"
    return "unadjusted" if correction == "none" else f"{correction}-corrected"


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
        + f". As prefeval discpower computes them: {', '.join(on)}."
    )


def build(inputs, options: Options, *, sources: dict | None = None, engine=None) -> Report:
    """The report of ``inputs`` (a :class:`prefeval.analysis.evidence.Inputs`) with the
    settings of ``options`` (``tests``, ``correction``, ``alpha``, ``trials``, ``seed``,
    ``robustness``, ``samples``, ``digits``, ``progress``); ``sources``: the table paths
    it was read from (``prefs``, ``metrics``), for the data section; ``engine``: where the
    HSD's trials run (default this process)."""

    tests = [t for t in TESTS if t in options.tests]  # one order of the marks: t, s, h
    ev = inputs.evidence
    sources = sources or {}
    orders = order(ev)
    taus_frame = tau_table(ev)
    taus = {}
    for a, b, t in taus_frame.itertuples(index=False):
        taus[a, b] = taus[b, a] = t
    pair_table = pair_tests(
        ev,
        tests,
        options.correction,
        options.trials,
        options.seed,
        progress=options.progress,
        jobs=options.jobs,
        engine=engine,
    )
    means = pair_summary(ev)
    sections = [_data_section(inputs, sources)]
    sections.extend(_preference_sections(ev, orders, taus, pair_table, means, tests, options))
    sections.append(_discpower_section(ev, pair_table, tests, options))
    if len(ev.measures) > 1:
        sections.append(_tau_section(ev, taus, taus_frame, options.digits))
    sections.append(_agreement_section(ev))
    if options.robustness:
        sections.append(_robustness_section(inputs, options))
    return Report(
        "prefeval report",
        sections,
        _legend(tests, options.correction, options.alpha, options.trials),
    )


def _preference_sections(ev, orders, taus, pair_table, means, tests, options) -> list[Section]:
    """The "Preferences" section and, per preference measure, its subsection: the
    runs x runs matrix of mean preferences with significance marks, and its orderings."""
    alpha, digits = options.alpha, options.digits
    sections = [
        Section(
            "Preferences",
            [
                "Per preference measure: the runs x runs matrix of the mean preference "
                "Δ(row, column) over the queries (positive: the row's run is preferred), "
                "rows and columns in MC4 order with the first run in bold; then the rank of "
                "each run under MC4 and under each baseline.",
                _legend(tests, options.correction, alpha, options.trials),
            ],
        )
    ]
    for name in ev.preference_measures:
        order_rows = orders[orders["measure"] == name]
        section = Section(name, level=3)
        section.blocks.append(
            _matrix_table(
                name,
                order_rows,
                means[means["measure"] == name],
                _significance(pair_table, name, alpha),
                digits,
            )
        )
        section.blocks.append(_orderings_table(ev, name, orders, taus, digits))
        sections.append(section)
    return sections


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
                "ascending order; a curve crosses the α line at its number of significant "
                "pairs.",
                discpower_figure(pair_table, alpha=alpha),
            ),
        ],
    )


def _tau_section(ev, taus, taus_frame, digits) -> Section:
    """The "Agreement of orderings" section: Kendall's τ-b between the run orderings of
    every two measures, as a heatmap (and as a table in LaTeX)."""
    tau_rows = []
    names = ev.measures
    for i, a in enumerate(names[:-1]):
        tau_rows.append(
            [Cell(a)]
            + [
                Cell(_number(taus[a, b], digits) if j > i else "", number=True)
                for j, b in enumerate(names[1:], start=1)
            ]
        )
    return Section(
        "Agreement of orderings",
        [
            Figure(
                "tau",
                "Kendall's τ-b between the run orderings of every two measures "
                "(preferences by MC4, baselines by their mean).",
                tau_heatmap_figure(taus_frame),
            ),
            Table(
                "Kendall's τ-b between the run orderings of every two measures.",
                ["", *names[1:]],
                tau_rows,
                "tau",
                formats=("tex",),  # the heatmap shows the values elsewhere
            ),
        ],
    )


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
    labels = ROBUSTNESS_LABELS if inputs.positions is not None else ()
    kinds = [
        *(["fewer queries"] if sizes else []),
        *(["fewer relevance labels"] if labels else []),
    ]
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
            f"{samples} samples and the full ordering, mean ± standard deviation.",
            robustness_figure(table),
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
_LATEX_PATTERN = re.compile("|".join(re.escape(k) for k in _LATEX_SPECIALS))
#: the characters that can start Markdown markup inside a line (emphasis, code, links,
#: HTML and entities, tables, GFM strikethrough, pandoc math); CommonMark lets a backslash
#: escape any ASCII punctuation
_MD_SPECIALS = re.compile(r"([\\`*_\[\]<>|#!&~$])")


def latex_escape(text: str) -> str:
    """``text`` as LaTeX (text mode): its ten special characters and the few non-ASCII
    symbols the report uses replaced."""
    text = _LATEX_PATTERN.sub(lambda m: _LATEX_SPECIALS[m.group(0)], text)
    return re.sub("-(?=-)", "-{}", text)  # "--" and "---" are dashes in LaTeX


def markdown_escape(text: str) -> str:
    """``text`` as literal Markdown within a line: the characters that can start markup
    backslash-escaped, newlines as spaces."""
    return _MD_SPECIALS.sub(r"\\\1", text.replace("\n", " "))


#: the figures a report may have (``OUT-<name>.svg|pdf`` beside a .md or .tex report)
FIGURE_NAMES = ("discpower", "tau", "robustness")


def figure_path(output, name: str, ext: str) -> str:
    r"""The path of figure ``name`` of the report ``output``: ``OUT-<name>.<ext>``; for a
    LaTeX report (pdf) the characters of OUT's file name that ``\includegraphics``
    cannot take (anything but letters, digits, ``.``, ``_``, ``-``) become ``_``."""
    folder, base = os.path.split(os.path.splitext(os.fspath(output))[0])
    if ext == "pdf":
        base = re.sub(r"[^A-Za-z0-9._-]", "_", base)
    return os.path.join(folder, f"{base}-{name}.{ext}")


def output_paths(output) -> list[str]:
    """Every path a report written to ``output`` may write: its figures, then itself."""
    fmt = report_format(output)
    ext = {"html": None, "md": "svg", "tex": "pdf"}[fmt]
    figures = [figure_path(output, name, ext) for name in FIGURE_NAMES] if ext else []
    return [*figures, os.fspath(output)]


def check_targets(output, inputs) -> None:
    """ValueError when the report or one of its figures would be written over one of
    the ``inputs`` (paths; ``-`` and paths that do not exist are skipped)."""

    given = [os.fspath(p) for p in inputs if p is not None and os.fspath(p) != "-"]
    for path in output_paths(output):
        target = output_target(path)
        if not os.path.exists(target):
            continue
        for source in given:
            if os.path.exists(source) and os.path.samefile(source, target):
                what = "the report" if path == os.fspath(output) else f"its figure {path}"
                raise ValueError(f"{output}: {what} would overwrite the input {source}")


def render(report: Report, output) -> dict[str, bytes]:
    """path -> bytes of every file of the report written to ``output`` (the report
    itself last)."""

    fmt = report_format(output)
    files: dict[str, bytes] = {}
    if fmt == "html":
        files[os.fspath(output)] = _html(report).encode("utf-8")
        return files
    ext = "svg" if fmt == "md" else "pdf"
    paths = {}
    for section in report.sections:
        for block in section.blocks:
            if isinstance(block, Figure):
                path = figure_path(output, block.name, ext)
                files[path] = figure_bytes(block.figure, ext)
                paths[block.name] = os.path.basename(path)
    text = _markdown(report, paths) if fmt == "md" else _latex(report, paths)
    files[os.fspath(output)] = text.encode("utf-8")
    return files


def write(report: Report, output) -> list[str]:
    """Write the report's files (figures first, then the report), each atomically;
    returns their paths."""

    files = render(report, output)
    for path, data in files.items():
        with atomic_output(path) as handle:
            handle.write(data)
    return list(files)


_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;max-width:72rem;margin:2rem auto;
padding:0 1rem;color:#1b1b1b;line-height:1.45}
h1{font-size:1.6rem}h3{font-size:1.05rem;margin-top:1.5rem}
h2{font-size:1.25rem;border-bottom:1px solid #ddd;padding-bottom:.2rem;
margin-top:2rem}
div.table{overflow-x:auto;margin:.8rem 0;max-width:100%}
table{border-collapse:collapse;font-size:.9rem}
caption{caption-side:top;text-align:left;color:#444;padding-bottom:.3rem;max-width:60rem}
th,td{padding:.2rem .6rem;border-bottom:1px solid #e4e4e4;text-align:left;white-space:nowrap}
tbody th,thead th:first-child{position:sticky;left:0;background:#fff}
thead th{border-bottom:2px solid #999}tbody th{font-weight:normal}
td.num{text-align:right;font-variant-numeric:tabular-nums}
sup{color:#a33;font-size:.7em;margin-left:.1em}
figure{margin:1rem 0}figcaption{color:#444;font-size:.9rem;max-width:60rem}
figure img{max-width:100%;height:auto}
p.legend{color:#444;font-size:.9rem;max-width:60rem}
"""


def _html_cell(cell: Cell, tag: str = "td") -> str:
    text = html.escape(cell.text)
    if cell.bold:
        text = f"<strong>{text}</strong>"
    if cell.marks:
        text += f"<sup>{html.escape(cell.marks)}</sup>"
    css = ' class="num"' if cell.number else ""
    return f"<{tag}{css}>{text}</{tag}>"


def _html(report: Report) -> str:

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
                if "html" not in block.formats:
                    continue
                out.append(f'<div class="table"><table id="{html.escape(block.label)}">')
                if block.caption:
                    out.append(f"<caption>{html.escape(block.caption)}</caption>")
                if any(block.header):
                    cells = "".join(f"<th>{html.escape(h)}</th>" for h in block.header)
                    out.append(f"<thead><tr>{cells}</tr></thead>")
                out.append("<tbody>")
                for row in block.rows:
                    first = _html_cell(row[0], "th")
                    out.append("<tr>" + first + "".join(_html_cell(c) for c in row[1:]) + "</tr>")
                out.append("</tbody></table></div>")
            else:
                svg = base64.b64encode(svg_text(block.figure).encode("utf-8")).decode("ascii")
                out.append(
                    f'<figure id="{html.escape(block.name)}"><img '
                    f'alt="{html.escape(block.caption)}" src="data:image/svg+xml;base64,{svg}">'
                    f"<figcaption>{html.escape(block.caption)}</figcaption></figure>"
                )
    out.append("</body></html>")
    return "\n".join(out) + "\n"


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


def _markdown(report: Report, figures: dict[str, str]) -> str:
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
            else:
                alt = markdown_escape(block.caption)
                target = figures[block.name].replace("<", "%3C").replace(">", "%3E")
                out += [f"![{alt}](<{target}>)", "", f"*{alt}*", ""]
    return "\n".join(out)


def _tex_cell(cell: Cell) -> str:
    text = latex_escape(cell.text)
    if cell.number and text.startswith("-") and not text.startswith("--"):
        text = "$-$" + text[1:]  # a minus sign, not a hyphen
    return _styled(text, cell, r"\textbf{%s}", r"$^{\mathrm{%s}}$")


def _latex(report: Report, figures: dict[str, str]) -> str:
    out = [
        "% prefeval report: \\input{} this file; it needs \\usepackage{booktabs,graphicx}.",
        "% Figures are read from the folder of the main .tex file.",
        "",
    ]
    for section in report.sections:
        out += [f"% ---- {section.title}", ""]
        for block in section.blocks:
            if isinstance(block, str):
                out += [f"% {line}" for line in block.splitlines()] + [""]
                continue
            if isinstance(block, Table):
                if "tex" not in block.formats:
                    continue
                columns = "l" + "".join(
                    "r" if any(r[i].number for r in block.rows) else "l"
                    for i in range(1, len(block.header))
                )
                if block.label == "data":  # long lists (runs, measures) wrap
                    columns = r"lp{0.65\linewidth}"
                label = re.sub(r"[^A-Za-z0-9:.-]", "-", block.label)
                caption = latex_escape(block.caption)
                if block.label.endswith("-matrix"):
                    caption += " " + latex_escape(report.legend)
                out += [
                    r"\begin{table}[tbp]",
                    r"\centering\small",
                    *([rf"\caption{{{caption}}}"] if caption else []),
                    rf"\label{{tab:prefeval-{label}}}",
                    # shrunk to the text width when wider (many runs), never enlarged
                    r"\resizebox{\ifdim\width>\linewidth\linewidth\else\width\fi}{!}{%",
                    rf"\begin{{tabular}}{{{columns}}}",
                    r"\toprule",
                ]
                if any(block.header):
                    out += [" & ".join(latex_escape(h) for h in block.header) + r" \\", r"\midrule"]
                out += [" & ".join(_tex_cell(c) for c in row) + r" \\" for row in block.rows]
                out += [r"\bottomrule", r"\end{tabular}}", r"\end{table}", ""]
            else:
                out += [
                    r"\begin{figure}[tbp]",
                    r"\centering",
                    rf"\includegraphics[width=\linewidth]{{{figures[block.name]}}}",
                    rf"\caption{{{latex_escape(block.caption)}}}",
                    rf"\label{{fig:prefeval-{block.name}}}",
                    r"\end{figure}",
                    "",
                ]
    return "\n".join(out)
