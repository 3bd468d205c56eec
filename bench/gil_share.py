"""Which share of a command's CPU holds the GIL: py-spy samples, by module and thread.

Usage (from the repository root, PYTHONPATH=$PWD):

    python bench/gil_share.py [--py-spy PATH] [--rate 100] [--out FILE] -- CMD ARGS...

Runs ``CMD`` twice under ``py-spy record --threads --format raw``: once sampling every
thread that runs or waits for a CPU (py-spy's active threads: a thread blocked on the
GIL or a lock is idle), once with ``--gil`` (only the thread holding the GIL).  Samples
divided by the rate are seconds: the first run's sum over threads is about the CPU
time (plus time runnable but waiting for a core on a loaded machine), the second's the
time the GIL was held.  Each sample is charged to the innermost ``prefeval`` module on
its stack (``startup`` when none: the interpreter, imports, click).  It prints a
Markdown table per module and per thread, and Amdahl's bound for N threads: the GIL-held
part runs on one core at a time, so wall >= max(GIL s, active s / N).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from harness import print_markdown

FRAME = re.compile(r"\(([^():]+):\d+\)$")


def group_of(frames: list[str]) -> str:
    """The innermost prefeval module of a stack (``prefeval/io/spill.py`` ->
    ``io/spill``), or ``startup`` when the stack has none."""
    for frame in reversed(frames):
        m = FRAME.search(frame)
        if m and "prefeval/" in m.group(1):
            path = m.group(1).split("prefeval/", 1)[1]
            return path.removesuffix(".py").removesuffix("/__init__")
    return "startup"


def record(py_spy: str, rate: int, gil: bool, cmd: list[str]) -> tuple[Counter, Counter, float]:
    """Samples by module and by thread name, and the wall seconds of one recorded run."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "raw.txt"
        argv = [py_spy, "record", "--threads", "--format", "raw", "--rate", str(rate),
                "--output", str(out), *(["--gil"] if gil else []), "--", *cmd]  # fmt: skip
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        by_group: Counter = Counter()
        by_tid: Counter = Counter()
        names: dict[int, str] = {}
        for line in out.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            m = re.match(r"thread \((\d+)\)(?:: ([^;]+))?;?", stack)
            if not m:
                continue
            tid = int(m.group(1))
            if m.group(2):  # ThreadPoolExecutor-0_1 -> ThreadPoolExecutor-0
                names[tid] = re.sub(r"_\d+$", "", m.group(2))
            by_group[group_of(stack[m.end() :].split(";"))] += int(count)
            by_tid[tid] += int(count)
        main = min(by_tid, default=0)  # the process's first thread: its id is the pid
        by_thread: Counter = Counter()
        for tid, n in by_tid.items():
            by_thread[names.get(tid, "MainThread" if tid == main else "other")] += n
    return by_group, by_thread, wall


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench/gil_share.py", description=__doc__.split("\n")[0])
    ap.add_argument("--py-spy", default="py-spy")
    ap.add_argument("--rate", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2, help="N of Amdahl's bound")
    ap.add_argument("--out", default=None, help="also write the Markdown here")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    active, active_t, wall_a = record(args.py_spy, args.rate, False, cmd)
    held, held_t, wall_g = record(args.py_spy, args.rate, True, cmd)
    r = args.rate
    total_a, total_g = sum(active.values()) / r, sum(held.values()) / r
    lines = [
        f"`{' '.join(cmd)}`: wall {wall_a:.1f} s (active run), {wall_g:.1f} s (GIL run); "
        f"active {total_a:.1f} s, GIL held {total_g:.1f} s ({total_g / total_a:.0%})",
        "",
        "| module | active s | share | GIL held s | GIL / active |",
        "|---|---|---|---|---|",
    ]
    small = [g for g, n in active.items() if n < 0.02 * sum(active.values())]
    for g in small:  # under 2% each: one row
        active["(rest)"] += active.pop(g)
        held["(rest)"] += held.pop(g, 0)
    for group, n in active.most_common():
        lines.append(
            f"| {group} | {n / r:.1f} | {n / r / total_a:.0%} | {held[group] / r:.1f} | "
            f"{held[group] / n:.0%} |"
        )
    lines += ["", "| thread | active s | GIL held s |", "|---|---|---|"]
    for thread, n in active_t.most_common():
        lines.append(f"| {thread} | {n / r:.1f} | {held_t[thread] / r:.1f} |")
    n = args.threads
    bound = total_a / max(total_g, total_a / n)
    lines += [
        "",
        f"Amdahl with the GIL as the serial part, {n} threads: wall >= max({total_g:.1f}, "
        f"{total_a:.1f} / {n}) s, speedup over one thread at most {bound:.2f}x.",
    ]
    print_markdown(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
