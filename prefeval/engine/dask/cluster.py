"""The Dask cluster: the client (a ``--scheduler`` address or a local cluster of one
worker process per core), the partitions' tasks submitted and their results gathered in
query order, and :class:`DaskEngine`, the engine interface over them."""

from __future__ import annotations

import logging
import threading
import time
import warnings
from collections import deque
from collections.abc import Generator, Iterator
from dataclasses import replace

import numpy as np

from ...core.cube import run_pairs
from ...core.errors import SystemLimitError
from ...core.positions import missing_notice
from ...core.progress import progress_bar
from ...core.rows import Rows
from ...core.signals import SignalsHeld
from ...io.writers import TemporaryFolder, row_groups
from .. import runtime
from ..job import Job, PartitionResult, Partitions, Want, summary_schema
from ..memory import MMAP_THRESHOLD, map_large_allocations
from .plan import Plan, job_plan

#: win rates of one measure (queries x runs) from which the Dask client keeps them in a
#: temporary file while the partitions come in (the workers' memory is then in use)
SPILL_SCORES = 1 << 23


#: environment of the local cluster's worker processes, set before they start: glibc's
#: mmap threshold held fixed, as :func:`~prefeval.engine.memory.map_large_allocations` does in
#: compare's client, so that the arrays a task frees go back to the system
WORKER_ENV = {"MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD)}


#: the Dask resource of the local cluster's workers made for ``compare -q``: as many
#: as the threads Dask would give a worker, one taken by each task of a partition, so
#: that the worker's one thread more is left for fetching results
PARTITION_SLOT = "prefeval-partition"


#: seconds a ``--scheduler`` address has to accept the connection and answer as Dask
CONNECT_SECONDS = 15


#: seconds a ``--scheduler`` without workers has for one to join (tasks would wait for ever)
WORKER_SECONDS = 15


def _client(scheduler: str | None, fetcher: bool = False):
    """A client of the scheduler at ``scheduler``, or of a new local cluster; with
    ``fetcher``, whose workers have a thread more than partition slots (for
    :func:`_partition_results` with ``pieces``)."""
    from distributed import Client

    if scheduler is not None and not scheduler.strip():
        raise ValueError("--scheduler: an empty address")
    try:
        if scheduler:
            client = _bounded(lambda: _connected(Client, scheduler))
            return _with_a_worker(client, scheduler)
        # Dask's own choice of processes and threads; with ``fetcher`` one thread more
        # per worker, which no partition takes: it hands a finished partition's rows to
        # the client while the partition slots compute the next ones (only then: an idle
        # thread raises every worker's peak; the 1M-user Dask cases of bench/RESULTS.md)
        from distributed.deploy.utils import nprocesses_nthreads

        workers, threads = nprocesses_nthreads()
        runtime.cluster_files(workers)
        slots = {"threads_per_worker": threads}
        if fetcher:
            slots = {"threads_per_worker": threads + 1, "resources": {PARTITION_SLOT: threads}}
        # started whole (a signal meanwhile is held, then handled with the cluster
        # closed): one interrupted while it starts left its processes writing in the
        # folder removed meanwhile, and failed an assertion at exit
        held = SignalsHeld()
        with held:
            client = _local_client(workers, slots)
        try:
            held.deliver()
        except BaseException:
            _close(client, True)
            raise
        return client
    except _NoWorkers as error:
        raise ValueError(str(error)) from None
    except Exception as error:  # Dask's own errors for a bad address or answer, too
        if not scheduler:
            if isinstance(error, (SystemLimitError, MemoryError)):
                raise
            # a worker process that cannot start (a process or memory limit...)
            raise SystemLimitError(f"cannot start a local Dask cluster ({error})") from None
        detail = str(error) or type(error).__name__  # Dask's timeouts come without a text
        raise ValueError(f"--scheduler {scheduler}: cannot connect ({detail})") from None


def _local_client(workers: int, slots: dict):
    """A client of a new local cluster of ``workers`` processes (``slots``: their threads
    and resources), whose scratch space is a :class:`~prefeval.io.writers.TemporaryFolder`
    of its own, removed with the cluster (:func:`_close`)."""
    import dask
    from distributed import Client, LocalCluster

    environ = {f"distributed.nanny.pre-spawn-environ.{k}": v for k, v in WORKER_ENV.items()}
    # the workers' scratch space (and Dask's lock files beside it) in a folder of the
    # command's own, not left in $TMPDIR
    scratch = TemporaryFolder("dask")
    cluster = None
    try:
        # the workers share the command's stderr: their log of a failed task (an input
        # error, raised again here) would print a traceback beside its message; a
        # dashboard on any free port (the default 8787 may be taken: a warning)
        with dask.config.set({**environ, "temporary-directory": scratch.name}):
            cluster = LocalCluster(
                n_workers=workers,
                **slots,
                processes=True,
                dashboard_address=":0",
                silence_logs=logging.CRITICAL,
            )
        cluster.prefeval_scratch = scratch  # type: ignore[attr-defined]  # ours, closed with it
        # the scheduler's tasks run on this loop: what an interruption leaves them
        # (a request cut short) is as silent as the cluster's logs
        loop = cluster.loop
        assert loop is not None  # a started cluster's
        loop.asyncio_loop.set_exception_handler(_quiet)  # type: ignore[attr-defined]
        return Client(cluster)
    except BaseException:
        if cluster is not None:
            cluster.close()
        scratch.cleanup()
        raise


def _quiet(loop, context) -> None:
    """The exception handler of the event loop of a local cluster: nothing is printed."""


#: tasks per worker thread that :meth:`DaskEngine.blocks` makes of its items (a few, so
#: that a thread done early takes another)
BLOCK_TASKS = 4


def _block_task(work, shared, items) -> list:
    """On a worker: ``work(shared, item)`` for each of ``items``."""
    return [work(shared, item) for item in items]


class _NoWorkers(Exception):
    """The scheduler has no worker (and none joined in time)."""


def _with_a_worker(client, scheduler: str):
    """``client`` once its scheduler has a worker; else (none within
    :data:`WORKER_SECONDS`) the client closed and :class:`_NoWorkers`."""
    try:
        client.wait_for_workers(1, timeout=WORKER_SECONDS)
    except TimeoutError:
        client.close()
        raise _NoWorkers(
            f"--scheduler {scheduler}: the scheduler has no workers (none joined within "
            f"{WORKER_SECONDS} s)"
        ) from None
    return client


def _connected(client_class, scheduler: str):
    """A ``client_class`` (distributed's Client) of ``scheduler``, connected again
    while distributed's own checks of a connection in the making fail, until
    :data:`CONNECT_SECONDS` have passed.  Those checks are assertions, whose error has
    no text (the command said "cannot connect (AssertionError)"): that the thread of
    the client's event loop started within 10 s, and that the scheduler's first answer
    is its one "stream-start" message.  On a loaded machine a live scheduler failed
    one of them (a test of ``tests/engine/test_dask.py`` under ``pytest -n 2``, 3 runs
    in 40); an address that does not answer, or answers otherwise, fails with an
    error of its own."""
    deadline = time.monotonic() + CONNECT_SECONDS
    while True:
        try:
            return client_class(scheduler, timeout=f"{CONNECT_SECONDS}s")
        except AssertionError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.1)


