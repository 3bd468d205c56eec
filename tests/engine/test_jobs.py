"""-j/--jobs and ``jobs=``: query partitions computed at once on that many threads, at
most that many in flight, and the very bytes of ``-j 1`` whatever the number."""

from __future__ import annotations

import glob
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from helpers import invoke, partition_cells

import prefeval
from prefeval.core import parallel, ties
from prefeval.engine import local as engine
from prefeval.options import OptionError, judge

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
RUNS = sorted(glob.glob(str(SAMPLE / "runs" / "input.*")))

#: the commands compared across -j: compare -q, order, discpower (ttest)
COMMANDS = [
    ("compare", ["-q"], {"per_query": True, "summary": True}),
    ("order", ["--no-baselines"], {"baselines": []}),
    ("discpower", ["--no-baselines", "--test", "ttest"], {"baselines": [], "tests": "ttest"}),
]


@pytest.fixture(scope="module")
def recsys(tmp_path_factory):
    """A small recommender shape (21 runs x 351 short rankings), TREC text runs."""
    from prefeval.synthetic import generate

    out = tmp_path_factory.mktemp("recsys")
    generate(out, "recsys", scale=0.02, seed=1)
    return str(out / "qrels.txt"), sorted(str(p) for p in (out / "runs").glob("input.*"))


@pytest.fixture()
def concurrency(monkeypatch):
    """Counts the partitions computed at the same time: ``[most at once, computed]``."""
    seen = [0, 0]
    active = [0]
    lock = threading.Lock()
    compute = engine.cube_from_matrix

    def counted(*args, **kw):
        with lock:
            active[0] += 1
            seen[0] = max(seen[0], active[0])
            seen[1] += 1
        try:
            time.sleep(0.02)  # long enough for the other threads to start theirs
            return compute(*args, **kw)
        finally:
            with lock:
                active[0] -= 1

    monkeypatch.setattr(engine, "cube_from_matrix", counted)
    return seen


def _inputs(which, recsys):
    if which == "sample":
        return str(SAMPLE / "qrels.txt"), RUNS
    return recsys


@pytest.mark.parametrize("command,flags,keywords", COMMANDS, ids=[c[0] for c in COMMANDS])
@pytest.mark.parametrize("which", ["sample", "recsys"])
def test_jobs_give_the_bytes_of_one_job(
    monkeypatch, concurrency, recsys, which, command, flags, keywords
):
    """The CLI's output with -j 1, 2, 3 and the API's frames with jobs=1, 2, 3 are the
    same to the last byte; with N jobs up to N partitions are computed at once (never
    more), with -j 1 one at a time."""
    monkeypatch.setattr(ties, "SUM_BLOCK", 3 if which == "sample" else 32)
    partition_cells(monkeypatch, 1000 if which == "sample" else 30_000)
    qrels, runs = _inputs(which, recsys)
    outputs, frames = {}, {}
    for jobs in (1, 2, 3):
        concurrency[:] = [0, 0]
        result = invoke(command, "--no-cache", "-j", jobs, *flags, qrels, *runs)
        assert result.exit_code == 0, result.output
        outputs[jobs] = (result.stdout, result.stderr)
        assert concurrency[1] >= 3  # partitions enough for 3 jobs
        assert concurrency[0] == jobs, (jobs, concurrency)
        frames[jobs] = getattr(prefeval, command)(
            qrels, runs, cache=False, jobs=jobs, notify=None, **keywords
        )
    assert len(outputs[1][0].splitlines()) > 5
    for jobs in (2, 3):
        assert outputs[jobs] == outputs[1], jobs
        pd.testing.assert_frame_equal(frames[jobs], frames[1], check_exact=True)


def test_jobs_is_judged():
    assert judge().jobs == parallel.usable_cpus() == judge(jobs=None).jobs
    assert judge(jobs=3).jobs == 3
    with pytest.raises(OptionError, match=r"^jobs=0 is not in the range x>=1\.$"):
        judge(jobs=0)
    with pytest.raises(TypeError, match=r"^jobs=2\.5 is not an integer\.$"):
        judge(jobs=2.5)
    with pytest.raises(ValueError, match="jobs=0 is not in the range"):
        prefeval.compare(str(SAMPLE / "qrels.txt"), RUNS, jobs=0)
    result = invoke("compare", "-j", "0", str(SAMPLE / "qrels.txt"), *RUNS)
    assert result.exit_code == 2
    assert "Invalid value for '-j' / '--jobs': 0 is not in the range x>=1." in result.stderr


