"""prefeval: preference-based offline evaluation of rankings.

Recall-paired preference (RPP; Diaz & Ferraro, SIGIR 2022), lexicographic recall
(Diaz & Mitra) and lexicographic precision (Diaz, EVIA 2023), computed directly
between pairs of TREC runs, trec_eval style.

``prefeval.compare``, ``metrics``, ``order``, ``discpower``, ``tau``, ``agree``,
``robustness``, ``pairs``, ``explain``, ``gate`` and ``table`` (:mod:`prefeval.api`) return the
DataFrame the command of the same name writes; ``prefeval.report`` writes the report;
``prefeval.gate(..., check=True)`` raises :class:`Regression` when a run regressed.
``dir(prefeval)`` lists them (a notebook's tab completion offers them), and each one's
docstring has an example on the sample data.

>>> import prefeval
>>> prefeval.compare("sample_data/qrels.txt",
...                  ["sample_data/runs/input.sys01", "sample_data/runs/input.sys02"],
...                  measures="rpp")
  measure  run_a  run_b query_id    value
0     rpp  sys01  sys02      all -0.25082

``import prefeval`` is fast: the functions below are imported on first use (numpy,
pandas and the library with them), by Python's import system, which is safe under
threads; a Ctrl-C in the main thread waits until that import is whole, then interrupts.
"""

from __future__ import annotations

import importlib

from ._version import __version__
from .core.signals import SignalsHeld

#: module -> the names ``prefeval`` exports from it, imported on first use
EXPORTS = {
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
        "gate",
        "table",
    ],
    "core.errors": ["PrefevalWarning", "InputError", "Regression"],
    "core.cube": ["PreferenceCube"],
    "io.runs": ["read_qrels", "read_run"],
    "core.qrels": ["Qrels"],
    "core.positions": ["RunPositions"],
    "measures": ["MEASURES", "parse_measures"],
}

_MODULE_OF = {name: module for module, names in EXPORTS.items() for name in names}
__all__ = ["__version__", *(name for names in EXPORTS.values() for name in names)]


def __dir__() -> list[str]:
    """The public names (``dir(prefeval)``, a notebook's tab completion)."""
    return list(__all__)


def __getattr__(name: str):
    """An exported name, imported on first use (then kept on the package)."""
    if name not in _MODULE_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    held = SignalsHeld()  # Ctrl-C waits until the import is whole, then interrupts
    with held:
        module = importlib.import_module(f"{__name__}.{_MODULE_OF[name]}")
    held.deliver()
    value = globals()[name] = getattr(module, name)
    return value
