"""Hand-worked examples from the papers, values derived by hand in the comments.

rpp-sigir2022 section 3-5 (rankings X and Y), lexiprecision-evia2023 section 3
(Figure 4) and lexirecall section 2.2 / eq. 11.  Every expected value below was
computed on paper from the definitions, not by running prefeval or the oracle
(the oracle is cross-checked against the same numbers at the end).
"""

from __future__ import annotations

import math
from fractions import Fraction

import oracle
import pytest
from helpers import write_qrels, write_run

import prefeval
from prefeval.core.positions import UNRETRIEVED, position_matrix, run_positions
from prefeval.io.runs import read_qrels, read_run

# ----------------------------------------------------------------------------------------
# rpp-sigir2022 section 3: X = 0 4 3 0 0 0 1 0 3 0 0 ... (unretrieved grades {1,1,2,4,5})
#                          Y = 3 0 4 5 3 0 0 1 1 0 0 ... (unretrieved grades {1,2,4})
# Both rankings involve the same nine relevant items:
#   r5 (grade 5), r4a r4b (4), r3a r3b (3), r2 (2), r1a r1b r1c (1)
# X: rank 2 r4a, 3 r3a, 7 r1a, 9 r3b; misses r1b r1c r2 r4b r5      -> {1,1,2,4,5}
# Y: rank 1 r3a, 3 r4b, 4 r5, 5 r3b, 8 r1a, 9 r1b; misses r1c r2 r4a -> {1,2,4}
# Both are top-20 rankings: ranks 12..20 are non-relevant filler.
# ----------------------------------------------------------------------------------------

GRADES = {
    "r5": 5,
    "r4a": 4,
    "r4b": 4,
    "r3a": 3,
    "r3b": 3,
    "r2": 2,
    "r1a": 1,
    "r1b": 1,
    "r1c": 1,
}
X_TOP = {2: "r4a", 3: "r3a", 7: "r1a", 9: "r3b"}
Y_TOP = {1: "r3a", 3: "r4b", 4: "r5", 5: "r3b", 8: "r1a", 9: "r1b"}
DEPTH = 20
QID = "101"


def _ranking(top: dict, prefix: str) -> list[tuple[str, str, float]]:
    rows = []
    for rank in range(1, DEPTH + 1):
        docno = top.get(rank, f"{prefix}-n{rank:02d}")
        rows.append((QID, docno, float(100 - rank)))  # strictly decreasing: no ties
    return rows


@pytest.fixture
def xy(tmp_path):
    """qrels, run X, run Y as files (plus judged non-relevant and junk documents)."""
    judged = [(QID, 0, d, g) for d, g in GRADES.items()]
    judged += [(QID, 0, "X-n01", 0), (QID, 0, "Y-n02", -2), (QID, 0, "X-n04", 0)]
    qrels = write_qrels(tmp_path / "qrels", judged)
    x = write_run(tmp_path / "input.X", _ranking(X_TOP, "X"))
    y = write_run(tmp_path / "input.Y", _ranking(Y_TOP, "Y"))
    return qrels, x, y


def _values(qrels, runs, **kwargs) -> dict:
    frame = prefeval.compare(qrels, runs, per_query=True, summary=True, notify=None, **kwargs)
    return {
        (m, a, b): v
        for m, a, b, q, v in zip(
            frame["measure"].astype(str),
            frame["run_a"].astype(str),
            frame["run_b"].astype(str),
            frame["query_id"].astype(str),
            frame["value"],
        )
        if q == QID
    }


def test_search_lengths_of_x(xy):
    # f_1(X) = 2, f_2(X) = 3, f_3(X) = 7 (section 3.1), then f_4 = 9 and five unretrieved
    qrels, x, _ = xy
    relevant = read_qrels(qrels).relevant(None)
    pos = run_positions(read_run(x), relevant)
    assert sorted(pos.rank.tolist()) == [2, 3, 7, 9]
    row = sorted(position_matrix([pos], relevant)[0].tolist())
    assert row[:4] == [2, 3, 7, 9]
    assert row[4:] == [UNRETRIEVED] * 5
    # grade >= 4: f_{1,lambda=4}(X) = 2 (section 4)
    rel4 = read_qrels(qrels).relevant(4)
    assert sorted(run_positions(read_run(x), rel4).rank.tolist()) == [2]
    assert sorted(run_positions(read_run(xy[2]), rel4).rank.tolist()) == [3, 4]


