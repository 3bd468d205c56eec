"""The one-pass reader of TREC text runs (prefeval.io.textpass) gives exactly the rank
positions, depths and errors of the text reader (prefeval.io.text.parse_run, then
prefeval.core.positions.run_positions), or declines a file and leaves it to that reader.

The properties below generate runs in every layout (line ends, byte order mark, gzip,
spacing, comment and blank lines, query blocks in any order, lines in any order, ties,
docnos of mixed lengths and bytes, queries the qrels do not judge) and compare the two
at several relevance levels and cuts (``-M``); a layout the pass must serve (one block
per query, plain decimal scores, no duplicate) must not be declined.  The commands'
outputs are compared with the pass on and turned off (``PREFEVAL_TEXT_PASS=0``)."""

from __future__ import annotations

import gzip
import os
import random
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from helpers import invoke
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prefeval.core.positions import run_positions
from prefeval.core.qrels import Qrels
from prefeval.io import textpass
from prefeval.io.runs import read_qrels, resolve_runs
from prefeval.io.text import parse_run

REPO = Path(__file__).resolve().parents[2]

built = pytest.mark.skipif(not textpass.BUILT, reason="the extension is not built")


@pytest.fixture
def pass_on(monkeypatch):
    monkeypatch.delenv(textpass.ENV, raising=False)


def today(data: bytes, relevant, max_docs):
    """The text reader's positions (the pass turned off)."""
    columns = parse_run(data, "run.txt", "run", known=relevant.docnos())
    return run_positions(columns, relevant, max_docs)


def same(found, expected) -> None:
    assert found.doc.dtype == expected.doc.dtype and found.rank.dtype == expected.rank.dtype
    assert found.retrieved.dtype == expected.retrieved.dtype
    assert found.doc.tolist() == expected.doc.tolist()
    assert found.rank.tolist() == expected.rank.tolist()
    assert found.retrieved.tolist() == expected.retrieved.tolist()


# --------------------------------------------------------------------------- collections

QIDS = ["1", "01", "10", "2", "abc", "q#1", "é7"]
UNJUDGED = ["999", "x#2"]
# docnos of 1 to 12 bytes, some prefixes of others, some not ASCII
DOC_CHARS = "ab09Z_-é#"
# what separates fields: runs of the ASCII whitespace bytes.split() splits on
SEPARATORS = [" ", "\t", "  ", " \t ", "\x0b", "\x0c"]


@st.composite
def collections(draw):
    """(qrels rows, run rows (qid, docno, score value index), score texts): a run of
    contiguous query blocks with no document twice for a query."""
    n_docs = draw(st.integers(1, 30))
    pool = draw(
        st.lists(
            st.text(DOC_CHARS, min_size=1, max_size=12).filter(lambda d: not d.startswith("#")),
            min_size=n_docs,
            max_size=n_docs,
            unique=True,
        )
    )
    queries = draw(st.lists(st.sampled_from(QIDS + UNJUDGED), min_size=1, max_size=6, unique=True))
    qrels = []
    for q in QIDS:
        judged = draw(st.lists(st.sampled_from(pool), max_size=len(pool), unique=True))
        qrels += [(q, d, draw(st.integers(0, 3))) for d in judged]
    if not qrels:
        qrels = [(QIDS[0], pool[0], 1)]
    # few distinct scores: many ties
    distinct = draw(st.integers(1, 6))
    rows = []
    for q in queries:
        docs = draw(st.lists(st.sampled_from(pool), min_size=0, max_size=len(pool), unique=True))
        rows += [(q, d, draw(st.integers(0, distinct - 1))) for d in docs]
    return qrels, rows, distinct


