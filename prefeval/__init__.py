"""prefeval: preference-based offline evaluation of rankings.

Recall-paired preference (RPP; Diaz & Ferraro, SIGIR 2022), lexicographic recall
(Diaz & Mitra) and lexicographic precision (Diaz, EVIA 2023), computed directly
between pairs of TREC runs, trec_eval style.

``prefeval.compare``, ``metrics``, ``order``, ``discpower``, ``tau``, ``agree``,
``robustness``, ``pairs`` and ``explain`` (:mod:`prefeval.api`) return the DataFrame the
command of the same name writes; ``prefeval.report`` writes the report.

Heavy modules are imported lazily so that ``import prefeval`` and ``prefeval --help``
stay fast.
"""

from __future__ import annotations

from importlib import import_module

from ._version import __version__

_LAZY = {
    "compare": "prefeval.api",
    "metrics": "prefeval.api",
    "order": "prefeval.api",
    "discpower": "prefeval.api",
    "tau": "prefeval.api",
    "agree": "prefeval.api",
    "robustness": "prefeval.api",
    "pairs": "prefeval.api",
    "explain": "prefeval.api",
    "report": "prefeval.api",
    "PrefevalWarning": "prefeval.core.errors",
    "PreferenceCube": "prefeval.core.cube",
    "read_qrels": "prefeval.io.runs",
    "read_run": "prefeval.io.runs",
    "Qrels": "prefeval.core.qrels",
    "RunPositions": "prefeval.core.positions",
    "InputError": "prefeval.core.errors",
    "MEASURES": "prefeval.measures",
    "parse_measures": "prefeval.measures",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'prefeval' has no attribute {name!r}")