def test_binary_rpp_x_y(xy):
    # f(X) = 2 3 7 9 U U U U U ; f(Y) = 1 3 4 5 8 9 U U U
    # sgn(f(Y)_i - f(X)_i) = -1 0 -1 -1 -1 -1 0 0 0  -> RPP(X, Y) = -5/9
    qrels, x, y = xy
    v = _values(qrels, [x, y], binary=True)
    assert v[("rpp", "X", "Y")] == pytest.approx(-5 / 9, abs=1e-12)


def test_binary_rpp_variants_x_y(xy):
    # same signs s = -1 0 -1 -1 -1 -1 0 0 0, m = 9
    # invRPP: p(i) = (1/i) / H_9, H_9 = 7129/2520;
    #   sum s_i / i = -(1 + 1/3 + 1/4 + 1/5 + 1/6) = -117/60
    #   -> -(117/60) * (2520/7129) = -4914/7129 = -0.689297...
    # dcgRPP: p(i) = (1/log2(i+1)) / sum_{j<=9} 1/log2(j+1)
    #   numerator -(1 + 1/2 + 1/log2 5 + 1/log2 6 + 1/log2 7) = -2.67382...
    #   denominator 4.25464... -> -0.628449...
    qrels, x, y = xy
    v = _values(qrels, [x, y], binary=True)
    assert v[("invrpp", "X", "Y")] == pytest.approx(-4914 / 7129, abs=1e-12)
    num = -(1 + 1 / 2 + 1 / math.log2(5) + 1 / math.log2(6) + 1 / math.log2(7))
    den = sum(1 / math.log2(i + 1) for i in range(1, 10))
    assert v[("dcgrpp", "X", "Y")] == pytest.approx(num / den, abs=1e-12)
    assert v[("dcgrpp", "X", "Y")] == pytest.approx(-0.6284498769522006, abs=1e-12)


# per-level populations of eq. 5 (grade >= lambda), as worked out in the module docstring:
#   lambda=1, m=9: X 2 3 7 9 U U U U U  | Y 1 3 4 5 8 9 U U U  -> -1 0 -1 -1 -1 -1 0 0 0
#   lambda=2, m=6: X 2 3 9 U U U        | Y 1 3 4 5 U U        -> -1 0 -1 -1 0 0
#   lambda=3, m=5: X 2 3 9 U U          | Y 1 3 4 5 U          -> -1 0 -1 -1 0
#   lambda=4, m=3: X 2 U U              | Y 3 4 U              -> +1 -1 0
#   lambda=5, m=1: X U                  | Y 4                  -> -1
LEVEL_SIGNS = {
    1: [-1, 0, -1, -1, -1, -1, 0, 0, 0],
    2: [-1, 0, -1, -1, 0, 0],
    3: [-1, 0, -1, -1, 0],
    4: [1, -1, 0],
    5: [-1],
}


@pytest.mark.parametrize(
    "level, expected",
    [(1, -5 / 9), (2, -3 / 6), (3, -3 / 5), (4, 0.0), (5, -1.0)],
)
def test_rpp_per_grade_level(xy, level, expected):
    # RPP_lambda = binary RPP with relevant = grade >= lambda
    qrels, x, y = xy
    v = _values(qrels, [x, y], binary=True, relevance_level=level)
    assert v[("rpp", "X", "Y")] == pytest.approx(expected, abs=1e-12)
    assert sum(LEVEL_SIGNS[level]) / len(LEVEL_SIGNS[level]) == pytest.approx(expected)