def score_texts(values: list[float], rng: random.Random) -> list[str]:
    """A text of each score in one of the syntaxes both readers take."""
    out = []
    for v in values:
        forms = [repr(v), f"{v:.6f}", f"{v:e}", f"{v:E}", f"{v:+.3f}"]
        if v == int(v):
            forms += [str(int(v)), f"{int(v)}.", f"{v:.0e}"]
        if 0 < abs(v) < 1:
            forms.append(f"{v:.4f}".replace("0.", ".", 1))
        # every form of one value must read as that value, else ties would differ
        forms = [f for f in forms if float(f) == v]
        out.append(rng.choice(forms))
    return out


def render(rows, scores, rng, *, eol="\n", bom=False, spacing=False, extras=False) -> bytes:
    """Run text of (qid, docno, score text) rows."""
    lines = []
    rank = 0
    for q, d, s in rows:
        rank += 1
        fields = [q, "Q0", d, str(rank), s] + (["tag"] if rng.random() < 0.8 else [])
        if extras and rng.random() < 0.2:
            fields += ["more", "fields"]
        if spacing:
            line = "".join(
                f + rng.choice([" ", "\t", "  ", " \t ", "\x0b", "\x0c"]) for f in fields
            )
            line = rng.choice(["", " ", "\t"]) + line.rstrip() + rng.choice(["", " ", "\t "])
        else:
            line = " ".join(fields)
        lines.append(line)
        if extras and rng.random() < 0.1:
            lines.append(rng.choice(["", "   ", "# a comment", "#", "\t# indented comment"]))
    if isinstance(eol, str):
        text = "".join(line + eol for line in lines)
    else:  # a mix
        text = "".join(line + rng.choice(eol) for line in lines)
        if rng.random() < 0.5:
            text = text.rstrip("\r\n")  # no final line end
    data = text.encode("utf-8")
    return (b"\xef\xbb\xbf" if bom else b"") + data


def qrels_of(rows) -> Qrels:
    return Qrels(
        [q for q, _, _ in rows], [0] * len(rows), [d for _, d, _ in rows], [g for *_, g in rows]
    )


PROPERTY = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@built
@PROPERTY
@given(
    collections(),
    st.randoms(use_true_random=False),
    st.sampled_from(["\n", "\r\n", "\r", ("\n", "\r\n", "\r")]),
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.sampled_from(["file", "blocks"]),
)
def test_same_positions_as_the_text_reader(collection, rng, eol, bom, spacing, extras, order):
    qrels_rows, rows, distinct = collection
    values = sorted({round(rng.uniform(-5, 5), rng.choice([0, 1, 3])) for _ in range(distinct)})
    qrels = qrels_of(qrels_rows)
    # blocks in any order; within a block, scores sorted (descending), or not
    blocks: dict[str, list] = {}
    for q, d, k in rows:
        blocks.setdefault(q, []).append((q, d, values[k % len(values)]))
    order_q = list(blocks)
    rng.shuffle(order_q)
    lines = []
    for q in order_q:
        block = blocks[q]
        if order == "blocks" or rng.random() < 0.5:
            block = sorted(block, key=lambda r: -r[2])
        else:
            rng.shuffle(block)
        lines += block
    texts = score_texts([s for _, _, s in lines], rng)
    data = render(
        [(q, d, t) for (q, d, _), t in zip(lines, texts)],
        texts,
        rng,
        eol=eol,
        bom=bom,
        spacing=spacing,
        extras=extras,
    )
    os.environ.pop(textpass.ENV, None)
    for level in (None, 2.0):
        relevant = qrels.relevant(level)
        for max_docs in (None, 1, 3):
            found = textpass.text_positions(data, relevant, max_docs, "run")
            if not lines:
                continue  # no data line: declined or not, the reader's answer is the same
            assert found is not None, "a regular run declined"
            same(found, today(data, relevant, max_docs))


@built
@PROPERTY
@given(collections(), st.randoms(use_true_random=False))
def test_lines_in_any_order(collection, rng):
    """Lines shuffled across queries: the pass declines a query met twice, or answers
    exactly as the text reader."""
    qrels_rows, rows, distinct = collection
    rng.shuffle(rows)
    texts = [str(float(k)) for _, _, k in rows]
    data = render([(q, d, t) for (q, d, _), t in zip(rows, texts)], texts, rng)
    qrels = qrels_of(qrels_rows)
    relevant = qrels.relevant(None)
    found = textpass.text_positions(data, relevant, None, "run")
    if found is not None:
        same(found, today(data, relevant, None))


