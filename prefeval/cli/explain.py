"""The ``explain`` command: one pair of runs compared level by level, query by query."""

from __future__ import annotations

import click

from ..core.progress import stderr_notice
from ..io.runs import read_qrels
from ..io.writers import (
    READABLE_DIGITS,
    atomic_output,
    terminal,
    write_stdout,
    write_table,
)
from ..present.explain import explain as explain_table
from ..present.explain import to_text
from .checks import command
from .errors import usage_errors
from .params import (
    engine_options,
    judged_options,
    names_option,
    number_type,
    output_option,
    parse_measures_named,
    precision_option,
    qrels_and_runs,
    resolved_runs,
)

#: ``explain -q QUERY``, the spelling of --query up to 0.1.0, still works for one release
OLD_QUERY_NOTICE = (
    "explain -q QUERY is deprecated, use --query QUERY (-q is --per-query in compare and "
    "metrics; explain -q goes in the next release)"
)


@command()
@qrels_and_runs(metavar="RUN_A RUN_B")
@engine_options
@click.option(
    "--query",
    "query_ids",
    multiple=True,
    metavar="QUERY",
    help="Explain this query (repeatable, in the order given). Default: the --top queries.",
)
@click.option(
    "-q",
    "old_queries",
    multiple=True,
    metavar="QUERY",
    hidden=True,
    help="The old spelling of --query (-q is -q/--per-query in compare and metrics).",
)
@click.option(
    "--top",
    type=number_type("top"),
    default=None,
    metavar="N",
    help="The N queries (default 5) with the largest |Delta| under the first measure, "
    "equal ones by query id.",
)
@names_option
@precision_option
@click.option(
    "-f",
    "--format",
    "fmt",
    type=click.Choice(["text", "tsv", "csv", "jsonl", "parquet"], case_sensitive=False),
    default="text",
    show_default=True,
    help="text for people; tsv, csv (header line), jsonl or parquet (binary: -o FILE or a "
    "redirected stdout): one row per query, population and recall level.",
)
@output_option
def explain(qrels, runs, query_ids, old_queries, top, names, precision, fmt, output, **params):
    """Why RUN_A or RUN_B is preferred: the aligned recall levels behind every measure.

    Per query: the value of every measure (as compare -q writes it), the positions of
    the i-th relevant document in A and B at every recall level of the binary
    population with sgn and p(i), the levels deciding lexiprecision and lexirecall,
    then the graded (eq. 5) and subtopic (eq. 6) populations with their weights and
    RPP, summing to the reported values. RUN_A RUN_B may be one Parquet table of two
    runs (a run column): A is the first name in sorted order.

    \b
    Example:
      prefeval explain --query 301 qrels.txt runs/input.a runs/input.b
    """

    if old_queries:
        stderr_notice(OLD_QUERY_NOTICE)
        if query_ids:
            raise click.UsageError("give --query only, not -q (its deprecated spelling) too")
        query_ids = old_queries
    runs = resolved_runs(runs, names)
    count = len(runs)
    if count != 2:
        raise click.UsageError(f"explain compares two runs, RUN_A RUN_B; got {count}")
    if query_ids and top is not None:
        raise click.UsageError("give --query or --top, not both")
    settings = judged_options(params, qrels=qrels, top=top)
    judgments = read_qrels(qrels)
    measure_list = parse_measures_named(settings.measures, judgments.has_subtopics)
    # a wrong query id is reported before the runs are read
    with usage_errors():
        frame = explain_table(judgments, runs, settings, queries=list(query_ids) or None)
    if frame.empty:
        stderr_notice(f"no query has a value of {measure_list[0].name} to explain")
    fmt = fmt.lower()
    if fmt != "text":
        write_table(frame, output, fmt, precision)
        return
    if precision is None and terminal(output):  # read by a person: rounded
        precision = READABLE_DIGITS
    data = to_text(frame, precision, [m.name for m in measure_list]).encode()
    if output is None or output == "-":
        write_stdout([data])
    else:
        with atomic_output(output) as handle:
            handle.write(data)
