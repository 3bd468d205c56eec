"""Seeded generator of realistic synthetic TREC-format test collections.

Used to write the small bundled ``sample_data/`` and large benchmark sets (to a scratch
folder, never committed).  Only numpy and the standard library are used.

Layout written by :func:`generate`::

    out_dir/qrels.txt               qid 0 docno grade
    out_dir/qrels.subtopics.txt     qid subtopic docno grade   (shapes with subtopics only)
    out_dir/runs/input.<runname>    qid Q0 docno rank score tag  (``.gz`` when gzipped)

Model
-----
Every query has a fixed-size candidate pool of documents: ``m`` relevant (negative
binomial around the shape's mean, at least 1), ``n0`` judged non-relevant (a few of them
spam, grade -2, for web-like shapes) and the rest unjudged.  Each run has a latent quality
``q``; a run scores every pool document as::

    latent = shared_doc_prior + noise + q * query_ease * boost(grade) - mismatch_penalty

and retrieves the top ``depth`` documents, so weak runs push relevant documents down or out
of the ranking.  Latent scores are mapped to a run-specific score scale (BM25-like,
log-probability-like or probability-like), written with 6 decimals, and about 2% of the
scores are set equal to their neighbour's score to create exact ties.  Some runs return
fewer than ``depth`` documents for a few queries; in the ``sample`` shape, run ``sys04``
has no line at all for one query.

Determinism: the collection is drawn from one child of ``SeedSequence(seed)`` and every run
from its own spawned child, so a run's content does not depend on generation order.  Same
seed + shape + scale + run count gives byte-identical files (gzip headers carry
``mtime=0``).  The run count may differ from the shape's (``runs=``, ``--runs``): run *k*
is the same whatever the count (its name aside, where more runs widen the number), since
the shape's runs keep their stratified qualities and each run beyond them draws its
quality from its own child; spawned children are the same first ones whatever their
number.  ``names="realistic"`` names the runs as retrieval systems are (``bm25``,
``contriever-msmarco_k1=0.9_b=0.4``, ``colbertv2-rerank@100``) instead of ``sys01``...

Each run file is formatted with one vectorized pass: all fields are laid out in a
fixed-width ``uint8`` matrix where unused leading positions hold NUL bytes, which are then
dropped with a single boolean mask.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .io.text import parse_run

__all__ = ["NAMINGS", "SHAPES", "Shape", "generate", "main", "run_names"]

UNJUDGED = -9  # grade code for pool documents that are not in the qrels
FIRST_QID = 301


@dataclass(frozen=True)
class Shape:
    name: str
    runs: int
    queries: int
    depth: int
    pool: int  # candidate documents per query (judged + unjudged), >= 2 * depth
    rel_mean: float  # mean number of relevant documents per query
    nonrel_mean: float  # mean number of judged non-relevant documents per query
    grades: tuple[tuple[int, float], ...]  # (grade, probability) for relevant documents
    spam_frac: float  # fraction of judged non-relevant documents graded -2
    subtopics: tuple[int, int] | None  # (min, max) subtopics per query, or None
    doc_prefix: str
    doc_digits: int
    corpus: int  # size of the docno number space (documents may be shared by queries)
    scalable: bool = True


SHAPES: dict[str, Shape] = {
    s.name: s
    for s in (
        Shape(
            "sample",
            runs=6,
            queries=20,
            depth=50,
            pool=150,
            rel_mean=8,
            nonrel_mean=22,
            grades=((1, 0.50), (2, 0.30), (3, 0.16), (4, 0.04)),
            spam_frac=0.06,
            subtopics=(3, 4),
            doc_prefix="doc",
            doc_digits=7,
            corpus=10**7,
            scalable=False,
        ),
        Shape(
            "robust",
            runs=110,
            queries=249,
            depth=1000,
            pool=3000,
            rel_mean=70,
            nonrel_mean=1100,
            grades=((1, 0.8), (2, 0.2)),
            spam_frac=0.0,
            subtopics=None,
            doc_prefix="doc",
            doc_digits=7,
            corpus=10**7,
        ),
        Shape(
            "web",
            runs=60,
            queries=50,
            depth=1000,
            pool=3000,
            rel_mean=180,
            nonrel_mean=420,
            grades=((1, 0.55), (2, 0.28), (3, 0.13), (4, 0.04)),
            spam_frac=0.10,
            subtopics=(4, 4),
            doc_prefix="doc",
            doc_digits=8,
            corpus=10**8,
        ),
        Shape(
            "recsys",
            runs=21,
            queries=17564,
            depth=100,
            pool=300,
            rel_mean=14,
            nonrel_mean=16,
            grades=((1, 1.0),),
            spam_frac=0.0,
            subtopics=None,
            doc_prefix="item",
            doc_digits=6,
            corpus=10**5,
        ),
    )
}

#: how :func:`generate` names runs: ``sys01``... or as retrieval systems are named
NAMINGS = ("sys", "realistic")
# realistic run names: a system, then, from the second round of systems on, a setting
_SYSTEMS = (
    "bm25", "ql", "bm25+rm3", "dph", "splade-v2", "contriever-msmarco", "tas-b",
    "colbertv2", "monot5-base", "ance",
)  # fmt: skip
_SETTINGS = (
    "_k1=0.9_b=0.4", "-rerank@100", "_k1=1.2_b=0.75", "-rerank@1000", "_fb=10",
    "-distill", "_k1=0.6_b=0.3", "-rerank@50",
)  # fmt: skip


def run_names(count: int, naming: str = "sys") -> list[str]:
    """The names of ``count`` runs: ``sys01``... (``sys001``... from 100 runs on, so they
    sort as strings), or realistic ones (every system, then every system with each
    setting in turn, then with a round number: all distinct, the first ones the same
    whatever ``count``).

    >>> run_names(3), run_names(12, "realistic")[9:]
    (['sys01', 'sys02', 'sys03'], ['ance', 'bm25_k1=0.9_b=0.4', 'ql_k1=0.9_b=0.4'])
    """
    if naming == "sys":
        width = max(2, len(str(count)))
        return [f"sys{r + 1:0{width}d}" for r in range(count)]
    if naming != "realistic":
        raise ValueError(f"unknown naming {naming!r}; choose from {', '.join(NAMINGS)}")
    names = []
    for r in range(count):
        turn, system = divmod(r, len(_SYSTEMS))
        name = _SYSTEMS[system]
        if turn:
            again, setting = divmod(turn - 1, len(_SETTINGS))
            name += _SETTINGS[setting] + (f"-{again + 1}" if again else "")
        names.append(name)
    return names


# Ranking boost per grade (multiplied by run quality and query ease).
_BOOST_NONREL = 1.1
_BOOST_SPAM = 0.9
_TIE_FRAC = 0.02


def _boost(grade: int) -> float:
    if grade == UNJUDGED:
        return 0.0
    if grade == -2:
        return _BOOST_SPAM
    if grade <= 0:
        return _BOOST_NONREL
    return 1.8 + 0.5 * (grade - 1)


# --------------------------------------------------------------------------- formatting
# Fields are (n, width) uint8 blocks; NUL bytes are padding removed when joining.


def _uint_cols(x: np.ndarray, width: int, zero_pad: bool = False) -> np.ndarray:
    """Non-negative ints -> ASCII digits, right aligned; leading zeros become NUL unless
    ``zero_pad`` (the last digit is always kept)."""
    x = np.asarray(x, dtype=np.int64)
    out = np.empty((x.size, width), dtype=np.uint8)
    rem = x.copy()
    for j in range(width - 1, -1, -1):
        out[:, j] = rem % 10 + 48
        rem //= 10
    if not zero_pad:
        for j in range(width - 1):
            out[x < 10 ** (width - 1 - j), j] = 0
    return out


def _ndigits(x: np.ndarray) -> int:
    m = int(np.abs(x).max()) if x.size else 0
    return max(1, len(str(m)))


def _int_cols(x: np.ndarray) -> np.ndarray:
    """Signed ints -> '-' column (or NUL) + digits."""
    x = np.asarray(x, dtype=np.int64)
    sign = np.where(x < 0, ord("-"), 0).astype(np.uint8)[:, None]
    return np.hstack([sign, _uint_cols(np.abs(x), _ndigits(x))])


def _fixed6_cols(micro: np.ndarray) -> np.ndarray:
    """Scores in integer millionths -> text like ``-12.345678`` (exactly '%.6f')."""
    micro = np.asarray(micro, dtype=np.int64)
    a = np.abs(micro)
    ipart, fpart = a // 1_000_000, a % 1_000_000
    sign = np.where(micro < 0, ord("-"), 0).astype(np.uint8)[:, None]
    dot = np.full((micro.size, 1), ord("."), dtype=np.uint8)
    return np.hstack(
        [sign, _uint_cols(ipart, _ndigits(ipart)), dot, _uint_cols(fpart, 6, zero_pad=True)]
    )


def _const_cols(text: str, n: int) -> np.ndarray:
    return np.broadcast_to(np.frombuffer(text.encode("ascii"), dtype=np.uint8), (n, len(text)))


def _join_lines(blocks: list[np.ndarray]) -> bytes:
    mat = np.concatenate(blocks, axis=1)
    return mat[mat != 0].tobytes()


def _docno_cols(ids: np.ndarray, shape: Shape) -> np.ndarray:
    n = ids.size
    return np.hstack(
        [_const_cols(shape.doc_prefix, n), _uint_cols(ids, shape.doc_digits, zero_pad=True)]
    )


# --------------------------------------------------------------------------- collection


@dataclass
class _Collection:
    qids: np.ndarray  # (Q,) int
    ids: np.ndarray  # (Q, P) int64 docno numbers, distinct within a row
    grades: np.ndarray  # (Q, P) int8, UNJUDGED for unjudged pool documents
    prior: np.ndarray  # (Q, P) shared "retrievability" of each document
    ease: np.ndarray  # (Q,) per-query ease multiplier
    qualities: np.ndarray  # (runs,) latent run qualities
    n_rel: np.ndarray  # (Q,)


def _neg_binomial(rng: np.random.Generator, mean: float, k: float, size: int) -> np.ndarray:
    if mean <= 0:
        return np.zeros(size, dtype=np.int64)
    return rng.negative_binomial(k, k / (k + mean), size=size).astype(np.int64)


def _make_collection(shape: Shape, n_queries: int, rng: np.random.Generator) -> _Collection:
    Q, P = n_queries, shape.pool
    m = 1 + _neg_binomial(rng, shape.rel_mean - 1, 1.5, Q)
    m = np.minimum(m, int(0.3 * P))
    n0 = np.minimum(_neg_binomial(rng, shape.nonrel_mean, 3.0, Q), int(0.45 * P))

    # Distinct docno numbers per query: a random window of the corpus with random gaps.
    gap = max(1, shape.corpus // (8 * P))
    gaps = rng.integers(1, 2 * gap, size=(Q, P), dtype=np.int64)
    starts = rng.integers(0, shape.corpus - 2 * gap * P, size=Q, dtype=np.int64)
    ids = rng.permuted(starts[:, None] + np.cumsum(gaps, axis=1), axis=1)

    col = np.arange(P)
    rel = col < m[:, None]
    judged_nonrel = (col >= m[:, None]) & (col < (m + n0)[:, None])
    values = np.array([g for g, _ in shape.grades], dtype=np.int8)
    probs = np.array([p for _, p in shape.grades], dtype=float)
    rel_grades = rng.choice(values, p=probs / probs.sum(), size=(Q, P))
    spam = rng.random((Q, P)) < shape.spam_frac
    grades = np.full((Q, P), UNJUDGED, dtype=np.int8)
    grades[rel] = rel_grades[rel]
    grades[judged_nonrel] = np.where(spam, -2, 0).astype(np.int8)[judged_nonrel]

    prior = rng.normal(0.0, 0.7, size=(Q, P))
    ease = rng.lognormal(0.0, 0.35, size=Q)
    # Stratified run qualities so that runs are spread from weak to strong.
    R = shape.runs
    qualities = 0.2 + 1.6 * (rng.permutation(R) + rng.random(R)) / R
    return _Collection(np.arange(FIRST_QID, FIRST_QID + Q), ids, grades, prior, ease, qualities, m)


def _judged(coll: _Collection) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Judged documents as (query index, docno number, grade), sorted by query then docno."""
    qi, slot = np.nonzero(coll.grades != UNJUDGED)
    ids = coll.ids[qi, slot]
    g = coll.grades[qi, slot]
    order = np.lexsort((ids, qi))
    return qi[order], ids[order], g[order]


