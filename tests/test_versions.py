"""The minimum versions `make test-min` tests are the ones pyproject.toml declares."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_pins_equal_the_declared_minimums():
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {}
    for spec in project["dependencies"] + project["optional-dependencies"]["test"]:
        name, low = re.fullmatch(
            r"([A-Za-z0-9_.-]+)(?:\[[a-z,]+\])?\s*>=\s*([0-9.]+)", spec
        ).groups()
        declared[name.lower().replace("_", "-")] = low
    pinned = {}
    for line in (ROOT / "tests" / "minimum-versions.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pinned[name.strip().lower()] = version.strip()

    def padded(version: str) -> tuple:  # 2.0 == 2.0.0
        parts = [int(p) for p in version.split(".")]
        return tuple(parts + [0] * (3 - len(parts)))

    assert set(pinned) == set(declared)
    assert {k: padded(v) for k, v in pinned.items()} == {k: padded(v) for k, v in declared.items()}
