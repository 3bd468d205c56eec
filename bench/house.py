"""Figures about the code itself, for any checkout (run it on two to compare them).

Usage::

    python bench/house.py [--repo CHECKOUT]

Prints, for the prefeval package of ``CHECKOUT`` (default: this one):

- the longest functions (lines, from the ``ast``);
- the places that decide between the local and the Dask engine (comparisons with the
  string ``"dask"`` in the package's code);
- how many times each command opens one run file (an audit hook counts the ``open``
  events of its path; cache off, three sample runs, baselines on and off).

Import cycles, function-level imports and private names crossing modules are checked by
``tests/test_architecture.py`` and ``lint-imports``; this script gives the counts that
have no test.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

COMMANDS = {
    "compare": ["compare", "{qrels}", "{r1}", "{r2}", "{r3}"],
    "compare -q": ["compare", "-q", "{qrels}", "{r1}", "{r2}", "{r3}"],
    "metrics": ["metrics", "{qrels}", "{r1}", "{r2}", "{r3}"],
    "order --no-baselines": ["order", "--no-baselines", "{qrels}", "{r1}", "{r2}", "{r3}"],
    "order": ["order", "{qrels}", "{r1}", "{r2}", "{r3}"],
    "discpower": ["discpower", "--trials", "20", "{qrels}", "{r1}", "{r2}", "{r3}"],
    "tau": ["tau", "{qrels}", "{r1}", "{r2}", "{r3}"],
    "agree": ["agree", "{qrels}", "{r1}", "{r2}", "{r3}"],
    "robustness": [
        "robustness",
        "--samples",
        "2",
        "--queries",
        "5",
        "{qrels}",
        "{r1}",
        "{r2}",
        "{r3}",
    ],
    "pairs": ["pairs", "{qrels}", "{r1}", "{r2}", "{r3}"],
    "explain": ["explain", "{qrels}", "{r1}", "{r2}"],
}

PROBE = r"""
import json, os, sys
target = os.path.realpath(sys.argv[1])
count = [0]
def hook(event, args):
    if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        try:
            if os.path.realpath(os.fsdecode(args[0])) == target:
                count[0] += 1
        except (OSError, ValueError):
            pass
sys.addaudithook(hook)
from prefeval.cli import cli
try:
    cli.main(sys.argv[2:], standalone_mode=False)
except SystemExit:
    pass
sys.stdout.flush()
print("OPENS", json.dumps(count[0]), file=sys.stderr)
"""


def longest_functions(package: Path, top: int = 10) -> list[tuple[int, str]]:
    found = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                found.append((lines, f"{path.relative_to(package.parent)}:{node.name}"))
    return sorted(found, reverse=True)[:top]


def engine_decisions(package: Path) -> list[str]:
    """Comparisons of any expression with the literal "dask" (engine == "dask", ...)."""
    places = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
                if any(isinstance(o, ast.Constant) and o.value == "dask" for o in operands):
                    places.append(f"{path.relative_to(package.parent)}:{node.lineno}")
    return places


def opens(repo: Path) -> dict[str, int]:
    sample = HERE.parent / "sample_data"
    runs = sorted((sample / "runs").glob("input.*"))[:3]
    values = {"qrels": str(sample / "qrels.txt")}
    values.update({f"r{i + 1}": str(run) for i, run in enumerate(runs)})
    env = dict(os.environ, PREFEVAL_CACHE="0", PYTHONPATH=str(repo))
    counts = {}
    for name, argv in COMMANDS.items():
        args = [a.format(**values) for a in argv]
        done = subprocess.run(
            [sys.executable, "-c", PROBE, str(runs[0]), *args],
            env=env,
            capture_output=True,
            text=True,
            cwd=repo,
        )
        lines = [x for x in done.stderr.splitlines() if x.startswith("OPENS ")]
        if not lines:
            raise SystemExit(f"{name}: {done.stderr[-2000:]}")
        counts[name] = json.loads(lines[-1].split()[1])
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, default=HERE.parent)
    args = parser.parse_args()
    package = args.repo.resolve() / "prefeval"
    print("## Longest functions (lines)")
    for lines, name in longest_functions(package):
        print(f"{lines:5d}  {name}")
    places = engine_decisions(package)
    print(f"\n## Places comparing with 'dask': {len(places)}")
    for place in places:
        print(f"  {place}")
    print("\n## Opens of one run file per command (cache off)")
    for name, count in opens(args.repo.resolve()).items():
        print(f"{count:5d}  {name}")


if __name__ == "__main__":
    main()
