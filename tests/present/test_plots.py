"""Figures: formats by extension, deterministic bytes, one styled line per measure,
the alpha line, clipped robustness bands, and the --plot options of the CLI."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import invoke, read_tsv

pytest.importorskip("matplotlib")

from matplotlib.collections import PolyCollection  # noqa: E402

from prefeval.present import plots as plotting  # noqa: E402

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
DATA = [str(SAMPLE / "qrels.txt"), *sorted(str(p) for p in (SAMPLE / "runs").iterdir())]
PREFS = ["rpp", "dcgrpp", "invrpp", "strpp", "stdcgrpp", "stinvrpp", "lexirecall"]
PREFS += ["lexiprecision", "rrlexiprecision"]
BASES = ["AP", "nDCG", "RR", "R@1000", "Rprec", "ERR_IA@20", "alpha_nDCG@20"]
BASES += ["StRecall@20", "AP_IA"]
MAGIC = {"png": b"\x89PNG\r\n\x1a\n", "pdf": b"%PDF-"}


def pair_table(measures=(*PREFS, *BASES), tests=("ttest", "hsd"), runs=6, seed=1):
    """A `discpower --pairs` table with random p-values (some 0 and 1)."""
    rng = np.random.default_rng(seed)
    pairs = list(itertools.combinations([f"r{i}" for i in range(runs)], 2))
    rows = []
    for test, measure in itertools.product(tests, measures):
        p = rng.uniform(0, 1, len(pairs)) ** 4
        p[0], p[-1] = 0.0, 1.0
        correction = "tukey" if test == "hsd" else "bonferroni"
        for (a, b), value in zip(pairs, p):
            rows.append((measure, test, correction, a, b, value, value))
    columns = ["measure", "test", "correction", "run_a", "run_b", "p_value", "p_adjusted"]
    return pd.DataFrame(rows, columns=columns)


def robustness_table(measures, std=0.5):
    """A robustness table whose ±std bands reach beyond [-1, 1]."""
    rows = []
    for kind, levels in (("queries", (5, 10, 20)), ("labels", (0.5, 0.9))):
        for i, measure in enumerate(measures):
            for level in levels:
                rows.append((measure, kind, float(level), 10, 0.9 - 0.05 * i, std, 0.1, 0.9))
    columns = ["measure", "kind", "level", "samples", "tau_mean", "tau_std", "ties", "agreement"]
    return pd.DataFrame(rows, columns=columns)


def curves(ax):
    """The measures' lines of an axes (not the alpha line, not the grid)."""
    return [line for line in ax.get_lines() if not line.get_label().startswith("_")]


# --------------------------------------------------------------------------- formats


@pytest.mark.parametrize("name", ["a.png", "a.PNG", "b/a.pdf", "a.Pdf", "a.svg", "x.y.SVG"])
def test_plot_format_from_extension(name):
    assert plotting.plot_format(name) == name.rsplit(".", 1)[1].lower()


@pytest.mark.parametrize("name", ["a.jpg", "a.eps", "a", "png", "a.png.gz", "a.svgz"])
def test_plot_format_refuses_others(name):
    with pytest.raises(ValueError, match=r"use \.png, \.pdf or \.svg"):
        plotting.plot_format(name)


@pytest.mark.parametrize("fmt", plotting.FORMATS)
def test_saved_file_has_the_format_of_its_extension(tmp_path, fmt):
    path = tmp_path / f"curves.{fmt.upper()}"
    plotting.save_figure(plotting.discpower_figure(pair_table(), alpha=0.05), path)
    data = path.read_bytes()
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left
    assert len(data) > 10_000
    if fmt == "svg":
        text = data.decode("utf-8")
        assert text.startswith("<?xml")
        assert "<svg" in text[:1000] and text.rstrip().endswith("</svg>")
    else:
        assert data.startswith(MAGIC[fmt])


def test_failed_save_leaves_nothing(tmp_path, monkeypatch):
    fig = plotting.robustness_figure(robustness_table(["rpp", "AP"]))

    def broken(*args, **kwargs):
        raise RuntimeError("renderer failed")

    monkeypatch.setattr(fig, "savefig", broken)
    with pytest.raises(RuntimeError):
        plotting.save_figure(fig, tmp_path / "r.png")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("fmt", ["svg", "pdf"])
