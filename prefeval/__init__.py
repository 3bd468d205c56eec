"""prefeval: preference-based offline evaluation of rankings.

Recall-paired preference (RPP; Diaz & Ferraro, SIGIR 2022), lexicographic recall
(Diaz & Mitra) and lexicographic precision (Diaz, EVIA 2023), computed directly
between pairs of TREC runs, trec_eval style.

``prefeval.compare``, ``metrics``, ``order``, ``discpower``, ``tau``, ``agree``,
``robustness``, ``pairs`` and ``explain`` (:mod:`prefeval.api`) return the DataFrame the
command of the same name writes; ``prefeval.report`` writes the report.  ``dir(prefeval)``
lists them (a notebook's tab completion offers them), and each one's docstring has an
example on the sample data.

>>> import prefeval
>>> prefeval.compare("sample_data/qrels.txt",
...                  ["sample_data/runs/input.sys01", "sample_data/runs/input.sys02"],
...                  measures="rpp")
  measure  run_a  run_b query_id    value
0     rpp  sys01  sys02      all -0.25082

Heavy modules are imported lazily (``lazy_loader``: the names below are imported on
first use) so that ``import prefeval`` and ``prefeval --help`` stay fast.
"""

from __future__ import annotations

import lazy_loader

from ._version import __version__

#: module -> the names ``prefeval`` exports from it, imported on first use
_EXPORTS = {
    "api": [
        "compare",
        "metrics",
        "order",
        "discpower",
        "tau",
        "agree",
        "robustness",
        "pairs",
        "explain",
        "report",
    ],
    "core.errors": ["PrefevalWarning", "InputError"],
    "core.cube": ["PreferenceCube"],
    "io.runs": ["read_qrels", "read_run"],
    "core.qrels": ["Qrels"],
    "core.positions": ["RunPositions"],
    "measures": ["MEASURES", "parse_measures"],
}

__getattr__, _, _ = lazy_loader.attach(__name__, submod_attrs=_EXPORTS)
__all__ = ["__version__", *(name for names in _EXPORTS.values() for name in names)]


def __dir__() -> list[str]:
    """The public names (``dir(prefeval)``, a notebook's tab completion)."""
    return list(__all__)
