"""prefeval report as LaTeX a two-column paper ``\\input``s at 5-150 runs with run names up
to 40 characters: one short name per run past NAME_MAX characters (a table maps them to
the full names), no table split into a part of one data column, one presentation of
Kendall's tau, ``--sections``, captions in a paper's words, and a summary that says when
MC4's first run is not the one of the highest mean preference."""

from __future__ import annotations

import random
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from helpers import invoke, write_qrels, write_run

import prefeval
from prefeval.options import SECTIONS
from prefeval.present import report as reports
from prefeval.present.report import NAME_MAX, latex_escape, short_names

pytest.importorskip("matplotlib")
pytestmark = pytest.mark.filterwarnings("ignore::prefeval.PrefevalWarning")

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
QRELS = SAMPLE / "qrels.txt"
RUNS = sorted((SAMPLE / "runs").glob("input.*"))
CHEAP = ["--test", "ttest", "-m", "rpp", "-m", "lexirecall", "-B", "AP", "-B", "nDCG@10"]
FORTY_CHARS = "contriever-msmarco_k1=0.9_b=0.4+rm3-fb10"


def realistic_names(n: int) -> list[str]:
    """``n`` run names as a study names them: models with BM25-like parameters, query
    expansion, reranking depths, and one of 40 characters."""
    models = ["contriever-msmarco", "bm25", "splade-v2", "tas-b", "monot5-3b", "ance-firstp"]
    names = [FORTY_CHARS]
    i = 0
    while len(names) < n:
        model = models[i % len(models)]
        kind = i % 3
        if kind == 0:
            names.append(f"{model}_k1={(i % 9 + 1) / 10:.1f}_b={(i % 7) / 10:.1f}")
        elif kind == 1:
            names.append(f"{model}+rm3-fb{i}")
        else:
            names.append(f"sys{i:03d}-rerank@100")
        names = list(dict.fromkeys(names))
        i += 1
    return names


def write_study(folder: Path, n: int, queries: int = 6, depth: int = 8):
    """Judgments and ``n`` shallow runs (``input.NAME``, NAME from
    :func:`realistic_names`), seeded: a cheap study of many runs."""
    rng = random.Random(n)
    qrels_rows = []
    for q in range(1, queries + 1):
        for d in range(12):
            qrels_rows.append((str(q), 0, f"d{q}-{d}", rng.choice([0, 0, 1, 2])))
    qrels = write_qrels(folder / "qrels.txt", qrels_rows)
    runs = []
    for name in realistic_names(n):
        rows = []
        for q in range(1, queries + 1):
            docs = rng.sample([f"d{q}-{d}" for d in range(12)], depth)
            rows += [(str(q), doc, float(depth - r)) for r, doc in enumerate(docs)]
        runs.append(write_run(folder / f"input.{name}", rows, tag=name))
    return qrels, runs


def report_tex(folder: Path, qrels, runs, *args) -> str:
    result = invoke("report", "-o", folder / "r.tex", *CHEAP, *args, qrels, *runs)
    assert result.exit_code == 0, result.output
    return (folder / "r.tex").read_text(encoding="utf-8")


def floats(text: str) -> list[str]:
    """The tables and figures of a LaTeX text, each whole."""
    pattern = r"\\begin\{(table\*?|figure\*?)\}.*?\\end\{\1\}"
    return [m.group(0) for m in re.finditer(pattern, text, re.S)]


def tabular_columns(table: str) -> int:
    """The data columns of a LaTeX table (its tabular's columns after the first)."""
    spec = re.search(r"\\begin\{tabular\}\{([^}]*)\}", table).group(1)
    return len(re.findall(r"[lrcp]", spec)) - 1


def name_table(text: str) -> dict[str, str]:
    """short name -> full name, from the table(s) of run names (as LaTeX)."""
    out = {}
    for table in floats(text):
        if "tab:prefeval-names" not in table:
            continue
        body = table.split(r"\midrule", 1)[1].split(r"\bottomrule", 1)[0]
        for line in body.strip().splitlines():
            short, full = (c.strip() for c in line.removesuffix(r"\\").split(" & "))
            assert short not in out
            out[short] = full
    return out


def check_latex(text: str, names: list[str]) -> dict[str, str]:
    """The checks of a LaTeX report of runs ``names``; returns its table of names."""
    parts: dict[str, list[int]] = {}
    for table in floats(text):
        if not table.startswith(r"\begin{table"):
            continue
        label = re.search(r"\\label\{tab:prefeval-([^}]*?)(-\d+)?\}", table).group(1)
        parts.setdefault(label, []).append(tabular_columns(table))
    for label, columns in parts.items():  # a table of one data column is never split
        assert all(c >= 2 for c in columns) or columns == [1] * len(columns), (label, columns)
    legend = name_table(text)
    long = [n for n in names if len(n) > NAME_MAX]
    assert long, "the study must have names past the limit"
    # every run has one short name, each of them one run
    assert sorted(legend.values()) == sorted(latex_escape(n) for n in names)
    assert len(set(legend)) == len(names)
    assert all(len(s.replace(r"\ldots{}", "…").replace("\\", "")) <= NAME_MAX for s in legend)
    # a name past the limit only in the table of names
    outside = "".join(t for t in floats(text) if "tab:prefeval-names" not in t)
    for table in floats(text):
        text = text.replace(table, "")
    outside += text  # and what is not in a table or a figure
    for name in long:
        assert latex_escape(name) not in outside, name
    return legend