def test_same_figure_same_bytes(fmt):
    first = plotting.figure_bytes(plotting.discpower_figure(pair_table(), log=True), fmt)
    second = plotting.figure_bytes(plotting.discpower_figure(pair_table(), log=True), fmt)
    assert first == second
    table = robustness_table(PREFS)
    assert plotting.figure_bytes(plotting.robustness_figure(table), fmt) == plotting.figure_bytes(
        plotting.robustness_figure(table), fmt
    )


def test_svg_text_for_embedding():
    text = plotting.svg_text(plotting.robustness_figure(robustness_table(["rpp"])))
    assert text.startswith("<?xml") and "<svg" in text
    assert "<dc:date>" not in text  # no date: the same figure gives the same text


# --------------------------------------------------------------------------- styles


def test_series_styles_never_repeat():
    names = [f"m{i}" for i in range(20)] + PREFS + ["rpp"]  # a repeat keeps one style
    styles = plotting.series_styles(names)
    assert list(styles) == list(dict.fromkeys(names))
    pairs = {(style["color"], style["linestyle"]) for style in styles.values()}
    assert len(pairs) == len(styles) == 29
    # preference measures solid (dash-dot past 10), baselines dashed (dotted past 10)
    assert {styles[name]["linestyle"] for name in PREFS} == {"-"}
    assert [styles[f"m{i}"]["linestyle"] for i in (0, 9, 10, 19)] == ["--", "--", ":", ":"]


def test_discpower_figure_one_distinct_line_per_measure():
    table = pair_table()
    fig = plotting.discpower_figure(table, alpha=0.01)
    axes = fig.axes
    assert [ax.get_title() for ax in axes] == ["t-test", "randomized Tukey HSD"]
    assert axes[0].get_ylabel() == "p-value (bonferroni-adjusted)"
    assert axes[1].get_ylabel() == "p-value (randomized Tukey HSD)"
    for ax, test in zip(axes, ("ttest", "hsd")):
        assert ax.get_xlabel() == "run pairs sorted by p-value"
        lines = curves(ax)
        assert [line.get_label() for line in lines] == PREFS + BASES
        assert len({(line.get_color(), line.get_linestyle()) for line in lines}) == 18
        assert {line.get_linestyle() for line in lines[:9]} == {"-"}
        assert {line.get_linestyle() for line in lines[9:]} == {"--"}
        for line in lines:
            rows = table[(table["test"] == test) & (table["measure"] == line.get_label())]
            np.testing.assert_array_equal(line.get_xdata(), np.arange(1, 16))
            np.testing.assert_array_equal(line.get_ydata(), np.sort(rows["p_adjusted"]))
        (alpha_line,) = [line for line in ax.get_lines() if line.get_gid() == "alpha"]
        assert list(alpha_line.get_ydata()) == [0.01, 0.01]
        assert ax.get_ylim() == (0.0, 0.02)  # Sakai's view: [0, 2 alpha]
    # the legend (measures and the alpha line) is outside, right of every panel
    fig.draw_without_rendering()
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == [*PREFS, *BASES, "α = 0.01"]
    box = legend.get_window_extent()
    assert all(box.x0 >= ax.get_window_extent().x1 for ax in axes)


def test_discpower_figure_log_scale_draws_zero_at_the_bottom():
    fig = plotting.discpower_figure(pair_table(measures=["rpp", "AP"], tests=["sign"]), log=True)
    (ax,) = fig.axes
    assert ax.get_yscale() == "log"
    bottom, top = ax.get_ylim()
    for line in curves(ax):
        y = line.get_ydata()
        assert y.min() > 0 and y.min() > bottom and y.max() == 1.0 < top


def test_robustness_overlay_bands_clipped():
    fig = plotting.robustness_figure(robustness_table(["rpp", "lexirecall", "AP"], std=0.5))
    axes = fig.axes
    assert [ax.get_title() for ax in axes] == ["query sampling", "label sampling"]
    assert [ax.get_xlabel() for ax in axes] == [
        "number of queries sampled",
        "fraction of relevant labels kept",
    ]
    for ax in axes:
        assert [line.get_label() for line in curves(ax)] == ["rpp", "lexirecall", "AP"]
        bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
        assert len(bands) == 3
        y = np.concatenate([path.vertices[:, 1] for band in bands for path in band.get_paths()])
        assert y.max() == 1.0 and y.min() == pytest.approx(0.8 - 0.5)  # 0.9 + 0.5 clipped
        assert ax.get_ylim()[1] <= 1.05