def _bounded(connect):
    """``connect()`` within :data:`CONNECT_SECONDS`: Dask bounds the
    TCP connection but not the handshake after it, so an address that accepts and never
    answers (not a Dask scheduler) would hang the command.  The attempt left behind runs
    in a daemon thread, which does not keep the process alive."""

    got: list = []

    def attempt():
        try:
            got.append((True, connect()))
        except BaseException as error:  # handed to the caller
            got.append((False, error))

    thread = threading.Thread(target=attempt, name="prefeval-connect", daemon=True)
    thread.start()
    thread.join(CONNECT_SECONDS)
    if not got:
        raise TimeoutError(f"no answer from a Dask scheduler within {CONNECT_SECONDS} s")
    ok, value = got[0]
    if not ok:
        raise value
    return value


def _partition_results(
    plan: Plan, client, own_cluster, notify, progress=False, pieces: bool = False, done=None
) -> Generator:
    """Run the tasks on ``client`` (at the end, ``done()``; without it the client is
    closed, and its cluster with ``own_cluster``); yield their :class:`PartitionResult`
    in partition order, each as it is needed, then tell which runs had no results for
    some queries (as the local engine does).  With ``pieces``, a result's ``rows`` are
    an iterator of its per-query rows fetched from the worker a row group at a time, to
    be read before the next result is asked for: the client never holds a whole
    partition's rows."""

    slot = None

    def submit(tasks):
        with warnings.catch_warnings():
            # text runs are parsed here and travel in the graph: Dask's advice to load
            # them on the workers is no news to the user of a command
            warnings.filterwarnings("ignore", "Sending large graph", UserWarning)
            return client.compute(tasks, resources=slot)

    try:
        workers = client.scheduler_info().get("workers", {})
        # on our own cluster made for fetching pieces (see _client), every task of a
        # partition (its reading and splitting too) takes a slot, as the workers tell:
        # a slot no worker has would leave the tasks waiting for ever
        if own_cluster and _has_slots(workers):
            slot = {PARTITION_SLOT: 1}
        # a few partitions ahead of the one written: results wait in the workers'
        # memory for their turn (tasks that share the splitting of a table go together);
        # a partition's per-query rows, fetched in pieces, are held by its worker while
        # it computes the next one: one each, not two
        ahead = len(plan.tasks)
        if not plan.shared:
            ahead = max(1, len(workers)) * (1 if pieces else 2)
        plan.tasks.submit = submit  # each stretch of row groups on its first use
        plan.tasks.scatter = lambda data: client.scatter(data, broadcast=True, hash=False)
        futures = deque(submit(plan.tasks[:ahead]))
        if ahead >= len(plan.tasks):
            plan.tasks.release()
        missing: dict[str, int] = {}
        for k in progress_bar(
            range(len(plan.tasks)), desc="partitions", unit="partition", enable=progress
        ):
            future = futures.popleft()
            if k + ahead < len(plan.tasks):
                futures.append(submit(plan.tasks[k + ahead]))
                if k + ahead == len(plan.tasks) - 1:
                    plan.tasks.release()
            if pieces:
                result, rows = client.submit(_without_rows, future).result()
                result.rows = _rows_in_pieces(client, future, rows)
            else:
                result = future.result()
            plan.tasks.done(k)
            for name, count in result.missing.items():
                missing[name] = missing.get(name, 0) + count
            yield result
            future.release()
        if notify is not None:
            for name in plan.names:
                if missing.get(name):
                    notify(missing_notice(name, missing[name], plan.n_queries))
    finally:
        if done is not None:
            done()
        else:
            _close(client, own_cluster)


