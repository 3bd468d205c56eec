"""Timing harness: run one command in a subprocess and measure it.

- :class:`Timer` runs a command (``Timer.run``) after waiting for the machine to calm down
  and returns a :class:`Sample`: wall time (``time.perf_counter`` around
  ``subprocess.run``), peak RSS and CPU seconds of the child (GNU ``/usr/bin/time -f
  '%M %U %S'``, or the ``_rss`` helper mode when GNU time is missing) and the CPUs other
  processes kept busy meanwhile (``/proc/stat``).
- :class:`Result`: the samples of one command over the repeats (median, peak RSS, ...).
- Helper modes, run as ``bench/run.py _MODE ...`` in a subprocess so they are timed like
  the CLI (:func:`dispatch_mode`):

      run.py _floor RUN...            read every run file (CSV/TREC or Parquet), one per thread
      run.py _irm OUT QRELS RUN...    ir-measures AP, nDCG, RR of every run
      run.py _rss OUT -- CMD...       run CMD, write its peak RSS (KiB) and CPU s to OUT

Only the standard library is imported at module level (the FLOOR anchor's start-up
includes importing this module).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUN_PY = Path(__file__).resolve().with_name("run.py")  # entry point of the helper modes
HELPER = [sys.executable, str(RUN_PY)]  # argv prefix of a helper mode
GNU_TIME = "/usr/bin/time"
TIME_FORMAT = "%M %U %S"  # peak RSS KiB, user CPU s, system CPU s
PARQUET_MAGIC = b"PAR1"

# --------------------------------------------------------------------------- helper modes


def _is_parquet(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == PARQUET_MAGIC


def _mode_floor(paths: list[str]) -> int:
    """FLOOR anchor: read every run file fully (all columns) with pyarrow.

    TREC run files with ``pyarrow.csv`` (delimiter ' '), one file per thread
    (ThreadPoolExecutor of os.cpu_count() workers); pyarrow's own intra-file threading is
    off because files are already read in parallel (that was the faster combination on
    the benchmark machine).  Parquet files (magic ``PAR1``, e.g. one table of many runs)
    are streamed batch by batch with pyarrow's threads on, all columns decoded, so memory
    stays bounded: the floor of a reader that does not hold the whole table."""
    from concurrent.futures import ThreadPoolExecutor

    import pyarrow.csv as pacsv

    read_opts = pacsv.ReadOptions(autogenerate_column_names=True, use_threads=False)
    parse_opts = pacsv.ParseOptions(delimiter=" ")

    def read(path: str) -> int:
        if _is_parquet(path):
            import pyarrow.parquet as pq

            batches = pq.ParquetFile(path).iter_batches(batch_size=1 << 20, use_threads=True)
            return sum(b.num_rows for b in batches)
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


def dispatch_mode(argv: list[str]) -> int | None:
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


class TreeRss:
    """Peak of the summed RSS of a process and all its descendants (Dask's workers:
    GNU time reports only the largest single process), sampled every 0.1 s with psutil
    in a thread; None without psutil."""

    def __init__(self, pid: int):
        import threading

        self.peak = None
        self._done = threading.Event()
        try:
            import psutil

            self._root = psutil.Process(pid)
        except Exception:  # no psutil, or the process is gone already
            return
        self.peak = 0
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        import psutil

        while not self._done.wait(0.1):
            try:
                procs = [self._root, *self._root.children(recursive=True)]
            except psutil.Error:
                continue
            total = 0
            for proc in procs:
                try:
                    total += proc.memory_info().rss
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total // 1024)

    def stop(self) -> int | None:
        """The peak in KiB (None when it could not be sampled)."""
        self._done.set()
        if self.peak is None:
            return None
        self._thread.join()
        return self.peak or None


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
            f"GNU /usr/bin/time -f '{TIME_FORMAT}'; peak RSS: the larger of its figure and "
            "the summed RSS of the command's process tree (Dask workers too; psutil, every "
            "0.1 s)"
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
                full = [sys.executable, str(RUN_PY), "_rss", rss_file, "--", *argv]
            b0 = _busy_cpu_seconds()
            t0 = time.perf_counter()
            popen = subprocess.Popen(
                full,
                cwd=self.cwd,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            sampler = TreeRss(popen.pid)
            stderr = popen.communicate()[1]
            wall = time.perf_counter() - t0
            tree = sampler.stop()
            proc = subprocess.CompletedProcess(full, popen.returncode, None, stderr)
            b1 = _busy_cpu_seconds()
            if proc.returncode != 0:
                err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
                tail = err[-1] if err else ""
                return None, f"exit status {proc.returncode}: {tail}"[:300]
            parsed = _parse_time_file(rss_file)
            rss, cpu = parsed if parsed else (None, None)
            if tree is not None and rss is not None:
                rss = max(rss, tree)  # worker processes (Dask) count too
            others = None
            if b0 is not None and b1 is not None and cpu is not None and wall > 0:
                others = max(0.0, (b1 - b0 - cpu) / wall)
            return Sample(wall, rss, cpu, others), ""
        finally:
            os.unlink(rss_file)


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


def prefeval_argv() -> list[str]:
    exe = Path(sys.executable).parent / "prefeval"
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-m", "prefeval"]


def cache_files(cache_dir: Path) -> int:
    return sum(1 for p in cache_dir.rglob("*") if p.is_file()) if cache_dir.exists() else 0


def code_digest() -> str:
    """Digest of the prefeval sources (other people may edit them during a run)."""
    import hashlib

    h = hashlib.sha256()
    for p in sorted((ROOT / "prefeval").rglob("*.py")):
        try:
            h.update(str(p.relative_to(ROOT)).encode() + b"\0" + p.read_bytes())
        except OSError:
            pass
    return h.hexdigest()[:12]


def print_markdown(lines: list[str], out: str | None = None) -> None:
    """A bench's Markdown ``lines`` printed, and written to the file ``out`` too."""
    text = "\n".join(lines) + "\n"
    print(text)
    if out:
        Path(out).write_text(text)
