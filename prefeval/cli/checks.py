"""The ``prefeval`` command class and the checks made before any computing: inputs,
``-o``, ``--plot`` and matplotlib, ``--against`` where every pair is needed."""

from __future__ import annotations

import inspect
import os
import sys

import click

from ..engine import cache
from ..io.writers import check_output, output_target
from ..present import plots as plotting
from ..present.plots import require

#: the parameters naming input files (QRELS, RUN..., --prefs, --metrics)
INPUT_PARAMS = ("qrels", "runs", "inputs", "prefs", "metrics_file")


def input_paths(values: dict) -> list:
    """The paths given to the input parameters among a command's parameter ``values``
    (None where one is not given)."""
    return [
        path
        for name in INPUT_PARAMS
        for value in [values.get(name)]
        for path in (value if isinstance(value, (list, tuple)) else [value])
    ]


class PrefevalCommand(click.Command):
    """A ``prefeval`` command. Its function takes every parameter of the command: by name
    those its body uses, the others (the judge's keywords, the same for a family of
    commands) in its ``**params``, which :func:`~prefeval.cli.params.judged_options`
    judges into its :class:`~prefeval.options.Options` (a TypeError when it takes no
    ``**params`` and leaves out a parameter: none reaches it another way). Checks before
    any computing: ``-`` (standard input) stands for one input only, as in trec_eval;
    ``-o`` is writable and not one of the inputs."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        taken = inspect.signature(self.callback).parameters
        if any(p.kind is p.VAR_KEYWORD for p in taken.values()):
            return  # every parameter not named reaches it in **params
        hidden = [p.name for p in self.params if p.expose_value and p.name not in taken]
        if hidden:
            raise TypeError(f"{self.name} does not take its parameters {', '.join(hidden)}")

    def invoke(self, ctx):

        cache.max_bytes()  # a bad PREFEVAL_CACHE_MAX_GB is reported before any work
        values = ctx.params
        inputs = input_paths(values)
        if sum(1 for path in inputs if path == "-") > 1:
            raise click.UsageError("'-' (standard input) may be given for one input only")
        output = values.get("output")
        if output == "":
            raise click.UsageError("-o needs a file name ('-' for standard output)")
        fmt = values.get("fmt")
        if fmt is not None and fmt.lower() == "parquet" and output in (None, "-"):
            if sys.stdout.isatty():
                raise click.UsageError("-f parquet writes binary: give -o FILE or redirect")
        if output is not None and output != "-":
            target = output_target(output)
            for path in inputs:
                if path is None or path == "-" or not os.path.exists(path):
                    continue
                if os.path.exists(target) and os.path.samefile(path, target):
                    raise click.UsageError(
                        f"-o {output} would overwrite the input {path}; choose another file"
                    )
            check_output(output)
        return super().invoke(ctx)


def command(name: str | None = None):
    """Decorator of a ``prefeval`` command (a :class:`PrefevalCommand`), added to the
    group by :mod:`prefeval.cli`."""
    return click.command(name, cls=PrefevalCommand)


def no_against(against, command, why):
    """A usage error when ``--against`` is given to a command that needs every pair."""
    if against:
        raise click.UsageError(
            f"--against: {command} {why}, so it needs every pair of runs; drop --against"
        )


def require_matplotlib(what: str) -> None:
    """A usage error when matplotlib is missing (:func:`prefeval.present.plots.require`)."""

    try:
        require(what)
    except ImportError as error:
        raise click.UsageError(str(error)) from None


def plotting_for(plot, output, inputs):
    """The plotting module for --plot FILE (None without it), checked before any computing:
    matplotlib is installed and FILE is neither -o ``output`` nor one of the ``inputs``
    (paths, None where one is not given)."""
    if plot is None:
        return None
    require_matplotlib("--plot")

    target = output_target(plot)
    if output not in (None, "-") and output_target(output) == target:
        raise click.UsageError(f"--plot {plot} and -o {output} are the same file")
    for path in inputs:
        if path in (None, "-") or not os.path.exists(path) or not os.path.exists(target):
            continue
        if os.path.samefile(path, target):
            raise click.UsageError(f"--plot {plot} would overwrite the input {path}")

    return plotting
