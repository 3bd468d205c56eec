"""compare --engine dask: the same query partitions as the local engine, run as tasks
on a Dask cluster (two worker processes here), give the same bytes."""

from __future__ import annotations

import glob
from pathlib import Path

import numpy as np
import pytest
from helpers import invoke, partition_cells, read_tsv

pytest.importorskip("dask", reason="the dask extra is not installed")
distributed = pytest.importorskip("distributed", reason="the dask extra is not installed")

# each test starts or reaches a Dask cluster: `make test` runs them, `make test-fast` not
pytestmark = pytest.mark.slow

from prefeval.core import ties  # noqa: E402
from prefeval.engine import local as engine  # noqa: E402
from prefeval.engine.dask import compare_partition  # noqa: E402
from prefeval.io.runs import read_qrels, resolve_runs  # noqa: E402
from prefeval.measures import parse_measures  # noqa: E402

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
RUNS = sorted(glob.glob(str(SAMPLE / "runs" / "input.*")))


@pytest.fixture(scope="module")
def _cluster():
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    yield cluster.scheduler_address
    cluster.close()


@pytest.fixture
def scheduler(_cluster, monkeypatch):
    """The address of the module's cluster, which lives as long as the module's tests:
    the bounds a command gives a scheduler to answer and to have a worker (15 s each,
    for an address that never answers) are raised for the test, so that its outcome
    never depends on how long a connection takes.  Under ``pytest -n 2`` on a loaded
    machine the client's event loop thread (in this process, beside the scheduler's)
    took over 10 s to start (distributed's own check, made again by the command until
    its bound): a live scheduler then "cannot connect" (tests of the bounds set their
    own)."""
    from prefeval.engine import dask as engine

    monkeypatch.setattr(engine.cluster, "CONNECT_SECONDS", 300)
    monkeypatch.setattr(engine.cluster, "WORKER_SECONDS", 300)
    return _cluster


def small_partitions(monkeypatch, cells: int = 6 * 16 * 6) -> None:
    """Blocks of 3 queries and partitions of ``cells`` cube cells, for both engines: by
    default 2 blocks (6 queries x 16 cells per run of the sample's 6 runs, more than
    the 15 pairs x 6 measures of the cube: ``engine.local.RUN_CELLS``)."""
    monkeypatch.setattr(ties, "SUM_BLOCK", 3)
    partition_cells(monkeypatch, cells)


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
    small_partitions(monkeypatch)
    out = same_output(["-q", SAMPLE / "qrels.txt", *RUNS], scheduler)
    assert out.count("\n") == 1 + 20 * 6 * 15 + 6 * 15


