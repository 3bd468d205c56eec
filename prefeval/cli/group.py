"""The ``prefeval`` group: its commands by family, each module imported when its command
is used, so that ``prefeval --help`` lists them without importing the library."""

from __future__ import annotations

import ast
import importlib
import os
from collections.abc import MutableMapping

import click

from .._version import __version__
from .errors import PrefevalGroup

#: every command, in the order of its family, and the module of this package that
#: defines it (as a function of the command's name)
COMMANDS = {
    "compare": "compare",
    "order": "analysis",
    "discpower": "analysis",
    "tau": "analysis",
    "agree": "analysis",
    "robustness": "analysis",
    "metrics": "metrics",
    "pairs": "analysis",
    "gate": "gate",
    "table": "analysis",
    "explain": "explain",
    "report": "report",
    "measures": "measures",
}


class Commands(MutableMapping):
    """The group's commands by name, each imported from its module (:data:`COMMANDS`)
    when first used; the names listed without importing any."""

    def __init__(self, modules: dict[str, str]):
        self._modules = dict(modules)
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            module = importlib.import_module(f"{__package__}.{self._modules[name]}")
            self._loaded[name] = getattr(module, name)
        return self._loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._modules.setdefault(name, "")
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        del self._modules[name]
        self._loaded.pop(name, None)

    def __iter__(self):
        return iter(self._modules)

    def __len__(self) -> int:
        return len(self._modules)

    def load(self) -> None:
        """Import every command now."""
        for name in self._modules:
            self[name]

    def summary(self, name: str, limit: int) -> str:
        """The command's line in the group's help, as click words it from the command's
        help (its docstring), read from its module's source when it is not imported."""
        if name in self._loaded or not self._modules[name]:
            return self[name].get_short_help_str(limit)
        text = _docstring(self._modules[name], name)
        return click.Command(name, help=text).get_short_help_str(limit)


def _docstring(module: str, function: str) -> str:
    """The docstring of ``function`` in the module ``module`` of this package, as written
    (click's help of the command it defines)."""
    path = os.path.join(os.path.dirname(__file__), f"{module}.py")
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), path)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == function:
            return ast.get_docstring(node, clean=False) or ""
    raise LookupError(f"{path}: no command {function}")


class LazyGroup(PrefevalGroup):
    """The group of :data:`COMMANDS`, listed in its help without importing them."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.commands = Commands(COMMANDS)

    def format_commands(self, ctx, formatter) -> None:
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        commands = self.commands
        assert isinstance(commands, Commands)  # set in __init__
        rows = [(name, commands.summary(name, limit)) for name in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="prefeval")
def cli():
    """Preference-based offline evaluation of rankings, trec_eval style.

    Compares TREC runs pairwise by the positions of their relevant documents:
    recall-paired preference (RPP and variants), lexirecall and lexiprecision.
    """