def test_robustness_small_multiples_past_overlay_max():
    measures = PREFS + BASES
    fig = plotting.robustness_figure(robustness_table(measures, std=1.5))
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == 2 * 18
    assert [ax.get_title() for ax in panels] == measures * 2
    for ax in panels:
        own = [line for line in ax.get_lines() if line.get_label() == ax.get_title()]
        grey = [line for line in ax.get_lines() if line.get_color() == "0.85"]
        assert len(own) == 1 and len(grey) == 17  # the other measures, for context
        (band,) = [c for c in ax.collections if isinstance(c, PolyCollection)]
        y = np.concatenate([path.vertices[:, 1] for path in band.get_paths()])
        assert y.min() >= -1.0 and y.max() <= 1.0
    assert plotting.robustness_figure(robustness_table(["rpp"]), layout="grid").axes
    with pytest.raises(ValueError, match="unknown layout"):
        plotting.robustness_figure(robustness_table(["rpp"]), layout="wash")


# --------------------------------------------------------------------------- command line


@pytest.mark.parametrize("command", ["discpower", "robustness"])
@pytest.mark.parametrize("name", ["x.jpg", "x", "x.png.tmp"])
def test_cli_unknown_extension_is_a_usage_error(tmp_path, monkeypatch, command, name):
    def no_computing(*args, **kwargs):
        raise AssertionError("computed before checking --plot")

    monkeypatch.setattr("prefeval.cli.analysis.run_analysis", no_computing)
    out = tmp_path / "t.tsv"
    extra = ["--queries", "5"] if command == "robustness" else []
    result = invoke(command, *extra, "--plot", tmp_path / name, "-o", out, *DATA)
    assert result.exit_code == 2
    assert "Invalid value for '--plot'" in result.stderr
    assert "use .png, .pdf or .svg" in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert list(tmp_path.iterdir()) == []


def test_cli_plot_checks_before_computing(tmp_path, monkeypatch):
    monkeypatch.setattr(
        "prefeval.cli.analysis.run_analysis", lambda *a, **k: pytest.fail("computed")
    )
    same = tmp_path / "x.png"
    for args, message in (
        (["--plot-log"], "--plot-log needs --plot"),
        (["--plot", same, "-o", same], "are the same file"),
        (["--plot", tmp_path / "no" / "x.png"], "no such directory"),
        (["--plot", tmp_path], "is a directory"),
    ):
        result = invoke("discpower", *args, *DATA)
        assert result.exit_code == 2, args
        assert message in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_cli_discpower_writes_table_and_figure(tmp_path):
    figure, out = tmp_path / "curves.svg", tmp_path / "pairs.tsv"
    args = ["--pairs", "--test", "sign", "--alpha", "0.01", "--plot", figure, "--plot-log"]
    result = invoke("discpower", *args, "-o", out, "--no-baselines", *DATA)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    table = read_tsv(out.read_text())
    assert set(table["test"]) == {"sign"} and len(table) == 6 * 15
    text = figure.read_text()
    assert "<svg" in text and len(text) > 10_000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["curves.svg", "pairs.tsv"]


def test_cli_robustness_writes_table_and_figure(tmp_path):
    figure = tmp_path / "tau.PDF"
    args = ["--queries", "5,10", "--samples", "2", "-m", "rpp,lexirecall", "-B", "AP"]
    result = invoke("robustness", *args, "--plot", figure, *DATA)
    assert result.exit_code == 0, result.stderr
    table = read_tsv(result.stdout)
    assert list(table["measure"]) == ["rpp", "lexirecall", "AP"] * 2
    data = figure.read_bytes()
    assert data.startswith(b"%PDF-") and len(data) > 5_000


# --------------------------------------------------------------------------- report figures


