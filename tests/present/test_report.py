"""prefeval report: every number equals the analysis command it comes from, the three
formats build from runs and from tables, the HTML is checked in a real browser and the
LaTeX compiled (each where the tool is installed), and names are escaped."""

from __future__ import annotations

import gzip
import html
import json
import random
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
from helpers import invoke, write_qrels, write_run

import prefeval
from prefeval.present.report import latex_escape, markdown_escape

pytest.importorskip("matplotlib")
# the sample's run sys04 misses a query: its notice is not what these tests look at
pytestmark = pytest.mark.filterwarnings("ignore::prefeval.PrefevalWarning")

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
QRELS = SAMPLE / "qrels.txt"
RUNS = sorted((SAMPLE / "runs").glob("input.*"))
FAST = ["--trials", "200"]  # the HSD of the report and of discpower, same seed


class Tables(HTMLParser):
    """The tables of an HTML page by id: rows of (text, marks, bold) cells."""

    def __init__(self):
        super().__init__()
        self.tables: dict[str, list[list[tuple[str, str, bool]]]] = {}
        self.images: list[str] = []
        self._table = self._row = self._cell = None
        self._in_sup = self._bold = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self._table = self.tables.setdefault(attrs["id"], [])
        elif tag == "tr" and self._table is not None:
            self._row = []
            self._table.append(self._row)
        elif tag in ("td", "th") and self._row is not None:
            self._cell = ["", "", False]
        elif tag == "sup":
            self._in_sup = True
        elif tag == "strong" and self._cell is not None:
            self._cell[2] = True
        elif tag == "img":
            self.images.append(attrs["src"])

    def handle_endtag(self, tag):
        if tag == "table":
            self._table = None
        elif tag in ("td", "th") and self._cell is not None:
            self._row.append(tuple(self._cell))
            self._cell = None
        elif tag == "sup":
            self._in_sup = False

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[1 if self._in_sup else 0] += data


def parse(path) -> Tables:
    parser = Tables()
    parser.feed(Path(path).read_text(encoding="utf-8"))
    return parser


def build(tmp_path, name, *args, inputs=None):
    out = tmp_path / name
    given = [QRELS, *RUNS] if inputs is None else inputs
    result = invoke("report", "-o", out, *FAST, *args, *given)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    return out


@pytest.fixture(scope="module")
def sample_html(tmp_path_factory):
    return build(tmp_path_factory.mktemp("report"), "report.html", "--robustness", "--samples", "2")


def test_matrix_cells_are_pairs_means_and_discpower_marks(sample_html):
    tables = parse(sample_html).tables
    means = prefeval.pairs(QRELS, RUNS, baselines=[])
    tests = prefeval.discpower(QRELS, RUNS, baselines=[], pairs=True, trials=200)
    marks = {"ttest": "t", "sign": "s", "hsd": "h"}
    order = prefeval.order(QRELS, RUNS, baselines=[])
    checked = 0
    for measure in prefeval.MEASURES:
        if f"{measure}-matrix" not in tables:
            continue
        rows = tables[f"{measure}-matrix"]
        header = [text for text, _, _ in rows[0][1:]]
        ranks = order[order.measure == measure].sort_values(["rank", "run"])
        assert header == list(ranks.run)  # MC4 order, ties by name
        first = set(ranks.run[ranks["rank"] == 1])
        for row in rows[1:]:
            a, _, bold = row[0]
            assert bold == (a in first)
            for b, (text, sup, _) in zip(header, row[1:]):
                if a == b:
                    assert text == "–"
                    continue
                got = means[(means.measure == measure) & (means.run_a == a) & (means.run_b == b)]
                sign = 1.0
                if got.empty:
                    got = means[
                        (means.measure == measure) & (means.run_a == b) & (means.run_b == a)
                    ]
                    sign = -1.0
                want = f"{sign * got['mean'].iloc[0]:.3f}"
                assert text == ("0.000" if want == "-0.000" else want), (measure, a, b)
                pair = tests[
                    (tests.measure == measure)
                    & (
                        ((tests.run_a == a) & (tests.run_b == b))
                        | ((tests.run_a == b) & (tests.run_b == a))
                    )
                ]
                expected = "".join(
                    marks[t] for t in marks if (pair[pair.test == t].p_adjusted < 0.05).any()
                )
                assert sup == expected, (measure, a, b)
                checked += 1
    assert checked == 6 * 6 * 5  # six measures, 6 x 5 off-diagonal cells each


def test_randomization_marks_are_discpowers(tmp_path):
    out = build(
        tmp_path, "report.html", "--test", "ttest", "--test", "randomization", "--correction",
        "bh", "-m", "rpp,lexirecall", "-B", "AP", "--sections", "matrices",
    )  # fmt: skip
    page = parse(out)
    tests = prefeval.discpower(
        QRELS, RUNS, measures="rpp,lexirecall", baselines=[], tests="ttest,randomization",
        correction="bh", pairs=True, trials=200,
    )  # fmt: skip
    marks = {"ttest": "t", "randomization": "r"}
    seen = set()
    for measure in ("rpp", "lexirecall"):
        rows = page.tables[f"{measure}-matrix"]
        header = [text for text, _, _ in rows[0][1:]]
        for row in rows[1:]:
            a = row[0][0]
            for b, (_, sup, _) in zip(header, row[1:]):
                if a == b:
                    continue
                pair = tests[
                    (tests.measure == measure)
                    & (
                        ((tests.run_a == a) & (tests.run_b == b))
                        | ((tests.run_a == b) & (tests.run_b == a))
                    )
                ]
                expected = "".join(
                    marks[t] for t in marks if (pair[pair.test == t].p_adjusted < 0.05).any()
                )
                assert sup == expected, (measure, a, b)
                seen.add(sup)
    assert "tr" in seen  # both tests mark some pairs
    text = Path(out).read_text(encoding="utf-8")
    assert "r: randomization test (200 trials, Benjamini-Hochberg-corrected)" in text


