"""Small helpers for writing TREC files and running the CLI in-process."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import pandas as pd
from click.testing import CliRunner

from prefeval.cli import cli

COLUMNS = ["measure", "run_a", "run_b", "query_id", "value"]


def write_qrels(path: Path, rows, sep: str = " ") -> Path:
    """rows: (qid, iteration, docno, grade)."""
    text = "".join(f"{q}{sep}{it}{sep}{d}{sep}{g}\n" for q, it, d, g in rows)
    Path(path).write_text(text, encoding="utf-8")
    return Path(path)


def run_lines(rows, tag: str | None = "tag"):
    """TREC run lines for (qid, docno, score) rows; ranks count up per query in row order
    (they are ignored by evaluation anyway)."""
    rank: dict[str, int] = {}
    lines = []
    for q, d, s in rows:
        rank[q] = rank.get(q, 0) + 1
        line = f"{q} Q0 {d} {rank[q]} {s!r}"
        if tag is not None:
            line += f" {tag}"
        lines.append(line)
    return lines


def write_run(path: Path, rows, tag: str | None = "tag", compress: bool = False) -> Path:
    """rows: (qid, docno, score)."""
    data = "".join(line + "\n" for line in run_lines(rows, tag)).encode("utf-8")
    if compress:
        data = gzip.compress(data)
    Path(path).write_bytes(data)
    return Path(path)


def invoke(*args):
    """Run ``prefeval ARGS`` in-process; returns the click Result (stdout/stderr separate)."""
    runner = CliRunner()
    return runner.invoke(cli, [str(a) for a in args], catch_exceptions=True)


def read_tsv(text: str) -> pd.DataFrame:
    """All columns as text (values converted by the caller with float(), exactly)."""
    return pd.read_csv(
        io.StringIO(text),
        sep="\t",
        dtype=str,
        keep_default_na=False,
    )


def tsv_to_dict(text: str) -> dict:
    frame = read_tsv(text)
    assert list(frame.columns) == COLUMNS
    return {
        (m, a, b, q): float(v)
        for m, a, b, q, v in zip(
            frame["measure"], frame["run_a"], frame["run_b"], frame["query_id"], frame["value"]
        )
    }
