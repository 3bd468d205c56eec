"""The ``prefeval`` command: a thin click layer over the library.

Heavy libraries (numpy, pandas, pyarrow, scipy, ir-measures) are imported inside
the commands, so ``prefeval --help`` starts fast. The group and the console entry point
are here; the commands live by family (:mod:`.compare`: compare, metrics, explain;
:mod:`.analysis`: order, pairs, discpower, tau, agree, robustness; :mod:`.report`;
:mod:`.measures`), with the parameters they share in :mod:`.params`, the checks before
any computing in :mod:`.checks` and the wording of what stops a command in
:mod:`.errors`.
"""

from __future__ import annotations

import signal
import sys
import warnings

import click

from .._version import __version__
from ..core import limits
from . import analysis, compare, measures, report
from .errors import PrefevalGroup


@click.group(cls=PrefevalGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="prefeval")
def cli():
    """Preference-based offline evaluation of rankings, trec_eval style.

    Compares TREC runs pairwise by the positions of their relevant documents:
    recall-paired preference (RPP and variants), lexirecall and lexiprecision.
    """


for _command in (
    compare.compare,
    analysis.order,
    analysis.discpower,
    analysis.tau,
    analysis.agree,
    analysis.robustness,
    compare.metrics,
    analysis.pairs,
    compare.explain,
    report.report,
    measures.measures,
):
    cli.add_command(_command)


def _terminate(signum, frame):
    """SIGTERM/SIGHUP unwind like Ctrl-C, so temporary files are removed on the way out."""
    raise SystemExit(128 + signum)


def main(argv=None):
    """Console-script entry point."""
    cli.entry_point = True

    if not sys.warnoptions:
        # a safety net only: the cases numpy warns about (empty slices, NaN casts) are
        # handled where they arise, and the tests turn these warnings into errors
        warnings.simplefilter("ignore", RuntimeWarning)

    for name in ("SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), _terminate)
    try:
        limits.under_address_limit()  # before numpy: see there
        cli.main(args=argv, prog_name="prefeval")
    except Exception as error:  # a resource running out, also in imports: one line
        message = limits.limit_message(error)
        if message is None:
            raise
        click.echo(message, err=True)
        sys.exit(2)
