"""A deliberately naive reference implementation of prefeval's semantics.

Nothing here is shared with (or copied from) the vectorized code in ``prefeval/``:
plain dicts and lists, one loop per recall level, ``sorted()`` with a key, and
``None`` for the position of an unretrieved relevant document.  It is slow and
meant only for small collections and for cross-checking.

Semantics (rpp-sigir2022 sections 3-5, lexiprecision-evia2023 section 3,
lexirecall sections 2.2 and 5):

* a run orders its documents for a query by score descending, ties by docno
  descending (plain string order); the rank column is ignored; ``max_docs`` keeps
  the top K of that order;
* the relevant documents of a query are those whose grade (the maximum over all its
  qrels rows, subtopics included) is > 0, or >= ``level`` when a level is given;
  queries with no relevant document are not evaluated; a query a run does not
  mention retrieves nothing;
* f_i is the rank of the i-th relevant document retrieved; unretrieved relevant
  documents come after everything (``None``) and two ``None`` at the same recall
  level tie;
* Delta(a, b) > 0 means run a is preferred.
"""

from __future__ import annotations

import gzip
import math
import re
from itertools import combinations

RPP_FAMILY = {"rpp": "uniform", "dcgrpp": "dcg", "invrpp": "inverse"}
STRPP_FAMILY = {"strpp": "uniform", "stdcgrpp": "dcg", "stinvrpp": "inverse"}
LEXI = ("lexirecall", "lexiprecision", "rrlexiprecision")
ALL_MEASURES = (*RPP_FAMILY, *STRPP_FAMILY, *LEXI)
PLAIN_MEASURES = (*RPP_FAMILY, *LEXI)


# --------------------------------------------------------------------------- files


def read_text(path) -> str:
    with open(path, "rb") as handle:
        data = handle.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data.decode("utf-8")


def parse_qrels_text(text: str) -> list[tuple[str, int, str, float]]:
    """(qid, subtopic, docno, grade) rows; subtopic 0 for plain judgments."""
    rows = []
    for line in text.splitlines():
        parts = line.split()
        if not parts or parts[0].startswith("#"):
            continue
        qid, it, docno, grade = parts
        subtopic = 0 if it in ("0", "Q0") else int(it)
        rows.append((qid, subtopic, docno, float(grade)))
    return rows


def parse_run_text(text: str) -> list[tuple[str, str, float]]:
    """(qid, docno, score) rows of a run."""
    rows = []
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        rows.append((parts[0], parts[2], float(parts[4])))
    return rows


def run_name(path) -> str:
    name = str(path).replace("\\", "/").split("/")[-1]
    if name.startswith("input."):
        name = name[6:]
    if name.endswith(".gz") and name != ".gz":
        name = name[:-3]
    for suffix in (".run", ".trec", ".txt", ".res", ".tsv", ".parquet", ".pq"):
        if name.endswith(suffix) and name != suffix:
            return name[: -len(suffix)]
    return name


# --------------------------------------------------------------------------- basics


def is_relevant(grade: float, level) -> bool:
    if level is None:
        return grade > 0
    return grade >= level


def sign(x: float) -> int:
    if x > 0:
        return 1
    if x < 0:
        return -1
    return 0


def preference_at(fa, fb) -> int:
    """sgn(f_b - f_a) where None (unretrieved) is below every rank."""
    if fa is None and fb is None:
        return 0
    if fa is None:
        return -1
    if fb is None:
        return 1
    return sign(fb - fa)


def recall_weights(m: int, weighting: str) -> list[float]:
    if weighting == "uniform":
        raw = [1.0 for i in range(1, m + 1)]
    elif weighting == "dcg":
        raw = [1.0 / math.log2(i + 1) for i in range(1, m + 1)]
    elif weighting == "inverse":
        raw = [1.0 / i for i in range(1, m + 1)]
    else:
        raise ValueError(weighting)
    total = sum(raw)
    return [w / total for w in raw]


def ranking(rows, max_docs=None) -> dict[str, int]:
    """docno -> 1-based rank for one query's (docno, score) rows."""
    by_docno_desc = sorted(rows, key=lambda row: row[0], reverse=True)
    ordered = sorted(by_docno_desc, key=lambda row: -row[1])  # stable: ties keep docno desc
    if max_docs is not None:
        ordered = ordered[:max_docs]
    return {docno: rank for rank, (docno, _score) in enumerate(ordered, start=1)}


def positions(ranks: dict[str, int], docs) -> list:
    """Sorted ranks of ``docs`` in ``ranks``; None for each unretrieved one, at the end."""
    found = sorted(ranks[d] for d in docs if d in ranks)
    return found + [None] * (len(docs) - len(found))


