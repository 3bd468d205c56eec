"""bench/run.py rewrites the generated part of RESULTS.md and keeps the hand-kept part."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _report_module(monkeypatch):
    # bench/report.py imports its siblings (commands, datasets, harness) by bare name:
    # they leave sys.modules with the test, so no later import meets them
    for name in ("commands", "datasets", "harness"):
        if name not in sys.modules:
            monkeypatch.setitem(sys.modules, name, None)
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location("bench_report", ROOT / "bench" / "report.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_report", module)
    spec.loader.exec_module(module)
    return module


def test_the_hand_kept_part_is_everything_from_the_marker(tmp_path, monkeypatch):
    report = _report_module(monkeypatch)
    page = tmp_path / "RESULTS.md"
    kept = f"{report.HAND_KEPT} -->\n\n## Targets today\n| compare | 1,385 MiB |\n"
    page.write_text("# generated part\nstale figure\n\n" + kept)
    assert report._kept_by_hand(page) == "\n" + kept
    # the committed page carries the marker and its targets below it
    committed = report._kept_by_hand(ROOT / "bench" / "RESULTS.md")
    assert committed.startswith("\n" + report.HAND_KEPT)
    assert "## Targets today" in committed


def test_a_page_without_the_marker_keeps_nothing(tmp_path, monkeypatch):
    report = _report_module(monkeypatch)
    page = tmp_path / "RESULTS.md"
    assert report._kept_by_hand(page) == ""
    page.write_text("# generated only\n")
    assert report._kept_by_hand(page) == ""