def _close(client, own_cluster: bool) -> None:
    """Close ``client``, and its cluster with ``own_cluster`` (then its scratch folder,
    once no process of the cluster writes there), whole: a signal meanwhile is handled
    once they are closed."""
    held = SignalsHeld()
    with held:
        cluster = client.cluster
        client.close()
        if cluster is not None and own_cluster:
            cluster.close()
            scratch = getattr(cluster, "prefeval_scratch", None)
            if scratch is not None:
                scratch.cleanup()
    held.deliver()


def _has_slots(workers: dict) -> bool:
    """Whether there are ``workers`` (the scheduler's information on each) and every one
    has :data:`PARTITION_SLOT`."""
    found = [PARTITION_SLOT in w.get("resources", {}) for w in workers.values()]
    return bool(found) and all(found)


def _without_rows(result: PartitionResult) -> tuple[PartitionResult, int]:
    """On the worker: ``result`` without its per-query rows, and their number."""
    rows = 0 if result.rows is None else sum(len(piece) for piece in result.rows)
    return replace(result, rows=None), rows


def _rows_of(result: PartitionResult, lo: int, hi: int):
    """On the worker: rows ``lo:hi`` of ``result``'s per-query rows (Rows, or a DataFrame
    of plain strings)."""
    assert result.rows is not None  # asked for: compare's per-query rows
    (piece,) = result.rows  # one piece, computed here
    return piece.part(lo, hi) if isinstance(piece, Rows) else piece.iloc[lo:hi]


def _rows_in_pieces(client, future, rows: int) -> Iterator:
    """The rows of ``future``'s result, one piece per row group of the output
    (:func:`~prefeval.io.writers.row_groups`, so that the file is the local engine's, row
    group for row group; one empty piece for no rows), the next one asked for while this
    one is written."""
    pieces: deque = deque()
    for lo, hi in row_groups(rows):
        pieces.append(client.submit(_rows_of, future, lo, hi))
        if len(pieces) == 2:
            yield _taken(pieces.popleft())
    while pieces:
        yield _taken(pieces.popleft())