@pytest.mark.parametrize("fmt", ["tsv", "parquet"])
def test_per_query_rows_come_in_pieces(scheduler, monkeypatch, tmp_path, fmt):
    """The client fetches a partition's per-query rows a row group at a time: pieces and
    row groups of 7 rows, partitions of 2 blocks of 3 queries (540 rows): the same bytes
    as the local engine, which writes each partition in groups of 7 rows too."""
    import pyarrow.parquet as pq

    from prefeval.engine import dask as dist
    from prefeval.io import writers

    small_partitions(monkeypatch)
    monkeypatch.setattr(writers, "PARQUET_GROUP_ROWS", 7)
    fetched = []
    rows_in_pieces = dist.cluster._rows_in_pieces

    def counted(client, future, rows):
        for piece in rows_in_pieces(client, future, rows):
            fetched.append(len(piece))
            yield piece

    monkeypatch.setattr(dist.cluster, "_rows_in_pieces", counted)
    common = ["-q", "-f", fmt, SAMPLE / "qrels.txt", *RUNS]
    local = invoke("compare", "-o", tmp_path / "local", *common)
    remote = invoke("compare", "--engine", "dask", "--scheduler", scheduler,
                    "-o", tmp_path / "dask", *common)  # fmt: skip
    assert local.exit_code == 0 and remote.exit_code == 0, local.stderr + remote.stderr
    assert (tmp_path / "dask").read_bytes() == (tmp_path / "local").read_bytes()
    # 20 queries in partitions of 6, 6, 6 and 2: 540, 540, 540 and 180 rows
    per_partition = [540] * 3 + [180]
    assert fetched == [n for size in per_partition for n in [7] * (size // 7) + [size % 7]]
    if fmt == "parquet":
        groups = pq.ParquetFile(tmp_path / "dask").metadata.num_row_groups
        assert groups == len(fetched) + 13  # and the summary's 90 rows in 13


@pytest.mark.parametrize("per_query", [True, False])
@pytest.mark.parametrize("split", [False, True])
def test_own_cluster_keeps_a_thread_for_fetching(monkeypatch, tmp_path, per_query, split):
    """For compare -q, the command's own cluster gives each worker one thread more than
    partition slots (Dask's threads) and every task of a partition, its reading and
    splitting of a Parquet table too (``split``), takes a slot, so that the fetching of
    a finished partition's pieces has a thread of its own; other commands get Dask's
    workers as they are and ask for no slot.  The same bytes as the local engine, with
    many partitions and pieces; a slot no worker has fails (the scheduler's no-workers
    timeout, lowered here) instead of hanging.  The cluster's scratch space (Dask's
    ``dask-scratch-space`` and its lock files) goes with the cluster, not left in
    $TMPDIR."""
    import tempfile

    import dask
    from distributed.deploy.utils import nprocesses_nthreads

    from prefeval.engine import dask as dist
    from prefeval.io import writers

    workers, asked = [], []
    make_client, compute = dist.cluster._client, distributed.Client.compute

    def spied_client(*args, **kwargs):
        client = make_client(*args, **kwargs)
        workers.extend(client.scheduler_info()["workers"].values())
        return client

    def spied_compute(self, *args, resources=None, **kwargs):
        asked.append(resources)
        return compute(self, *args, resources=resources, **kwargs)

    monkeypatch.setattr(dist.cluster, "_client", spied_client)
    monkeypatch.setattr(distributed.Client, "compute", spied_compute)
    small_partitions(monkeypatch)
    monkeypatch.setattr(writers, "PARQUET_GROUP_ROWS", 7)
    if split:
        monkeypatch.setattr(dist.reading, "DIRECT_READS", 0)  # read by tasks splitting the table
    runs = [SAMPLE / "runs.parquet"] if split else RUNS
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", None)
    common = [*(["-q"] if per_query else []), "-f", "parquet", SAMPLE / "qrels.txt", *runs]
    local = invoke("compare", "-o", tmp_path / "local", *common)
    with dask.config.set({"distributed.scheduler.no-workers-timeout": "20s"}):
        remote = invoke("compare", "--engine", "dask", "-o", tmp_path / "dask", *common)
    assert local.exit_code == 0 and remote.exit_code == 0, local.stderr + remote.stderr
    assert (tmp_path / "dask").read_bytes() == (tmp_path / "local").read_bytes()
    assert list(scratch.iterdir()) == []
    threads = nprocesses_nthreads()[1]
    assert len(workers) == nprocesses_nthreads()[0]
    if per_query:
        for worker in workers:
            assert worker["nthreads"] == threads + 1
            assert worker["resources"] == {dist.cluster.PARTITION_SLOT: threads}
        assert asked and all(r == {dist.cluster.PARTITION_SLOT: 1} for r in asked)
    else:
        assert all(w["nthreads"] == threads and not w["resources"] for w in workers)
        assert asked and all(r is None for r in asked)


@pytest.mark.parametrize("fmt", ["tsv", "parquet"])
def test_partition_without_rows(scheduler, tmp_path, fmt):
    """Subtopic judgments of no relevant document: strpp is undefined on every query,
    so the partition has no per-query rows; the local engine still writes its empty
    frame (a header; an empty row group), and so does Dask (it had written nothing,
    not even a valid Parquet file)."""
    qrels = tmp_path / "qrels.txt"
    extra = "".join(f"301 1 {doc} 0\n" for doc in ("doc3255016", "doc3284666"))
    qrels.write_text((SAMPLE / "qrels.txt").read_text() + extra)
    common = ["-q", "-n", "-m", "strpp", "-f", fmt, qrels, *RUNS[:2]]
    local = invoke("compare", "-o", tmp_path / "local", *common)
    remote = invoke("compare", "--engine", "dask", "--scheduler", scheduler,
                    "-o", tmp_path / "dask", *common)  # fmt: skip
    assert local.exit_code == 0 and remote.exit_code == 0, local.stderr + remote.stderr
    written = (tmp_path / "local").read_bytes()
    assert (tmp_path / "dask").read_bytes() == written
    if fmt == "tsv":
        assert written == b"measure\trun_a\trun_b\tquery_id\tvalue\n"


def test_kernel_is_the_engine_on_one_partition():
    judged = read_qrels(str(SAMPLE / "qrels.subtopics.txt"))
    relevant = judged.relevant(None)
    runs = resolve_runs(RUNS)
    positions = engine.load_runs(runs, relevant, None, notify=None)
    measures = parse_measures(None, True)
    whole = engine.compute_cube(positions, relevant, measures)
    import pandas as pd

    from prefeval.io.runs import read_run

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
    (piece,) = result.rows  # the partition's rows, in one piece
    assert np.array_equal(piece["value"], frame["value"])


@pytest.mark.parametrize("qrels", ["qrels.adhoc.txt.gz", "qrels.diversity-ndeval.txt.gz"])
def test_dask_equals_local_on_web2012(scheduler, web2012, qrels):
    runs = sorted((web2012 / "runs").glob("*.run.gz"))
    same_output(["-q", web2012 / qrels, *runs], scheduler)


#: ``python -m prefeval`` whose local cluster, while it starts (before its workers),
#: says so on descriptor READY and waits until descriptor GO is closed: a signal sent
#: then comes in the middle of the start on any machine under any load
STARTING = """
import os
import signal
import sys

signal.signal(signal.SIGINT, signal.default_int_handler)

from distributed.deploy import spec

from prefeval.cli import main

READY, GO = int(sys.argv.pop(1)), int(sys.argv.pop(1))
started = spec.SpecCluster._correct_state_internal


async def held(self):
    global READY
    if READY >= 0:  # the first time only
        os.write(READY, b"s")
        os.read(GO, 1)  # the event loop's thread stops here until GO is closed
        READY = -1
    return await started(self)


spec.SpecCluster._correct_state_internal = held
main()
"""


@pytest.mark.parametrize("signum", ["SIGTERM", "SIGINT"])
def test_a_signal_while_the_cluster_starts_leaves_no_folder(tmp_path, signum):
    """SIGTERM or Ctrl-C while --engine dask starts its local cluster: the cluster is
    started whole, then closed, and its scratch folder removed after it (removed while
    the cluster's processes start, it would be made again by them and left in $TMPDIR;
    an interrupted start must not fail an assertion at exit)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    signum = getattr(signal, signum)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    args = ["compare", "--engine", "dask", "--no-cache", SAMPLE / "qrels.txt", *RUNS[:2]]
    proc = subprocess.Popen(
        [sys.executable, "-c", STARTING, str(ready_w), str(go_r), *map(str, args)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, pass_fds=(ready_w, go_r),
        env={**os.environ, "TMPDIR": str(scratch), "PYTHONPATH": str(SAMPLE.parent)},
    )  # fmt: skip
    os.close(ready_w)
    os.close(go_r)
    try:
        assert os.read(ready_r, 1) == b"s"
        proc.send_signal(signum)
        time.sleep(1)  # the signal handled (the main thread waits on the start)
    finally:
        os.close(go_w)
        os.close(ready_r)
    status = proc.wait(timeout=120)
    stderr = proc.stderr.read().decode()
    assert status == (128 + signum if signum == signal.SIGTERM else 1), stderr
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr
    time.sleep(2)  # nothing made again by a process of the cluster
    assert list(scratch.iterdir()) == []


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


def test_silent_address_is_a_usage_error_not_a_hang(monkeypatch):
    """An address that accepts the connection and never answers (not a Dask scheduler):
    Dask bounds the connection but not its handshake; prefeval gives up after
    CONNECT_SECONDS (lowered here) with the usage error."""
    import socket

    from prefeval.engine import dask as distributed

    monkeypatch.setattr(distributed.cluster, "CONNECT_SECONDS", 1)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)  # the kernel accepts; nothing ever reads or writes
        address = f"tcp://127.0.0.1:{listener.getsockname()[1]}"
        result = invoke(
            "compare", "--engine", "dask", "--scheduler", address, SAMPLE / "qrels.txt", *RUNS
        )
    assert result.exit_code == 2
    assert f"--scheduler {address}: cannot connect (no answer from a Dask scheduler" in (
        result.stderr
    )
    assert result.stdout == ""


def test_a_connection_failing_distributed_s_own_checks_is_made_again(scheduler, monkeypatch):
    """distributed's Client checks its connection in the making with assertions (its
    event loop's thread started within 10 s, the scheduler's first message its one
    "stream-start"); on a loaded machine a live scheduler failed one (the command said
    "cannot connect (AssertionError)", 3 runs in 40 of a test here under pytest -n 2):
    the connection is made again, within CONNECT_SECONDS; failing for good, it is the
    usage error."""
    from prefeval.engine import dask as dist

    made = []
    real = distributed.Client

    def failing_first(*args, **kwargs):
        made.append(args)
        if len(made) < 3:
            raise AssertionError
        return real(*args, **kwargs)

    monkeypatch.setattr(distributed, "Client", failing_first)
    args = ["compare", "--engine", "dask", "--scheduler", scheduler, SAMPLE / "qrels.txt", *RUNS]
    result = invoke(*args)
    assert (result.exit_code, len(made)) == (0, 3), result.stderr
    assert result.stdout == invoke(*args[:1], *args[5:]).stdout

    def failing(*args, **kwargs):
        raise AssertionError

    monkeypatch.setattr(distributed, "Client", failing)
    monkeypatch.setattr(dist.cluster, "CONNECT_SECONDS", 0.5)
    result = invoke(*args)
    assert result.exit_code == 2
    assert f"Error: --scheduler {scheduler}: cannot connect (" in result.stderr


#: a Dask scheduler without workers on the loopback: prints its address, then waits
LONELY_SCHEDULER = """
import asyncio
from distributed import Scheduler

async def main():
    async with Scheduler(host="127.0.0.1", port=0, dashboard_address=":0") as scheduler:
        print(scheduler.address, flush=True)
        await asyncio.sleep(3600)

asyncio.run(main())
"""


def test_scheduler_without_workers_is_a_usage_error_not_a_hang(monkeypatch):
    """A live scheduler that has no workers would keep the tasks waiting for ever, with
    nothing said: prefeval waits WORKER_SECONDS (lowered here) for one to join, then
    gives up with the usage error, as for an address that does not answer."""
    import subprocess
    import sys
    import time

    from prefeval.engine import dask as distributed

    monkeypatch.setattr(distributed.cluster, "WORKER_SECONDS", 2)
    lonely = subprocess.Popen(
        [sys.executable, "-c", LONELY_SCHEDULER], stdout=subprocess.PIPE, text=True
    )
    try:
        address = lonely.stdout.readline().strip()
        assert address.startswith("tcp://127.0.0.1:"), address
        for command in ("compare", "order"):
            start = time.monotonic()
            result = invoke(
                command, "--engine", "dask", "--scheduler", address, SAMPLE / "qrels.txt", *RUNS
            )
            assert time.monotonic() - start < 60
            assert result.exit_code == 2, (result.stderr, result.exception)
            assert result.stdout == ""
            assert result.stderr.splitlines()[-1] == (
                f"Error: --scheduler {address}: the scheduler has no workers (none joined "
                "within 2 s)"
            )
            assert "Traceback" not in result.stderr
    finally:
        lonely.kill()
        lonely.wait()


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
    # the local reader's message: the file and its row
    assert proc.stderr == f"{bad}: row 6: missing score\n"
    assert not out.exists()
    local = invoke("compare", SAMPLE / "qrels.txt", bad)
    assert (local.exit_code, local.stderr) == (2, proc.stderr)
    # on standard output too: an input error, not a failure to write
    proc = subprocess.run(
        [sys.executable, "-m", "prefeval", "order", "--engine", "dask", "--no-baselines",
         str(SAMPLE / "qrels.txt"), str(bad)],
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert (proc.returncode, proc.stderr, proc.stdout) == (2, f"{bad}: row 6: missing score\n", "")
    proc = subprocess.run(  # compare streams its rows to stdout as the partitions come
        [sys.executable, "-m", "prefeval", "compare", "--engine", "dask",
         str(SAMPLE / "qrels.txt"), str(bad)],
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert (proc.returncode, proc.stderr) == (2, f"{bad}: row 6: missing score\n")


# ------------------------------------------------------------------ every command

#: the options each analysis command is run with here (its full output compared)
ANALYSES = {
    "order": [[], ["--method", "borda"]],
    "discpower": [["--trials", "300", "--pairs"], ["--against", "sys03", "-m", "rpp,LR"]],
    "pairs": [[], ["--against", "sys02", "--binary"]],
    "agree": [[]],
    "tau": [[]],
    "robustness": [["--queries", "5,10", "--labels", "0.3,0.6", "--samples", "3"]],
    "table": [["--test", "hsd", "--trials", "300"], ["--against", "sys03", "-B", "AP"]],
    # exit 0: inconclusive on 20 queries; against the worst run, improvements
    "gate": [
        ["--against", "sys03"],
        [
            "--against",
            "sys01",
            "--test",
            "randomization",
            "--ci",
            "bootstrap",
            "--min-queries",
            "20",
            "-B",
            "AP",
            "--trials",
            "500",
            "--resamples",
            "500",
        ],
    ],
}


def same_command(command, args, scheduler):
    """``prefeval COMMAND ARGS`` on the local engine and on Dask: the same stdout and
    stderr (the same notices), exit 0."""
    local = invoke(command, *args)
    remote = invoke(command, *args, "--engine", "dask", "--scheduler", scheduler)
    assert local.exit_code == 0, local.stderr
    assert remote.exit_code == 0, remote.stderr
    assert remote.stdout == local.stdout
    assert remote.stderr == local.stderr
    return local.stdout


def test_every_command_with_an_engine_is_compared_here():
    """A new command that computes preferences gets --engine and must be added here."""
    from prefeval.cli import cli

    with_engine = {
        name
        for name, command in cli.commands.items()
        if any("--engine" in p.opts for p in command.params)
    }
    assert with_engine == {"compare", "report", *ANALYSES}
    # the commands without it: baselines only (ir-measures), two runs on a few queries,
    # and the measure registry's listing
    assert set(cli.commands) - with_engine == {"metrics", "explain", "measures"}


@pytest.mark.parametrize(
    "command, options",
    [(c, o) for c, variants in ANALYSES.items() for o in variants],
    ids=lambda x: " ".join(x) if isinstance(x, list) else x,
)
@pytest.mark.parametrize("qrels", ["qrels.txt", "qrels.subtopics.txt"])
def test_analysis_commands_equal_local_on_the_sample(scheduler, command, options, qrels):
    same_command(command, [*options, SAMPLE / qrels, *RUNS], scheduler)


def test_report_equals_local(scheduler, tmp_path):
    pytest.importorskip("matplotlib")
    outputs = []
    for where in ("local", "dask"):
        out = tmp_path / f"{where}.html"
        extra = ["--scheduler", scheduler] if where == "dask" else []
        result = invoke(
            "report", "--robustness", "--trials", "200", "-o", out, "--engine", where, *extra,
            SAMPLE / "qrels.subtopics.txt", *RUNS,
        )  # fmt: skip
        assert result.exit_code == 0, result.stderr
        outputs.append((out.read_bytes(), result.stderr))
    assert outputs[0] == outputs[1]


@pytest.mark.parametrize(
    "command, options",
    [("order", []), ("order", ["--method", "copeland"]),
     ("discpower", ["--trials", "300", "--pairs"]), ("pairs", []), ("tau", []),
     ("agree", []), ("agree", ["--ties"]),
     ("robustness", ["--queries", "3,10", "--samples", "3"]),
     ("robustness", ["--labels", "0.5", "--samples", "2", "--policy", "pool"])],
)  # fmt: skip
def test_analysis_commands_equal_local_with_many_partitions(
    scheduler, monkeypatch, command, options
):
    """Blocks of 3 queries, partitions of 2 blocks: the win rates stacked, the moments
    merged block by block, the packed signs and the reduced runs put together in query
    order on the client give the local engine's bytes (which streams partitions too)."""
    small_partitions(monkeypatch)
    same_command(command, ["--no-cache", *options, SAMPLE / "qrels.subtopics.txt", *RUNS],
                 scheduler)  # fmt: skip


def test_win_rates_kept_in_a_temporary_file(scheduler, monkeypatch, tmp_path):
    """The HSD's win rates wait in a temporary file on the Dask client (large ones) and
    in the local engine's process: the same p-values, and no file left anywhere (the
    file has no name)."""
    import tempfile

    from prefeval.core import cube as aggregation
    from prefeval.engine import dask as distributed

    made = []
    original = aggregation.SpilledRates.__init__

    def counted(self, n_runs):
        original(self, n_runs)
        made.append(self)

    monkeypatch.setattr(aggregation.SpilledRates, "__init__", counted)
    small_partitions(monkeypatch)
    monkeypatch.setattr(distributed.cluster, "SPILL_SCORES", 1)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    args = ["--no-cache", "--trials", "200", "--pairs", SAMPLE / "qrels.subtopics.txt", *RUNS]
    same_command("discpower", args, scheduler)
    # 6 + 3 subtopic measures, on each engine
    assert len(made) == 2 * 9 and all(m.rows > 10 for m in made)
    assert list(tmp_path.iterdir()) == []


def test_spilled_rates_read_back_what_was_added():
    from prefeval.core.cube import SpilledRates

    rng = np.random.default_rng(4)
    spill, parts = SpilledRates(3), [rng.normal(size=(n, 3)) for n in (5, 0, 17)]
    for part in parts:
        spill.add(part)
    assert np.array_equal(spill.load(), np.concatenate(parts))
    assert np.array_equal(spill.load(), np.concatenate(parts))  # read again
    spill.close()


def test_the_library_takes_the_engine(scheduler):
    import prefeval

    for name, kwargs in (
        ("compare", {"per_query": True, "summary": True}),
        ("order", {}),
        ("pairs", {}),
    ):
        local = getattr(prefeval, name)(
            str(SAMPLE / "qrels.txt"), RUNS, baselines=[] if name != "compare" else None,
            notify=None, **kwargs,
        ) if name != "compare" else prefeval.compare(
            str(SAMPLE / "qrels.txt"), RUNS, notify=None, **kwargs
        )  # fmt: skip
        remote_kwargs = dict(kwargs, engine="dask", scheduler=scheduler, notify=None)
        if name != "compare":
            remote_kwargs["baselines"] = []
        remote = getattr(prefeval, name)(str(SAMPLE / "qrels.txt"), RUNS, **remote_kwargs)
        import pandas as pd

        pd.testing.assert_frame_equal(local, remote)
    with pytest.raises(ValueError, match="scheduler= needs engine='dask'"):
        prefeval.order(str(SAMPLE / "qrels.txt"), RUNS, scheduler=scheduler)
    with pytest.raises(ValueError, match="engine='spark'"):
        prefeval.order(str(SAMPLE / "qrels.txt"), RUNS, engine="spark")


def test_engine_dask_with_prefs_is_a_usage_error(tmp_path):
    prefs = tmp_path / "prefs.tsv"
    assert invoke("compare", "-q", "-o", prefs, SAMPLE / "qrels.txt", *RUNS).exit_code == 0
    result = invoke("order", "--prefs", prefs, "--no-baselines", "--engine", "dask")
    assert result.exit_code == 2
    assert "--engine dask cannot change preferences read with --prefs" in result.stderr
    result = invoke("order", "--scheduler", "tcp://127.0.0.1:1", SAMPLE / "qrels.txt", *RUNS)
    assert result.exit_code == 2
    assert "--scheduler needs --engine dask" in result.stderr


@pytest.mark.parametrize("qrels", ["qrels.adhoc.txt.gz", "qrels.diversity-ndeval.txt.gz"])
def test_analysis_commands_equal_local_on_web2012(scheduler, web2012, qrels):
    runs = sorted((web2012 / "runs").glob("*.run.gz"))
    for command, options in (
        ("order", []),
        ("discpower", ["--trials", "200"]),
        ("pairs", []),
        ("robustness", ["--labels", "0.5", "--samples", "2", "--queries", "10"]),
    ):
        same_command(command, ["--no-baselines", *options, web2012 / qrels, *runs], scheduler)


# ------------------------------------------------------------------ the recsys shapes


@pytest.fixture(scope="module")
def recsys(tmp_path_factory):
    """The bench's recsys shape (TREC text, 21 runs) at 1% of its users."""
    from prefeval.synthetic import generate

    out = tmp_path_factory.mktemp("recsys")
    generate(out, "recsys", scale=0.01, seed=3)
    return out


@pytest.fixture(scope="module")
def recsys_xl(tmp_path_factory):
    """The bench's recsys-xl shape (one Parquet table of 10 runs) at 3,000 users, in row
    groups of 500 users per run."""
    import sys

    sys.path.insert(0, str(SAMPLE.parent))
    try:
        from bench.datasets import generate_recsys_xl
    finally:
        sys.path.remove(str(SAMPLE.parent))
    out = tmp_path_factory.mktemp("recsys-xl")
    generate_recsys_xl(out, scale=0.003, seed=5, chunk_users=500)
    return out


ON_RECSYS = [
    ("compare", ["-q"]),
    ("order", []),
    ("discpower", ["--trials", "100"]),
    ("pairs", ["--against", "sys03"]),
]


@pytest.mark.parametrize("command, options", ON_RECSYS)
def test_dask_equals_local_on_the_recsys_shape(scheduler, recsys, command, options):
    runs = sorted((recsys / "runs").glob("input.*"))
    same_command(command, ["--no-cache", *options, "--no-baselines" if command != "compare"
                           else "--binary", recsys / "qrels.txt", *runs], scheduler)  # fmt: skip


@pytest.mark.parametrize("command, options", ON_RECSYS)
def test_dask_equals_local_on_the_recsys_xl_shape(
    scheduler, recsys_xl, monkeypatch, command, options
):
    """A many-run table read by the workers, in several partitions."""
    partition_cells(monkeypatch, 6 * 45 * 256 * 3)
    same_command(command, [*options, "--no-baselines" if command != "compare" else "-n",
                           recsys_xl / "qrels.parquet", recsys_xl / "runs.parquet"],
                 scheduler)  # fmt: skip


def test_each_row_group_is_read_once(recsys_xl, monkeypatch, tmp_path):
    """The bench's recsys-xl table (row groups of one run and 500 users) in partitions
    of 768 users, which cut the row groups' user ranges: every row group is read by one
    task, once (before: by each partition whose queries it may hold, 2.5 times over at
    100,000 users), on one worker or two; the per-run files of the same runs too; the
    bytes are the local engine's.  Workers in this process (threads), so that the reads
    can be counted."""
    import pandas as pd
    import pyarrow.parquet as pq

    from prefeval.engine import dask as dist

    partition_cells(monkeypatch, 6 * 45 * 256 * 3)
    reads = []
    read_group = dist.reading._read_group

    def counted(file, source, group, start):
        reads.append((source.path, group))
        return read_group(file, source, group, start)

    monkeypatch.setattr(dist.reading, "_read_group", counted)
    table = recsys_xl / "runs.parquet"
    # one task per row group: the rows of a run and of a user chunk (their queries in
    # two partitions at most), so that many workers share the reading
    judged = read_qrels(str(recsys_xl / "qrels.parquet"))
    queries = list(judged.relevant(None).query_ids)
    parts = [range(lo, min(lo + 768, len(queries))) for lo in range(0, len(queries), 768)]
    source = dist.reading.run_inputs([table])[1][0]
    _, _, stretches = dist.reading.groups_by_partition(source, parts, queries)
    count = pq.ParquetFile(table).metadata.num_row_groups
    assert [s.groups for s in stretches] == [[g] for g in range(count)]
    assert {len(s.parts) for s in stretches} == {1, 2}
    frame = pd.read_parquet(table)
    singles = []
    for name in ("sys01", "sys02", "sys03"):
        path = tmp_path / f"{name}.parquet"
        rows = frame[frame.run == name].drop(columns="run")
        rows.to_parquet(path, row_group_size=7000, index=False)
        singles.append(path)
    files = {table: [table], tmp_path: singles}
    for workers in (1, 2):
        with distributed.LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=False, dashboard_address=":0"
        ) as cluster:
            for runs in files.values():
                reads.clear()
                args = ["-q", "-n", recsys_xl / "qrels.parquet", *runs]
                local = invoke("compare", *args)
                assert local.exit_code == 0, local.stderr
                assert not reads  # the local engine reads otherwise
                remote = invoke("compare", *args, "--engine", "dask", "--scheduler",
                                cluster.scheduler_address)  # fmt: skip
                assert (remote.exit_code, remote.stdout, remote.stderr) == (
                    0, local.stdout, local.stderr
                )  # fmt: skip
                groups = [
                    (str(path), g) for path in runs
                    for g in range(pq.ParquetFile(path).metadata.num_row_groups)
                ]  # fmt: skip
                assert len(groups) > 6 and sorted(reads) == sorted(groups)


