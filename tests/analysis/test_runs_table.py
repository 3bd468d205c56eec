"""The runs x measures table's letters and marks on hand-made evidence whose significant
pairs are known from the sign test's exact binomial p-values."""

from __future__ import annotations

import numpy as np
import pytest

from prefeval.analysis.orderings import Evidence
from prefeval.analysis.significance import pair_summary, pair_tests
from prefeval.analysis.table import joined, letter, runs_table

QUERIES = [str(q) for q in range(10)]


def evidence(columns: dict[str, list[float]]) -> Evidence:
    runs = list(columns)
    values = np.array([columns[r] for r in runs], dtype=np.float64).T  # queries x runs
    return Evidence(runs, QUERIES, metrics={"AP": values}, higher_is_better={"AP": True})


def table(ev, test="sign", correction="bonferroni", **kw):
    tested = pair_tests(ev, [test], correction)
    return runs_table(ev, tested, pair_summary(ev), **kw)


@pytest.mark.parametrize(
    "index, text",
    [(0, "a"), (25, "z"), (26, "aa"), (27, "ab"), (51, "az"), (52, "ba"), (701, "zz"),
     (702, "aaa")],
)  # fmt: skip
def test_letters_count_as_spreadsheet_columns(index, text):
    assert letter(index) == text


def test_letters_run_together_up_to_26_runs_and_take_commas_beyond():
    assert joined(["a", "c"], 26) == "ac"
    assert joined(["a", "aa"], 27) == "a,aa"


def test_letters_mark_the_runs_a_run_is_significantly_better_than():
    # sign test on 10 queries: A beats C on all 10, p = 2 / 2**10 = 0.00195 (x3 by
    # Bonferroni: 0.0059 < 0.05); A against B 5 wins and 5 losses, p = 1; B against C 5
    # wins and 5 ties, p = 2 / 2**5 = 0.0625: not significant
    ev = evidence({"A": [1.0] * 10, "B": [2.2, 0.0] * 5, "C": [0.0] * 10})
    frame = table(ev)
    # rows by the mean of AP: B (1.1), A (1.0), C (0.0), lettered a, b, c
    assert list(frame["run"]) == ["B", "A", "C"]
    assert list(frame["letter"]) == ["a", "b", "c"]
    assert dict(zip(frame["run"], frame["marks"])) == {"B": "", "A": "c", "C": ""}
    assert list(frame["best"]) == [True, False, False]
    assert frame["value"].tolist() == [1.1, 1.0, 0.0]
    assert set(frame["test"]) == {"sign"} and set(frame["correction"]) == {"bonferroni"}


def test_a_significant_pair_marks_the_better_run_only_whatever_the_row_order():
    ev = evidence({"C": [0.0] * 10, "A": [1.0] * 10, "B": [2.2, 0.0] * 5})
    frame = table(ev, order_by="given")
    assert list(frame["run"]) == ["C", "A", "B"]
    assert dict(zip(frame["run"], frame["marks"])) == {"C": "", "A": "a", "B": ""}


def test_lower_is_better_reverses_the_marks():
    ev = evidence({"A": [1.0] * 10, "C": [0.0] * 10})
    ev.higher_is_better["AP"] = False
    frame = table(ev)
    assert list(frame["run"]) == ["C", "A"]  # the lower mean first
    assert dict(zip(frame["run"], frame["marks"])) == {"C": "b", "A": ""}


def test_past_26_runs_the_letters_go_on_and_are_separated():
    # run i scores i on every query: every pair differs on all 10 queries (p = 0.00195,
    # uncorrected), so each run is significantly better than every run below it
    ev = evidence({f"r{i:02d}": [float(i)] * 10 for i in range(28)})
    frame = table(ev, correction="none")
    assert list(frame["run"]) == [f"r{i:02d}" for i in range(27, -1, -1)]
    letters = [letter(i) for i in range(28)]
    assert list(frame["letter"]) == letters
    assert frame["marks"].iloc[0] == ",".join(letters[1:])  # b,c,...,z,aa,ab
    assert frame["marks"].iloc[26] == "ab"
    assert frame["marks"].iloc[27] == ""


def test_against_a_reference_marks_plus_and_minus():
    ev = evidence({"A": [1.0] * 10, "B": [2.2, 0.0] * 5, "C": [0.0] * 10, "D": [2.0] * 10})
    versus = ev.against("A")
    tested = pair_tests(versus, ["sign"], "none")
    frame = runs_table(ev, tested, pair_summary(versus), reference="A")
    marks = dict(zip(frame["run"], frame["marks"]))
    # D beats A on every query, C loses on every one; B: 5 wins, 5 losses
    assert marks == {"D": "+", "A": "", "B": "", "C": "-"}
    p = dict(zip(frame["run"], frame["p_value"]))
    assert p["D"] == p["C"] == 2 / 2**10 and p["B"] == 1.0 and np.isnan(p["A"])
    assert set(frame["reference"]) == {"A"}


def test_past_26_runs_the_printed_letters_are_ranges_of_rows():
    from prefeval.present.report import runs_table_block

    ev = evidence({f"r{i:02d}": [float(i)] * 10 for i in range(28)})
    block = runs_table_block(table(ev, correction="none"))
    assert block.header == ["run", "#", "AP"]
    assert [row[1].text for row in block.rows[:2]] == ["a", "b"]
    assert block.rows[0][2].marks == "b-ab"  # every row below the first
    assert block.rows[25][2].marks == "aa,ab"  # two letters stay two
    assert block.rows[0][2].bold and not block.rows[1][2].bold
    assert "b-e stands for the runs from b to e" in block.caption
    few = runs_table_block(table(evidence({"A": [1.0] * 10, "C": [0.0] * 10})))
    assert few.rows[0][2].marks == "b" and "stands for" not in few.caption


def test_without_letters_the_table_keeps_values_and_bold_and_says_why():
    from prefeval.present.report import runs_table_block

    ev = evidence({f"r{i:02d}": [float(i)] * 10 for i in range(28)})
    block = runs_table_block(table(ev, correction="none"), letters=False)
    assert block.header == ["run", "AP"]
    assert [row[0].text for row in block.rows[:2]] == ["r27", "r26"]
    assert [row[1].text for row in block.rows[:2]] == ["27.000", "26.000"]
    assert all(row[1].marks == "" for row in block.rows)
    assert block.rows[0][1].bold and not block.rows[1][1].bold
    assert "With 28 runs the letters" in block.caption and "(#)" not in block.caption


@pytest.mark.parametrize("n_runs, letters", [(26, True), (27, False)])
def test_the_report_lists_letters_up_to_26_runs(tmp_path, n_runs, letters):
    from helpers import write_qrels, write_run

    import prefeval

    qrels = write_qrels(tmp_path / "q.txt", [("1", 0, f"d{i}", 1) for i in range(4)])
    runs = [
        write_run(tmp_path / f"r{k:02d}.txt", [("1", f"d{(i + k) % 4}", 4 - i) for i in range(4)])
        for k in range(n_runs)
    ]
    shown = prefeval.report(qrels, runs, measures="rpp", baselines=[], sections="table",
                            trials=20, notify=None)  # fmt: skip
    assert ("<th>#</th>" in shown.html) is letters
    assert ("the letters of the runs each run is significantly better than are left out"
            in shown.html) is not letters  # fmt: skip
