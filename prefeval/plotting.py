"""Figures (optional: ``pip install prefeval[plot]`` for matplotlib)."""

from __future__ import annotations

import numpy as np


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: str) -> None:
    from .writers import atomic_output

    with atomic_output(path) as handle:
        fig.savefig(handle, format="png", dpi=120, bbox_inches="tight")


def discpower_curves(pair_table, path: str) -> None:
    """Sakai's discriminative-power curves: each measure's sorted adjusted p-values,
    one panel per test."""
    plt = _pyplot()
    tests = list(dict.fromkeys(pair_table["test"]))
    fig, axes = plt.subplots(1, len(tests), figsize=(5 * len(tests), 4), squeeze=False)
    for ax, test in zip(axes[0], tests):
        part = pair_table[pair_table["test"] == test]
        for name, rows in part.groupby("measure", sort=False):
            p = np.sort(rows["p_adjusted"].to_numpy())
            ax.plot(np.arange(1, len(p) + 1), p, label=name)
        ax.set_title(f"{test} ({part['correction'].iloc[0]})")
        ax.set_xlabel("run pairs sorted by p-value")
        ax.set_ylabel("p-value")
        ax.set_ylim(0, 1)
        ax.legend(fontsize="small")
    _save(fig, path)
    plt.close(fig)


def robustness_plot(table, path: str) -> None:
    """Kendall's tau against the level, one line per measure, one panel per kind."""
    plt = _pyplot()
    kinds = list(dict.fromkeys(table["kind"]))
    fig, axes = plt.subplots(1, len(kinds), figsize=(5 * len(kinds), 4), squeeze=False)
    for ax, kind in zip(axes[0], kinds):
        part = table[table["kind"] == kind]
        for name, rows in part.groupby("measure", sort=False):
            rows = rows.sort_values("level")
            x, y, s = rows["level"], rows["tau_mean"], rows["tau_std"]
            ax.plot(x, y, marker="o", label=name)
            ax.fill_between(x, y - s, y + s, alpha=0.15)
        ax.set_xlabel("queries kept" if kind == "queries" else "fraction of labels kept")
        ax.set_ylabel("Kendall's tau with the full ordering")
        ax.legend(fontsize="small")
    _save(fig, path)
    plt.close(fig)
