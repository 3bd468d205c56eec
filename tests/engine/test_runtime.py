"""The runtime seam: the hooks hand memory back, the limits bound reader threads and
spills, and the plain read step gives the positions the read policy gives."""

from __future__ import annotations

import numpy as np
import pytest

from prefeval.core import limits
from prefeval.core.errors import SystemLimitError
from prefeval.engine import local, runtime
from prefeval.io.runs import read_qrels


@pytest.mark.parametrize(
    "hook", ["after_run", "after_reading", "after_partition", "after_evidence"]
)
def test_hooks_hand_memory_back(monkeypatch, hook):
    calls = []
    monkeypatch.setattr(runtime, "release_free_memory", lambda: calls.append(1))
    getattr(runtime, hook)()
    assert calls == [1]


def test_reader_threads_follow_the_limits(monkeypatch):
    monkeypatch.setattr(limits, "address_space", lambda: None)
    monkeypatch.setattr(limits, "free_files", lambda: 7)  # 7 // 3 descriptors each: 2
    assert runtime.reader_threads(8) == 2
    monkeypatch.setattr(limits, "address_space", lambda: 1 << 30)
    assert runtime.reader_threads(8) == 1


def test_spill_files_asks_for_a_file_per_partition_and_the_spare(monkeypatch):
    asked = []
    monkeypatch.setattr(limits, "open_files", lambda needed, what: asked.append(needed))
    assert runtime.spill_files(10, "a spill") is True
    assert asked == [74]

    def refused(needed, what):
        raise SystemLimitError("no")

    monkeypatch.setattr(limits, "open_files", refused)
    assert runtime.spill_files(10, "a spill") is False


def test_reduce_run_gives_the_positions_load_runs_gives(tmp_path):
    qrels_path = tmp_path / "qrels"
    qrels_path.write_text("q1 0 d1 1\nq1 0 d3 2\nq2 0 d5 1\n")
    run_path = tmp_path / "run"
    run_path.write_text("q1 Q0 d3 1 3.0 r\nq1 Q0 d2 2 2.0 r\nq1 Q0 d1 3 1.0 r\nq2 Q0 d5 1 1.0 r\n")
    relevant = read_qrels(str(qrels_path)).relevant(None)
    (loaded,) = local.load_runs([str(run_path)], relevant, None, use_cache=False)
    run = next(iter(local.resolve_runs([str(run_path)]).values()))
    reduced = local.reduce_run(run, relevant, None)
    for field in ("doc", "rank", "retrieved"):
        np.testing.assert_array_equal(getattr(reduced, field), getattr(loaded, field))
    # by hand: q1's relevant d1 at rank 3, d3 at rank 1; q2's d5 at rank 1
    assert sorted(np.asarray(reduced.rank).tolist()) == [1, 1, 3]


def test_cluster_files_counts_the_client_and_each_worker(monkeypatch):
    asked = []
    monkeypatch.setattr(limits, "open_files", lambda needed, what: asked.append((needed, what)))
    runtime.cluster_files(3)
    assert asked == [(40 + 16 * 3, "--engine dask (a local cluster of 3 workers)")]


def test_released_hands_memory_back_between_steps_only(monkeypatch):
    """A loop over steps: memory handed back before each step after the first, once the
    caller is done with the one before (not before the first, not after the last)."""
    seen = []
    monkeypatch.setattr(runtime, "release_free_memory", lambda: seen.append("release"))
    for step in runtime.released(["a", "b", "c"]):
        seen.append(step)
    assert seen == ["a", "release", "b", "release", "c"]
