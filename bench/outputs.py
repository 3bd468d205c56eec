"""Every command's output on fixed inputs, to prove that a change keeps them byte-identical.

Usage::

    python bench/outputs.py snapshot OUT_DIR [--repo DIR] [--only SUBSTRING] [--scratch DIR]
    python bench/outputs.py diff OLD_DIR NEW_DIR

``snapshot`` runs a fixed matrix of commands (every command, its main options, every
output format) with the prefeval of the checkout ``--repo`` (default: this one; give a
``git worktree`` of the old commit to snapshot the old code) on the sample data, on the
TREC Web 2012 runs of ``../shared`` (ad hoc and diversity qrels) and on small recsys
shapes (text runs and a many-run Parquet table, generated with a fixed seed in the
scratch folder).  Each case's stdout, stderr, exit status and ``-o`` files are written
under ``OUT_DIR/<case>/``, with ``OUT_DIR/MANIFEST`` listing a SHA-256 per file.
The cache is off, so every case computes from the inputs.

``diff`` compares two snapshots file by file and prints the cases that differ; its exit
status is 1 when any differs, 0 when all are byte-identical.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SHARED = REPO.parent / "shared" / "data" / "web2012"


def _inputs(scratch: Path, repo: Path) -> dict[str, tuple[list[str], list[str]]]:
    """name -> (qrels arguments, run arguments) of every data set available."""
    sample = REPO / "sample_data"
    runs = sorted(str(p) for p in (sample / "runs").glob("input.*"))
    sets = {
        "sample": ([str(sample / "qrels.txt")], runs),
        "sample-subtopics": ([str(sample / "qrels.subtopics.txt")], runs),
        "sample-parquet": ([str(sample / "qrels.txt")], [str(sample / "runs.parquet")]),
    }
    if SHARED.exists():
        web = sorted(str(p) for p in (SHARED / "runs").glob("*.run.gz"))
        sets["web2012"] = ([str(SHARED / "qrels.adhoc.txt.gz")], web)
        sets["web2012-diversity"] = ([str(SHARED / "qrels.diversity-ndeval.txt.gz")], web)
    for shape, layout, scale in (("recsys", "trec", "0.01"), ("recsys-xl", "parquet", "0.005")):
        folder = scratch / f"{shape}-small"
        if not folder.exists():
            subprocess.run(
                [
                    sys.executable,
                    str(HERE / "generate.py"),
                    shape,
                    str(folder),
                    "--scale",
                    scale,
                    "--seed",
                    "7",
                ],
                check=True,
                env=_env(REPO),
                stdout=subprocess.DEVNULL,
            )
        if layout == "trec":
            qrels = folder / "qrels.txt"
            sets[shape] = ([str(qrels)], sorted(str(p) for p in (folder / "runs").glob("*")))
        else:
            sets[shape] = ([str(folder / "qrels.parquet")], [str(folder / "runs.parquet")])
    return sets


def _cases(sets: dict) -> list[tuple[str, list[str]]]:
    """(case name, arguments after ``prefeval``); ``{o}`` stands for the case's output
    folder."""
    cases: list[tuple[str, list[str]]] = []
    fast = {"sample", "sample-subtopics", "sample-parquet"}
    for name, (qrels, runs) in sets.items():
        data = [*qrels, *runs]
        small = name in fast
        cases += [
            (f"{name}/compare", ["compare", *data]),
            (f"{name}/compare-q", ["compare", "-q", *data]),
            (
                f"{name}/compare-q-parquet",
                ["compare", "-q", "-f", "parquet", "-o", "{o}/out.parquet", *data],
            ),
            (f"{name}/compare-binary-l2", ["compare", "--binary", "-l", "2", "-f", "csv", *data]),
            (f"{name}/compare-M10-p4", ["compare", "-M", "10", "-p", "4", "-f", "jsonl", *data]),
            (
                f"{name}/compare-both",
                ["compare", "--both-directions", "-m", "rpp,lexirecall", *data],
            ),
            (f"{name}/metrics", ["metrics", "-q", *data]),
            (f"{name}/metrics-l2", ["metrics", "-l", "2", "-m", "map,P_10,ndcg_cut_10", *data]),
            (f"{name}/order", ["order", *data]),
            (f"{name}/order-borda", ["order", "--method", "borda", "--no-baselines", *data]),
            (f"{name}/tau", ["tau", *data]),
            (f"{name}/agree", ["agree", "--ties", *data]),
            (f"{name}/pairs", ["pairs", *data]),
            (f"{name}/table", ["table", *data]),
            (f"{name}/table-tex", ["table", "-f", "tex", "--test", "sign", *data]),
            (f"{name}/discpower", ["discpower", "--test", "ttest", "--test", "sign", *data]),
            (
                f"{name}/discpower-hsd",
                [
                    "discpower",
                    "--test",
                    "hsd",
                    "--trials",
                    "200",
                    "--pairs",
                    "-m",
                    "rpp",
                    "-B",
                    "AP",
                    *data,
                ],
            ),
            (
                f"{name}/robustness",
                [
                    "robustness",
                    "--queries",
                    "2,3" if small else "5,10",
                    "--labels",
                    "0.5",
                    "--samples",
                    "3",
                    *data,
                ],
            ),
        ]
        if len(runs) >= 2 and not runs[0].endswith(".parquet"):
            cases += [
                (f"{name}/explain", ["explain", qrels[0], runs[0], runs[1]]),
                (
                    f"{name}/explain-tsv",
                    ["explain", "-f", "tsv", "--top", "2", qrels[0], runs[0], runs[1]],
                ),
            ]
        if runs and not runs[0].endswith(".parquet"):
            reference = _run_name(runs[0])
            cases += [
                (f"{name}/gate", ["gate", "--against", reference, "-B", "AP", *data]),
                (f"{name}/table-against", ["table", "--against", reference, *data]),
                (
                    f"{name}/gate-randomization",
                    [
                        "gate",
                        "--against",
                        reference,
                        "--test",
                        "randomization",
                        "--ci",
                        "bootstrap",
                        "--trials",
                        "500",
                        "--resamples",
                        "500",
                        "--min-queries",
                        "2",
                        "-m",
                        "rpp,lexirecall",
                        *data,
                    ],
                ),
            ]
        if small:
            for fmt in ("html", "md", "tex"):
                cases.append(
                    (f"{name}/report-{fmt}", ["report", "-o", f"{{o}}/report.{fmt}", *data])
                )
    return cases


def _run_name(path: str) -> str:
    """The name prefeval gives the run file ``path`` (``--names file``)."""
    name = Path(path).name.removeprefix("input.").removesuffix(".gz")
    for suffix in (".run", ".trec", ".txt", ".res", ".tsv"):
        name = name.removesuffix(suffix)
    return name


def _env(repo: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(repo)
    env["PREFEVAL_CACHE"] = "0"
    env.pop("PREFEVAL_CACHE_DIR", None)
    return env


def snapshot(out: Path, repo: Path, only: str | None, scratch: Path) -> int:
    scratch.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    cases = [c for c in _cases(_inputs(scratch, repo)) if only is None or only in c[0]]
    for i, (name, args) in enumerate(cases, 1):
        folder = out / name
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        argv = [a.replace("{o}", str(folder)) for a in args]
        print(f"[{i}/{len(cases)}] {name}", file=sys.stderr, flush=True)
        done = subprocess.run(
            [sys.executable, "-m", "prefeval", *argv],
            cwd=repo,
            env=_env(repo),
            capture_output=True,
            stdin=subprocess.DEVNULL,
        )
        (folder / "stdout").write_bytes(done.stdout)
        # absolute paths of the inputs and of the snapshot folder vary between snapshots
        err = done.stderr.replace(str(folder).encode(), b"{o}")
        (folder / "stderr").write_bytes(err)
        (folder / "status").write_text(f"{done.returncode}\n")
    lines = []
    for path in sorted(p for p in out.rglob("*") if p.is_file() and p.name != "MANIFEST"):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        lines.append(f"{digest}  {path.relative_to(out)}\n")
    (out / "MANIFEST").write_text("".join(lines))
    return 0


def diff(old: Path, new: Path) -> int:
    def files(root: Path) -> set[str]:
        return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()} - {"MANIFEST"}

    a, b = files(old), files(new)
    differ = sorted(p for p in a & b if (old / p).read_bytes() != (new / p).read_bytes())
    for p in sorted(a - b):
        print(f"only in {old}: {p}")
    for p in sorted(b - a):
        print(f"only in {new}: {p}")
    for p in differ:
        print(f"differs: {p}")
    same = len(a & b) - len(differ)
    print(f"{same} of {len(a | b)} files byte-identical", file=sys.stderr)
    return 1 if differ or a != b else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    s = sub.add_parser("snapshot")
    s.add_argument("out", type=Path)
    s.add_argument("--repo", type=Path, default=REPO, help="checkout whose prefeval runs")
    s.add_argument("--only", help="only the cases whose name holds this text")
    s.add_argument("--scratch", type=Path, default=HERE / "scratch" / "outputs")
    d = sub.add_parser("diff")
    d.add_argument("old", type=Path)
    d.add_argument("new", type=Path)
    args = parser.parse_args(argv)
    if args.what == "snapshot":
        return snapshot(args.out, args.repo.resolve(), args.only, args.scratch)
    return diff(args.old, args.new)


if __name__ == "__main__":
    sys.exit(main())