def _qrels_bytes(coll: _Collection, shape: Shape, qi, ids, g) -> bytes:
    n = qi.size
    return _join_lines(
        [
            _int_cols(coll.qids[qi]),
            _const_cols(" 0 ", n),
            _docno_cols(ids, shape),
            _const_cols(" ", n),
            _int_cols(g),
            _const_cols("\n", n),
        ]
    )


def _subtopic_bytes(
    coll: _Collection, shape: Shape, qi, ids, g, rng: np.random.Generator
) -> tuple[bytes, int]:
    assert shape.subtopics is not None  # called for the shapes with subtopics only
    lo, hi = shape.subtopics
    Q = coll.qids.size
    n_sub = rng.integers(lo, hi + 1, size=Q)
    n = qi.size
    T = n_sub[qi]  # subtopics of each judged document's query
    rel = g > 0
    g32 = g.astype(np.int64)
    primary = (rng.random(n) * T).astype(np.int64)
    t = np.arange(hi)
    extra = (rng.random((n, hi)) < 0.35) & (t < T[:, None]) & rel[:, None]
    extra_grade = 1 + (rng.random((n, hi)) * g32[:, None].clip(min=1)).astype(np.int64)
    sub = np.where(extra, extra_grade, 0)
    sub[np.nonzero(rel)[0], primary[rel]] = g32[rel]  # max over subtopics == general grade
    r, c = np.nonzero(t < T[:, None])
    order = np.lexsort((ids[r], c, qi[r]))
    r, c = r[order], c[order]
    k = r.size
    data = _join_lines(
        [
            _int_cols(coll.qids[qi[r]]),
            _const_cols(" ", k),
            _int_cols(c + 1),
            _const_cols(" ", k),
            _docno_cols(ids[r], shape),
            _const_cols(" ", k),
            _int_cols(sub[r, c]),
            _const_cols("\n", k),
        ]
    )
    return data, k


