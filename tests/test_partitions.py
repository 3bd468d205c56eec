"""compare by query partitions: the per-query values of every partition are those of
the whole cube, the merged summary is the same bits, and the rows come block by block."""

from __future__ import annotations

import glob
from pathlib import Path

import numpy as np
import pytest
from helpers import invoke, read_tsv

from prefeval import engine, ties
from prefeval.measures import parse_measures
from prefeval.readers import read_qrels

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data"
RUNS = sorted(glob.glob(str(SAMPLE / "runs" / "input.*")))


@pytest.fixture()
def small_partitions(monkeypatch):
    """Blocks of 3 queries, partitions of at most 1,000 cube cells (2 blocks here)."""
    monkeypatch.setattr(ties, "SUM_BLOCK", 3)
    monkeypatch.setattr(engine, "PARTITION_CELLS", 1000)


def _inputs(qrels):
    judged = read_qrels(str(SAMPLE / qrels))
    relevant = judged.relevant(None)
    runs = engine.load_runs(RUNS, relevant, None, notify=None)
    return runs, relevant, parse_measures(None, judged.has_subtopics)


@pytest.mark.parametrize("qrels", ["qrels.txt", "qrels.subtopics.txt"])
def test_partitions_hold_the_whole_cube(small_partitions, qrels):
    runs, relevant, measures = _inputs(qrels)
    whole = engine.compute_cube(runs, relevant, measures)
    parts = list(engine.partitioned_cubes(runs, relevant, measures))
    sizes = [len(p.query_ids) for p in parts]
    cells = len(measures) * len(whole.pairs)
    assert len(parts) > 2 and sum(sizes) == len(whole.query_ids)
    assert all(s % 3 == 0 and s * cells <= 1000 for s in sizes[:-1])
    assert [q for p in parts for q in p.query_ids] == list(whole.query_ids)
    values = np.concatenate([p.values for p in parts], axis=2)
    assert np.array_equal(values, whole.values, equal_nan=True)
    total = engine.SummaryAccumulator()
    for part in parts:
        total.add(part)
    assert np.array_equal(total.means(), whole.summary(), equal_nan=True)  # the same bits


def test_a_partition_is_at_least_one_block(monkeypatch):
    monkeypatch.setattr(ties, "SUM_BLOCK", 4)
    monkeypatch.setattr(engine, "PARTITION_CELLS", 10)
    parts = engine.query_partitions(10, cells_per_query=100)
    assert parts == [range(0, 4), range(4, 8), range(8, 10)]
    monkeypatch.setattr(engine, "PARTITION_CELLS", 1000)
    assert engine.query_partitions(10, cells_per_query=100) == [range(0, 8), range(8, 10)]


def test_blocked_sum_adds_blocks_in_order():
    values = np.array([[1e16, 1.0, -1e16, 1.0, np.nan, 3.0]])
    blocks = [np.nansum(values[:, i : i + 256], axis=1) for i in range(0, 6, 256)]
    assert ties.defined_sum(values, axis=1) == sum(blocks)
    first = ties.defined_sum(values[:, :3], axis=1)
    assert np.array_equal(ties.defined_sum(values[:, 3:], axis=1, start=first), first + 4.0)


def test_compare_streams_blocks_and_keeps_the_summary(monkeypatch, tmp_path):
    monkeypatch.setattr(ties, "SUM_BLOCK", 3)  # sums in blocks of 3 queries throughout
    whole = invoke("compare", "-q", SAMPLE / "qrels.txt", *RUNS)  # one partition
    assert whole.exit_code == 0
    full = read_tsv(whole.stdout)
    monkeypatch.setattr(engine, "PARTITION_CELLS", 1000)
    out = tmp_path / "parts.tsv"
    result = invoke("compare", "-q", "-o", out, SAMPLE / "qrels.txt", *RUNS)
    assert result.exit_code == 0, result.stderr
    parts = read_tsv(out.read_text())
    per_query = parts[parts.query_id != "all"]
    # 90 cells per query (6 measures x 15 pairs): partitions of 9 queries, in order
    queries = sorted(set(full.query_id) - {"all"})
    block = {q: i // 9 for i, q in enumerate(queries)}
    blocks = per_query["query_id"].map(block).tolist()
    assert blocks == sorted(blocks) and blocks[-1] == 2
    key = ["measure", "run_a", "run_b", "query_id"]
    within = per_query[per_query.query_id.map(block) == 0]
    assert within.equals(
        within.sort_values(["measure", "run_a", "run_b", "query_id"]).loc[within.index]
    )
    assert (
        per_query.sort_values(key).reset_index(drop=True)
        .equals(full[full.query_id != "all"].sort_values(key).reset_index(drop=True))
    )  # fmt: skip
    # summary rows: the same text, so the same bits, as with one partition
    assert (
        parts[parts.query_id == "all"]
        .reset_index(drop=True)
        .equals(full[full.query_id == "all"].reset_index(drop=True))
    )


def test_parquet_written_partition_by_partition(monkeypatch, tmp_path):
    import pandas as pd
    import pyarrow.parquet as pq

    monkeypatch.setattr(ties, "SUM_BLOCK", 3)
    one = tmp_path / "one.parquet"
    assert (
        invoke("compare", "-q", "-f", "parquet", "-o", one, SAMPLE / "qrels.txt", *RUNS).exit_code
        == 0
    )
    monkeypatch.setattr(engine, "PARTITION_CELLS", 1000)
    many = tmp_path / "many.parquet"
    assert (
        invoke("compare", "-q", "-f", "parquet", "-o", many, SAMPLE / "qrels.txt", *RUNS).exit_code
        == 0
    )
    assert pq.ParquetFile(many).num_row_groups > pq.ParquetFile(one).num_row_groups
    a, b = (pd.read_parquet(p).astype({"query_id": str}) for p in (one, many))
    key = ["measure", "run_a", "run_b", "query_id"]
    a = a.sort_values(key).reset_index(drop=True).astype(str)
    b = b.sort_values(key).reset_index(drop=True).astype(str)
    assert a.equals(b)  # every row, the summary's bits too
