"""prefeval against exact rational arithmetic on the real TREC Web 2012 data.

Uniform RPP (graded eq. 5, binary eq. 4, subtopic eq. 6) and inverse RPP are rational:
every preference here is recomputed with ``fractions.Fraction`` straight from the
papers' formulas (population weights p(lambda) = m_lambda / sum m, recall weights
p(i) = 1/m or (1/i) / H_m, all Fractions; no floats anywhere in the reference), with
positions from the naive oracle (pessimistic imputation).  From those exact values the
orderings (MC4 with its stationary distribution solved by Fraction Gaussian
elimination, Borda, mean win rate, Copeland) and Kendall's tau between them follow
exactly, and prefeval must agree:

* uniform RPP per query: bit-identical to the correctly rounded exact value (prefeval
  divides an integer sum of signs once), exact zeros written as +0.0;
* inverse RPP per query and every summary mean: within 1e-15, exact zeros as +0.0;
* ``order``: the exact competition ranks for every method, measure and run;
* ``tau``: Kendall's tau-b of the exact orderings;
* ``order``, ``tau``, ``discpower`` and ``agree --ties`` do not change when the runs
  are listed in reverse order.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from functools import cache
from itertools import combinations

import oracle
import pytest
from helpers import WEB2012_RUN_NAMES as RUN_NAMES
from helpers import invoke, read_tsv

import prefeval

PAIRS = list(combinations(RUN_NAMES, 2))  # run_a before run_b, command-line order

# name -> (qrels, relevance level, binary); the level None means grade > 0
SETTINGS = {
    "graded": ("adhoc", None, False),
    "graded-l2": ("adhoc", 2, False),
    "binary": ("adhoc", None, True),
    "binary-l2": ("adhoc", 2, True),
    "subtopic": ("diversity", None, False),
}
WEIGHTING = {
    "rpp": "uniform",
    "invrpp": "inverse",
    "strpp": "uniform",
    "stinvrpp": "inverse",
}
ORDER_MEASURES = ("rpp", "invrpp", "lexirecall", "lexiprecision")
METHODS = ("mc4", "borda", "winrate", "copeland")
TELEPORT = Fraction(1, 20)  # prefeval's default --teleport 0.05


# --------------------------------------------------------------------------- data


@pytest.fixture(scope="module")
def data(web2012):
    """Paths, oracle judgments and every run's ranking of every judged query (once)."""
    runs = sorted((web2012 / "runs").glob("*.run.gz"))
    assert [oracle.run_name(p) for p in runs] == RUN_NAMES
    paths = {
        "adhoc": web2012 / "qrels.adhoc.txt.gz",
        "diversity": web2012 / "qrels.diversity-ndeval.txt.gz",
    }
    rows = {name: oracle.parse_qrels_text(oracle.read_text(p)) for name, p in paths.items()}
    queries = {q for table in rows.values() for q, _t, _d, _g in table}
    ranks = {}
    for path in runs:
        per_query: dict[str, list] = {}
        for qid, docno, score in oracle.parse_run_text(oracle.read_text(path)):
            if qid in queries:
                per_query.setdefault(qid, []).append((docno, score))
        ranks[oracle.run_name(path)] = {q: oracle.ranking(per_query.get(q, [])) for q in queries}
    return {"runs": runs, "paths": paths, "rows": rows, "ranks": ranks}


@pytest.fixture(scope="module")
def exact(data):
    """exact(setting, measure) -> {(run_a, run_b, query_id): Fraction}, memoised."""
    judgments = {}

    @cache
    def compute(setting: str, measure: str) -> dict:
        qrels, level, binary = SETTINGS[setting]
        key = (qrels, level)
        if key not in judgments:
            judgments[key] = oracle.Judgments(data["rows"][qrels], level)
        judged = judgments[key]
        if measure in ("lexirecall", "lexiprecision"):
            return exact_lexicographic(judged, data["ranks"], measure)
        return exact_rpp(judged, data["ranks"], WEIGHTING[measure], binary, measure[:2] == "st")

    return compute


def populations(judged, qid: str, binary: bool, subtopic: bool) -> list[tuple[Fraction, set]]:
    """(p, documents) of eq. 5 (graded), eq. 4 (binary) or eq. 6 (subtopic), p exact."""
    if subtopic:
        subs = [docs for _t, docs in sorted(judged.subtopics[qid].items()) if docs]
        if not subs:
            return []
        pops = [*subs, set().union(*subs)]  # each subtopic, then the background t*
    elif binary:
        pops = [set(judged.relevant[qid])]
    else:
        grades = judged.relevant[qid]
        pops = [{d for d, g in grades.items() if g >= lam} for lam in sorted(set(grades.values()))]
    total = sum(len(p) for p in pops)
    return [(Fraction(len(p), total), p) for p in pops]


