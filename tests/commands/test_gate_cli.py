"""prefeval gate as a command and as prefeval.gate(check=True): its exit statuses, its
stderr lines, its output in every format and view, and the same bytes whatever the
cores, the cache, the order of the runs, the engine or the input (QRELS RUN... or
--prefs).  The statistics of the gate itself are tested in tests/analysis."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import click
import numpy as np
import pandas as pd
import pytest
from helpers import invoke, on_terminal, read_tsv

import prefeval

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
QRELS = SAMPLE / "qrels.txt"
RUN = {f"sys0{i}": SAMPLE / "runs" / f"input.sys0{i}" for i in range(1, 6)}
RUN["sys06"] = SAMPLE / "runs" / "input.sys06.gz"
ALL = list(RUN.values())
#: the sample data has 20 queries: the default minimum (25) would leave every verdict
#: inconclusive
ENOUGH = ["--min-queries", "20"]


def _relevant() -> dict[str, set[str]]:
    relevant: dict[str, set[str]] = {}
    for line in QRELS.read_text().splitlines():
        q, _, d, grade = line.split()
        if float(grade) > 0:
            relevant.setdefault(q, set()).add(d)
    return relevant


def pushed_down(path: Path, folder: Path) -> tuple[Path, int, int]:
    """A copy of the run at ``path`` with, per query, its retrieved relevant documents
    moved below all its non-relevant ones (their own order kept), and how many evaluated
    queries this changes and leaves as they were.  Each relevant document then sits at
    least as low as before, so every recall level is reached no earlier: the copy loses
    (RPP < 0) exactly where some relevant document was above a non-relevant one, and
    ties elsewhere."""
    relevant = _relevant()
    by_query: dict[str, list[tuple[float, str]]] = {}
    for line in path.read_text().splitlines():
        q, _, d, _, score = line.split()[:5]
        by_query.setdefault(q, []).append((float(score), d))
    lines, changed = [], 0
    for q, docs in by_query.items():
        ranking = [d for _, d in sorted(docs, key=lambda x: (-x[0], _desc(x[1])))]
        is_relevant = [d in relevant.get(q, ()) for d in ranking]
        moved = [d for d, r in zip(ranking, is_relevant) if not r]
        moved += [d for d, r in zip(ranking, is_relevant) if r]
        changed += moved != ranking
        lines += [
            f"{q} Q0 {d} {k + 1} {float(len(moved) - k)!r} pushed" for k, d in enumerate(moved)
        ]
    out = folder / "pushed.run"
    out.write_text("\n".join(lines) + "\n")
    return out, changed, len(relevant) - changed


def _desc(docno: str):
    """A sort key ordering docnos descending (trec_eval's tie order)."""
    return [-ord(c) for c in docno] + [1]


def gate(*args):
    return invoke("gate", *args)


def test_identical_copies_pass(tmp_path):
    """Copies of the reference (named by NAME=PATH) tie on every query: no difference,
    exit 0, nothing on stderr."""
    result = gate("--against", "sys03", *ENOUGH, QRELS, RUN["sys03"],
                  f"copy1={RUN['sys03']}", f"copy2={RUN['sys03']}")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    table = read_tsv(result.stdout)
    assert list(table["candidate"]) == ["copy1", "copy2"]
    assert set(table["reference"]) == {"sys03"}
    assert list(table["queries"]) == ["20", "20"]
    assert [float(x) for x in table["mean"]] == [0.0, 0.0]
    assert list(table["ties"]) == ["20", "20"] and set(table["wins"]) == {"0"}
    assert [float(x) for x in table["p_value"]] == [1.0, 1.0]
    assert list(table["verdict"]) == ["no difference"] * 2
    assert result.stderr == ""


def test_a_copy_with_its_relevant_documents_pushed_down_regresses(tmp_path):
    """The pushed-down copy loses every query it changes and ties the others: a
    regression, exit 1, named on stderr; an identical copy beside it is no difference."""
    pushed, changed, same = pushed_down(RUN["sys03"], tmp_path)
    assert changed >= 15  # enough losses for the test to be significant
    result = gate("--against", "sys03", *ENOUGH, QRELS, RUN["sys03"], pushed,
                  f"copy={RUN['sys03']}")  # fmt: skip
    assert result.exit_code == 1, result.stderr
    table = read_tsv(result.stdout).set_index("candidate")
    counts = table.loc["pushed", ["wins", "ties", "losses"]].tolist()
    assert counts == ["0", str(same), str(changed)]
    assert float(table.loc["pushed", "mean"]) < 0
    assert table.loc["pushed", "verdict"] == "regression"
    assert table.loc["copy", "verdict"] == "no difference"
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("prefeval: regression: rpp: pushed vs sys03:")


def test_the_regression_lines_name_measure_runs_mean_interval_and_adjusted_p():
    """One stderr line per regression, its numbers computed here from compare -q's
    per-query preferences: the mean, the two-sided 95% t interval, and the one-sided
    t-test's p adjusted by Holm over the five candidates."""
    from scipy import stats

    result = gate("--against", "sys03", *ENOUGH, QRELS, *ALL)
    assert result.exit_code == 1
    prefs = read_tsv(invoke("compare", "-q", "-n", "-m", "rpp", "--against", "sys03", QRELS,
                            *ALL).stdout)  # fmt: skip
    rows = {}
    for run, part in prefs.groupby("run_a"):
        d = np.array([float(x) for x in part["value"]])
        n, mean, sd = len(d), d.mean(), d.std(ddof=1)
        half = stats.t.ppf(0.975, n - 1) * sd / np.sqrt(n)
        rows[run] = (mean, mean - half, mean + half, stats.t.cdf(mean / (sd / np.sqrt(n)), n - 1))
    ranked = sorted(rows, key=lambda r: rows[r][3])
    adjusted, running = {}, 0.0
    for k, run in enumerate(ranked):
        running = max(running, min(1.0, (len(ranked) - k) * rows[run][3]))
        adjusted[run] = running
    table = read_tsv(result.stdout).set_index("candidate")
    expected = []
    for run in sorted(rows):
        mean, low, high, _ = rows[run]
        assert float(table.loc[run, "mean"]) == pytest.approx(mean, rel=1e-12)
        assert float(table.loc[run, "ci_low"]) == pytest.approx(low, rel=1e-9)
        assert float(table.loc[run, "p_adjusted"]) == pytest.approx(adjusted[run], rel=1e-6)
        if adjusted[run] < 0.05:
            p = adjusted[run]
            shown = f"{p:.3e}" if p < 1e-4 else f"{p:.4f}"
            expected.append(
                f"prefeval: regression: rpp: {run} vs sys03: mean {mean:.4f} "
                f"[{low:.4f}, {high:.4f}], p_adjusted {shown}"
            )
    assert [run for run in sorted(rows) if adjusted[run] < 0.05] == ["sys01", "sys02", "sys05"]
    assert [x for x in result.stderr.splitlines() if "regression" in x] == expected


BAD = {
    "no --against": [],
    "--against naming no run": ["--against", "sys09"],
    "two --against": ["--against", "sys03", "--against", "sys01"],
    "--margin with --test sign": ["--against", "sys03", "--test", "sign", "--margin", "0.1"],
    "a negative margin": ["--against", "sys03", "--margin", "-0.1"],
    "--min-queries 0": ["--against", "sys03", "--min-queries", "0"],
    "--test hsd": ["--against", "sys03", "--test", "hsd"],
}


@pytest.mark.parametrize("args", BAD.values(), ids=BAD)
def test_bad_usage_exits_2_with_one_line_and_writes_nothing(args, tmp_path):
    out = tmp_path / "gate.tsv"
    out.write_text("earlier\n")
    result = gate(*args, "-o", out, QRELS, RUN["sys01"], RUN["sys03"])
    assert result.exit_code == 2, result.output
    errors = [x for x in result.stderr.splitlines() if x.startswith("Error:")]
    assert len(errors) == 1 and "Traceback" not in result.stderr
    assert result.stdout == ""
    assert out.read_text() == "earlier\n"  # neither replaced nor truncated


def test_every_option_of_the_help_says_what_it_does():
    """Each option of gate --help has a line of help, not only its default."""
    from prefeval.cli.gate import gate as command

    silent = [p.opts[0] for p in command.params if isinstance(p, click.Option) and not p.help]
    assert silent == []
    shown = " ".join(invoke("gate", "--help").stdout.split())
    assert "--alpha FLOAT Significance level of the corrected one-sided tests" in shown


def test_the_reference_alone_is_a_usage_error():
    result = gate("--against", "sys03", QRELS, RUN["sys03"])
    assert result.exit_code == 2
    assert "Error: gate: give at least one candidate RUN besides the reference sys03" in (
        result.stderr
    )


def test_baselines_asked_for_without_their_values_are_a_usage_error(tmp_path):
    """-B AP with --prefs alone: the preferences table holds no AP; the gate would pass
    without testing AP, so it is refused (exit 2, nothing written); with --metrics it
    gates AP."""
    prefs, metrics = tmp_path / "prefs.tsv", tmp_path / "metrics.tsv"
    assert invoke("compare", "-q", "-o", prefs, QRELS, *ALL).exit_code == 0
    assert invoke("metrics", "-q", "-m", "AP", "-o", metrics, QRELS, *ALL).exit_code == 0
    out = tmp_path / "gate.tsv"
    result = gate("--against", "sys03", *ENOUGH, "-B", "AP", "--prefs", prefs, "-o", out)
    assert result.exit_code == 2, result.output
    assert "'AP': the gate has no values of these baselines to test" in result.stderr
    assert "give the qrels and the runs, or --metrics" in result.stderr
    assert not out.exists()
    tested = gate("--against", "sys03", *ENOUGH, "-B", "AP", "--prefs", prefs,
                  "--metrics", metrics)  # fmt: skip
    assert tested.exit_code == 1
    assert "AP" in set(read_tsv(tested.stdout)["measure"])


def test_strict_fails_an_inconclusive_gate_with_3():
    """20 queries, fewer than the default minimum of 25: every verdict inconclusive (not
    tested: no p_adjusted), exit 0, or 3 with --strict; a regression still exits 1."""
    args = ["--against", "sys03", QRELS, RUN["sys03"], RUN["sys06"]]
    lenient, strict = gate(*args), gate("--strict", *args)
    assert (lenient.exit_code, strict.exit_code) == (0, 3)
    assert lenient.stdout == strict.stdout
    table = read_tsv(strict.stdout)
    assert list(table["verdict"]) == ["inconclusive"]
    assert list(table["p_adjusted"].fillna("")) == [""]
    assert "1 of 1 verdicts inconclusive: 20 evaluated queries, fewer than the minimum of 25" in (
        strict.stderr
    )
    assert gate("--strict", *ENOUGH, *args).exit_code == 0
    regressed = gate("--strict", "--against", "sys03", QRELS, RUN["sys03"], RUN["sys01"],
                     "--min-queries", "20")  # fmt: skip
    assert regressed.exit_code == 1


def test_the_same_bytes_whatever_cores_cache_and_order():
    args = ["--against", "sys03", *ENOUGH, "-B", "AP", QRELS]
    first = gate("-j", "1", *args, *ALL)
    assert first.exit_code == 1
    for other in (
        gate("-j", "2", *args, *ALL),
        gate("--no-cache", *args, *ALL),
        gate(*args, *ALL),  # from the cache the runs above filled
        gate(*args, *reversed(ALL)),
        gate(*args, RUN["sys05"], RUN["sys03"], RUN["sys01"], RUN["sys06"], RUN["sys02"],
             RUN["sys04"]),
    ):  # fmt: skip
        assert other.exit_code == 1
        assert other.stdout == first.stdout
        assert other.stderr == first.stderr


def test_a_prefs_table_gives_the_same_table(tmp_path):
    """--prefs FILE (a compare -q table, tsv or Parquet) and QRELS RUN... give the same
    bytes: the table holds every preference at full precision."""
    for fmt in ("tsv", "parquet"):
        prefs = tmp_path / f"prefs.{fmt}"
        written = invoke("compare", "-q", "-f", fmt, "-o", prefs, QRELS, *ALL)
        assert written.exit_code == 0, written.stderr
        # (measures in the order the table holds them: compare's)
        for measure in (["-m", "rpp"], ["-m", "dcgrpp,lexirecall"]):
            args = ["--against", "sys03", *ENOUGH, *measure, "--no-baselines"]
            computed = gate(*args, QRELS, *ALL)
            read = gate(*args, "--prefs", prefs)
            assert read.exit_code == computed.exit_code == 1
            assert read.stdout == computed.stdout


def test_every_format_holds_the_same_table(tmp_path):
    args = ["--against", "sys03", *ENOUGH, QRELS, *ALL]
    tsv = gate(*args)
    expected = pd.read_csv(io.StringIO(tsv.stdout), sep="\t")
    csv = gate("-f", "csv", *args)
    assert csv.exit_code == 1
    pd.testing.assert_frame_equal(pd.read_csv(io.StringIO(csv.stdout)), expected)
    jsonl = gate("-f", "jsonl", *args)
    assert jsonl.exit_code == 1
    rows = [json.loads(line) for line in jsonl.stdout.splitlines()]
    assert [list(row) for row in rows] == [list(expected.columns)] * len(expected)
    pd.testing.assert_frame_equal(pd.DataFrame(rows), expected, check_dtype=False)
    out = tmp_path / "gate.parquet"
    parquet = gate("-f", "parquet", "-o", out, *args)
    assert parquet.exit_code == 1 and parquet.stdout == ""
    pd.testing.assert_frame_equal(pd.read_parquet(out), expected, check_dtype=False)
    rounded = gate("-p", "3", *args)
    assert read_tsv(rounded.stdout)["mean"].tolist()[0] == f"{expected['mean'][0]:.3f}"


def test_output_is_written_atomically_also_on_a_regression(tmp_path):
    """-o FILE: the table is in FILE whatever the verdict (exit 1 here), stdout stays
    empty, and no temporary file is left beside it."""
    out = tmp_path / "gate.tsv"
    out.write_text("earlier\n")
    result = gate("-o", out, "--against", "sys03", *ENOUGH, QRELS, *ALL)
    assert result.exit_code == 1 and result.stdout == ""
    assert out.read_text() == gate("--against", "sys03", *ENOUGH, QRELS, *ALL).stdout
    assert sorted(os.listdir(tmp_path)) == ["gate.tsv"]
    assert "regression: rpp: sys01 vs sys03" in result.stderr


def test_a_terminal_shows_the_aligned_table_and_the_regressions():
    code, seen, _ = on_terminal(
        "gate", "--against", "sys03", *ENOUGH, QRELS, RUN["sys01"], RUN["sys03"], RUN["sys06"],
        delay=60,
    )  # fmt: skip
    assert code == 1
    lines = seen.decode().replace("\r\n", "\n").splitlines()
    assert lines[0].split() == [
        "measure", "candidate", "reference", "queries", "mean", "ci_low", "ci_high", "wins",
        "ties", "losses", "effect", "test", "p_value", "p_adjusted", "verdict",
    ]  # fmt: skip
    assert lines[1].split()[:11] == [
        "rpp", "sys01", "sys03", "20", "-0.7742", "-0.8859", "-0.6625", "0", "0", "20", "-3.2446",
    ]  # fmt: skip
    assert lines[1].split()[-1] == "regression"
    assert lines[2].split()[:5] == ["rpp", "sys06", "sys03", "20", "0.2493"]
    assert lines[2].endswith("no difference")
    assert lines[3].startswith("prefeval: regression: rpp: sys01 vs sys03: mean -0.7742")


def test_the_dask_engine_gives_the_same_bytes(monkeypatch):
    pytest.importorskip("dask", reason="the dask extra is not installed")
    distributed = pytest.importorskip("distributed", reason="the dask extra is not installed")
    from prefeval.engine import dask as engine

    monkeypatch.setattr(engine.cluster, "CONNECT_SECONDS", 300)
    monkeypatch.setattr(engine.cluster, "WORKER_SECONDS", 300)
    args = ["--against", "sys03", *ENOUGH, QRELS, *ALL]
    local = gate(*args)
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0"
    ) as cluster:
        remote = gate("--engine", "dask", "--scheduler", cluster.scheduler_address, *args)
    assert remote.exit_code == local.exit_code == 1, remote.stderr
    assert remote.stdout == local.stdout
    assert remote.stderr == local.stderr