# ------------------------------------------------------------------------- short names


def test_short_names_by_hand():
    runs = ["bm25", "sys016-rerank@100", "sys019-rerank@100", FORTY_CHARS,
            "contriever-msmarco_k1=0.1_b=0.3", "contriever-msmarco+rm3-fb5"]  # fmt: skip
    assert short_names(runs) == {
        "bm25": "bm25",
        "sys016-rerank@100": "sys016-rerank…",
        "sys019-rerank@100": "sys019-rerank…",
        # three cut alike to "contriever-ms…": numbered in the order of the full names
        "contriever-msmarco+rm3-fb5": "contriever-m…1",
        "contriever-msmarco_k1=0.1_b=0.3": "contriever-m…2",
        FORTY_CHARS: "contriever-m…3",
    }
    assert short_names(reversed(runs)) == short_names(runs)  # whatever the order
    assert short_names(["a", "b-" * 7]) == {"a": "a", "b-" * 7: "b-" * 7}  # none too long


def test_short_names_numbered_together_where_their_shorter_cuts_meet():
    # cut alike in two groups ("bm25+rm3_k1=0…", "bm25+rm3_k1=1…") whose heads, cut one
    # character shorter for the number, are both "bm25+rm3_k1=": one numbering
    runs = ["bm25+rm3_k1=0.5_b=0.3", "bm25+rm3_k1=0.9_b=0.4", "bm25+rm3_k1=1.2_b=0.75",
            "bm25+rm3_k1=1.2_b=0.8", "bm25"]  # fmt: skip
    assert short_names(runs) == {
        "bm25": "bm25",
        "bm25+rm3_k1=0.5_b=0.3": "bm25+rm3_k1=…1",
        "bm25+rm3_k1=0.9_b=0.4": "bm25+rm3_k1=…2",
        "bm25+rm3_k1=1.2_b=0.75": "bm25+rm3_k1=…3",
        "bm25+rm3_k1=1.2_b=0.8": "bm25+rm3_k1=…4",
    }


def test_short_names_many_alike_are_unique():
    runs = [f"a-very-long-common-prefix-{i}" for i in range(130)]
    names = short_names(runs)
    assert len(set(names.values())) == 130
    assert names[runs[0]] == "a-very-lon…001"  # 3 digits: 130 cut alike
    assert all(len(s) == NAME_MAX for s in names.values())


# ------------------------------------------------------------------ 40 and 130 runs


def drawing(monkeypatch) -> list:
    """The figures the report draws from now on (their bytes as before)."""
    drawn = []

    def keep(fig, fmt):
        drawn.append(fig)
        return saved_bytes(fig, fmt)

    saved_bytes = reports.figure_bytes
    monkeypatch.setattr(reports, "figure_bytes", keep)
    return drawn


def check_heatmaps(figures, n_heatmaps: int) -> None:
    """The report's heat maps, as it drew them for a column: no two names overlap, all
    text inside the figure, the matrix at least 80% of the column, the colour bar no
    taller than the matrix (measured as tests/present/test_figure_layout.py measures)."""
    from test_figure_layout import check_layout, saved

    heatmaps = [fig for fig in figures if len(fig.axes) == 2]
    assert len(heatmaps) == n_heatmaps
    for fig in heatmaps:
        width, height, renderer = saved(fig)
        check_layout(fig, renderer, width, height)


@pytest.fixture(scope="module")
def forty(tmp_path_factory):
    folder = tmp_path_factory.mktemp("forty")
    qrels, runs = write_study(folder, 40)
    with pytest.MonkeyPatch.context() as monkeypatch:
        figures = drawing(monkeypatch)
        text = report_tex(folder, qrels, runs)
    return folder, text, figures


def test_forty_runs(forty):
    folder, text, figures = forty
    names = realistic_names(40)
    assert max(map(len, names)) == 40
    legend = check_latex(text, names)
    assert legend["sys029-rerank\\ldots{}"] == "sys029-rerank@100"
    # the data section points to the names; the heat maps' labels are the short ones
    assert "by their short names" in text
    assert "Run names" in text
    check_heatmaps(figures, 2)  # rpp, lexirecall


