"""The report command: the whole study in one document."""

from __future__ import annotations

import click

from .. import options
from ..io.writers import check_output
from ..present.report import check_targets, output_paths
from .analysis import run_analysis
from .checks import command, require_matplotlib
from .errors import usage_errors
from .params import analysis_options, number_type, samples_option, significance_options


@command()
@analysis_options(
    against="Add the section 'Against the reference': the table of `prefeval gate "
    "--against RUN` (one run) on the report's measures, with its defaults "
    f"({options.default('tests', 'gate')[0]}, {options.default('correction', 'gate')}, "
    f"the report's --alpha, at least {options.default('min_queries')} queries).",
    outputs=False,
)
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False, writable=True),
    help="The report: FILE.html (one self-contained page), FILE.md or FILE.tex; the "
    "figures of .md and .tex are written beside it as FILE-<figure>.svg or .pdf, and past "
    "10 runs each preference matrix as FILE-matrix-<measure>.csv.",
)
@significance_options
@click.option(
    "--robustness",
    is_flag=True,
    help="Add the robustness curves: 10%, 25%, 50%, 75% of the queries, and of the "
    "relevant labels (from QRELS RUN... only).",
)
@samples_option
@click.option(
    "-p",
    "--precision",
    "digits",
    type=number_type("digits"),
    default=options.default("digits"),
    show_default=True,
    help="Decimals of the preferences and taus in the tables.",
)
@click.option(
    "--sections",
    metavar="NAME[,NAME...]",
    default=",".join(options.default("sections")),
    show_default=True,
    help="The sections to print, in this order whatever the order given; those that "
    "apply: 'against' needs --against, 'robustness' --robustness, 'tau' two measures, "
    "'baselines' a baseline. The sections left out are not computed.",
)
def report(inputs, prefs, metrics_file, names, output, **params):
    """The whole study in one document: HTML, Markdown or LaTeX.

    A summary (each measure's first run and how many runs it beats significantly, the
    baseline agreeing least); the runs x measures table of `prefeval table`; the data;
    the baselines' means per run with significance marks; per preference measure the
    runs x runs matrix of mean preference with significance marks (past 10 runs a heat
    map, the numbers in FILE-matrix-<measure>.csv) and its MC4 ordering beside each
    baseline's; discriminative power (table and curves); Kendall's tau between all
    measures (a heat map; in .tex a table when it fits); agreement and ties; with
    --robustness the robustness curves; with --against RUN, after the data, each run
    against RUN as `prefeval gate` tests it; the references. The format comes from the
    extension of -o: .html is one self-contained page; .md and .tex get their figures
    written beside them (FILE-<figure>.svg, FILE-<figure>.pdf), .tex its references'
    BibTeX (FILE-references.bib). In .tex, when a run name is longer than 14 characters
    every run goes by a short name, and a table after the data maps the short names to
    the full ones. --sections keeps only the sections named.

    \b
    Example:
      prefeval report -o report.html qrels.txt runs/input.*
    """

    with usage_errors():
        check_targets(output, [*inputs, prefs, metrics_file])  # before any computing
    require_matplotlib("report")

    for path in output_paths(output)[:-1]:  # the figures: -o itself is checked already
        check_output(path)
    run_analysis("report", inputs, prefs, metrics_file, names, params, output=output)
