"""A number depends on the inputs' meaning, never on their layout.

Every command (``compare -q``, ``metrics``, ``order`` with each method, ``discpower``
summaries and ``--pairs``, ``tau``, ``agree``, ``agree --ties``, ``robustness``) must
write the same bytes whatever the layout of its inputs:

* the order of the lines of a run, of the query blocks of a run, of the qrels lines;
* the order of the runs on the command line (outputs that list run pairs are equal up
  to the direction of each pair, and up to the row order that follows the command
  line);
* whitespace (tabs, runs of blanks, leading and trailing blanks, blank lines), CRLF and
  old-Mac CR line ends (or a mix of LF, CRLF and CR), a missing final newline, a UTF-8
  byte order mark, gzip compression;
* the cache being off, cold or warm (and warm with entries of other judgments);
* the run-file conventions trec_eval accepts: fields after the run tag, ``#`` comment
  lines, any iteration and rank column, any float syntax of a score; while a ``#``
  *inside* a docno or query id is data;
* reading one input from standard input (``-``), inputs from pipes (``<(zcat run.gz)``,
  ``/dev/fd/N``) and named pipes (FIFOs), each read once however often a command needs it.

The generated collections are small but awkward: docnos of 1 to 64 characters (a short
one often last in a file), docnos and query ids with ``#``, query ids ``1``, ``01``,
``10``, ``007``, ``7``, ``abc``, grades -2..4, subtopic qrels, many equal scores (docno
tie-breaking), runs missing queries or answering queries the qrels do not judge, and
runs that are copies of another run (exact ties between runs) or differ from one only
on a query.

A failure shows the command, the differing outputs as a unified diff, and stderr.
"""

from __future__ import annotations

import difflib
import gzip
import os
import random
import subprocess
import sys
import tempfile
import traceback
from dataclasses import dataclass, replace
from itertools import combinations
from pathlib import Path

import oracle
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from prefeval.cli import cli

# a sweep of every command over generated collections: `make test` runs it, `make test-fast` not
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]

# PREFEVAL_EXAMPLES=5 runs five times as many examples (a slower, more thorough run)
SCALE = float(os.environ.get("PREFEVAL_EXAMPLES", "1"))


def examples(n: int):
    return settings(
        max_examples=max(1, int(n * SCALE)),
        deadline=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
        ],
    )


# --------------------------------------------------------------------------- collections

# "1"/"01" and "7"/"007" are distinct queries with the same numeric value
QIDS = ("1", "01", "10", "2", "abc", "q#1", "007", "7", "B")
UNJUDGED_QIDS = ("999", "x#2", "abcd")  # in runs, never in the qrels
RUN_NAMES = ("sys10", "sys9", "A", "b", "copy", "base_run", "z-1")
DOC_FIRST = "abcdxyzDQ0123456789_"
DOC_CHARS = DOC_FIRST + "-.#"
FAMOUS_DOCNOS = ("msmarco_v2.1_doc_50_2286987788#13_3087841662", "d1", "d10", "d9", "D1", "x")
# many equal scores: docno tie-breaking decides most rankings
SCORES = (0.0, 1.0, 1.0, 1.0, 2.0, 2.0, 0.5, -1.0, 3.0, 7.25, 1e-300, -0.0)
SUBTOPIC_GRADES = (-2, 0, 1, 1, 2, 4)


@dataclass
class Collection:
    """qrels rows (qid, iteration, docno, grade): iteration 0 = plain judgment, else the
    subtopic id; runs: name -> (qid, docno, score) rows in trec order (query blocks in
    ``query_order``, score descending, docno descending)."""

    qrels: list
    runs: dict

    @property
    def names(self) -> list[str]:
        return list(self.runs)

    @property
    def has_subtopics(self) -> bool:
        return any(it != 0 for _, it, _, _ in self.qrels)

    def evaluated(self, level: float | None = None) -> list[str]:
        best: dict[tuple[str, str], int] = {}
        for q, _it, d, g in self.qrels:
            best[(q, d)] = max(g, best.get((q, d), g))
        return sorted(
            {q for (q, _d), g in best.items() if (g > 0 if level is None else g >= level)}
        )


@st.composite
def docnos(draw):
    kind = draw(st.sampled_from(["short", "short", "medium", "long", "famous"]))
    if kind == "famous":
        return draw(st.sampled_from(FAMOUS_DOCNOS))
    low, high = {"short": (1, 2), "medium": (3, 16), "long": (40, 64)}[kind]
    first = draw(st.sampled_from(DOC_FIRST))
    return first + draw(st.text(DOC_CHARS, min_size=low - 1, max_size=high - 1))


def trec_sorted(rows, query_order) -> list:
    """Rows as a real run file lists them: query blocks, score descending, docno descending."""
    where = {q: i for i, q in enumerate(query_order)}
    rows = sorted(rows, key=lambda r: r[1], reverse=True)
    return sorted(rows, key=lambda r: (where[r[0]], -r[2]))


@st.composite
def query_block(draw, qid, pool, max_docs=30):
    docs = draw(st.lists(st.sampled_from(pool), max_size=max_docs, unique=True))
    return [(qid, d, draw(st.sampled_from(SCORES))) for d in docs]


@st.composite
def collections(draw, min_runs=2, max_runs=6):
    qids = draw(st.lists(st.sampled_from(QIDS), min_size=2, max_size=8, unique=True))
    pool = draw(st.lists(docnos(), min_size=3, max_size=40, unique=True))
    subtopics = draw(st.integers(0, 3)) == 0
    qrels = []
    for k, q in enumerate(qids):
        judged = draw(st.lists(st.sampled_from(pool), min_size=k == 0, max_size=10, unique=True))
        for j, d in enumerate(judged):
            first = k == 0 and j == 0  # relevant at every level used here (grade >= 2)
            if subtopics:
                topics = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3, unique=True))
                for n, t in enumerate(topics):
                    grade = 2 if first and n == 0 else draw(st.sampled_from(SUBTOPIC_GRADES))
                    qrels.append((q, t, d, grade))
            else:
                grade = draw(st.integers(2, 4)) if first else draw(st.integers(-2, 4))
                qrels.append((q, 0, d, grade))
    run_qids = [*qids, *UNJUDGED_QIDS]
    n_runs = draw(st.integers(min_runs, max_runs))
    names = draw(st.permutations(RUN_NAMES))[:n_runs]
    runs: dict[str, list] = {}
    for k, name in enumerate(names):
        how = "fresh" if k == 0 else draw(st.sampled_from(["fresh", "fresh", "copy", "variant"]))
        if how == "fresh":
            rows = []
            for q in run_qids:
                if draw(st.integers(0, 4 if q in qids else 1)) == 0:
                    continue  # the run has no line for this query
                rows += draw(query_block(q, pool))
        else:
            # an exact copy of an earlier run, or one that differs on a single query
            rows = list(runs[draw(st.sampled_from(list(runs)))])
            if how == "variant":
                q = draw(st.sampled_from(qids))
                rows = [r for r in rows if r[0] != q] + draw(query_block(q, pool))
        runs[name] = trec_sorted(rows, run_qids)
    return Collection(qrels, runs)