def test_discpower_panels_one_panel_per_test_and_family():
    """Rows: tests; columns: the preference families, then the baselines; in each
    panel its own measures in distinct colours, the others grey; p = 0 on the floor."""
    table = pair_table()
    fig = plotting.discpower_panels_figure(table, alpha=0.05, width=7.0)
    assert tuple(fig.get_size_inches()) == pytest.approx((7.0, 0.35 + 2 * 1.85))
    axes = np.array(fig.axes).reshape(2, 4)
    assert [ax.get_title() for ax in axes[0]] == [
        "RPP (graded)",
        "RPP (subtopic)",
        "lexicographic",
        "baselines",
    ]
    groups = [PREFS[:3], PREFS[3:6], PREFS[6:], BASES]
    for row, test in zip(axes, ("ttest", "hsd")):
        for ax, own in zip(row, groups):
            assert ax.get_yscale() == "log"
            assert ax.get_ylim()[0] < plotting.P_FLOOR
            lines = curves(ax)
            assert [line.get_label() for line in lines] == own
            assert len({line.get_color() for line in lines}) == len(own)
            grey = [line for line in ax.get_lines() if line.get_color() == "0.85"]
            assert len(grey) == 18 - len(own)
            for line in lines:
                rows = table[(table["test"] == test) & (table["measure"] == line.get_label())]
                want = np.maximum(np.sort(rows["p_adjusted"]), plotting.P_FLOOR)
                np.testing.assert_array_equal(line.get_ydata(), want)
                assert line.get_ydata()[0] == plotting.P_FLOOR  # p = 0, on the floor
            (alpha_line,) = [line for line in ax.get_lines() if line.get_gid() == "alpha"]
            assert list(alpha_line.get_ydata()) == [0.05, 0.05]
    assert [t.get_text() for t in axes[0, 0].get_yticklabels()][0] == "≤0.0001"


def _heatmap(n, significant=None, width=3.3):
    runs = [f"run{i:03d}" for i in range(n)]
    matrix = np.subtract.outer(np.linspace(0.5, -0.5, n), np.linspace(0.5, -0.5, n))
    np.fill_diagonal(matrix, np.nan)
    if significant is None:
        significant = np.abs(matrix) > 0.3
    return runs, matrix, plotting.preference_heatmap_figure(matrix, runs, significant, width=width)


def test_heatmap_colours_centred_and_significance_dotted():
    runs, matrix, fig = _heatmap(12)
    ax = fig.axes[0]
    (image,) = ax.get_images()
    rgba = image.get_array()
    assert rgba.shape == (12, 12, 4)
    assert tuple(rgba[3, 3]) == (0.8, 0.8, 0.8, 1.0)  # the diagonal grey
    # positive (row preferred) red, negative blue, the same strength either side of 0
    assert rgba[0, 11, 0] > rgba[0, 11, 2] and rgba[11, 0, 2] > rgba[11, 0, 0]
    from matplotlib import colormaps

    # one colour scale: every cell off the diagonal its mean's colour, significant or not
    norm = (matrix + 1) / 2  # the largest magnitude is 1: [-1, 1] onto [0, 1]
    off = ~np.eye(12, dtype=bool)
    np.testing.assert_allclose(rgba[off], colormaps["RdBu_r"](norm[off]))
    np.testing.assert_allclose(rgba[0, 11], colormaps["RdBu_r"](1.0))
    np.testing.assert_allclose(rgba[11, 0], colormaps["RdBu_r"](0.0))
    # a dot at (column, row) of each significant cell, and nowhere else
    (dots,) = [c for c in ax.collections if c.get_gid() == "significant"]
    want = {(j, i) for i in range(12) for j in range(12) if abs(matrix[i, j]) > 0.3}
    assert {tuple(map(int, xy)) for xy in dots.get_offsets()} == want
    # black on a light cell (Δ = 0.36, pale red), white on the darkest (Δ = 1)
    colour = {
        tuple(map(int, xy)): tuple(c[:3])
        for xy, c in zip(dots.get_offsets(), dots.get_facecolors())
    }
    assert colour[4, 0] == (0, 0, 0) and colour[11, 0] == (1, 1, 1)
    bar = fig.axes[1]
    assert bar.get_xlim() == pytest.approx((-1.0, 1.0))  # symmetric: the largest |mean|
    assert [t.get_text() for t in ax.get_yticklabels()] == runs  # 12 runs: every name


