"""Reading TREC text runs against its floor: `compare` with the one-pass reader
(prefeval/io/_textpass.c), with the Arrow reader (``PREFEVAL_TEXT_PASS=0``), and the
floor, measured side by side in one run.

    .venv/bin/python bench/textread.py [--data DIR] [--runs 40] [--repeat 7] [--out FILE]

The data: the robust shape (``bench/generate.py robust``: 249 queries, 1,000 documents
a query) with ``--runs`` runs, generated into ``bench/scratch/textread-N`` unless
``--data`` names a folder holding ``qrels.txt`` and ``runs/``.  Each repeat runs every
command once, in turn (so that each ratio compares figures taken under the same
conditions); the table gives medians over the repeats.

- FLOOR: ``pyarrow.csv`` reading the query, docno and score columns of every run file
  (the three a preference needs), one file per thread on every core, in a subprocess
  (interpreter and pyarrow start-up included, as the prefeval figures include theirs).
- ``compare --binary -l 1``, cache off (``PREFEVAL_CACHE=0``: every file parsed), with
  the one-pass reader and with the Arrow reader.
- Start-up: ``python -c "import pyarrow.csv, pyarrow.compute, numpy"`` against
  ``prefeval compare`` on two sample runs.

Every command runs once before the repeats (Python's bytecode of prefeval written, as an
installed package has it; ``PYTHONDONTWRITEBYTECODE`` is left out of the commands'
environment).  Wall seconds, CPU seconds (user + system) and peak RSS come from bench/harness.py's
:class:`Timer` (GNU time).  Prints a Markdown section (``--out`` writes it to a file).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import ROOT, Timer, prefeval_argv  # noqa: E402

FLOOR_CODE = """
import os, sys
from concurrent.futures import ThreadPoolExecutor
import pyarrow.csv as csv
read = csv.ReadOptions(autogenerate_column_names=True, use_threads=False)
parse = csv.ParseOptions(delimiter=" ")
convert = csv.ConvertOptions(include_columns=["f0", "f2", "f4"])
def rows(path):
    return csv.read_csv(path, read_options=read, parse_options=parse,
                        convert_options=convert).num_rows
with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
    assert sum(pool.map(rows, sys.argv[1:])) > 0
"""

IMPORTS = "import pyarrow.csv, pyarrow.compute, numpy"


def data_folder(runs: int, given: str | None) -> Path:
    if given:
        return Path(given)
    folder = ROOT / "bench" / "scratch" / f"textread-{runs}"
    if not (folder / "qrels.txt").exists():
        subprocess.run(
            [sys.executable, str(ROOT / "bench" / "generate.py"), "robust", str(folder),
             "--runs", str(runs), "--seed", "1"],
            check=True,
        )  # fmt: skip
    return folder


def commands(folder: Path) -> list[tuple[str, list[str], dict[str, str]]]:
    qrels = str(folder / "qrels.txt")
    runs = sorted(str(p) for p in (folder / "runs").iterdir())
    sample = sorted(str(p) for p in (ROOT / "sample_data" / "runs").glob("input.sys0[12]"))
    # bytecode written and read, as an installed package has it
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    base["PREFEVAL_CACHE"] = "0"
    on = {k: v for k, v in base.items() if k != "PREFEVAL_TEXT_PASS"}
    off = {**base, "PREFEVAL_TEXT_PASS": "0"}
    compare = [*prefeval_argv(), "compare", "--binary", "-l", "1", qrels, *runs]
    tiny = [*prefeval_argv(), "compare", str(ROOT / "sample_data" / "qrels.txt"), *sample]
    return [
        ("FLOOR: pyarrow.csv, 3 columns", [sys.executable, "-c", FLOOR_CODE, *runs], base),
        ("`compare --binary -l 1`, one-pass reader", compare, on),
        ("`compare --binary -l 1`, Arrow reader", compare, off),
        (f'start-up floor: `python -c "{IMPORTS}"`', [sys.executable, "-c", IMPORTS], base),
        ("start-up: `compare` on two sample runs", tiny, on),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="a folder with qrels.txt and runs/ (default: generated)")
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--wait-idle", type=float, default=5.0)
    parser.add_argument("--out", help="write the Markdown section to this file")
    args = parser.parse_args(argv)
    folder = data_folder(args.runs, args.data)
    timer = Timer(ROOT, args.wait_idle)
    plan = commands(folder)
    samples: dict[str, list] = {name: [] for name, _, _ in plan}
    for _, command, env in plan:  # the bytecode written once, not measured
        subprocess.run(command, env=env, stdout=subprocess.DEVNULL, check=True)
    for _ in range(args.repeat):
        for name, command, env in plan:
            sample, error = timer.run(command, env=env)
            if sample is None:
                sys.exit(f"{name}: {error}")
            samples[name].append(sample)

    def median(name: str, what: str) -> float:
        return statistics.median(getattr(s, what) for s in samples[name])

    floors = {0: plan[0][0], 3: plan[3][0]}
    n_runs = len(list((folder / "runs").iterdir()))
    lines = [
        "## Reading TREC text runs (`bench/textread.py`)",
        "",
        f"{n_runs} robust-shaped text runs (249 queries x 1,000 documents), "
        f"{args.repeat} repeats, each command once per repeat in turn; medians. "
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs "
        f"(`os.cpu_count()`), Python {platform.python_version()}. Other load: the mean "
        "CPUs other processes kept busy.",
        "",
        "| command | wall s | CPU s | peak RSS MiB | x floor (wall) | x floor (CPU) | other load |",
        "|---|---|---|---|---|---|---|",
    ]
    for i, (name, _, _) in enumerate(plan):
        floor = floors[0 if i < 3 else 3]
        others = [s.others for s in samples[name] if s.others is not None]
        rss = max((s.rss_kib or 0) for s in samples[name]) / 1024
        lines.append(
            f"| {name} | {median(name, 'wall'):.2f} | {median(name, 'cpu'):.2f} | {rss:.0f} "
            f"| {median(name, 'wall') / median(floor, 'wall'):.2f} "
            f"| {median(name, 'cpu') / median(floor, 'cpu'):.2f} "
            f"| {statistics.mean(others) if others else 0:.2f} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
