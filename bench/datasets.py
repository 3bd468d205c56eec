"""Benchmark data sets: the registry of shapes, their generation and caching in the scratch folder.

A shape is one entry of :data:`SHAPES`.  Two layouts exist:

- ``trec``: ``qrels.txt`` [+ ``qrels.subtopics.txt``] and ``runs/input.*``, written by
  ``prefeval.synthetic`` (the shape's parameters are in ``prefeval.synthetic.SHAPES``);
- ``parquet``: ``qrels.parquet`` (``query_id, doc_id, relevance``) and ``runs.parquet``, one
  table of many runs (``run, query_id, doc_id, score``), written by a generator in this module.

Every data set is generated on demand by ``bench/generate.py`` (a subprocess, so the harness
stays small) into ``SCRATCH/SHAPE`` (scale 1, default seed) or ``SCRATCH/SHAPE-scaleS-seedN``;
a complete folder is reused.  ``bench-data.json`` in the folder records its key and counts.

Only the standard library is imported at module level (``bench/run.py`` imports this module,
and its helper modes are timed); numpy and pyarrow are imported by the functions needing them.

Usage: python bench/datasets.py SHAPE OUT_DIR [--scale S] [--seed N]   (any registered shape)
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SEED = 1  # bench/scratch/robust was generated with --seed 1


@dataclass(frozen=True)
class DataShape:
    """One benchmark data set.

    ``commands`` names the command set of ``bench/commands.py`` measured on it; ``default``
    puts it in the default ``--shapes`` of ``bench/run.py``; ``generator`` writes it
    (``(out_dir, scale, seed) -> info dict``; None: ``prefeval.synthetic`` shape of the same
    name); ``runs`` is the run count a complete folder has (None: ask prefeval.synthetic, or
    accept any); ``summary`` is one line for ``--help`` and the README."""

    name: str
    layout: str  # "trec" or "parquet"
    commands: str  # command set in bench/commands.py
    default: bool = True
    generator: Callable[[Path, float, int], dict] | None = None
    runs: int | None = None
    summary: str = ""


@dataclass(frozen=True)
class Inputs:
    """The files the commands of a shape read."""

    qrels: Path  # graded qrels: `metrics`, ir-measures
    qrels_pref: Path  # qrels of the preference commands (subtopic qrels when present)
    runs: list[Path]  # run files (one Parquet table of many runs for the parquet layout)


# --------------------------------------------------------------------------- recsys-xl

XL_USERS = 1_000_000  # users (queries) at scale 1
XL_RUNS = 10
XL_DEPTH = 20  # items per user and run
XL_ITEMS = 200_000  # catalogue size
XL_CANDIDATES = 60  # each user's candidate pool: every run ranks these, relevant ones among them
XL_CHUNK_USERS = 25_000  # users generated (and written) at a time: bounds the generator's memory
XL_GRADE2 = 0.25  # share of relevant items with relevance 2 (the others 1)


def generate_recsys_xl(
    out_dir: Path, scale: float = 1.0, seed: int = DEFAULT_SEED, chunk_users: int = XL_CHUNK_USERS
) -> dict:
    """Write ``runs.parquet`` and ``qrels.parquet`` of the recsys-xl shape, chunk by chunk.

    ``round(1,000,000 * scale)`` users (at least 2) x 10 runs x 20 items.  Model: a catalogue
    of 200,000 items with a shared popularity prior; every user has a pool of 60 candidate
    items (distinct, around a random spot of the catalogue), 1 + Poisson(1.5) of them
    relevant (at most 8; relevance 1, or 2 for a quarter of them).  Run ``r`` scores each
    candidate ``quality_r * ease_u * boost(relevance) + popularity_weight_r * prior(item) +
    noise_r * N(0, 1)`` and keeps the top 20, scores rounded to 4 decimals (so a few ties).

    Users are generated ``chunk_users`` at a time and every (chunk, run) block is written as
    one row group with ``pyarrow.parquet.ParquetWriter``, so memory stays at one chunk
    whatever the scale.  Rows: chunk by chunk, within a chunk run by run, within a run user by
    user, items by descending score.  Seeded: chunk ``c`` draws from
    ``SeedSequence(seed, spawn_key=(1, c))`` and its run ``r`` from ``(2, c, r)``, so the same
    seed, scale and chunk size give the same files.  Files are written under temporary names
    and renamed when complete.  Returns a dict of counts.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    n_users = max(2, int(round(XL_USERS * scale)))
    width = len(str(max(n_users, XL_USERS) - 1))  # u000000 ... u999999 at scale <= 1
    cat = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0,)))
    perm = cat.permutation(XL_ITEMS)  # candidate slot -> item number: pools look scattered
    prior = cat.normal(0.0, 0.5, XL_ITEMS)  # popularity prior, shared by all runs
    quality = np.linspace(0.2, 1.4, XL_RUNS) + cat.normal(0.0, 0.1, XL_RUNS)
    pop_weight = cat.uniform(0.0, 1.0, XL_RUNS)
    noise = cat.uniform(0.8, 1.2, XL_RUNS)
    score_scale = cat.uniform(0.5, 5.0, XL_RUNS)
    names = [f"sys{r + 1:02d}" for r in range(XL_RUNS)]
    item_ids = pa.array([f"i{i:06d}" for i in range(XL_ITEMS)], pa.string())
    boost = np.array([0.0, 1.0, 1.5])

    runs_schema = pa.schema(
        [
            ("run", pa.string()),
            ("query_id", pa.string()),
            ("doc_id", pa.string()),
            ("score", pa.float64()),
        ]
    )
    qrels_schema = pa.schema(
        [("query_id", pa.string()), ("doc_id", pa.string()), ("relevance", pa.int64())]
    )
    runs_path, qrels_path = out / "runs.parquet", out / "qrels.parquet"
    runs_tmp, qrels_tmp = out / "runs.parquet.tmp", out / "qrels.parquet.tmp"
    run_rows = qrels_rows = rel_retrieved = 0
    with (
        pq.ParquetWriter(runs_tmp, runs_schema) as run_w,
        pq.ParquetWriter(qrels_tmp, qrels_schema) as qrels_w,
    ):
        for c, u0 in enumerate(range(0, n_users, chunk_users)):
            n = min(chunk_users, n_users - u0)
            rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(1, c)))
            user_ids = pa.array([f"u{u:0{width}d}" for u in range(u0, u0 + n)], pa.string())
            # candidate pools: distinct slots (strictly increasing offsets from a random spot)
            gaps = np.minimum(rng.geometric(1 / 15, (n, XL_CANDIDATES)), 100)
            slots = rng.integers(0, XL_ITEMS, n)[:, None] + np.cumsum(gaps, axis=1)
            items = perm[slots % XL_ITEMS]  # (n, C) item numbers, distinct per user
            n_rel = np.minimum(1 + rng.poisson(1.5, n), 8)
            grade = np.where(np.arange(XL_CANDIDATES) < n_rel[:, None], 1, 0)
            grade[(grade == 1) & (rng.random((n, XL_CANDIDATES)) < XL_GRADE2)] = 2
            ease = rng.lognormal(0.0, 0.3, n)[:, None]
            # qrels: the relevant candidates, user by user
            ui, ci = np.nonzero(grade)
            qrels_w.write_table(
                pa.table(
                    {
                        "query_id": user_ids.take(pa.array(ui)),
                        "doc_id": item_ids.take(pa.array(items[ui, ci])),
                        "relevance": pa.array(grade[ui, ci].astype(np.int64)),
                    },
                    schema=qrels_schema,
                )
            )
            qrels_rows += ui.size
            signal = ease * boost[grade]
            prior_items = prior[items]
            rows_u = np.repeat(np.arange(n), XL_DEPTH)
            for r in range(XL_RUNS):
                rr = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(2, c, r)))
                latent = rr.standard_normal((n, XL_CANDIDATES))  # in place: one (n, C) array
                latent *= noise[r]
                latent += quality[r] * signal
                latent += pop_weight[r] * prior_items
                top = np.argpartition(-latent, XL_DEPTH - 1, axis=1)[:, :XL_DEPTH]
                top_lat = np.take_along_axis(latent, top, axis=1)
                order = np.argsort(-top_lat, axis=1, kind="stable")
                top = np.take_along_axis(top, order, axis=1)
                score = np.round(np.take_along_axis(top_lat, order, axis=1) * score_scale[r], 4)
                rel_retrieved += int(np.count_nonzero(np.take_along_axis(grade, top, axis=1)))
                run_w.write_table(
                    pa.table(
                        {
                            "run": pa.repeat(pa.scalar(names[r]), n * XL_DEPTH),
                            "query_id": user_ids.take(pa.array(rows_u)),
                            "doc_id": item_ids.take(pa.array(items[rows_u, top.ravel()])),
                            "score": pa.array(score.ravel()),
                        },
                        schema=runs_schema,
                    )
                )
                run_rows += n * XL_DEPTH
    runs_tmp.replace(runs_path)
    qrels_tmp.replace(qrels_path)
    return {
        "shape": "recsys-xl",
        "seed": seed,
        "scale": scale,
        "queries": n_users,
        "runs": XL_RUNS,
        "depth": XL_DEPTH,
        "run_names": names,
        "lines": run_rows,
        "qrels_lines": qrels_rows,
        "relevant_per_query_mean": qrels_rows / n_users,
        "relevant_retrieved_per_ranking_mean": rel_retrieved / (n_users * XL_RUNS),
        "chunk_users": chunk_users,
        "bytes_written": runs_path.stat().st_size + qrels_path.stat().st_size,
    }


