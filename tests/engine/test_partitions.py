"""compare by query partitions: the per-query values of every partition are those of
the whole cube, the merged summary is the same bits, and the rows come block by block."""

from __future__ import annotations

import glob
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import invoke, partition_cells, read_tsv

from prefeval.core import ties
from prefeval.core.cube import SummaryAccumulator
from prefeval.core.positions import position_matrix
from prefeval.engine import local as engine
from prefeval.io.frames import qrels_from_frame
from prefeval.io.runs import read_qrels
from prefeval.measures import parse_measures

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
RUNS = sorted(glob.glob(str(SAMPLE / "runs" / "input.*")))


@pytest.fixture()
def small_partitions(monkeypatch):
    """Blocks of 3 queries; partitions of at most 1,000 cube cells (2 blocks here): the
    ``cells`` to give the engine."""
    monkeypatch.setattr(ties, "SUM_BLOCK", 3)
    return 1000


def _inputs(qrels):
    judged = read_qrels(str(SAMPLE / qrels))
    relevant = judged.relevant(None)
    runs = engine.load_runs(RUNS, relevant, None, notify=None)
    return runs, relevant, parse_measures(None, judged.has_subtopics)


@pytest.mark.parametrize("qrels", ["qrels.txt", "qrels.subtopics.txt"])
def test_partitions_hold_the_whole_cube(small_partitions, qrels):
    runs, relevant, measures = _inputs(qrels)
    whole = engine.compute_cube(runs, relevant, measures)
    matrix, names = position_matrix(runs, relevant), [r.name for r in runs]
    parts = list(
        engine.matrix_partitions(matrix, names, relevant, measures, cells=small_partitions)
    )
    sizes = [len(p.query_ids) for p in parts]
    cells = len(measures) * len(whole.pairs)
    assert len(parts) > 2 and sum(sizes) == len(whole.query_ids)
    assert all(s % 3 == 0 and s * cells <= 1000 for s in sizes[:-1])
    assert [q for p in parts for q in p.query_ids] == list(whole.query_ids)
    values = np.concatenate([p.values for p in parts], axis=2)
    assert np.array_equal(values, whole.values, equal_nan=True)
    total = SummaryAccumulator()
    for part in parts:
        total.add(part)
    assert np.array_equal(total.means(), whole.summary(), equal_nan=True)  # the same bits


def test_a_partition_is_at_least_one_block(monkeypatch):
    monkeypatch.setattr(ties, "SUM_BLOCK", 4)
    parts = engine.cell_ranges(10, cells_per_query=100, cells=10)
    assert parts == [range(0, 4), range(4, 8), range(8, 10)]
    assert engine.cell_ranges(10, 100, cells=1000) == [range(0, 8), range(8, 10)]


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
    partition_cells(monkeypatch, 1000)
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
    partition_cells(monkeypatch, 1000)
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


# --------------------------------------------------------------------------- order, discpower

ANALYSES = [
    ("order", {"method": "mc4"}),
    ("order", {"method": "borda"}),
    ("order", {"method": "winrate"}),
    ("order", {"method": "copeland"}),
    ("discpower", {"trials": 300}),
    ("discpower", {"trials": 300, "pairs": True}),
    ("discpower", {"against": ["sys03"], "pairs": True}),
    ("tau", {}),
    ("pairs", {}),
    ("pairs", {"against": ["sys03"]}),
    ("agree", {"ties": True}),
    ("robustness", {"queries": [3, 10, 20], "samples": 4}),
    ("robustness", {"labels": [0.3, 0.8], "samples": 3}),
    ("robustness", {"labels": [0.5], "policy": "pool", "queries": [5], "samples": 2}),
]


def _merged_equals_whole(monkeypatch, qrels, runs, command, options, parts_cells, baselines=()):
    """``command`` with preferences merged from partitions of at most ``parts_cells``
    cells (the whole cube never computed) equals it on the whole cube, bit for bit."""
    import pandas as pd

    import prefeval

    options = {**options, "cache": False, "baselines": list(baselines), "notify": None}
    partition_cells(monkeypatch, 1 << 40)  # no cached cube (above): computed both times
    whole = getattr(prefeval, command)(qrels, runs, **options)
    partition_cells(monkeypatch, parts_cells)
    calls = []
    partitioned = engine.matrix_partitions

    def counted(*args, finish, **kw):
        def counting(cube):  # each partition's cube, on the thread that made it
            calls.append(cube.values.size)
            return finish(cube)

        yield from partitioned(*args, finish=counting, **kw)

    def whole_cube(*args, **kw):
        raise AssertionError("the whole cube was computed")

    monkeypatch.setattr(engine, "matrix_partitions", counted)
    monkeypatch.setattr(engine, "compute_cube", whole_cube)
    merged = getattr(prefeval, command)(qrels, runs, **options)
    assert len(calls) > 2 and max(calls) <= parts_cells
    pd.testing.assert_frame_equal(merged, whole, check_exact=True)
    assert len(whole) > 5