# --------------------------------------------------------------------------- rendering

BOM = b"\xef\xbb\xbf"
MIXED_SEPARATORS = (" ", "\t", "  ", " \t", "\t\t ", "   ")
LINE_STARTS = ("", " ", "\t", "  \t")
LINE_ENDS = ("", " ", "\t", " \t ")
COMMENTS = (
    "# a comment",
    "#",
    "# 1 Q0 d1 1 9.5 fake",
    "#1 0 d1 4",
    "#\tcomment with\ttabs   and blanks",
)
EXTRA_FIELDS = ("extra", "7", "a=b", "0.5 more")


@dataclass(frozen=True)
class Style:
    """How a file is written; the defaults are the canonical layout (single spaces,
    LF, run tag present, ``Q0``/``0`` iterations, ranks 1..n, scores as Python's repr)."""

    sep: str = " "  # " ", "\t", "  " or "mixed" (a random choice per gap)
    edges: bool = False  # leading and trailing blanks on lines
    eol: str = "\n"  # "\n", "\r\n", "\r" (old Mac OS) or "mixed" (any of them per line)
    final_eol: bool = True
    blank_lines: bool = False  # empty and whitespace-only lines in between
    bom: bool = False
    gzip: bool = False
    gz_name: bool = False  # gzip file named *.gz (run name unchanged)
    comments: bool = False  # "#" lines, also first and last
    extra_fields: bool = False  # runs: fields after the tag
    tag: str = "yes"  # runs: "yes", "no" or "mixed" (per line)
    iteration: str = "canonical"  # qrels 0 -> "Q0"/mixed; runs Q0 -> 0, q0, x...
    ranks: str = "position"  # runs: "position", "random", "constant"
    scores: str = "repr"  # runs: "repr" or "varied" (other spellings of the same float)


CANONICAL = Style()


def score_text(score: float, how: str, rnd: random.Random) -> str:
    if how == "repr":
        return repr(score)
    choices = [repr(score), f"{score:.17g}", f"{score:.17e}", repr(score).upper()]
    if score == int(score) and abs(score) < 1e15:
        choices += [str(int(score)), f"{score:.3f}"]
    if not repr(score).startswith("-"):
        choices.append("+" + repr(score))
    if repr(score).startswith("0."):
        choices.append(repr(score)[1:])
    return rnd.choice([c for c in choices if float(c) == score])


def join_fields(fields, style: Style, rnd: random.Random) -> str:
    if style.sep == "mixed":
        seps = [rnd.choice(MIXED_SEPARATORS) for _ in fields[1:]]
    else:
        seps = [style.sep] * (len(fields) - 1)
    line = fields[0] + "".join(s + f for s, f in zip(seps, fields[1:]))
    if style.edges:
        line = rnd.choice(LINE_STARTS) + line + rnd.choice(LINE_ENDS)
    return line


def assemble(lines: list[str], style: Style, rnd: random.Random) -> bytes:
    lines = list(lines)
    if style.comments:
        for _ in range(rnd.randint(1, 3)):
            lines.insert(rnd.randint(0, len(lines)), rnd.choice(COMMENTS))
        lines.insert(0, rnd.choice(COMMENTS))
        lines.append(rnd.choice(COMMENTS))
    if style.blank_lines:
        for _ in range(rnd.randint(1, 3)):
            lines.insert(rnd.randint(0, len(lines)), rnd.choice(["", " ", "\t", " \t "]))
    if style.eol == "mixed":
        eols = [rnd.choice(["\n", "\r\n", "\r"]) for _ in lines]
    else:
        eols = [style.eol] * len(lines)
    if lines and not style.final_eol:
        eols[-1] = ""
    data = "".join(line + eol for line, eol in zip(lines, eols)).encode("utf-8")
    if style.bom:
        data = BOM + data
    if style.gzip:
        data = gzip.compress(data, mtime=0)
    return data


def qrels_bytes(rows, style: Style, rnd: random.Random) -> bytes:
    lines = []
    for q, it, d, g in rows:
        iteration = str(it)
        if it == 0 and style.iteration != "canonical":
            iteration = rnd.choice(["Q0", "0", "Q0"])
        lines.append(join_fields([q, iteration, d, str(g)], style, rnd))
    return assemble(lines, style, rnd)


def run_bytes(rows, style: Style, rnd: random.Random) -> bytes:
    lines = []
    rank: dict[str, int] = {}
    for q, d, s in rows:
        rank[q] = rank.get(q, 0) + 1
        iteration = "Q0" if style.iteration == "canonical" else rnd.choice(["Q0", "0", "q0", "x"])
        if style.ranks == "position":
            rank_text = str(rank[q])
        elif style.ranks == "random":
            rank_text = str(rnd.randint(0, 9999))
        else:
            rank_text = "0"
        fields = [q, iteration, d, rank_text, score_text(s, style.scores, rnd)]
        if style.tag == "yes" or (style.tag == "mixed" and rnd.random() < 0.5):
            fields.append("tag")
            if style.extra_fields and rnd.random() < 0.7:
                fields += rnd.choice(EXTRA_FIELDS).split()
        lines.append(join_fields(fields, style, rnd))
    return assemble(lines, style, rnd)


def write_files(
    folder: Path,
    c: Collection,
    qstyle: Style = CANONICAL,
    rstyle: Style = CANONICAL,
    rnd: random.Random | None = None,
    order: list[str] | None = None,
) -> list[str]:
    """Write the qrels and runs of ``c`` into ``folder``; returns [qrels, run...] with the
    runs in ``order`` (default: the collection's)."""
    rnd = rnd or random.Random(0)
    folder.mkdir(parents=True, exist_ok=True)
    qrels = folder / ("qrels.txt.gz" if qstyle.gz_name else "qrels.txt")
    qrels.write_bytes(qrels_bytes(c.qrels, qstyle, rnd))
    paths = {}
    for name, rows in c.runs.items():
        path = folder / (f"input.{name}.gz" if rstyle.gz_name else f"input.{name}")
        path.write_bytes(run_bytes(rows, rstyle, rnd))
        paths[name] = str(path)
    return [str(qrels), *(paths[n] for n in (order or c.names))]