def rpp(fa: list, fb: list, weighting: str) -> float:
    weights = recall_weights(len(fa), weighting)
    total = 0.0
    for i in range(len(fa)):
        total += weights[i] * preference_at(fa[i], fb[i])
    return total


def lexirecall(fa: list, fb: list) -> float:
    for i in reversed(range(len(fa))):
        p = preference_at(fa[i], fb[i])
        if p != 0:
            return float(p)
    return 0.0


def lexiprecision(fa: list, fb: list) -> float:
    for i in range(len(fa)):
        p = preference_at(fa[i], fb[i])
        if p != 0:
            return float(p)
    return 0.0


def reciprocal(f) -> float:
    return 0.0 if f is None else 1.0 / f


def rr_lexiprecision(fa: list, fb: list) -> float:
    for i in range(len(fa)):
        if preference_at(fa[i], fb[i]) != 0:
            return reciprocal(fa[i]) - reciprocal(fb[i])
    return 0.0


# --------------------------------------------------------------------------- collection


class Judgments:
    """Relevant documents per query at one level, with grades and subtopics."""

    def __init__(self, qrels_rows, level=None):
        self.level = level
        grade: dict[str, dict[str, float]] = {}
        subtopic_rows = []
        self.all_queries = []
        for qid, subtopic, docno, g in qrels_rows:
            if qid not in grade:
                grade[qid] = {}
                self.all_queries.append(qid)
            if docno not in grade[qid] or g > grade[qid][docno]:
                grade[qid][docno] = g
            if subtopic != 0:
                subtopic_rows.append((qid, subtopic, docno, g))
        self.has_subtopics = bool(subtopic_rows)
        self.relevant: dict[str, dict[str, float]] = {}
        for qid in self.all_queries:
            rel = {d: g for d, g in grade[qid].items() if is_relevant(g, level)}
            if rel:
                self.relevant[qid] = rel
        self.dropped = [q for q in self.all_queries if q not in self.relevant]
        self.subtopics: dict[str, dict[int, set]] = {q: {} for q in self.relevant}
        for qid, subtopic, docno, g in subtopic_rows:
            if qid in self.relevant and is_relevant(g, level):
                self.subtopics[qid].setdefault(subtopic, set()).add(docno)

    def graded_populations(self, qid, binary=False):
        """(weight, docs) pairs of eq. 5 (one population when binary)."""
        rel = self.relevant[qid]
        if binary:
            return [(1.0, set(rel))]
        pops = []
        for lam in sorted(set(rel.values())):
            pops.append({d for d, g in rel.items() if g >= lam})
        total = sum(len(p) for p in pops)
        return [(len(p) / total, p) for p in pops]

    def subtopic_populations(self, qid):
        """(weight, docs) pairs of eq. 6: each subtopic plus the background t*."""
        subs = [docs for _t, docs in sorted(self.subtopics[qid].items()) if docs]
        if not subs:
            return []
        background = set().union(*subs)
        pops = [*subs, background]
        total = sum(len(p) for p in pops)
        return [(len(p) / total, p) for p in pops]


def evaluate(
    qrels_rows,
    runs: dict,
    measures=None,
    level=None,
    max_docs=None,
    binary=False,
) -> dict:
    """{(measure, run_a, run_b, query_id): value} for every pair a before b in ``runs`` order.

    ``runs`` maps run name -> list of (qid, docno, score).  A value is absent where
    the measure does not apply (strpp measures on a query without subtopic judgments).
    """
    judged = Judgments(qrels_rows, level)
    if measures is None:
        measures = ALL_MEASURES if judged.has_subtopics else PLAIN_MEASURES
    by_query: dict[str, dict[str, list]] = {}
    for name, rows in runs.items():
        table: dict[str, list] = {}
        for qid, docno, score in rows:
            table.setdefault(qid, []).append((docno, score))
        by_query[name] = table
    ranks = {
        name: {q: ranking(table.get(q, []), max_docs) for q in judged.relevant}
        for name, table in by_query.items()
    }
    out = {}
    for a, b in combinations(list(runs), 2):
        for qid in judged.relevant:
            ra, rb = ranks[a][qid], ranks[b][qid]
            docs = set(judged.relevant[qid])
            fa, fb = positions(ra, docs), positions(rb, docs)
            for measure in measures:
                if measure in RPP_FAMILY:
                    value = 0.0
                    for weight, pop in judged.graded_populations(qid, binary):
                        value += weight * rpp(
                            positions(ra, pop), positions(rb, pop), RPP_FAMILY[measure]
                        )
                elif measure in STRPP_FAMILY:
                    pops = judged.subtopic_populations(qid)
                    if not pops:
                        continue
                    value = 0.0
                    for weight, pop in pops:
                        value += weight * rpp(
                            positions(ra, pop), positions(rb, pop), STRPP_FAMILY[measure]
                        )
                elif measure == "lexirecall":
                    value = lexirecall(fa, fb)
                elif measure == "lexiprecision":
                    value = lexiprecision(fa, fb)
                elif measure == "rrlexiprecision":
                    value = rr_lexiprecision(fa, fb)
                else:
                    raise ValueError(measure)
                out[(measure, a, b, qid)] = value
    return out