def test_graded_rpp_x_y(xy):
    # eq. 5 with p(lambda) ~ m_lambda, m = 9, 6, 5, 3, 1 (sum 24):
    # (9 * -5/9 + 6 * -3/6 + 5 * -3/5 + 3 * 0 + 1 * -1) / 24 = (-5 - 3 - 3 + 0 - 1) / 24 = -1/2
    qrels, x, y = xy
    v = _values(qrels, [x, y])
    assert v[("rpp", "X", "Y")] == pytest.approx(-12 / 24, abs=1e-12)


def test_graded_inverse_and_dcg_rpp_x_y(xy):
    # invRPP per level (p(i) = (1/i)/H_m):
    #   lambda=1: -4914/7129;  lambda=2: -(1 + 1/3 + 1/4)/H_6 = -(19/12)/(49/20) = -95/147
    #   lambda=3: -(19/12)/H_5 = -(19/12)/(137/60) = -95/137
    #   lambda=4: (1 - 1/2)/H_3 = (1/2)/(11/6) = 3/11;  lambda=5: -1
    # graded: (9*-4914/7129 + 6*-95/147 + 5*-95/137 + 3*3/11 - 1)/24
    #       = -7227943267/12634241928 = -0.57209156736...
    qrels, x, y = xy
    v = _values(qrels, [x, y])
    exact = (
        9 * Fraction(-4914, 7129)
        + 6 * Fraction(-95, 147)
        + 5 * Fraction(-95, 137)
        + 3 * Fraction(3, 11)
        - 1
    ) / 24
    assert exact == Fraction(-7227943267, 12634241928)
    assert v[("invrpp", "X", "Y")] == pytest.approx(float(exact), abs=1e-12)

    # dcgRPP per level: sum_i s_i/log2(i+1) / sum_{i<=m} 1/log2(i+1), weighted by m/24;
    # lambda=4: (1 - 1/log2 3)/(1 + 1/log2 3 + 1/2) = 0.17319...; total -0.53816...
    def dcg(signs):
        num = sum(s / math.log2(i + 1) for i, s in enumerate(signs, start=1))
        return num / sum(1 / math.log2(i + 1) for i in range(1, len(signs) + 1))

    assert dcg(LEVEL_SIGNS[4]) == pytest.approx(0.1731968150568912)
    expected = sum(len(s) * dcg(s) for s in LEVEL_SIGNS.values()) / 24
    assert expected == pytest.approx(-0.5381610855465138, abs=1e-12)
    assert v[("dcgrpp", "X", "Y")] == pytest.approx(expected, abs=1e-12)


def test_section4_users(xy):
    # U_1 at lambda = 1: f_1(X) = 2 > 1 = f_1(Y), so the user prefers Y;
    # U_1 at lambda = 4: f_{1,4}(X) = 2 < 3 = f_{1,4}(Y), so the user prefers X.
    # The first recall level decides lexiprecision, so sgnLP reads these users off.
    qrels, x, y = xy
    at1 = _values(qrels, [x, y], relevance_level=1)
    at4 = _values(qrels, [x, y], relevance_level=4)
    assert at1[("lexiprecision", "X", "Y")] == -1.0
    assert at4[("lexiprecision", "X", "Y")] == 1.0
    # rrLP at lambda=4: 1/2 - 1/3 = 1/6
    assert at4[("rrlexiprecision", "X", "Y")] == pytest.approx(1 / 6, abs=1e-12)
    # lexirecall at lambda=4: X 2 U U vs Y 3 4 U, deepest difference at i=2 -> Y
    assert at4[("lexirecall", "X", "Y")] == -1.0


def test_lexicographic_x_y(xy):
    # binary positions X 2 3 7 9 U U U U U vs Y 1 3 4 5 8 9 U U U
    # sgnLP: first differing level i=1 (2 vs 1) -> Y preferred: -1
    # rrLP: 1/2 - 1/1 = -1/2
    # lexirecall: deepest differing level i=6 (U vs 9) -> Y preferred: -1
    qrels, x, y = xy
    for kwargs in ({}, {"binary": True}):  # lexicographic measures are always binary
        v = _values(qrels, [x, y], **kwargs)
        assert v[("lexiprecision", "X", "Y")] == -1.0
        assert v[("rrlexiprecision", "X", "Y")] == pytest.approx(1 / 2 - 1, abs=1e-12)
        assert v[("lexirecall", "X", "Y")] == -1.0