def test_discpower_and_agreement_tables_equal_their_commands(sample_html):
    tables = parse(sample_html).tables
    power = prefeval.discpower(QRELS, RUNS, trials=200)
    for row in tables["discpower"][1:]:
        measure = row[0][0]
        for test, (text, _, _) in zip(["ttest", "sign", "hsd"], row[1:]):
            want = power[(power.measure == measure) & (power.test == test)].iloc[0]
            assert text == f"{want.percent:.1f}% ({want.significant}/{want.pairs})"
    agree = prefeval.agree(QRELS, RUNS)
    header = [t for t, _, _ in tables["agreement"][0]]
    for row in tables["agreement"][1:]:
        for base, (text, _, _) in zip(header[1:], row[1:]):
            want = agree[(agree.measure == row[0][0]) & (agree.baseline == base)].agreement
            assert text == f"{100 * want.iloc[0]:.1f}%"
    ties = prefeval.agree(QRELS, RUNS, ties=True)
    for row in tables["ties"][1:]:
        want = ties[ties.measure == row[0][0]].iloc[0]
        assert row[1][0] == f"{100 * want.ties:.1f}%"
        assert row[2][0] == str(want.comparisons)


def test_orderings_table_and_taus(sample_html):
    tables = parse(sample_html).tables
    order = prefeval.order(QRELS, RUNS)
    tau = prefeval.tau(QRELS, RUNS)
    rows = tables["rpp-orderings"]
    header = [t for t, _, _ in rows[0]]
    assert header[:2] == ["run", "rpp (MC4)"]
    for row in rows[1:-1]:
        run = row[0][0]
        for measure, (text, _, _) in zip(["rpp", *header[2:]], row[1:]):
            want = order[(order.measure == measure) & (order.run == run)]["rank"].iloc[0]
            assert text == str(want)
    last = rows[-1]
    for base, (text, _, _) in zip(header[2:], last[2:]):
        want = tau[(tau.measure_a == "rpp") & (tau.measure_b == base)].tau.iloc[0]
        assert text == f"{want:.3f}"


def test_html_is_self_contained(sample_html):
    text = sample_html.read_text(encoding="utf-8")
    page = parse(sample_html)
    assert len(page.images) == 3  # discpower, tau, robustness
    assert all(src.startswith("data:image/svg+xml;base64,") for src in page.images)
    assert not re.search(r"""(src|href)=["']?(https?:|//|file:)""", text)
    assert "<script" not in text


def test_same_bytes_whatever_the_run_order_and_cache(tmp_path):
    first = build(tmp_path, "a.html", "--robustness", "--samples", "3")
    second = build(
        tmp_path, "b.html", "--robustness", "--samples", "3", "--no-cache",
        inputs=[QRELS, *reversed(RUNS)],
    )  # fmt: skip
    assert first.read_bytes() == second.read_bytes()


def _lines(path: Path) -> list[str]:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data.decode("utf-8").splitlines()


def test_same_bytes_whatever_the_file_layout(tmp_path):
    """Shuffled lines, CRLF, a BOM, gzip and blank runs of spaces change nothing but
    the path the data section names."""
    rnd = random.Random(5)
    other = tmp_path / "layout"
    (other / "runs").mkdir(parents=True)
    qrels = _lines(QRELS)
    rnd.shuffle(qrels)
    (other / "qrels.txt").write_bytes(
        b"\xef\xbb\xbf" + "".join(line.replace(" ", "  ") + "\r\n" for line in qrels).encode()
    )
    runs = []
    for path in RUNS:
        lines = _lines(path)
        rnd.shuffle(lines)
        target = other / "runs" / (path.name if path.suffix == ".gz" else path.name + ".gz")
        target.write_bytes(gzip.compress("".join(f"{x}\r\n" for x in lines).encode()))
        runs.append(target)
    first = build(tmp_path, "a.html", "--robustness", "--samples", "3")
    second = build(
        tmp_path, "b.html", "--robustness", "--samples", "3", inputs=[other / "qrels.txt", *runs]
    )
    a, b = first.read_text("utf-8"), second.read_text("utf-8")
    assert b.replace(str(other / "qrels.txt"), str(QRELS)) == a


def _without_data_section(text: str) -> str:
    return text[text.index("<h2>Preferences</h2>") :]


#: the measures of the reports built from tables and from runs
TWO = ["-m", "rpp,lexirecall", "-B", "AP,nDCG"]


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    """The per-query tables of :data:`TWO`'s measures: preferences in tsv and csv,
    baselines in tsv and jsonl."""
    folder = tmp_path_factory.mktemp("tables")
    paths = {}
    for kind, command, measures, formats in (
        ("prefs", "compare", "rpp,lexirecall", ("tsv", "csv")),
        ("metrics", "metrics", "AP,nDCG", ("tsv", "jsonl")),
    ):
        for fmt in formats:
            path = paths[kind, fmt] = folder / f"{kind}.{fmt}"
            result = invoke(command, "-q", "-f", fmt, "-m", measures, "-o", path, QRELS, *RUNS)
            assert result.exit_code == 0, result.stderr
    return paths


def test_from_tables_equals_from_runs(tmp_path, tables):
    prefs, metrics = tables["prefs", "tsv"], tables["metrics", "tsv"]
    from_runs = build(tmp_path, "runs.html", *TWO)
    from_tables = build(tmp_path, "tables.html", "--prefs", prefs, "--metrics", metrics, inputs=[])
    text = from_tables.read_text(encoding="utf-8")
    assert f"<td>{html.escape(str(prefs))}</td>" in text
    assert _without_data_section(text) == _without_data_section(from_runs.read_text("utf-8"))


@pytest.mark.parametrize("samples,said", [("1", "on 1 sample and"), ("2", "on 2 samples and")])
def test_robustness_caption_counts_its_samples(tmp_path, samples, said):
    out = build(tmp_path, "study.md", "--robustness", "--samples", samples,
                "-m", "rpp", "-B", "AP", "--sections", "robustness")  # fmt: skip
    assert f"Kendall's τ between the ordering {said} the full ordering" in out.read_text("utf-8")


