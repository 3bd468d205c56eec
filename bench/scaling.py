"""How prefeval scales with cores: ``compare`` at -j 1, 2, 4, ... per input layout.

Usage (from the repository root; the repository need not be installed, it is put on
PYTHONPATH for every command this script starts):

    python bench/scaling.py [--jobs 1,2,4,8,16] [--users 300000] [--robust-scale 1]
                            [--robust-runs 110] [--repeat 1] [--hsd-users 100000]
                            [--hsd-trials 1000] [--scratch bench/scratch/scaling]
                            [--out FILE] [--no-dask] [--quick]

It generates its data with ``bench/generate.py`` in the scratch folder (reused when
there), then per layout

- ``table``: recsys-xl, ``--users`` users x 10 runs x 20 items, one many-run Parquet table;
- ``per-run``: the same runs, one Parquet file per run (query_id, doc_id, score);
- ``per-run-text``, ``per-run-gz``: the same runs, one TREC text file per run, plain or
  gzip-compressed;
- ``text``: the robust TREC shape, the first ``--robust-runs`` text runs,

times, ``--repeat`` times each (medians; peak RSS the largest): the strict floor
(pyarrow reads the same files with N threads: Parquet streamed batch by batch, text
runs with ``pyarrow.csv``, one file per thread), ``prefeval compare --no-cache -j N``
for each N of ``--jobs`` (with ``--per-query`` also ``compare -q -f parquet -j N`` into a
scratch file, removed after), and, where Dask is installed, ``compare --engine dask`` on a
local cluster of N single-threaded worker processes (N the largest of ``--jobs``;
started before and not timed; the CPU and peak RSS are the client's) and on the
engine's own cluster (started by the command, timed; the whole process tree).  Wall
time (median, and each repeat's), CPU (user + system), peak RSS and the other load (CPUs
kept busy by other processes meanwhile, on average) come from :class:`harness.Timer` (GNU time, or
getrusage of the child; with psutil the summed RSS of the process tree).  Then the randomized HSD's
kernel: ``hsd_pvalues`` on a random ``--hsd-users`` x 10 matrix, ns of CPU and of wall
per (user, run, trial) at -j 1 and at the largest N.  It prints a Markdown table with
the machine's details (and writes it to ``--out``), and checks that ``compare`` and the
HSD import neither ir_measures nor scipy.

``--quick``: a one-minute smoke run (20,000 users, 20 robust runs at scale 0.2, one
repeat, a small HSD).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import ROOT, Result, Timer, print_markdown  # noqa: E402

GENERATE = Path(__file__).resolve().with_name("generate.py")
XL_RUNS = 10


# --------------------------------------------------------------------------- helper modes


def _mode_floor(threads: int, paths: list[str]) -> int:
    """The strict floor: read every file with ``threads`` threads (pyarrow's pool for
    Parquet, streamed; one text run per thread with ``pyarrow.csv``)."""
    from concurrent.futures import ThreadPoolExecutor

    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    pa.set_cpu_count(threads)
    pa.set_io_thread_count(threads)

    def read(path: str) -> int:
        with open(path, "rb") as f:
            parquet = f.read(4) == b"PAR1"
        if parquet:
            batches = pq.ParquetFile(path).iter_batches(batch_size=1 << 20, use_threads=True)
            return sum(b.num_rows for b in batches)
        return pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(autogenerate_column_names=True, use_threads=False),
            parse_options=pacsv.ParseOptions(delimiter=" "),
        ).num_rows

    if all(open(p, "rb").read(4) == b"PAR1" for p in paths):
        rows = sum(map(read, paths))  # pyarrow's own threads
    else:
        with ThreadPoolExecutor(threads) as pool:
            rows = sum(pool.map(read, paths))
    return 0 if rows > 0 else 1


def _mode_hsd(users: int, runs: int, trials: int, jobs: int) -> int:
    """The HSD kernel on a random users x runs matrix: prints JSON cpu and wall seconds
    (after a first small call that compiles the kernel) and whether ir_measures or scipy
    were imported."""
    import numpy as np

    from prefeval.analysis.significance import hsd_pvalues
    from prefeval.core.cube import run_pairs

    rng = np.random.default_rng(1)
    scores = rng.random((users, runs)) + np.linspace(0, 0.01, runs)
    pairs = run_pairs(runs, None)
    hsd_pvalues(scores[:100], pairs, 10, seed=1, progress=False, jobs=1)  # compile
    c0, t0 = time.process_time(), time.perf_counter()
    hsd_pvalues(scores, pairs, trials, seed=1, progress=False, jobs=jobs)
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    imported = [m for m in ("ir_measures", "scipy") if m in sys.modules]
    print(json.dumps({"cpu": cpu, "wall": wall, "imported": imported}))
    return 0


def _mode_imports(argv: list[str]) -> int:
    """Run ``prefeval ARGV`` in this process; print which of ir_measures, scipy and dask
    it imported."""
    from prefeval.cli import cli

    try:
        cli.main(argv, standalone_mode=False)
    finally:
        found = [m for m in ("ir_measures", "scipy", "dask") if m in sys.modules]
        print(json.dumps(found), file=sys.stderr)
    return 0


# --------------------------------------------------------------------------- data


def _run(argv: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=True, **kw)


def recsys_table(scratch: Path, users: int) -> Path:
    """recsys-xl at ``users`` users (one many-run Parquet table), generated once."""
    d = scratch / f"recsys-xl-{users}"
    if not (d / "runs.parquet").exists():
        _run([sys.executable, str(GENERATE), "recsys-xl", str(d), "--scale", str(users / 1e6),
              "--seed", "1"], stdout=subprocess.DEVNULL)  # fmt: skip
    return d


def per_run_files(d: Path) -> list[Path]:
    """The runs of ``d/runs.parquet``, one Parquet file per run (query_id, doc_id, score),
    written row group by row group."""
    out = d / "per-run"
    files = [out / f"sys{r + 1:02d}.parquet" for r in range(XL_RUNS)]
    if all(f.exists() for f in files):
        return files
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    out.mkdir(exist_ok=True)
    source = pq.ParquetFile(d / "runs.parquet")
    columns = ["query_id", "doc_id", "score"]
    schema = source.schema_arrow
    schema = schema.remove(schema.get_field_index("run"))
    writers = {f.stem: pq.ParquetWriter(str(f) + ".tmp", schema) for f in files}
    for g in range(source.num_row_groups):
        table = source.read_row_group(g)
        for name, writer in writers.items():
            part = table.filter(pc.equal(table["run"], name)).select(columns)
            if part.num_rows:
                writer.write_table(part)
    for f, writer in zip(files, writers.values()):
        writer.close()
        os.replace(str(f) + ".tmp", f)
    return files


def per_run_text(d: Path, compressed: bool) -> list[Path]:
    """The runs of ``d/per-run``, one TREC text file per run (``qid Q0 docno rank score
    tag``), gzip-compressed with ``compressed``."""
    import gzip

    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    out = d / ("per-run-gz" if compressed else "per-run-text")
    sources = per_run_files(d)
    files = [out / (f"input.{f.stem}" + (".gz" if compressed else "")) for f in sources]
    if all(f.exists() for f in files):
        return files
    out.mkdir(exist_ok=True)
    for source, f in zip(sources, files):
        table = pq.read_table(source)
        n = table.num_rows
        table = pa.table(
            {
                "q": table["query_id"],
                "it": pa.array(["Q0"] * n),
                "d": table["doc_id"],
                "rank": pa.array(range(1, n + 1)),
                "s": table["score"],
                "tag": pa.array([source.stem] * n),
            }
        )
        options = pacsv.WriteOptions(include_header=False, delimiter=" ", quoting_style="none")
        sink = gzip.open(str(f) + ".tmp", "wb", compresslevel=1) if compressed else None
        pacsv.write_csv(table, sink or str(f) + ".tmp", options)
        if sink is not None:
            sink.close()
        os.replace(str(f) + ".tmp", f)
    return files


def robust_text(scratch: Path, scale: float, runs: int) -> tuple[Path, list[Path]]:
    """The robust shape at ``scale`` (text runs), its qrels and first ``runs`` runs."""
    d = scratch / f"robust-{scale:g}"
    if not (d / "qrels.txt").exists():
        _run([sys.executable, str(GENERATE), "robust", str(d), "--scale", str(scale),
              "--seed", "1"], stdout=subprocess.DEVNULL)  # fmt: skip
    return d / "qrels.txt", sorted((d / "runs").glob("input.*"))[:runs]


# --------------------------------------------------------------------------- machine


def machine() -> list[str]:
    """The machine's details: CPU model (lscpu), CPUs usable, memory, Python, packages."""
    model = "unknown"
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    from prefeval.core.parallel import cgroup_cpus, usable_cpus

    mem = "unknown"
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            mem = f"{int(line.split()[1]) / 1024**2:.1f} GiB"
    from importlib import metadata

    versions = []
    for pkg in ("numpy", "pandas", "pyarrow", "numba", "dask", "distributed", "psutil"):
        try:
            versions.append(f"{pkg} {metadata.version(pkg)}")
        except metadata.PackageNotFoundError:
            pass
    load = os.getloadavg()
    return [
        f"- CPU: {model}; {os.cpu_count()} logical CPUs, {usable_cpus()} usable "
        f"(affinity, cgroup quota {cgroup_cpus()})",
        f"- Memory: {mem}; load average at the start {load[0]:.1f}",
        f"- Python {platform.python_version()}, {platform.platform()}; {', '.join(versions)}",
    ]


