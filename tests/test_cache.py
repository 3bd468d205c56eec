"""The cache of reduced runs: hits give the same results, any change misses."""

from __future__ import annotations

import os

import numpy as np

from prefeval import cache
from prefeval.engine import load_runs
from prefeval.readers import read_qrels

QRELS = "1 0 a 1\n1 0 b 2\n2 0 c 1\n"
RUN = "1 Q0 x 1 3.0 t\n1 Q0 a 2 2.0 t\n1 Q0 b 3 1.0 t\n2 Q0 c 1 1.0 t\n"
# same size, one byte different: b moves above a (scores 2.0 <-> 3.0 on a and x)
RUN2 = "1 Q0 x 1 2.0 t\n1 Q0 a 2 3.0 t\n1 Q0 b 3 1.0 t\n2 Q0 c 1 1.0 t\n"


def _entries(folder) -> int:
    return sum(len(files) for _, _, files in os.walk(folder))


def test_hit_equals_miss_and_content_change_misses(tmp_path, _private_cache):
    qrels = tmp_path / "qrels"
    qrels.write_text(QRELS)
    run = tmp_path / "input.r"
    run.write_text(RUN)
    relevant = read_qrels(str(qrels)).relevant(None)
    before = _entries(_private_cache)
    first = load_runs([str(run)], relevant, notify=None)[0]
    assert _entries(_private_cache) == before + 1
    again = load_runs([str(run)], relevant, notify=None)[0]
    assert _entries(_private_cache) == before + 1  # served from the cache
    np.testing.assert_array_equal(first.rank, again.rank)
    np.testing.assert_array_equal(first.doc, again.doc)
    # a: rank 2, b: rank 3, c: rank 1 (docs numbered a, b | c)
    assert dict(zip(first.doc.tolist(), first.rank.tolist())) == {0: 2, 1: 3, 2: 1}
    # rewrite in place with the same size (and maybe the same mtime): must not hit
    run.write_text(RUN2)
    changed = load_runs([str(run)], relevant, notify=None)[0]
    assert dict(zip(changed.doc.tolist(), changed.rank.tolist())) == {0: 1, 1: 3, 2: 1}
    # other judgments (-M or level) are other entries
    limited = load_runs([str(run)], relevant, max_docs=2, notify=None)[0]
    assert dict(zip(limited.doc.tolist(), limited.rank.tolist())) == {0: 1, 2: 1}


def test_disabled_cache_writes_nothing(tmp_path, _private_cache):
    qrels = tmp_path / "qrels"
    qrels.write_text(QRELS)
    run = tmp_path / "input.s"
    run.write_text(RUN + "2 Q0 d 2 0.5 t\n")
    relevant = read_qrels(str(qrels)).relevant(None)
    before = _entries(_private_cache)
    cache.set_enabled(False)
    try:
        load_runs([str(run)], relevant, notify=None)
    finally:
        cache.set_enabled(True)
    assert _entries(_private_cache) == before
