"""Runs resolved once (issue 23, step 4): every run argument becomes one :class:`Run` of a
:class:`RunSet` (name, kind, stored bytes) at the edge, each file opened once per command,
parsed once where the baselines may keep the engine's columns."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import prefeval
from prefeval.analysis import evidence
from prefeval.core.errors import InputError
from prefeval.io import runs as runs_module
from prefeval.io.runs import RunSet, read_run, resolve_runs

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "sample_data"
QRELS = SAMPLE / "qrels.txt"
RUNS = sorted((SAMPLE / "runs").glob("input.*"))

PROBE = r"""
import json, os, sys
targets = [os.path.realpath(p) for p in json.loads(sys.argv[1])]
count = {p: 0 for p in targets}
def hook(event, args):
    if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        try:
            path = os.path.realpath(os.fsdecode(args[0]))
        except (OSError, ValueError):
            return
        if path in count:
            count[path] += 1
sys.addaudithook(hook)
from prefeval.cli import cli
try:
    cli.main(sys.argv[2:], standalone_mode=False)
except SystemExit:
    pass
sys.stdout.flush()
print("OPENS", json.dumps(list(count.values())), file=sys.stderr)
"""


@pytest.mark.parametrize(
    "args",
    [
        ["compare", "-q"],
        ["metrics"],
        ["order"],
        ["order", "--no-baselines"],
        ["tau"],
        ["explain"],
    ],
    ids=lambda a: " ".join(a),
)
def test_each_run_file_opened_once(args):
    """A command opens each run file once (an audit hook counts the ``open`` events of
    its path), whatever reads it: naming, format, cache key, engine, baselines."""
    runs = [str(p) for p in RUNS[: 2 if args[0] == "explain" else 3]]
    env = dict(os.environ, PREFEVAL_CACHE="0", PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(runs), *args, str(QRELS), *runs],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [x for x in done.stderr.splitlines() if x.startswith("OPENS ")]
    assert lines, done.stderr[-2000:]
    assert json.loads(lines[-1].split(maxsplit=1)[1]) == [1] * len(runs), done.stderr[-2000:]


@pytest.mark.parametrize("whole", [0, 32 << 20])
def test_kinds_and_names(tmp_path, monkeypatch, whole):
    """One function names runs and tells their kind, from the bytes (not the file name),
    files read whole or memory-mapped (``READ_WHOLE``)."""
    monkeypatch.setattr(runs_module, "READ_WHOLE", whole)
    text = tmp_path / "input.a"
    text.write_bytes(RUNS[0].read_bytes())
    packed = tmp_path / "b.gz"
    packed.write_bytes(gzip.compress(RUNS[1].read_bytes()))
    frame = read_run(RUNS[2])
    one = tmp_path / "c.parquet"
    columns = {"query_id": frame.query_id, "doc_id": frame.doc_id, "score": frame.score}
    pq.write_table(pa.table(columns), one)
    table = tmp_path / "many.txt"  # Parquet whatever its name
    many = pa.table({"run": ["y"] * len(frame) + ["x"] * len(frame)} | {
        k: pa.concat_arrays([pa.array(v), pa.array(v)]) for k, v in columns.items()
    })  # fmt: skip
    pq.write_table(many, table)
    data = pd.DataFrame({"query_id": ["1"], "doc_id": ["d"], "score": [1.0]})
    got = resolve_runs([str(text), packed, one, table, data, frame])
    assert isinstance(got, RunSet)
    assert list(got) == ["a", "b", "c", "x", "y", "run5", frame.name]
    assert [r.kind for r in got.values()] == [
        "text", "gzip", "parquet", "table", "table", "frame", "columns",
    ]  # fmt: skip
    assert got["x"].data is got["y"].data  # one table, opened once for its runs
    assert isinstance(got["a"].data, bytes) == bool(whole)
    assert resolve_runs(got) is got
    assert resolve_runs({"k": got["a"]})["k"].data is got["a"].data  # no new reading
    assert list(got["b"].read().doc_id) == list(read_run(RUNS[1]).doc_id)
    with pytest.raises(InputError, match="two runs are named 'a'"):
        resolve_runs([text, text])


def test_unreadable_run_is_reported_when_read(tmp_path):
    """A run file that cannot be opened is an error when it is read (after the judgments
    are read and checked), with the reader's message."""
    got = resolve_runs([tmp_path / "missing"])
    with pytest.raises(InputError, match="missing: cannot read file"):
        got["missing"].read()


@pytest.mark.parametrize("keep", [True, False])
def test_baselines_read_the_engines_columns(keep, monkeypatch):
    """With ``order`` the baselines take the columns the engine parsed (each run parsed
    once) where they fit in :data:`KEEP_COLUMNS`, else parse each run again from the
    bytes of the run set (never reopened); the table is the same either way."""
    parsed = []
    parse = runs_module.parse_any_run
    monkeypatch.setattr(
        runs_module, "parse_any_run", lambda raw, path, *a, **k: parsed.append(path) or parse(
            raw, path, *a, **k
        )
    )  # fmt: skip
    monkeypatch.setattr(evidence, "KEEP_COLUMNS", (1 << 40) if keep else 0)
    runs = [str(p) for p in RUNS[:3]]
    # cache=False: every run parsed by the engine
    table = prefeval.order(QRELS, runs, notify=None, cache=False)
    assert sorted(parsed) == sorted(runs * (1 if keep else 2))
    monkeypatch.setattr(evidence, "KEEP_COLUMNS", 0 if keep else (1 << 40))
    assert table.equals(prefeval.order(QRELS, runs, notify=None, cache=False))