# --------------------------------------------------------------------------- registry

# One entry per shape; bench/run.py's default --shapes are the entries with default=True,
# in this order.
SHAPES: dict[str, DataShape] = {
    s.name: s
    for s in (
        DataShape("robust", "trec", "trec", summary="TREC Robust-like, 110 runs x 249 queries"),
        DataShape("web", "trec", "trec", summary="Web-track-like, 60 x 50, subtopic qrels"),
        DataShape("recsys", "trec", "trec", summary="21 runs x 17,564 short rankings"),
        # Large (1M users at scale 1; 100k at --scale 0.1): not a default shape, run it
        # with --shapes recsys-xl.
        DataShape(
            "recsys-xl",
            "parquet",
            "parquet",
            default=False,
            generator=generate_recsys_xl,
            runs=XL_RUNS,
            summary="Parquet, 1M users x 10 runs x 20 items",
        ),
    )
}
DEFAULT_SHAPES = [s.name for s in SHAPES.values() if s.default]


# --------------------------------------------------------------------------- folders


def data_dir(scratch: Path, shape: str, scale: float, seed: int) -> Path:
    if scale == 1.0 and seed == DEFAULT_SEED:
        return scratch / shape
    return scratch / f"{shape}-scale{scale:g}-seed{seed}"


def inputs(d: Path, shape: str) -> Inputs:
    if SHAPES[shape].layout == "parquet":
        q = d / "qrels.parquet"
        return Inputs(q, q, [d / "runs.parquet"])
    sub = d / "qrels.subtopics.txt"
    q = d / "qrels.txt"
    return Inputs(q, sub if sub.exists() else q, run_files(d))