# scores: the decimal syntaxes the pass reads, with long mantissas and exponents, values
# next to each other (last-digit and last-bit differences) and equal values written
# differently
DIGITS = st.text("0123456789", min_size=1, max_size=25)


@st.composite
def decimal_texts(draw):
    sign = draw(st.sampled_from(["", "-", "+"]))
    whole = draw(DIGITS)
    frac = draw(st.one_of(st.none(), st.text("0123456789", max_size=25)))
    exp = draw(st.one_of(st.none(), st.integers(-330, 310)))
    if frac is None and draw(st.booleans()):
        text = f"{sign}.{whole}"
    else:
        text = f"{sign}{whole}" + ("" if frac is None else f".{frac}")
    if exp is not None:
        text += draw(st.sampled_from(["e", "E"])) + draw(st.sampled_from(["", "+"])) * (exp >= 0)
        text += str(exp)
    return text


def _declined(text: str, value: float) -> bool:
    """Whether the pass declines a score: not finite (an overflow), below the normal
    doubles though not zero (strtod's underflow), or too long a text or exponent."""
    mantissa, _, exponent = text.lower().partition("e")
    return (
        not np.isfinite(value)
        or (abs(value) < 2.2250738585072014e-308 and any(c in mantissa for c in "123456789"))
        or len(text) > 100
        or len(exponent.lstrip("+-")) > 4
    )


@built
@settings(max_examples=400, deadline=None)
@given(st.lists(decimal_texts(), min_size=1, max_size=8))
def test_scores_read_as_arrow_reads_them(texts):
    """The pass's numbers are Arrow's (the text reader's): every text's rank (which
    depends on the order and the ties of the numbers) is the same, or the pass
    declines (an overflow, an underflow, a text too long)."""
    values = pc.cast(pa.array(texts), pa.float64()).to_numpy()
    qrels = qrels_of([("1", f"d{i}", 1) for i in range(len(texts))])
    data = "".join(f"1 Q0 d{i} {i} {t} tag\n" for i, t in enumerate(texts)).encode()
    relevant = qrels.relevant(None)
    found = textpass.text_positions(data, relevant, None, "run")
    if found is None:
        assert any(_declined(t, v) for t, v in zip(texts, values)), texts
        return
    same(found, today(data, relevant, None))


def test_a_decimal_exactly_between_two_doubles():
    """Texts that round to neighbouring doubles, and texts that are one double written
    two ways, rank (and tie) as the text reader ranks them."""
    if not textpass.BUILT:
        pytest.skip("the extension is not built")
    a = struct.unpack("<d", struct.pack("<q", 4607182418800017408 + 1))[0]  # 1 + 2**-52
    texts = [
        "1.0000000000000002220446049250313080847263336181640625",  # exactly 1 + 2**-52
        "1.00000000000000011102230246251565404236316680908203125",  # the midpoint: to even, 1
        "1.000000000000000111022302462515654042363166809082031251",  # above it: 1 + 2**-52
        repr(a),
        "1",
        "1.0e0",
        "0.1e1",
    ]
    qrels = qrels_of([("1", f"d{i}", 1) for i in range(len(texts))])
    data = "".join(f"1 Q0 d{i} {i} {t}\n" for i, t in enumerate(texts)).encode()
    relevant = qrels.relevant(None)
    found = textpass.text_positions(data, relevant, None, "run")
    assert found is not None
    # by hand: 1 + 2**-52 three times (d3, d2, d0 by docno descending), then 1 four times
    assert dict(zip(found.doc.tolist(), found.rank.tolist())) == {
        3: 1,
        2: 2,
        0: 3,
        6: 4,
        5: 5,
        4: 6,
        1: 7,
    }
    same(found, today(data, relevant, None))