def test_forty_runs_compile_in_two_columns(forty):
    if shutil.which("pdflatex") is None:
        pytest.skip("pdflatex is not installed")
    compile_two_columns(forty[0])


def compile_two_columns(folder: Path) -> None:
    (folder / "main.tex").write_text(
        "\\documentclass[twocolumn]{article}\\usepackage{booktabs,graphicx}\n"
        "\\begin{document}\\input{r.tex}\\end{document}\n"
    )
    proc = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "main.tex"],
        cwd=folder, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:]
    log = (folder / "main.log").read_text(errors="replace")
    overfull = [float(w) for w in re.findall(r"Overfull \\hbox \(([\d.]+)pt too wide\)", log)]
    assert all(w <= 3 for w in overfull), overfull


def test_hundred_thirty_runs(tmp_path, monkeypatch):
    qrels, runs = write_study(tmp_path, 130, queries=4, depth=5)
    figures = drawing(monkeypatch)
    text = report_tex(
        tmp_path, qrels, runs, "-m", "rpp", "--sections", "summary,data,baselines,matrices"
    )
    check_latex(text, realistic_names(130))
    check_heatmaps(figures, 2)  # rpp, lexirecall
    if shutil.which("pdflatex") is not None:
        compile_two_columns(tmp_path)


def test_up_to_ten_runs_a_matrix_is_one_table(tmp_path):
    qrels, runs = write_study(tmp_path, 10)
    text = report_tex(tmp_path, qrels, runs)
    for table in floats(text):
        if "-matrix}" in table:
            assert tabular_columns(table) == 10
            assert "(columns" not in table
    assert text.count("tab:prefeval-rpp-matrix") == 1


def test_html_and_markdown_keep_the_full_names(tmp_path):
    qrels, runs = write_study(tmp_path, 6)
    text_sections = ["--sections", "summary,table,data,baselines,matrices,agreement"]
    for ext in ("html", "md"):
        result = invoke("report", "-o", tmp_path / f"r.{ext}", *CHEAP, *text_sections, qrels, *runs)
        assert result.exit_code == 0, result.output
        page = (tmp_path / f"r.{ext}").read_text(encoding="utf-8")
        assert "Run names" not in page and "…" not in page


def test_wide_tables_have_no_part_of_one_column():
    from prefeval.present.report import Cell, Report, Section, Table, _latex

    for n in range(2, 60):
        runs = [f"run-{i}" for i in range(n)]
        rows = [[Cell(r)] + [Cell("-0.307", marks="ts", number=True) for _ in runs] for r in runs]
        report = Report("r", [Section("s", [Table("m: c.", ["", *runs], rows, "m-matrix")])])
        parts = [t for t in floats(_latex(report, {})) if t.startswith(r"\begin{table")]
        columns = [tabular_columns(t) for t in parts]
        assert all(c >= 2 for c in columns), (n, columns)
        if n <= 10:
            assert len(parts) == 1, n  # a matrix of up to ten runs: one table


# ------------------------------------------------------------------------ tau, captions


def test_one_presentation_of_tau(tmp_path):
    # three measures: the lower triangle fits a column, no figure in LaTeX
    result = invoke("report", "-o", tmp_path / "a.tex", "--test", "ttest", "-m", "rpp",
                    "-m", "lexirecall", "-B", "AP", "--sections", "tau", QRELS, *RUNS)  # fmt: skip
    assert result.exit_code == 0, result.output
    text = (tmp_path / "a.tex").read_text()
    assert "tab:prefeval-tau" in text and "fig:prefeval-tau" not in text
    assert not (tmp_path / "a-tau.pdf").exists()
    tau = prefeval.tau(QRELS, RUNS, measures=["rpp", "lexirecall"], baselines="AP")
    t = {(a, b): f"{v:.3f}" for a, b, v in tau.itertuples(index=False)}
    t.update({(b, a): v for (a, b), v in list(t.items())})
    table = text[text.index("tab:prefeval-tau") :].split(r"\bottomrule")[0]
    assert f"lexirecall & {t['lexirecall', 'rpp']} &  \\\\" in table
    assert f"AP & {t['AP', 'rpp']} & {t['AP', 'lexirecall']} \\\\" in table
    # the default eleven measures do not fit: the heat map only
    result = invoke("report", "-o", tmp_path / "b.tex", "--test", "ttest", "--sections", "tau",
                    QRELS, *RUNS)  # fmt: skip
    text = (tmp_path / "b.tex").read_text()
    assert "fig:prefeval-tau" in text and "tab:prefeval-tau" not in text


def test_captions_in_a_papers_words(tmp_path):
    result = invoke("report", "-o", tmp_path / "r.tex", "--correction", "holm",
                    "--trials", "50", QRELS, *RUNS)  # fmt: skip
    assert result.exit_code == 0, result.output
    text = (tmp_path / "r.tex").read_text()
    printed = text[: text.index("% ---- References")]  # the cite keys name holm1979...
    assert "Holm-corrected" in printed and "holm" not in printed
    assert "prefeval discpower" not in text and "prefeval metrics" not in text
    assert "by convention" not in text


