"""Why one run is preferred to another: the aligned recall levels behind every measure.

For a pair of runs A, B and chosen queries, :func:`explain` lays out what the engine
compares (rpp-sigir2022 Figures 3-4, lexiprecision-evia2023 Figure 4): per
pseudo-population, the sorted positions f_i (A) and f'_i (B) of its relevant
documents, sgn(f'_i - f_i) and p(i) at every recall level i, the levels that decide
lexiprecision and lexirecall, each population's RPP (eq. 4) and its weight p(lambda)
(eq. 5) or p(t) (eq. 6), and the values ``compare -q`` gives for the pair.

The populations are the engine's own (:func:`prefeval.engine.local.query_populations`),
compared on the engine's position matrix with the measures' own functions; the
measure values are the engine's (:func:`prefeval.engine.local.cube_from_matrix`).

The columns, each population's and level's fields and the text beyond the
aligned levels come from the measures' families
(:class:`prefeval.measures.family.Family`); below, those of the registered measures.

Rows (:data:`COLUMNS`), per query: ``measure`` rows (the values, as compare -q writes
them), then per population a ``population`` row followed by its ``level`` rows.

- ``query_id, run_a, run_b``; ``row``: ``measure``, ``population`` or ``level``.
- ``measure``, ``value`` (measure rows): the measure and Delta(A, B).
- ``family``: ``binary`` (relevant = grade >= level: lexicographic measures, and RPP
  with --binary), ``graded`` (eq. 5) or ``subtopic`` (eq. 6); on a measure row, the
  family of populations it is computed from.  ``population``: ``grade>0`` or
  ``grade>=L`` (binary), ``grade>=lambda`` (graded), ``subtopic=T`` or ``subtopic=*``
  (the background t*).
- ``weight``: p(lambda) or p(t) = m / (sum of the family's m), 1 for binary;
  ``size``: m, the population's relevant documents.
- ``level``: recall level i (1..m); ``pos_a``, ``pos_b``: f_i and f'_i, empty when
  the run did not retrieve its i-th relevant document (imputed below everything
  retrieved); ``retrieved_a``, ``retrieved_b``; ``sgn``: sgn(f'_i - f_i) (+1: A
  earlier), on a population row the sum over its levels.
- ``p_uniform``, ``p_dcg``, ``p_inverse``: p(i) = 1/m, proportional to 1/log2(i+1),
  to 1/i (level rows).
- ``lexiprecision_decides``, ``lexirecall_decides``: true on the binary population's
  first and last level where sgn != 0; ``rr_term``: 1/f_i - 1/f'_i on the
  lexiprecision row (an unretrieved document counts 0).
- ``rpp_uniform``, ``rpp_dcg``, ``rpp_inverse`` (population rows): the population's
  RPP, sum over its levels of sgn x p(i).

Recomputing the values from the rows (per query; "family" is graded, or binary with
--binary, for rpp, subtopic for strpp): ``rpp`` = (sum of the family's population
``sgn``) / (sum of their ``size``), exactly (eq. 5 with p(lambda) proportional to
m_lambda); ``dcgrpp``, ``invrpp`` = sum of ``weight`` x ``rpp_dcg`` / ``rpp_inverse``
(the engine adds the terms by increasing m and sets a sum that ties with 0 to 0.0, so
another order may differ in the last bit); ``lexiprecision``, ``lexirecall`` = ``sgn``
of the deciding row (0 when none); ``rrlexiprecision`` = its ``rr_term`` (0 when none).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from ..core import ties
from ..core.positions import UNRETRIEVED, RunPositions, position_matrix
from ..core.progress import stderr_notice
from ..core.qrels import Qrels, RelevantSet
from ..engine.local import cube_from_matrix, load_runs, query_populations, relevant_with_notice
from ..io.runs import read_qrels, resolve_runs
from ..io.writers import fixed_text, float_text
from ..measures import FAMILIES, Measure, families_of, members, parse_measures
from ..measures.family import Family, Render
from ..options import Options

_COMMON = [
    "query_id",
    "run_a",
    "run_b",
    "row",
    "measure",
    "family",
    "population",
    "weight",
    "size",
    "level",
    "pos_a",
    "pos_b",
    "retrieved_a",
    "retrieved_b",
    "sgn",
]


def _explainers() -> list[Family]:
    """The families with explain columns, each set of columns once (the RPP families
    share theirs), in :data:`~prefeval.measures.FAMILIES` order."""
    out: dict[tuple, Family] = {}
    for family in FAMILIES.values():
        out.setdefault((family.level_columns, family.population_columns), family)
    return list(out.values())


def columns() -> list[str]:
    """The columns of the explanation table: the common ones, then the families' on
    level rows, then theirs on population rows, then ``value``."""
    families = _explainers()
    levels = [c for f in families for c in f.level_columns]
    populations = [c for f in families for c in f.population_columns]
    return [*_COMMON, *levels, *populations, "value"]


#: the columns of the explanation table of the registered measures (:func:`columns`)
COLUMNS = columns()
_INTS = ("size", "level", "pos_a", "pos_b", "sgn")
_BOOLS = ("retrieved_a", "retrieved_b")
_STRINGS = ("query_id", "run_a", "run_b", "row", "measure", "family", "population")
DEFAULT_TOP = 5


def _grade_text(level: float | None) -> str:
    return "grade>0" if level is None else f"grade>={level:g}"


def as_flag(query: str) -> str:
    """A query id to explain as the command line gives it (``--query 301``)."""
    return f"--query {query}"


def as_keyword(query: str) -> str:
    """A query id to explain as the API gives it (``queries='301'``)."""
    return f"queries={query!r}"


def select_queries(
    relevant: RelevantSet,
    values: np.ndarray,
    queries: Sequence[str] | None = None,
    top: int | None = None,
    all_queries: Sequence[str] | None = None,
    cited: Callable[[str], str] = as_flag,
) -> list[int]:
    """Indices of the queries to explain: ``queries`` in the order given (ValueError for
    an id not in the qrels, ``all_queries``, or not evaluated, citing it as ``cited``
    words it: :func:`as_flag`, :func:`as_keyword`), else the ``top``
    (default 5) with the largest |Delta| in ``values`` (one per evaluated query, the
    first measure; NaN: undefined, left out), equal |Delta| (tie rule) by query id."""
    if queries:
        where = {q: k for k, q in enumerate(relevant.query_ids)}
        known = set(all_queries) if all_queries is not None else set(where) | set(relevant.dropped)
        out = []
        for query in dict.fromkeys(queries):
            if query not in known:
                raise ValueError(f"{cited(query)}: no such query in the qrels")
            if query not in where:
                raise ValueError(
                    f"{cited(query)}: the query has no relevant document "
                    f"({_grade_text(relevant.level)}) and is not evaluated"
                )
            out.append(where[query])
        return out
    top = DEFAULT_TOP if top is None else top
    defined = np.flatnonzero(~np.isnan(values))
    group = ties.groups(np.abs(values[defined]))
    # largest |Delta| first; queries are in natural order, so ties go by query id
    order = np.lexsort((defined, -group))
    return [int(k) for k in defined[order][:top]]


def _population_rows(
    base: dict, kind: str, label: str, weight: float, positions: np.ndarray, binary: bool
) -> list[dict]:
    """The population row and its level rows; ``positions`` (2, m) are the unsorted
    positions of its documents in A and B; ``binary``: it is the binary population."""
    pos = np.sort(positions, axis=-1)  # f_i and f'_i, as the engine sorts them
    pos_a, pos_b = pos[0], pos[1]
    sign_diff = np.sign(pos_b - pos_a).astype(np.int8)  # the engine's sgn(f'_i - f_i)
    m = len(sign_diff)
    total = int(sign_diff.sum(dtype=np.int64))
    common = {**base, "family": kind, "population": label, "weight": weight, "size": m}
    population = {**common, "row": "population", "sgn": total}
    levels = []
    for i in range(m):
        a, b = int(pos_a[i]), int(pos_b[i])
        levels.append(
            {
                **common,
                "row": "level",
                "level": i + 1,
                "pos_a": None if a == UNRETRIEVED else a,
                "pos_b": None if b == UNRETRIEVED else b,
                "retrieved_a": a != UNRETRIEVED,
                "retrieved_b": b != UNRETRIEVED,
                "sgn": int(sign_diff[i]),
            }
        )
    for family in _explainers():
        fields, level_fields = family.explain_fields(sign_diff, pos_a, pos_b, binary)
        population.update(fields)
        for row, extra in zip(levels, level_fields):
            row.update(extra)
    return [population, *levels]


def explain_positions(
    positions: Sequence[RunPositions],
    relevant: RelevantSet,
    measures: Sequence[Measure],
    *,
    queries: Sequence[str] | None = None,
    top: int | None = None,
    binary: bool = False,
    all_queries: Sequence[str] | None = None,
    threads: int | None = None,
) -> pd.DataFrame:
    """The explanation table (:data:`COLUMNS`) of two reduced runs (A, B) on
    ``relevant``; see :func:`select_queries` for ``queries``, ``top``; the values
    computed on ``threads`` (default all usable cores)."""
    if len(positions) != 2:
        raise ValueError(f"explain compares two runs, not {len(positions)}")
    if not measures:
        raise ValueError("no measure to explain")
    names = [r.name for r in positions]
    matrix = position_matrix(list(positions), relevant)
    cube = cube_from_matrix(matrix, names, relevant, measures, binary=binary, threads=threads)
    chosen = select_queries(relevant, cube.values[0, 0], queries, top, all_queries)
    families = [family for family, _ in families_of(measures)]
    rows: list[dict] = []
    for k in chosen:
        base = {"query_id": relevant.query_ids[k], "run_a": names[0], "run_b": names[1]}
        for j, measure in enumerate(measures):
            value = float(cube.values[j, 0, k])
            if not np.isnan(value):
                kind = FAMILIES[measure.family].kind(binary)
                rows.append(
                    {**base, "row": "measure", "measure": measure.name, "family": kind}
                    | {"value": value}
                )
        lo, hi = int(relevant.offsets[k]), int(relevant.offsets[k + 1])
        docs = np.arange(lo, hi)
        rows += _population_rows(
            base, "binary", _grade_text(relevant.level), 1.0, matrix[:, docs], binary=True
        )
        # the engine's populations, but for those that are the binary population
        for family, label, mask, weight in query_populations(relevant, k, binary, families):
            kind = family.kind(binary)
            if kind != "binary":
                mine = docs if mask is None else docs[mask]
                rows += _population_rows(base, kind, label, weight, matrix[:, mine], binary=False)
    return _frame(rows)


def _frame(rows: list[dict]) -> pd.DataFrame:
    names = columns()
    flags = {c for f in _explainers() for c in f.flag_columns}
    frame = pd.DataFrame(rows, columns=names)
    for name in _STRINGS:
        frame[name] = frame[name].fillna("").astype(str)
    for name in _INTS:
        frame[name] = frame[name].astype("Int64")
    for name in _BOOLS:
        frame[name] = frame[name].astype("boolean")
    for name in flags:
        frame[name] = frame[name].fillna(False).astype(bool)
    floats = [c for c in names if c not in (*_STRINGS, *_INTS, *_BOOLS, *flags)]
    for name in floats:
        frame[name] = frame[name].astype(np.float64)
    return frame


def explain(
    qrels,
    runs,
    options: Options | None = None,
    *,
    queries: Sequence[str] | None = None,
    notify: Callable[[str], None] | None = stderr_notice,
    cited: Callable[[str], str] = as_flag,
) -> pd.DataFrame:
    """Explain the preferences between two ``runs`` (paths, DataFrames or a mapping
    name -> source; A first) on ``qrels``: the table of :data:`COLUMNS` for the chosen
    ``queries``, else the ``top`` N (default 5) by |Delta| under the first measure.  The
    settings are ``options``' ``measures``, ``top``, ``relevance_level``, ``max_docs``,
    ``binary``, ``cache``, ``jobs`` and ``progress``.  ``cited``: how an error words a
    query of ``queries`` (:func:`select_queries`)."""
    options = options or Options()
    top, relevance_level, binary = options.top, options.relevance_level, options.binary
    qrels = read_qrels(qrels) if not isinstance(qrels, Qrels) else qrels
    measure_list = parse_measures(list(options.measures), qrels.has_subtopics)

    runs = resolve_runs(runs)  # a many-run (Parquet) table stands for its runs
    if len(runs) != 2:
        raise ValueError(f"explain compares two runs, not {len(runs)}")
    all_queries = qrels.query_ids()
    if queries:
        select_queries(
            qrels.relevant(relevance_level), np.zeros(0), queries, top, all_queries, cited
        )
    relevant = relevant_with_notice(qrels, relevance_level, notify)
    positions = load_runs(
        runs,
        relevant,
        options.max_docs,
        notify=notify,
        progress=options.progress,
        use_cache=options.cache,
        jobs=options.jobs,
    )
    return explain_positions(
        positions,
        relevant,
        measure_list,
        queries=queries,
        top=top,
        binary=binary,
        all_queries=all_queries,
        threads=options.jobs,
    )


# --------------------------------------------------------------------------- text


def _texts(values, precision: int | None) -> list[str]:
    """Floats as the table writers write them (compare -q's text), NaN as ``-``."""

    values = np.asarray(values, dtype=np.float64)
    if not len(values):
        return []
    text = float_text(values, "tsv") if precision is None else fixed_text(values, "tsv", precision)
    return [t if t else "-" for t in text.to_pylist()]


def _table(header: list[str], rows: list[list[str]], right: Sequence[bool]) -> list[str]:
    widths = [max(len(r[c]) for r in [header, *rows]) for c in range(len(header))]
    out = []
    for r in [header, *rows]:
        cells = [
            cell.rjust(w) if align else cell.ljust(w) for cell, w, align in zip(r, widths, right)
        ]
        out.append(("  " + "  ".join(cells)).rstrip())
    return out


def _int(value) -> str:
    return "-" if pd.isna(value) else str(int(value))


def _level_lines(levels: pd.DataFrame, precision: int | None) -> list[str]:
    """The aligned recall levels, with the families' columns and marks
    (:meth:`~prefeval.measures.family.Family.level_text`); a run of levels both runs
    missed is one line."""
    parts = [family.level_text() for family in _explainers()]
    extra = [column for shown, _ in parts for column in shown]
    marks = [mark for _, shown in parts for mark in shown]
    texts = [_texts(levels[column], precision) for _, column in extra]
    rows = []
    both_missed = (~levels["retrieved_a"] & ~levels["retrieved_b"]).to_numpy(dtype=bool)
    i, n = 0, len(levels)
    while i < n:
        j = i
        while j < n and both_missed[j]:
            j += 1
        if j - i >= 2:
            first, last = int(levels["level"].iloc[i]), int(levels["level"].iloc[j - 1])
            rows.append(
                [f"{first}-{last}", "-", "-", "0", *[""] * len(extra), "(both unretrieved)"]
            )
            i = j
            continue
        row = levels.iloc[i]
        marked = [name for name, flag in marks if row[flag]]
        rows.append(
            [
                str(int(row["level"])),
                _int(row["pos_a"]),
                _int(row["pos_b"]),
                f"{int(row['sgn']):+d}" if row["sgn"] else "0",
                *[column[i] for column in texts],
                "<- " + ", ".join(marked) if marked else "",
            ]
        )
        i += 1
    header = ["level", "pos A", "pos B", "sgn", *[title for title, _ in extra], ""]
    return _table(header, rows, [True] * 4 + [False] * (len(extra) + 1))


def _value_lines(values: dict, names: Sequence[str], how: dict, precision: int | None):
    present = [n for n in names if n in values]
    texts = _texts([values[n] for n in present], precision)
    width = max((len(n) for n in present), default=0)
    return [f"  {n.ljust(width)} = {how[n]} = {t}" for n, t in zip(present, texts)]


def _query_text(query: pd.DataFrame, precision: int | None, asked: Sequence[str]) -> list[str]:
    first = query.iloc[0]
    measures = query[query["row"] == "measure"]
    values = dict(zip(measures["measure"], measures["value"]))
    kinds = dict(zip(measures["measure"], measures["family"]))
    render = Render(
        numbers=lambda numbers: _texts(numbers, precision),
        table=_table,
        values=lambda found, names, how: _value_lines(found, names, how, precision),
    )
    lines = [
        f"query {first['query_id']}: A = {first['run_a']}, B = {first['run_b']} "
        "(Delta > 0: A preferred)"
    ]
    width = max((len(n) for n in values), default=0)
    for name, text in zip(values, _texts(list(values.values()), precision)):
        lines.append(f"  {name.ljust(width)}  {text}")
    pops = query[query["row"] == "population"]
    levels = query[query["row"] == "level"]
    binary = pops[pops["family"] == "binary"].iloc[0]
    binary_levels = levels[levels["family"] == "binary"]
    m = int(binary["size"])
    lines.append("")
    notes = [note for f in _explainers() if (note := f.binary_note(m))]
    lines.append(
        f"binary population ({binary['population']}): m = {m}, "
        + "".join(f"{note}, " for note in notes)
        + f"sum sgn = {int(binary['sgn'])}"
    )
    lines += _level_lines(binary_levels, precision)
    for family in _explainers():
        lines += family.level_notes(binary_levels, render)
    for family in FAMILIES.values():
        mine = members(family)
        lines += family.blocks(pops, binary, values, kinds, asked, mine, render)
    return lines


def to_text(frame: pd.DataFrame, precision: int | None = None, measures: Sequence[str] = ()) -> str:
    """The explanation as text for people: per query the measure values (as compare -q
    writes them), the binary population's aligned levels with the levels deciding
    lexiprecision and lexirecall, and the graded and subtopic populations; ``measures``
    (names) asked for, to say so when a subtopic measure is undefined on a query."""
    out: list[str] = []
    for _query, part in frame.groupby("query_id", sort=False):
        if out:
            out.append("")
        out += _query_text(part, precision, measures)
    return "\n".join(out) + "\n" if out else ""
