"""The heat maps' geometry in a paper's column (3.3 inches), measured with matplotlib's
renderer on the figure as the report saves it: no two names overlap, all text lies
inside the saved figure, the matrix takes at least 80% of its width, the colour bar is
no taller than the matrix."""

import itertools
import struct

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("matplotlib")

from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402

from prefeval.measures import MEASURES as PREFERENCES  # noqa: E402
from prefeval.present import plots  # noqa: E402

COLUMN = 3.3
#: run names as papers' runs are named, the longest 40 characters
REALISTIC = [
    "contriever-msmarco_k1=0.9_b=0.4",
    "sys016-rerank@100",
    "bm25+rm3-fb8",
    "monot5-3b_k1=0.1_b=0.2",
    "colbertv2+rm3-fb23-dense-hybrid-rrf-k=60",  # 40 characters
    "splade-v2_k1=0.1_b=0.6",
    "tas-b+rm3-fb35",
]
#: the measures a report compares (16): every preference measure and seven baselines
MEASURES = [
    *PREFERENCES,
    "AP",
    "nDCG@10",
    "nDCG@20",
    "P@10",
    "RR",
    "R@1000",
    "Rprec",
]


def run_names(n, short=False):
    """``n`` distinct names: the realistic ones, numbered, or (``short``) at most 16
    characters, as an abbreviating caller passes them."""
    names = [f"{REALISTIC[i % len(REALISTIC)]}#{i}" for i in range(n)]
    names = [name[-40:] for name in names]
    return [name[:12] + f"#{i}" for i, name in enumerate(names)] if short else names


def saved(fig):
    """(width, height) in inches of the figure as the report saves it (the PNG's size at
    150 dots an inch), and the renderer that measured its text."""
    data = plots.figure_bytes(fig, "png")
    width, height = struct.unpack(">II", data[16:24])
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return width / 150, height / 150, canvas.get_renderer()


def shown_labels(ax):
    return [t for t in ax.get_xticklabels() + ax.get_yticklabels() if t.get_text()]


def overlapping(boxes) -> list:
    """The pairs of boxes whose interiors meet (touching edges do not)."""
    return [
        (a, b)
        for a, b in itertools.combinations(boxes, 2)
        if min(a.x1, b.x1) - max(a.x0, b.x0) > 0.01 and min(a.y1, b.y1) - max(a.y0, b.y0) > 0.01
    ]


def check_layout(fig, renderer, width, height):
    """The four rules, each from the drawn geometry; returns the matrix's axes."""
    matrix, bar = fig.axes
    dpi = fig.dpi
    # saved at the size it was laid out at: what lies inside the canvas is inside the file
    assert width == pytest.approx(COLUMN, abs=0.01)
    assert (width, height) == pytest.approx(tuple(fig.get_size_inches()), abs=0.01)
    everything = fig.get_tightbbox(renderer)  # every text and axes, in inches
    assert everything.x0 >= 0 and everything.y0 >= 0
    assert everything.x1 <= width + 1e-6 and everything.y1 <= height + 1e-6
    labels = shown_labels(matrix)
    boxes = [t.get_window_extent(renderer) for t in labels]
    assert overlapping(boxes) == []
    for box in boxes:
        assert 0 <= box.x0 and box.x1 <= width * dpi and 0 <= box.y0 and box.y1 <= height * dpi
    side = matrix.get_window_extent(renderer)
    assert side.width / dpi >= 0.8 * width
    assert side.width == pytest.approx(side.height, rel=1e-3)  # square cells
    assert bar.get_window_extent(renderer).height <= side.height
    assert bar.get_window_extent(renderer).width <= side.width
    return matrix


def heatmap(names):
    n = len(names)
    x = np.linspace(0.4, -0.4, n)
    matrix = np.subtract.outer(x, x)
    np.fill_diagonal(matrix, np.nan)
    return plots.preference_heatmap_figure(matrix, names, np.abs(matrix) > 0.2, width=COLUMN)


@pytest.mark.parametrize("short", [False, True], ids=["40-characters", "16-characters"])
@pytest.mark.parametrize("n", [5, 8, 40, 130])
def test_preference_heatmap_in_a_column(n, short):
    names = run_names(n, short)
    fig = heatmap(names)
    width, height, renderer = saved(fig)
    matrix = check_layout(fig, renderer, width, height)
    tops = [t.get_text() for t in matrix.get_xticklabels() if t.get_text()]
    rows = [t.get_text() for t in matrix.get_yticklabels() if t.get_text()]
    assert len(tops) == len(rows)
    # the first and the last run always named; the others every k-th, or all
    if len(tops) == n and tops[0] == names[0]:
        assert tops == names
    else:
        ranks = [int(text.split(" ", 1)[0]) for text in tops]
        assert ranks[0] == 1 and ranks[-1] == n
        assert tops == [f"{r} {names[r - 1]}" for r in ranks]
        assert rows in (tops, [str(r) for r in ranks])
        steps = set(np.diff(ranks[:-1]))
        assert len(steps) <= 1 and ranks[-1] - ranks[-2] >= max(steps, default=1)
    sizes = {t.get_fontsize() for t in matrix.get_xticklabels() + matrix.get_yticklabels()}
    assert len(sizes) == 1 and 4.5 <= sizes.pop() <= 7


def test_short_names_name_the_rows_at_a_few_runs():
    """Eight runs with names of 16 characters or fewer: every row and column named by
    its run's name alone."""
    names = run_names(8, short=True)
    matrix = heatmap(names).axes[0]
    assert [t.get_text() for t in matrix.get_yticklabels()] == names
    assert [t.get_text() for t in matrix.get_xticklabels()] == names


def test_130_runs_thinned():
    """130 runs in a column: cells of about 1.6 points, too small for a name each."""
    fig = heatmap(run_names(130))
    labels = [t for t in fig.axes[0].get_yticklabels() if t.get_text()]
    assert 10 < len(labels) < 130


@pytest.mark.parametrize("n", [40, 130])
def test_page_colour_bar_no_taller_than_the_matrix(n):
    x = np.linspace(0.4, -0.4, n)
    matrix = np.subtract.outer(x, x)
    np.fill_diagonal(matrix, np.nan)
    fig = plots.preference_heatmap_figure(matrix, run_names(n), np.abs(matrix) > 0.2)
    renderer = saved(fig)[2]
    heat, bar = fig.axes
    assert bar.get_window_extent(renderer).height <= heat.get_window_extent(renderer).height


def tau_table(names):
    rng = np.random.default_rng(len(names))
    rows = [(a, b, rng.uniform(-0.2, 1)) for a, b in itertools.combinations(names, 2)]
    return pd.DataFrame(rows, columns=["measure_a", "measure_b", "tau"])


@pytest.mark.parametrize("n", [11, 16])
def test_tau_heatmap_in_a_column(n):
    names = MEASURES[:n]
    fig = plots.tau_heatmap_figure(tau_table(names), width=COLUMN)
    width, height, renderer = saved(fig)
    matrix = check_layout(fig, renderer, width, height)
    assert [t.get_text() for t in matrix.get_xticklabels()] == names
    # each value written lies inside its cell
    cell = matrix.get_window_extent(renderer).width / n
    for value in matrix.texts:
        assert value.get_window_extent(renderer).width <= cell