# --------------------------------------------------------------------------- layouts


def shuffled_lines(c: Collection, rnd: random.Random) -> Collection:
    runs = {}
    for name, rows in c.runs.items():
        rows = list(rows)
        rnd.shuffle(rows)
        runs[name] = rows
    return Collection(c.qrels, runs)


def shuffled_blocks(c: Collection, rnd: random.Random) -> Collection:
    runs = {}
    for name, rows in c.runs.items():
        blocks: dict[str, list] = {}
        for row in rows:
            blocks.setdefault(row[0], []).append(row)
        order = list(blocks)
        rnd.shuffle(order)
        runs[name] = [row for q in order for row in blocks[q]]
    return Collection(c.qrels, runs)


def shuffled_qrels(c: Collection, rnd: random.Random) -> Collection:
    rows = list(c.qrels)
    rnd.shuffle(rows)
    return Collection(rows, c.runs)


# --------------------------------------------------------------------------- commands

ANALYSIS = (
    "order-mc4",
    "order-borda",
    "order-winrate",
    "order-copeland",
    "discpower",
    "discpower-pairs",
    "tau",
    "agree",
    "agree-ties",
    "robustness",
    "pairs",
)
ALL_COMMANDS = ("compare", "metrics", *ANALYSIS)
# engine options a command is run with (layout invariance must hold under each)
OPTIONS = ((), (), ("--binary",), ("-M", "3"), ("-l", "2"))


def command(label: str, c: Collection, options=()) -> list[str]:
    """prefeval arguments (before the input files) for a command label."""
    options = list(options)
    if label == "compare":
        return ["compare", "-q", *options]
    if label == "metrics":  # no --binary here
        return ["metrics", "-q", *(o for o in options if o != "--binary")]
    if label.startswith("order-"):
        return ["order", "--method", label[len("order-") :], *options]
    if label == "discpower":
        return ["discpower", "--trials", "200", "--seed", "7", *options]
    if label == "discpower-pairs":
        return ["discpower", "--pairs", "--trials", "200", "--seed", "7", *options]
    if label == "tau":
        return ["tau", *options]
    if label == "agree":
        return ["agree", *options]
    if label == "agree-ties":
        return ["agree", "--ties", *options]
    if label == "pairs":
        return ["pairs", *options]
    if label == "robustness":
        level = float(options[options.index("-l") + 1]) if "-l" in options else None
        sizes = "1,2" if len(c.evaluated(level)) >= 2 else "1"
        return [
            "robustness",
            "--queries",
            sizes,
            "--labels",
            "0.5,1",
            "--samples",
            "3",
            "--seed",
            "1",
            *options,
        ]
    raise ValueError(label)


def run_cli(args, env=None, input=None):
    """``prefeval ARGS`` in-process."""
    return CliRunner().invoke(
        cli, [str(a) for a in args], env=env, input=input, catch_exceptions=True
    )


def explain(result, args) -> str:
    text = f"$ prefeval {' '.join(map(str, args))}\nexit status {result.exit_code}\n"
    if result.stderr:
        text += f"stderr:\n{result.stderr[-3000:]}"
    if result.exc_info is not None and not isinstance(result.exception, SystemExit):
        text += "".join(traceback.format_exception(*result.exc_info))[-4000:]
    return text


def diff(a: str, b: str, name_a: str, name_b: str) -> str:
    lines = difflib.unified_diff(a.splitlines(True), b.splitlines(True), name_a, name_b, n=1)
    text = "".join(lines)
    return text if len(text) < 8000 else text[:8000] + "\n[... diff truncated]"


def output(args, env=None, input=None) -> str:
    """stdout of a command that must succeed."""
    result = run_cli(args, env=env, input=input)
    assert result.exit_code == 0, explain(result, args)
    return result.stdout


def assert_same(what: str, args_a, args_b, normalise=None, env_a=None, env_b=None):
    """Both commands succeed and write the same output (after ``normalise``)."""
    a = output(args_a, env=env_a)
    result = run_cli(args_b, env=env_b)
    if result.exit_code != 0:
        pytest.fail(f"{what}: the reference succeeded but\n{explain(result, args_b)}")
    b = result.stdout
    if normalise is not None:
        a, b = normalise(a), normalise(b)
    if a != b:
        pytest.fail(
            f"{what}: outputs differ\n$ prefeval {' '.join(map(str, args_a))}\n"
            f"$ prefeval {' '.join(map(str, args_b))}\n" + diff(a, b, "reference", "variant")
        )


def check_commands(what, labels, c, ref_files, var_files, options=(), normalise=None):
    for label in labels:
        args = command(label, c, options)
        note(f"{what}: {label}")
        norm = normalise(label) if normalise else None
        assert_same(f"{what} / {label}", [*args, *ref_files], [*args, *var_files], norm)


# --------------------------------------------------------------------------- normalising


def table(text: str) -> tuple[list[str], list[list[str]]]:
    lines = text.split("\n")
    assert lines[-1] == "", "output does not end with a newline"
    return lines[0].split("\t"), [line.split("\t") for line in lines[1:-1]]


def untable(header, rows) -> str:
    return "".join("\t".join(r) + "\n" for r in [header, *rows])


def negated(text: str) -> str:
    """The float text of -x (the writer prints -0.0 as 0.0)."""
    if text in ("", "0.0", "nan"):
        return text
    return text[1:] if text.startswith("-") else "-" + text


def first_index(values) -> dict:
    out: dict = {}
    for v in values:
        out.setdefault(v, len(out))
    return out


