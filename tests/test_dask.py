"""compare --engine dask: the same query partitions as the local engine, run as tasks
on a Dask cluster (two worker processes here), give the same bytes."""

from __future__ import annotations

import glob
from pathlib import Path

import numpy as np
import pytest
from helpers import invoke

pytest.importorskip("dask.dataframe", reason="the dask extra is not installed")
distributed = pytest.importorskip("distributed", reason="the dask extra is not installed")

from prefeval import engine, ties  # noqa: E402
from prefeval.distributed import compare_partition  # noqa: E402
from prefeval.measures import parse_measures  # noqa: E402
from prefeval.readers import name_runs, read_qrels  # noqa: E402

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data"
RUNS = sorted(glob.glob(str(SAMPLE / "runs" / "input.*")))


@pytest.fixture(scope="module")
def scheduler():
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    yield cluster.scheduler_address
    cluster.close()


def same_output(args, scheduler):
    local = invoke("compare", *args)
    remote = invoke("compare", "--engine", "dask", "--scheduler", scheduler, *args)
    assert local.exit_code == 0, local.stderr
    assert remote.exit_code == 0, remote.stderr
    assert remote.stdout == local.stdout
    assert remote.stderr == local.stderr  # the same notices
    return local.stdout


@pytest.mark.parametrize("qrels", ["qrels.txt", "qrels.subtopics.txt"])
@pytest.mark.parametrize(
    "options",
    [[], ["-q"], ["-q", "-n", "--both-directions"], ["--against", "sys02", "-m", "rpp,LR"],
     ["-q", "--binary", "-l", "2", "-M", "10"]],
)  # fmt: skip
def test_dask_equals_local_on_the_sample(scheduler, qrels, options):
    same_output([*options, SAMPLE / qrels, *RUNS], scheduler)


def test_dask_equals_local_with_many_partitions(scheduler, monkeypatch):
    """Blocks of 3 queries, partitions of 2 blocks: tasks in query order, the summary
    summed block by block in the same order (the workers are other processes: the
    partitions are made here, only the kernel runs there)."""
    monkeypatch.setattr(ties, "SUM_BLOCK", 3)
    monkeypatch.setattr(engine, "PARTITION_CELLS", 6 * 15 * 6)
    out = same_output(["-q", SAMPLE / "qrels.txt", *RUNS], scheduler)
    assert out.count("\n") == 1 + 20 * 6 * 15 + 6 * 15


def test_kernel_is_the_engine_on_one_partition():
    judged = read_qrels(str(SAMPLE / "qrels.subtopics.txt"))
    relevant = judged.relevant(None)
    runs = dict(name_runs(RUNS))
    positions = engine.load_runs(runs, relevant, None, notify=None)
    measures = parse_measures(None, True)
    whole = engine.compute_cube(positions, relevant, measures)
    import pandas as pd

    from prefeval.readers import read_run

    rows = []
    for name, path in runs.items():
        columns = read_run(path, name=name)
        rows.append(
            pd.DataFrame(
                {
                    "run": name,
                    "query_id": columns.query_id.to_pylist(),
                    "doc_id": columns.doc_id.to_pylist(),
                    "score": np.asarray(columns.score),
                }
            )
        )
    result = compare_partition(
        judged.frame, pd.concat(rows), list(runs), [m.name for m in measures],
        has_subtopics=True,
    )  # fmt: skip
    assert np.array_equal(result.counts, np.sum(~np.isnan(whole.values), axis=2))
    assert np.array_equal(result.block_sums[0], np.nansum(whole.values, axis=2))
    assert result.missing == {"sys04": 1}
    frame = whole.to_frame(per_query=True, summary=False)
    assert np.array_equal(result.frame["value"], frame["value"])


@pytest.mark.parametrize("qrels", ["qrels.adhoc.txt.gz", "qrels.diversity-ndeval.txt.gz"])
def test_dask_equals_local_on_web2012(scheduler, web2012, qrels):
    runs = sorted((web2012 / "runs").glob("*.run.gz"))
    same_output(["-q", web2012 / qrels, *runs], scheduler)


def test_scheduler_needs_the_dask_engine():
    result = invoke("compare", "--scheduler", "tcp://127.0.0.1:1", SAMPLE / "qrels.txt", *RUNS)
    assert result.exit_code == 2
    assert "--scheduler needs --engine dask" in result.stderr


def test_unreachable_scheduler_is_a_usage_error():
    result = invoke(
        "compare", "--engine", "dask", "--scheduler", "tcp://127.0.0.1:9",
        SAMPLE / "qrels.txt", *RUNS,
    )  # fmt: skip
    assert result.exit_code == 2
    assert "--scheduler tcp://127.0.0.1:9: cannot connect" in result.stderr
    assert result.stdout == ""


def test_dask_reads_parquet_runs_on_the_workers(scheduler, tmp_path):
    """A many-run Parquet table (its runs in sorted name order) and single-run Parquet
    files give the local engine's bytes."""
    table = SAMPLE / "runs.parquet"
    same_output(["-q", SAMPLE / "qrels.txt", table], scheduler)
    import pandas as pd

    frame = pd.read_parquet(table)
    singles = []
    for name in ("sys02", "sys05"):
        path = tmp_path / f"input.{name}.parquet"
        frame[frame.run == name].drop(columns="run").rename(
            columns={"query_id": "qid", "doc_id": "docno"}
        ).to_parquet(path)
        singles.append(path)
    same_output(["-q", "--against", "sys02", SAMPLE / "qrels.txt", *singles], scheduler)


def test_input_error_on_a_worker_is_one_message(tmp_path):
    """A bad Parquet run is found by a worker of the command's own cluster: the error
    comes back as one message, without the workers' log of the failed task."""
    import subprocess
    import sys

    import pandas as pd

    frame = pd.read_parquet(SAMPLE / "runs.parquet")
    frame.loc[5, "score"] = float("nan")
    bad = tmp_path / "bad.parquet"
    frame.to_parquet(bad)
    out = tmp_path / "out.tsv"
    proc = subprocess.run(
        [sys.executable, "-m", "prefeval", "compare", "--engine", "dask", "-o", str(out),
         str(SAMPLE / "qrels.txt"), str(bad)],
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines()[-1].endswith("score is not a number")
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not out.exists()