# --------------------------------------------------------------------------- declines


@built
@pytest.mark.parametrize(
    "line",
    [
        b"1 Q0 d1 1",  # four fields
        b"1 Q0 d1 1 nan",
        b"1 Q0 d1 1 inf",
        b"1 Q0 d1 1 -Infinity",
        b"1 Q0 d1 1 1e400",  # overflows to inf
        b"1 Q0 d1 1 0x1p3",
        b"1 Q0 d1 1 1,5",
        b"1 Q0 d1 1 1_0",
        b"1 Q0 d1 1 .",
        b"1 Q0 d1 1 1e",
        b"1 Q0 d1 1 \xff",  # invalid UTF-8
        b"1 Q0 d\x001 1 1",  # NUL
        b"1 Q0 d1 1 2",  # d1 twice for query 1
    ],
)
def test_declined(line):
    qrels = qrels_of([("1", "d1", 1), ("2", "d1", 1)])
    data = b"1 Q0 d1 1 3 t\n2 Q0 d1 1 3 t\n" + line + b"\n"
    assert textpass.text_positions(data, qrels.relevant(None), None, "run") is None


@built
def test_declined_where_a_query_comes_back():
    qrels = qrels_of([("1", "d1", 1), ("2", "d1", 1)])
    data = b"1 Q0 d1 1 3\n2 Q0 d1 1 3\n1 Q0 d2 1 2\n"
    assert textpass.text_positions(data, qrels.relevant(None), None, "run") is None
    assert textpass.text_positions(b"# nothing\n\n", qrels.relevant(None), None, "run") is None


@built
def test_turned_off(monkeypatch):
    qrels = qrels_of([("1", "d1", 1)])
    data = b"1 Q0 d1 1 3\n"
    assert textpass.text_positions(data, qrels.relevant(None), None, "run") is not None
    monkeypatch.setenv(textpass.ENV, "0")
    assert not textpass.available()
    assert textpass.text_positions(data, qrels.relevant(None), None, "run") is None


@built
def test_a_known_run_by_hand(pass_on):
    """Ranks and depths computed by hand: ties by docno descending (byte-wise: "d9" >
    "d10" > "d1"), a query the qrels do not judge, ``-M 2``."""
    qrels = qrels_of([("1", "d1", 1), ("1", "d9", 1), ("2", "x", 2), ("2", "d10", 1)])
    data = (
        b"\xef\xbb\xbf1 Q0 d1 1 5 t\r\n1 Q0 d10 2 5 t\r\n1\tQ0  d9 3 5\r\n"
        b"7 Q0 d1 1 9\n"
        b"2 Q0 y 1 1e1\r2 Q0 d10 2 -3\r2 Q0 x 3 +2.5"
    )
    relevant = qrels.relevant(None)
    # global numbers: query "1": d1 0, d9 1; query "2": d10 2, x 3
    found = textpass.text_positions(data, relevant, None, "run")
    assert found.doc.tolist() == [0, 1, 2, 3]
    assert found.rank.tolist() == [3, 1, 3, 2]
    assert found.retrieved.tolist() == [3, 3]
    cut = textpass.text_positions(data, relevant, 2, "run")
    assert cut.doc.tolist() == [1, 3] and cut.rank.tolist() == [1, 2]
    assert cut.retrieved.tolist() == [2, 2]
    same(found, today(data, relevant, None))
    same(cut, today(data, relevant, 2))


@built
def test_gzip_files(tmp_path, pass_on):
    qrels = qrels_of([("1", "d1", 1), ("1", "d2", 1)])
    text = b"1 Q0 d2 1 2\n1 Q0 d3 2 2\n1 Q0 d1 3 1\n"
    path = tmp_path / "input.a.gz"
    path.write_bytes(gzip.compress(text))
    (run,) = resolve_runs([path]).values()
    relevant = qrels.relevant(None)
    found = textpass.run_text_positions(run, relevant, None)
    assert found.name == "a"
    assert found.doc.tolist() == [0, 1] and found.rank.tolist() == [3, 2]
    run.keep = True  # kept columns: the text reader reads it
    assert textpass.run_text_positions(run, relevant, None) is None


