"""Ctrl-C's handler: KeyboardInterrupt at once, or a millisecond later when importlib's
module-lock callback (where an exception cannot propagate) is on the stack."""

from __future__ import annotations

import signal
import sys
import time

import pytest

from prefeval.core import signals

pytestmark = pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="no interval timer")


def _lock_callback_frame():
    """A frame of a function as importlib's ``_get_module_lock`` callback is named."""
    namespace: dict = {}
    source = "import sys\ndef cb():\n    return sys._getframe()\n"
    exec(compile(source, "<frozen importlib._bootstrap>", "exec"), namespace)
    return namespace["cb"]()


def test_ctrl_c_raises_at_once():
    with pytest.raises(KeyboardInterrupt):
        signals.interrupt(signal.SIGINT, sys._getframe())
    with pytest.raises(KeyboardInterrupt):
        signals.interrupt(signal.SIGINT, None)


def test_ctrl_c_while_a_module_lock_is_freed_comes_back_once_it_is():
    old = signal.getsignal(signal.SIGALRM)
    try:
        signals.interrupt(signal.SIGINT, _lock_callback_frame())  # returns: deferred
        assert signal.getitimer(signal.ITIMER_REAL)[0] > 0
        with pytest.raises(KeyboardInterrupt):
            time.sleep(5)  # the timer's signal, to the same handler, outside the callback
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