def run_order_normaliser(reference_names):
    """Normaliser of one command's output for a reference command-line order of the runs:
    each pair written in reference direction (run_a first; compare's value negated when
    swapped) and rows that follow command-line order put in reference order.  order's
    rows are compared as written (runs that share a rank are listed by name); so is the
    order of measures, tests and queries."""
    pos = {n: i for i, n in enumerate(reference_names)}
    pair_pos = {p: i for i, p in enumerate(combinations(reference_names, 2))}

    def make(label):
        def normalise(text: str) -> str:
            header, rows = table(text)
            col = {h: i for i, h in enumerate(header)}
            if "run_a" in col:
                a, b = col["run_a"], col["run_b"]
                for r in rows:
                    if pos[r[a]] > pos[r[b]]:
                        r[a], r[b] = r[b], r[a]
                        if "value" in col:
                            r[col["value"]] = negated(r[col["value"]])
                        if "mean" in col:  # pairs: the other side's view of the pair
                            lo, hi = col["ci_low"], col["ci_high"]
                            r[col["mean"]] = negated(r[col["mean"]])
                            r[lo], r[hi] = negated(r[hi]), negated(r[lo])
                            r[col["wins"]], r[col["losses"]] = r[col["losses"]], r[col["wins"]]
                            if "effect" in col:
                                r[col["effect"]] = negated(r[col["effect"]])
                measure = first_index(r[col["measure"]] for r in rows)
                if "mean" in col:  # pairs
                    rows.sort(key=lambda r: (measure[r[col["measure"]]], pair_pos[(r[a], r[b])]))
                elif "test" in col:  # discpower --pairs
                    test = first_index(r[col["test"]] for r in rows)
                    rows.sort(
                        key=lambda r: (
                            measure[r[col["measure"]]],
                            test[r[col["test"]]],
                            pair_pos[(r[a], r[b])],
                        )
                    )
                else:  # compare: per-query rows, then summary rows
                    rows.sort(
                        key=lambda r: (
                            r[col["query_id"]] == "all",
                            measure[r[col["measure"]]],
                            pair_pos[(r[a], r[b])],
                        )
                    )
            elif label == "metrics":
                measure = first_index(r[col["measure"]] for r in rows)
                rows.sort(key=lambda r: (measure[r[col["measure"]]], pos[r[col["run"]]]))
            return untable(header, rows)

        return normalise

    return make


# --------------------------------------------------------------------------- the crash case


def test_short_last_docno_does_not_crash(tmp_path):
    """A short docno as the last docno of a file, after a longer one, is read right by the
    fast reader (whose docno hashing must not read eight-byte words past the end of the
    docno buffer).

    qrels: query 1, d1 relevant (grade 1). a ranks abcdefghi (2) then d1 (1): d1 at 2;
    b ranks d1 at 1.  m = 1, so every RPP weighting is sgn(1 - 2) = -1, lexirecall and
    lexiprecision -1, rrLP 1/2 - 1/1 = -0.5."""
    (tmp_path / "q").write_text("1 0 d1 1\n")
    (tmp_path / "a").write_text("1 Q0 abcdefghi 1 2 r\n1 Q0 d1 2 1 r\n")
    (tmp_path / "b").write_text("1 Q0 d1 1 2 r\n")
    expected = (
        "measure\trun_a\trun_b\tquery_id\tvalue\n"
        "rpp\ta\tb\tall\t-1.0\n"
        "dcgrpp\ta\tb\tall\t-1.0\n"
        "invrpp\ta\tb\tall\t-1.0\n"
        "lexirecall\ta\tb\tall\t-1.0\n"
        "lexiprecision\ta\tb\tall\t-1.0\n"
        "rrlexiprecision\ta\tb\tall\t-0.5\n"
    )
    files = [tmp_path / "q", tmp_path / "a", tmp_path / "b"]
    assert output(["compare", "--no-cache", *files]) == expected
    assert output(["compare", *files]) == expected  # cold cache, then warm
    assert output(["compare", *files]) == expected
    per_query = output(["compare", "-q", "-m", "rpp,rrLP", *files])
    assert per_query == (
        "measure\trun_a\trun_b\tquery_id\tvalue\n"
        "rpp\ta\tb\t1\t-1.0\n"
        "rrlexiprecision\ta\tb\t1\t-0.5\n"
        "rpp\ta\tb\tall\t-1.0\n"
        "rrlexiprecision\ta\tb\tall\t-0.5\n"
    )
    out = tmp_path / "out.tsv"
    result = run_cli(["compare", "-o", out, *files])
    assert result.exit_code == 0, explain(result, ["compare", "-o", out, *files])
    assert out.read_text() == expected


# --------------------------------------------------------------------------- line order


@examples(20)
@given(
    collections(),
    st.sampled_from(["run-lines", "query-blocks", "qrels-lines", "all"]),
    st.sampled_from(OPTIONS),
    st.randoms(use_true_random=False),
)
def test_line_order(c, kind, options, rnd):
    """Shuffling the lines of each run, the order of its query blocks, or the qrels lines
    changes no output of any command."""
    variant = c
    if kind in ("run-lines", "all"):
        variant = shuffled_lines(variant, rnd)
    if kind in ("query-blocks", "all"):
        variant = shuffled_blocks(variant, rnd)
    if kind in ("qrels-lines", "all"):
        variant = shuffled_qrels(variant, rnd)
    with tempfile.TemporaryDirectory() as tmp:
        ref = write_files(Path(tmp, "ref"), c)
        var = write_files(Path(tmp, "var"), variant)
        check_commands(kind, ALL_COMMANDS, c, ref, var, options)


# --------------------------------------------------------------------------- run order


@examples(20)
@given(collections(), st.sampled_from(OPTIONS), st.booleans(), st.randoms(use_true_random=False))
def test_command_line_run_order(c, options, reverse, rnd):
    """Reversing or permuting the runs on the command line: compare's pairs come back
    reversed with negated values, discpower --pairs with equal p-values, metrics rows in
    another order; every number, every order/tau/agree/discpower/robustness row is the
    same, and order's rows are in the same order (runs that share a rank by name)."""
    order = c.names[::-1] if reverse else rnd.sample(c.names, len(c.names))
    note(f"command-line order {order}")
    normalise = run_order_normaliser(c.names)
    with tempfile.TemporaryDirectory() as tmp:
        ref = write_files(Path(tmp), c)
        var = [ref[0], *(ref[1 + c.names.index(n)] for n in order)]
        check_commands("run order", ALL_COMMANDS, c, ref, var, options, normalise)


@pytest.mark.parametrize("method", ["mc4", "borda", "winrate", "copeland"])
def test_order_lists_shared_ranks_by_name(method):
    """On the sample data sys04 and sys05 share rank 3 of lexiprecision by Copeland:
    order lists them by name whatever their command-line order, so that reversing the
    runs writes the same bytes for every method."""
    sample = REPO / "sample_data"
    runs = sorted(str(p) for p in (sample / "runs").glob("input.*"))
    args = ["order", "--no-baselines", "--method", method, str(sample / "qrels.txt")]
    forward = output([*args, *runs])
    assert output([*args, *runs[::-1]]) == forward
    if method == "copeland":
        rows = [r.split("\t") for r in forward.splitlines()[1:]]
        shared = [r[3] for r in rows if r[0] == "lexiprecision" and r[2] == "3"]
        assert shared == ["sys04", "sys05"]