@pytest.mark.parametrize("ext,figure", [("md", "svg"), ("tex", "pdf")])
def test_markdown_and_latex_write_their_figures_beside(tmp_path, ext, figure):
    out = build(tmp_path, f"study.{ext}", "--robustness", "--samples", "2", "-m", "rpp", "-B", "AP")
    names = sorted(p.name for p in tmp_path.iterdir())
    # in .tex the taus of two measures are a table: it fits a column
    drawn = ("discpower", "robustness") if ext == "tex" else ("discpower", "robustness", "tau")
    references = ["study-references.bib"] if ext == "tex" else []
    assert names == sorted([f"study.{ext}", *(f"study-{n}.{figure}" for n in drawn)] + references)
    text = out.read_text(encoding="utf-8")
    for name in drawn:
        assert f"study-{name}.{figure}" in text
    if ext == "tex":
        assert r"\toprule" in text and r"\bottomrule" in text
        assert r"0.550$^{\mathrm{tsh}}$" in text  # rpp sys06 over sys05, as in the HTML
        assert "$-$0.249" in text  # a minus sign, not a hyphen
    else:
        assert "| **sys06** | – | 0.249 | 0.383 | 0.550<sup>tsh</sup> |" in text


def test_rpp_values_match_the_sample_screenshot(sample_html):
    """The first row of the rpp matrix, as the README's screenshot shows it."""
    row = parse(sample_html).tables["rpp-matrix"][1]
    assert [(t, s) for t, s, _ in row] == [
        ("sys06", ""),
        ("–", ""),
        ("0.249", ""),
        ("0.383", ""),
        ("0.550", "tsh"),
        ("0.724", "tsh"),
        ("0.823", "tsh"),
    ]


AWKWARD = ["a&b<i>", "x_y$z", "p|q#r", "100%~^{}", "back\\slash", "*star*"]


def _awkward_runs(tmp_path):
    qrels = write_qrels(tmp_path / "q.txt", [(q, 0, f"d{i}", 1) for q in "12" for i in (1, 2, 3)])
    runs = []
    for k, name in enumerate(AWKWARD[:3]):
        rows = [(q, f"d{(i + k) % 5}", 10 - i) for q in "12" for i in range(5)]
        runs.append(write_run(tmp_path / name, rows))
    return qrels, runs


def test_names_are_escaped(tmp_path):
    qrels, runs = _awkward_runs(tmp_path)
    # the sections that name runs (the figures draw names: test_plots)
    one = ["--test", "sign", "-m", "rpp", "-B", "AP", "--sections", "summary,table,data,matrices"]
    page = build(tmp_path, "r.html", *one, inputs=[qrels, *runs])
    text = page.read_text(encoding="utf-8")
    assert "<i>" not in text and "a&amp;b&lt;i&gt;" in text
    header = [t for t, _, _ in parse(page).tables["rpp-matrix"][0][1:]]
    assert sorted(header) == sorted(AWKWARD[:3])
    md = build(tmp_path, "r.md", *one, inputs=[qrels, *runs])
    md = md.read_text("utf-8")
    assert r"a\&b\<i\>" in md and r"x\_y\$z" in md and r"p\|q\#r" in md
    row = next(line for line in md.splitlines() if line.startswith("|  | ") and "a\\&b" in line)
    assert len(re.findall(r"(?<!\\)\|", row)) == 5  # 3 runs + the stub: 5 unescaped bars


def test_escapes():
    assert markdown_escape("a*b_c|d`e") == r"a\*b\_c\|d\`e"
    assert markdown_escape("x\ny") == "x y"
    assert markdown_escape("a\rb\x00c\td\x1be\x7ff\x85g") == "a b c d e f g"
    assert markdown_escape("**\r\n|") == r"\*\*  \|"
    assert latex_escape("100%~^{}") == r"100\%\textasciitilde{}\textasciicircum{}\{\}"
    assert latex_escape("back\\slash & $x$ #1 a_b") == (
        r"back\textbackslash{}slash \& \$x\$ \#1 a\_b"
    )
    # what pdflatex typesets without packages kept, anything else as its code point
    assert latex_escape("café Łódź ß £ τ ≥") == r"café Łódź ß £ $\tau$ $\geq$"
    assert (
        latex_escape("日\x00Ąð") == r"\texttt{U+65E5}\texttt{U+0000}\texttt{U+0104}\texttt{U+00F0}"
    )


