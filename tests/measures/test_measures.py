"""The measure registry and its families: a new measure is one variant in its family
module plus one registry entry, and compare (local and the Dask kernel), explain, the
``-m`` help and ``prefeval measures`` take it from there."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import click
import numpy as np
import pandas as pd
import pytest
from helpers import invoke, read_tsv, tsv_to_dict, write_qrels, write_run

import prefeval.measures as registry
from prefeval.cli import cli
from prefeval.engine.dask import compare_partition
from prefeval.io.frames import qrels_from_frame
from prefeval.measures import Measure, lexicographic, measure_help, parse_measure, register, rpp
from prefeval.options import Options
from prefeval.present.explain import COLUMNS, explain, to_text

# today's -m help, word for word
HELP = (
    "Preference measure(s); repeatable, comma lists allowed. Default: every measure the "
    "qrels support (rpp dcgrpp invrpp [strpp stdcgrpp stinvrpp] lexirecall lexiprecision "
    "rrlexiprecision). Case-insensitive; aliases RPP, dcgRPP, invRPP, ST-RPP, LR, sgnLP, rrLP."
)

# By hand.  One query, relevant a (1), b (2), c (1); X ranks a 1, b 3, c 6; Y ranks a 1,
# b 2 and not c.  Binary population (grade > 0, m = 3): f = (1, 3, 6), f' = (1, 2, -),
# sgn(f'_i - f_i) = (0, -1, +1).  Graded: grade >= 1 (that population, p = 3/4) and
# grade >= 2 = {b} (f = 3, f' = 2, sgn -1, p = 1/4).
#
# sqrtrpp, p(i) proportional to 1/sqrt(i): on m = 3, (-1/sqrt 2 + 1/sqrt 3) / (1 + 1/sqrt 2
# + 1/sqrt 3) = -0.0567997...; on {b}, -1; graded (eq. 5) 3/4 x -0.0568 + 1/4 x -1.
SQRT_3 = (-1 / math.sqrt(2) + 1 / math.sqrt(3)) / (1 + 1 / math.sqrt(2) + 1 / math.sqrt(3))
SQRTRPP = 0.75 * SQRT_3 + 0.25 * -1.0  # -0.2925997871055034
# ilexiprecision, sgn at the first differing level i* divided by i*: -1 / 2.
ILEXI = -0.5


def first_over_level(sign_diff, pos_a, pos_b):
    """sgn(f'_i* - f_i*) / i* at the first differing recall level i* (0 when none)."""
    first = lexicographic.first_difference(sign_diff)
    return lexicographic.at(sign_diff, first) / (first + 1.0)


@pytest.fixture
def new_measures(monkeypatch):
    """Two measures added as a user would: a variant in the family module and an entry
    in the registry; undone after the test."""
    monkeypatch.setitem(rpp.WEIGHTINGS, "sqrt", lambda i: 1.0 / np.sqrt(i))
    monkeypatch.setitem(lexicographic.KERNELS, "ilexiprecision", first_over_level)
    monkeypatch.setattr(registry, "MEASURES", dict(registry.MEASURES))
    register(
        Measure(
            "sqrtrpp", "rpp", "sqrt", "RPP with p(i) proportional to 1/sqrt(i)",
            "sqrtRPP", ("rootRPP",), "test", "eq. 4-5",
        )
    )  # fmt: skip
    register(
        Measure(
            "ilexiprecision", "lexi", "ilexiprecision", "sgnLP over the deciding level",
            "iLP", (), "test", "eq. 3",
        )
    )  # fmt: skip


@pytest.fixture
def data(tmp_path):
    qrels = write_qrels(
        tmp_path / "qrels",
        [("1", 0, "a", 1), ("1", 0, "b", 2), ("1", 0, "c", 1), ("1", 0, "n", 0)],
    )
    filler = [f"n{r}" for r in range(10)]

    def ranking(at):
        docs = dict(at)
        return [("1", docs.get(r, filler[r]), float(100 - r)) for r in range(1, 7)]

    x = write_run(tmp_path / "input.X", ranking({1: "a", 3: "b", 6: "c"}))
    y = write_run(tmp_path / "input.Y", ranking({1: "a", 2: "b"}))
    return qrels, x, y


def test_help_is_todays_and_from_the_registry():
    option = next(p for p in cli.commands["compare"].params if p.name == "measures")
    assert option.help == HELP
    assert measure_help() == HELP


def test_registry_parses_names_and_aliases():
    for text, name in [
        ("RPP", "rpp"), ("dcgRPP", "dcgrpp"), ("dgcrpp", "dcgrpp"), ("ST-RPP", "strpp"),
        ("st_dcg_rpp", "stdcgrpp"), ("stdgcRPP", "stdcgrpp"), ("LR", "lexirecall"),
        ("sgnLR", "lexirecall"), ("LexR", "lexirecall"), ("sgnLP", "lexiprecision"),
        ("lp", "lexiprecision"), ("rrLP", "rrlexiprecision"),
    ]:  # fmt: skip
        assert parse_measure(text).name == name
    with pytest.raises(ValueError, match="known measures: rpp, dcgrpp, invrpp, strpp"):
        parse_measure("nope")


def test_register_refuses_a_taken_name_or_unknown_variant(new_measures):
    with pytest.raises(ValueError, match="'RPP' is taken"):
        register(Measure("other", "rpp", "dcg", "x", "RPP"))
    with pytest.raises(ValueError, match="unknown variant 'cube'"):
        register(Measure("cuberpp", "rpp", "cube", "x"))
    with pytest.raises(ValueError, match="unknown family 'ndcg'"):
        register(Measure("ndcgpref", "ndcg", "x", "x"))


def test_new_measures_compare_local(new_measures, data):
    qrels, x, y = data
    result = invoke("compare", "-q", "-m", "sqrtRPP,iLP,rpp,LR,rrLP", qrels, x, y)
    assert result.exit_code == 0, result.stderr
    got = tsv_to_dict(result.stdout)
    assert got["sqrtrpp", "X", "Y", "1"] == pytest.approx(SQRTRPP, abs=1e-15)
    assert got["ilexiprecision", "X", "Y", "1"] == ILEXI
    # the others as before: rpp (0 - 1 + 1 - 1) / (3 + 1); lexirecall +1 (level 3);
    # rrLP 1/3 - 1/2 at level 2
    assert got["rpp", "X", "Y", "1"] == -0.25
    assert got["lexirecall", "X", "Y", "1"] == 1.0
    assert got["rrlexiprecision", "X", "Y", "1"] == 1 / 3 - 1 / 2
    # registered measures are among the defaults
    result = invoke("compare", "-q", qrels, x, y)
    assert {"sqrtrpp", "ilexiprecision"} <= set(read_tsv(result.stdout)["measure"])


def test_new_measures_dask_kernel(new_measures):
    qrels = pd.DataFrame(
        {"query_id": "1", "iteration": "0", "doc_id": ["a", "b", "c"], "relevance": [1, 2, 1]}
    )
    runs = pd.DataFrame(
        {
            "run": ["X", "X", "X", "Y", "Y"],
            "query_id": "1",
            "doc_id": ["a", "b", "c", "a", "b"],
            "score": [9.0, 7.0, 4.0, 9.0, 8.0],
        }
    )
    result = compare_partition(qrels, runs, ["X", "Y"], ["sqrtrpp", "ilexiprecision"])
    (rows,) = result.rows
    values = dict(zip(rows["measure"], rows["value"]))
    # X ranks a, b, c at 1, 2, 3 here, Y a, b at 1, 2: only c differs (level 3, +1 for Y
    # missing it): sqrt RPP (1/sqrt 3) / Z on m = 3 and 0 on {b}; i* = 3
    z = 1 + 1 / math.sqrt(2) + 1 / math.sqrt(3)
    assert values["sqrtrpp"] == pytest.approx(0.75 * (1 / math.sqrt(3)) / z, abs=1e-15)
    assert values["ilexiprecision"] == pytest.approx(1 / 3, abs=1e-16)


def test_new_measures_explain(new_measures, data):
    qrels, x, y = data
    frame = explain(qrels, [x, y], Options(measures=("sqrtrpp", "ilexiprecision")), notify=None)
    assert list(frame.columns) != COLUMNS  # the new weighting's columns
    assert {"p_sqrt", "rpp_sqrt"} <= set(frame.columns)
    values = frame[frame["row"] == "measure"].set_index("measure")["value"]
    assert values["sqrtrpp"] == pytest.approx(SQRTRPP, abs=1e-15)
    assert values["ilexiprecision"] == ILEXI
    pops = frame[frame["row"] == "population"].set_index("population")
    assert pops.loc["grade>0", "rpp_sqrt"] == pytest.approx(SQRT_3, abs=1e-15)
    assert pops.loc["grade>=2", "rpp_sqrt"] == -1.0
    levels = frame[(frame["row"] == "level") & (frame["family"] == "binary")]
    root = [1 / math.sqrt(i) for i in (1, 2, 3)]
    assert list(levels["p_sqrt"]) == pytest.approx([r / sum(root) for r in root], abs=1e-16)
    text = to_text(frame)
    assert "p(i) sqrt" in text and "RPP sqrt" in text
    assert "  sqrtrpp = sum p(lambda) x RPP sqrt = -0.2925997871055034" in text.splitlines()
    assert "  ilexiprecision  -0.5" in text.splitlines()


def test_listing_and_help_come_from_the_registry(new_measures):
    assert "sqrtrpp" in measure_help() and "sqrtRPP" in measure_help()
    result = invoke("measures")
    assert result.exit_code == 0, result.stderr
    table = read_tsv(result.stdout)
    assert list(table.columns) == [
        "measure",
        "family",
        "aliases",
        "paper",
        "equation",
        "description",
        "citation",
        "doi",
    ]
    rows = table.set_index("measure")
    assert list(rows.index) == [*registry.MEASURES]
    assert rows.loc["sqrtrpp", "aliases"] == "sqrtRPP,rootRPP"
    assert rows.loc["ilexiprecision", "family"] == "lexi"
    assert rows.loc["lexirecall", "equation"] == "eq. 11"
    # a paper outside the citations registry: no citation, no DOI, no BibTeX
    assert rows.loc["sqrtrpp", "paper"] == "test"
    assert rows.loc["sqrtrpp", "citation"] == "" and rows.loc["sqrtrpp", "doi"] == ""
    result = invoke("measures", "-m", "rootrpp")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("sqrtrpp: RPP with p(i) proportional to 1/sqrt(i)\n")
    assert "@" not in result.stdout and "paper:" not in result.stdout


def test_measures_command():
    result = invoke("measures", "ST-RPP")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (
        "strpp: subtopic RPP (eq. 6), p(i) = 1/m\n"
        "  family: strpp (subtopic RPP, eq. 6, over subtopics and their background)\n"
        "  aliases: ST-RPP\n"
        "  defined in: rpp-sigir2022, eq. 6\n"
        "  needs subtopic qrels (ndeval format)\n"
        "  paper: Fernando Diaz and Andres Ferraro. 2022. Offline Retrieval Evaluation "
        "Without Evaluation Metrics. In Proceedings of the 45th International ACM SIGIR "
        "Conference on Research and Development in Information Retrieval (SIGIR '22). "
        "doi:10.1145/3477495.3532033\n"
        "\n"
        "@inproceedings{rpp-sigir2022,\n"
        "  author = {Fernando Diaz and Andres Ferraro},\n"
        "  title = {{Offline Retrieval Evaluation Without Evaluation Metrics}},\n"
        "  booktitle = {Proceedings of the 45th International ACM SIGIR Conference on "
        "Research and Development in Information Retrieval (SIGIR '22)},\n"
        "  publisher = {ACM},\n"
        "  year = {2022},\n"
        "  doi = {10.1145/3477495.3532033}\n"
        "}\n"
    )
    result = invoke("measures", "nope")
    assert result.exit_code == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "unknown measure 'nope'" in errors[0]
    result = invoke("measures", "-f", "csv", "rpp")
    assert result.exit_code == 2 and "-f/-o" in result.stderr
    result = invoke("measures", "-f", "jsonl")
    assert result.exit_code == 0
    assert result.stdout.splitlines()[0].startswith('{"measure": "rpp", "family": "rpp"')
    assert isinstance(cli.commands["measures"], click.Command)


def test_measures_output_file(tmp_path):
    listing = invoke("measures").stdout
    out = tmp_path / "measures.tsv"
    result = invoke("measures", "-o", out)
    assert result.exit_code == 0 and result.stdout == ""
    assert out.read_text() == listing
    result = invoke("measures", "-o", tmp_path / "missing" / "out.tsv")
    assert result.exit_code == 2 and result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    if os.path.exists("/dev/full"):
        proc = subprocess.run(
            [sys.executable, "-m", "prefeval", "measures", "-o", "/dev/full"],
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 2 and proc.stdout == ""
        assert proc.stderr == "prefeval: cannot write /dev/full: No space left on device\n"


def test_graded_populations_of_many_queries():
    """A family's populations of a range of queries, built at once, are those of eq. 5
    per query: each distinct grade, its documents with grade >= it, p(lambda) ~ m_lambda."""
    frame = pd.DataFrame(
        {
            "query_id": ["q1"] * 3 + ["q2"] + ["q3"] * 4,
            "doc_id": ["d1", "d2", "d3", "d1", "d1", "d2", "d3", "d4"],
            "relevance": [1, 3, 1, 2, 1, 2, 2, 3],
        }
    )
    relevant = qrels_from_frame(frame).relevant(None)
    assert relevant.query_ids == ["q1", "q2", "q3"]
    pops = rpp.GRADED.populations_of(relevant, range(3), binary=False)
    assert pops.query.tolist() == [0, 0, 1, 2, 2, 2]
    assert pops.key.tolist() == [1.0, 3.0, 2.0, 1.0, 2.0, 3.0]
    assert pops.size.tolist() == [3, 1, 1, 4, 3, 1]
    assert pops.weight.tolist() == [0.75, 0.25, 1.0, 0.5, 0.375, 0.125]
    assert pops.docs.tolist() == [0, 1, 2, 1, 3, 4, 5, 6, 7, 5, 6, 7, 7]
    # a partition: the same populations of its queries
    part = rpp.GRADED.populations_of(relevant, range(1, 3), binary=False)
    assert part.query.tolist() == [1, 2, 2, 2]
    assert part.docs.tolist() == pops.docs[4:].tolist()
    # per query, as explain shows them
    shown = [(label, None if mask is None else mask.tolist(), w) for label, mask, w in
             rpp.GRADED.populations(relevant, 2, binary=False)]  # fmt: skip
    assert shown == [
        ("grade>=1", None, 0.5),
        ("grade>=2", [False, True, True, True], 0.375),
        ("grade>=3", [False, False, False, True], 0.125),
    ]
    whole = lexicographic.LEXICOGRAPHIC.populations_of(relevant, range(1, 3), binary=False)
    assert whole.query.tolist() == [1, 2]
    assert whole.size.tolist() == [1, 4]
    assert whole.weight.tolist() == [1.0, 1.0]
    assert whole.docs.tolist() == [3, 4, 5, 6, 7]