def test_order_baseline_means_do_not_depend_on_run_order():
    """The baselines' means (order's ``mean`` rows) are the same floats whatever the runs'
    order on the command line: on the sample data, reversing the runs gave pandas'
    other memory layout for the queries x runs matrices, which numpy sums in another
    order (AP of sys05 0.30742799903804496, then ...49)."""
    sample = REPO / "sample_data"
    runs = sorted(str(p) for p in (sample / "runs").glob("input.*"))
    args = ["order", "--no-cache", str(sample / "qrels.txt")]
    forward = output([*args, *runs])
    assert "AP\tmean\t4\tsys05\t0.30742799903804496" in forward
    assert output([*args, *runs[::-1]]) == forward


@st.composite
def with_copy(draw):
    """A collection plus an exact copy of one of its runs under an unused name (which may
    sort before or after the original's)."""
    c = draw(collections(max_runs=4))
    original = draw(st.sampled_from(c.names))
    name = draw(st.sampled_from([n for n in RUN_NAMES if n not in c.runs]))
    runs = dict(c.runs)
    runs[name] = list(runs[original])
    names = draw(st.permutations(list(runs)))
    return Collection(c.qrels, {n: runs[n] for n in names}), original, name


@examples(15)
@given(with_copy(), st.sampled_from(OPTIONS))
def test_copies_are_indistinguishable(case, options):
    """Two runs with the same content mean the same: compare gives Delta(orig, copy) = 0
    and Delta(orig, x) = Delta(copy, x) for every other run x; metrics the same values;
    order (every method) the same rank and the same score, bit for bit; discpower --pairs
    the same p-values against every other run.  (Numbers that differ in the last bits
    between two copies are decided by floating-point noise, not by the inputs.)"""
    c, original, copy = case
    note(f"{copy} is a copy of {original}")
    with tempfile.TemporaryDirectory() as tmp:
        files = write_files(Path(tmp), c)
        for label in ("compare", "metrics", *ANALYSIS[:4], "discpower-pairs"):
            args = [*command(label, c, options), *files]
            text = output(args)
            bad = copy_mismatches(label, text, original, copy)
            if bad:
                pytest.fail(
                    f"{label}: a run and its copy get different numbers\n"
                    f"$ prefeval {' '.join(args)}\n" + "\n".join(bad[:12])
                )


NUMBERS = ("value", "score", "rank", "p_value", "p_adjusted")


def copy_mismatches(label: str, text: str, original: str, copy: str) -> list[str]:
    """Rows of ``text`` about ``original`` whose numbers differ from the same row about
    ``copy`` (pairs matched in either direction; compare's value negated when reversed),
    and compare rows between the two that are not 0."""
    header, rows = table(text)
    col = {h: i for i, h in enumerate(header)}
    numbers = [col[h] for h in NUMBERS if h in col]
    keyed = [i for i in range(len(header)) if i not in numbers]
    run_cols = [col[h] for h in ("run", "run_a", "run_b") if h in col]
    swap = {original: copy, copy: original}
    by_key = {tuple(r[i] for i in keyed): r for r in rows}
    bad = []
    for r in rows:
        mentioned = {r[i] for i in run_cols}
        if mentioned == {original, copy}:
            if label == "compare" and r[col["value"]] != "0.0":
                bad.append("not 0 between copies: " + "\t".join(r))
            continue
        if original not in mentioned:
            continue
        twin = [swap.get(r[i], r[i]) if i in run_cols else r[i] for i in range(len(r))]
        reverse = tuple(twin[i] for i in keyed) not in by_key
        if reverse:  # the copy's pair is written the other way round
            a, b = col["run_a"], col["run_b"]
            twin[a], twin[b] = twin[b], twin[a]
        other = by_key[tuple(twin[i] for i in keyed)]
        mine = [r[i] for i in numbers]
        theirs = [other[i] for i in numbers]
        if reverse and label == "compare":
            theirs = [negated(t) for t in theirs]
        if mine != theirs:
            bad.append("\t".join(r) + "\n" + "\t".join(other) + ("  (reversed)" if reverse else ""))
    return bad


# --------------------------------------------------------------------------- text style


@st.composite
def targets(draw, qstyle: Style, rstyle: Style):
    """Apply the styles to the qrels, to the runs, or to both."""
    which = draw(st.sampled_from(["qrels", "runs", "both"]))
    return (
        qstyle if which != "runs" else CANONICAL,
        rstyle if which != "qrels" else CANONICAL,
        which,
    )


@st.composite
def whitespace_styles(draw):
    style = Style(
        sep=draw(st.sampled_from([" ", "\t", "  ", "mixed"])),
        edges=draw(st.booleans()),
        eol=draw(st.sampled_from(["\n", "\r\n", "\r", "mixed"])),
        final_eol=draw(st.booleans()),
        blank_lines=draw(st.booleans()),
    )
    if style == CANONICAL:
        style = replace(style, sep="\t")
    return draw(targets(style, style))


@examples(25)
@given(
    collections(),
    whitespace_styles(),
    st.lists(st.sampled_from(ANALYSIS), min_size=1, max_size=2, unique=True),
    st.sampled_from(OPTIONS),
    st.randoms(use_true_random=False),
)
def test_whitespace_and_line_ends(c, styles, analysis, options, rnd):
    """Tabs, runs of blanks, leading and trailing blanks, blank lines, CRLF or CR (or mixed
    LF/CRLF/CR) line ends and a missing final newline change nothing."""
    qstyle, rstyle, which = styles
    with tempfile.TemporaryDirectory() as tmp:
        ref = write_files(Path(tmp, "ref"), c)
        var = write_files(Path(tmp, "var"), c, qstyle, rstyle, rnd)
        check_commands(
            f"whitespace ({which})", ["compare", "metrics", *analysis], c, ref, var, options
        )


