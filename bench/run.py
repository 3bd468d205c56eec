"""Benchmark harness: time prefeval commands on synthetic TREC sets and write RESULTS.md.

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

Internal helper modes (run in a subprocess so they are timed like the CLI):
    run.py _floor RUN...            pyarrow.csv read of every run file, one per thread
    run.py _irm OUT QRELS RUN...    ir-measures AP, nDCG, RR of every run
    run.py _rss OUT -- CMD...       run CMD, write its peak RSS (KiB) to OUT
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
THIS = Path(__file__).resolve()
GNU_TIME = "/usr/bin/time"
TIME_FORMAT = "%M %U %S"  # peak RSS KiB, user CPU s, system CPU s
DEFAULT_SEED = 1  # bench/scratch/robust was generated with --seed 1
SCALING_RUNS = (10, 30, 110)
STARTUP_REPEAT = 5

# --------------------------------------------------------------------------- helper modes


def _mode_floor(paths: list[str]) -> int:
    """FLOOR anchor: read every run file fully (all columns) with pyarrow.csv.

    One file per thread (ThreadPoolExecutor of os.cpu_count() workers); pyarrow's own
    intra-file threading is off because files are already read in parallel (that was the
    faster combination on the benchmark machine)."""
    from concurrent.futures import ThreadPoolExecutor

    import pyarrow.csv as pacsv

    read_opts = pacsv.ReadOptions(autogenerate_column_names=True, use_threads=False)
    parse_opts = pacsv.ParseOptions(delimiter=" ")

    def read(path: str) -> int:
        return pacsv.read_csv(path, read_options=read_opts, parse_options=parse_opts).num_rows

    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        rows = sum(pool.map(read, paths))
    if rows <= 0:
        print("floor: no rows read", file=sys.stderr)
        return 1
    return 0


def _mode_irm(out: str, qrels_path: str, run_paths: list[str]) -> int:
    """IR-MEASURES anchor: AP, nDCG and RR of every run, as a user would compute them."""
    import ir_measures
    from ir_measures import AP, RR, nDCG

    qrels = list(ir_measures.read_trec_qrels(qrels_path))
    rows = []
    for path in run_paths:
        run = ir_measures.read_trec_run(path)
        agg = ir_measures.calc_aggregate([AP, nDCG, RR], qrels, run)
        rows.extend(f"{m}\t{Path(path).name}\t{v}" for m, v in agg.items())
    Path(out).write_text("\n".join(rows) + "\n")
    return 0


def _mode_rss(out: str, argv: list[str]) -> int:
    """Fallback for a missing /usr/bin/time: run argv, write the child's peak RSS (KiB)
    and user and system CPU seconds, like ``time -f "%M %U %S"``."""
    import resource

    rc = subprocess.run(argv).returncode
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    Path(out).write_text(f"{ru.ru_maxrss} {ru.ru_utime:.2f} {ru.ru_stime:.2f}\n")
    return rc


def _dispatch_mode(argv: list[str]) -> int | None:
    if not argv or not argv[0].startswith("_"):
        return None
    mode, rest = argv[0], argv[1:]
    if mode == "_floor":
        return _mode_floor(rest)
    if mode == "_irm":
        return _mode_irm(rest[0], rest[1], rest[2:])
    if mode == "_rss":
        if len(rest) < 3 or rest[1] != "--":
            sys.exit("usage: run.py _rss OUT -- CMD...")
        return _mode_rss(rest[0], rest[2:])
    sys.exit(f"unknown helper mode {mode}")


# --------------------------------------------------------------------------- timing


def _gnu_time_works() -> bool:
    if not (os.path.exists(GNU_TIME) and os.access(GNU_TIME, os.X_OK)):
        return False
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as f:
        try:
            subprocess.run(
                [GNU_TIME, "-f", TIME_FORMAT, "-o", f.name, "true"],
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            return _parse_time_file(f.name) is not None
        except (OSError, subprocess.CalledProcessError):
            return False


def _parse_time_file(path: str) -> tuple[int, float] | None:
    """(peak RSS KiB, user + system CPU s) from the last line of a ``time -o`` file."""
    try:
        rss, user, sys_ = Path(path).read_text().strip().splitlines()[-1].split()
        return int(rss), float(user) + float(sys_)
    except (OSError, ValueError, IndexError):
        return None


_HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _busy_cpu_seconds() -> float | None:
    """Machine-wide busy CPU seconds (user, nice, system, irq, softirq) from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        user, nice, system, _idle, _iowait, irq, softirq = map(int, fields[1:8])
        return (user + nice + system + irq + softirq) / _HZ
    except (OSError, ValueError):
        return None


def _others_busy(seconds: float) -> float | None:
    """Average number of CPUs kept busy by everything else over a short window."""
    b0 = _busy_cpu_seconds()
    time.sleep(seconds)
    b1 = _busy_cpu_seconds()
    return None if b0 is None or b1 is None else (b1 - b0) / seconds


