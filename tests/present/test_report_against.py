"""report --against REF: the section "Against the reference" holds the table of prefeval
gate --against REF on the report's measures (the gate's defaults, the report's alpha),
in every format, escaped; every other section stays the same bytes."""

from __future__ import annotations

import gzip
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import invoke, partition_cells, write_qrels, write_run
from test_report import parse

import prefeval
from prefeval.core import ties
from prefeval.present import report as reports

pytest.importorskip("matplotlib")
pytestmark = pytest.mark.filterwarnings("ignore::prefeval.PrefevalWarning")

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
#: the sections besides the figures' (discpower, tau, robustness): the tables around
#: the one this file checks
SECTIONS = "summary,table,data,against,baselines,matrices,agreement"
FAST = ["--trials", "50", "-m", "rpp,lexirecall", "-B", "AP", "--sections", SECTIONS]
HEADER = ["measure", "candidate", "queries", "mean", "ci low", "ci high", "w/t/l", "p"]
HEADER.append("p adjusted")
HEADER.append("verdict")


def _text(path: Path) -> str:
    data = path.read_bytes()
    return (gzip.decompress(data) if path.suffix == ".gz" else data).decode()


@pytest.fixture(scope="module")
def forty(tmp_path_factory):
    """The sample data with each query twice (ids Q and Qb): 40 queries, past the gate's
    minimum of 25, so its verdicts are tested."""
    folder = tmp_path_factory.mktemp("forty")

    def doubled(path: Path, name: str) -> Path:
        lines = _text(path).splitlines()
        twice = [f"{x.split(' ', 1)[0]}b {x.split(' ', 1)[1]}" for x in lines]
        (folder / name).write_text("\n".join(lines + twice) + "\n")
        return folder / name

    qrels = doubled(SAMPLE / "qrels.txt", "qrels.txt")
    runs = [doubled(p, p.name.removesuffix(".gz")) for p in sorted(SAMPLE.glob("runs/input.*"))]
    return qrels, runs


def report(folder: Path, name: str, *args, inputs) -> Path:
    folder.mkdir(exist_ok=True)
    out = folder / name
    result = invoke("report", "-o", out, *FAST, *args, *inputs)
    assert result.exit_code == 0, result.stderr
    return out


def without_section(text: str, fmt: str) -> str:
    """The report without its section "Against the reference" (up to the next one)."""
    start, next_one = {
        "html": ("<h2>Against the reference</h2>", "<h2>"),
        "md": ("## Against the reference\n", "\n## "),
        "tex": ("% ---- Against the reference\n", "% ---- "),
    }[fmt]
    at = text.index(start)
    end = text.index(next_one, at + len(start))
    return text[:at] + text[end + (1 if fmt == "md" else 0) :]


def without_references(text: str, fmt: str) -> str:
    """The report up to its last section, "References"."""
    start = {"html": "<h2>References</h2>", "md": "## References\n", "tex": "% ---- References"}
    return text[: text.index(start[fmt])]


@pytest.mark.parametrize("streamed", [False, True], ids=["cube", "streamed"])
def test_the_section_holds_the_gates_table(forty, monkeypatch, streamed):
    """The table the section renders is exactly prefeval.gate's on the report's measures:
    every pair computed once, the pairs with REF taken from the report's cube or, where
    the preferences are streamed by query partitions, from their moments, reoriented
    (the same bits)."""
    from prefeval.analysis.orderings import Evidence

    qrels, runs = forty
    if streamed:  # partitions of 2 blocks of 3 queries: 15 pairs x 2 measures x 6 queries
        monkeypatch.setattr(ties, "SUM_BLOCK", 3)
        partition_cells(monkeypatch, 15 * 2 * 6)
    seen = {}
    build, against = reports.build, Evidence.against

    def spy(*args, **kwargs):
        seen["against"] = kwargs["against"]
        return build(*args, **kwargs)

    def held(evidence, reference):
        seen["streamed"] = evidence.cube is None
        return against(evidence, reference)

    monkeypatch.setattr(reports, "build", spy)
    monkeypatch.setattr(Evidence, "against", held)
    out = Path(runs[0]).parent / "spied.html"
    prefeval.report(qrels, runs, output=out, trials=50, measures="rpp,lexirecall",
                    baselines="AP", against="sys03", notify=None, cache=False)  # fmt: skip
    assert seen["streamed"] == streamed
    table, settings = seen["against"]
    gate = prefeval.gate(qrels, runs, against="sys03", measures="rpp,lexirecall",
                         baselines="AP", notify=None, cache=False)  # fmt: skip
    assert table.equals(gate)
    assert (settings.tests, settings.correction, settings.alpha) == (("ttest",), "holm", 0.05)
    assert (settings.min_queries, settings.margin, settings.ci) == (25, 0.0, "t")
    assert set(gate["verdict"]) == {"regression", "no difference", "improvement"}