@examples(12)
@given(
    collections(),
    st.sampled_from(["qrels", "runs", "both"]),
    st.sampled_from(["\n", "\r\n", "\r"]),
    st.sampled_from([" ", "\t"]),
    st.sampled_from(ANALYSIS),
)
def test_utf8_bom(c, which, eol, sep, analysis):
    """A UTF-8 byte order mark at the start of the qrels or of a run file is not part of
    the first query id (nor a field of its own), on every reader path (tabs send files
    to the careful line parser) and in an otherwise empty run file."""
    style = Style(bom=True, eol=eol, sep=sep)
    qstyle = style if which != "runs" else CANONICAL
    rstyle = style if which != "qrels" else CANONICAL
    with tempfile.TemporaryDirectory() as tmp:
        ref = write_files(Path(tmp, "ref"), c)
        var = write_files(Path(tmp, "var"), c, qstyle, rstyle)
        check_commands(f"BOM ({which})", ["compare", "metrics", analysis], c, ref, var)


@examples(12)
@given(
    collections(),
    st.sampled_from(["qrels", "runs", "both"]),
    st.booleans(),
    st.sampled_from(ANALYSIS),
)
def test_gzip(c, which, gz_name, analysis):
    """gzip-compressed qrels and runs (named *.gz or not) read like the plain files."""
    style = Style(gzip=True, gz_name=gz_name)
    qstyle = style if which != "runs" else CANONICAL
    rstyle = style if which != "qrels" else CANONICAL
    with tempfile.TemporaryDirectory() as tmp:
        ref = write_files(Path(tmp, "ref"), c)
        var = write_files(Path(tmp, "var"), c, qstyle, rstyle)
        check_commands(f"gzip ({which})", ["compare", "metrics", analysis], c, ref, var)


# --------------------------------------------------------------------------- conventions


@st.composite
def convention_styles(draw):
    style = Style(
        comments=draw(st.booleans()),
        extra_fields=draw(st.booleans()),
        tag=draw(st.sampled_from(["yes", "no", "mixed"])),
        iteration=draw(st.sampled_from(["canonical", "varied"])),
        ranks=draw(st.sampled_from(["position", "random", "constant"])),
        scores=draw(st.sampled_from(["repr", "varied"])),
    )
    if style == CANONICAL:
        style = replace(style, comments=True)
    return draw(targets(style, style))


@examples(25)
@given(
    collections(),
    convention_styles(),
    st.sampled_from(ANALYSIS),
    st.randoms(use_true_random=False),
)
def test_trec_eval_conventions(c, styles, analysis, rnd):
    """What trec_eval accepts means what it means to trec_eval: ``#`` comment lines are
    skipped (in qrels and runs), fields after the run tag are ignored, the tag may be
    missing, the run's iteration and rank columns are ignored, qrels' ``Q0`` is ``0``,
    and a score is its value whatever its spelling (``2``, ``2.0``, ``+2.000``, ``2E0``)."""
    qstyle, rstyle, which = styles
    with tempfile.TemporaryDirectory() as tmp:
        ref = write_files(Path(tmp, "ref"), c)
        var = write_files(Path(tmp, "var"), c, qstyle, rstyle, rnd)
        check_commands(f"conventions ({which})", ["compare", "metrics", analysis], c, ref, var)


def renamed(c: Collection, old: str, new: str) -> Collection:
    """``old`` replaced by ``new`` in every query id and docno."""

    def r(text: str) -> str:
        return text.replace(old, new)

    return Collection(
        [(r(q), it, r(d), g) for q, it, d, g in c.qrels],
        {n: [(r(q), r(d), s) for q, d, s in rows] for n, rows in c.runs.items()},
    )


@examples(20)
@given(collections(), st.sampled_from(OPTIONS))
def test_hash_inside_ids_is_data(c, options):
    """A ``#`` inside a docno (``msmarco_v2.1_doc_50_2286987788#13_3087841662``) or a query
    id (``q#1``) is part of it, not the start of a comment: the collection gives the
    numbers of the same collection with ``#`` renamed ``$`` (an order-preserving renaming:
    no generated id has ``$``, which sorts right after ``#``), and compare's per-query
    values are the oracle's.  (Comment lines themselves: test_trec_eval_conventions.)"""
    dollar = renamed(c, "#", "$")
    with tempfile.TemporaryDirectory() as tmp:
        hashed = write_files(Path(tmp, "hash"), c)
        plain = write_files(Path(tmp, "dollar"), dollar)
        for label in ("compare", "metrics"):
            args = command(label, c, options)
            got = output([*args, *hashed])
            want = output([*args, *plain]).replace("$", "#")
            if got != want:
                pytest.fail(
                    f"{label}: ids with '#' read differently\n" + diff(want, got, "$ ids", "# ids")
                )
        frame_text = output([*command("compare", c, options), *hashed])
    header, rows = table(frame_text)
    got = {tuple(r[:4]): float(r[4]) for r in rows}
    values = oracle.evaluate(
        c.qrels,
        c.runs,
        level=2 if "-l" in options else None,
        max_docs=3 if "-M" in options else None,
        binary="--binary" in options,
    )
    summary = {(m, a, b, "all"): v for (m, a, b), v in oracle.summarize(values).items()}
    oracle.assert_matches(got, {**values, **summary}, tol=1e-12)


# --------------------------------------------------------------------------- cache

CACHED_COMMANDS = ("compare", "metrics", *ANALYSIS)


@examples(15)
@given(
    collections(),
    st.lists(st.sampled_from(CACHED_COMMANDS), min_size=1, max_size=2, unique=True),
    st.sampled_from(OPTIONS),
)
def test_cache_off_cold_warm(c, labels, options):
    """--no-cache, a fresh cache folder and the same folder a second time give the same
    output."""
    with tempfile.TemporaryDirectory() as tmp:
        files = write_files(Path(tmp, "in"), c)
        for label in labels:
            args = [*command(label, c, options), *files]
            folder = tempfile.mkdtemp(dir=tmp)
            env = {"PREFEVAL_CACHE_DIR": folder}
            off = output(
                [*args, "--no-cache"], env={"PREFEVAL_CACHE_DIR": tempfile.mkdtemp(dir=tmp)}
            )
            for state in ("cold", "warm"):
                got = output(args, env=env)
                if got != off:
                    pytest.fail(
                        f"{label}: {state} cache differs from --no-cache\n"
                        + diff(off, got, "--no-cache", f"{state} cache")
                    )


