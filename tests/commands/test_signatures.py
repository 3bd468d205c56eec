"""Every command's function receives every parameter of the command in its signature
(as sqlite-utils' commands do): nothing reaches it through the click context."""

from __future__ import annotations

import inspect

import click
import pytest

from prefeval.cli.checks import command
from prefeval.cli.group import cli


@pytest.mark.parametrize("name", sorted(cli.list_commands(None)))
def test_every_parameter_is_in_the_signature(name):
    found = cli.get_command(None, name)
    taken = list(inspect.signature(found.callback).parameters)
    assert sorted(p.name for p in found.params) == sorted(taken)
    assert all(p.expose_value for p in found.params)


def test_a_parameter_the_function_does_not_take_is_refused():
    with pytest.raises(TypeError, match="odd does not take its parameters seed"):

        @command("odd")
        @click.option("--seed", default=0)
        def odd():
            pass