# --------------------------------------------------------------------------- through the CLI


def both(monkeypatch, *args):
    """The CLI's result with the pass on, then turned off."""
    monkeypatch.delenv(textpass.ENV, raising=False)
    on = invoke(*args)
    monkeypatch.setenv(textpass.ENV, "0")
    off = invoke(*args)
    monkeypatch.delenv(textpass.ENV)
    return on, off


@pytest.mark.parametrize(
    "body, line, message",
    [
        ("1 Q0 d1 1 3\n1 Q0 d2 2 2\n1 Q0 d1 3 1\n", 3, "document 'd1' appears twice for query '1'"),
        ("1 Q0 d1 1 3\n2 Q0 d2 2 2\n1 Q0 d1 3 1\n", 3, "document 'd1' appears twice for query '1'"),
        # the first error wins: a bad score before a duplicate, a duplicate before one
        ("1 Q0 d1 1 x\n1 Q0 d1 2 2\n", 1, "score 'x' is not a number"),
        ("1 Q0 d1 1 3\n1 Q0 d1 2 2\n1 Q0 d2 1 nan\n", 2, "appears twice"),
        ("1 Q0 d1 1 3\n1 Q0 d1 2 2\n1 Q0\n", 2, "appears twice"),
    ],
)
def test_errors_as_the_text_reader_words_them(tmp_path, monkeypatch, body, line, message):
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("1 0 d1 1\n1 0 d2 0\n2 0 d2 1\n")
    good = tmp_path / "input.good"
    good.write_text("1 Q0 d1 1 3\n2 Q0 d2 1 3\n")
    bad = tmp_path / "input.bad"
    bad.write_text(body)
    on, off = both(monkeypatch, "compare", qrels, good, bad)
    assert on.exit_code == off.exit_code == 2
    assert on.stderr == off.stderr
    assert f"{bad}:{line}:" in on.stderr and message in on.stderr, on.stderr


SAMPLE_COMMANDS = [
    ["compare"],
    ["compare", "--binary", "-l", "2"],
    ["compare", "-q", "-M", "5"],
    ["metrics"],
    ["metrics", "-M", "5", "-l", "2"],
    ["order"],
    ["order", "-B", "AP", "-B", "TSE", "-M", "7"],
    ["tau"],
]


@pytest.mark.parametrize("args", SAMPLE_COMMANDS)
def test_sample_outputs_with_and_without_the_pass(monkeypatch, args):
    runs = sorted(str(p) for p in (REPO / "sample_data" / "runs").glob("input.*"))
    monkeypatch.setenv("PREFEVAL_CACHE", "0")
    on, off = both(monkeypatch, *args, REPO / "sample_data" / "qrels.txt", *runs)
    assert on.exit_code == off.exit_code == 0, (on.stderr, off.stderr)
    assert on.stdout == off.stdout and on.stderr == off.stderr


@built
def test_the_sample_runs_are_read_by_the_pass(pass_on):
    """The pass serves the sample runs (the comparison above compares two readers)."""
    qrels = read_qrels(str(REPO / "sample_data" / "qrels.txt"))
    relevant = qrels.relevant(None)
    for run in resolve_runs(sorted((REPO / "sample_data" / "runs").glob("input.*"))).values():
        assert textpass.run_text_positions(run, relevant, None) is not None, run.name
        assert textpass.run_text_ranking(run, relevant.query_ids, None) is not None, run.name