def summarize(values: dict) -> dict:
    """{(measure, run_a, run_b): mean over the queries where the measure is defined}."""
    groups: dict[tuple, list[float]] = {}
    for (measure, a, b, _qid), value in values.items():
        groups.setdefault((measure, a, b), []).append(value)
    return {key: sum(vals) / len(vals) for key, vals in groups.items()}


def evaluate_files(qrels_path, run_paths, **kwargs) -> dict:
    qrels_rows = parse_qrels_text(read_text(qrels_path))
    runs = {run_name(p): parse_run_text(read_text(p)) for p in run_paths}
    return evaluate(qrels_rows, runs, **kwargs)


# --------------------------------------------------------------------------- comparing


def frame_to_dict(frame) -> dict:
    """{(measure, run_a, run_b, query_id): value} from a prefeval result table."""
    out = {}
    for m, a, b, q, v in zip(
        frame["measure"].astype(str),
        frame["run_a"].astype(str),
        frame["run_b"].astype(str),
        frame["query_id"].astype(str),
        frame["value"].astype(float),
    ):
        key = (m, a, b, q)
        assert key not in out, f"duplicate row {key}"
        out[key] = v
    return out


def assert_matches(actual: dict, expected: dict, tol: float) -> None:
    """Same keys, values within ``tol``; reports the first few differences."""
    missing = sorted(set(expected) - set(actual))
    extra = sorted(set(actual) - set(expected))
    assert not missing, f"{len(missing)} rows missing, e.g. {missing[:5]}"
    assert not extra, f"{len(extra)} unexpected rows, e.g. {extra[:5]}"
    bad = [
        (key, actual[key], expected[key])
        for key in sorted(expected)
        if not abs(actual[key] - expected[key]) <= tol
    ]
    assert not bad, f"{len(bad)} values differ (key, prefeval, oracle), e.g. {bad[:5]}"


# --------------------------------------------------------------------------- strict parsing


class ParseError(Exception):
    """Where a careful reader must report a malformed line (1-based)."""

    def __init__(self, line: int):
        super().__init__(f"line {line}")
        self.line = line


# the number syntax prefeval documents: decimal floats and infinities (no NaN, no
# hexadecimal, no digit separators)
_NUMBER = re.compile(r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf|infinity)", re.IGNORECASE)


def _is_number(token: str, finite: bool = False):
    if not _NUMBER.fullmatch(token):
        return None
    value = float(token)
    return None if finite and math.isinf(value) else value


def parse_run_strict(text: str) -> list[tuple[str, str, float]]:
    """(qid, docno, score) rows; ParseError at the first malformed line: fewer than 5
    whitespace-separated fields (fields after the tag are ignored, as trec_eval does), a
    score that is not a number (NaN included), or a docno seen before for the same
    query.  Blank lines and lines starting with '#' are skipped; a leading BOM is not
    part of the text."""
    rows = []
    seen = set()
    text = text.removeprefix("\ufeff")
    for number, line in enumerate(text.split("\n"), start=1):
        parts = line.split()
        if not parts or parts[0].startswith("#"):
            continue
        if len(parts) < 5:
            raise ParseError(number)
        score = _is_number(parts[4])
        if score is None:
            raise ParseError(number)
        key = (parts[0], parts[2])
        if key in seen:
            raise ParseError(number)
        seen.add(key)
        rows.append((parts[0], parts[2], score))
    return rows


def parse_qrels_strict(text: str) -> list[tuple[str, int, str, float]]:
    """(qid, subtopic, docno, grade) rows; ParseError at the first malformed line: not 4
    fields, an iteration that is neither 0, Q0 nor an integer, a grade that is not a
    number, or a (qid, subtopic, docno) judged before."""
    rows = []
    seen = set()
    text = text.removeprefix("\ufeff")
    for number, line in enumerate(text.split("\n"), start=1):
        parts = line.split()
        if not parts or parts[0].startswith("#"):
            continue
        if len(parts) != 4:
            raise ParseError(number)
        qid, it, docno, grade = parts
        if it in ("0", "Q0"):
            subtopic = 0
        else:
            if not re.fullmatch(r"-?[0-9]+", it) or abs(int(it)) >= 2**63:
                raise ParseError(number)
            subtopic = int(it)
        value = _is_number(grade, finite=True)
        if value is None:
            raise ParseError(number)
        key = (qid, subtopic, docno)
        if key in seen:
            raise ParseError(number)
        seen.add(key)
        rows.append((qid, subtopic, docno, value))
    return rows
