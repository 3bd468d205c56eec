"""The seeded generator (``python -m prefeval.synthetic``): its run count and run names,
against the committed ``sample_data/`` it made."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from prefeval.io.source import run_name
from prefeval.synthetic import generate, run_names

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data"
SEED = 20221  # the Makefile's sample-data seed


def _sample_run(k: int) -> bytes:
    """The committed bytes of the sample's run k (1-based), decompressed."""
    return _run(SAMPLE, f"sys{k:02d}")


def _run(folder: Path, name: str) -> bytes:
    """The bytes of run ``name`` in ``folder``, decompressed (the sample gzips its sixth)."""
    import gzip

    path = folder / "runs" / f"input.{name}"
    if path.exists():
        return path.read_bytes()
    return gzip.decompress(path.with_name(path.name + ".gz").read_bytes())


def test_the_default_count_writes_the_committed_sample(tmp_path):
    info = generate(tmp_path, "sample", seed=SEED)
    assert info["runs"] == 6 and info["run_names"] == [f"sys0{k}" for k in range(1, 7)]
    for name in ("qrels.txt", "qrels.subtopics.txt", "runs/input.sys01", "runs/input.sys06.gz"):
        assert (tmp_path / name).read_bytes() == (SAMPLE / name).read_bytes(), name
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == sorted(
        p.name for p in (SAMPLE / "runs").iterdir()
    )


def test_fewer_runs_are_the_first_ones(tmp_path):
    generate(tmp_path, "sample", seed=SEED, runs=3)
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [
        "input.sys01", "input.sys02", "input.sys03"
    ]  # fmt: skip
    for k in (1, 2, 3):
        assert _run(tmp_path, f"sys0{k}") == _sample_run(k)
    assert (tmp_path / "qrels.txt").read_bytes() == (SAMPLE / "qrels.txt").read_bytes()


def test_more_runs_keep_the_first_ones_whatever_the_count(tmp_path):
    """Runs 1-6 are the sample's, runs 7-8 the same with 8 runs or 10; past 99 runs the
    names widen (sys001), the lines otherwise the same."""
    eight, ten, many = tmp_path / "8", tmp_path / "10", tmp_path / "120"
    generate(eight, "sample", seed=SEED, runs=8)
    generate(ten, "sample", seed=SEED, runs=10)
    info = generate(many, "sample", seed=SEED, runs=120)
    for k in range(1, 7):
        assert _run(ten, f"sys{k:02d}") == _sample_run(k)
    for k in (7, 8):
        assert _run(eight, f"sys{k:02d}") == _run(ten, f"sys{k:02d}")
    assert info["run_names"][:2] == ["sys001", "sys002"] and len(info["run_names"]) == 120
    for k in (1, 8):
        assert _run(many, f"sys{k:03d}") == _run(ten, f"sys{k:02d}").replace(
            f" sys{k:02d}\n".encode(), f" sys{k:03d}\n".encode()
        )
    # runs past the shape's are not copies of one another
    assert _run(ten, "sys07") != _run(ten, "sys08")


def test_realistic_names_are_distinct_and_read_back_as_written(tmp_path):
    names = run_names(130, "realistic")
    assert len(set(names)) == 130 and max(map(len, names)) <= 40
    assert names[:3] == ["bm25", "ql", "bm25+rm3"]
    assert names[10] == "bm25_k1=0.9_b=0.4" and names[11] == "ql_k1=0.9_b=0.4"
    assert run_names(12, "realistic") == names[:12]
    info = generate(tmp_path, "sample", seed=SEED, runs=12, names="realistic")
    assert info["run_names"] == names[:12]
    files = sorted((tmp_path / "runs").iterdir())
    assert sorted(run_name(str(p)) for p in files) == sorted(names[:12])
    # the lines of run k are the sys-named run k's, tagged with its name
    assert _run(tmp_path, "bm25") == _sample_run(1).replace(b" sys01\n", b" bm25\n")


def test_a_bad_count_is_one_line(tmp_path):
    with pytest.raises(ValueError, match="runs must be a positive integer, not 0"):
        generate(tmp_path, "sample", runs=0)
    proc = subprocess.run(
        [sys.executable, "-m", "prefeval.synthetic", "sample", str(tmp_path), "--runs", "0"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == (
        "python -m prefeval.synthetic: error: argument --runs: '0' is not a positive integer"
    )
    assert not (tmp_path / "runs").exists()
