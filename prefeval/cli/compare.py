"""The ``compare`` command: the preference of every pair of runs on the judgments."""

from __future__ import annotations

import click

from ..core.cube import against_pairs
from ..core.progress import stderr_notice
from ..engine.engines import engine_for
from ..engine.job import Job, compare_tables
from ..io.runs import read_qrels
from ..io.writers import write_frames
from .checks import command
from .errors import usage_errors
from .params import (
    against_option,
    dask_options,
    engine_options,
    format_option,
    judged_options,
    names_option,
    output_option,
    parse_measures_named,
    precision_option,
    qrels_and_runs,
    resolved_runs,
    rows_options,
)


@command()
@qrels_and_runs
@engine_options
@rows_options
@against_option
@names_option
@click.option(
    "--both-directions",
    is_flag=True,
    help="Also write each pair reversed (Delta(b, a) = -Delta(a, b)): a runs x runs matrix.",
)
@dask_options
@precision_option
@format_option
@output_option
def compare(qrels, runs, names, precision, fmt, output, **params):
    """Preference of every pair of RUNs on QRELS.

    Rows are `measure run_a run_b query_id value`, run_a before run_b in command
    line order; value > 0 means run_a is preferred. Without -q only the summary
    rows (query_id `all`: mean over evaluated queries) are written.

    --against RUN keeps the pairs (a, RUN); --both-directions writes each pair,
    then the same pair reversed.

    \b
    Example:
      prefeval compare -q -m rpp,lexirecall qrels.txt runs/input.* > prefs.tsv
    """

    runs = resolved_runs(runs, names)
    names = list(runs)
    if len(names) < 2:
        raise click.UsageError("need at least two runs to compare")
    settings = judged_options(params, qrels=qrels)
    computing = engine_for(settings)
    computing.prepare()  # before anything is read (Dask: the client's memory)
    judgments = read_qrels(qrels)
    measure_list = parse_measures_named(settings.measures, judgments.has_subtopics)
    pairs = None
    if settings.against:
        with usage_errors():
            pairs = against_pairs(names, settings.against)
    job = Job(judgments, runs, measure_list, settings, pairs, stderr_notice)
    del judgments  # the job holds the judgments (on Dask, the tasks)
    with usage_errors():  # one query partition at a time: memory bounded by a partition
        frames, _ = compare_tables(
            computing, job, settings.per_query, settings.summary, settings.both_directions
        )
    write_frames(frames, output, fmt.lower(), precision)
