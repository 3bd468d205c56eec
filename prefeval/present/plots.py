"""Figures for papers (optional: ``pip install prefeval[plot]`` for matplotlib).

The ``*_figure`` functions build and return a :class:`matplotlib.figure.Figure`
(no pyplot, no display); :func:`save_figure` writes one as png, pdf or svg, chosen
by the file's extension, and :func:`figure_bytes` / :func:`svg_text` give the
bytes for embedding.  pdf and svg bytes are deterministic (no dates, fixed ids).
"""

from __future__ import annotations

import io
import os
from typing import Any

from ..core.terminal import escaped
from ..io.writers import atomic_output
from ..measures import MEASURES

#: file formats a figure can be written in (the extension of the path, any case)
FORMATS = ("png", "pdf", "svg")
#: more measures than this are drawn as small multiples by robustness_figure
OVERLAY_MAX = 4
_DPI = 150
_PALETTE = "tab10"
_ORDER = (0, 1, 2, 3, 4, 5, 6, 8, 9, 7)  # tab10 with its grey last: grey is for context
#: (preference measures, baselines): the n-th series of a group takes colour n % 10
#: and the (n // 10)-th style of its group, so no (colour, style) pair repeats
_STYLES = (("-", "-."), ("--", ":"))
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*")


def require(what: str) -> None:
    """ImportError naming ``what`` (the option or command) and the extra to install,
    when matplotlib is missing: checked before any computing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ImportError(f"{what} needs matplotlib: pip install 'prefeval[plot]'") from None


def plot_format(path) -> str:
    """The format of ``path`` from its extension; ValueError when it is not one of FORMATS."""
    ext = os.path.splitext(os.fspath(path))[1].lower().lstrip(".")
    if ext not in FORMATS:
        problem = f"'.{ext}' is not a figure format" if ext else "a figure needs an extension"
        raise ValueError(f"{problem}; use .png, .pdf or .svg")
    return ext


def _colours() -> list:
    """The colours of :data:`_PALETTE` in :data:`_ORDER`."""
    from matplotlib import colormaps
    from matplotlib.colors import ListedColormap

    palette = colormaps[_PALETTE]
    # a qualitative map: a tuple of RGB tuples
    assert isinstance(palette, ListedColormap) and isinstance(palette.colors, tuple)
    return [palette.colors[i] for i in _ORDER]


def series_styles(measures) -> dict[str, dict]:
    """Line properties per measure: preference measures solid, baselines dashed; no
    (colour, linestyle) pair repeats for up to 20 measures of each kind."""
    colours = _colours()
    counts = [0, 0]
    styles = {}
    for name in dict.fromkeys(measures):
        group = 0 if name in MEASURES else 1
        n = counts[group]
        counts[group] += 1
        styles[name] = {
            "color": colours[n % len(colours)],
            "linestyle": _STYLES[group][(n // len(colours)) % len(_STYLES[group])],
            "marker": _MARKERS[(n + 5 * group) % len(_MARKERS)],
        }
    return styles


def _figure(**kwargs):
    from matplotlib.figure import Figure

    return Figure(layout="constrained", **kwargs)


def _rc():
    import matplotlib

    return matplotlib.rc_context(
        {
            "svg.hashsalt": "prefeval",
            "font.size": 8,
            "axes.titlesize": 9,
            "legend.fontsize": 8,
            "lines.linewidth": 1.3,
            "lines.markersize": 3.5,
        }
    )


def plain(name) -> str:
    r"""``name`` (a run's or a measure's) as matplotlib draws it literally: each ``$``
    as ``\$``, so that no pair of them starts mathtext (``$$``, ``$\input{x}$``), and
    its control characters escaped as a terminal shows them
    (:func:`prefeval.core.terminal.escaped`: ``\x1b``), not as glyphs no font has."""
    return escaped(str(name)).replace("$", r"\$")


def _legend(fig, styles, extra=()) -> None:
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], label=plain(name), **style) for name, style in styles.items()]
    handles += list(extra)
    ncols = 1 if len(handles) <= 12 else 2
    fig.legend(handles=handles, loc="outside right upper", ncols=ncols)


def _adjustment(correction: str) -> str:
    if correction == "tukey":
        return "p-value (randomized Tukey HSD)"
    if correction in ("none", ""):
        return "p-value (unadjusted)"
    return f"p-value ({correction}-adjusted)"


def discpower_figure(pair_table, alpha: float = 0.05, log: bool = False, ymax=None):
    """Sakai's discriminative-power curves from the ``discpower --pairs`` table: per
    test (one panel each), each measure's adjusted p-values sorted ascending against
    the rank of the run pair, with a horizontal line at ``alpha``.  The linear y axis
    shows [0, ymax] (default 2 alpha, as Sakai draws them: a curve crosses alpha at its
    number of significant pairs); ``log``: the whole range on a log scale, p = 0 drawn
    at the bottom."""
    import numpy as np
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    tests = list(dict.fromkeys(pair_table["test"]))
    styles = {
        name: dict(style, marker=None)
        for name, style in series_styles(pair_table["measure"]).items()
    }
    positive = pair_table["p_adjusted"].to_numpy(dtype=float)
    positive = positive[positive > 0]
    floor = 10.0 ** np.floor(np.log10(positive.min())) if len(positive) else 1e-3
    alpha_style: dict[str, Any] = {"color": "black", "linewidth": 0.9, "linestyle": (0, (1, 1.5))}
    with _rc():
        fig = _figure(figsize=(3.0 * max(1, len(tests)) + 1.8, 2.8))
        axes = fig.subplots(1, max(1, len(tests)), squeeze=False, sharey=True)[0]
        for ax, test in zip(axes, tests):
            part = pair_table[pair_table["test"] == test]
            corrections = list(dict.fromkeys(part["correction"]))
            longest = 1
            for name, rows in part.groupby("measure", sort=False):
                p = np.sort(rows["p_adjusted"].to_numpy(dtype=float))
                if log:
                    p = np.maximum(p, floor)
                ax.plot(np.arange(1, len(p) + 1), p, label=name, **styles[name])
                longest = max(longest, len(p))
            ax.axhline(alpha, gid="alpha", zorder=1, **alpha_style)
            ax.set_title(_TEST_TITLES.get(test, plain(test)))
            ax.set_xlabel("run pairs sorted by p-value")
            ax.set_ylabel(_adjustment(corrections[0]) if len(corrections) == 1 else "p-value")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
            ax.set_xlim(0.5, longest + 0.5)
            ax.grid(True, linewidth=0.3, alpha=0.5)
        if log:
            axes[0].set_yscale("log")
            axes[0].set_ylim(floor / 2, 1.5)
        else:
            axes[0].set_ylim(0, min(1.0, 2 * alpha) if ymax is None else ymax)
        if not tests:
            axes[0].text(0.5, 0.5, "no run pairs", ha="center", transform=axes[0].transAxes)
        _legend(fig, styles, [Line2D([], [], label=f"α = {alpha:g}", **alpha_style)])
    return fig


_TEST_TITLES = {"ttest": "t-test", "sign": "sign test", "hsd": "randomized Tukey HSD"}

#: the titles of the panels of discpower_panels_figure: a preference family, or the baselines
_GROUP_TITLES = {
    "rpp": "RPP (graded)",
    "strpp": "RPP (subtopic)",
    "lexi": "lexicographic",
    "": "baselines",
}
#: p-values below this (p = 0 included) are drawn at it by discpower_panels_figure
P_FLOOR = 1e-4


def measure_group(name: str) -> str:
    """The family of a preference measure (``rpp``, ``strpp``, ``lexi``); ``""`` for a
    baseline."""
    return MEASURES[name].family if name in MEASURES else ""


def discpower_panels_figure(pair_table, alpha: float = 0.05, width: float | None = None):
    """Sakai's discriminative-power curves for many measures, ``width`` inches wide
    (default 3.3 inches a panel): one
    row of panels per test, one column per group of measures (each preference family,
    then the baselines), each measure of a panel in its own colour (labelled in the
    panel) and the other groups' curves in light grey for context.  The p axis is
    logarithmic from :data:`P_FLOOR` to 1; smaller p-values (p = 0 too) are drawn on the
    floor, so the curves that reach 0 stay apart by where they leave it; each curve
    crosses the α line at its number of significant pairs."""
    import numpy as np
    from matplotlib.ticker import FixedLocator, MaxNLocator, NullLocator

    tests = list(dict.fromkeys(pair_table["test"]))
    names = list(dict.fromkeys(pair_table["measure"]))
    groups = list(dict.fromkeys(sorted(map(measure_group, names), key=lambda g: g == "")))
    colours = _colours()
    alpha_style: dict[str, Any] = {"color": "black", "linewidth": 0.8, "linestyle": (0, (1, 1.5))}
    with _rc():
        nrows, ncols = max(1, len(tests)), max(1, len(groups))
        fig = _figure(figsize=(width or 0.5 + 3.3 * ncols, 0.35 + 1.85 * nrows))
        axes = fig.subplots(nrows, ncols, squeeze=False, sharex=True, sharey=True)
        for row, test in enumerate(tests):
            part = pair_table[pair_table["test"] == test]
            sorted_p = {
                name: np.sort(rows["p_adjusted"].to_numpy(dtype=float))
                for name, rows in part.groupby("measure", sort=False)
            }
            for col, group in enumerate(groups):
                ax = axes[row, col]
                own = [name for name in sorted_p if measure_group(name) == group]
                for name, p in sorted_p.items():
                    if name not in own:
                        x = np.arange(1, len(p) + 1)
                        ax.plot(x, np.maximum(p, P_FLOOR), color="0.85", linewidth=0.6, zorder=1)
                for k, name in enumerate(own):
                    p = np.maximum(sorted_p[name], P_FLOOR)
                    style = {"color": colours[k % len(colours)], "linewidth": 1.2}
                    if k >= len(colours):
                        style["linestyle"] = "--"
                    ax.plot(np.arange(1, len(p) + 1), p, label=plain(name), zorder=3, **style)
                ax.axhline(alpha, gid="alpha", zorder=2, **alpha_style)
                ax.set_yscale("log")
                ax.set_ylim(P_FLOOR / 2, 1.6)
                ax.yaxis.set_major_locator(FixedLocator([P_FLOOR, 1e-3, 1e-2, 1e-1, 1.0]))
                ax.yaxis.set_minor_locator(NullLocator())
                ax.set_yticklabels([f"≤{P_FLOOR:g}", "0.001", "0.01", "0.1", "1"])
                ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=4, min_n_ticks=1))
                ax.grid(True, linewidth=0.3, alpha=0.5)
                ax.tick_params(labelsize=7, length=2, pad=1.5)
                if row == 0:
                    ax.set_title(_GROUP_TITLES.get(group, group), fontsize=8)
                if col == 0:
                    ax.set_ylabel(f"p ({_TEST_TITLES.get(test, plain(test))})", fontsize=7)
                if own:
                    ax.legend(loc="lower right", fontsize=7, handlelength=1.2, borderaxespad=0.3,
                              labelspacing=0.2, framealpha=0.85)  # fmt: skip
        fig.supxlabel(f"run pairs sorted by p-value (dotted: α = {alpha:g})", fontsize=7)
        if not tests:
            axes[0, 0].text(0.5, 0.5, "no run pairs", ha="center", transform=axes[0, 0].transAxes)
    return fig


#: the smallest size (points) of a heat map's names in a paper's figure; where the cells
#: are smaller, only every k-th run is named
MIN_LABEL_PT = 4.5
#: the white margin (inches) around a heat map drawn at a given width
_MARGIN = 0.015
_GAP = (
    0.6  # points between two neighbouring names (their measured heights scale not quite linearly)
)


def _text_sizes(fig, texts, size):
    """(width, height) in points of each of ``texts`` drawn upright in ``size`` points
    (a glyph the font lacks is warned of once, when the figure is drawn)."""
    import warnings

    sizes = []
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Glyph .* missing from font", UserWarning)
        for text in texts:
            artist = fig.text(0, 0, text, fontsize=size)
            box = artist.get_window_extent()
            artist.remove()
            sizes.append((box.width * 72 / fig.dpi, box.height * 72 / fig.dpi))
    return sizes


def _tick(step) -> float:
    """The points between a heat map's names and its matrix: a tick 1.5 points long
    when only every ``step``-th run is named, and a 1-point pad."""
    return 2.5 if step > 1 else 1.0


def _shown(n, step) -> list[int]:
    """Every ``step``-th of ``n`` indexes from the first, and the last in place of the
    one before it (which is less than ``step`` before it); only the first when there is
    no room for two."""
    shown = list(range(0, n, step))
    if len(shown) > 1:
        shown[-1] = n - 1
    return shown


def _matrix_layout(fig, ax, names, width, font, min_font=MIN_LABEL_PT):
    """Lay out the square heat map ``ax`` of ``names`` x ``names`` in ``fig``, ``width``
    inches wide, by hand, every size measured by matplotlib: the names on top (upright)
    and on the left in the largest size from ``font`` down to ``min_font`` (in half
    points) at which neighbours do not overlap, past that only every k-th (first and
    last kept, each with its rank); the rows show only ranks when their names would
    leave the matrix less than 80% of the width; a horizontal colour bar under the
    matrix, 60% of its width.  Sets the figure's height; returns (the size of the names,
    the colour bar's axes, the size of its text)."""
    n = max(len(names), 1)
    usable = width - 2 * _MARGIN
    plain_names = [plain(name) for name in names]
    ranked = [plain(f"{i + 1} {name}") for i, name in enumerate(names)]
    ranks = [str(i + 1) for i in range(len(names))]
    reference = _text_sizes(fig, plain_names, 10.0)
    rank_sizes = _text_sizes(fig, ranks, 10.0)
    prefixed = _text_sizes(fig, ranked, 10.0)

    def plan(size, named):
        scale = size / 10.0
        thick = max((h for _, h in reference + prefixed + rank_sizes), default=10.0)
        thick = thick * scale + _GAP
        for step in range(1, n + 1):  # the widest rows' names give the matrix's side
            shown = _shown(n, step) if names else []
            rows = (reference if step == 1 else prefixed) if named else rank_sizes
            left = max((rows[i][0] for i in shown), default=0.0) * scale + _tick(step)
            # the last column's name reaches half its height past the column's middle
            right = max(0.0, thick / 2 - 36 * (usable - left / 72) / n)
            side = usable - (left + right) / 72
            if step * 72 * side / n >= thick:
                return step, shown, side, left
        return n, [0], usable, 0.0

    choice = None
    sizes = [font - 0.5 * k for k in range(int((font - min_font) / 0.5) + 1)]
    for named in (True, False):
        for size in sizes:
            step, shown, side, left = plan(size, named)
            if side >= 0.8 * width and (step == 1 or size == sizes[-1]):
                choice = size, named, step, shown, side, left
                break
        if choice:
            break
    if choice is None:  # the ranks alone at the smallest size
        choice = (sizes[-1], False, *plan(sizes[-1], False))
    size, named, step, shown, side, left = choice
    top_names = [ranked[i] if step > 1 or not named else plain_names[i] for i in shown]
    row_names = top_names if named else [ranks[i] for i in shown]
    ax.set_xticks(shown, top_names, rotation=90, fontsize=size)
    ax.set_yticks(shown, row_names, fontsize=size)
    ax.tick_params(length=_tick(step) - 1, pad=1)
    ax.xaxis.tick_top()
    scale = size / 10.0
    tops = prefixed if step > 1 or not named else reference
    label_top = max((tops[i][0] for i in shown), default=0.0) * scale + _tick(step)
    left /= 72
    bar_pt = min(font, 6.0)
    # above the matrix: the column names; below: the bar, its ticks and its label
    below = 0.06 + 0.07 + (2 + 1.25 * bar_pt + 1.25 * bar_pt) / 72
    height = 2 * _MARGIN + label_top / 72 + side + below
    fig.set_size_inches(width, height)
    x0 = (_MARGIN + left) / width
    ax.set_position([x0, (_MARGIN + below) / height, side / width, side / height])
    bar_ax = fig.add_axes(
        [x0 + 0.2 * side / width, (_MARGIN + below - 0.06 - 0.07) / height,
         0.6 * side / width, 0.07 / height]
    )  # fmt: skip
    return size, bar_ax, bar_pt