@dataclass
class Sample:
    wall: float
    rss_kib: int | None
    cpu: float | None = None  # user + system CPU seconds of the command
    others: float | None = None  # CPUs busy with other work during the command (average)


class Timer:
    def __init__(self, cwd: Path, wait_idle: float, idle_threshold: float = 0.3):
        self.cwd = cwd
        self.wait_idle = wait_idle
        self.idle_threshold = idle_threshold
        self.waited = 0.0
        self.use_gnu_time = _gnu_time_works()
        self.method = (
            f"GNU /usr/bin/time -f '{TIME_FORMAT}'"
            if self.use_gnu_time
            else "Python wrapper reading getrusage(RUSAGE_CHILDREN)"
        )

    def _settle(self) -> None:
        """Wait (up to ``wait_idle`` s) until other work uses < idle_threshold CPUs."""
        if self.wait_idle <= 0:
            return
        t0 = time.perf_counter()
        while True:
            busy = _others_busy(0.5)
            if busy is None or busy < self.idle_threshold:
                break
            if time.perf_counter() - t0 >= self.wait_idle:
                break
        self.waited += time.perf_counter() - t0

    def run(self, argv: list[str], env: dict | None = None) -> tuple[Sample | None, str]:
        """Run argv once; return (sample, "") or (None, error text)."""
        self._settle()
        fd, rss_file = tempfile.mkstemp(suffix=".rss")
        os.close(fd)
        try:
            if self.use_gnu_time:
                full = [GNU_TIME, "-f", TIME_FORMAT, "-o", rss_file, *argv]
            else:
                full = [sys.executable, str(THIS), "_rss", rss_file, "--", *argv]
            b0 = _busy_cpu_seconds()
            t0 = time.perf_counter()
            proc = subprocess.run(
                full,
                cwd=self.cwd,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            wall = time.perf_counter() - t0
            b1 = _busy_cpu_seconds()
            if proc.returncode != 0:
                err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
                tail = err[-1] if err else ""
                return None, f"exit status {proc.returncode}: {tail}"[:300]
            parsed = _parse_time_file(rss_file)
            rss, cpu = parsed if parsed else (None, None)
            others = None
            if b0 is not None and b1 is not None and cpu is not None and wall > 0:
                others = max(0.0, (b1 - b0 - cpu) / wall)
            return Sample(wall, rss, cpu, others), ""
        finally:
            os.unlink(rss_file)


# --------------------------------------------------------------------------- data sets


def _data_dir(scratch: Path, shape: str, scale: float, seed: int) -> Path:
    if scale == 1.0 and seed == DEFAULT_SEED:
        return scratch / shape
    return scratch / f"{shape}-scale{scale:g}-seed{seed}"


def _expected_runs(shape: str) -> int | None:
    try:
        sys.path.insert(0, str(ROOT))
        from prefeval.synthetic import SHAPES

        return SHAPES[shape].runs
    except Exception:  # generator module unavailable or changed: accept any run count
        return None
    finally:
        sys.path.pop(0)


def _run_files(d: Path) -> list[Path]:
    return sorted(p for p in (d / "runs").glob("input.*") if p.is_file())


def _count_lines(path: Path) -> int:
    n = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 24):
            n += chunk.count(b"\n")
    return n


def _data_stats(d: Path, shape: str, scale: float, seed: int, origin: str) -> dict:
    runs = _run_files(d)
    qids = set()
    with open(d / "qrels.txt", "rb") as f:
        qrels_lines = 0
        for line in f:
            if line.strip():
                qids.add(line.split(None, 1)[0])
                qrels_lines += 1
    sub = d / "qrels.subtopics.txt"
    return {
        "shape": shape,
        "scale": scale,
        "seed": seed,
        "origin": origin,
        "runs": len(runs),
        "queries": len(qids),
        "lines": sum(_count_lines(p) for p in runs),
        "run_bytes": sum(p.stat().st_size for p in runs),
        "qrels_lines": qrels_lines,
        "subtopic_lines": _count_lines(sub) if sub.exists() else 0,
    }