@pytest.mark.parametrize("command,options", ANALYSES, ids=lambda x: str(x))
@pytest.mark.parametrize("qrels", ["qrels.txt", "qrels.subtopics.txt"])
def test_analysis_merged_from_partitions(monkeypatch, qrels, command, options):
    """order (every method) and discpower (every test, --pairs, --against) from query
    partitions: the same table, to the last bit, as from all queries at once."""
    monkeypatch.setattr(ties, "SUM_BLOCK", 3)
    cells = 200 if "against" in options else 1000  # 5 pairs, not 15: smaller partitions
    _merged_equals_whole(monkeypatch, str(SAMPLE / qrels), RUNS, command, options, cells)


def test_robustness_from_partitions_with_baselines(monkeypatch, tmp_path):
    """robustness --queries from query partitions (win rates in temporary files, the
    sampled queries' rows found by the packed signs) and --labels (each sample's
    preferences by partitions, the baselines recomputed) are the whole cube's table, with
    baselines beside, where the subtopic measures are undefined on some queries (303 and
    305 judged without subtopics: their win rates have no rows there)."""
    import prefeval

    rows, general = [], {}
    for line in (SAMPLE / "qrels.subtopics.txt").read_text().splitlines():
        q, it, doc, grade = line.split()
        if q in ("303", "305"):
            general[q, doc] = max(general.get((q, doc), -9), int(grade))
        else:
            rows.append(line)
    rows += [f"{q} 0 {doc} {grade}" for (q, doc), grade in general.items()]
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("\n".join(rows) + "\n")
    cube = prefeval.compare(qrels, RUNS, per_query=True, summary=False, notify=None)
    subtopic = cube.measure.str.startswith("st")
    assert subtopic.any() and not cube.value.isna().any()  # undefined: no row
    missing = set(cube.query_id[~subtopic]) - set(cube.query_id[subtopic])
    assert missing == {"303", "305"}
    monkeypatch.setattr(ties, "SUM_BLOCK", 3)
    options = {"queries": [2, 9, 20], "labels": [0.4], "samples": 5, "seed": 7}
    _merged_equals_whole(monkeypatch, str(qrels), RUNS, "robustness", options, 1000, ["AP"])


@pytest.mark.parametrize("stretch", [2, 7, 1000])
@pytest.mark.parametrize("qrels", ["qrels.txt", "qrels.subtopics.txt"])
def test_agreement_from_packed_signs(monkeypatch, qrels, stretch):
    """agree from query partitions (each partition's preferences kept as packed signs,
    read back a stretch of queries at a time, the stretches across the partitions'
    bounds) counts what the whole cube counts: the same table, to the last bit."""
    from prefeval.analysis import agreement

    monkeypatch.setattr(ties, "SUM_BLOCK", 3)
    monkeypatch.setattr(agreement, "AGREEMENT_QUERIES", stretch)
    _merged_equals_whole(
        monkeypatch, str(SAMPLE / qrels), RUNS, "agree", {}, 1000, ["AP", "nDCG@10", "P@5"]
    )


def test_packed_signs_read_back_any_stretch():
    """PackedSigns gives back the signs of ties.sign (NaN where undefined) of any
    stretch of queries, over pieces of any length (not whole bytes)."""
    from prefeval.core.cube import PackedSigns

    rng = np.random.default_rng(3)
    values = rng.choice([-0.5, 0.0, 1e-13, -1e-13, 0.25, np.nan, 3.0], size=(4, 61))
    packed = PackedSigns(4)
    for lo, hi in [(0, 5), (5, 5), (5, 22), (22, 23), (23, 61)]:
        packed.append(PackedSigns.piece(values[:, lo:hi]))
    expected = ties.sign(values)
    assert set(np.unique(expected[~np.isnan(expected)])) == {-1.0, 0.0, 1.0}
    for lo, hi in [(0, 61), (0, 1), (3, 9), (5, 23), (22, 23), (17, 60), (60, 61), (40, 99)]:
        np.testing.assert_array_equal(packed.signs(lo, hi), expected[:, lo:hi])
    assert packed.signs(10, 10).shape == (4, 0)


