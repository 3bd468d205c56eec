"""Property-based tests: prefeval against the naive oracle on random small collections,
and the structural properties of preferences (antisymmetry, identity, bounds,
agreement with RR / total search length, transitivity, independence of line order)."""

from __future__ import annotations

import gzip
import math
import os
import tempfile
from itertools import permutations
from pathlib import Path

import oracle
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import prefeval

# property sweeps over generated collections: `make test` runs them, `make test-fast` not
pytestmark = pytest.mark.slow

# PREFEVAL_EXAMPLES=5 runs five times as many examples (a slower, more thorough run)
SCALE = float(os.environ.get("PREFEVAL_EXAMPLES", "1"))


def examples(n: int):
    return settings(
        max_examples=max(1, int(n * SCALE)),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


QIDS = ["1", "2", "10", "007", "q5"]
# docnos whose string order differs from "natural" order, upper/lower case, non-ASCII
DOCS = ["d1", "d2", "d10", "d9", "D1", "d1a", "dé", "d~", "e0", "x"]
GRADES = [-2, -1, 0, 0, 1, 1, 1, 2, 2, 3, 0.5]
SUBTOPIC_GRADES = [0, 0, 1, 1, 2, -1]
SCORES = [0.0, 1.0, 1.0, 2.0, 2.5, -1.0, 3.0, -0.0, 1e-300, 7.25]
# levels > 0 only: -l 0 and below are refused (test_options, test_baselines)
LEVELS = [None, None, None, 1, 2, 0.5, 1.5]


class Collection:
    def __init__(self, qrels_rows, runs, level, max_docs, binary):
        self.qrels_rows = qrels_rows  # (qid, iteration, docno, grade)
        self.runs = runs  # name -> [(qid, docno, score)]
        self.level = level
        self.max_docs = max_docs
        self.binary = binary

    def __repr__(self) -> str:
        return (
            f"Collection(qrels={self.qrels_rows!r}, runs={self.runs!r}, level={self.level!r}, "
            f"max_docs={self.max_docs!r}, binary={self.binary!r})"
        )

    def qrels_frame(self) -> pd.DataFrame:
        return pd.DataFrame(
            self.qrels_rows, columns=["query_id", "iteration", "doc_id", "relevance"]
        )

    def run_frames(self, order=None) -> dict:
        names = order or list(self.runs)
        return {
            name: pd.DataFrame(self.runs[name], columns=["query_id", "doc_id", "score"])
            for name in names
        }

    def compare(self, runs=None, **kwargs) -> dict:
        frame = prefeval.compare(
            self.qrels_frame(),
            runs if runs is not None else self.run_frames(),
            per_query=True,
            summary=True,
            relevance_level=self.level,
            max_docs=self.max_docs,
            binary=self.binary,
            notify=None,
            **kwargs,
        )
        return oracle.frame_to_dict(frame)

    def expected(self, names=None) -> dict:
        runs = {n: self.runs[n] for n in (names or list(self.runs))}
        values = oracle.evaluate(
            self.qrels_rows,
            runs,
            level=self.level,
            max_docs=self.max_docs,
            binary=self.binary,
        )
        summary = {(m, a, b, "all"): v for (m, a, b), v in oracle.summarize(values).items()}
        return {**values, **summary}

    def judgments(self):
        return oracle.Judgments(self.qrels_rows, self.level)

    def ranks(self, name: str, qid: str) -> dict:
        rows = [(d, s) for q, d, s in self.runs[name] if q == qid]
        return oracle.ranking(rows, self.max_docs)


@st.composite
def collections(draw, min_runs=3, max_runs=5):
    """Random small collections; the first query always has a document relevant at the
    drawn level (prefeval refuses qrels with nothing to evaluate)."""
    level = draw(st.sampled_from(LEVELS))
    qids = draw(st.lists(st.sampled_from(QIDS), min_size=1, max_size=4, unique=True))
    subtopics = draw(st.booleans())
    qrels_rows = []
    for k, q in enumerate(qids):
        judged = draw(st.lists(st.sampled_from(DOCS), min_size=k == 0, max_size=7, unique=True))
        if subtopics:
            n_sub = draw(st.integers(1, 3))
            for t in range(1, n_sub + 1):
                for j, d in enumerate(judged):
                    grade = draw(st.sampled_from(SUBTOPIC_GRADES))
                    if k == 0 and j == 0 and t == 1:
                        grade = 2  # relevant at every level drawn
                    qrels_rows.append((q, t, d, grade))
            if draw(st.integers(0, 3)) == 0:
                # plain judgments mixed in: they count for the general grade only
                plain = draw(st.lists(st.sampled_from(DOCS), max_size=3, unique=True))
                qrels_rows.extend((q, 0, d, draw(st.sampled_from(GRADES))) for d in plain)
        else:
            for j, d in enumerate(judged):
                grade = 3 if k == 0 and j == 0 else draw(st.sampled_from(GRADES))
                qrels_rows.append((q, 0, d, grade))
    qrels_rows = draw(st.permutations(qrels_rows))
    n_runs = draw(st.integers(min_runs, max_runs))
    run_qids = [*qids, "999"]  # 999 is not judged: ignored by evaluation
    runs = {}
    for k in range(n_runs):
        rows = []
        for q in run_qids:
            if draw(st.integers(0, 4)) == 0:
                continue  # the run has no line for this query
            docs = draw(st.lists(st.sampled_from(DOCS), max_size=8, unique=True))
            rows.extend((q, d, draw(st.sampled_from(SCORES))) for d in docs)
        rows = list(draw(st.permutations(rows)))
        layout = draw(st.sampled_from(["shuffled", "blocks", "blocks-reversed"]))
        if layout != "shuffled":
            # one block per query, scores descending inside (ties in drawn order): the
            # layout of real run files, with the queries in or against qrels order
            query_order = run_qids if layout == "blocks" else run_qids[::-1]
            rows.sort(key=lambda row: (query_order.index(row[0]), -row[2]))
        runs[f"run{k}"] = rows
    max_docs = draw(st.sampled_from([None, None, None, 1, 2, 3, 5]))
    binary = draw(st.booleans())
    return Collection(list(qrels_rows), runs, level, max_docs, binary)


def _sgn(x: float) -> int:
    return (x > 0) - (x < 0)


# --------------------------------------------------------------------------- oracle


@examples(120)
@given(collections())
def test_matches_oracle(c):
    oracle.assert_matches(c.compare(), c.expected(), tol=1e-12)


@examples(40)
@given(collections(), st.lists(st.sampled_from(oracle.ALL_MEASURES), min_size=1, max_size=4))
def test_matches_oracle_measure_subsets(c, measures):
    """Asking for some measures only gives exactly those rows (same values)."""
    if not c.judgments().has_subtopics:
        measures = [m for m in measures if m not in oracle.STRPP_FAMILY] or ["rpp"]
    frame = prefeval.compare(
        c.qrels_frame(),
        c.run_frames(),
        measures=",".join(measures),
        per_query=True,
        summary=True,
        relevance_level=c.level,
        max_docs=c.max_docs,
        binary=c.binary,
        notify=None,
    )
    expected = {k: v for k, v in c.expected().items() if k[0] in measures}
    oracle.assert_matches(oracle.frame_to_dict(frame), expected, tol=1e-12)
    order = list(dict.fromkeys(frame["measure"].astype(str)))
    assert order == [m for m in dict.fromkeys(measures) if m in order]


# --------------------------------------------------------------------------- structure


@examples(60)
@given(collections())
def test_antisymmetry(c):
    forward = c.compare()
    backward = c.compare(c.run_frames(order=list(reversed(list(c.runs)))))
    assert set(backward) == {(m, b, a, q) for (m, a, b, q) in forward}
    for (m, a, b, q), value in forward.items():
        assert backward[(m, b, a, q)] == -value, (m, a, b, q)


@examples(60)
@given(collections(min_runs=1, max_runs=1), st.randoms(use_true_random=False))
def test_identical_runs_tie(c, rnd):
    ((name, rows),) = c.runs.items()
    shuffled = list(rows)
    rnd.shuffle(shuffled)
    runs = {
        name: pd.DataFrame(rows, columns=["query_id", "doc_id", "score"]),
        "copy": pd.DataFrame(shuffled, columns=["query_id", "doc_id", "score"]),
    }
    values = c.compare(runs)
    rpp_queries = {q for (m, _a, _b, q) in values if m == "rpp"}
    assert rpp_queries == set(c.judgments().relevant) | {"all"}
    assert all(v == 0.0 for v in values.values()), values


@examples(60)
@given(collections())
def test_rpp_family_bounded(c):
    values = c.compare()
    rpp_like = [v for (m, *_), v in values.items() if "rpp" in m]
    assert all(-1.0 - 1e-12 <= v <= 1.0 + 1e-12 for v in rpp_like)
    lexi = [v for (m, *_), v in values.items() if m in ("lexirecall", "lexiprecision")]
    per_query_lexi = [
        v for (m, _a, _b, q), v in values.items() if m == "lexiprecision" and q != "all"
    ]
    assert all(v in (-1.0, 0.0, 1.0) for v in per_query_lexi)
    assert all(-1.0 <= v <= 1.0 for v in lexi)


@examples(60)
@given(collections())
def test_lexiprecision_agrees_with_reciprocal_rank(c):
    values = c.compare()
    judged = c.judgments()
    names = list(c.runs)
    for qid, rel in judged.relevant.items():
        rr = {}
        for name in names:
            ranks = c.ranks(name, qid)
            first = min((ranks[d] for d in rel if d in ranks), default=None)
            rr[name] = 0.0 if first is None else 1.0 / first
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                sgn_lp = values[("lexiprecision", a, b, qid)]
                rr_lp = values[("rrlexiprecision", a, b, qid)]
                if rr[a] != rr[b]:
                    assert sgn_lp == _sgn(rr[a] - rr[b]), (a, b, qid)
                    assert math.isclose(rr_lp, rr[a] - rr[b], abs_tol=1e-15)
                assert _sgn(rr_lp) == sgn_lp


@examples(60)
@given(collections())
def test_lexirecall_agrees_with_total_search_length(c):
    values = c.compare()
    judged = c.judgments()
    names = list(c.runs)
    for qid, rel in judged.relevant.items():
        tsl = {}
        for name in names:
            ranks = c.ranks(name, qid)
            found = [ranks[d] for d in rel if d in ranks]
            # imputed: an unretrieved relevant document is at the bottom of the corpus
            tsl[name] = max(found) if len(found) == len(rel) else math.inf
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                if tsl[a] != tsl[b]:
                    lr = values[("lexirecall", a, b, qid)]
                    assert lr == (1.0 if tsl[a] < tsl[b] else -1.0), (a, b, qid, tsl)


@examples(60)
@given(collections(min_runs=3, max_runs=4))
def test_lexicographic_transitive(c):
    values = c.compare()
    names = list(c.runs)
    queries = {q for (_m, _a, _b, q) in values if q != "all"}

    def delta(m, x, y, q):
        if (m, x, y, q) in values:
            return values[(m, x, y, q)]
        return -values[(m, y, x, q)]

    for m in ("lexirecall", "lexiprecision", "rrlexiprecision"):
        for q in queries:
            for x, y, z in permutations(names, 3):
                dxy, dyz, dxz = delta(m, x, y, q), delta(m, y, z, q), delta(m, x, z, q)
                if dxy >= 0 and dyz >= 0:
                    assert dxz >= 0, (m, q, x, y, z)
                    if dxy > 0 or dyz > 0:
                        assert dxz > 0, (m, q, x, y, z)
                    else:
                        assert dxz == 0, (m, q, x, y, z)


# --------------------------------------------------------------------------- files


def _qrels_text(rows, sep, eol) -> str:
    return "".join(f"{q}{sep}{it}{sep}{d}{sep}{g!r}{eol}" for q, it, d, g in rows)


def _run_text(rows, sep, eol, tag, rnd) -> str:
    lines = []
    for q, d, s in rows:
        fields = [q, "Q0", d, str(rnd.randint(0, 9)), repr(s)]  # rank column is ignored
        if tag:
            fields.append("tag")
        lines.append(sep.join(fields) + eol)
    return "".join(lines)


@examples(80)
@given(
    collections(min_runs=2, max_runs=3),
    st.sampled_from(["plain", "crlf", "tabs", "crlf+tabs"]),
    st.booleans(),
    st.booleans(),
    st.randoms(use_true_random=False),
)
def test_line_order_and_format(c, variant, tag, compress, rnd):
    sep = "\t" if "tabs" in variant else " "
    eol = "\r\n" if "crlf" in variant else "\n"
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        qrels_rows = list(c.qrels_rows)
        rnd.shuffle(qrels_rows)
        qrels = folder / "qrels.txt"
        qrels.write_bytes(_qrels_text(qrels_rows, sep, eol).encode())
        paths, frames = [], {}
        for name, rows in c.runs.items():
            shuffled = list(rows)
            rnd.shuffle(shuffled)
            data = _run_text(shuffled, sep, eol, tag, rnd).encode()
            if compress:
                data = gzip.compress(data)
            path = folder / f"input.{name}"  # gzip detected by content, not by name
            path.write_bytes(data)
            paths.append(path)
            frames[name] = pd.DataFrame(rows, columns=["query_id", "doc_id", "score"])
        from_files = oracle.frame_to_dict(
            prefeval.compare(
                qrels,
                paths,
                per_query=True,
                summary=True,
                relevance_level=c.level,
                max_docs=c.max_docs,
                binary=c.binary,
                notify=None,
            )
        )
    oracle.assert_matches(from_files, c.expected(), tol=1e-12)
    assert from_files == c.compare(frames)


# --------------------------------------------------------------------------- one-offs


def test_mixed_whitespace_line_read_like_uniform_file(tmp_path):
    """readers.py: regular single-space files take a fast path, anything else (tabs, mixed
    column counts) the careful line parser, and "both paths give the same columns".
    A file whose first line is single-spaced with 5 columns and whose second line has
    6 whitespace-separated fields, one separator being a tab, must be read like the same
    file with spaces only: qid 1, docno b, score 1.0, tag 7."""
    (tmp_path / "u").mkdir()
    (tmp_path / "m").mkdir()
    qrels = tmp_path / "qrels"
    qrels.write_text("1 0 a 1\n1 0 b 1\n")
    uniform = tmp_path / "u" / "run"
    uniform.write_text("1 Q0 a 1 2.0\n1 Q0 b 2 1.0 7\n1 Q0 c 3 1.5\n")
    mixed = tmp_path / "m" / "run"
    mixed.write_text("1 Q0 a 1 2.0\n1 Q0 b 2\t1.0 7\n1 Q0 c 3 1.5\n")
    other = tmp_path / "other"
    other.write_text("1 Q0 c 1 9.0\n1 Q0 a 2 8.0\n1 Q0 b 3 7.0\n")
    # run: a (2.0) c (1.5) b (1.0) -> relevant at 1 3 ; other: c a b -> 2 3
    # RPP(run, other) = (sgn(2 - 1) + sgn(3 - 3)) / 2 = 1/2 ; lexirecall: level 1 -> +1
    want = oracle.frame_to_dict(
        prefeval.compare(qrels, [uniform, other], per_query=True, summary=True)
    )
    assert want[("rpp", "run", "other", "1")] == 0.5
    assert want[("lexirecall", "run", "other", "1")] == 1.0
    got = oracle.frame_to_dict(
        prefeval.compare(qrels, [mixed, other], per_query=True, summary=True)
    )
    assert got == want


# --------------------------------------------------------------------------- readers

RUN_TOKENS = {
    "qid": ["1", "2", "01"],
    "docno": ["a", "b", "c", "d1", "A"],
    "rank": ["1", "2", "10", "x"],
    "score": ["1", "2.5", "-3", "1e2", ".5", "0", "inf", "nan", "NaN", "x", "1,5"],
    "tag": ["t", "7", "run1", "2.5"],
}
SEPARATORS = [" ", " ", " ", " ", "\t", "  "]


@st.composite
def run_texts(draw):
    """Run file text: mostly well-formed lines, some with tabs, doubled blanks, a missing or
    extra field, bad scores, repeated docnos; the first line is often perfectly regular
    (single spaces), which is what sends a reader down its fast path."""
    n = draw(st.integers(1, 10))
    regular_first = draw(st.booleans())
    with_tag = draw(st.booleans())
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    lines = []
    for k in range(n):
        fields = [draw(st.sampled_from(RUN_TOKENS[c])) for c in ("qid", "docno", "rank", "score")]
        fields.insert(1, "Q0")
        has_tag = with_tag if draw(st.integers(0, 5)) else not with_tag
        if has_tag:
            fields.append(draw(st.sampled_from(RUN_TOKENS["tag"])))
        if draw(st.integers(0, 12)) == 0:
            fields.pop(draw(st.integers(0, len(fields) - 1)))
        if draw(st.integers(0, 12)) == 0:
            fields.append("extra")
        if k == 0 and regular_first:
            line = " ".join(fields)
        else:
            if draw(st.booleans()):
                # single spaces except for one tab
                seps = [" "] * (len(fields) - 1)
                seps[draw(st.integers(0, len(seps) - 1))] = "\t"
            else:
                seps = [draw(st.sampled_from(SEPARATORS)) for _ in fields[1:]]
            line = fields[0] + "".join(s + f for s, f in zip(seps, fields[1:]))
            if draw(st.integers(0, 10)) == 0:
                line = draw(st.sampled_from([" ", "\t"])) + line
        lines.append(line)
        if draw(st.integers(0, 10)) == 0:
            lines.append("")
    return "".join(line + eol for line in lines)


def _read_error_line(reader, path):
    from prefeval.core.errors import InputError

    try:
        return reader(path), None
    except InputError as error:
        assert error.path == str(path)
        return None, error.line


@examples(150)
@given(run_texts())
def test_run_reader_matches_whitespace_semantics(text):
    """Whatever path the reader takes, a run file means its whitespace-separated fields;
    malformed lines are reported with their line number."""
    try:
        expected, line = oracle.parse_run_strict(text), None
    except oracle.ParseError as error:
        expected, line = None, error.line
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run"
        path.write_bytes(text.encode())
        columns, got_line = _read_error_line(prefeval.read_run, path)
    assert got_line == line, text
    if expected is not None:
        got = list(
            zip(columns.query_id.to_pylist(), columns.doc_id.to_pylist(), columns.score.tolist())
        )
        assert got == expected, text


QRELS_TOKENS = {
    "qid": ["1", "2", "001"],
    "iteration": ["0", "0", "0", "Q0", "1", "2", "01", "x", "1.5"],
    "docno": ["a", "b", "c"],
    "grade": ["0", "1", "2", "-1", "1.5", "1e0", "nan", "rel"],
}


@st.composite
def qrels_texts(draw):
    n = draw(st.integers(1, 10))
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    sep_choices = draw(st.sampled_from([[" "], ["  "], ["\t"], SEPARATORS]))
    lines = []
    for _ in range(n):
        if draw(st.integers(0, 15)) == 0:
            lines.append("# a comment line")
            continue
        fields = [
            draw(st.sampled_from(QRELS_TOKENS[c])) for c in ("qid", "iteration", "docno", "grade")
        ]
        if draw(st.integers(0, 15)) == 0:
            fields.pop(draw(st.integers(0, 3)))
        if draw(st.integers(0, 15)) == 0:
            fields.append("extra")
        seps = [draw(st.sampled_from(sep_choices)) for _ in fields[1:]]
        lines.append(fields[0] + "".join(s + f for s, f in zip(seps, fields[1:])))
    return "".join(line + eol for line in lines)


@examples(150)
@given(qrels_texts())
def test_qrels_reader_matches_whitespace_semantics(text):
    try:
        expected, line = oracle.parse_qrels_strict(text), None
    except oracle.ParseError as error:
        expected, line = None, error.line
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "qrels"
        path.write_bytes(text.encode())
        qrels, got_line = _read_error_line(prefeval.read_qrels, path)
    assert got_line == line, text
    if expected is not None:
        frame = qrels.frame
        got = list(
            zip(
                frame["query_id"].astype(str),
                frame["iteration"].astype(int),
                frame["doc_id"].astype(str),
                frame["relevance"].astype(float),
            )
        )
        assert got == expected, text


@examples(200)
@given(
    st.lists(  # (query, docno, score) rows, any order; docnos of 1 to 64 characters
        st.tuples(
            st.sampled_from(QIDS),
            st.sampled_from(DOCS) | st.text("ab9~é", min_size=1, max_size=64),
            st.sampled_from(SCORES),
        ),
        max_size=40,
        unique_by=lambda row: row[:2],
    ),
    st.lists(st.tuples(st.sampled_from(QIDS), st.sampled_from(DOCS)), max_size=20),
    st.sampled_from([None, 1, 2, 5]),
)
def test_run_positions_are_trec_ranks(rows, judged, max_docs):
    """Every judged-relevant document a run retrieved gets its trec_eval rank (score
    descending, docno descending) within its query, whatever the rows' order."""
    from prefeval.core.positions import run_positions
    from prefeval.core.qrels import Qrels
    from prefeval.io.runs import read_run

    judged = sorted(set(judged))
    qrels = Qrels(
        [q for q, _ in judged], [0] * len(judged), [d for _, d in judged], [1.0] * len(judged)
    )
    relevant = qrels.relevant(None)
    frame = pd.DataFrame(rows, columns=["query_id", "doc_id", "score"])
    got = run_positions(read_run(frame, name="r"), relevant, max_docs)
    docs = {(q, d): i for i, (q, d) in enumerate(
        (q, d) for k, q in enumerate(relevant.query_ids)
        for d in relevant.doc_id[relevant.offsets[k] : relevant.offsets[k + 1]].to_pylist()
    )}  # fmt: skip
    expected, retrieved = {}, []
    for q in relevant.query_ids:
        ranking = sorted(((s, d) for qq, d, s in rows if qq == q), reverse=True)
        ranking = ranking[:max_docs] if max_docs is not None else ranking
        retrieved.append(len(ranking))
        for rank, (_, d) in enumerate(ranking, 1):
            if (q, d) in docs:
                expected[docs[q, d]] = rank
    assert dict(zip(got.doc.tolist(), got.rank.tolist())) == expected
    assert got.doc.tolist() == sorted(expected)
    assert got.retrieved.tolist() == retrieved