@st.composite
def regraded(draw, c: Collection) -> Collection:
    """The same relevant documents at the levels used here (general grade <= 0, 1 and >= 2
    exactly where before), with other grades and, for subtopic qrels, each document judged
    for other subtopics."""

    def grade(g: int) -> int:
        if g >= 2:
            return draw(st.integers(2, 4))
        return 1 if g == 1 else draw(st.integers(-2, 0))

    groups: dict[tuple[str, str], list] = {}
    for q, it, d, g in c.qrels:
        groups.setdefault((q, d), []).append((it, g))
    rows = []
    for (q, d), judged in groups.items():
        if judged[0][0] == 0:
            rows += [(q, 0, d, grade(g)) for _, g in judged]
        else:
            topics = draw(st.permutations([1, 2, 3]))[: len(judged)]
            rows += [(q, t, d, grade(g)) for t, (_, g) in zip(topics, judged)]
    return Collection(rows, c.runs)


@examples(15)
@given(st.data(), collections(), st.sampled_from(CACHED_COMMANDS), st.sampled_from(OPTIONS))
def test_cache_does_not_mix_judgments(data, c, label, options):
    """A warm cache filled by other judgments of the same documents (other grades, other
    subtopics, same relevant sets) does not change a result: graded and subtopic
    preferences depend on more than which documents are relevant."""
    other = data.draw(regraded(c), label="regraded")
    with tempfile.TemporaryDirectory() as tmp:
        first = write_files(Path(tmp, "first"), c)
        second = write_files(Path(tmp, "second"), other)
        args = command(label, c, options)
        env = {"PREFEVAL_CACHE_DIR": tempfile.mkdtemp(dir=tmp)}
        output([*args, *first], env=env)  # fills the cache
        truth = output([*args, "--no-cache", *second], env={"PREFEVAL_CACHE_DIR": tmp + "/off"})
        got = output([*args, *second], env=env)
        if got != truth:
            pytest.fail(
                f"{label}: a cache entry of other judgments leaked into the result\n"
                + diff(truth, got, "--no-cache", "warm cache")
            )


# --------------------------------------------------------------------------- stdin

STDIN_QRELS = [
    ("1", 0, "d1", 1),
    ("1", 0, "msmarco_v2.1_doc_50_2286987788#13_3087841662", 2),
    ("1", 0, "z", 0),
    ("01", 0, "d10", 3),
    ("01", 0, "d9", 1),
    ("01", 0, "a#", -2),
    ("abc", 0, "x", 1),
    ("q#1", 0, "d1", 4),
]
STDIN_RUNS = {
    "first": [
        ("1", "abcdefghijklmnopqrstuvwxyz0123456789", 2.0),
        ("1", "d1", 1.0),
        ("1", "msmarco_v2.1_doc_50_2286987788#13_3087841662", 1.0),
        ("01", "d9", 1.0),
        ("01", "d10", 1.0),
        ("abc", "x", 0.5),
        ("999", "d1", 3.0),
        ("q#1", "d1", 0.0),
        ("q#1", "e", 0.0),
    ],
    "middle": [
        ("01", "d10", 5.0),
        ("1", "msmarco_v2.1_doc_50_2286987788#13_3087841662", 1.0),
        ("1", "d1", 1.0),
        ("q#1", "zz", 1.0),
        ("q#1", "d1", 1.0),
        ("1", "x", 1.0),
    ],
    "last": [
        ("1", "d1", 1.0),
        ("1", "d1x", 1.0),
        ("01", "d9", 2.0),
        ("abc", "x", 1.0),
        ("q#1", "d1", 1.0),
    ],
}
STDIN_CASES = [
    ("compare", "qrels", False),
    ("compare", "qrels", True),
    ("compare", "middle", False),
    ("compare", "middle", True),
    ("metrics", "last", False),
    ("agree", "qrels", False),
    ("agree", "first", False),
    ("robustness-labels", "middle", False),
]


def stdin_args(label: str) -> list[str]:
    if label == "compare":
        return ["compare", "-q"]
    if label == "metrics":
        return ["metrics", "-q"]
    if label == "agree":
        return ["agree"]
    return ["robustness", "--labels", "0.5", "--samples", "2", "--seed", "1"]


@pytest.mark.parametrize("label, which, compressed", STDIN_CASES)
def test_stdin(tmp_path, label, which, compressed):
    """``-`` as the qrels or as one run reads standard input (as trec_eval 10 allows),
    plain or gzip, and gives the output of the same file; a run read from stdin is named
    ``stdin`` (README), so the reference file of that run is ``input.stdin``.  Also a run
    that a command reads more than once (preferences, then baselines; robustness
    recomputes them).  Run as a real process: stdin is the process's standard input."""
    runs = {("stdin" if name == which else name): rows for name, rows in STDIN_RUNS.items()}
    c = Collection(STDIN_QRELS, runs)
    style = Style(gzip=compressed)
    files = write_files(tmp_path / "files", c, style, style)
    args = stdin_args(label)
    want = output([*args, *files])
    index = 0 if which == "qrels" else 1 + c.names.index("stdin")
    data = Path(files[index]).read_bytes()
    piped = [*files[:index], "-", *files[index + 1 :]]
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [sys.executable, "-m", "prefeval", *args, *piped],
        input=data,
        capture_output=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    shown = f"$ prefeval {' '.join(args + piped)} < {files[index]}"
    assert proc.returncode == 0, f"{shown}\nexit {proc.returncode}\n{proc.stderr.decode()[-3000:]}"
    got = proc.stdout.decode()
    if got != want:
        pytest.fail(f"{shown}: differs from the file\n" + diff(want, got, "file", "stdin"))


# --------------------------------------------------------------------------- pipes and FIFOs


