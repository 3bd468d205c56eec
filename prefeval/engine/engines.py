"""The one place that chooses the engine from the options (``Options.engine``: ``local``
or ``dask``, ``Options.scheduler`` for the latter)."""

from __future__ import annotations

from collections.abc import Callable

from ..options import Options
from .job import Engine
from .local import LocalEngine


def _dask(options: Options) -> Engine:
    from .dask import DaskEngine  # its module is imported only where Dask computes

    return DaskEngine(options.scheduler)


#: the engines by the name ``--engine`` and ``engine=`` give them, each made from the
#: options
ENGINES: dict[str, Callable[[Options], Engine]] = {
    "local": lambda options: LocalEngine(),
    "dask": _dask,
}


def engine_for(options: Options) -> Engine:
    """The engine ``options.engine`` names (checked when the options were judged), on
    ``options.scheduler`` for Dask."""
    return ENGINES[options.engine](options)