def preference_heatmap_figure(matrix, runs, significant, *, width=None, vmax=None,
                              min_font=None, font: float = 7.0):  # fmt: skip
    """A runs x runs matrix (``matrix[i, j]``: the mean preference of ``runs[i]`` over
    ``runs[j]``; NaN on the diagonal) as a heat map: a diverging colour scale centred at
    0 (symmetric, to ``vmax``, default the largest magnitude), a dot in each cell whose
    pair is significant (``significant[i, j]`` true), the diagonal grey.

    ``width`` given (inches, a paper's column): laid out by :func:`_matrix_layout`, the
    matrix at least 80% of the width, the names in ``font`` points or smaller down to
    ``min_font`` (default :data:`MIN_LABEL_PT`), past that every k-th; saved at that
    width.  Default: a page's figure, 0.17 inch a cell up to 50 runs, 11 inches of cells
    past that, the names in ``font`` points or smaller down to ``min_font`` (default 5)
    when the cells are smaller, past that every k-th (its rank shown before its name)."""
    import numpy as np
    from matplotlib import colormaps
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize
    from matplotlib.figure import Figure

    n = len(runs)
    values = np.asarray(matrix, dtype=float)
    top = np.nanmax(np.abs(values)) if n > 1 and np.isfinite(values).any() else 1.0
    top = float(vmax if vmax is not None else (top if top > 0 else 1.0))
    norm = Normalize(-top, top)
    cmap = colormaps["RdBu_r"]
    rgba = cmap(norm(np.nan_to_num(values)))
    rgba[np.isnan(values)] = (0.8, 0.8, 0.8, 1.0)
    marked = np.asarray(significant, dtype=bool) & ~np.isnan(values)
    if width is not None:
        with _rc():
            fig = Figure(figsize=(width, width))
            ax = fig.add_axes((0, 0, 1, 1))
            ax.imshow(rgba, interpolation="nearest", aspect="equal")
            smallest = MIN_LABEL_PT if min_font is None else min_font
            _, bar_ax, bar_pt = _matrix_layout(fig, ax, runs, width, font, smallest)
            _significance_dots(ax, marked, 72 * ax.get_position().width * width / max(n, 1), rgba)
            bar = fig.colorbar(ScalarMappable(norm, cmap), cax=bar_ax, orientation="horizontal")
            bar.set_label("mean Δ(row, column)", fontsize=bar_pt, labelpad=1)
            bar.ax.tick_params(labelsize=bar_pt, length=2, pad=1)
        return fig
    label_width = 0.075 * font * max((len(r) for r in runs), default=1) / 7 + 0.2
    min_font = 5.0 if min_font is None else min_font
    cell = 0.17 if n <= 50 else max(0.075, 11.0 / n)
    width = label_width + 0.75 + cell * max(n, 1)
    side = max(1.0, width - label_width - 0.75)  # the colour bar and its label
    cell_pt = 72 * side / max(n, 1)
    size = min(font, max(min_font, 0.9 * cell_pt))
    step = max(1, int(np.ceil(size / cell_pt)))
    shown = list(range(0, n, step))
    names = [plain(f"{i + 1} {runs[i]}" if step > 1 else runs[i]) for i in shown]
    with _rc():
        fig = _figure(figsize=(width, side + label_width + 0.25))
        ax = fig.subplots()
        ax.imshow(rgba, interpolation="nearest", aspect="equal")
        _significance_dots(ax, marked, cell_pt, rgba)
        ax.set_xticks(shown, names, rotation=90, fontsize=size)
        ax.set_yticks(shown, names, fontsize=size)
        ax.tick_params(length=1.5 if step > 1 else 0, pad=1)
        ax.xaxis.tick_top()
        ax.set_xlabel("column run (MC4 order)", fontsize=font)
        ax.xaxis.set_label_position("top")
        ax.set_ylabel("row run (MC4 order)", fontsize=font)
        bar = fig.colorbar(ScalarMappable(norm, cmap), ax=ax, shrink=0.6, aspect=25, pad=0.02)
        bar.set_label("mean Δ(row, column)", fontsize=font)
        bar.ax.tick_params(labelsize=font)
    return fig