def test_antisymmetric_y_x(xy):
    qrels, x, y = xy
    for kwargs in ({}, {"binary": True}):
        forward = _values(qrels, [x, y], **kwargs)
        backward = _values(qrels, [y, x], **kwargs)
        assert set(backward) == {(m, "Y", "X") for m, _, _ in forward}
        for (m, _a, _b), value in forward.items():
            assert backward[(m, "Y", "X")] == -value
    graded = _values(qrels, [y, x])
    assert graded[("rpp", "Y", "X")] == pytest.approx(0.5, abs=1e-12)
    assert graded[("rrlexiprecision", "Y", "X")] == pytest.approx(0.5, abs=1e-12)
    assert graded[("lexirecall", "Y", "X")] == 1.0


def test_oracle_agrees_with_hand_values(xy):
    """The oracle used by the other test files reproduces the hand-worked numbers."""
    qrels, x, y = xy
    graded = oracle.evaluate_files(qrels, [x, y])
    binary = oracle.evaluate_files(qrels, [x, y], binary=True)
    assert binary[("rpp", "X", "Y", QID)] == pytest.approx(-5 / 9)
    assert graded[("rpp", "X", "Y", QID)] == pytest.approx(-0.5)
    assert graded[("invrpp", "X", "Y", QID)] == pytest.approx(-0.5720915673603999)
    assert graded[("dcgrpp", "X", "Y", QID)] == pytest.approx(-0.5381610855465138)
    assert graded[("rrlexiprecision", "X", "Y", QID)] == pytest.approx(-0.5)
    assert graded[("lexirecall", "X", "Y", QID)] == -1.0


# ----------------------------------------------------------------------------------------
# Runs given directly by the positions of their relevant documents.
# ----------------------------------------------------------------------------------------


def _runs_from_positions(tmp_path, relevant: list[str], vectors: dict[str, list]):
    """One run per name: relevant[i] at rank vectors[name][i] (None = not retrieved);
    other ranks up to the deepest one + 3 are filled with unjudged documents."""
    qrels = write_qrels(tmp_path / "qrels", [("7", 0, d, 1) for d in relevant])
    paths = []
    for name, vector in vectors.items():
        depth = max([p for p in vector if p is not None] + [0]) + 3
        by_rank = {p: d for d, p in zip(relevant, vector) if p is not None}
        rows = [
            ("7", by_rank.get(r, f"{name}-filler{r:04d}"), float(depth - r))
            for r in range(1, depth + 1)
        ]
        paths.append(write_run(tmp_path / name, rows))
    return qrels, paths


def _per_query(qrels, paths, **kwargs) -> dict:
    frame = prefeval.compare(qrels, paths, per_query=True, summary=True, notify=None, **kwargs)
    return {
        (m, a, b): v
        for m, a, b, q, v in zip(
            frame["measure"].astype(str),
            frame["run_a"].astype(str),
            frame["run_b"].astype(str),
            frame["query_id"].astype(str),
            frame["value"],
        )
        if q == "7"
    }


def test_lexiprecision_figure4_shape(tmp_path):
    # lexiprecision-evia2023 Figure 4: m = 5 relevant items, p_1 = p'_1 and p_2 < p'_2,
    # so pi > pi'.  The figure's exact positions are not in the text; this case has
    # that shape:  p = 1 3 10 11 12,  p' = 1 4 5 6 7
    # sgnLP = sgn(1/3 - 1/4) = +1; rrLP = 1/p_2 - 1/p'_2 = 1/3 - 1/4 = 1/12
    # while RPP (uniform) = (0 + 1 - 1 - 1 - 1)/5 = -2/5 and lexirecall (level 5:
    # 12 vs 7) = -1: the measures really disagree on this pair.
    relevant = ["a", "b", "c", "d", "e"]
    qrels, paths = _runs_from_positions(
        tmp_path, relevant, {"pi": [1, 3, 10, 11, 12], "piprime": [6, 1, 7, 5, 4]}
    )
    v = _per_query(qrels, paths)
    assert v[("lexiprecision", "pi", "piprime")] == 1.0
    assert v[("rrlexiprecision", "pi", "piprime")] == pytest.approx(1 / 12, abs=1e-12)
    assert v[("rpp", "pi", "piprime")] == pytest.approx(-2 / 5, abs=1e-12)
    assert v[("lexirecall", "pi", "piprime")] == -1.0