@cache
def recall_weights(m: int, weighting: str) -> tuple[Fraction, ...]:
    """p(i), i = 1..m: 1/m (uniform) or (1/i) / H_m (inverse), as Fractions."""
    if weighting == "uniform":
        return tuple(Fraction(1, m) for _ in range(m))
    assert weighting == "inverse", weighting
    harmonic = sum(Fraction(1, i) for i in range(1, m + 1))
    return tuple(Fraction(1, i) / harmonic for i in range(1, m + 1))


@cache
def _common(weights: tuple[Fraction, ...]) -> tuple[int, tuple[int, ...]]:
    """The weights over their least common denominator D: (D, (p(i) * D for each i)).
    Summing sgn_i * p(i) through integer numerators is exact Fraction addition, only
    without reducing after every term."""
    denominator = math.lcm(*(w.denominator for w in weights))
    return denominator, tuple(w.numerator * (denominator // w.denominator) for w in weights)


def weighted_signs(weights: tuple[Fraction, ...], signs: list[int]) -> Fraction:
    """sum_i p(i) * sgn_i, exactly."""
    denominator, numerators = _common(weights)
    return Fraction(sum(n * s for n, s in zip(numerators, signs) if s), denominator)


def exact_rpp(judged, ranks: dict, weighting: str, binary: bool, subtopic: bool) -> dict:
    """{(run_a, run_b, qid): sum_pop p(pop) sum_i p_pop(i) sgn(f^b_i - f^a_i)}."""
    out = {}
    for qid in judged.relevant:
        pops = populations(judged, qid, binary, subtopic)
        if not pops:
            continue  # no subtopic-relevant document: the measure is undefined here
        assert sum(p for p, _ in pops) == 1
        # positions of each population's documents in each run (None: unretrieved)
        pos = {
            run: [oracle.positions(ranks[run][qid], docs) for _p, docs in pops] for run in RUN_NAMES
        }
        for a, b in PAIRS:
            value = Fraction(0)
            for k, (p_pop, docs) in enumerate(pops):
                signs = [oracle.preference_at(x, y) for x, y in zip(pos[a][k], pos[b][k])]
                value += p_pop * weighted_signs(recall_weights(len(docs), weighting), signs)
            out[(a, b, qid)] = value
    return out


def exact_lexicographic(judged, ranks: dict, measure: str) -> dict:
    """lexirecall (the deepest differing recall level decides) or sgnLP (the first)."""
    out = {}
    for qid, grades in judged.relevant.items():
        pos = {run: oracle.positions(ranks[run][qid], set(grades)) for run in RUN_NAMES}
        for a, b in PAIRS:
            signs = [oracle.preference_at(x, y) for x, y in zip(pos[a], pos[b])]
            if measure == "lexirecall":
                signs.reverse()
            out[(a, b, qid)] = Fraction(next((s for s in signs if s), 0))
    return out


@pytest.fixture(scope="module")
def prefeval_values(data):
    """prefeval(setting) -> {(measure, run_a, run_b, query_id): value}, memoised."""

    @cache
    def compute(setting: str) -> dict:
        qrels, level, binary = SETTINGS[setting]
        measures = ["strpp", "stinvrpp"] if qrels == "diversity" else ["rpp", "invrpp"]
        frame = prefeval.compare(
            data["paths"][qrels],
            [str(p) for p in data["runs"]],
            measures=measures,
            per_query=True,
            summary=True,
            relevance_level=level,
            binary=binary,
            notify=None,
        )
        return oracle.frame_to_dict(frame)

    return compute


def is_positive_zero(x: float) -> bool:
    return x == 0.0 and math.copysign(1.0, x) == 1.0


def check_against_exact(got: dict, expected: dict, measure: str, per_query_tol: float) -> int:
    """Every per-query and summary value of ``measure`` against the exact Fractions;
    returns the number of exact per-query zeros."""
    rows = {(a, b, q): v for (m, a, b, q), v in got.items() if m == measure}
    per_query = {k: v for k, v in rows.items() if k[2] != "all"}
    assert set(per_query) == set(expected)
    bad = []
    for key, value in sorted(expected.items()):
        actual = per_query[key]
        if value == 0:
            ok = is_positive_zero(actual)
        elif per_query_tol == 0:
            ok = actual == float(value)
        else:
            ok = abs(actual - float(value)) <= per_query_tol
        if not ok:
            bad.append((key, actual, float(value), str(value)))
    assert not bad, (
        f"{measure}: {len(bad)} per-query values differ from the exact ones "
        f"(pair and query, prefeval, float(exact), exact), e.g. {bad[:3]}"
    )
    zeros = sum(1 for v in expected.values() if v == 0)
    assert sum(1 for v in per_query.values() if v == 0) == zeros

    # summary rows: the mean over the queries where the measure is defined
    sums: dict[tuple, list] = {}
    for (a, b, _q), value in expected.items():
        sums.setdefault((a, b), []).append(value)
    summaries = {(a, b): v for (a, b, q), v in rows.items() if q == "all"}
    assert set(summaries) == set(PAIRS)
    bad = []
    for pair, values in sums.items():
        mean = sum(values, Fraction(0)) / len(values)
        actual = summaries[pair]
        ok = is_positive_zero(actual) if mean == 0 else abs(actual - float(mean)) <= 1e-15
        if not ok:
            bad.append((pair, actual, float(mean)))
    assert not bad, f"{measure}: summary rows differ from the exact means, e.g. {bad[:3]}"
    return zeros


# Exact per-query zeros (ties) among the 28 pairs x evaluated queries (50, or 48 at
# -l 2) found on this data, so that a change in the data handling or the reference
# shows.  (The issue reported 37 exact ties among the 1400 graded rpp comparisons; a
# naive float sum of the weighted populations gets 14 of those 37 wrong, nonzero, and
# 834 of the 1400 values not correctly rounded.)  No summary mean is exactly 0 here.
EXACT_ZEROS = {
    ("graded", "rpp"): 37,
    ("graded-l2", "rpp"): 165,
    ("binary", "rpp"): 44,
    ("binary-l2", "rpp"): 175,
    ("subtopic", "strpp"): 14,
    ("graded", "invrpp"): 20,
    ("graded-l2", "invrpp"): 144,
    ("binary", "invrpp"): 20,
    ("binary-l2", "invrpp"): 144,
    ("subtopic", "stinvrpp"): 5,
}


@pytest.mark.parametrize(
    "setting, measure", [k for k in EXACT_ZEROS if WEIGHTING[k[1]] == "uniform"]
)
def test_uniform_rpp_is_correctly_rounded(exact, prefeval_values, setting, measure):
    expected = exact(setting, measure)
    zeros = check_against_exact(prefeval_values(setting), expected, measure, per_query_tol=0)
    print(f"{setting} {measure}: {zeros} exact zeros of {len(expected)}")
    assert zeros == EXACT_ZEROS[(setting, measure)]


@pytest.mark.parametrize(
    "setting, measure", [k for k in EXACT_ZEROS if WEIGHTING[k[1]] == "inverse"]
)
def test_inverse_rpp_matches_exact(exact, prefeval_values, setting, measure):
    expected = exact(setting, measure)
    zeros = check_against_exact(prefeval_values(setting), expected, measure, per_query_tol=1e-15)
    print(f"{setting} {measure}: {zeros} exact zeros of {len(expected)}")
    assert zeros == EXACT_ZEROS[(setting, measure)]


def test_cli_jsonl_writes_the_exact_values(data, exact):
    """What ``compare -q -f jsonl`` writes is the correctly rounded value too (shortest
    round-trip text), and an exact zero is written 0.0, never -0.0."""
    result = invoke(
        "compare", "-q", "-f", "jsonl", "-m", "rpp", data["paths"]["adhoc"], *data["runs"]
    )
    assert result.exit_code == 0, result.stderr
    got = {}
    for line in result.stdout.splitlines():
        row = json.loads(line)
        got[(row["measure"], row["run_a"], row["run_b"], row["query_id"])] = row["value"]
    assert check_against_exact(got, exact("graded", "rpp"), "rpp", per_query_tol=0) == 37


# --------------------------------------------------------------------------- orderings


def win_rates(values: dict) -> dict[str, dict[str, Fraction]]:
    """{query: {run: W_q(run)}}, W_q(a) = sum_b Delta(a, b) (eq. 7), exactly."""
    out: dict[str, dict[str, Fraction]] = {}
    for (a, b, q), v in values.items():
        w = out.setdefault(q, dict.fromkeys(RUN_NAMES, Fraction(0)))
        w[a] += v
        w[b] -= v
    return out


def solve(matrix: list[list[Fraction]], rhs: list[Fraction]) -> list[Fraction]:
    """Gauss-Jordan elimination in Fractions (the matrix is non-singular)."""
    n = len(rhs)
    rows = [[*row, r] for row, r in zip(matrix, rhs)]
    for col in range(n):
        pivot = next(r for r in range(col, n) if rows[r][col] != 0)
        rows[col], rows[pivot] = rows[pivot], rows[col]
        rows[col] = [x / rows[col][col] for x in rows[col]]
        for r in range(n):
            if r != col and rows[r][col] != 0:
                factor = rows[r][col]
                rows[r] = [x - factor * y for x, y in zip(rows[r], rows[col])]
    return [rows[i][n] for i in range(n)]


def mc4(w: dict) -> dict[str, Fraction]:
    """Stationary distribution of MC4 (Dwork et al.) with teleport 1/20, exactly."""
    n = len(RUN_NAMES)
    above = {
        (a, b): sum(1 for s in w.values() if s[a] > s[b]) for a in RUN_NAMES for b in RUN_NAMES
    }
    chain = []
    for a in RUN_NAMES:
        beaten_by = [b for b in RUN_NAMES if b != a and above[(b, a)] > above[(a, b)]]
        row = []
        for b in RUN_NAMES:
            move = Fraction(1, n) if b in beaten_by else Fraction(0)
            if b == a:
                move = 1 - Fraction(len(beaten_by), n)
            row.append((1 - TELEPORT) * move + TELEPORT / n)
        assert sum(row) == 1
        chain.append(row)
    # pi P = pi and sum(pi) = 1: (P^T - I) pi = 0 with the last equation replaced
    system = [[chain[j][i] - (1 if i == j else 0) for j in range(n)] for i in range(n - 1)] + [
        [Fraction(1)] * n
    ]
    pi = solve(system, [Fraction(0)] * (n - 1) + [Fraction(1)])
    assert all(sum(pi[i] * chain[i][j] for i in range(n)) == pi[j] for j in range(n))
    return dict(zip(RUN_NAMES, pi))


def borda(w: dict) -> dict[str, Fraction]:
    """Per query: runs strictly below plus half the other runs tied; summed."""
    points = dict.fromkeys(RUN_NAMES, Fraction(0))
    for s in w.values():
        for a in RUN_NAMES:
            below = sum(1 for b in RUN_NAMES if s[b] < s[a])
            tied = sum(1 for b in RUN_NAMES if b != a and s[b] == s[a])
            points[a] += below + Fraction(tied, 2)
    return points


def winrate(w: dict) -> dict[str, Fraction]:
    return {a: sum((s[a] for s in w.values()), Fraction(0)) / len(w) for a in RUN_NAMES}


def copeland(values: dict) -> dict[str, Fraction]:
    """Wins minus losses of the sign of the mean Delta(a, b) over queries."""
    by_pair: dict[tuple, list] = {}
    for (a, b, _q), v in values.items():
        by_pair.setdefault((a, b), []).append(v)
    score = dict.fromkeys(RUN_NAMES, Fraction(0))
    for (a, b), vals in by_pair.items():
        mean = sum(vals, Fraction(0)) / len(vals)
        s = (mean > 0) - (mean < 0)
        score[a] += s
        score[b] -= s
    return score


def exact_scores(values: dict, method: str) -> dict[str, Fraction]:
    if method == "copeland":
        return copeland(values)
    return {"mc4": mc4, "borda": borda, "winrate": winrate}[method](win_rates(values))


def competition_ranks(scores: dict) -> dict[str, int]:
    """1 = best; exactly equal scores share the best rank of their group."""
    return {a: 1 + sum(1 for b in scores if scores[b] > s) for a, s in scores.items()}


def order_rows(text: str) -> dict[tuple[str, str], tuple[int, float]]:
    """{(measure, run): (rank, score)} of ``prefeval order`` tsv output."""
    frame = read_tsv(text)
    assert list(frame.columns) == ["measure", "method", "rank", "run", "score"]
    out = {}
    for m, _method, rank, run, score in frame.itertuples(index=False):
        assert (m, run) not in out
        out[(m, run)] = (int(rank), float(score))
    return out


def order_options(setting: str) -> list[str]:
    return ["--binary"] if SETTINGS[setting][2] else []


ORDER_CASES = [(method, setting) for setting in ("graded", "binary") for method in METHODS]


@pytest.fixture(scope="module")
def exact_order(exact):
    @cache
    def compute(setting: str, method: str, measure: str) -> dict[str, Fraction]:
        return exact_scores(exact(setting, measure), method)

    return compute


@pytest.mark.parametrize("method, setting", ORDER_CASES)
def test_order_matches_exact(data, exact_order, method, setting):
    result = invoke(
        "order",
        "--no-baselines",
        *order_options(setting),
        "-m",
        ",".join(ORDER_MEASURES),
        "--method",
        method,
        data["paths"]["adhoc"],
        *data["runs"],
    )
    assert result.exit_code == 0, result.stderr
    got = order_rows(result.stdout)
    assert set(got) == {(m, r) for m in ORDER_MEASURES for r in RUN_NAMES}
    bad = []
    # an MC4 score is the float nearest the exact stationary probability, to the bit
    tolerance = 0.0 if method == "mc4" else 1e-12
    for measure in ORDER_MEASURES:
        scores = exact_order(setting, method, measure)
        ranks = competition_ranks(scores)
        for run in RUN_NAMES:
            rank, score = got[(measure, run)]
            if rank != ranks[run] or not abs(score - float(scores[run])) <= tolerance:
                bad.append((measure, run, rank, score, ranks[run], float(scores[run])))
    assert not bad, f"(measure, run, prefeval rank, score, exact rank, exact score): {bad}"


def test_mc4_cata_filtered(data, exact_order):
    """The case of the issue: under MC4 on graded RPP, exact arithmetic puts
    rm-cata-filtered (stationary probability 0.0239) above ql-cata-filtered (0.0127),
    and so must prefeval."""
    pi = exact_order("graded", "mc4", "rpp")
    ql, rm = "ql-cata-filtered", "rm-cata-filtered"
    assert float(pi[rm]) == pytest.approx(0.0238984, abs=1e-7)
    assert float(pi[ql]) == pytest.approx(0.0127328, abs=1e-7)
    ranks = competition_ranks(pi)
    assert ranks[rm] < ranks[ql]
    result = invoke("order", "--no-baselines", "-m", "rpp", data["paths"]["adhoc"], *data["runs"])
    assert result.exit_code == 0, result.stderr
    got = order_rows(result.stdout)
    assert got[("rpp", rm)][0] == ranks[rm] < got[("rpp", ql)][0] == ranks[ql]


# --------------------------------------------------------------------------- tau


@pytest.mark.parametrize("method, setting", ORDER_CASES)
def test_tau_matches_exact(data, exact_order, method, setting):
    from scipy.stats import kendalltau

    result = invoke(
        "tau",
        "--no-baselines",
        *order_options(setting),
        "-m",
        ",".join(ORDER_MEASURES),
        "--method",
        method,
        data["paths"]["adhoc"],
        *data["runs"],
    )
    assert result.exit_code == 0, result.stderr
    frame = read_tsv(result.stdout)
    assert list(frame.columns) == ["measure_a", "measure_b", "tau"]
    got = {(a, b): float(t) for a, b, t in frame.itertuples(index=False)}
    assert set(got) == set(combinations(ORDER_MEASURES, 2))
    ranks = {m: competition_ranks(exact_order(setting, method, m)) for m in ORDER_MEASURES}
    for a, b in combinations(ORDER_MEASURES, 2):
        x = [-ranks[a][r] for r in RUN_NAMES]
        y = [-ranks[b][r] for r in RUN_NAMES]
        expected = float(kendalltau(x, y, variant="b").statistic)
        if math.isnan(expected):
            assert math.isnan(got[(a, b)]), (a, b)
        else:
            assert got[(a, b)] == pytest.approx(expected, abs=1e-12), (a, b)


# --------------------------------------------------------------------------- run order


INDEPENDENCE = {
    "order-mc4": ("order", "--method", "mc4"),
    "order-borda": ("order", "--method", "borda"),
    "order-winrate": ("order", "--method", "winrate"),
    "order-copeland": ("order", "--method", "copeland"),
    "tau": ("tau",),
    "tau-borda": ("tau", "--method", "borda"),
    "discpower": ("discpower", "--trials", "500", "--seed", "3"),
    "agree-ties": ("agree", "--ties"),
}


@pytest.mark.parametrize("qrels", ["adhoc", "diversity"])
@pytest.mark.parametrize("case", sorted(INDEPENDENCE))
def test_run_order_independence(data, case, qrels):
    command, *options = INDEPENDENCE[case]
    outputs = []
    for runs in (data["runs"], data["runs"][::-1]):
        result = invoke(command, "--no-baselines", *options, data["paths"][qrels], *runs)
        assert result.exit_code == 0, result.stderr
        outputs.append(result.stdout)
    forward, backward = outputs
    if command == "order":
        assert order_rows(forward) == order_rows(backward)
    else:
        assert forward == backward