@pytest.mark.parametrize("command,options", [ANALYSES[0], ANALYSES[5]], ids=["order", "discpower"])
def test_analysis_merged_from_partitions_web2012(monkeypatch, web2012, command, options):
    monkeypatch.setattr(ties, "SUM_BLOCK", 8)
    runs = sorted(str(p) for p in (web2012 / "runs").glob("*.gz"))
    qrels = str(web2012 / "qrels.diversity-ndeval.txt.gz")
    _merged_equals_whole(monkeypatch, qrels, runs, command, options, 3000)


def test_pair_moments_merge_block_by_block(monkeypatch):
    """PairMoments over awkward values (NaN, constant rows, one defined value, values
    1e-13 apart, large offsets) match numpy's two-pass mean and variance, and the same
    values fed in whole blocks give the same bits."""
    from prefeval.core.moments import PairMoments

    monkeypatch.setattr(ties, "SUM_BLOCK", 4)
    rng = np.random.default_rng(3)
    values = rng.normal(size=(6, 30))
    values[1, ::3] = np.nan
    values[2] = 0.25
    values[3, :29] = np.nan
    values[4] = 1e6 + 1e-13 * np.arange(30)
    values[5] = np.nan
    whole = PairMoments.of(values)
    fed = PairMoments(6)
    for lo in (0, 8, 20):  # whole blocks of 4, then the rest
        fed.add(values[:, lo : {0: 8, 8: 20, 20: 30}[lo]])
    for name in ("n", "m2", "low", "high", "wins", "tied", "losses"):
        assert np.array_equal(getattr(fed, name), getattr(whole, name)), name
    assert np.array_equal(fed.mean(), whole.mean(), equal_nan=True)
    assert np.array_equal(whole.mean(), ties.defined_mean(values, axis=1), equal_nan=True)
    for row in range(5):
        x = values[row][~np.isnan(values[row])]
        assert whole.n[row] == len(x)
        assert abs(whole.mean()[row] - x.mean()) <= 1e-12 * max(1, abs(x.mean()))
        if len(x) > 1:
            assert abs(whole.variance()[row] - x.var(ddof=1)) <= 1e-12 * max(1, x.var())
    assert list(whole.constant()) == [False, False, True, True, True, True]
    assert whole.n[5] == 0 and np.isnan(whole.mean()[5]) and np.isnan(whole.variance()[3])
    assert (whole.wins + whole.tied + whole.losses == whole.n).all()


def test_ttest_from_moments_is_scipys():
    """The t-test from merged moments equals scipy.stats.ttest_1samp to 1e-12."""
    from scipy import stats

    from prefeval.analysis.orderings import Evidence
    from prefeval.analysis.significance import ttest_pvalues

    rng = np.random.default_rng(5)
    scores = rng.normal(size=(40, 5)) + np.linspace(0, 2.0, 5)
    evidence = Evidence([f"r{i}" for i in range(5)], [str(q) for q in range(40)])
    evidence.metrics = {"m": scores}
    got = ttest_pvalues(evidence, "m")
    pairs = evidence.pairs()
    want = stats.ttest_rel(scores[:, pairs[:, 0]], scores[:, pairs[:, 1]], axis=0).pvalue
    assert np.allclose(got, want, rtol=1e-12, atol=0) and got.min() < 0.01


def test_mc4_and_borda_count_by_chunks_of_queries(monkeypatch):
    """MC4's majorities and Borda's points are sums over queries: counted 7 queries at a
    time they are the same, to the bit, as over all queries at once (ties included)."""
    from prefeval.analysis import orderings as aggregation
    from prefeval.core import cube

    rng = np.random.default_rng(11)
    scores = rng.integers(0, 4, size=(100, 6)).astype(float) / 3  # many ties
    whole = aggregation.mc4(scores), aggregation.borda(scores)
    monkeypatch.setattr(cube, "_ROWS", 7)
    chunked = aggregation.mc4(scores), aggregation.borda(scores)
    assert all(np.array_equal(a, b) for a, b in zip(whole, chunked))
    assert len(np.unique(whole[1])) > 1