def test_html_rows_are_the_gates_rows_rounded(forty, tmp_path):
    qrels, runs = forty
    page = report(tmp_path, "r.html", "--against", "sys03", inputs=[qrels, *runs])
    rows = parse(page).tables["against"]
    assert [text for text, _, _ in rows[0]] == HEADER
    gate = prefeval.gate(qrels, runs, against="sys03", measures="rpp,lexirecall",
                         baselines="AP", notify=None)  # fmt: skip
    assert len(rows) == len(gate) + 1
    for cells, row in zip(rows[1:], gate.itertuples(index=False)):
        texts = [text for text, _, _ in cells]
        assert texts[:4] == [row.measure, row.candidate, "40", f"{row.mean:.3f}"]
        assert texts[4:6] == [f"{row.ci_low:.3f}", f"{row.ci_high:.3f}"]
        assert texts[6] == f"{row.wins}/{row.ties}/{row.losses}"
        p = row.p_adjusted
        assert texts[8] == (f"{p:.1e}" if p < 1e-3 else f"{p:.3f}")
        assert texts[9] == row.verdict
        assert cells[9][2] == (row.verdict == "regression")  # bold
    caption = page.read_text("utf-8")
    assert "one-sided paired t-test" in caption and "Holm&#x27;s correction" in caption
    assert "α = 0.05" in caption and "fewer than 25 queries" in caption


def test_alpha_is_the_reports(forty, tmp_path):
    qrels, runs = forty
    page = report(tmp_path, "r.md", "--against", "sys03", "--alpha", "0.001",
                  inputs=[qrels, *runs])  # fmt: skip
    text = page.read_text("utf-8")
    section = text[text.index("## Against the reference") :]
    section = section[: section.index("\n## ")]
    assert "α = 0.001" in section and "two-sided 99.9% t interval" in section
    gate = prefeval.gate(qrels, runs, against="sys03", measures="rpp,lexirecall",
                         baselines="AP", alpha=0.001, notify=None)  # fmt: skip
    rows = [line for line in section.splitlines() if line.startswith("| ") and "/" in line][1:]
    assert [row.split(" | ")[-1].rstrip(" |").strip("*") for row in rows] == list(gate["verdict"])
    assert (gate["verdict"] == "regression").sum() < len(gate)


@pytest.mark.parametrize("fmt", ["html", "md", "tex"])
def test_every_other_section_is_the_same_bytes(forty, tmp_path, fmt):
    qrels, runs = forty
    plain = report(tmp_path / "plain", f"r.{fmt}", inputs=[qrels, *runs]).read_text("utf-8")
    against = report(tmp_path / "against", f"r.{fmt}", "--against", "sys03",
                     inputs=[qrels, *runs]).read_text("utf-8")  # fmt: skip
    assert "Against the reference" not in plain
    assert against != plain
    # the references differ by the section's own method: the gate's Holm correction
    holm = "Sture Holm. 1979."
    assert holm in against and holm not in plain
    assert without_references(without_section(against, fmt), fmt) == without_references(plain, fmt)
    if fmt == "tex":
        assert r"\label{tab:prefeval-against}" in against
    figures = sorted(p.name for p in (tmp_path / "against").iterdir())
    assert figures == sorted(p.name for p in (tmp_path / "plain").iterdir())


HOSTILE = "a&b<i>_$|#*[x]"  # the reference
CANDIDATE = "c|d*e"


