"""The report's References: exactly the papers of the measures it evaluates and of the
methods its sections apply, as a list in HTML and Markdown, and in LaTeX as comment
lines with their BibTeX beside the report, which BibTeX reads from a paper that
``\\input``\\ s the report."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import invoke

from prefeval.core.citations import PAPERS

pytest.importorskip("matplotlib")
pytestmark = pytest.mark.filterwarnings("ignore::prefeval.PrefevalWarning")

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
QRELS = SAMPLE / "qrels.txt"
RUNS = sorted((SAMPLE / "runs").glob("input.*"))


def report(tmp_path, name, *args) -> Path:
    out = tmp_path / name
    result = invoke("report", "-o", out, "--trials", "20", *args, QRELS, *RUNS)
    assert result.exit_code == 0, result.stderr
    return out


def markdown_references(text: str) -> list[str]:
    """The numbered items after the heading ``## References``."""
    part = text.split("\n## References\n", 1)[1]
    return re.findall(r"^\d+\. (.*)$", part, re.M)


def test_two_measures_ttest_and_randomization_with_holm(tmp_path):
    out = report(
        tmp_path, "r.md", "-m", "rpp", "-m", "lexirecall", "-B", "AP",
        "--test", "ttest", "--test", "randomization", "--correction", "holm",
    )  # fmt: skip
    items = markdown_references(out.read_text(encoding="utf-8"))
    # the measures' papers; MC4; τ (two measures and a baseline: the orderings agree or
    # not); discriminative power; the randomization test; Holm; ir-measures (AP).
    # The t-test and the sign test cite nothing.
    expected = [
        "rpp-sigir2022", "lexirecall-recall-robustness", "dwork2001rank", "kendall1938new",
        "sakai2014metrics", "smucker2007comparison", "holm1979simple",
        "macavaney2022streamlining",
    ]  # fmt: skip
    assert items == [PAPERS[k].reference.replace("_", "\\_") for k in expected]


def test_one_measure_hsd_no_baselines(tmp_path):
    """The HSD is family-wise: the correction is not applied, so not cited; one measure
    and no baselines: no τ, no ir-measures."""
    out = report(
        tmp_path, "r.html", "-m", "sgnLP", "--no-baselines", "--test", "hsd",
        "--correction", "bh",
    )  # fmt: skip
    text = out.read_text(encoding="utf-8")
    keys = re.findall(r'<li id="ref-([^"]+)">', text)
    assert keys == [
        "lexiprecision-evia2023", "dwork2001rank", "sakai2014metrics", "carterette2012multiple",
    ]  # fmt: skip
    assert text.count("<h2>References</h2>") == 1
    assert f"{PAPERS['carterette2012multiple'].reference}</li>" in text


def test_robustness_cites_kendall_and_by_cites_benjamini_yekutieli(tmp_path):
    out = report(
        tmp_path, "r.md", "-m", "rpp", "--no-baselines", "--test", "sign",
        "--correction", "by", "--robustness", "--samples", "2",
    )  # fmt: skip
    items = markdown_references(out.read_text(encoding="utf-8"))
    expected = [
        "rpp-sigir2022", "dwork2001rank", "kendall1938new", "sakai2014metrics",
        "benjamini2001control",
    ]  # fmt: skip
    assert items == [PAPERS[k].reference.replace("_", "\\_") for k in expected]


def test_latex_writes_the_bib_beside_and_bibtex_reads_it(tmp_path):
    out = report(tmp_path, "paper-report.tex", "-m", "rpp", "-B", "AP", "--test", "hsd")
    bib = tmp_path / "paper-report-references.bib"
    text = out.read_text(encoding="utf-8")
    keys = ["rpp-sigir2022", "dwork2001rank", "kendall1938new", "sakai2014metrics",
            "carterette2012multiple", "macavaney2022streamlining"]  # fmt: skip
    assert bib.read_text(encoding="utf-8") == "\n".join(PAPERS[k].bibtex for k in keys)
    # comments only: an \input report opens no second bibliography and cites nothing
    assert "thebibliography" not in text and "\n\\cite" not in text
    assert f"cite them: \\cite{{{','.join(keys)}}}\n" in text
    for k, key in enumerate(keys, 1):
        assert f"% [{k}] {PAPERS[key].reference}\n" in text
    if shutil.which("pdflatex") is None or shutil.which("bibtex") is None:
        pytest.skip("pdflatex or bibtex is not installed")
    (tmp_path / "main.tex").write_text(
        "\\documentclass{article}\\usepackage{booktabs,graphicx}\n"
        "\\begin{document}\\input{paper-report.tex}\n"
        f"Measures and methods: \\cite{{{','.join(keys)}}}.\n"
        "\\bibliographystyle{plain}\\bibliography{paper-report-references}\\end{document}\n"
    )

    def run(*command):
        proc = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout[-3000:]

    run("pdflatex", "-interaction=nonstopmode", "-halt-on-error", "main.tex")
    run("bibtex", "main")
    run("pdflatex", "-interaction=nonstopmode", "-halt-on-error", "main.tex")
    run("pdflatex", "-interaction=nonstopmode", "-halt-on-error", "main.tex")
    log = (tmp_path / "main.log").read_text(errors="replace")
    assert "Citation" not in log or "undefined" not in log, log[-2000:]
    bbl = (tmp_path / "main.bbl").read_text()
    assert sorted(re.findall(r"\\bibitem\{([^}]+)\}", bbl)) == sorted(keys)