def test_lexirecall_section_2_2(tmp_path):
    # lexirecall section 2.2: R = {083, 107, 511, 668, 820, 977}; pi retrieves three of
    # them at 2, 3, 8, so p = 2 3 8 U U U (pessimistic imputation).
    #   rho1 = 1 2 3 4 5 U   : deepest difference at level 5 (U vs 5)   -> LR(pi, rho1) = -1
    #                          first difference at level 1 (2 vs 1)     -> sgnLP = -1
    #   rho2 = 95 .. 100     : level 6 (U vs 100) decides for rho2      -> LR(pi, rho2) = -1
    #                          but level 1 (2 vs 95) decides for pi     -> sgnLP = +1,
    #                          rrLP = 1/2 - 1/95
    #   rho3 = 1 2 9 U U U   : levels 4-6 tie (both U); level 3 8 < 9   -> LR(pi, rho3) = +1
    #                          level 1 (2 vs 1)                         -> sgnLP = -1
    relevant = ["083", "107", "511", "668", "820", "977"]
    qrels, paths = _runs_from_positions(
        tmp_path,
        relevant,
        {
            "pi": [None, 2, None, 8, 3, None],
            "rho1": [1, 2, 3, 4, 5, None],
            "rho2": [100, 99, 98, 97, 96, 95],
            "rho3": [None, None, 9, 1, 2, None],
        },
    )
    v = _per_query(qrels, paths)
    assert v[("lexirecall", "pi", "rho1")] == -1.0
    assert v[("lexiprecision", "pi", "rho1")] == -1.0
    assert v[("lexirecall", "pi", "rho2")] == -1.0
    assert v[("lexiprecision", "pi", "rho2")] == 1.0
    assert v[("rrlexiprecision", "pi", "rho2")] == pytest.approx(1 / 2 - 1 / 95, abs=1e-12)
    assert v[("lexirecall", "pi", "rho3")] == 1.0
    assert v[("lexiprecision", "pi", "rho3")] == -1.0
    # rho1 vs rho3: 1 2 3 4 5 U vs 1 2 9 U U U: first difference level 3 (3 < 9),
    # deepest difference level 5 (5 < U): rho1 preferred by both
    assert v[("lexiprecision", "rho1", "rho3")] == 1.0
    assert v[("lexirecall", "rho1", "rho3")] == 1.0
    assert v[("rrlexiprecision", "rho1", "rho3")] == pytest.approx(1 / 3 - 1 / 9, abs=1e-12)
    # binary RPP(pi, rho1): 2 3 8 U U U vs 1 2 3 4 5 U -> -1 -1 -1 -1 -1 0 = -5/6
    assert v[("rpp", "pi", "rho1")] == pytest.approx(-5 / 6, abs=1e-12)


def test_rrlp_unretrieved_counts_zero(tmp_path):
    # p = 4 U vs p' = 4 9: first difference at level 2, pi' retrieved it:
    # rrLP(pi, pi') = 0 - 1/9 ; sgnLP = -1 ; lexirecall = -1
    qrels, paths = _runs_from_positions(tmp_path, ["a", "b"], {"p": [4, None], "q": [9, 4]})
    v = _per_query(qrels, paths)
    assert v[("rrlexiprecision", "p", "q")] == pytest.approx(-1 / 9, abs=1e-12)
    assert v[("lexiprecision", "p", "q")] == -1.0
    assert v[("lexirecall", "p", "q")] == -1.0