def test_check_raises_regression_an_assertion_error_listing_them():
    runs = [str(p) for p in ALL]
    table = prefeval.gate(QRELS, runs, against="sys03", min_queries=20, notify=None)
    with pytest.raises(prefeval.Regression) as raised:
        prefeval.gate(QRELS, runs, against="sys03", min_queries=20, notify=None, check=True)
    assert isinstance(raised.value, AssertionError)
    lines = str(raised.value).splitlines()
    assert lines[0] == "3 regressions:"
    regressed = table[table["verdict"] == "regression"]
    assert [x.split(":")[2].strip() for x in lines[1:]] == [
        f"{c} vs sys03" for c in regressed["candidate"]
    ]
    pd.testing.assert_frame_equal(raised.value.table, table)
    one = {"sys03": str(RUN["sys03"]), "sys01": str(RUN["sys01"])}
    with pytest.raises(AssertionError, match=r"^1 regression:\nregression: rpp: sys01 vs sys03"):
        prefeval.gate(QRELS, one, against="sys03", min_queries=20, notify=None, check=True)


def test_check_returns_the_table_when_nothing_regressed():
    runs = {"sys03": str(RUN["sys03"]), "copy": str(RUN["sys03"]), "sys06": str(RUN["sys06"])}
    table = prefeval.gate(QRELS, runs, against="sys03", min_queries=20, notify=None, check=True)
    assert list(table["verdict"]) == ["no difference", "no difference"]
    # inconclusive rows do not raise
    table = prefeval.gate(QRELS, runs, against="sys03", notify=None, check=True)
    assert list(table["verdict"]) == ["inconclusive", "inconclusive"]
