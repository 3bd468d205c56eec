"""One source of every default: each command's click options and each API function's
keywords show the default :func:`prefeval.options.default` gives for that command (the
:class:`~prefeval.options.Options` field's, or the command's own in
:data:`~prefeval.options.COMMAND_DEFAULTS`), or None: not given, judged by
:func:`prefeval.options.judge` (the cache from the environment, the usable CPUs, the
command's tests...)."""

from __future__ import annotations

import inspect

import click
import pytest

import prefeval
from prefeval import api
from prefeval.cli.group import cli
from prefeval.options import COMMAND_DEFAULTS, FIELDS, Options, default, judge

#: parameters named as a field that mean something else: (command, name) -> why
OTHER_MEANING = {
    ("explain", "queries"): "the query ids to explain, not robustness' numbers of queries",
}
#: click's "no default" (click >= 8.3; older versions give None)
UNSET = getattr(click.core, "UNSET", None)
#: an API keyword named otherwise than its field
FIELD_OF = {"test": "tests", "pairs": "per_pair"}


def _expected(field: str, command: str, value):
    """The command's default of ``field`` in the shape ``value`` has (one test)."""
    wanted = default(field, command)
    if field == "tests" and isinstance(value, str):
        return wanted[0] if len(wanted) == 1 else None
    if field == "sections" and isinstance(value, str):
        return ",".join(wanted)
    return wanted


def _cli_defaults():
    for name in sorted(cli.list_commands(None)):
        command = cli.get_command(None, name)
        ctx = click.Context(command)
        for param in command.params:
            if param.name in FIELDS and (name, param.name) not in OTHER_MEANING:
                value = param.get_default(ctx, call=True)
                if value is UNSET:  # no default: click gives () or False, judged
                    value = None
                if isinstance(value, list):
                    value = tuple(value)
                yield name, param.name, value


def _api_defaults():
    for name in api.__all__:
        for param in inspect.signature(getattr(api, name)).parameters.values():
            field = FIELD_OF.get(param.name, param.name)
            if field in FIELDS and (name, param.name) not in OTHER_MEANING:
                if param.default is not inspect.Parameter.empty:
                    yield name, field, param.default


CLI = list(_cli_defaults())
API = list(_api_defaults())


@pytest.mark.parametrize(("command", "field", "value"), CLI, ids=[f"{c}-{f}" for c, f, _ in CLI])
def test_click_defaults_are_the_options(command, field, value):
    if value is None:
        return  # not given: judged
    assert value == _expected(field, command, value)


@pytest.mark.parametrize(("function", "field", "value"), API, ids=[f"{c}-{f}" for c, f, _ in API])
def test_api_defaults_are_the_options(function, field, value):
    if value is None:
        return  # not given: judged
    assert value == _expected(field, function, value)


def test_every_command_is_checked():
    """The walks above see every command and API function, and many of their options."""
    assert {c for c, _, _ in CLI} >= set(api.__all__) - {"metrics"} | {"metrics"}
    assert {c for c, _, _ in API} == set(api.__all__)
    assert len(CLI) > 100 and len(API) > 100


def test_not_given_is_judged_to_the_default():
    """A keyword left at None is judged to the command's default (the judge's one rule),
    so None in a signature is the same default, not another one."""
    for command in api.__all__:
        judged = judge(command=command, queries=(10,)) if command == "robustness" else None
        judged = judged or judge(command=command)
        for field in ("alpha", "correction", "method", "seed", "trials", "engine"):
            assert getattr(judged, field) == default(field, command), (command, field)
        tests = default("tests", command)
        assert judged.tests == (tests if command in COMMAND_DEFAULTS else Options.tests)


def test_command_defaults_by_hand():
    """The defaults that are the command's own, written out."""
    assert default("correction") == "bonferroni" and default("correction", "gate") == "holm"
    assert default("tests") == ("ttest", "sign", "hsd")
    assert default("tests", "gate") == default("tests", "table") == ("ttest",)
    assert default("alpha", "gate") == 0.05 and default("samples") == 10


QRELS = "sample_data/qrels.txt"  # not read: each call is refused first


@pytest.mark.parametrize(
    "call,message",
    [
        (
            lambda: prefeval.order(QRELS, [], bogus=1),
            "order() got an unexpected keyword argument 'bogus'",
        ),
        (lambda: prefeval.gate(QRELS, []), "gate() missing a required argument: 'against'"),
        (lambda: prefeval.compare(QRELS), "compare() missing a required argument: 'runs'"),
        (lambda: prefeval.explain(QRELS, [], "x"), "explain() too many positional arguments"),
    ],
)
def test_api_calls_are_bound_to_their_signatures(call, message):
    """The API's functions take exactly the keywords their signatures show (declared
    once in :data:`prefeval.api._DECLARED`), as Python functions do."""
    with pytest.raises(TypeError) as raised:
        call()
    assert str(raised.value) == message