@pytest.mark.parametrize(
    "args,message",
    [
        (["-o", "r.txt"], "'.txt' is not a report format"),
        (["-o", "report"], "a report needs an extension"),
        (["-o", "r.html", "--against", "sys01", "--against", "sys02"], "--against"),
        ([], "Missing option '-o'"),
    ],
)
def test_usage_errors_write_nothing(tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    result = invoke("report", *args, QRELS, *RUNS)
    assert result.exit_code == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_api_returns_the_paths_written(tmp_path):
    out = tmp_path / "r.md"
    paths = prefeval.report(QRELS, RUNS, output=out, trials=50, measures="rpp", baselines=["AP"])
    assert paths[-1] == str(out)
    assert sorted(Path(p).name for p in paths) == ["r-discpower.svg", "r-tau.svg", "r.md"]
    with pytest.raises(ValueError, match="report format"):
        prefeval.report(QRELS, RUNS, output=tmp_path / "r.csv")


def test_latex_compiles(tmp_path):
    if shutil.which("pdflatex") is None:
        pytest.skip("pdflatex is not installed")
    qrels, runs = _awkward_runs(tmp_path)  # the escapes too
    build(tmp_path, "report.tex", "--trials", "20", "--robustness", "--samples", "2",
          inputs=[qrels, *runs])  # fmt: skip
    (tmp_path / "main.tex").write_text(
        "\\documentclass{article}\\usepackage{booktabs,graphicx}\n"
        "\\begin{document}\\input{report.tex}\\end{document}\n"
    )
    proc = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "main.tex"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert (tmp_path / "main.pdf").stat().st_size > 10_000


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


#: injected first in the page's <head> by the test only: records console errors, failed
#: loads and unloaded images, and writes them into the DOM that --dump-dom prints
PROBE = """<script>
window.__errors = [];
for (const level of ["error", "warn"]) {
  const original = console[level];
  console[level] = (...args) => { window.__errors.push(level + ": " + args.join(" "));
                                  original.apply(console, args); };
}
window.addEventListener("error", e => window.__errors.push(
  "load error: " + (e.message || (e.target && (e.target.src || e.target.href)))), true);
window.addEventListener("load", () => {
  const images = [...document.images].map(i => i.complete && i.naturalWidth > 0);
  document.documentElement.setAttribute("data-probe",
    JSON.stringify({images: images, errors: window.__errors}));
});
</script>"""


def test_html_in_a_real_browser(sample_html, tmp_path):
    """Headless Chromium loads the page: every figure decodes, no console error; a
    screenshot is taken."""
    browser = _chromium()
    if browser is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install chromium)")
    probed = tmp_path / "probed.html"
    probed.write_text(
        sample_html.read_text("utf-8").replace("<head>", "<head>" + PROBE, 1), "utf-8"
    )
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    dom = subprocess.run(
        [browser, *flags, "--virtual-time-budget=5000", "--dump-dom", probed.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    found = re.search(r"data-probe=\"([^\"]*)\"", dom.stdout)
    assert found, dom.stderr[-2000:]
    probe = json.loads(html.unescape(found.group(1)))
    assert probe["images"] == [True, True, True]
    assert probe["errors"] == []
    shot = tmp_path / "shot.png"
    subprocess.run(
        [browser, *flags, "--window-size=1100,2400", f"--screenshot={shot}", sample_html.as_uri()],
        capture_output=True,
        timeout=120,
    )
    assert shot.exists() and shot.stat().st_size > 20_000


def test_api_refuses_to_overwrite_an_input(tmp_path):
    run = tmp_path / "r-tau.svg"  # a run named like the figure of r.md
    run.write_bytes(RUNS[0].read_bytes())
    before = run.read_bytes()
    with pytest.raises(ValueError, match="would overwrite the input"):
        prefeval.report(QRELS, [run, RUNS[1]], output=tmp_path / "r.md", trials=20)
    page = tmp_path / "x.html"  # a run named like the report itself
    page.write_bytes(before)
    with pytest.raises(ValueError, match="would overwrite the input"):
        prefeval.report(QRELS, [page, RUNS[1]], output=page, trials=20)
    assert page.read_bytes() == before
    assert run.read_bytes() == before
    result = invoke("report", "-o", tmp_path / "r.md", QRELS, run, RUNS[1])
    assert result.exit_code == 2 and "would overwrite the input" in result.stderr


def test_awkward_output_names(tmp_path):
    md = build(tmp_path, "my report.md", "--test", "sign", "--sections", "tau")
    assert "![" in md.read_text() and "(<my report-tau.svg>)" in md.read_text()
    assert (tmp_path / "my report-tau.svg").exists()
    tex = build(tmp_path, "my report#1 50%.tex", "--test", "sign", "--sections", "tau")
    assert r"\includegraphics[width=\linewidth]{my_report_1_50_-tau.pdf}" in tex.read_text()
    assert (tmp_path / "my_report_1_50_-tau.pdf").exists()


def test_captions_name_only_the_tests_run(tmp_path):
    one = ["-m", "rpp", "-B", "AP"]
    text = build(tmp_path, "r.html", *one, "--test", "ttest", "--test", "sign").read_text()
    assert "HSD" not in text and "h: " not in text
    assert "t: t-test (Bonferroni-corrected); s: sign test (Bonferroni-corrected)" in text
    text = build(tmp_path, "h.html", *one, "--test", "hsd", "--correction", "holm").read_text()
    assert "holm" not in text and "t-test" not in text
    assert "h: randomized Tukey HSD (200 trials, family-wise)" in text


def test_data_section_states_the_relevance_level(tmp_path):
    data = ["--test", "sign", "--sections", "data"]
    default = parse(build(tmp_path, "a.html", *data)).tables["data"]
    assert ("Relevance level", "") in [(r[0][0], "") for r in default]
    assert ["relevant: grade > 0"] == [r[1][0] for r in default if r[0][0] == "Relevance level"]
    level = parse(build(tmp_path, "b.html", *data, "-l", "2")).tables["data"]
    assert ["relevant: grade ≥ 2"] == [r[1][0] for r in level if r[0][0] == "Relevance level"]


@pytest.mark.parametrize("ext", ["md", "tex"])
def test_markdown_and_latex_from_tables(tmp_path, ext, tables):
    prefs, metrics = tables["prefs", "csv"], tables["metrics", "jsonl"]
    # every section but tau (the HTML's test compares it)
    but_tau = ["--sections", "summary,table,data,baselines,matrices,discpower,agreement"]
    from_runs = build(tmp_path, f"runs.{ext}", *TWO, *but_tau).read_text("utf-8")
    from_tables = build(
        tmp_path, f"tables.{ext}", "--prefs", prefs, "--metrics", metrics, *but_tau, inputs=[]
    ).read_text("utf-8")
    start = "## Preferences" if ext == "md" else "% ---- Preferences"
    body = lambda text: text[text.index(start) :].replace("runs-", "X-").replace("tables-", "X-")  # noqa: E731
    assert body(from_tables) == body(from_runs)
    figure = "svg" if ext == "md" else "pdf"
    assert (tmp_path / f"tables-discpower.{figure}").exists()


# --------------------------------------------------------------------------- many runs


@pytest.fixture(scope="module")
def twelve(tmp_path_factory):
    """A seeded synthetic collection of 12 runs and 12 queries: past MATRIX_MAX."""
    import dataclasses

    from prefeval import synthetic

    folder = tmp_path_factory.mktemp("twelve")
    shape = dataclasses.replace(synthetic.SHAPES["sample"], name="twelve", runs=12, queries=12)
    synthetic.SHAPES["twelve"] = shape
    try:
        synthetic.generate(folder, shape="twelve", seed=3)
    finally:
        del synthetic.SHAPES["twelve"]
    runs = sorted((folder / "runs").iterdir())
    return folder / "qrels.txt", runs


MANY = ["--trials", "100", "-m", "rpp", "-m", "lexirecall", "-B", "AP", "-B", "nDCG@10"]


@pytest.fixture(scope="module")
def twelve_html(twelve, tmp_path_factory):
    qrels, runs = twelve
    return build(tmp_path_factory.mktemp("twelve-html"), "many.html", *MANY, inputs=[qrels, *runs])


def test_many_runs_heatmap_and_csv(twelve, twelve_html):
    """Past MATRIX_MAX runs: no number matrix, a heat map per measure, and the whole
    matrix in OUT-matrix-<measure>.csv beside the report: pairs' means in MC4 order."""
    qrels, runs = twelve
    page = parse(twelve_html)
    text = twelve_html.read_text("utf-8")
    assert "rpp-matrix" not in page.tables and 'id="heatmap-rpp"' in text
    assert len(page.images) == 2 + 2  # two heat maps, discpower, tau
    assert '<a href="many-matrix-rpp.csv" download>' in text
    assert "<details><summary>rpp: rank of each run" in text  # the orderings, folded
    means = prefeval.pairs(qrels, runs, measures=["rpp", "lexirecall"], baselines=[])
    order = prefeval.order(qrels, runs, measures=["rpp", "lexirecall"], baselines=[])
    for measure in ("rpp", "lexirecall"):
        path = twelve_html.parent / f"many-matrix-{measure}.csv"
        matrix = pd.read_csv(path, index_col="run", keep_default_na=False)
        ranks = order[order.measure == measure].sort_values(["rank", "run"])
        assert list(matrix.index) == list(ranks.run)  # MC4 order, ties by name
        assert list(matrix.columns[1:]) == list(ranks.run)
        assert list(matrix["mc4_rank"]) == list(ranks["rank"])
        mine = means[means.measure == measure]
        assert len(mine) == 66
        for a, b, mean in mine[["run_a", "run_b", "mean"]].itertuples(index=False):
            assert float(matrix.loc[a, b]) == mean
            assert float(matrix.loc[b, a]) == (-mean if mean != 0 else 0.0)
        assert all(matrix.loc[r, r] == "" for r in matrix.index)


def test_summary_values(twelve, twelve_html):
    """The summary: the data, each measure's first run and how many runs it is
    significantly better than by each test, the least agreeing baseline's τ."""
    qrels, runs = twelve
    text = twelve_html.read_text("utf-8")
    assert "The data: 12 queries, 12 runs, " in text
    judged = pd.read_csv(qrels, sep=r"\s+", header=None, names=["q", "i", "d", "g"])
    judged = judged.drop_duplicates(["q", "d"])
    n_relevant = int((judged.groupby(["q", "d"]).g.max() > 0).sum())
    assert f"{len(judged):,} judged documents ({n_relevant:,} relevant)" in text
    rows = {r[0][0]: r for r in parse(twelve_html).tables["summary"][1:]}
    assert list(rows) == ["rpp", "lexirecall", "AP", "nDCG@10"]
    order = prefeval.order(qrels, runs, measures=["rpp", "lexirecall"], baselines=["AP", "nDCG@10"])
    tests = prefeval.discpower(
        qrels, runs, measures=["rpp", "lexirecall"], baselines=["AP", "nDCG@10"],
        pairs=True, trials=100,
    )  # fmt: skip
    means = prefeval.pairs(qrels, runs, measures=["rpp", "lexirecall"], baselines=["AP", "nDCG@10"])
    tau = prefeval.tau(qrels, runs, measures=["rpp", "lexirecall"], baselines=["AP", "nDCG@10"])
    for measure, row in rows.items():
        mine = order[order.measure == measure]
        first = sorted(mine.run[mine["rank"] == 1])
        assert row[1][0] == ", ".join(first)
        leader = first[0]
        pairs = means[
            (means.measure == measure) & ((means.run_a == leader) | (means.run_b == leader))
        ]
        ahead = {
            (b if a == leader else a)
            for a, b, m in pairs[["run_a", "run_b", "mean"]].itertuples(index=False)
            if m != 0 and (m > 0) == (a == leader)
        }
        for (test, _), cell in zip(TESTS_MARKS, row[2:5]):
            sig = tests[
                (tests.measure == measure) & (tests.test == test) & (tests.p_adjusted < 0.05)
            ]
            beaten = {
                (b if a == leader else a)
                for a, b in sig[["run_a", "run_b"]].itertuples(index=False)
                if leader in (a, b)
            } & ahead
            assert cell[0] == f"{len(beaten)}/11", (measure, test)
        if measure in ("rpp", "lexirecall"):
            mine = tau[tau.measure_a == measure].set_index("measure_b").tau
            least = min(["AP", "nDCG@10"], key=lambda b: (mine[b], b))
            assert row[5][0] == f"{least} ({mine[least]:.3f})"
        else:
            assert row[5][0] == ""


TESTS_MARKS = [("ttest", "t"), ("sign", "s"), ("hsd", "h")]


def test_baseline_table_equals_metrics(twelve, twelve_html):
    """The baselines table: each run's mean as `metrics` reports it, the best in bold, and
    marks where discpower finds the run significantly different from the best run."""
    qrels, runs = twelve
    table = parse(twelve_html).tables["baselines"]
    assert [t for t, _, _ in table[0]] == ["run", "AP", "nDCG@10"]
    metrics = prefeval.metrics(qrels, runs, measures=["AP", "nDCG@10"])
    summary = metrics[metrics.query_id == "all"]
    tests = prefeval.discpower(qrels, runs, measures=["rpp"], baselines=["AP", "nDCG@10"],
                               pairs=True, trials=100)  # fmt: skip
    ap = summary[summary.measure == "AP"].set_index("run").value
    assert [r[0][0] for r in table[1:]] == sorted(ap.index, key=lambda r: (-round(ap[r], 12), r))
    for k, base in enumerate(["AP", "nDCG@10"], start=1):
        values = summary[summary.measure == base].set_index("run").value
        best = values.idxmax()
        for row in table[1:]:
            run, (text, sup, bold) = row[0][0], row[k]
            assert text == f"{values[run]:.3f}", (base, run)
            assert bold == (values[run] == values.max())
            pair = tests[(tests.measure == base) & (tests.p_adjusted < 0.05)
                         & (((tests.run_a == best) & (tests.run_b == run))
                            | ((tests.run_a == run) & (tests.run_b == best)))]  # fmt: skip
            assert sup == "".join(m for t, m in TESTS_MARKS if (pair.test == t).any())


def test_legend_once(twelve_html, sample_html):
    for page in (twelve_html, sample_html):
        assert page.read_text("utf-8").count("Superscripts mark the pairs") == 1


def _latex_floats(text: str) -> list[str]:
    return re.findall(r"\\begin\{(?:table|figure)\*?\}.*?\\end\{(?:table|figure)\*?\}", text, re.S)


def _paper(folder, twelve) -> Path:
    """The LaTeX report of the twelve runs, with robustness, in ``folder``."""
    qrels, runs = twelve
    return build(folder, "paper.tex", *MANY, "--robustness", "--samples", "2",
                 inputs=[qrels, *runs])  # fmt: skip


def test_latex_captions_before_labels(tmp_path, twelve):
    """Every LaTeX table and figure has a caption, then its label; the legend is in
    the first caption with marks, the others refer to it; past MATRIX_MAX runs the heat
    maps and CSV files are written beside the report."""
    text = _paper(tmp_path, twelve).read_text("utf-8")
    floats = _latex_floats(text)
    assert len(floats) >= 8
    assert text.count(r"\label{") == len(floats)
    for block in floats:
        assert block.count(r"\caption{") == 1 and block.count(r"\label{") == 1
        assert block.index(r"\caption{") < block.index(r"\label{")
    printed = "\n".join(line for line in text.splitlines() if not line.startswith("%"))
    assert printed.count("Superscripts mark the pairs") == 1  # in the summary's caption
    assert r"Marks as in Table~\ref{tab:prefeval-summary}." in text
    assert r"\includegraphics[width=\linewidth]{paper-heatmap-rpp.pdf}" in text
    assert r"\begin{figure*}[tbp]" in text  # discpower across both columns
    names = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("paper-"))
    assert names == sorted(
        ["paper-discpower.pdf", "paper-robustness.pdf"]  # tau: a table, it fits a column
        + ["paper-references.bib"]
        + [f"paper-heatmap-{m}.pdf" for m in ("rpp", "lexirecall")]
        + [f"paper-matrix-{m}.csv" for m in ("rpp", "lexirecall")]
    )


def test_latex_compiles_in_two_columns_without_overfull_boxes(tmp_path, twelve):
    """The report of the twelve runs, in a two-column paper, through pdflatex."""
    if shutil.which("pdflatex") is None:
        pytest.skip("pdflatex is not installed")
    _paper(tmp_path, twelve)
    (tmp_path / "main.tex").write_text(
        "\\documentclass[twocolumn]{article}\\usepackage{booktabs,graphicx}\n"
        "\\begin{document}\\input{paper.tex}\\end{document}\n"
    )
    proc = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "main.tex"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "Overfull \\hbox" not in proc.stdout


def test_latex_wide_tables_are_split():
    """A matrix wider than a paper's column goes across both (``table*``); wider than
    both, it is split by columns, each part captioned, none of one column."""
    from prefeval.present.report import Cell, Report, Section, Table, _latex

    for n, parts, spans in ((9, 1, []), (30, 3, ["1--10", "11--20", "21--30"])):
        runs = [f"a-rather-long-run-name-{i}" for i in range(n)]
        rows = [[Cell(r)] + [Cell("-0.307", marks="tsh", number=True) for _ in runs] for r in runs]
        table = Table("m: caption.", ["", *runs], rows, "m-matrix")
        text = _latex(Report("r", [Section("s", [table])]), {})
        assert r"\begin{table}" not in text
        assert text.count(r"\begin{table*}") == parts * (1 + (n - 1) // 40)
        for span in spans:
            assert f"(columns {span} of {n}.)" in text
        assert text.count(r"\rotatebox{90}{") == n
        assert "(columns" in text if parts > 1 else "(columns" not in text


def test_small_samples_are_said_in_the_report(tmp_path):
    """A report on fewer than MIN_QUERIES queries says so in its legend,
    once, beside the marks; on the sample data (20 queries) the numbers are unchanged."""
    from prefeval.analysis.significance import MIN_QUERIES

    out = tmp_path / "r.md"
    with pytest.warns(prefeval.PrefevalWarning, match="fewer than"):
        prefeval.report(QRELS, RUNS[:3], output=out, tests="ttest", measures="rpp")
    text = out.read_text()
    assert text.count(f"Caution: significance tests on 20 queries, fewer than {MIN_QUERIES}") == 1


def _hostile_prefs(tmp_path, twelve, names: dict) -> Path:
    """The per-query preferences of the twelve runs under rpp and lexirecall, the
    measures renamed by ``names`` (a downloaded table's measure column is untrusted)."""
    qrels, runs = twelve
    prefs = tmp_path / "prefs.tsv"
    result = invoke("compare", "-q", "-m", "rpp", "-m", "lexirecall", "-o", prefs, qrels, *runs)
    assert result.exit_code == 0, result.stderr
    table = pd.read_csv(prefs, sep="\t", dtype={"query_id": str})
    table["measure"] = table["measure"].map(names)
    table.to_csv(prefs, sep="\t", index=False)
    return prefs


@pytest.mark.parametrize("ext,figure", [("md", "svg"), ("tex", "pdf")])
def test_file_names_from_measure_names_stay_beside_the_report(tmp_path, twelve, ext, figure):
    """A measure named ``x/../../victim`` or ``..`` names its heat map and CSV file with
    a safe file-name part: every file is written beside the report, and linked from it."""
    from prefeval.io.writers import TEX_FILE_NAME_CHARS, file_name_part

    names = {"rpp": "x/../../victim", "lexirecall": ".."}
    prefs = _hostile_prefs(tmp_path, twelve, names)
    folder = tmp_path / "a" / "b"
    folder.mkdir(parents=True)
    before = {p for p in tmp_path.rglob("*")}
    build(folder, f"rep.{ext}", "--no-baselines", "--trials", "20", "--prefs", prefs, inputs=[])
    new = {p for p in tmp_path.rglob("*")} - before
    assert all(p.parent == folder for p in new), sorted(map(str, new))
    assert not (tmp_path / "a" / "victim.csv").exists()
    chars = TEX_FILE_NAME_CHARS if ext == "tex" else "A-Za-z0-9_.+@=,-"
    sides = {
        f"rep-{file_name_part(f'{kind}-{name}', chars)}.{suffix}"
        for name in names.values()
        for kind, suffix in (("matrix", "csv"), ("heatmap", figure))
    }
    assert sides == {
        "rep-matrix-x_____victim--d8655951e1.csv",
        "rep-matrix-_--ba6c2eb289.csv",
        f"rep-heatmap-x_____victim--481d1e8dc5.{figure}",
        f"rep-heatmap-_--f6c1b3c71a.{figure}",
    }
    assert sides <= {p.name for p in new}
    text = (folder / f"rep.{ext}").read_text("utf-8")
    assert all(name in text for name in sides)
    matrix = pd.read_csv(folder / "rep-matrix-_--ba6c2eb289.csv", keep_default_na=False)
    assert list(matrix.columns[:2]) == ["run", "mc4_rank"] and len(matrix) == 12


def test_a_second_report_removes_the_side_files_the_first_left(tmp_path, twelve):
    """Past 10 runs and with --robustness, then other measures, then 3 runs: beside the
    report are exactly the files it uses; a user's file of a like name stays. (Of the
    sections with side files, the heat maps' and robustness'; discpower's and tau's
    figures follow the same rule.)"""
    qrels, runs = twelve
    names = lambda: sorted(p.name for p in tmp_path.iterdir())  # noqa: E731
    notes = tmp_path / "rep-matrix-notes.csv"
    notes.write_text("my notes\n")
    drawn = tmp_path / "rep-heatmap-mine.svg"
    drawn.write_text("<svg/>\n")
    both = ["rpp", "lexirecall"]
    few = ["--trials", "20", "--test", "sign", "-B", "AP", "--sections", "matrices,robustness"]
    first = [*few, "-m", "rpp,lexirecall", "--robustness", "--samples", "1"]
    build(tmp_path, "rep.md", *first, inputs=[qrels, *runs])
    mine = ["rep-matrix-notes.csv", "rep-heatmap-mine.svg"]
    figures = ["rep.md", *mine]
    assert names() == sorted(
        [*figures, "rep-robustness.svg"]
        + [f"rep-heatmap-{m}.svg" for m in both]
        + [f"rep-matrix-{m}.csv" for m in both]
    )
    build(tmp_path, "rep.md", *few, "-m", "rpp", inputs=[qrels, *runs])
    assert names() == sorted([*figures, "rep-heatmap-rpp.svg", "rep-matrix-rpp.csv"])
    build(tmp_path, "rep.md", *few, "-m", "rpp", inputs=[qrels, *runs[:3]])
    assert names() == sorted(figures)
    build(tmp_path, "rep.html", *few, "-m", "rpp", inputs=[qrels, *runs])
    assert "rep-matrix-rpp.csv" in names()
    written = prefeval.report(
        qrels, runs[:3], output=tmp_path / "rep.html", measures="rpp", baselines="AP", tests="sign"
    )
    assert written == [str(tmp_path / "rep.html")]
    assert names() == sorted([*figures, "rep.html"])
    assert notes.read_text() == "my notes\n" and drawn.read_text() == "<svg/>\n"


def test_a_second_report_removes_only_the_files_the_first_named(tmp_path, twelve):
    """Only the side files the earlier report at the same path links are removed: not
    those of a report to another extension or to a name starting like ``OUT-matrix-``,
    nor a user's figure holding matplotlib's name."""
    qrels, runs = twelve
    few = ["--trials", "20", "--test", "sign", "-B", "AP", "--sections", "matrices"]
    build(tmp_path, "study.html", *few, "-m", "lexirecall", inputs=[qrels, *runs])
    build(tmp_path, "study.md", *few, "-m", "rpp", inputs=[qrels, *runs])
    assert (tmp_path / "study-matrix-lexirecall.csv").exists()
    assert (tmp_path / "study-matrix-rpp.csv").exists()
    build(tmp_path, "r-matrix-2024.html", *few, "-m", "rpp", inputs=[qrels, *runs])
    build(tmp_path, "r.html", *few, "-m", "rpp", inputs=[qrels, *runs])
    build(tmp_path, "r.html", *few, "-m", "rpp", inputs=[qrels, *runs[:3]])
    assert not (tmp_path / "r-matrix-rpp.csv").exists()
    kept = (tmp_path / "r-matrix-2024-matrix-rpp.csv").read_text().splitlines()
    assert kept[0].startswith("run,mc4_rank,") and len(kept) == 13
    notes = tmp_path / "rep-heatmap-notes.svg"
    notes.write_text("<svg><!-- drawn with Matplotlib --></svg>\n")
    build(tmp_path, "rep.md", *few, "-m", "rpp", inputs=[qrels, *runs])
    build(tmp_path, "rep.md", *few, "-m", "rpp", inputs=[qrels, *runs[:3]])
    assert notes.read_text() == "<svg><!-- drawn with Matplotlib --></svg>\n"
    assert not (tmp_path / "rep-heatmap-rpp.svg").exists()
    build(tmp_path, "tex.tex", *few, "-m", "rpp", inputs=[qrels, *runs])
    assert {"tex-heatmap-rpp.pdf", "tex-matrix-rpp.csv"} <= {p.name for p in tmp_path.iterdir()}
    build(tmp_path, "tex.tex", *few, "-m", "rpp", inputs=[qrels, *runs[:3]])
    tex = sorted(p.name for p in tmp_path.glob("tex*"))
    assert tex == ["tex-references.bib", "tex.tex"]


def test_a_side_file_named_by_a_measure_never_overwrites_an_input(tmp_path, twelve):
    """A --prefs table named like the matrix file of one of its own measures (a name not
    built in) is refused before anything is written."""
    source = _hostile_prefs(tmp_path, twelve, {"rpp": "foo", "lexirecall": "bar"})
    folder = tmp_path / "o"
    folder.mkdir()
    prefs = folder / "rep-matrix-foo.csv"
    pd.read_csv(source, sep="\t", dtype={"query_id": str}).to_csv(prefs, index=False)
    before = prefs.read_bytes()
    result = invoke("report", "--prefs", prefs, "--no-baselines", "-o", folder / "rep.html")
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert f"its file {prefs} would overwrite the input {prefs}" in result.stderr
    with pytest.raises(ValueError, match="would overwrite the input"):
        prefeval.report(prefs=prefs, baselines=[], output=folder / "rep.md", trials=20)
    assert prefs.read_bytes() == before
    assert [p.name for p in folder.iterdir()] == ["rep-matrix-foo.csv"]


def test_runs_tied_everywhere_name_no_least_agreeing_baseline(tmp_path):
    """The same run under two names: every ordering ties, τ-b is undefined with every
    baseline, and the summary says so instead of naming a baseline with an empty τ."""
    run = RUNS[0]
    page = build(tmp_path, "r.html", "--trials", "20", "-m", "rpp", "-B", "AP", "-B", "RR",
                 "--sections", "summary", inputs=[QRELS, f"a={run}", f"b={run}"])  # fmt: skip
    rows = {r[0][0]: r for r in parse(page).tables["summary"][1:]}
    assert [cell[0] for cell in rows["rpp"]] == ["rpp", "a, b", "0/1", "0/1", "0/1", "–"]
    assert rows["AP"][-1][0] == ""
    text = page.read_text("utf-8")
    assert "(–: τ-b is undefined with every baseline: one of the two orderings ties all" in text
    md = build(tmp_path, "r.md", "--trials", "20", "-m", "rpp", "-B", "AP", "--sections", "summary",
               inputs=[QRELS, f"a={run}", f"b={run}"]).read_text("utf-8")  # fmt: skip
    assert "| **rpp** | a, b | 0/1 | 0/1 | 0/1 | – |" in md


#: run names LaTeX or mathtext could read as code: an optional argument of the ``\\``
#: (or ``\midrule``) before a row, a star, math
HOSTILE = ["[1em]a", "*b", "$$", "$\\input{x}$", "[x]", "c", "日本", "«Ą»\x07", "Łódź"]


def _hostile_reports(tmp_path):
    """Writes ``report.tex`` in ``tmp_path``: the LaTeX report of the runs named
    :data:`HOSTILE`, then of twelve runs (past 10: heat maps); after each, yields whether
    it is the twelve runs'."""
    qrels = write_qrels(
        tmp_path / "q.txt", [(q, 0, f"d{i}", i % 2) for q in "123" for i in range(6)]
    )
    runs = {}
    for k in range(12):
        name = HOSTILE[k] if k < len(HOSTILE) else f"run{k}"
        rows = [(q, f"d{(i + k) % 6}", 10 - i) for q in "123" for i in range(5)]
        runs[name] = write_run(tmp_path / f"run{k}.txt", rows)
    out = tmp_path / "report.tex"
    for subset, many in ((HOSTILE, False), (list(runs), True)):
        prefeval.report(qrels, {n: runs[n] for n in subset}, output=out, trials=20, tests="sign",
                        measures="rpp", baselines="AP", notify=None)  # fmt: skip
        yield many


def test_hostile_run_names_in_latex_rows_and_figures(tmp_path):
    """Rows whose first cell starts with ``[`` or ``*`` begin with ``{}``; past 10 runs
    the heat maps draw names holding ``$`` literally."""
    out = tmp_path / "report.tex"
    for many in _hostile_reports(tmp_path):
        text = out.read_text("utf-8")
        rows = [line for line in text.splitlines() if line.endswith("\\\\")]
        assert not [line for line in rows if line.startswith(("[", "*"))]
        assert "{}[1em]a & " in text and "{}*b & " in text and "{}[x] & " in text
        assert r"\$\textbackslash{}input\{x\}\$" in text
        assert r"\texttt{U+65E5}\texttt{U+672C}" in text and "Łódź" in text
        assert r"\texttt{U+00AB}\texttt{U+0104}\texttt{U+00BB}\texttt{U+0007}" in text
        assert (tmp_path / "report-heatmap-rpp.pdf").exists() == many


def test_latex_compiles_with_hostile_run_names(tmp_path):
    """The reports of :func:`test_hostile_run_names_in_latex_rows_and_figures` through
    pdflatex."""
    if shutil.which("pdflatex") is None:
        pytest.skip("pdflatex is not installed")
    (tmp_path / "main.tex").write_text(
        "\\documentclass{article}\\usepackage{booktabs,graphicx}\n"
        "\\begin{document}\\input{report.tex}\\end{document}\n"
    )
    for _ in _hostile_reports(tmp_path):
        proc = subprocess.run(
            ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "main.tex"],
            cwd=tmp_path, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout[-3000:]