# --------------------------------------------------------------------------- main


def _fmt(x: float | None, nd: int = 2) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_floor":
        return _mode_floor(int(argv[1]), argv[2:])
    if argv and argv[0] == "_hsd":
        return _mode_hsd(*(int(x) for x in argv[1:5]))
    if argv and argv[0] == "_imports":
        return _mode_imports(argv[1:])
    ap = argparse.ArgumentParser(prog="bench/scaling.py", description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", default="1,2,4,8,16", help="the -j values (comma-separated)")
    ap.add_argument("--users", type=int, default=300_000, help="recsys-xl users")
    ap.add_argument("--robust-scale", type=float, default=1.0, help="robust queries x scale")
    ap.add_argument("--robust-runs", type=int, default=110, help="robust text runs used")
    ap.add_argument("--repeat", type=int, default=1, help="times each command runs")
    ap.add_argument("--hsd-users", type=int, default=100_000)
    ap.add_argument("--hsd-trials", type=int, default=1000)
    ap.add_argument("--scratch", default=str(ROOT / "bench" / "scratch" / "scaling"))
    ap.add_argument("--out", default=None, help="also write the Markdown here")
    ap.add_argument("--no-dask", action="store_true", help="skip the Dask engine")
    ap.add_argument(
        "--layouts", default="table,per-run,text", help="of table, per-run, per-run-text, "
        "per-run-gz, text"
    )  # fmt: skip
    ap.add_argument(
        "--per-query", action="store_true", help="also time compare -q -f parquet (to a file)"
    )
    ap.add_argument("--wait-idle", type=float, default=0, help="see bench/run.py")
    ap.add_argument("--quick", action="store_true", help="a one-minute smoke run")
    args = ap.parse_args(argv)
    if args.quick:
        args.users, args.robust_scale, args.robust_runs = 20_000, 0.2, 20
        args.repeat, args.hsd_users, args.hsd_trials = 1, 20_000, 200
    jobs = [int(j) for j in args.jobs.split(",")]
    layouts = args.layouts.split(",")
    # every command (and Dask worker) started from here imports this checkout
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    os.environ["PREFEVAL_CACHE"] = "0"
    sys.path.insert(0, str(ROOT))
    scratch = Path(args.scratch)
    scratch.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f} s] {message}", file=sys.stderr, flush=True)

    inputs: dict[str, tuple[Path, list[Path]]] = {}
    if {"table", "per-run", "per-run-text", "per-run-gz"} & set(layouts):
        log(f"recsys-xl, {args.users} users")
        d = recsys_table(scratch, args.users)
        if "table" in layouts:
            inputs["table"] = (d / "qrels.parquet", [d / "runs.parquet"])
        if "per-run" in layouts:
            inputs["per-run"] = (d / "qrels.parquet", per_run_files(d))
        for layout in ("per-run-text", "per-run-gz"):
            if layout in layouts:
                runs = per_run_text(d, compressed=layout == "per-run-gz")
                inputs[layout] = (d / "qrels.parquet", runs)
    if "text" in layouts:
        log(f"robust, scale {args.robust_scale}, {args.robust_runs} runs")
        inputs["text"] = robust_text(scratch, args.robust_scale, args.robust_runs)

    timer = Timer(ROOT, args.wait_idle)
    prefeval = [sys.executable, "-m", "prefeval"]
    me = [sys.executable, str(Path(__file__).resolve())]
    cluster = None
    if not args.no_dask:
        try:
            from distributed import LocalCluster

            log(f"Dask: a local cluster of {max(jobs)} single-threaded workers")
            cluster = LocalCluster(
                n_workers=max(jobs), threads_per_worker=1, processes=True,
                dashboard_address=None,
            )  # fmt: skip
        except ImportError:
            log("Dask is not installed: no Dask rows")

    # row key -> (layout, label, argv); run in this order within each repeat
    rows: dict[str, tuple[str, str, list[str]]] = {}
    for layout, (qrels, runs) in inputs.items():
        files = [str(p) for p in runs]
        for n in jobs:
            threads = f"{n} thread{'s' if n > 1 else ''}"
            rows[f"{layout} floor {n}"] = (layout, f"floor: pyarrow read, {threads}",
                                           [*me, "_floor", str(n), *files])  # fmt: skip
        for n in jobs:
            rows[f"{layout} -j {n}"] = (layout, f"`compare -j {n}`",
                                        [*prefeval, "compare", "--no-cache", "-j", str(n),
                                         str(qrels), *files])  # fmt: skip
        for n in jobs if args.per_query else ():
            rows[f"{layout} -q {n}"] = (layout, f"`compare -q -f parquet -j {n}`",
                                        [*prefeval, "compare", "--no-cache", "-q", "-f",
                                         "parquet", "-o", str(scratch / "per-query.parquet"),
                                         "-j", str(n), str(qrels), *files])  # fmt: skip
        if cluster is not None:
            rows[f"{layout} dask"] = (layout, f"`compare --engine dask`, {max(jobs)} workers",
                                      [*prefeval, "compare", "--no-cache", "--engine", "dask",
                                       "--scheduler", cluster.scheduler_address, str(qrels),
                                       *files])  # fmt: skip
            rows[f"{layout} dask-own"] = (layout, "`compare --engine dask`, its own cluster",
                                          [*prefeval, "compare", "--no-cache", "--engine",
                                           "dask", str(qrels), *files])  # fmt: skip
    results = {key: Result() for key in rows}
    for repeat in range(args.repeat):
        for key, (_layout, _label, cmd) in rows.items():
            if results[key].error:
                continue
            log(f"repeat {repeat + 1}/{args.repeat}: {key}")
            sample, error = timer.run(cmd)
            if sample is None:
                results[key].error = error
                log(f"  failed: {error}")
            else:
                results[key].samples.append(sample)
    if cluster is not None:
        cluster.close()
    (scratch / "per-query.parquet").unlink(missing_ok=True)

    log("imports of compare and the HSD")
    sample_qrels = ROOT / "sample_data" / "qrels.txt"
    sample_runs = [str(p) for p in sorted((ROOT / "sample_data" / "runs").glob("input.*"))]
    check = subprocess.run(
        [*me, "_imports", "compare", "--no-cache", str(sample_qrels), *sample_runs],
        capture_output=True, text=True,
    )  # fmt: skip
    compare_imports = check.stderr.strip().splitlines()[-1] if check.stderr.strip() else "?"
    hsd = {}
    for n in sorted({1, max(jobs)}):
        for _ in range(args.repeat):
            log(f"HSD kernel, {args.hsd_users} users x {XL_RUNS} runs x {args.hsd_trials} "
                f"trials, -j {n}")  # fmt: skip
            done = subprocess.run(
                [*me, "_hsd", str(args.hsd_users), str(XL_RUNS), str(args.hsd_trials), str(n)],
                capture_output=True, text=True,
            )  # fmt: skip
            if done.returncode:
                log(f"  failed: {done.stderr.strip()[-300:]}")
                break
            hsd.setdefault(n, []).append(json.loads(done.stdout.splitlines()[-1]))

    lines = [
        "## Scaling with cores (`bench/scaling.py`)",
        "",
        *machine(),
        f"- `python bench/scaling.py {' '.join(argv)}`: {args.repeat} repeat(s), medians "
        "(peak RSS: the largest); cache off; total "
        f"{time.perf_counter() - started:.0f} s",
        "",
        "| layout | command | wall s | CPU s | peak RSS MiB | x floor (same N) | x `-j 1` "
        "| wall s, each repeat | other load |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for key, (layout, label, _cmd) in rows.items():
        res = results[key]
        if not res.ok:
            lines.append(f"| {layout} | {label} | failed: {res.error} | | | | | | |")
            continue
        n = key.rsplit(" ", 1)[-1]
        floor = results.get(f"{layout} floor {n if n.isdigit() else max(jobs)}")
        one = results.get(f"{layout} -q 1" if " -q " in key else f"{layout} -j 1")
        vs_floor = res.median / floor.median if floor and floor.ok and "floor" not in key else None
        speedup = one.median / res.median if one and one.ok and "floor" not in key else None
        rss = res.rss_mib
        each = ", ".join(f"{s.wall:.1f}" for s in res.samples)
        lines.append(
            f"| {layout} | {label} | {_fmt(res.median)} | {_fmt(res.median_of('cpu'))} | "
            f"{_fmt(rss, 0)} | {_fmt(vs_floor)} | {_fmt(speedup)} | {each} | "
            f"{_fmt(res.median_of('others'), 1)} |"
        )
    sizes = {
        "table": f"recsys-xl {args.users:,} users x {XL_RUNS} runs x 20 items, one Parquet table",
        "per-run": f"the same, {XL_RUNS} Parquet files (one per run)",
        "per-run-text": f"the same, {XL_RUNS} TREC text files (one per run)",
        "per-run-gz": f"the same, {XL_RUNS} gzip-compressed TREC text files (one per run)",
        "text": f"robust scale {args.robust_scale:g}, {args.robust_runs} text runs x 1,000 docs",
    }
    lines += ["", *(f"- {k}: {v}" for k, v in sizes.items() if k in inputs)]
    lines += [
        "",
        f"Randomized HSD kernel, {args.hsd_users:,} users x {XL_RUNS} runs x "
        f"{args.hsd_trials:,} trials:",
        "",
        "| -j | wall s | CPU s | ns CPU / (user, run, trial) | ns wall / (user, run, trial) |",
        "|---|---|---|---|---|",
    ]
    elements = args.hsd_users * XL_RUNS * args.hsd_trials
    for n, runs in hsd.items():
        cpu = statistics.median(r["cpu"] for r in runs)
        wall = statistics.median(r["wall"] for r in runs)
        lines.append(
            f"| {n} | {wall:.2f} | {cpu:.2f} | {cpu / elements * 1e9:.2f} | "
            f"{wall / elements * 1e9:.2f} |"
        )
    imported = sorted({m for runs in hsd.values() for r in runs for m in r["imported"]})
    lines += [
        "",
        f"Modules imported: `compare` {compare_imports}; the HSD kernel "
        f"{json.dumps(imported)} (of ir_measures, scipy, dask).",
    ]
    print_markdown(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
