"""The ``prefeval`` command: a thin click layer over the library.

Heavy libraries (numpy, pandas, pyarrow, scipy, ir-measures) are imported inside
the commands, so ``prefeval --help`` starts fast.
"""

from __future__ import annotations

import sys

import click

from ._version import __version__

FORMAT_CHOICE = click.Choice(["tsv", "csv", "jsonl"], case_sensitive=False)


class PrefevalGroup(click.Group):
    """Turns input errors into ``FILE:LINE: message`` on stderr and exit status 2."""

    def invoke(self, ctx):
        from .errors import InputError

        try:
            return super().invoke(ctx)
        except InputError as error:
            click.echo(str(error), err=True)
            ctx.exit(2)


@click.group(cls=PrefevalGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="prefeval")
def cli():
    """Preference-based offline evaluation of rankings, trec_eval style.

    Compares TREC runs pairwise by the positions of their relevant documents:
    recall-paired preference (RPP and variants), lexirecall and lexiprecision.
    """


def engine_options(func):
    """Options shared by every command that computes preferences from runs."""
    options = [
        click.option(
            "-m",
            "--measure",
            "measures",
            multiple=True,
            metavar="NAME[,NAME...]",
            help="Preference measure(s); repeatable, comma lists allowed. Default: every "
            "measure the qrels support (rpp dcgrpp invrpp [strpp stdcgrpp stinvrpp] "
            "lexirecall lexiprecision rrlexiprecision). Case-insensitive; aliases RPP, "
            "dcgRPP, invRPP, ST-RPP, LR, sgnLP, rrLP.",
        ),
        click.option(
            "-l",
            "--relevance-level",
            type=float,
            default=None,
            metavar="L",
            help="Relevant means grade >= L (default: grade > 0).",
        ),
        click.option(
            "-M",
            "--max-docs",
            type=click.IntRange(min=1),
            default=None,
            metavar="K",
            help="Keep each ranking's top K documents (after sorting), as trec_eval -M.",
        ),
        click.option(
            "--binary",
            is_flag=True,
            help="Binary RPP (eq. 4): one population, grade >= level. Default is graded "
            "RPP (eq. 5).",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _parse_measures(measures, has_subtopics):
    from .measures import parse_measures

    try:
        return parse_measures(measures, has_subtopics)
    except ValueError as error:
        raise click.UsageError(str(error)) from None


@cli.command()
@click.argument("qrels", type=click.Path(dir_okay=False))
@click.argument("runs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@engine_options
@click.option("-q", "--per-query", is_flag=True, help="Per-query rows, then summary rows.")
@click.option("-n", "--no-summary", is_flag=True, help="Drop the summary rows (query_id all).")
@click.option(
    "-f",
    "--format",
    "fmt",
    type=FORMAT_CHOICE,
    default="tsv",
    show_default=True,
    help="Output format: tsv with a header line, csv with a header line, or JSON lines.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help="Write to FILE atomically (default: stdout).",
)
def compare(
    qrels, runs, measures, relevance_level, max_docs, binary, per_query, no_summary, fmt, output
):
    """Preference of every pair of RUNs on QRELS.

    Rows are `measure run_a run_b query_id value`, run_a before run_b in command
    line order; value > 0 means run_a is preferred. Without -q only the summary
    rows (query_id `all`: mean over evaluated queries) are written.

    \b
    Example:
      prefeval compare -q -m rpp,lexirecall qrels.txt runs/input.* > prefs.tsv
    """
    from .engine import compute_cube, load_runs, stderr_notice
    from .readers import read_qrels
    from .writers import write_table

    if len(runs) < 2:
        raise click.UsageError("need at least two runs to compare")
    judged = read_qrels(qrels)
    measure_list = _parse_measures(measures, judged.has_subtopics)
    relevant = _relevant(judged, relevance_level)
    positions = load_runs(list(runs), relevant, max_docs, notify=stderr_notice)
    cube = compute_cube(positions, relevant, measure_list, binary=binary)
    frame = cube.to_frame(per_query=per_query, summary=not no_summary)
    write_table(frame, output, fmt.lower())


def _relevant(judged, level):
    from .engine import stderr_notice

    relevant = judged.relevant(level)
    if relevant.dropped:
        what = "grade > 0" if level is None else f"grade >= {level:g}"
        stderr_notice(
            f"{len(relevant.dropped)} of {len(relevant.dropped) + relevant.n_queries} queries "
            f"in {judged.name} have no relevant document ({what}) and are not evaluated"
        )
    if relevant.n_queries == 0:
        from .errors import InputError

        raise InputError(judged.name, None, "no query has a relevant document to evaluate")
    return relevant


def main(argv=None):
    """Console-script entry point."""
    cli.main(args=argv, prog_name="prefeval")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
