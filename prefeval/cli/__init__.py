"""The ``prefeval`` command: a thin click layer over the library.

The console entry point :func:`main` is here; it sets up signals and resource limits
before anything heavy is imported, then imports the group (:mod:`.group`, also
``prefeval.cli.cli``).  The commands live by family (:mod:`.compare`, :mod:`.metrics`,
:mod:`.explain`; :mod:`.analysis`: order, pairs, discpower, tau, agree, robustness, table;
:mod:`.gate`; :mod:`.report`; :mod:`.measures`), with the parameters they share in
:mod:`.params` (the baselines' names in :mod:`.baselines`), the
checks before any computing in :mod:`.checks` and the wording of what stops a command in
:mod:`.errors`.
"""

from __future__ import annotations

import signal
import sys
import warnings

from ..core import limits, signals
from ..core.terminal import shown


def __getattr__(name: str):
    """``prefeval.cli.cli``, the click group, imported on first use (after :func:`main`
    has set the limits it needs)."""
    if name == "cli":
        from .group import cli

        return cli
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Python's warnings (a library's, such as matplotlib's) as Python writes them, with
    their control characters escaped when the stream is a terminal
    (:func:`prefeval.core.terminal.shown`): a warning may quote a name from the data."""
    stream = sys.stderr if file is None else file
    if stream is None:
        return
    text = warnings.formatwarning(message, category, filename, lineno, line)
    try:
        stream.write(shown(text, stream))
    except OSError:  # stderr gone: the warning is lost, as Python's own would be
        pass


def _terminate(signum, frame):
    """SIGTERM/SIGHUP unwind like Ctrl-C, so temporary files are removed on the way out."""
    raise SystemExit(128 + signum)


def main(argv=None):
    """Console-script entry point."""
    try:
        if not sys.warnoptions:
            # a safety net only: the cases numpy warns about (empty slices, NaN casts)
            # are handled where they arise, and the tests turn these warnings into errors
            warnings.simplefilter("ignore", RuntimeWarning)
        warnings.showwarning = _show_warning
        for name in ("SIGTERM", "SIGHUP"):
            if hasattr(signal, name):
                signal.signal(getattr(signal, name), _terminate)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, signals.interrupt)
        limits.under_address_limit()  # before numpy: see there
        from .group import cli  # the commands, each imported when used

        if limits.address_space() is not None:
            # near an address-space limit the library is loaded before any computing,
            # where running short is the one-line message (a C function that could not
            # allocate returns an error without setting one: a SystemError)
            cli.commands.load()
        cli.entry_point = True
        cli.main(args=argv, prog_name="prefeval")
    except KeyboardInterrupt:  # Ctrl-C before click took over
        print("\nAborted!", file=sys.stderr)
        sys.exit(1)
    except Exception as error:  # a resource running out, also in imports: one line
        message = limits.limit_message(error)
        if message is None:
            raise
        print(message, file=sys.stderr)
        sys.exit(2)