def test_rank_tally_fed_in_pieces_equals_the_matrix(monkeypatch):
    """order's tally of win rates (MC4 counts, Borda points, mean win rate), fed in
    pieces that do not end on blocks, is the same, to the bit, as from the matrix."""
    from prefeval.core import cube as aggregation

    monkeypatch.setattr(ties, "SUM_BLOCK", 4)
    rng = np.random.default_rng(12)
    rates = rng.integers(-6, 7, size=(61, 5)) / 3 + rng.normal(size=(61, 5)) * 1e-3
    rates[::5] = np.round(rates[::5])  # ties
    tally = aggregation.RankTally(5)
    for lo, hi in ((0, 5), (5, 6), (6, 6), (6, 19), (19, 61)):
        tally.add(rates[lo:hi])
    assert np.array_equal(tally.above, aggregation.pairwise_counts(rates))
    assert np.array_equal(tally.points, aggregation.borda(rates))
    assert np.array_equal(tally.mean(), ties.defined_mean(rates, axis=0))
    assert tally.rows == 61 and tally.above.sum() > 0
    assert np.isnan(aggregation.RankTally(3).mean()).all()


@pytest.mark.parametrize("both", [False, True])
@pytest.mark.parametrize("qrels", ["qrels.txt", "qrels.subtopics.txt"])
def test_api_compare_takes_the_command_s_path(monkeypatch, qrels, both):
    """The API's compare streams the partitions as the command does (one path,
    :func:`prefeval.engine.job.compare_tables`) and gives the whole cube's table: rows in
    measure, pair, query order, then the summary, the same values to the last bit."""
    import pandas as pd

    import prefeval
    from prefeval import api
    from prefeval.engine import job

    monkeypatch.setattr(ties, "SUM_BLOCK", 3)
    kw = dict(per_query=True, summary=True, notify=None, both_directions=both, against=None)
    partition_cells(monkeypatch, 1 << 40)
    whole = prefeval.compare(SAMPLE / qrels, RUNS, **kw)
    calls = []
    partitions = engine.LocalEngine.partitions

    def counted(self, job_, want):
        parts = partitions(self, job_, want)
        calls.append(len(parts.ranges))
        return parts

    monkeypatch.setattr(engine.LocalEngine, "partitions", counted)
    assert api.compare_tables is job.compare_tables
    partition_cells(monkeypatch, 1000)
    merged = prefeval.compare(SAMPLE / qrels, RUNS, **kw)
    assert calls and calls[0] > 2
    pd.testing.assert_frame_equal(merged, whole, check_exact=True)
    assert list(whole.query_id[:3]) == sorted(set(whole.query_id) - {"all"})[:3]
    assert (whole.query_id == "all").sum() == (merged.query_id == "all").sum() > 0


def test_partition_without_populations():
    """Queries where no family asked has a population (subtopic RPP, no document
    relevant to a subtopic): undefined values, no block to compare."""
    frame = pd.DataFrame({"query_id": ["q1", "q2"], "doc_id": ["d1", "d1"], "relevance": [1, 2]})
    relevant = qrels_from_frame(frame).relevant(None)
    relevant.subtopics = [np.zeros((1, 0), dtype=bool)] * 2
    relevant.subtopic_ids = [np.zeros(0, dtype=np.int64)] * 2
    measures = parse_measures(["strpp"], has_subtopics=True)
    matrix = np.array([[1, 2], [2, 1]])
    cube = engine.cube_from_matrix(matrix, ["a", "b"], relevant, measures)
    assert cube.values.shape == (1, 1, 2)
    assert np.isnan(cube.values).all()


@pytest.mark.parametrize("fmt", ["md", "html"])
def test_report_merged_from_partitions(monkeypatch, tmp_path, fmt):
    """The report from query partitions (win rates for the HSD, moments, packed signs;
    the whole cube never computed) is the report from the whole cube, byte for byte,
    figures included."""
    import prefeval

    monkeypatch.setattr(ties, "SUM_BLOCK", 3)
    kw = dict(baselines=["AP", "nDCG@10"], tests=["ttest", "sign", "hsd"], trials=200, cache=False)
    written = {}
    for how, cells in (("whole", 1 << 40), ("merged", 1000)):
        partition_cells(monkeypatch, cells)
        if how == "merged":

            def whole_cube(*args, **kw):
                raise AssertionError("the whole cube was computed")

            monkeypatch.setattr(engine, "compute_cube", whole_cube)
        (tmp_path / how).mkdir()
        paths = prefeval.report(
            str(SAMPLE / "qrels.txt"), RUNS, output=str(tmp_path / how / f"r.{fmt}"),
            notify=None, **kw,
        )  # fmt: skip
        written[how] = {Path(p).relative_to(tmp_path / how): Path(p).read_bytes() for p in paths}
    assert written["merged"] == written["whole"]
    assert len(written["whole"][Path(f"r.{fmt}")]) > 5000