# --------------------------------------------------------------------------- runs


def _run_bytes(
    coll: _Collection, shape: Shape, r: int, name: str, q: float, rng: np.random.Generator
) -> tuple[bytes, int]:
    Q, P = coll.grades.shape
    depth = shape.depth
    p_miss = rng.uniform(0.03, 0.2)  # vocabulary mismatch: document barely matched
    style = int(rng.integers(3))
    p_short = rng.uniform(0.0, 0.06)

    lut = np.zeros(256)
    for code in np.unique(coll.grades):
        lut[int(code) % 256] = _boost(int(code))
    boost = lut[coll.grades.astype(np.int64) % 256]
    latent = coll.prior + rng.normal(size=(Q, P)) + (q * coll.ease)[:, None] * boost
    latent -= 4.0 * (rng.random((Q, P)) < p_miss)

    top = np.argpartition(-latent, depth - 1, axis=1)[:, :depth]
    vals = np.take_along_axis(latent, top, axis=1)
    order = np.argsort(-vals, axis=1, kind="stable")
    top = np.take_along_axis(top, order, axis=1)
    vals = np.take_along_axis(vals, order, axis=1)

    if style == 0:  # BM25-like, mostly positive
        scores = 14.0 + rng.uniform(1.5, 4.0) * vals
    elif style == 1:  # log-probability-like, negative
        scores = -9.0 + rng.uniform(0.8, 1.6) * vals
    else:  # probability-like in (0, 1)
        scores = 1.0 / (1.0 + np.exp(-(vals - 2.0) / 1.5))
    micro = np.rint(scores * 1e6).astype(np.int64)
    tie = rng.random((Q, depth)) < _TIE_FRAC
    micro[:, 1:] = np.where(tie[:, 1:], micro[:, :-1], micro[:, 1:])

    lengths = np.where(
        rng.random(Q) < p_short, rng.integers(max(1, depth // 10), depth, size=Q), depth
    )
    if shape.name == "sample" and r == 3:
        lengths[rng.integers(Q)] = 0  # this run has no line at all for one query

    col = np.arange(depth)
    qi, pos = np.nonzero(col < lengths[:, None])
    n = qi.size
    ids = coll.ids[qi, top[qi, pos]]
    data = _join_lines(
        [
            _int_cols(coll.qids[qi]),
            _const_cols(" Q0 ", n),
            _docno_cols(ids, shape),
            _const_cols(" ", n),
            _int_cols(pos + 1),
            _const_cols(" ", n),
            _fixed6_cols(micro[qi, pos]),
            _const_cols(f" {name}\n", n),
        ]
    )
    return data, n


# --------------------------------------------------------------------------- API


def _write(path: Path, data: bytes, gz: bool) -> int:
    if gz:
        data = gzip.compress(data, compresslevel=6, mtime=0)
    path.write_bytes(data)
    return len(data)


def _write_runs_table(path: Path, names: list[str], texts: list[bytes]) -> int:
    """All runs in one Parquet table ``run, query_id, doc_id, score`` (the runs' lines in
    order, scores as the text reader reads them), for the examples of Parquet input."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    runs = [parse_run(data, f"input.{name}", name) for name, data in zip(names, texts)]
    table = pa.table(
        {
            "run": pa.array([r.name for r in runs for _ in range(len(r))], pa.string()),
            "query_id": pa.concat_arrays([r.query_id for r in runs]),
            "doc_id": pa.concat_arrays([r.doc_id for r in runs]),
            "score": pa.array(np.concatenate([r.score for r in runs]), pa.float64()),
        }
    )
    pq.write_table(table, path, compression="zstd")
    return path.stat().st_size


def generate(
    out_dir,
    shape: str = "sample",
    scale: float = 1.0,
    seed: int = 0,
    gzip_runs: bool = False,
    runs: int | None = None,
    names: str = "sys",
) -> dict:
    """Write a synthetic collection (qrels, optional subtopic qrels, runs) to ``out_dir``.

    ``scale`` multiplies the number of queries (at least 2; ignored for ``sample``).
    ``runs``: how many runs (default the shape's); ``names``: ``sys`` (``sys01``...) or
    ``realistic`` (:func:`run_names`).  With ``gzip_runs`` every run is written as
    ``input.<name>.gz``; the ``sample`` shape always gzips its sixth run and also writes
    every run in one Parquet table ``runs.parquet`` (columns ``run, query_id, doc_id,
    score``).  Returns a dict of counts.
    """
    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; choose from {sorted(SHAPES)}")
    sh = SHAPES[shape]
    n_runs = sh.runs if runs is None else runs
    if isinstance(n_runs, bool) or not isinstance(n_runs, int) or n_runs < 1:
        raise ValueError(f"runs must be a positive integer, not {runs!r}")
    run_list = run_names(n_runs, names)
    n_queries = sh.queries if not sh.scalable else max(2, int(round(sh.queries * scale)))
    out = Path(out_dir)
    runs_dir = out / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)

    root = np.random.SeedSequence(seed)
    coll_ss, sub_ss, runs_ss = root.spawn(3)
    coll = _make_collection(sh, n_queries, np.random.default_rng(coll_ss))

    qi, ids, g = _judged(coll)
    nbytes = _write(out / "qrels.txt", _qrels_bytes(coll, sh, qi, ids, g), False)
    sub_lines = 0
    if sh.subtopics is not None:
        data, sub_lines = _subtopic_bytes(coll, sh, qi, ids, g, np.random.default_rng(sub_ss))
        nbytes += _write(out / "qrels.subtopics.txt", data, False)

    run_lines = 0
    texts = []
    for r, ss in enumerate(runs_ss.spawn(n_runs)):
        name = run_list[r]
        gz = gzip_runs or (sh.name == "sample" and r == 5)
        if r < sh.runs:  # the shape's runs: stratified from weak to strong
            quality = coll.qualities[r]
        else:  # more: each its own, from a child of its seed (its stream unchanged)
            quality = 0.2 + 1.6 * np.random.default_rng(ss.spawn(1)[0]).random()
        data, n = _run_bytes(coll, sh, r, name, quality, np.random.default_rng(ss))
        path = runs_dir / (f"input.{name}" + (".gz" if gz else ""))
        stale = runs_dir / (f"input.{name}" + ("" if gz else ".gz"))
        if stale.exists():
            stale.unlink()
        nbytes += _write(path, data, gz)
        run_lines += n
        texts.append(data)
    if sh.name == "sample":
        nbytes += _write_runs_table(out / "runs.parquet", run_list, texts)

    return {
        "shape": sh.name,
        "seed": seed,
        "scale": scale if sh.scalable else 1.0,
        "queries": n_queries,
        "runs": n_runs,
        "depth": sh.depth,
        "run_names": run_list,
        "lines": run_lines,
        "qrels_lines": int(qi.size),
        "subtopic_lines": sub_lines,
        "relevant_per_query_mean": float(coll.n_rel.mean()),
        "judged_per_query_mean": float(qi.size / n_queries),
        "bytes_written": nbytes,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m prefeval.synthetic",
        description="Generate a seeded synthetic TREC-format collection (qrels + runs).",
    )
    ap.add_argument("shape", choices=sorted(SHAPES))
    ap.add_argument("out_dir")
    ap.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="multiply the number of queries (ignored for 'sample')",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gzip", action="store_true", help="write runs as input.<name>.gz")
    ap.add_argument(
        "--runs",
        type=_positive,
        default=None,
        metavar="N",
        help="the number of runs (default: the shape's); run k is the same whatever N",
    )
    ap.add_argument(
        "--names",
        choices=NAMINGS,
        default="sys",
        help="run names: sys01, sys02... (default) or realistic ones "
        "(bm25, contriever-msmarco_k1=0.9_b=0.4, colbertv2-rerank@100...)",
    )
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    info = generate(
        args.out_dir,
        shape=args.shape,
        scale=args.scale,
        seed=args.seed,
        gzip_runs=args.gzip,
        runs=args.runs,
        names=args.names,
    )
    info["seconds"] = round(time.perf_counter() - t0, 2)
    info.pop("run_names")
    json.dump(info, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return value


if __name__ == "__main__":
    sys.exit(main())