def run_files(d: Path) -> list[Path]:
    return sorted(p for p in (d / "runs").glob("input.*") if p.is_file())


def _expected_runs(shape: str) -> int | None:
    if SHAPES[shape].runs is not None:
        return SHAPES[shape].runs
    try:
        sys.path.insert(0, str(ROOT))
        from prefeval.synthetic import SHAPES as SYNTH

        return SYNTH[shape].runs
    except Exception:  # generator module unavailable or changed: accept any run count
        return None
    finally:
        sys.path.pop(0)


def _count_lines(path: Path) -> int:
    n = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 24):
            n += chunk.count(b"\n")
    return n


def _trec_stats(d: Path) -> dict:
    runs = run_files(d)
    qids = set()
    with open(d / "qrels.txt", "rb") as f:
        qrels_lines = 0
        for line in f:
            if line.strip():
                qids.add(line.split(None, 1)[0])
                qrels_lines += 1
    sub = d / "qrels.subtopics.txt"
    return {
        "runs": len(runs),
        "queries": len(qids),
        "lines": sum(_count_lines(p) for p in runs),
        "run_bytes": sum(p.stat().st_size for p in runs),
        "qrels_lines": qrels_lines,
        "subtopic_lines": _count_lines(sub) if sub.exists() else 0,
    }