def _significance_dots(ax, marked, cell_pt, rgba) -> None:
    """A dot, a quarter of a cell wide (at most 2.5 points), in each cell of the heat
    map ``ax`` where ``marked`` is true: black on a light cell, white on a dark one
    (``rgba``: the cells' colours; dark: luma below 0.45)."""
    import numpy as np

    rows, cols = np.nonzero(marked)
    luma = rgba[rows, cols, :3] @ np.array([0.299, 0.587, 0.114])
    colours = np.where(luma[:, None] < 0.45, 1.0, 0.0).repeat(3, axis=1)
    diameter = min(2.5, 0.25 * cell_pt)
    ax.scatter(cols, rows, s=diameter**2, c=colours, marker="o", linewidths=0, gid="significant")
    ax.set_xlim(-0.5, marked.shape[1] - 0.5)
    ax.set_ylim(marked.shape[0] - 0.5, -0.5)


_KIND_LABELS = {
    "queries": ("number of queries sampled", "query sampling"),
    "labels": ("fraction of relevant labels kept", "label sampling"),
}


def robustness_figure(table, layout: str = "auto", width: float | None = None):
    """Kendall's tau with the full ordering against the sampling level, one panel per
    kind (queries, labels): mean lines with ±std bands clipped to [-1, 1]
    (``layout="overlay"``), or one small panel per measure with the others in grey
    (``"grid"``); ``"auto"``: overlay up to OVERLAY_MAX measures.  ``width``: the
    figure's width in inches (the grid then has as many columns as fit), default as
    many as the panels need."""
    import numpy as np

    if layout not in ("auto", "overlay", "grid"):
        raise ValueError(f"unknown layout {layout!r}")
    kinds = list(dict.fromkeys(table["kind"]))
    styles = series_styles(table["measure"])
    if layout == "auto":
        layout = "overlay" if len(styles) <= OVERLAY_MAX else "grid"
    curves = {}
    for (kind, name), rows in table.groupby(["kind", "measure"], sort=False):
        rows = rows.sort_values("level")
        x = rows["level"].to_numpy(dtype=float)
        y = rows["tau_mean"].to_numpy(dtype=float)
        s = np.nan_to_num(rows["tau_std"].to_numpy(dtype=float))
        curves[kind, name] = (x, y, np.clip(y - s, -1, 1), np.clip(y + s, -1, 1))
    lows = [c[2].min() for c in curves.values() if len(c[2]) and np.isfinite(c[2]).any()]
    bottom = max(-1.0, np.floor(10 * min(lows)) / 10) if lows else 0.0
    with _rc():
        if layout == "overlay":
            wide = 0.4 + 3.2 * max(1, len(kinds)) + 1.6
            fig = _figure(figsize=(wide if width is None else width, 3.0))
            axes = fig.subplots(1, max(1, len(kinds)), squeeze=False, sharey=True)[0]
            for ax, kind in zip(axes, kinds):
                for name, style in styles.items():
                    if (kind, name) not in curves:
                        continue
                    x, y, low, high = curves[kind, name]
                    ax.plot(x, y, label=name, **style)
                    ax.fill_between(x, low, high, color=style["color"], alpha=0.1, linewidth=0)
                _kind_axes(ax, kind, bottom)
            _legend(fig, styles)
            return fig
        ncols = min(6 if width is None else max(1, int(width // 1.6)), len(styles))
        nrows = -(-len(styles) // ncols)
        panel = 1.85 if width is None else width / ncols
        fig = _figure(figsize=(panel * ncols, (1.55 * nrows + 0.35) * max(1, len(kinds))))
        subfigs = fig.subfigures(max(1, len(kinds)), 1, squeeze=False)[:, 0]
        for sub, kind in zip(subfigs, kinds):
            sub.suptitle(_KIND_LABELS.get(kind, (plain(kind),) * 2)[1], fontweight="bold")
            grid = sub.subplots(nrows, ncols, squeeze=False, sharex=True, sharey=True)
            for ax in grid.flat[len(styles) :]:
                ax.set_visible(False)
            for ax in grid.flat[max(0, len(styles) - ncols) : (nrows - 1) * ncols]:
                ax.xaxis.set_tick_params(labelbottom=True)  # above an empty panel
            for ax, (name, style) in zip(grid.flat, styles.items()):
                for other in styles:
                    if other != name and (kind, other) in curves:
                        ax.plot(*curves[kind, other][:2], color="0.85", linewidth=0.6, zorder=1)
                if (kind, name) in curves:
                    x, y, low, high = curves[kind, name]
                    ax.plot(x, y, zorder=3, label=name, **style)
                    ax.fill_between(
                        x, low, high, color=style["color"], alpha=0.2, linewidth=0, zorder=2
                    )
                ax.set_title(plain(name), pad=2)
                _kind_axes(ax, kind, bottom, labels=False)
            sub.supxlabel(_KIND_LABELS.get(kind, (plain(kind),))[0])
            sub.supylabel("Kendall's τ with the full ordering")
    return fig


def tau_heatmap_figure(table, digits: int = 2, width: float | None = None):
    """Kendall's tau between every pair of measures (the ``tau`` table, rows
    ``measure_a, measure_b, tau``) as a symmetric heatmap, each cell with its value to
    ``digits`` decimals; a diverging scale fixed to [-1, 1], so colours compare across
    reports.  ``width``: the figure's width in inches (a paper's column), laid out by
    :func:`_matrix_layout` (the matrix at least 80% of it, the names in 7 points or
    smaller), the values in the names' size or smaller, written only where they fit in
    their cells in :data:`MIN_LABEL_PT` points or more; default half an inch a cell."""
    import numpy as np
    from matplotlib.figure import Figure

    names = list(dict.fromkeys([*table["measure_a"], *table["measure_b"]]))
    n = len(names)
    where = {name: i for i, name in enumerate(names)}
    matrix = np.eye(n)
    for a, b, t in table[["measure_a", "measure_b", "tau"]].itertuples(index=False):
        matrix[where[a], where[b]] = matrix[where[b], where[a]] = t
    with _rc():
        if width is None:
            side = 1.4 + 0.5 * max(n, 2)  # half an inch a cell: values stay legible
            size = 8 if n <= 8 else 7
            fig = _figure(figsize=(side + 1.0, side))
            ax = fig.subplots()
        else:
            fig = Figure(figsize=(width, width))
            ax = fig.add_axes((0, 0, 1, 1))
        image = ax.imshow(np.ma.masked_invalid(matrix), cmap="RdBu_r", vmin=-1, vmax=1)
        if width is None:
            labels = [plain(name) for name in names]
            ax.set_xticks(range(n), labels, rotation=45, ha="right", rotation_mode="anchor")
            ax.set_yticks(range(n), labels)
            written = True
        else:
            size, bar_ax, bar_pt = _matrix_layout(fig, ax, names, width, 7.0)
            cell_pt = 72 * ax.get_position().width * width / max(n, 1)
            size = min(size, cell_pt / (0.62 * (digits + 3)))  # the values fit their cells
            written = size >= MIN_LABEL_PT
        for i in range(n if written else 0):
            for j in range(n):
                value = matrix[i, j]
                text = "" if np.isnan(value) else f"{value:.{digits}f}"
                if text.lstrip("-") == f"{0:.{digits}f}":
                    text = f"{0:.{digits}f}"  # never -0.00
                dark = not np.isnan(value) and abs(value) > 0.6
                ax.text(j, i, text, ha="center", va="center", fontsize=size,
                        color="white" if dark else "black")  # fmt: skip
        ax.tick_params(length=0)
        if width is None:
            fig.colorbar(image, ax=ax, shrink=0.8, label="Kendall's τ")
        else:
            bar = fig.colorbar(image, cax=bar_ax, orientation="horizontal")
            bar.set_label("Kendall's τ", fontsize=bar_pt, labelpad=1)
            bar.ax.tick_params(labelsize=bar_pt, length=2, pad=1)
    return fig


def _kind_axes(ax, kind, bottom, labels=True) -> None:
    ax.set_ylim(bottom, 1.05)
    ax.axhline(1.0, color="black", linewidth=0.6)
    ax.grid(True, linewidth=0.3, alpha=0.5)
    if labels:
        ax.set_title(_KIND_LABELS.get(kind, (plain(kind),) * 2)[1])
        ax.set_xlabel(_KIND_LABELS.get(kind, (plain(kind),))[0])
        ax.set_ylabel("Kendall's τ with the full ordering")
        ax.label_outer()


def figure_bytes(fig, fmt: str) -> bytes:
    """The figure in ``fmt`` (png, pdf, svg); pdf and svg without dates, so the same
    figure gives the same bytes."""

    fmt = fmt.lower()
    if fmt not in FORMATS:
        raise ValueError(f"unknown figure format {fmt!r}; use one of {', '.join(FORMATS)}")
    metadata = {"png": None, "pdf": {"CreationDate": None}, "svg": {"Date": None}}[fmt]
    # a figure laid out by hand (no layout engine: the heat maps at a given width) holds
    # all its text already and is saved at its own size
    tight = "tight" if fig.get_layout_engine() is not None else None
    buffer = io.BytesIO()
    with _rc():
        fig.savefig(buffer, format=fmt, dpi=_DPI, bbox_inches=tight, metadata=metadata)
    return buffer.getvalue()


def svg_text(fig) -> str:
    """The figure as SVG text, for embedding in HTML."""
    return figure_bytes(fig, "svg").decode("utf-8")


def save_figure(fig, path) -> None:
    """Write ``fig`` to ``path`` in the format of its extension, atomically (nothing is
    left behind on failure)."""

    data = figure_bytes(fig, plot_format(path))
    with atomic_output(path) as handle:
        handle.write(data)


def discpower_curves(pair_table, path, alpha: float = 0.05, log: bool = False) -> None:
    """discpower_figure written to ``path`` (png, pdf or svg)."""
    save_figure(discpower_figure(pair_table, alpha=alpha, log=log), path)


def robustness_plot(table, path, layout: str = "auto") -> None:
    """robustness_figure written to ``path`` (png, pdf or svg)."""
    save_figure(robustness_figure(table, layout=layout), path)
