"""The measures command: the registry's listing, or one measure's description."""

from __future__ import annotations

import click

from ..io.writers import write_stdout, write_table
from ..measures import describe, measure_table, parse_measures
from .checks import command
from .errors import usage_errors
from .params import format_option, output_option


@command("measures")
@click.argument("names", nargs=-1)
@click.option(
    "-m",
    "--measure",
    "more",
    multiple=True,
    metavar="NAME[,NAME...]",
    help="Describe this measure, as NAME does; repeatable, comma lists allowed.",
)
@format_option
@output_option(what="Write the listing")
def measures(names, more, fmt, output):
    """The preference measures: name, family, aliases, paper and equation.

    With NAME (or -m NAME), that measure's description instead, as trec_eval -h -m NAME.

    \b
    Example:
      prefeval measures
      prefeval measures dcgRPP
    """
    if not names and not more:
        write_table(measure_table(), output, fmt)
        return
    if output is not None or fmt != "tsv":
        raise click.UsageError("-f/-o write the listing; a measure's description is text")
    with usage_errors():
        chosen = parse_measures([*names, *more], has_subtopics=True)
    write_stdout(["\n".join(describe(m) for m in chosen).encode()])
