"""Shared fixtures: the real TREC Web 2012 data in ../shared, next to the repository."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


@pytest.fixture(scope="session")
def web2012() -> Path:
    """The folder ../shared/data/web2012 (qrels and runs); skipped when absent, a
    failure on CI (where the data must be present)."""
    path = SHARED / "data" / "web2012"
    needed = [
        path / "qrels.adhoc.txt.gz",
        path / "qrels.diversity-ndeval.txt.gz",
        path / "runs",
    ]
    missing = [str(p) for p in needed if not p.exists()]
    if missing:
        reason = f"TREC Web 2012 data not found: {', '.join(missing)}"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return path


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory):
    """Keep the cache of reduced runs inside the test session's temporary folder."""
    import os

    folder = tmp_path_factory.mktemp("prefeval-cache")
    old = os.environ.get("PREFEVAL_CACHE_DIR")
    os.environ["PREFEVAL_CACHE_DIR"] = str(folder)
    yield folder
    if old is None:
        os.environ.pop("PREFEVAL_CACHE_DIR", None)
    else:
        os.environ["PREFEVAL_CACHE_DIR"] = old


@pytest.fixture(autouse=True)
def _notices_anew():
    """Each test sees the API's notices as a new process does: the first of each is
    shown (:func:`prefeval.api.warn` shows a notice once per process)."""
    from prefeval import api

    api._WARNED.clear()


@pytest.fixture
def young_heap():
    """Python's collector sees only what the test makes: what is alive when it starts is
    frozen (``gc.freeze``) until it ends, so that a ``gc.collect()`` that checks what the
    test lets go costs what the test made, not what the worker's earlier tests left."""
    import gc

    gc.freeze()
    yield
    gc.unfreeze()


#: the kinds of tests marked ``slow`` here besides those marked in their files (the
#: sweeps, Dask, the resource limits): ``make test-fast`` leaves them out, ``make test``
#: (CI) runs them.  Each kind repeats, at a larger scale or over more variants, what a
#: fast test checks: (why, a pattern of the test ids)
SLOW_KINDS = [
    ("the TREC Web 2012 comparisons (a fast test checks each on sample data)",
     r"web2012|::test_web_|diversity"),
    ("the sweeps over layouts, orders, partitions, threads and hash seeds",
     r"same_bytes|whatever|hash_seed|jobs_give_the_bytes|merged_from_partitions|any_order"
     r"|run_order"),
    ("the output-device and no-space checks repeated for every command (compare's run fast),"
     " the run files opened once by each command, each command's Parquet output rounded",
     r"test_no_traceback\.py::.*\[(?!compare)"
     r"|opened_once\[(?:metrics|order --no-baselines|tau|explain)\]"
     r"|output_is_the_tsv_table\[3-(?!compare -q)"),
    ("the property sweeps of the one-pass reader (its hand-worked cases run fast)",
     r"test_textpass\.py::test_(same_positions|scores_read|lines_in_any|same_ranking)"),
    ("the CI recipes run through make and a shell", r"test_gate_ci\.py"),
    ("the layouts at 40 and 130 runs, every figure format",
     r"hundred_thirty|forty_runs|\[(?:130|40)[]-]|same_figure_same_bytes"),
    ("a Dask cluster as one of a test's engines (the Dask tests are marked in their files)",
     r"\[dask\]"),
    ("the rest of a sweep whose first cases run fast: batch sizes past the smallest,"
     " thread counts below the most, more moments to interrupt a first call, a wider"
     " terminal, each command's --help in a process of its own (every --help runs fast in"
     " test_docs_cli), the names with $ drawn to PDF as they are to SVG, -M on the"
     " many-run table's layouts other than run by run and shuffled, compare's imports with"
     " the cache on and the one-pass reader or off and Arrow's (each reader and each cache"
     " state run fast)",
     r"batch_by_batch\[.*-(?:1000|1048576)-|one_thread_reads\[.*-(?:1000-\d|64-2)\]"
     r"|batch_by_batch\[(?!run by run|rows shuffled).*-13-7\]"
     r"|does_not_need\[(?:cache on-one-pass|cache off-Arrow)"
     r"|interrupted_first_call_leaves_every_module_whole\[0\.[1246]\]"
     r"|ctrl_c_in_the_first_second_prints_no_traceback\[0\.(?:05|4)\]"
     r"|bar_stays_readable_on_a_narrow_terminal\[(?!80)"
     r"|test_help_never_fails\[(?!None|compare)|drawn_literally\[pdf\]"),
    ("the end-to-end renders by real tools (each where installed): the HTML report in"
     " headless Chromium, the LaTeX report through pdflatex (the LaTeX text is checked fast)",
     r"test_html_in_a_real_browser|test_latex_compiles"),
    ("memory bounds, processes sharing the cache, the kernel's compile cache",
     r"memory_is_bounded|concurrent_processes|compiles_once"),
]  # fmt: skip


def pytest_collection_modifyitems(config, items):
    """Mark the tests of :data:`SLOW_KINDS` slow."""
    import re

    slow = re.compile("|".join(f"(?:{pattern})" for _, pattern in SLOW_KINDS))
    for item in items:
        if slow.search(item.nodeid):
            item.add_marker(pytest.mark.slow)