@pytest.mark.parametrize("fmt", ["html", "md", "tex"])
def test_names_are_escaped_in_the_section(tmp_path, fmt):
    qrels = write_qrels(
        tmp_path / "q.txt", [(q, 0, f"d{i}", i % 2) for q in "12" for i in range(5)]
    )
    runs = {}
    for k, name in enumerate([HOSTILE, CANDIDATE, "other"]):
        rows = [(q, f"d{(i + k) % 5}", 10 - i) for q in "12" for i in range(5)]
        runs[name] = write_run(tmp_path / f"run{k}.txt", rows)
    out = tmp_path / f"r.{fmt}"
    prefeval.report(qrels, runs, output=out, trials=20, measures="rpp", baselines=[],
                    against=HOSTILE, notify=None)  # fmt: skip
    text = out.read_text("utf-8")
    section = text[text.index("Against the reference") :]
    escaped = {
        "html": "a&amp;b&lt;i&gt;_$|#*[x]",
        "md": r"a\&b\<i\>\_\$\|\#\*\[x\]",
        "tex": r"a\&b\textless{}i\textgreater{}\_\$\textbar{}\#*[x]",
    }[fmt]
    assert f"Against the reference {escaped}:" in section
    assert HOSTILE not in text  # never unescaped, anywhere
    shown = {"html": "c|d*e", "md": r"c\|d\*e", "tex": r"c\textbar{}d*e"}[fmt]
    assert (
        f"rpp | {shown} | " in section
        or f"rpp & {shown} & " in section
        or (f"<td>{shown}</td>" in section)
    )
    if fmt == "md":  # a table row stays one row: 10 cells, 11 unescaped bars
        row = next(line for line in section.splitlines() if line.startswith("| rpp | c"))
        assert len(re.findall(r"(?<!\\)\|", row)) == 11
    if fmt == "tex" and shutil.which("pdflatex"):
        (tmp_path / "main.tex").write_text(
            "\\documentclass[twocolumn]{article}\\usepackage{booktabs,graphicx}\n"
            "\\begin{document}\\input{r.tex}\\end{document}\n"
        )
        proc = subprocess.run(
            ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "main.tex"],
            cwd=tmp_path, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout[-3000:]


ERRORS = {
    "two runs": (["--against", "sys01", "--against", "sys02"], "one reference run (given 2)"),
    "no such run": (["--against", "sys09"], "--against sys09: no such run"),
}


@pytest.mark.parametrize("args,message", ERRORS.values(), ids=ERRORS)
def test_usage_errors_write_nothing(tmp_path, args, message):
    prefs = tmp_path / "prefs.tsv"
    written = invoke("compare", "-q", "-m", "rpp", "-o", prefs, SAMPLE / "qrels.txt",
                     *sorted(SAMPLE.glob("runs/input.*")))  # fmt: skip
    assert written.exit_code == 0
    for inputs in (
        [SAMPLE / "qrels.txt", *sorted(SAMPLE.glob("runs/input.*"))],
        ["--prefs", prefs, "--no-baselines"],
    ):
        result = invoke("report", "-o", tmp_path / "r.html", "--trials", "20", *args, *inputs)
        assert result.exit_code == 2, result.output
        assert message in result.stderr and "Traceback" not in result.stderr
        assert sorted(p.name for p in tmp_path.iterdir()) == ["prefs.tsv"]


def test_api_against_takes_one_name(tmp_path):
    qrels, runs = SAMPLE / "qrels.txt", sorted(SAMPLE.glob("runs/input.*"))
    with pytest.raises(ValueError, match="one reference run"):
        prefeval.report(qrels, runs, output=tmp_path / "r.html", against=["sys01", "sys02"])
    with pytest.raises(ValueError, match="no such run"):
        prefeval.report(qrels, runs, output=tmp_path / "r.html", against="sys09")
    assert list(tmp_path.iterdir()) == []
    out = tmp_path / "r.html"
    prefeval.report(qrels, runs, output=out, trials=20, measures="rpp", baselines=[],
                    against=["sys03"], notify=None)  # fmt: skip
    rows = parse(out).tables["against"][1:]
    assert [cells[-1][0] for cells in rows] == ["inconclusive"] * 5  # 20 queries, not 25
    assert [cells[8][0] for cells in rows] == [""] * 5  # not tested: no adjusted p


def test_the_reports_tests_do_not_change_with_against():
    """--against names the section's reference: the report still compares every pair,
    with its own default tests (the HSD among them)."""
    from prefeval.options import DEFAULT_TESTS, OptionError, judge

    assert judge(command="report", against="a").tests == DEFAULT_TESTS
    assert judge(command="report", against="a", tests="hsd").tests == ("hsd",)
    assert judge(command="report", against=["a", "a"]).against == ("a", "a")
    with pytest.raises(OptionError, match="one reference run"):
        judge(command="report", against=["a", "b"])