@pytest.mark.parametrize(
    "text,cpus",
    [("max 100000", None), ("150000 100000", 1.5), ("400000 100000", 4.0), ("junk", None)],
)
def test_usable_cpus_follow_the_cgroup_quota(monkeypatch, tmp_path, text, cpus):
    quota = tmp_path / "cpu.max"
    quota.write_text(text + "\n")
    monkeypatch.setattr(parallel, "_CGROUP_V2", str(quota))
    monkeypatch.setattr(parallel, "_CGROUP_V1", ())
    monkeypatch.setattr(parallel.os, "sched_getaffinity", lambda pid: set(range(3)))
    assert parallel.cgroup_cpus() == cpus
    assert parallel.usable_cpus() == (3 if cpus is None else min(3, -(-int(cpus * 2) // 2)))


def test_hsd_threads_follow_jobs(monkeypatch):
    """discpower's HSD runs on at most ``jobs`` threads (-j 1: one)."""
    from prefeval.analysis import significance

    seen = []
    hsd = significance.hsd_pvalues

    def recorded(*args, **kw):
        seen.append(kw.get("jobs"))
        return hsd(*args, **kw)

    monkeypatch.setattr(significance, "hsd_pvalues", recorded)
    for jobs in (1, 2):
        result = invoke(
            "discpower", "--no-cache", "-j", jobs, "--no-baselines", "--test", "hsd",
            "--trials", 50, str(SAMPLE / "qrels.txt"), *RUNS,
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        assert seen and set(seen) == {jobs}
        seen.clear()


def test_partitions_in_flight_are_bounded(monkeypatch, concurrency):
    """With 2 jobs at most 2 partitions are computed ahead of the one the caller holds,
    and a caller that stops early leaves the others uncomputed."""
    monkeypatch.setattr(ties, "SUM_BLOCK", 3)
    from prefeval.io.runs import read_qrels
    from prefeval.measures import parse_measures

    relevant = read_qrels(str(SAMPLE / "qrels.txt")).relevant(None)
    runs = engine.load_runs(RUNS, relevant, None, notify=None)
    matrix = engine.position_matrix(runs, relevant)
    names = [r.name for r in runs]
    measures = parse_measures(None)
    cubes = engine.matrix_partitions(matrix, names, relevant, measures, cells=200, jobs=2)
    first = next(cubes)
    time.sleep(0.2)  # the pool had time to run ahead, if it would
    assert concurrency[1] <= 3 and concurrency[0] == 2
    cubes.close()
    assert concurrency[1] <= 3
    whole = engine.query_ranges(relevant.n_queries, len(names), len(measures), cells=200)
    head = whole[0]
    assert len(whole) > 6 and list(first.query_ids) == list(
        relevant.query_ids[head.start : head.stop]
    )


def test_explain_follows_jobs(monkeypatch):
    """explain reads its two runs and computes their values on -j threads (``jobs=``),
    the same bytes whatever the number."""
    from prefeval.present import explain as explaining

    seen: list = []
    load, cube = explaining.load_runs, explaining.cube_from_matrix

    def loaded(*args, **kw):
        seen.append(("read", kw.get("jobs")))
        return load(*args, **kw)

    def computed(*args, **kw):
        seen.append(("values", kw.get("threads")))
        return cube(*args, **kw)

    monkeypatch.setattr(explaining, "load_runs", loaded)
    monkeypatch.setattr(explaining, "cube_from_matrix", computed)
    qrels, outputs, frames = str(SAMPLE / "qrels.txt"), [], []
    for jobs in (1, 2):
        result = invoke("explain", "--no-cache", "-j", jobs, "--top", 3, qrels, *RUNS[:2])
        assert result.exit_code == 0, result.output
        outputs.append(result.stdout)
        frames.append(prefeval.explain(qrels, RUNS[:2], top=3, jobs=jobs, cache=False))
        assert seen == [("read", jobs), ("values", jobs)] * 2
        seen.clear()
    assert outputs[0] == outputs[1] and outputs[0].count("\n") > 20
    pd.testing.assert_frame_equal(frames[0], frames[1], check_exact=True)
