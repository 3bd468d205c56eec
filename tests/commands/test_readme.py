"""The README's examples, then those of docs/commands.md, docs/api.md and docs/ci.md,
run as written, so none can drift from the tool.

Every fenced ``sh`` block runs line by line (a trailing backslash continues a line;
comment lines are skipped), every ``python`` block as a script and every ``make``
block as a Makefile, in order (the README's, then the docs' in DOCUMENTS), from a folder
that looks like the repository root after ``make demo`` (``sample_data/`` beside,
``.venv/bin`` first on PATH), so the files one example writes are there for the next.
Blocks tagged ``console`` (the set-up commands themselves) are shown, not run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

# every example of README.md and docs/, run as written: `make test` runs them, `make test-fast` not
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
#: the documents whose examples run, in this order
DOCUMENTS = ("README.md", "docs/commands.md", "docs/api.md", "docs/ci.md")
FENCE = re.compile(r"^[ \t]*```(\w*)[^\n]*\n(.*?)^[ \t]*```[ \t]*$", re.M | re.S)
RUN = ("sh", "python", "make")


def readme_blocks(document: str = "README.md") -> list[tuple[str, str, str]]:
    """(``document:line``, language, dedented text) of every fenced block, in order."""
    text = (ROOT / document).read_text(encoding="utf-8")
    out = []
    for match in FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        body = match.group(2)
        indent = min((len(x) - len(x.lstrip()) for x in body.splitlines() if x.strip()), default=0)
        body = "\n".join(x[indent:] for x in body.splitlines()) + "\n"
        out.append((f"{document}:{line}", match.group(1), body))
    return out


def shell_commands(body: str) -> list[str]:
    commands, pending = [], ""
    for raw in body.splitlines():
        line = raw.rstrip()
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        commands.append(pending + line)
        pending = ""
    return commands


BLOCKS = [b for document in DOCUMENTS for b in readme_blocks(document) if b[1] in RUN]


def test_readme_has_examples_of_every_command():
    from prefeval.cli import cli

    readme = [(lang, body) for _, lang, body in readme_blocks() if lang in RUN]
    shell = "\n".join(body for lang, body in readme if lang == "sh")
    missing = [c for c in cli.commands if not re.search(rf"\bprefeval {c}\b", shell)]
    assert not missing, f"README has no runnable example of {missing}"
    assert any(lang == "python" for lang, _ in readme)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("readme")
    (folder / "sample_data").symlink_to(ROOT / "sample_data")
    return folder


@pytest.fixture(scope="module")
def environment():
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PREFEVAL_CACHE"] = "0"  # examples must not depend on what earlier tests cached
    return env


@pytest.fixture(scope="module")
def ran() -> set:
    """The ``document:line`` of the blocks this process has run in ``workdir``."""
    return set()


@pytest.mark.parametrize(
    "line, lang, body", BLOCKS, ids=[f"{line}-{lang}" for line, lang, _ in BLOCKS]
)
def test_readme_block_runs(line, lang, body, workdir, environment, ran):
    # a block may read what the blocks before it wrote: those this process has not run
    # (another pytest-xdist worker ran them, or -k left them out) run first
    for earlier in BLOCKS[: BLOCKS.index((line, lang, body)) + 1]:
        if earlier[0] not in ran:
            ran.add(earlier[0])
            run_block(*earlier, workdir, environment)
            if earlier == README_BLOCKS[-1]:
                written_only_under_out(workdir)


README_BLOCKS = [b for b in BLOCKS if b[0].startswith("README.md:")]


def written_only_under_out(workdir):
    """Run from a clone's root, the README's examples leave nothing there but ``out/``
    (which .gitignore lists): a user who copies them does not litter the clone."""
    assert sorted(p.name for p in workdir.iterdir()) == ["out", "sample_data"]
    assert "/out/" in (ROOT / ".gitignore").read_text().splitlines()


def run_block(line, lang, body, workdir, environment):
    """Runs one block in ``workdir``: each command must exit 0 without a traceback."""
    if lang == "sh":
        jobs = [["bash", "-c", f"set -o pipefail; {command}"] for command in shell_commands(body)]
    elif lang == "python":
        jobs = [[sys.executable, "-c", body]]
    else:
        (workdir / "Makefile").write_text(body)
        jobs = [["make", "--no-print-directory"]]
    for job in jobs:
        proc = subprocess.run(
            job, cwd=workdir, env=environment, capture_output=True, text=True, timeout=600
        )
        what = f"{line}: {job[-1]}"
        assert proc.returncode == 0, f"{what}\nstdout:\n{proc.stdout[-2000:]}\n{proc.stderr}"
        assert "Traceback" not in proc.stderr, f"{what}\n{proc.stderr}"
