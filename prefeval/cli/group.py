"""The ``prefeval`` group: every command added to it, by family."""

from __future__ import annotations

import click

from .._version import __version__
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
