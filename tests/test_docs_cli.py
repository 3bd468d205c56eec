"""docs/commands.md lists each command's options as its ``--help`` prints them: cog
writes those blocks from the commands (``make docs``), and these tests fail when the
committed page differs from what cog would write, when a command has no block, or when
a block is not what the installed ``prefeval`` prints on a terminal."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from difflib import unified_diff
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "commands.md"
#: a generated block: the fence, indented as its list item, around one help text
HELP = re.compile(r"^( *)```text\n(\1Usage: prefeval .*?)^\1```$", re.M | re.S)


def help_blocks() -> dict[str, str]:
    """``{command: help text}`` of the page's ``--help`` blocks (``""``: the group's)."""
    blocks = {}
    for indent, body in HELP.findall(PAGE.read_text(encoding="utf-8")):
        text = "".join(line.removeprefix(indent) for line in body.splitlines(True))
        words = text.split(None, 3)
        blocks["" if words[2] == "[OPTIONS]" else words[2]] = text
    return blocks


def test_page_is_what_cog_writes(tmp_path):
    cogapp = pytest.importorskip("cogapp")
    # cog's command line (-o: the page as cog would write it, elsewhere)
    assert cogapp.Cog().main(["cog", "-o", str(tmp_path / "commands.md"), str(PAGE)]) == 0
    page = PAGE.read_text(encoding="utf-8")
    written = (tmp_path / "commands.md").read_text(encoding="utf-8")
    diff = "\n".join(unified_diff(page.splitlines(), written.splitlines(), lineterm=""))
    assert written == page, f"docs/commands.md is stale, run `make docs`:\n{diff}"


def test_every_command_has_one_help_block():
    from prefeval.cli import cli

    blocks = help_blocks()
    assert sorted(blocks) == ["", *sorted(cli.commands)]
    assert len(HELP.findall(PAGE.read_text(encoding="utf-8"))) == len(blocks)


@pytest.mark.parametrize("columns", ["80", "200"])
@pytest.mark.parametrize("command", ["", "gate"])
def test_blocks_are_what_the_command_prints(command, columns):
    # click wraps the help at min(terminal width, 80) - 2 columns: the same from 80 up;
    # the group (its own list of commands) and gate (a verbatim paragraph) stand for all
    env = {**os.environ, "COLUMNS": columns}
    args = [sys.executable, "-m", "prefeval", *([command] if command else []), "--help"]
    shown = subprocess.run(args, env=env, capture_output=True, text=True, check=True)
    assert shown.stdout == help_blocks()[command]
