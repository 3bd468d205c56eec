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
