"""The report: RESULTS.md from the measurements of a run (:func:`write_report`).

Holds the state of a run (:class:`RunState`, one :class:`ShapeRun` per shape), the machine
details, one table per shape, the scaling table, start-up, and the performance targets
(:func:`_targets`, PASS/FAIL).  The file is rewritten after every repeat, atomically.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import platform
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from commands import ANALYSIS, SCALING_RUNS, Cmd
from datasets import SHAPES
from harness import ROOT, Result, Sample, Timer


def fmt(x: float | None, nd: int = 2) -> str:
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
            extra.append(f"{name}: {fmt(rr.rss_mib, 0)} MiB")
    fig = (
        "no data" if ok is None else f"{rss:.0f} MiB" + (f" ({', '.join(extra)})" if extra else "")
    )
    row("peak RSS of `compare` (robust) <= 1 GiB", ok, fig)
    # 4. analysis (order + discpower + tau, --no-baselines) <= 2x compare, every shape
    for shape, sr in shapes.items():
        if not all(k in sr.results for k in ANALYSIS):
            continue  # a command set without order + discpower + tau (Parquet shapes)
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
        if "metrics" not in sr.results and "metrics" not in sr.skipped:
            continue  # a command set without `metrics` (Parquet shapes)
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
                f"{max(walls):.2f} | {fmt(r.rss_mib, 0)} | {fmt(r.median_of('cpu'), 1)} | "
                f"{fmt(r.median_of('others'), 2)} | {_ratio(res_all, key, 'floor')} | "
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
    if any(SHAPES[sr.shape].layout == "parquet" for sr in st.shapes.values()):
        L.append(
            "- FLOOR of a Parquet shape: `pyarrow.parquet.ParquetFile.iter_batches` over the "
            "runs table (all columns decoded, batches of 2^20 rows, pyarrow's threads on), "
            "so memory stays bounded, in a subprocess."
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
            f"(min {min(w):.3f}, max {max(w):.3f}), peak RSS {fmt(su.rss_mib, 0)} MiB"
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
    text = "\n".join(L) + _kept_by_hand(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


#: the line from which RESULTS.md is kept by hand: everything from it on survives a rerun
HAND_KEPT = "<!-- Everything above is written by `bench/run.py`"


def _kept_by_hand(path: Path) -> str:
    """The hand-kept part of the page at ``path`` (from :data:`HAND_KEPT` on), or ""."""
    try:
        text = path.read_text()
    except OSError:
        return ""
    at = text.find(HAND_KEPT)
    return "" if at < 0 else "\n" + text[at:]
