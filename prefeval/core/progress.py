"""Progress on stderr: one bar per command, shown only on a terminal and for long work.

A command (or an API call) opens :func:`command`; each stage of its work (reading
runs, comparing, baselines, HSD trials of one measure, robustness samples) wraps its
loop in :func:`progress_bar`, which relabels and restarts the command's one bar rather
than opening a bar of its own. The bar appears once the command has worked for
:data:`DELAY` seconds in all, whatever the stage, so any command running over about
two seconds shows progress and quick ones print nothing. A stage started inside
another (the comparisons of one robustness sample) counts in the outer stage only.
Bars come from ``tqdm.auto``: a widget in Jupyter, text on a terminal.

A run of alike stages (the HSD trials of each measure) opened in :func:`series` is one
stretch of the bar: labelled ``(k of n)``, counted on without a restart, its total (and
so its rate and ETA) the whole series', each part taken to be as long as the current
one.  What else is written to the terminal while a bar shows (notices,
:func:`stderr_notice`; a table on standard output, :func:`beside_bar`) clears the bar,
is written on lines of its own and draws the bar again below it, so that no frozen
piece of a bar stays on the screen.  Work that is no loop over items (the figures a
report draws in its writers) is a stage counted by hand, :func:`counted`.

On a terminal narrower than :data:`WIDE` columns the bar leaves out the rate (the time
left says as much), so that the bar itself keeps a readable width beside the stage's
label: tqdm shrinks the bar, never the text, down to one character.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable, Sized
from contextlib import contextmanager
from typing import Any

from .terminal import escaped, shown

# seconds of a command's work before its bar appears: short work stays silent
DELAY = 1.0
#: terminals at least this wide show tqdm's own line, the rate included
WIDE = 100
#: the bar's line on a narrower terminal: tqdm's, without the rate
NARROW = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}]"


def _bar_format() -> str | None:
    """:data:`NARROW` where stderr is a terminal narrower than :data:`WIDE` columns (as
    tqdm measures it, on the terminal itself), else None: tqdm's line."""
    try:
        columns = os.get_terminal_size(sys.stderr.fileno()).columns
    except (AttributeError, OSError, ValueError):
        return None
    return NARROW if 0 < columns < WIDE else None


class CommandProgress:
    """The one bar of a command; stages relabel it and restart its count."""

    def __init__(self, enable: bool):
        self.enable = enable
        self.started = time.monotonic()
        self.bar: Any = None  # a tqdm bar (tqdm ships no types) or None
        self.depth = 0  # stages under way (nested ones do not touch the bar)
        self.parts = 0  # stages of the series under way (:func:`series`); 0: none
        self.part = 0  # the stages of it opened so far

    def _shown(self) -> bool:
        bar = self.bar
        return bar is not None and bar.last_print_t >= bar.start_t + bar.delay

    def _open(self, desc: str, unit: str, total) -> Any:
        desc = escaped(desc)  # shown on a terminal only
        if self.parts:
            self.part += 1
            desc = f"{desc} ({self.part} of {self.parts})"
            if self.part > 1 and self.bar is not None:  # the series goes on: no restart
                if total is not None and self.bar.total is not None:
                    self.bar.total = self.bar.n + total * (self.parts - self.part + 1)
                self.bar.set_description_str(desc, refresh=True)
                return self.bar
            if total is not None:
                total *= self.parts
        delay = max(0.0, DELAY - (time.monotonic() - self.started))
        if self.bar is not None and self._shown():
            self.bar.unit = unit
            # tqdm's dynamic miniters grew with the last stage's count (10,000 HSD
            # trials at a time): a stage of a few steps would show none of them
            self.bar.miniters = 0
            self.bar.set_description_str(desc, refresh=False)
            self.bar.reset(total=total)
            return self.bar
        self.close()
        from tqdm.auto import tqdm

        self.bar = tqdm(
            total=total,
            desc=desc,
            unit=unit,
            file=sys.stderr,
            delay=delay,
            leave=False,
            bar_format=_bar_format(),
        )
        return self.bar

    def stage(self, iterable: Iterable, desc: str, unit: str, total=None, count=None):
        """Yield ``iterable``'s items, advancing the bar by ``count(item)`` (default 1)
        after each."""
        if not self.enable or self.depth:
            yield from iterable
            return
        if total is None and count is None and isinstance(iterable, Sized):
            total = len(iterable)
        self.depth += 1
        try:
            bar = self._open(desc, unit, total)
            for item in iterable:
                yield item
                bar.update(count(item) if count is not None else 1)
        finally:
            self.depth -= 1

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    @contextmanager
    def beside(self):
        """The bar cleared while the block writes to the terminal, drawn again after."""
        if not self._shown():
            yield
            return
        with type(self.bar).external_write_mode(file=sys.stderr):
            yield