def ensure_data(scratch: Path, shape: str, scale: float, seed: int, log) -> tuple[Path, dict]:
    """Generate the data set unless present; return its folder and its stats."""
    d = _data_dir(scratch, shape, scale, seed)
    manifest = d / "bench-data.json"
    key = {"shape": shape, "scale": scale, "seed": seed}
    want = _expected_runs(shape)
    runs = _run_files(d) if d.exists() else []
    complete = (d / "qrels.txt").exists() and runs and (want is None or len(runs) == want)
    if complete and manifest.exists():
        info = json.loads(manifest.read_text())
        if all(info.get(k) == v for k, v in key.items()):
            log(f"[data] reusing {d} ({info['runs']} runs, {info['lines']:,} lines)")
            return d, info
    if complete and not manifest.exists():
        log(f"[data] reusing {d} (found without manifest; assumed seed {seed}), counting ...")
        info = _data_stats(d, shape, scale, seed, "pre-existing, reused")
        manifest.write_text(json.dumps(info, indent=1) + "\n")
        return d, info
    log(f"[data] generating {shape} scale {scale:g} seed {seed} into {d} ...")
    t0 = time.perf_counter()
    cmd = [sys.executable, str(ROOT / "bench" / "generate.py"), shape, str(d)]
    subprocess.run(
        [*cmd, "--scale", str(scale), "--seed", str(seed)],
        check=True,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
    )
    secs = time.perf_counter() - t0
    info = _data_stats(d, shape, scale, seed, f"generated in {secs:.1f} s")
    manifest.write_text(json.dumps(info, indent=1) + "\n")
    log(f"[data] {info['runs']} runs, {info['lines']:,} lines, {secs:.1f} s")
    return d, info


def _warm_cache(paths: list[Path]) -> None:
    """Read every input once (untimed) so the first timed command does not pay disk I/O."""
    for p in paths:
        with open(p, "rb") as f:
            while f.read(1 << 24):
                pass


# --------------------------------------------------------------------------- commands

ANALYSIS = ("order_nb", "discpower_nb", "tau_nb")


@dataclass
class Cmd:
    key: str
    label: str
    argv: list[str]
    table: str = "main"  # "main" or "scaling"
    cache: bool = False  # run with prefeval's run cache on (warm) instead of off
    # the pipeline rows: cache on, in a folder emptied before `fresh` commands, so the
    # sequence order -> discpower -> tau runs as in a fresh Makefile (first one cold)
    pipeline: bool = False
    fresh: bool = False


@dataclass
class Result:
    samples: list[Sample] = field(default_factory=list)
    error: str = ""

    @property
    def ok(self) -> bool:
        return bool(self.samples) and not self.error

    @property
    def median(self) -> float:
        return statistics.median(s.wall for s in self.samples)

    @property
    def rss_mib(self) -> float | None:
        vals = [s.rss_kib for s in self.samples if s.rss_kib is not None]
        return max(vals) / 1024 if vals else None

    def median_of(self, attr: str) -> float | None:
        vals = [getattr(s, attr) for s in self.samples if getattr(s, attr) is not None]
        return statistics.median(vals) if vals else None


def _prefeval_argv() -> list[str]:
    exe = Path(sys.executable).parent / "prefeval"
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-m", "prefeval"]


