"""Progress bars on stderr, only when stderr is a terminal and the work is long."""

from __future__ import annotations

import sys

# seconds before a bar appears: short work stays silent
DELAY = 1.0


def progress_bar(iterable, *, desc: str, unit: str = "it", enable: bool | None = None, total=None):
    """Wrap ``iterable`` in a tqdm bar on stderr.

    ``enable=None`` means: only when stderr is a terminal; the bar then appears
    after :data:`DELAY` seconds, so quick work prints nothing.
    """
    if enable is None:
        enable = sys.stderr.isatty()
    if not enable:
        return iterable
    from tqdm.auto import tqdm

    return tqdm(
        iterable, desc=desc, unit=unit, total=total, file=sys.stderr, delay=DELAY, leave=False
    )
