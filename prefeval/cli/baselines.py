"""The baselines' names as the commands take them (``-B``, ``metrics -m``), checked by
the baselines' registry (:mod:`prefeval.analysis.baselines`, which imports ir-measures):
imported by the commands that compute baselines, not by ``compare``."""

from __future__ import annotations

from ..analysis.baselines import parse_baselines
from .errors import usage_errors


def baseline_names(baselines):
    """Canonical names of the -B/-m values (map -> AP), each once; usage error otherwise."""
    with usage_errors():
        return [b.name for b in parse_baselines(baselines)]