def _taken(piece):
    rows = piece.result()
    piece.release()
    return rows


class DaskEngine:
    """The Dask engine: the local engine's partitions, one task each on a Dask cluster
    (``scheduler``, default a local cluster with the workers Dask chooses),
    computed by the kernel (:func:`compare_partition`'s) and brought back in query order,
    a partition's per-query rows fetched in pieces (:func:`_rows_in_pieces`); blocks of
    other work (:meth:`blocks`) on the same workers.  The cache is not used.  ValueError
    when the scheduler cannot be reached.  The client (and the cluster it made) is
    closed once a call's results are all given, or, in a ``with`` block, at its end."""

    def __init__(self, scheduler: str | None = None):
        self.scheduler = scheduler
        self._held = 0
        self._client = None

    def __enter__(self) -> DaskEngine:
        self._held += 1
        return self

    def __exit__(self, *exc) -> None:
        self._held -= 1
        self._release()

    def _connect(self, fetcher: bool = False):
        """The client: the one held, else a new one (:func:`_client`)."""
        if self._client is None:
            self._client = _client(self.scheduler, fetcher=fetcher)
        return self._client

    def _release(self) -> None:
        """The client closed (and its cluster, when it made one), unless held."""
        if not self._held and self._client is not None:
            client, self._client = self._client, None
            _close(client, not self.scheduler)

    def blocks(self, work, shared, items, *, threads: int = 1, ready=()) -> Iterator:
        """``work(shared, item)`` for each of ``items`` on the workers, the results in the
        items' order: ``shared`` sent to every worker once (scattered, broadcast), the
        items in about :data:`BLOCK_TASKS` tasks per worker thread, consecutive items
        together (each task a list of results); ``threads`` and ``ready`` are the local
        engine's (the work gets ready on the workers)."""
        items = list(items)
        if not items:
            return
        client = self._connect()
        try:
            slots = sum(client.nthreads().values())  # the workers' threads
            tasks = max(1, min(len(items), BLOCK_TASKS * max(1, slots)))
            cuts = np.linspace(0, len(items), tasks + 1).astype(np.int64)
            [data] = client.scatter([shared], broadcast=True, hash=False)
            futures = [
                client.submit(_block_task, work, data, items[lo:hi], pure=False)
                for lo, hi in zip(cuts[:-1], cuts[1:])
            ]
            for future in futures:
                yield from future.result()
                future.release()
            data.release()  # the workers' copies
        finally:
            self._release()

    def prepare(self) -> None:
        """The client's memory handed back as it is freed (glibc's mmap threshold held
        fixed: :func:`~prefeval.engine.memory.map_large_allocations`), before anything
        is read."""
        map_large_allocations()

    def partitions(self, job: Job, want: Want) -> Partitions:
        options = job.options
        assert job.qrels is not None  # let go below, once the tasks carry them
        plan = job_plan(
            job.qrels, job.runs, [m.name for m in job.measures], options.relevance_level,
            job.pairs, job.notify, options.partition_cells, max_docs=options.max_docs,
            binary=options.binary, plain=False, want=want,
        )  # fmt: skip
        if want.rows:
            job.qrels = None  # the tasks carry their judgments; the client needs none
        relevant = plan.relevant
        assert relevant is not None  # the plan's, until the tasks carry it
        measures = [m.name for m in plan.measures]
        chosen = run_pairs(len(plan.names), job.pairs)
        schema = summary_schema(
            measures, plan.names, relevant.query_ids, plan.parts, chosen, want.both_directions
        )
        spill = relevant.n_queries * len(plan.names) >= SPILL_SCORES
        if want.rows:
            plan.relevant = relevant = None  # compare needs no more than the tasks carry
        # connected now: a scheduler that cannot be reached is an error of this call
        client = self._connect(fetcher=want.rows)
        results = _partition_results(
            plan, client, not self.scheduler, job.notify, options.progress, want.rows,
            done=self._release,
        )  # fmt: skip
        return Partitions(
            relevant, plan.names, measures, chosen, plan.parts, schema, results, spill=spill
        )