# ------------------------------------------------------------------------- the summary


def _frames(means: dict[tuple[str, str], float], ranks: dict[str, int]):
    order_rows = pd.DataFrame({"run": list(ranks), "rank": list(ranks.values())})
    pair_rows = pd.DataFrame(
        [(a, b, m) for (a, b), m in means.items()], columns=["run_a", "run_b", "mean"]
    )
    return order_rows, pair_rows


def test_summary_says_when_mc4_first_is_not_the_best_on_means():
    from prefeval.present.report import _disagreement

    ranks = {"A": 1, "B": 2, "C": 3}
    # rows: A (0.1 + 0.1) / 2 = 0.1; B (-0.1 + 0.9) / 2 = 0.4; C -0.5
    text = _disagreement("rpp", *_frames({("A", "B"): 0.1, ("A", "C"): 0.1, ("B", "C"): 0.9},
                                         ranks), 3)  # fmt: skip
    assert text == (
        " rpp: A is ranked first by MC4 (from the queries each run wins), but B has the "
        "highest mean preference over the other runs (0.400 against 0.100)."
    )
    # B is also preferred to A: Δ(B, A) = 0.2
    text = _disagreement("rpp", *_frames({("A", "B"): -0.2, ("A", "C"): 0.1, ("B", "C"): 0.9},
                                         ranks), 3)  # fmt: skip
    assert text.endswith("(0.550 against -0.050) and is preferred to it by a mean Δ of 0.200.")
    # C loses on average but beats A: only that is said
    text = _disagreement("rpp", *_frames({("A", "B"): 0.5, ("A", "C"): -0.1, ("B", "C"): 0.0},
                                         ranks), 3)  # fmt: skip
    assert text == (
        " rpp: A is ranked first by MC4 (from the queries each run wins), but C is "
        "preferred to it by a mean Δ of 0.100."
    )
    agreeing = _frames({("A", "B"): 0.5, ("A", "C"): 0.1, ("B", "C"): 0.0}, ranks)
    assert _disagreement("rpp", *agreeing, 3) == ""


# ---------------------------------------------------------------------------- sections


def test_sections_default_is_every_section():
    assert prefeval.options.Options().sections == SECTIONS
    assert set(reports.SECTION_BUILDERS) <= set(SECTIONS)


def test_sections_choose_and_skip_the_computing(tmp_path, monkeypatch):
    def refused(*args, **kwargs):
        raise AssertionError("the tests were run for a section left out")

    monkeypatch.setattr(reports, "pair_tests", refused)
    monkeypatch.setattr(reports, "run_robustness", refused)
    shown = prefeval.report(QRELS, RUNS, baselines="AP", sections="tau,data,agreement",
                            robustness=True)  # fmt: skip
    titles = re.findall(r"<h2>(.*?)</h2>", shown.html)
    # their order, then the references
    assert titles == ["Data", "Agreement of orderings", "Agreement and ties", "References"]
    result = invoke("report", "-o", tmp_path / "r.html", "--sections", "data", QRELS, *RUNS)
    assert result.exit_code == 0, result.output
    titles = re.findall(r"<h2>(.*?)</h2>", (tmp_path / "r.html").read_text())
    assert titles == ["Data", "References"]


def test_unknown_section_is_a_usage_error(tmp_path):
    result = invoke("report", "-o", tmp_path / "r.html", "--sections", "summary,plots",
                    QRELS, *RUNS)  # fmt: skip
    assert result.exit_code == 2
    assert "unknown section plots; the sections are " + ", ".join(SECTIONS) in result.stderr
    assert not (tmp_path / "r.html").exists()
    with pytest.raises(ValueError, match="unknown section plots"):
        prefeval.report(QRELS, RUNS, sections=["summary", "plots"])


def test_without_the_summary_the_legend_comes_with_the_first_marks(tmp_path):
    shown = prefeval.report(QRELS, RUNS, baselines="AP", tests="ttest", trials=20,
                            sections="data,matrices")  # fmt: skip
    page = shown.html
    assert page.count("Superscripts mark the pairs") == 1
    assert page.index("Superscripts mark the pairs") < page.index('id="rpp-matrix"')
    result = invoke("report", "-o", tmp_path / "r.tex", "--test", "ttest", "-B", "AP",
                    "--sections", "matrices", QRELS, *RUNS)  # fmt: skip
    assert result.exit_code == 0, result.output
    text = (tmp_path / "r.tex").read_text()
    first = floats(text)[0]
    assert "tab:prefeval-rpp-matrix" in first and "Superscripts mark the pairs" in first