def build_commands(d: Path, shape: str, out: Path, quick: bool) -> tuple[list[Cmd], dict]:
    """Commands of one shape, in the order they run within each repeat, and the
    commands left out ({key: (label, reason)})."""
    pf = _prefeval_argv()
    py = [sys.executable, str(THIS)]
    runs = [str(p) for p in _run_files(d)]
    # preference commands use the subtopic qrels when the shape has them (all measures,
    # including ST-RPP and the diversity baselines); the AP/nDCG/RR comparison with
    # ir-measures uses the plain graded qrels for both sides
    sub = d / "qrels.subtopics.txt"
    qrels_pref = str(sub if sub.exists() else d / "qrels.txt")
    qrels_plain = str(d / "qrels.txt")

    def o(name: str) -> str:
        return str(out / name)

    def pref(*opts: str, runs_=None) -> list[str]:
        return [*pf, *opts, qrels_pref, *(runs if runs_ is None else runs_)]

    trials = ("--trials", "1000")
    cmds = [
        Cmd("floor", "FLOOR: pyarrow.csv read of the runs", [*py, "_floor", *runs]),
        Cmd("compare", "`compare` (summary only)", pref("compare", "-o", o("compare.tsv"))),
        Cmd("compare_q_tsv", "`compare -q` (tsv)", pref("compare", "-q", "-o", o("cq.tsv"))),
        Cmd(
            "compare_q_jsonl",
            "`compare -q -f jsonl`",
            pref("compare", "-q", "-f", "jsonl", "-o", o("cq.jsonl")),
        ),
        Cmd(
            "order_nb",
            "`order --no-baselines`",
            pref("order", "--no-baselines", "-o", o("order.tsv")),
        ),
        Cmd(
            "discpower_nb",
            "`discpower --no-baselines --trials 1000`",
            pref("discpower", "--no-baselines", *trials, "-o", o("discpower.tsv")),
        ),
        Cmd("tau_nb", "`tau --no-baselines`", pref("tau", "--no-baselines", "-o", o("taunb.tsv"))),
        Cmd("tau", "`tau` (default baselines)", pref("tau", "-o", o("tau.tsv"))),
        Cmd(
            "metrics",
            "`metrics -q -B AP -B nDCG -B RR`",
            [*pf, "metrics", "-q", "-B", "AP", "-B", "nDCG", "-B", "RR", "-o", o("metrics.tsv")]
            + [qrels_plain, *runs],
        ),
    ]
    skipped = {}
    irm_label = "IR-MEASURES: AP, nDCG, RR"
    if quick and shape == "recsys":
        skipped["irm"] = (irm_label, "skipped (--quick)")
    else:
        cmds.append(Cmd("irm", irm_label, [*py, "_irm", o("irm.tsv"), qrels_plain, *runs]))
    # the same commands with prefeval's on-disk run cache already filled (informative)
    cmds += [
        Cmd(
            "compare_w",
            "`compare` (summary only), warm run cache",
            pref("compare", "-o", o("compare-w.tsv")),
            cache=True,
        ),
        Cmd(
            "order_nb_w",
            "`order --no-baselines`, warm run cache",
            pref("order", "--no-baselines", "-o", o("order-w.tsv")),
            cache=True,
        ),
        Cmd(
            "discpower_nb_w",
            "`discpower --no-baselines --trials 1000`, warm run cache",
            pref("discpower", "--no-baselines", *trials, "-o", o("discpower-w.tsv")),
            cache=True,
        ),
        Cmd(
            "tau_nb_w",
            "`tau --no-baselines`, warm run cache",
            pref("tau", "--no-baselines", "-o", o("taunb-w.tsv")),
            cache=True,
        ),
    ]
    # the analysis pipeline as shipped: cache on, starting empty in every repeat
    cmds += [
        Cmd(
            "order_nb_p",
            "`order --no-baselines`, pipeline (cache starts empty)",
            pref("order", "--no-baselines", "-o", o("order-p.tsv")),
            pipeline=True,
            fresh=True,
        ),
        Cmd(
            "discpower_nb_p",
            "`discpower --no-baselines --trials 1000`, pipeline (after order)",
            pref("discpower", "--no-baselines", *trials, "-o", o("discpower-p.tsv")),
            pipeline=True,
        ),
        Cmd(
            "tau_nb_p",
            "`tau --no-baselines`, pipeline (after discpower)",
            pref("tau", "--no-baselines", "-o", o("taunb-p.tsv")),
            pipeline=True,
        ),
    ]
    if shape == "robust":
        for n in SCALING_RUNS:
            if n >= len(runs):
                continue  # the full set is the main table's floor / compare
            cmds.append(
                Cmd(f"floor{n}", f"FLOOR, first {n} runs", [*py, "_floor", *runs[:n]], "scaling")
            )
            cmds.append(
                Cmd(
                    f"compare{n}",
                    f"`compare`, first {n} runs",
                    pref("compare", "-o", o(f"compare{n}.tsv"), runs_=runs[:n]),
                    "scaling",
                )
            )
    return cmds, skipped


def _cache_files(cache_dir: Path) -> int:
    return sum(1 for p in cache_dir.rglob("*") if p.is_file()) if cache_dir.exists() else 0


def _code_digest() -> str:
    """Digest of the prefeval sources (other people may edit them during a run)."""
    import hashlib

    h = hashlib.sha256()
    for p in sorted((ROOT / "prefeval").rglob("*.py")):
        try:
            h.update(str(p.relative_to(ROOT)).encode() + b"\0" + p.read_bytes())
        except OSError:
            pass
    return h.hexdigest()[:12]


# --------------------------------------------------------------------------- report


def _fmt(x: float | None, nd: int = 2) -> str:
    return "–" if x is None else f"{x:.{nd}f}"


def _ratio(res: dict[str, Result], key: str, anchor: str) -> str:
    a = res.get(anchor)
    r = res.get(key)
    if not (a and a.ok and r and r.ok):
        return "–"
    return f"{r.median / a.median:.2f}"


def analysis_sums(res: dict[str, Result], suffix: str = "") -> Result | None:
    """order + discpower + tau (all --no-baselines), summed per repeat."""
    parts = [res.get(k + suffix) for k in ANALYSIS]
    if not all(p is not None for p in parts):
        return None
    bad = [p.error for p in parts if p.error]
    if bad:
        return Result(error=bad[0])
    n = min(len(p.samples) for p in parts)
    if n == 0:
        return None
    out = Result()
    for i in range(n):
        smp = [p.samples[i] for p in parts]
        rss = [s.rss_kib for s in smp if s.rss_kib is not None]
        cpu = [s.cpu for s in smp if s.cpu is not None]
        oth = [s.others * s.wall for s in smp if s.others is not None]
        wall = sum(s.wall for s in smp)
        out.samples.append(
            Sample(
                wall,
                max(rss) if rss else None,
                sum(cpu) if len(cpu) == len(smp) else None,
                sum(oth) / wall if len(oth) == len(smp) and wall > 0 else None,
            )
        )
    return out