# ------------------------------------------------------------------ how the workers read


def test_row_groups_by_query_range(tmp_path):
    """A table laid out by query: each partition reads the row groups its queries may be
    in, or, where the row groups' query ranges chain into stretches no larger than what
    a partition reads, each stretch is read by one task; shuffled rows or integer ids:
    None (the rows are shuffled by partition)."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from prefeval.engine.dask.reading import (
        DIRECT_READS,
        _Stretch,
        groups_by_partition,
        run_inputs,
    )

    judged = read_qrels(str(SAMPLE / "qrels.txt"))
    queries = list(judged.relevant(None).query_ids)
    parts = [range(lo, min(lo + 4, len(queries))) for lo in range(0, len(queries), 4)]
    assert len(parts) > DIRECT_READS  # a shuffled table would be read more times over
    frame = pd.read_parquet(SAMPLE / "runs.parquet").sort_values(["query_id", "run"])
    by_query = tmp_path / "by-query.parquet"
    frame.to_parquet(by_query, row_group_size=len(frame) // 20 + 1)
    _, inputs, files = run_inputs([by_query])
    assert files == {name: (str(by_query), True) for name in frame.run.unique()}
    groups, unread, stretches = groups_by_partition(inputs[0], parts, queries)
    assert groups[0][0] == 0 and groups[-1][-1] == 19 and unread == []
    assert all(len(g) < 20 for g in groups)
    assert stretches is None  # queries cut by row groups: one stretch, the whole table
    # row groups of two whole queries each: stretches of one group, two per partition
    whole = tmp_path / "whole-queries.parquet"
    by_id = {q: rows for q, rows in frame.groupby("query_id")}
    with pq.ParquetWriter(whole, pa.Schema.from_pandas(frame, preserve_index=False)) as out:
        for pair in zip(sorted(by_id)[::2], sorted(by_id)[1::2]):
            rows = pd.concat([by_id[q] for q in pair])
            out.write_table(pa.Table.from_pandas(rows, preserve_index=False))
    groups, unread, stretches = groups_by_partition(run_inputs([whole])[1][0], parts, queries)
    assert stretches == [_Stretch([g], [g // 2]) for g in range(10)]
    shuffled = tmp_path / "shuffled.parquet"
    frame.sample(frac=1, random_state=1).to_parquet(shuffled, row_group_size=500)
    assert groups_by_partition(run_inputs([shuffled])[1][0], parts, queries) is None
    # the queries of no partition: read once (by the first partition), for their checks
    unjudged = tmp_path / "unjudged.parquet"
    pd.concat([frame.assign(query_id="000"), frame]).to_parquet(unjudged, row_group_size=len(frame))
    groups, unread, stretches = groups_by_partition(run_inputs([unjudged])[1][0], parts, queries)
    assert unread == [0] and all(g == [1] for g in groups)
    assert stretches == [_Stretch([0], []), _Stretch([1], list(range(len(parts))))]
    numbers = tmp_path / "numbers.parquet"
    frame.assign(query_id=frame["query_id"].astype(int)).to_parquet(numbers)
    assert groups_by_partition(run_inputs([numbers])[1][0], parts, queries) is None


@pytest.mark.parametrize(
    "layout", ["by-query", "by-run", "by-run-no-run-stats", "shuffled", "numbers"]
)
def test_dask_equals_local_on_any_table_layout(scheduler, monkeypatch, tmp_path, layout):
    """Row groups read by query range, or the rows shuffled by partition (a table in
    random order, integer query ids), with text runs beside: the local engine's bytes,
    in many partitions.  By run: a task reduces each run once the row groups that may
    hold it (by the run column's statistics; groups that hold two runs) are read."""
    import pandas as pd

    small_partitions(monkeypatch)
    frame = pd.read_parquet(SAMPLE / "runs.parquet")
    frame = frame[frame.run.isin(["sys01", "sys02", "sys03", "sys04"])]
    if layout == "by-query":
        frame = frame.sort_values(["query_id", "run"])
    elif layout.startswith("by-run"):
        frame = frame.sort_values(["run", "query_id"])
    elif layout == "shuffled":
        frame = frame.sample(frac=1, random_state=2)
    else:
        frame = frame.assign(query_id=frame["query_id"].astype(int))
    table = tmp_path / "runs.parquet"
    stats = {"write_statistics": ["query_id"]} if layout.endswith("no-run-stats") else {}
    frame.to_parquet(table, row_group_size=700, **stats)
    text = [r for r in RUNS if r.endswith(("sys05", "sys06.gz"))]
    for command, options in (("compare", ["-q"]), ("order", ["--no-baselines"]),
                             ("pairs", ["--no-baselines"])):  # fmt: skip
        same_command(command, [*options, SAMPLE / "qrels.txt", table, *text], scheduler)


# ------------------------------------------------------------------ found by a review


def _sample_table():
    import pandas as pd

    return pd.read_parquet(SAMPLE / "runs.parquet").sort_values(["query_id", "run"])


def test_a_nested_column_before_the_query_column(scheduler, tmp_path):
    """The query column's statistics are found by its Parquet column path (a struct
    column before it has two Parquet columns)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    frame = _sample_table()
    table = pa.Table.from_pandas(frame, preserve_index=False)
    meta = pa.StructArray.from_arrays(
        [pa.array(np.arange(len(frame))), pa.array(np.arange(len(frame)) * 2)], ["x", "y"]
    )
    table = table.add_column(1, "meta", meta)
    path = tmp_path / "nested.parquet"
    pq.write_table(table, path, row_group_size=700)
    same_command("compare", ["-q", SAMPLE / "qrels.txt", path], scheduler)


def _bad_tables(tmp_path):
    import pandas as pd

    frame = _sample_table().reset_index(drop=True)
    out = {}
    unjudged = pd.concat([frame.head(300).assign(query_id="000"), frame], ignore_index=True)
    unjudged.loc[10, "score"] = float("nan")  # in a row group of no evaluated query
    out["nan-unjudged"] = (unjudged, 300)
    twice = pd.concat([frame.iloc[:4001], frame.iloc[[4000]], frame.iloc[4001:]])
    out["duplicate"] = (twice, 700)
    out["duplicate-numbers"] = (twice.assign(query_id=twice["query_id"].astype(int)), 700)
    empty = frame.copy()
    empty.loc[2500, "doc_id"] = ""
    out["empty-docno-shuffled"] = (empty.sample(frac=1, random_state=3), 500)
    paths = {}
    for name, (table, size) in out.items():
        paths[name] = tmp_path / f"{name}.parquet"
        table.to_parquet(paths[name], row_group_size=size, index=False)
    corrupt = tmp_path / "corrupt.parquet"
    frame.to_parquet(corrupt, row_group_size=700, index=False, compression="snappy")
    data = bytearray(corrupt.read_bytes())
    data[len(data) // 4 : len(data) // 2] = b"\xff" * (len(data) // 2 - len(data) // 4)
    corrupt.write_bytes(bytes(data))
    paths["corrupt"] = corrupt
    return paths


@pytest.mark.parametrize(
    "name", ["nan-unjudged", "duplicate", "duplicate-numbers", "empty-docno-shuffled", "corrupt"]
)
def test_input_errors_are_the_local_engine_s(scheduler, tmp_path, monkeypatch, name):
    """Every row group is read and checked, on either way of reading, and an error cites
    the file's row as the local reader does (exit 2, one line, no output file)."""
    small_partitions(monkeypatch)
    path = _bad_tables(tmp_path)[name]
    out = tmp_path / "out.tsv"
    args = ["-q", "-o", out, SAMPLE / "qrels.txt", path]
    local = invoke("compare", *args)
    remote = invoke("compare", *args, "--engine", "dask", "--scheduler", scheduler)
    assert local.exit_code == 2 and remote.exit_code == 2, (local.stderr, remote.stderr)
    assert "Traceback" not in remote.stderr and not out.exists()
    assert remote.stderr.startswith(f"{path}: ") and remote.stderr.count("\n") == 1
    if name == "corrupt":  # Arrow's own words may differ with the way of reading
        assert "not a readable Parquet file" in remote.stderr, remote.stderr
    else:
        assert remote.stderr == local.stderr


@pytest.mark.parametrize("name", ["nan-unjudged", "duplicate", "empty-docno-shuffled"])
def test_input_errors_cite_the_path_as_given(scheduler, tmp_path, monkeypatch, name):
    """The workers open a Parquet run by its absolute path, but an error cites the path as
    the user gave it: the local engine's message, byte for byte (it cited the absolute
    path)."""
    small_partitions(monkeypatch)
    _bad_tables(tmp_path)
    monkeypatch.chdir(tmp_path)
    args = ["-q", SAMPLE / "qrels.txt", f"{name}.parquet"]
    local = invoke("compare", *args)
    remote = invoke("compare", *args, "--engine", "dask", "--scheduler", scheduler)
    assert local.exit_code == 2 and remote.exit_code == 2, (local.stderr, remote.stderr)
    assert remote.stderr.startswith(f"{name}.parquet: "), remote.stderr
    assert remote.stderr == local.stderr


def test_the_library_s_rows_and_notices_are_the_local_engine_s(scheduler, monkeypatch):
    """prefeval.compare(engine="dask") puts the whole cube together: the rows in measure,
    pair, query order whatever the partitions; the same notices, once."""
    import pandas as pd

    import prefeval

    small_partitions(monkeypatch)
    said = {"local": [], "dask": []}
    frames = {
        where: prefeval.compare(
            str(SAMPLE / "qrels.txt"), RUNS, per_query=True, summary=True, engine=where,
            scheduler=scheduler if where == "dask" else None, notify=said[where].append,
        )
        for where in ("local", "dask")
    }  # fmt: skip
    pd.testing.assert_frame_equal(frames["local"], frames["dask"])
    assert said["local"] == said["dask"] and len(said["local"]) == 1  # sys04 lacks a query


def test_one_file_under_two_names(scheduler, tmp_path):
    import pandas as pd

    import prefeval

    frame = pd.read_parquet(SAMPLE / "runs.parquet")
    one = tmp_path / "one.parquet"
    frame[frame.run == "sys01"].drop(columns="run").to_parquet(one)
    runs = {"A": str(one), "B": str(one), "C": RUNS[1]}
    local = prefeval.compare(
        str(SAMPLE / "qrels.txt"), runs, per_query=True, summary=True, notify=None
    )
    remote = prefeval.compare(
        str(SAMPLE / "qrels.txt"), runs, per_query=True, summary=True, notify=None, engine="dask",
        scheduler=scheduler,
    )  # fmt: skip
    pd.testing.assert_frame_equal(local, remote)
    assert (local[(local.run_a == "A") & (local.run_b == "B")]["value"] == 0).all()


@pytest.mark.parametrize("cells", [None, 6 * 15 * 6])
def test_parquet_output_is_the_local_engine_s(scheduler, tmp_path, monkeypatch, cells):
    """Byte for byte, the dictionary of the summary's query ids included."""
    if cells is not None:
        small_partitions(monkeypatch, cells)
    written = []
    for where in ("local", "dask"):
        out = tmp_path / f"{where}.parquet"
        extra = ["--scheduler", scheduler] if where == "dask" else []
        result = invoke("compare", "-q", "-f", "parquet", "-o", out, "--engine", where,
                        *extra, SAMPLE / "qrels.txt", *RUNS)  # fmt: skip
        assert result.exit_code == 0, result.stderr
        written.append(out.read_bytes())
    assert written[0] == written[1]


def test_parquet_paths_are_absolute_for_the_workers(tmp_path, monkeypatch):
    from prefeval.engine.dask.reading import run_inputs

    monkeypatch.chdir(SAMPLE)
    _, inputs, files = run_inputs(["runs.parquet"])
    assert inputs[0].path == str(SAMPLE / "runs.parquet")
    # messages cite the path as given, as the local engine's do
    assert (inputs[0].shown, files["sys01"]) == ("runs.parquet", ("runs.parquet", True))


@pytest.mark.parametrize("address", ["nowhere", " ", "inproc://x"])
def test_bad_scheduler_addresses_are_usage_errors(address):
    result = invoke(
        "order", "--engine", "dask", "--scheduler", address, SAMPLE / "qrels.txt", *RUNS
    )
    assert result.exit_code == 2, result.stderr
    assert "--scheduler" in result.stderr and "Traceback" not in result.stderr


# ------------------------------------------------------------------ edge cases


def _two_stretches(bad_first: str, bad_between: str, bad_last: str, tmp_path):
    """A table of runs sys01 and sys02, sys02's rows in two stretches around sys01's,
    with a flaw (``dup``: a document met twice; ``empty``: an empty document id;
    ``none``) early in sys02's first stretch, in sys01's rows and in sys02's second."""
    import pandas as pd

    frame = _sample_table()
    frame = frame[frame.run.isin(["sys01", "sys02"])].sort_values(["run", "query_id"])
    queries = sorted(frame.query_id.unique())
    ys = frame[frame.run == "sys02"]
    first, second = ys[ys.query_id.isin(queries[:10])], ys[~ys.query_id.isin(queries[:10])]
    xs = frame[frame.run == "sys01"].copy()

    def flaw(rows, kind, at):
        if kind == "dup":
            return pd.concat([rows.iloc[: at + 3], rows.iloc[[at]], rows.iloc[at + 3 :]])
        if kind == "empty":
            rows = rows.copy()
            rows.iloc[at + 5, rows.columns.get_loc("doc_id")] = ""
        return rows

    table = pd.concat(
        [
            flaw(first, bad_first, 2),
            flaw(xs, bad_between, 2),
            flaw(second, bad_last, len(second) - 20),
        ]
    )
    path = tmp_path / "flawed.parquet"
    table.to_parquet(path, row_group_size=250, index=False)
    return path


@pytest.mark.parametrize(
    "flaws",
    [("dup", "dup", "none"), ("none", "dup", "empty"), ("dup", "empty", "none"),
     ("empty", "dup", "none"), ("none", "dup", "dup")],
)  # fmt: skip
def test_the_first_flaw_in_the_file_is_told_as_locally(scheduler, tmp_path, flaws):
    """In one partition, a task tells the flaw the local reader tells: an empty id
    anywhere before a document met twice, of two such documents the earlier in the
    file, whichever run's rows are complete first."""
    path = _two_stretches(*flaws, tmp_path)
    args = ["-q", SAMPLE / "qrels.txt", path]
    local = invoke("compare", *args)
    remote = invoke("compare", *args, "--engine", "dask", "--scheduler", scheduler)
    assert local.exit_code == 2 and "Traceback" not in remote.stderr
    assert (remote.exit_code, remote.stderr) == (2, local.stderr)
    assert ("empty document id" in local.stderr) == ("empty" in flaws)


@pytest.mark.xfail(
    strict=True,
    reason="known: with flaws in two partitions Dask tells the first partition's (in query "
    "order), the local reader the first in the file (README, Dask)",
)
def test_flaws_in_two_partitions(scheduler, monkeypatch, tmp_path):
    import pandas as pd

    small_partitions(monkeypatch, 1)
    frame = _sample_table()
    frame = frame[frame.run.isin(["sys01", "sys02"])].sort_values(["run", "query_id"])
    last = sorted(frame.query_id.unique())[-1]
    a, b = frame[frame.run == "sys01"], frame[frame.run == "sys02"]
    at = int(np.flatnonzero(a.query_id.to_numpy() == last)[0])
    a = pd.concat([a.iloc[: at + 2], a.iloc[[at]], a.iloc[at + 2 :]])  # last query, early
    b = pd.concat([b.iloc[:3], b.iloc[[1]], b.iloc[3:]])  # first query, later in the file
    path = tmp_path / "two.parquet"
    pd.concat([a, b]).to_parquet(path, row_group_size=250, index=False)
    args = ["-q", SAMPLE / "qrels.txt", path]
    local = invoke("compare", *args)
    remote = invoke("compare", *args, "--engine", "dask", "--scheduler", scheduler)
    assert local.exit_code == remote.exit_code == 2
    assert remote.stderr == local.stderr


@pytest.mark.parametrize("how", ["stdin", "pipe"])
def test_parquet_from_stdin_or_a_pipe_is_read_on_the_client(scheduler, tmp_path, how):
    """``--engine dask`` with a Parquet table of runs on ``-`` or on a pipe: its bytes are
    read once, on the client; never a file named ``-`` (here: other runs, in the folder
    the command runs in) nor ``/dev/fd/N`` opened by a worker."""
    import os
    import subprocess
    import sys

    import pandas as pd

    frame = pd.read_parquet(SAMPLE / "runs.parquet")
    table = tmp_path / "runs.parquet"
    frame[frame.run.isin(["sys01", "sys02", "sys03"])].to_parquet(table)
    decoy = frame[frame.run.isin(["sys01", "sys02", "sys03"])].copy()
    decoy["doc_id"] = decoy["doc_id"].sample(frac=1, random_state=3).to_numpy()
    decoy.drop_duplicates(["run", "query_id", "doc_id"]).to_parquet(tmp_path / "-")
    qrels = SAMPLE / "qrels.txt"
    want = invoke("compare", "-q", qrels, table)
    assert want.exit_code == 0, want.stderr
    env = dict(os.environ)
    env["PYTHONPATH"] = (
        str(Path(__file__).resolve().parents[2]) + os.pathsep + env.get("PYTHONPATH", "")
    )
    command = [sys.executable, "-m", "prefeval", "compare", "-q", "--engine", "dask",
               "--scheduler", scheduler, str(qrels)]  # fmt: skip
    if how == "stdin":
        proc = subprocess.run([*command, "-"], input=table.read_bytes(), capture_output=True,
                              cwd=tmp_path, env=env, timeout=300)  # fmt: skip
    else:
        script = " ".join(command) + f" <(cat {table})"
        proc = subprocess.run(["/bin/bash", "-c", script], capture_output=True, cwd=tmp_path,
                              env=env, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.decode() == want.stdout


@pytest.fixture(scope="module")
def one_worker():
    cluster = distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    yield cluster.scheduler_address
    cluster.close()


def test_hsd_pvalues_do_not_depend_on_cores_or_workers(scheduler, one_worker, monkeypatch):
    """discpower --test hsd: the bytes of -j 1 with -j 2 (two threads) and on Dask with one
    worker and with two.  The trials run on the workers: chunks of 8 trials (streams of 2
    trials, chunks of 4 streams, here), 50 per measure in tasks of consecutive chunks,
    the win-rate matrix scattered once per measure to every worker, on the one connection
    that computed the preferences (the engine held open for the HSD)."""
    from prefeval.analysis import significance
    from prefeval.engine import dask as dist

    monkeypatch.setattr(significance, "_THREADED_SIZE", 1)  # threads even for 20 queries
    monkeypatch.setattr(significance, "_STREAM_ROWS", 2 * 20)  # 2 trials a stream
    monkeypatch.setattr(significance, "_CHUNK_BYTES", 8 * 4 * 2 * 20)  # 4 streams a chunk
    connects, scatters = [], []
    make_client, scatter = dist.cluster._client, distributed.Client.scatter

    def counted_client(*args, **kwargs):
        connects.append(args)
        return make_client(*args, **kwargs)

    def counted_scatter(self, data, **kwargs):
        scatters.append(kwargs.get("broadcast"))
        return scatter(self, data, **kwargs)

    monkeypatch.setattr(dist.cluster, "_client", counted_client)
    monkeypatch.setattr(distributed.Client, "scatter", counted_scatter)
    common = ["discpower", "--test", "hsd", "--trials", "400", "--pairs", "--no-baselines",
              "-m", "rpp,LR", SAMPLE / "qrels.txt", *RUNS]  # fmt: skip
    reference = invoke(*common, "-j", "1")
    assert reference.exit_code == 0, reference.stderr
    p = read_tsv(reference.stdout)["p_value"].astype(float)
    assert len(p) == 2 * 15 and p.min() < 0.01 < p.max()  # tells pairs apart
    assert invoke(*common, "-j", "2").stdout == reference.stdout
    for address in (one_worker, scheduler):
        with distributed.Client(address) as client, distributed.get_task_stream(client) as ts:
            got = invoke(*common, "--engine", "dask", "--scheduler", address)
        assert got.exit_code == 0, got.stderr
        assert (got.stdout, got.stderr) == (reference.stdout, reference.stderr)
        blocks = [t for t in ts.data if t["key"].startswith("_block_task")]
        # broadcast: the judgments for the text runs' tasks, then the win rates per measure
        assert len(connects) == 1 and scatters == [True, True, True]
        # 50 chunks a measure, in 4 tasks per worker thread (1 or 2 of them)
        assert len({t["key"] for t in blocks}) == 2 * (4 if address == one_worker else 8)
        connects.clear(), scatters.clear()


def test_text_runs_are_read_by_the_workers(scheduler, monkeypatch, tmp_path):
    """Text run files (plain and gzip) are read and reduced by the workers, by path, one
    task each, not parsed on the client; the local engine's bytes, also with many
    partitions and for robustness (the positions come back); two flawed runs: the local
    engine's message, the first in run order, citing the path as given."""
    import gzip
    import os

    from prefeval.io import runs as run_sets

    parsed = []
    read = run_sets.Run.read

    def spied(self, *args, **kwargs):
        parsed.append(self.name)
        return read(self, *args, **kwargs)

    monkeypatch.setattr(run_sets.Run, "read", spied)
    # the local engine's text reader, which the spy sees (not the one-pass reader of
    # prefeval.io.textpass, which reads no columns)
    monkeypatch.setenv("PREFEVAL_TEXT_PASS", "0")
    packed = tmp_path / "input.packed.gz"
    packed.write_bytes(gzip.compress(Path(RUNS[1]).read_bytes()))
    runs = [RUNS[0], packed, *RUNS[2:]]
    args = ["compare", "-q", "--no-cache", SAMPLE / "qrels.txt", *runs]
    local = invoke(*args)
    assert len(parsed) == 6  # the local engine parses here
    parsed.clear()
    with distributed.Client(scheduler) as client, distributed.get_task_stream(client) as ts:
        remote = invoke(*args, "--engine", "dask", "--scheduler", scheduler)
    assert parsed == []  # the Dask engine: on the workers
    # one task per file, the judgments sent to every worker beforehand (not fetched from
    # a worker busy parsing), the partition's task taking its piece of each result
    keys = [t["key"] for t in ts.data]
    assert len([k for k in keys if k.startswith("text_task")]) == 6
    tasks = ("text_task", "partition_task", "_without_rows", "_rows_of")
    assert [k for k in keys if not k.startswith(tasks)] == []
    assert (remote.exit_code, remote.stdout, remote.stderr) == (0, local.stdout, local.stderr)
    small_partitions(monkeypatch)
    same_output(["-q", SAMPLE / "qrels.txt", *runs], scheduler)
    same_command("robustness", ["--no-baselines", "--labels", "0.5", "--samples", "2",
                                SAMPLE / "qrels.txt", *runs], scheduler)  # fmt: skip
    flawed = []
    for k, (path, flaw) in enumerate([(RUNS[1], "401 Q0 doc 1 x run\n"),
                                      (RUNS[3], "401 Q0\n")]):  # fmt: skip
        bad = tmp_path / f"input.bad{k}"
        bad.write_bytes(Path(path).read_bytes() + flaw.encode())
        flawed.append(bad)
    monkeypatch.chdir(tmp_path)  # paths as given, relative
    args = ["compare", SAMPLE / "qrels.txt", RUNS[0], flawed[0].name, RUNS[2], flawed[1].name]
    local = invoke(*args)
    remote = invoke(*args, "--engine", "dask", "--scheduler", scheduler)
    assert local.exit_code == remote.exit_code == 2
    assert remote.stderr == local.stderr
    assert remote.stderr.startswith("input.bad0:") and os.sep not in remote.stderr.split(":")[0]
    # the read task's value travels to the partition's worker: it must unpickle there
    import pickle

    from prefeval.engine import dask as dist

    relevant = read_qrels(SAMPLE / "qrels.txt").relevant(None)
    source = dist.reading.TextInput(str(flawed[0]), flawed[0].name, "bad0", "text")
    got = dist.reading.text_task(source, relevant, [range(relevant.n_queries)], None)
    back = pickle.loads(pickle.dumps(got))
    assert [(e.path, e.line, e.message) for e in back] == [(e.path, e.line, e.message) for e in got]
    assert (got[0].path, got[0].line) == ("input.bad0", 1001)
