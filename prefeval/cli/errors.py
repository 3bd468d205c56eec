"""How the ``prefeval`` command reports what stops it: an option error as the usage
error of its flag, input errors as ``FILE:LINE: message``, output and resource failures
as one ``prefeval: ...`` line; exit status 2, never a traceback."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager

import click

from ..core import limits, progress
from ..core.errors import CacheSettingError, InputError, OutputError, SystemLimitError
from ..core.terminal import shown
from ..options import OptionError


def _param(ctx, keyword: str):
    """The command's click parameter of the judge's ``keyword``: named so, or with the
    flag ``--KEYWORD`` (``-`` for ``_``)."""
    flag = "--" + keyword.replace("_", "-")
    for param in ctx.command.params:
        if param.name == keyword or flag in param.opts:
            return param
    return None


def namer(ctx):
    """How the CLI words an option in an :class:`OptionError`: by its flags, taken from
    the click parameter (``-l/--relevance-level``; ``--engine dask`` with a value)."""

    def name(keyword: str, value: str | None) -> str:
        param = _param(ctx, keyword)
        flag = keyword if param is None else "/".join(param.opts)
        if value is None or getattr(param, "is_flag", False):
            return flag
        return f"{flag} {value.strip(chr(39))}"

    return name


def usage_error(error: OptionError, ctx=None) -> click.UsageError:
    """An :class:`OptionError` as the usage error of the flag it names (exit status 2)."""
    ctx = ctx or click.get_current_context()
    param = _param(ctx, error.field) if error.about_value else None
    if param is not None:
        return click.BadParameter(error.worded(namer(ctx)), ctx=ctx, param=param)
    return click.UsageError(error.worded(namer(ctx)), ctx=ctx)


@contextmanager
def usage_errors():
    """Library ValueErrors about arguments (unknown measure, bad level...) become usage
    errors, exit status 2; input errors (``FILE:LINE: ...``) pass through."""

    try:
        yield
    except InputError:
        raise
    except OptionError as error:
        raise usage_error(error) from None
    except ValueError as error:
        raise click.UsageError(str(error)) from None


def echo_error(message: str) -> None:
    """A line on stderr, control characters escaped on a terminal
    (:func:`prefeval.core.terminal.shown`)."""
    click.echo(shown(message, sys.stderr), err=True)


class PrefevalGroup(click.Group):
    """Turns input errors into ``FILE:LINE: message`` on stderr and exit status 2, and
    output failures into ``prefeval: cannot write FILE: reason`` (exit status 2)."""

    #: True in the console script (:func:`prefeval.cli.main`), not in the library or
    #: click's test runner
    entry_point = False

    def invoke(self, ctx):

        try:
            # one bar for the command, on a terminal only
            with progress.command():
                return super().invoke(ctx)
        except InputError as error:
            echo_error(str(error))
            ctx.exit(2)
        except (OutputError, CacheSettingError, SystemLimitError) as error:
            echo_error(f"prefeval: {error}")
            if isinstance(error, SystemLimitError) and self.entry_point:
                # short of a resource, a library's threads may abort the interpreter's
                # shutdown (SIGABRT after the message): leave at once, status 2
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(2)
            ctx.exit(2)
        except MemoryError:
            click.echo(limits.out_of_memory_message(), err=True)
            ctx.exit(2)
        except click.ClickException as error:  # a usage error: click writes it
            error.message = shown(error.message, sys.stderr)
            raise