@pytest.mark.parametrize(
    "args",
    [["compare", "--binary"], ["compare", "-M", "100", "-l", "2"], ["metrics", "-B", "nDCG@10"]],
)
def test_web2012_outputs_with_and_without_the_pass(monkeypatch, web2012, args):
    runs = sorted(str(p) for p in (web2012 / "runs").glob("*.run.gz"))
    monkeypatch.setenv("PREFEVAL_CACHE", "0")
    on, off = both(monkeypatch, *args, web2012 / "qrels.adhoc.txt.gz", *runs)
    assert on.exit_code == off.exit_code == 0, (on.stderr, off.stderr)
    assert on.stdout == off.stdout and on.stderr == off.stderr


def reader_ranking(data: bytes, qlist: list[str], max_docs):
    """The baselines' ranking of the text reader's columns (the pass turned off)."""
    from prefeval.analysis.baselines.rankings import ranking_of

    columns = parse_run(data, "run.txt", "run")
    found = ranking_of(columns, pa.array(qlist, pa.string()), max_docs)
    return found.q, found.doc_id, found.score


@built
@PROPERTY
@given(
    collections(),
    st.randoms(use_true_random=False),
    st.sampled_from(["\n", "\r\n", "\r", ("\n", "\r\n", "\r")]),
    st.booleans(),
    st.booleans(),
)
def test_same_ranking_as_the_text_reader(collection, rng, eol, bom, spacing):
    """The baselines' rows (every row of the evaluated queries, grouped by query index,
    in trec order, cut at ``-M``) from the pass equal those of the text reader's
    columns: query indices, docnos (and their Arrow type) and scores."""
    _, rows, distinct = collection
    values = sorted({round(rng.uniform(-5, 5), rng.choice([0, 1, 3])) for _ in range(distinct)})
    blocks: dict[str, list] = {}
    for q, d, k in rows:
        blocks.setdefault(q, []).append((q, d, values[k % len(values)]))
    order_q = list(blocks)
    rng.shuffle(order_q)
    lines = []
    for q in order_q:
        block = blocks[q]
        if rng.random() < 0.5:
            block = sorted(block, key=lambda r: -r[2])
        else:
            rng.shuffle(block)
        lines += block
    if not lines:
        return
    texts = score_texts([s for _, _, s in lines], rng)
    data = render(
        [(q, d, t) for (q, d, _), t in zip(lines, texts)], texts, rng, eol=eol, bom=bom,
        spacing=spacing,
    )  # fmt: skip
    os.environ.pop(textpass.ENV, None)
    qlist = sorted(set(QIDS) - {rng.choice(QIDS)})  # some of the run's queries left out
    for max_docs in (None, 1, 3):
        found = textpass.text_ranking(data, qlist, max_docs)
        assert found is not None, "a regular run declined"
        q, doc_id, score = found
        eq, edoc, escore = reader_ranking(data, qlist, max_docs)
        assert q.dtype == eq.dtype and q.tolist() == eq.tolist()
        assert doc_id.type == edoc.type and doc_id.to_pylist() == edoc.to_pylist()
        assert score.dtype == escore.dtype and score.tolist() == escore.tolist()


def test_a_ranking_by_hand(pass_on):
    """Two queries, the second first in the file, one unevaluated, ties by docno
    descending, a cut at 2: the rows by query index, in trec order."""
    if not textpass.BUILT:
        pytest.skip("the extension is not built")
    data = (
        b"b Q0 d1 1 3.0 t\nb Q0 d9 2 2.0 t\nb Q0 d2 3 2.0 t\n"
        b"x Q0 d5 1 9 t\n"
        b"a Q0 d3 1 1 t\na Q0 d4 2 5 t\n"
    )
    q, doc_id, score = textpass.text_ranking(data, ["a", "b"], 2)
    assert q.tolist() == [0, 0, 1, 1]
    assert doc_id.to_pylist() == ["d4", "d3", "d1", "d9"]
    assert score.tolist() == [5.0, 1.0, 3.0, 2.0]
    q, doc_id, _ = textpass.text_ranking(data, ["a", "b"], None)
    assert doc_id.to_pylist() == ["d4", "d3", "d1", "d9", "d2"]
    assert textpass.text_ranking(data + b"a Q0 d3 3 0 t\n", ["a"], None) is None  # a again