def _machine() -> list[str]:
    lines = []
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "unknown"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                kib = int(line.split()[1])
                mem = f"{kib / 1024 / 1024:.1f} GiB"
                break
    except OSError:
        pass
    lines.append(f"- CPU: {cpu}; {os.cpu_count()} logical CPUs (nproc)")
    lines.append(f"- Memory: {mem} (MemTotal)")
    lines.append(f"- OS: {platform.platform()}")
    lines.append(f"- Python {platform.python_version()} ({sys.executable})")
    from importlib import metadata

    vers = []
    for pkg in ("prefeval", "numpy", "pandas", "pyarrow", "ir-measures", "pytrec-eval-terrier"):
        try:
            vers.append(f"{pkg} {metadata.version(pkg)}")
        except metadata.PackageNotFoundError:
            pass
    lines.append("- " + ", ".join(vers))
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "prefeval"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        ).stdout.strip()
        if head:
            state = " with uncommitted changes under prefeval/" if dirty else ""
            lines.append(f"- Code: git {head}{state}")
    except OSError:
        pass
    return lines


@dataclass
class ShapeRun:
    shape: str
    data_dir: Path
    info: dict
    cmds: list[Cmd]
    results: dict[str, Result]
    skipped: dict = field(default_factory=dict)
    repeats_done: int = 0


@dataclass
class RunState:
    args: argparse.Namespace
    timer: Timer
    started: _dt.datetime
    shapes: dict[str, ShapeRun] = field(default_factory=dict)
    startup: Result | None = None
    pyhello: Result | None = None
    code_digests: list[tuple[str, str]] = field(default_factory=list)  # (when, digest)


def _check(ok: bool | None) -> str:
    return "N/A" if ok is None else ("PASS" if ok else "FAIL")


def _targets(st: RunState) -> list[str]:
    out = []
    shapes = st.shapes

    def med(shape: str, key: str) -> float | None:
        sr = shapes.get(shape)
        r = sr.results.get(key) if sr else None
        return r.median if r and r.ok else None

    def row(target: str, ok: bool | None, fig: str) -> None:
        out.append(f"| {target} | {_check(ok)} | {fig} |")

    # 1. compare summary-only <= 3x floor (robust and recsys)
    for shape in ("robust", "recsys"):
        c, f = med(shape, "compare"), med(shape, "floor")
        ok = None if c is None or f is None else c <= 3 * f
        fig = "no data" if ok is None else f"{c:.2f} s vs floor {f:.2f} s = {c / f:.2f}x"
        w = med(shape, "compare_w")
        if ok is not None and w is not None:
            fig += f" (warm run cache: {w:.2f} s = {w / f:.2f}x)"
        row(f"`compare` summary-only <= 3x floor ({shape})", ok, fig)
    # 2. compare -q tsv <= 6x floor (robust)
    c, f = med("robust", "compare_q_tsv"), med("robust", "floor")
    ok = None if c is None or f is None else c <= 6 * f
    fig = "no data" if ok is None else f"{c:.2f} s vs floor {f:.2f} s = {c / f:.2f}x"
    row("`compare -q` tsv <= 6x floor (robust)", ok, fig)
    # 3. peak RSS of compare on robust <= 1 GiB
    sr = shapes.get("robust")
    r = sr.results.get("compare") if sr else None
    rss = r.rss_mib if r and r.ok else None
    ok = None if rss is None else rss <= 1024
    extra = []
    for k, name in (("compare_q_tsv", "-q tsv"), ("compare_q_jsonl", "-q jsonl")):
        rr = sr.results.get(k) if sr else None
        if rr and rr.ok:
            extra.append(f"{name}: {_fmt(rr.rss_mib, 0)} MiB")
    fig = (
        "no data" if ok is None else f"{rss:.0f} MiB" + (f" ({', '.join(extra)})" if extra else "")
    )
    row("peak RSS of `compare` (robust) <= 1 GiB", ok, fig)
    # 4. analysis (order + discpower + tau, --no-baselines) <= 2x compare, every shape
    for shape, sr in shapes.items():
        target = f"order + discpower + tau (--no-baselines) <= 2x `compare` ({shape})"
        a = analysis_sums(sr.results)
        c = med(shape, "compare")
        if a is None or not a.ok or c is None:
            row(target, None, a.error if a is not None and a.error else "no data")
            continue
        # judged on the pipeline as shipped (cache on, starting empty: the first command
        # parses the runs, the next reuse them); cache-off and warm figures for reference
        ap = analysis_sums(sr.results, "_p")
        if ap is None or not ap.ok:
            row(target, None, "no pipeline data")
            continue
        parts = " + ".join(f"{sr.results[k + '_p'].median:.2f}" for k in ANALYSIS)
        fig = (
            f"pipeline from an empty cache {ap.median:.2f} s ({parts}) vs compare "
            f"{c:.2f} s = {ap.median / c:.2f}x; with the cache off {a.median:.2f} s = "
            f"{a.median / c:.2f}x"
        )
        aw = analysis_sums(sr.results, "_w")
        if aw is not None and aw.ok:
            fig += f"; warm cache {aw.median:.2f} s = {aw.median / c:.2f}x"
        row(target, ap.median <= 2 * c, fig)
    # 5. baselines no slower than ir-measures
    for shape, sr in shapes.items():
        target = f"`metrics -B AP -B nDCG -B RR` <= ir-measures ({shape})"
        m, i = med(shape, "metrics"), med(shape, "irm")
        if m is None or i is None:
            why = []
            for k, name in (("metrics", "metrics"), ("irm", "ir-measures")):
                r = sr.results.get(k)
                if r is not None and r.error:
                    why.append(f"{name}: {r.error}")
                elif k in sr.skipped:
                    why.append(f"{name} {sr.skipped[k][1]}")
            row(target, None, "; ".join(why) or "no data")
            continue
        row(target, m <= i, f"{m:.2f} s vs {i:.2f} s = {m / i:.2f}x")
    # 6. scaling
    target = "scaling: after-read time grows no faster than run pairs (robust)"
    sc = _scaling_rows(shapes.get("robust"))
    if sc is None or len(sc) < 2 or any(x[3] is None for x in sc):
        row(target, None, "no data")
    else:
        steps, ok = [], True
        for (n0, p0, _, a0, _), (n1, p1, _, a1, _) in zip(sc, sc[1:]):
            if a0 <= 0:
                ok = None
                steps.append(f"{n0}->{n1}: after-read time at {n0} runs <= 0 (noise)")
                continue
            g, pg = a1 / a0, p1 / p0
            if ok is not None:
                ok = ok and g <= pg
            steps.append(f"{n0}->{n1} runs: after-read x{g:.2f} vs pairs x{pg:.2f}")
        row(target, ok, "; ".join(steps))
    # 7. start-up
    su = st.startup
    if su is None or not su.ok:
        row("`prefeval --help` < 0.5 s", None, su.error if su is not None else "no data")
    else:
        fig = f"{su.median:.3f} s (median of {len(su.samples)})"
        row("`prefeval --help` < 0.5 s", su.median < 0.5, fig)
    return out


