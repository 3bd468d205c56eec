"""Benchmark harness: time prefeval commands on synthetic data sets and write RESULTS.md.

Usage (from the repository root, with the project's virtualenv):

    .venv/bin/python bench/run.py [--scale 1.0] [--repeat 3] [--shapes robust,web,recsys]
                                  [--out bench/RESULTS.md] [--scratch bench/scratch]
                                  [--seed 1] [--quick] [--keep-outputs]

For every shape the data set is generated on demand (``bench/generate.py``) into the
scratch folder, keyed by shape, scale and seed, and reused when already present.  Every
command runs ``--repeat`` times; within one repeat all commands of a shape run one after
another, so the figures being compared were taken under the same machine conditions.
Wall time is ``time.perf_counter`` around ``subprocess.run``; peak RSS of the child comes
from GNU ``/usr/bin/time -f %M`` (or, without it, a tiny Python wrapper that reads
``getrusage(RUSAGE_CHILDREN)`` of its single child).  Tables report the median, min, max,
peak RSS and the ratios to two anchors measured the same way: FLOOR (a plain multithreaded
``pyarrow.csv`` read of the same run files) and IR-MEASURES (AP, nDCG, RR of every run).

RESULTS.md is rewritten after every repeat, so a partial file exists while a long run is
still going (its status line says so).

The pieces, one concern per module of bench/:

    datasets.py   the shapes (registry SHAPES), generation and reuse in the scratch folder
    commands.py   the commands measured per shape (registry COMMAND_SETS)
    harness.py    Timer / Sample / Result, RSS and CPU measurement, helper modes
    report.py     RESULTS.md: machine, tables, targets
    run.py        this file: arguments and the main loop

Internal helper modes (run in a subprocess so they are timed like the CLI; harness.py):
    run.py _floor RUN...            pyarrow read of every run file, one per thread
    run.py _irm OUT QRELS RUN...    ir-measures AP, nDCG, RR of every run
    run.py _rss OUT -- CMD...       run CMD, write its peak RSS (KiB) to OUT
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

# bench/ runs as a script (python bench/run.py, sys.path[0] = bench/); the insert makes its
# modules importable by name however run.py is started (python -m bench.run, an import)
sys.path.insert(0, str(Path(__file__).resolve().parent))

from commands import build_commands  # noqa: E402
from datasets import (  # noqa: E402
    DEFAULT_SEED,
    DEFAULT_SHAPES,
    SHAPES,
    ensure_data,
    inputs,
    warm_page_cache,
)
from harness import (  # noqa: E402
    ROOT,
    Result,
    Timer,
    cache_files,
    code_digest,
    dispatch_mode,
    prefeval_argv,
)
from report import RunState, ShapeRun, fmt, write_report  # noqa: E402

STARTUP_REPEAT = 5


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    rc = dispatch_mode(argv)
    if rc is not None:
        return rc
    ap = argparse.ArgumentParser(
        prog="bench/run.py", description="Benchmark prefeval and write RESULTS.md."
    )
    ap.add_argument("--scale", type=float, default=1.0, help="query-count scale of the data")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs of every command")
    ap.add_argument(
        "--shapes",
        default=",".join(DEFAULT_SHAPES),
        help=f"comma list of shapes, of {', '.join(SHAPES)} (default: %(default)s)",
    )
    ap.add_argument("--out", default=str(ROOT / "bench" / "RESULTS.md"))
    ap.add_argument("--scratch", default=str(ROOT / "bench" / "scratch"))
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED, help="generator seed")
    ap.add_argument("--quick", action="store_true", help="skip ir-measures on recsys")
    ap.add_argument(
        "--wait-idle",
        type=float,
        default=10.0,
        metavar="S",
        help="before each command wait up to S seconds for other work to calm down (0: off)",
    )
    ap.add_argument(
        "--only",
        default=None,
        metavar="GLOBS",
        help="comma list of command keys (fnmatch globs, e.g. 'compare*,order_nb*') to run; "
        "the others are listed as left out",
    )
    ap.add_argument(
        "--keep-outputs", action="store_true", help="keep the command outputs in SCRATCH/out"
    )
    args = ap.parse_args(argv)
    args.shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]
    allowed = set(SHAPES)
    if not args.shapes or set(args.shapes) - allowed:
        ap.error(f"--shapes: choose from {sorted(allowed)}")
    if args.repeat < 1:
        ap.error("--repeat must be >= 1")
    scratch = Path(args.scratch)
    out_path = Path(args.out)

    def log(msg: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {msg}", flush=True)

    st = RunState(args, Timer(ROOT, args.wait_idle), _dt.datetime.now(_dt.timezone.utc))
    log(f"CPU time and peak RSS via {st.timer.method}")
    pf = prefeval_argv()
    cache_root = scratch / "cache"
    env_cold = {**os.environ, "PREFEVAL_CACHE": "0", "PREFEVAL_CACHE_DIR": str(cache_root)}

    def check_code(when: str) -> None:
        d = code_digest()
        if not st.code_digests or st.code_digests[-1][1] != d:
            if st.code_digests:
                log(f"prefeval sources changed ({when}): {d}")
            st.code_digests.append((when, d))

    check_code("start")
    # start-up first
    st.startup = Result()
    for _ in range(STARTUP_REPEAT):
        s, err = st.timer.run([*pf, "--help"], env_cold)
        if s is None:
            st.startup.error = err
            break
        st.startup.samples.append(s)
    st.pyhello = Result()
    for _ in range(STARTUP_REPEAT):
        s, _err = st.timer.run([sys.executable, "-c", "pass"], env_cold)
        if s is not None:
            st.pyhello.samples.append(s)
    if st.startup.ok:
        log(f"prefeval --help: median {st.startup.median:.3f} s")
    else:
        log(f"prefeval --help failed: {st.startup.error}")

    def report(status: str) -> None:
        write_report(out_path, st, status)

    for si, shape in enumerate(args.shapes):
        d, info = ensure_data(scratch, shape, args.scale, args.seed, log)
        outdir = scratch / "out" / d.name
        outdir.mkdir(parents=True, exist_ok=True)
        inp = inputs(d, shape)
        cmds, skipped = build_commands(shape, inp, SHAPES[shape].commands, outdir, args.quick)
        if args.only:
            import fnmatch

            globs = [g.strip() for g in args.only.split(",") if g.strip()]
            for c in cmds:
                if not any(fnmatch.fnmatch(c.key, g) for g in globs):
                    skipped[c.key] = (c.label, f"left out: --only {args.only}")
            cmds = [c for c in cmds if any(fnmatch.fnmatch(c.key, g) for g in globs)]
        # warm-cache rows: fill a private cache once (untimed), check it was written
        cache_dir = cache_root / d.name
        shutil.rmtree(cache_dir, ignore_errors=True)
        env_warm = {**os.environ, "PREFEVAL_CACHE": "1", "PREFEVAL_CACHE_DIR": str(cache_dir)}
        pipe_dir = cache_root / f"{d.name}-pipeline"
        env_pipe = {**os.environ, "PREFEVAL_CACHE": "1", "PREFEVAL_CACHE_DIR": str(pipe_dir)}
        warm_page_cache([inp.qrels, inp.qrels_pref, *inp.runs])
        prime = next((c for c in cmds if c.cache), None)  # the warm-cache rows' first command
        if prime is not None:
            log(f"[{shape}] filling the run cache (untimed) ...")
            ok = subprocess.run(
                prime.argv,
                env=env_warm,
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            if ok.returncode != 0 or cache_files(cache_dir) == 0:
                why = "skipped: this prefeval wrote no run cache"
                for c in [c for c in cmds if c.cache]:
                    skipped[c.key] = (c.label, why)
                cmds = [c for c in cmds if not c.cache]
        sr = ShapeRun(shape, d, info, cmds, {c.key: Result() for c in cmds}, skipped)
        st.shapes[shape] = sr
        for rep in range(args.repeat):
            check_code(f"{shape} repeat {rep + 1}")
            for c in cmds:
                r = sr.results[c.key]
                if r.error:
                    continue
                if c.fresh:
                    shutil.rmtree(pipe_dir, ignore_errors=True)
                env = env_pipe if c.pipeline else env_warm if c.cache else env_cold
                s, err = st.timer.run(c.argv, env)
                if s is None:
                    r.error = f"not available: {err}"
                    log(f"[{shape} {rep + 1}/{args.repeat}] {c.key}: FAILED {err}")
                    continue
                r.samples.append(s)
                log(
                    f"[{shape} {rep + 1}/{args.repeat}] {c.key}: {s.wall:.2f} s, "
                    f"{fmt(s.rss_kib / 1024 if s.rss_kib else None, 0)} MiB, "
                    f"cpu {fmt(s.cpu, 1)} s, other load {fmt(s.others, 2)}"
                )
            sr.repeats_done = rep + 1
            report(
                f"partial: shape {si + 1} of {len(args.shapes)} ({shape}), "
                f"repeat {rep + 1} of {args.repeat} done; run in progress"
            )
        if not args.keep_outputs:
            shutil.rmtree(outdir, ignore_errors=True)
    check_code("end")
    report("complete")
    log(f"wrote {out_path} (waited {st.timer.waited:.0f} s in total for an idle machine)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