def _parquet_stats(d: Path) -> dict:
    """Counts of a parquet-layout folder, read row group by row group (memory stays small)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    runs_f = pq.ParquetFile(d / "runs.parquet")
    names: set[str] = set()
    for i in range(runs_f.num_row_groups):
        col = runs_f.read_row_group(i, columns=["run"]).column("run")
        names.update(pc.unique(col).to_pylist())
    qrels = pq.read_table(d / "qrels.parquet", columns=["query_id"]).column("query_id")
    return {
        "runs": len(names),
        "queries": pc.count_distinct(qrels).as_py(),
        "lines": runs_f.metadata.num_rows,
        "run_bytes": (d / "runs.parquet").stat().st_size,
        "qrels_lines": len(qrels),
        "subtopic_lines": 0,
    }


def data_stats(d: Path, shape: str, scale: float, seed: int, origin: str) -> dict:
    key = {"shape": shape, "scale": scale, "seed": seed, "origin": origin}
    counts = _parquet_stats(d) if SHAPES[shape].layout == "parquet" else _trec_stats(d)
    return {**key, **counts}


def _complete(d: Path, shape: str) -> bool:
    if not d.exists():
        return False
    if SHAPES[shape].layout == "parquet":  # written under temporary names, then renamed
        return (d / "runs.parquet").exists() and (d / "qrels.parquet").exists()
    want = _expected_runs(shape)
    runs = run_files(d)
    return (d / "qrels.txt").exists() and bool(runs) and (want is None or len(runs) == want)


def ensure_data(scratch: Path, shape: str, scale: float, seed: int, log) -> tuple[Path, dict]:
    """Generate the data set unless present; return its folder and its stats."""
    d = data_dir(scratch, shape, scale, seed)
    manifest = d / "bench-data.json"
    key = {"shape": shape, "scale": scale, "seed": seed}
    complete = _complete(d, shape)
    if complete and manifest.exists():
        info = json.loads(manifest.read_text())
        if all(info.get(k) == v for k, v in key.items()):
            log(f"[data] reusing {d} ({info['runs']} runs, {info['lines']:,} lines)")
            return d, info
    if complete and not manifest.exists():
        log(f"[data] reusing {d} (found without manifest; assumed seed {seed}), counting ...")
        info = data_stats(d, shape, scale, seed, "pre-existing, reused")
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
    info = data_stats(d, shape, scale, seed, f"generated in {secs:.1f} s")
    manifest.write_text(json.dumps(info, indent=1) + "\n")
    log(f"[data] {info['runs']} runs, {info['lines']:,} lines, {secs:.1f} s")
    return d, info


def warm_page_cache(paths: list[Path]) -> None:
    """Read every input once (untimed) so the first timed command does not pay disk I/O."""
    for p in dict.fromkeys(paths):
        with open(p, "rb") as f:
            while f.read(1 << 24):
                pass


# --------------------------------------------------------------------------- generator CLI


def main(argv: list[str] | None = None) -> int:
    """Generate one shape: bench-only generators here, the TREC ones by prefeval.synthetic."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in SHAPES or SHAPES[argv[0]].generator is None:
        try:
            from prefeval.synthetic import main as synthetic_main
        except ImportError:  # prefeval not installed: use the checkout this file lives in
            sys.path.insert(0, str(ROOT))
            from prefeval.synthetic import main as synthetic_main
        return synthetic_main(argv)
    import argparse

    ap = argparse.ArgumentParser(prog="bench/generate.py", description="Generate a data set.")
    ap.add_argument("shape", choices=sorted(SHAPES))
    ap.add_argument("out_dir")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the number of queries")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    info = SHAPES[args.shape].generator(Path(args.out_dir), args.scale, args.seed)
    info["seconds"] = round(time.perf_counter() - t0, 2)
    info.pop("run_names", None)
    json.dump(info, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
