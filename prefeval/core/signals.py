"""Signals held while a piece of work that must not be cut short runs."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType


class SignalsHeld:
    """Context manager: in the main thread, the signals handled in Python (Ctrl-C's
    SIGINT; SIGTERM and SIGHUP under the command) held while the body runs, so that the
    body is done whole (an import, a local Dask cluster started or closed);
    :meth:`deliver` then hands the first one that came to its handler.  A second one is
    handled at once (a body that hangs can still be interrupted)."""

    def __init__(self) -> None:
        self.handlers: dict[int, Callable[[int, FrameType | None], object]] = {}
        self.pending: tuple[int, FrameType | None] | None = None

    def __enter__(self) -> SignalsHeld:
        if threading.current_thread() is threading.main_thread():
            for name in ("SIGINT", "SIGTERM", "SIGHUP"):
                signum = getattr(signal, name, None)
                if signum is None:
                    continue
                handler = signal.getsignal(signum)
                if callable(handler):
                    self.handlers[signum] = handler
                    signal.signal(signum, self._hold)
        return self

    def _hold(self, signum: int, frame: FrameType | None) -> None:
        if self.pending is None:
            self.pending = (signum, frame)
            return
        # a second one (a body that hangs): handled at once
        self.__exit__()
        self.pending = None
        self.handlers[signum](signum, frame)

    def __exit__(self, *exc) -> None:
        for signum, handler in self.handlers.items():
            signal.signal(signum, handler)

    def deliver(self) -> None:
        """The held signal, if one came, handed to its handler (which may raise)."""
        if self.pending is not None:
            signum, frame = self.pending
            self.pending = None
            self.handlers[signum](signum, frame)


def interrupt(signum: int, frame: FrameType | None) -> None:
    """Ctrl-C's handler: KeyboardInterrupt, as Python's own handler raises it, except
    while the callback importlib runs when a module's lock is freed is on the stack.
    An exception raised there cannot propagate: Python prints it as ignored, with its
    traceback, and goes on.  Then the interrupt comes back a millisecond later (a timer's
    SIGALRM to this handler), to be raised once that callback has returned."""
    if _freeing_a_module_lock(frame) and hasattr(signal, "setitimer"):
        signal.signal(signal.SIGALRM, interrupt)
        signal.setitimer(signal.ITIMER_REAL, 0.001)
        return
    raise KeyboardInterrupt


def _freeing_a_module_lock(frame: FrameType | None) -> bool:
    while frame is not None:
        code = frame.f_code
        if code.co_name == "cb" and code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False