def _scaling_rows(sr: ShapeRun | None):
    """(runs, pairs, compare s, after-read s, floor s) for each scaling point present."""
    if sr is None:
        return None
    rows = []
    n_all = sr.info["runs"]
    for n in SCALING_RUNS:
        if n > n_all:
            continue
        ck, fk = (f"compare{n}", f"floor{n}") if n < n_all else ("compare", "floor")
        c, f = sr.results.get(ck), sr.results.get(fk)
        if c and c.ok and f and f.ok:
            rows.append((n, n * (n - 1) // 2, c.median, c.median - f.median, f.median))
        else:
            rows.append((n, n * (n - 1) // 2, None, None, None))
    return rows


def _shape_table(sr: ShapeRun) -> list[str]:
    L = []
    res = sr.results
    L.append(
        "| command | N | median s | min s | max s | peak RSS MiB | CPU s | other load "
        "| x floor | x ir-measures |"
    )
    L.append("|---|---|---|---|---|---|---|---|---|---|")
    notes = []
    rows = [(c.key, c.label, res.get(c.key)) for c in sr.cmds if c.table == "main"]
    for key, (label, why) in sr.skipped.items():
        rows.append((key, label, Result(error=why)))
    derived = {}
    for suffix, after, label in (
        ("", "tau", "order + discpower + tau, --no-baselines (sum)"),
        ("_w", "tau_nb_w", "order + discpower + tau, --no-baselines, warm run cache (sum)"),
        (
            "_p",
            "tau_nb_p",
            "order + discpower + tau, --no-baselines, pipeline from an empty cache (sum)",
        ),
    ):
        a = analysis_sums(res, suffix)
        if a is None:
            continue
        derived["analysis" + suffix] = a
        idx = next((i for i, r in enumerate(rows) if r[0] == after), len(rows) - 1)
        rows.insert(idx + 1, ("analysis" + suffix, f"**{label}**", a))
    res_all = {**res, **derived}
    for key, label, r in rows:
        if r is None:
            continue
        if r.ok:
            walls = [s.wall for s in r.samples]
            L.append(
                f"| {label} | {len(walls)} | {r.median:.2f} | {min(walls):.2f} | "
                f"{max(walls):.2f} | {_fmt(r.rss_mib, 0)} | {_fmt(r.median_of('cpu'), 1)} | "
                f"{_fmt(r.median_of('others'), 2)} | {_ratio(res_all, key, 'floor')} | "
                f"{_ratio(res_all, key, 'irm')} |"
            )
        elif r.error:
            short = "skipped" if r.error.startswith("skipped") else "not available"
            L.append(f"| {label} | 0 | {short} | | | | | | | |")
            notes.append(f"- {label}: {r.error}")
    if notes:
        L.append("")
        L.extend(notes)
    others = [s.others for r in res.values() for s in r.samples if s.others is not None]
    if others:
        L.append("")
        L.append(
            f"Other work on the machine during the timed commands (CPUs busy outside the "
            f"command, averaged over each command): median {statistics.median(others):.2f}, "
            f"max {max(others):.2f} of {os.cpu_count()} CPUs."
        )
    return L


def write_report(path: Path, st: RunState, status: str) -> None:
    args = st.args
    L = []
    L.append("# prefeval benchmark results")
    L.append("")
    L.append(f"Status: **{status}**")
    L.append("")
    L.append(
        f"Generated by `bench/run.py` (started {st.started:%Y-%m-%d %H:%M} UTC, written "
        f"{_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M} UTC) with "
        f"`--scale {args.scale:g} --repeat {args.repeat} --shapes {','.join(args.shapes)} "
        f"--seed {args.seed} --wait-idle {args.wait_idle:g}{' --quick' if args.quick else ''}`."
    )
    L.append("")
    L.append(
        "**Read with care:** the machine is a small, noisy 2-core virtual machine that other "
        "work (test suites, editors) shares; every figure is the median of N runs (N in the "
        "tables). Within each repeat the commands of a shape run one after another, so "
        "ratios compare figures taken under similar conditions. Before each command the "
        f"harness waits up to {args.wait_idle:g} s for other work to drop below 0.3 busy CPUs; "
        "the *other load* column is the average number of CPUs other processes kept busy "
        "while the command ran (0 = quiet machine; on 2 CPUs, 1 means half the machine was "
        "taken). Treat differences of 10-20% as noise, more when other load is high."
    )
    L.append("")
    if args.scale != 1.0:
        L.append(
            f"Data scale {args.scale:g}: the targets below are defined for full-scale data "
            "(scale 1), so their verdicts here only show that the harness works."
        )
        L.append("")
    L.append(
        "prefeval keeps an on-disk cache of reduced runs. All rows are measured with it "
        "**off** (`PREFEVAL_CACHE=0`, a cold run: every file is parsed) except the rows "
        "marked *warm run cache*, which run with the cache on after it was filled once "
        "(untimed) - the situation of a second command on the same runs - and the rows "
        "marked *pipeline*: the cache on, emptied before `order` in every repeat, then "
        "`order`, `discpower`, `tau` one after another, as a fresh Makefile runs them (the "
        "first parses the runs and computes the preferences, the next two reuse them). "
        "Targets use the cold rows, except the analysis target, which is about that "
        "pipeline; the caches live in the scratch folder."
    )
    L.append("")
    L.append("## Machine")
    L.append("")
    L.extend(_machine())
    L.append(f"- CPU time and peak RSS of each command: {st.timer.method}")
    digests = {d for _, d in st.code_digests}
    if len(digests) > 1:
        L.append(
            "- **The prefeval sources changed during this run** (other developers edit them "
            "concurrently): digests "
            + ", ".join(f"{d} at {w}" for w, d in st.code_digests)
            + ". Figures taken before and after a change may not be comparable."
        )
    elif digests:
        L.append(f"- prefeval sources unchanged during the run (digest {digests.pop()})")
    L.append("")
    L.append("## Data sets (synthetic, `bench/generate.py`)")
    L.append("")
    L.append(
        "| shape | scale | seed | runs | queries (qrels) | run lines | run bytes | "
        "qrels lines | subtopic lines | folder | origin |"
    )
    L.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for sr in st.shapes.values():
        i = sr.info
        try:
            rel = sr.data_dir.resolve().relative_to(ROOT)
        except ValueError:
            rel = sr.data_dir
        L.append(
            f"| {i['shape']} | {i['scale']:g} | {i['seed']} | {i['runs']} | {i['queries']:,} | "
            f"{i['lines']:,} | {i['run_bytes'] / 1e6:,.0f} MB | {i['qrels_lines']:,} | "
            f"{i['subtopic_lines']:,} | `{rel}` | {i['origin']} |"
        )
    L.append("")
    L.append(
        "Preference commands read `qrels.subtopics.txt` when the shape has one (web), so "
        "every applicable measure (including the ST-RPP variants) and baseline is computed; "
        "`metrics` and ir-measures both read the plain graded `qrels.txt`."
    )
    L.append("")
    L.append("Anchors:")
    L.append("")
    L.append(
        "- FLOOR: a plain read of the same run files with `pyarrow.csv.read_csv` "
        "(delimiter ' ', all columns), one file per thread in a ThreadPoolExecutor of "
        "os.cpu_count() workers, in a subprocess (includes interpreter and pyarrow start-up, "
        "as the prefeval figures include theirs)."
    )
    L.append(
        "- IR-MEASURES: `ir_measures.read_trec_qrels` once, then per run "
        "`ir_measures.read_trec_run` + `ir_measures.calc_aggregate([AP, nDCG, RR], qrels, run)`, "
        "in a subprocess."
    )
    L.append("")
    L.append(
        "Columns: wall-clock seconds (median, min, max over N repeats); peak RSS (largest "
        "over the repeats); CPU s = user + system CPU seconds of the command (median; above "
        "the wall time means it used both CPUs); other load (see above); x floor and "
        "x ir-measures = ratio of medians."
    )
    L.append("")
    for sr in st.shapes.values():
        L.append(f"## {sr.shape}")
        L.append("")
        L.append(
            f"{sr.info['runs']} runs x {sr.info['queries']:,} queries, "
            f"{sr.info['lines']:,} run lines; {sr.repeats_done} of {args.repeat} repeats done."
        )
        L.append("")
        L.extend(_shape_table(sr))
        L.append("")
    sc = _scaling_rows(st.shapes.get("robust"))
    L.append("## Scaling (robust, `compare` summary only, first N runs)")
    L.append("")
    if not sc:
        L.append("Not measured (robust shape not in this run).")
    else:
        L.append(
            "After-read time = median compare time minus median FLOOR time for the same runs. "
            "The 110-run point is the main robust table."
        )
        L.append("")
        L.append(
            "| runs | run pairs | compare s | floor s | after-read s | after-read ms per pair |"
        )
        L.append("|---|---|---|---|---|---|")
        for n, p, c, a, f in sc:
            if c is None:
                L.append(f"| {n} | {p:,} | – | – | – | – |")
            else:
                L.append(f"| {n} | {p:,} | {c:.2f} | {f:.2f} | {a:.2f} | {1000 * a / p:.2f} |")
    L.append("")
    L.append("## Start-up")
    L.append("")
    su = st.startup
    if su is not None and su.ok:
        w = [s.wall for s in su.samples]
        L.append(
            f"- `prefeval --help`: median {su.median:.3f} s of {len(w)} "
            f"(min {min(w):.3f}, max {max(w):.3f}), peak RSS {_fmt(su.rss_mib, 0)} MiB"
        )
    elif su is not None:
        L.append(f"- `prefeval --help`: failed ({su.error})")
    if st.pyhello is not None and st.pyhello.ok:
        L.append(
            f"- for reference, bare interpreter `python -c pass`: median {st.pyhello.median:.3f} s"
        )
    L.append("")
    L.append("## Targets")
    L.append("")
    L.append("| target | result | figures (medians) |")
    L.append("|---|---|---|")
    L.extend(_targets(st))
    L.append("")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join(L))
    os.replace(tmp, path)


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    rc = _dispatch_mode(argv)
    if rc is not None:
        return rc
    ap = argparse.ArgumentParser(
        prog="bench/run.py", description="Benchmark prefeval and write RESULTS.md."
    )
    ap.add_argument("--scale", type=float, default=1.0, help="query-count scale of the data")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs of every command")
    ap.add_argument("--shapes", default="robust,web,recsys", help="comma list of shapes")
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
        "--keep-outputs", action="store_true", help="keep the command outputs in SCRATCH/out"
    )
    args = ap.parse_args(argv)
    args.shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]
    allowed = {"robust", "web", "recsys"}
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
    pf = _prefeval_argv()
    cache_root = scratch / "cache"
    env_cold = {**os.environ, "PREFEVAL_CACHE": "0", "PREFEVAL_CACHE_DIR": str(cache_root)}

    def check_code(when: str) -> None:
        d = _code_digest()
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
        cmds, skipped = build_commands(d, shape, outdir, args.quick)
        # warm-cache rows: fill a private cache once (untimed), check it was written
        cache_dir = cache_root / d.name
        shutil.rmtree(cache_dir, ignore_errors=True)
        env_warm = {**os.environ, "PREFEVAL_CACHE": "1", "PREFEVAL_CACHE_DIR": str(cache_dir)}
        pipe_dir = cache_root / f"{d.name}-pipeline"
        env_pipe = {**os.environ, "PREFEVAL_CACHE": "1", "PREFEVAL_CACHE_DIR": str(pipe_dir)}
        _warm_cache([d / "qrels.txt", *_run_files(d)])
        prime = next(c for c in cmds if c.key == "compare_w")
        log(f"[{shape}] filling the run cache (untimed) ...")
        ok = subprocess.run(
            prime.argv, env=env_warm, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        if ok.returncode != 0 or _cache_files(cache_dir) == 0:
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
                    f"{_fmt(s.rss_kib / 1024 if s.rss_kib else None, 0)} MiB, "
                    f"cpu {_fmt(s.cpu, 1)} s, other load {_fmt(s.others, 2)}"
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
