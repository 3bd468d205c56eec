"""Every command's function receives every parameter of the command (as sqlite-utils'
commands do): by name those its body uses, the judge's keywords in its ``**params``, which
it hands to the judge; nothing reaches it through the click context."""

from __future__ import annotations

import inspect

import click
import pytest
from click.testing import CliRunner

from prefeval import options
from prefeval.cli.checks import command
from prefeval.cli.group import cli
from prefeval.cli.params import judged_options


@pytest.mark.parametrize("name", sorted(cli.list_commands(None)))
def test_every_parameter_is_named_or_gathered_for_the_judge(name):
    found = cli.get_command(None, name)
    taken = inspect.signature(found.callback).parameters
    named = {n for n, p in taken.items() if p.kind is not p.VAR_KEYWORD}
    params = {p.name for p in found.params}
    assert named <= params
    gathered = params - named
    assert gathered <= set(options.KEYWORDS)
    assert not gathered or any(p.kind is p.VAR_KEYWORD for p in taken.values())
    assert all(p.expose_value for p in found.params)


def test_a_parameter_the_function_does_not_take_is_refused():
    with pytest.raises(TypeError, match="odd does not take its parameters seed"):

        @command("odd")
        @click.option("--seed", default=0)
        def odd():
            pass


def invoked(function, *args):
    """The exception of ``function`` as the command ``odd`` with --seed and -o."""
    odd = command("odd")(
        click.option("--seed", default=0)(click.option("-o", "--output")(function))
    )
    return CliRunner().invoke(odd, list(args)).exception


def test_a_judge_keyword_the_function_names_must_reach_the_judge():
    def forgets(seed, output, **params):
        judged_options(params)

    def hands_on(seed, output, **params):
        judged_options(params, seed=seed)

    error = invoked(forgets, "--seed", "3")
    assert isinstance(error, TypeError) and "seed did not reach the judge" in str(error)
    assert invoked(hands_on, "--seed", "3") is None


def test_only_the_judge_keywords_go_in_params():
    def strays(seed, **params):
        judged_options(params, seed=seed)

    error = invoked(strays, "-o", "x")
    assert isinstance(error, TypeError) and "the judge takes no output" in str(error)
