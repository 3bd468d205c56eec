"""One frozen value with every setting of a call, judged once (trec_eval's ``EPI``).

Built by :func:`judge` from the CLI's options or the API's keywords; every rule about an
option is written here once, and a broken one raises :class:`OptionError` naming the
option by its field, which the CLI words with its flag (``-l/--relevance-level``) and the
API with its keyword (``relevance_level=``).  The engine, the analysis and the
presentation read their settings from this value instead of loose parameters.

SKELETON (issue 23 step 2 in progress): the fields below are the shared settings; the
judging rules and the command-specific settings are being added.
"""

from __future__ import annotations

from dataclasses import dataclass

#: query partitions hold at most this many cube cells (queries x pairs x measures)
PARTITION_CELLS = 1 << 22


class OptionError(ValueError):
    """An option's value breaks one of its rules; ``field`` is the API keyword."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


@dataclass(frozen=True)
class Options:
    """The settings of one call (defaults: the commands' defaults)."""

    measures: tuple[str, ...] = ()  # preference measure names as given (-m)
    relevance_level: float | None = None  # relevant means grade >= level (-l)
    max_docs: int | None = None  # each ranking's top K (-M)
    binary: bool = False  # binary RPP (--binary)
    per_query: bool = False  # per-query rows (-q)
    summary: bool = True  # summary rows (not -n)
    against: tuple[str, ...] = ()  # only the pairs (a, RUN) (--against)
    both_directions: bool = False  # each pair then its reverse
    engine: str = "local"  # local or dask (--engine)
    scheduler: str | None = None  # Dask scheduler address (--scheduler)
    cache: bool = True  # read and write the cache of reduced runs (not --no-cache)
    progress: bool | None = False  # tqdm bars; None: the command's bar on a terminal
    partition_cells: int = PARTITION_CELLS  # largest query partition, in cube cells