_current: CommandProgress | None = None


def _terminal() -> bool:
    return sys.stderr.isatty()


@contextmanager
def command(enable: bool | None = None):
    """The progress of one command: ``enable=None`` means when stderr is a terminal."""
    global _current
    if enable is None:
        enable = _terminal()
    mine = CommandProgress(bool(enable))
    outer, _current = _current, mine
    try:
        yield mine
    finally:
        mine.close()
        if _current is mine:  # (another thread's command may have ended meanwhile)
            _current = outer


def progress_bar(
    iterable: Iterable,
    *,
    desc: str,
    unit: str = "it",
    enable: bool | None = None,
    total=None,
    count: Callable | None = None,
):
    """``iterable`` as a stage of the current command's bar (see the module docstring).

    ``enable=False`` turns progress off for this stage; outside any :func:`command`, the
    stage gets a bar of its own (``enable=None``: when stderr is a terminal).
    """
    if enable is False:
        return iterable
    if _current is not None:
        return _current.stage(iterable, desc, unit, total, count)
    return _standalone(iterable, desc, unit, enable, total, count)


def _standalone(iterable, desc, unit, enable, total, count):
    """A stage outside any command: a bar of its own, never the current command's (a
    generator left unfinished, after an error, would otherwise keep that place until it
    is collected, and the bar of whatever ran meanwhile then went to it)."""
    progress = CommandProgress(bool(_terminal() if enable is None else enable))
    try:
        yield from progress.stage(iterable, desc, unit, total, count)
    finally:
        progress.close()


@contextmanager
def counted(total: int, *, desc: str, unit: str = "it"):
    """A stage of ``total`` steps counted by hand (see :func:`progress_bar`): the block
    calls the function it is given after each step."""
    if total < 1:
        yield lambda: None
        return
    steps = iter(progress_bar(range(total), desc=desc, unit=unit, total=total))
    next(steps, None)  # the stage begins, at 0
    try:
        yield lambda: next(steps, None)
    finally:
        close = getattr(steps, "close", None)
        if close is not None:  # a stage left early ends here, not when collected
            close()


@contextmanager
def series(parts: int):
    """The stages opened in the block (at the current command's top level) as ``parts``
    parts of one stretch of the bar (see the module docstring); ``parts`` < 2: as they
    are."""
    progress = _current
    if progress is None or parts < 2 or progress.depth or progress.parts:
        yield
        return
    progress.parts, progress.part = parts, 0
    try:
        yield
    finally:
        progress.parts = progress.part = 0


@contextmanager
def beside_bar():
    """Write to the terminal in the block without breaking the current command's bar:
    the bar is cleared first and drawn again after (nothing to do when none shows)."""
    if _current is None:
        yield
        return
    with _current.beside():
        yield


def stderr_notice(message: str) -> None:
    """``prefeval: message`` on stderr, on a line of its own beside the bar (control
    characters escaped on a terminal: :func:`prefeval.core.terminal.shown`)."""
    with beside_bar():
        print(shown(f"prefeval: {message}", sys.stderr), file=sys.stderr, flush=True)