def parquet_bytes(rows, kind: str) -> bytes:
    """A Parquet file of a run's (qid, docno, score) or the qrels' (qid, it, docno, grade)
    rows."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    def text(values):
        return pa.array(values, pa.string())  # typed also when empty

    if kind == "run":
        columns = {"query_id": text([r[0] for r in rows]), "doc_id": text([r[1] for r in rows])}
        columns["score"] = pa.array([float(r[2]) for r in rows], pa.float64())
    else:
        columns = {"query_id": text([r[0] for r in rows]), "doc_id": text([r[2] for r in rows])}
        columns["relevance"] = pa.array([int(r[3]) for r in rows], pa.int64())
        columns["iteration"] = pa.array([int(r[1]) for r in rows], pa.int64())
    out = io.BytesIO()
    pq.write_table(pa.table(columns), out)
    return out.getvalue()


class Streams:
    """Inputs given as streams that can be read once: named pipes (``mkfifo``) or pipes
    (``os.pipe``, reached through a link ``NAME -> /dev/fd/N``, so that a run keeps the
    name of its file), each written by a thread of its own, as a shell's ``cat file >
    fifo &`` or ``<(cat file)`` writes them.  :meth:`close` ends the writers of streams a
    failed command did not read."""

    def __init__(self, kind: str):
        self.kind = kind
        self.threads: list = []
        self.fifos: list[Path] = []
        self.read_ends: list[int] = []

    @staticmethod
    def _write(target, data: bytes) -> None:
        try:
            fd = target if isinstance(target, int) else os.open(target, os.O_WRONLY)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
        except OSError:  # the reader closed without reading all (a failed command)
            pass

    def add(self, path: Path, data: bytes) -> None:
        import threading

        if path.exists() or path.is_symlink():
            path.unlink()
        if self.kind == "fifo":
            os.mkfifo(path)
            self.fifos.append(path)
            target = path
        else:
            read_end, target = os.pipe()
            self.read_ends.append(read_end)
            path.symlink_to(f"/dev/fd/{read_end}")
        thread = threading.Thread(target=self._write, args=(target, data), daemon=True)
        thread.start()
        self.threads.append(thread)

    def release(self) -> None:
        """An end of file to a reader waiting on a FIFO that no writer opens any more."""
        for fifo in self.fifos:
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:  # no reader waiting
                pass

    def close(self) -> None:
        for fifo in self.fifos:  # a writer still waiting for a reader: let it finish
            fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
            os.close(fd)
        for fd in self.read_ends:
            os.close(fd)
        for thread in self.threads:
            thread.join(timeout=30)
            assert not thread.is_alive(), "a stream's writer did not finish"


#: seconds a command on tiny streamed inputs may take before it is taken to hang
STREAM_SECONDS = 60


def streamed_output(args, files: list[str], contents: dict[str, bytes], kind: str) -> str:
    """stdout of ``prefeval ARGS FILES`` with each file of ``contents`` given as a stream
    of ``kind`` holding those bytes (written anew for this command)."""
    import threading

    streams = Streams(kind)
    done: dict = {}
    try:
        for path, data in contents.items():
            streams.add(Path(path), data)
        command = threading.Thread(
            target=lambda: done.update(result=run_cli([*args, *files])), daemon=True
        )
        command.start()
        command.join(STREAM_SECONDS)
        hung = command.is_alive()
        while command.is_alive():  # opening a FIFO a second time waits for ever
            streams.release()
            command.join(0.1)
    finally:
        streams.close()
    assert not hung, f"$ prefeval {' '.join(map(str, args + files))}: hangs on a {kind}"
    result = done["result"]
    assert result.exit_code == 0, explain(result, [*args, *files])
    return result.stdout


@examples(15)
@given(
    collections(),
    st.sampled_from(["fifo", "pipe"]),
    st.sampled_from(["qrels", "runs", "both"]),
    st.sampled_from(["text", "gzip", "parquet"]),
    st.sampled_from(ANALYSIS),
)
def test_pipes_and_fifos(c, kind, which, encoding, analysis):
    """Qrels and runs from named pipes (FIFOs) or pipes (``<(zcat run.gz)``), text, gzip
    or Parquet, give the output of the same files: a stream is read once and its bytes
    serve every reader (format sniffing, naming, cache key, reading, baselines); a FIFO
    written again for the next command is read anew."""
    with tempfile.TemporaryDirectory() as tmp:
        ref = write_files(Path(tmp, "ref"), c)
        var = [str(Path(tmp, "var", Path(f).name)) for f in ref]
        Path(tmp, "var").mkdir()
        chosen = {0} if which == "qrels" else set(range(1, len(ref)))
        if which == "both":
            chosen.add(0)
        contents = {}
        for k, (src, dst) in enumerate(zip(ref, var)):
            data = Path(src).read_bytes()
            if encoding == "gzip":
                data = gzip.compress(data, mtime=0)
            elif encoding == "parquet":
                rows = c.qrels if k == 0 else c.runs[c.names[k - 1]]
                data = parquet_bytes(rows, "qrels" if k == 0 else "run")
            if k in chosen:
                contents[dst] = data
            else:
                Path(dst).write_bytes(data)
        for label in ["compare", "metrics", analysis]:
            args = command(label, c)
            note(f"{kind} {which} {encoding}: {label}")
            want = output([*args, *ref])
            got = streamed_output(args, var, contents, kind)
            if got != want:
                pytest.fail(
                    f"{kind} ({which}, {encoding}) / {label}: outputs differ\n"
                    + diff(want, got, "files", "streams")
                )


@pytest.mark.skipif(not Path("/bin/bash").exists(), reason="needs bash for <(...)")
@pytest.mark.parametrize("label", ["compare", "metrics", "agree", "robustness-labels"])
def test_process_substitution(tmp_path, label):
    """``prefeval compare <(cat qrels) <(cat run1) <(gzip -c run2)`` (a real shell, a
    real process) gives the rows of the plain files; the runs are named by their
    ``/dev/fd/N``, so the reference files are named as the shell names the pipes."""
    c = Collection(STDIN_QRELS, STDIN_RUNS)
    files = write_files(tmp_path / "files", c)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    args = " ".join(stdin_args(label))
    q, runs = files[0], files[1:]
    streams = " ".join(f"<(gzip -c {r})" if k % 2 else f"<(cat {r})" for k, r in enumerate(runs))
    script = f"exec {sys.executable} -m prefeval {args} <(cat {q}) {streams}"
    proc = subprocess.run(
        ["/bin/bash", "-c", script], capture_output=True, cwd=tmp_path, env=env, timeout=300
    )
    assert proc.returncode == 0, f"$ {script}\nexit {proc.returncode}\n{proc.stderr.decode()}"
    # the names bash gave the pipes, from the rows (the reference runs get them)
    named = Path(tmp_path, "named")
    named.mkdir()
    fds = subprocess.run(
        ["/bin/bash", "-c", f"echo <(true) {' '.join('<(true)' for _ in runs)}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    names = [Path(fd).name for fd in fds]
    reference = [str(named / names[0])]
    for name, path in zip(names[1:], runs):
        reference.append(str(named / name))
        Path(reference[-1]).write_bytes(Path(path).read_bytes())
    Path(reference[0]).write_bytes(Path(q).read_bytes())
    want = output([*stdin_args(label), *reference])
    got = proc.stdout.decode()
    if got != want:
        pytest.fail(f"$ {script}: differs from the files\n" + diff(want, got, "files", "pipes"))