def test_heatmap_legible_at_150_runs():
    """In a 3.3-inch column the names stay at 4.5 pt or more: every k-th run is named,
    with its rank; on a page (default width) every run, at 5 pt or more."""
    runs, _, fig = _heatmap(150)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_xticklabels()]
    step = int(labels[1].split()[0]) - int(labels[0].split()[0])
    assert labels[0] == "1 run000" and labels[-1] == "150 run149" and 2 < step < 150
    assert len(labels) == len(range(0, 150, step))
    assert all(t.get_fontsize() >= 4.5 for t in ax.get_yticklabels() + ax.get_xticklabels())
    assert tuple(fig.get_size_inches())[0] == pytest.approx(3.3)
    _, _, page = _heatmap(150, width=None)
    assert len(page.axes[0].get_yticklabels()) == 150
    assert all(t.get_fontsize() >= 5 for t in page.axes[0].get_yticklabels())


DOLLARS = ["$$", "$\\input{x}$", "a$b$c", "x\\$y", "$"]
#: names holding control characters, and what a figure draws of them
CONTROLS = {"r\x1b]0;PWNED\x07": "r\\x1b]0;PWNED\\x07", "a\rb\x00": "a\\x0db\\x00"}


def _shown(texts) -> list[str]:
    """What matplotlib draws of each text: its characters, and never mathtext."""
    shown = []
    for text in texts:
        drawn, math = text._preprocess_math(text.get_text())
        assert math is False, text.get_text()
        shown.append(drawn)
    return shown


@pytest.mark.parametrize("fmt", ["svg", "pdf"])
def test_names_with_dollars_are_drawn_literally(fmt):
    """Run and measure names holding ``$`` are drawn as they are (no mathtext, whose
    parser fails on ``$$`` or ``$\\input{x}$``) in every figure that shows them."""
    n = len(DOLLARS)
    matrix = np.full((n, n), 0.5)
    np.fill_diagonal(matrix, np.nan)
    heat = plotting.preference_heatmap_figure(matrix, DOLLARS, np.ones((n, n), bool), width=3.3)
    assert _shown(heat.axes[0].get_yticklabels()) == DOLLARS
    assert plotting.figure_bytes(heat, fmt).startswith(MAGIC.get(fmt, b"<?xml"))
    pairs = itertools.combinations(DOLLARS, 2)
    tau = pd.DataFrame([(a, b, 0.5) for a, b in pairs], columns=["measure_a", "measure_b", "tau"])
    taus = plotting.tau_heatmap_figure(tau)
    assert _shown(taus.axes[0].get_xticklabels()) == DOLLARS
    panels = plotting.discpower_panels_figure(pair_table(measures=DOLLARS))
    legend = panels.axes[0].get_legend()
    assert _shown(legend.get_texts()) == DOLLARS
    grid = plotting.robustness_figure(robustness_table(DOLLARS), layout="grid")
    assert [ax.get_title() for ax in grid.axes if ax.get_visible()][:n] == [
        plotting.plain(name) for name in DOLLARS
    ]
    overlay = plotting.robustness_figure(robustness_table(DOLLARS), layout="overlay")
    assert _shown(overlay.legends[0].get_texts()) == DOLLARS
    for fig in (taus, panels, grid, overlay):
        assert plotting.figure_bytes(fig, fmt)


@pytest.mark.parametrize("fmt", ["svg", "pdf"])
def test_names_with_control_characters_are_drawn_escaped(fmt, recwarn):
    """A name holding control characters is drawn with them escaped, as a terminal shows
    them: no glyph that no font has, and no warning that would print them raw."""
    names = list(CONTROLS)
    n = len(names)
    matrix = np.full((n, n), 0.5)
    np.fill_diagonal(matrix, np.nan)
    heat = plotting.preference_heatmap_figure(matrix, names, np.ones((n, n), bool), width=3.3)
    # the columns' names (after the rank the rows show alone when names are long)
    shown = [text.split(" ", 1)[-1] for text in _shown(heat.axes[0].get_xticklabels())]
    assert shown == list(CONTROLS.values())
    assert plotting.figure_bytes(heat, fmt)
    assert [str(w.message) for w in recwarn if "Glyph" in str(w.message)] == []
