"""One frozen value with every setting of a call, judged once (trec_eval's ``EPI``).

:func:`judge` builds the :class:`Options` of a call from the API's keywords or the
CLI's parameters (the click parameters are named as the keywords) and is the only place
where a rule about an option is written: its type, range or choices, and the rules
between options (``-n`` without ``-q``, ``--scheduler`` without ``--engine dask``,
``--no-baselines`` with ``-B``, ``--prefs`` with ``--binary``...).  A broken rule raises
:class:`OptionError`, which the API raises as it is (a ``ValueError``, worded with the
keyword: ``relevance_level=nan is not a finite number.``) and the CLI words with the
option's flag (``Invalid value for '-l' / '--relevance-level': nan is not a finite
number.``), taken from the click parameter itself (:meth:`OptionError.worded`).

Every setting of every command is a field of the one :class:`Options` (the shared ones
and the command-specific ones alike, as ``EPI`` holds them all): each has one rule and
one default, the command's; a command reads the fields it has and leaves the others at
their defaults.  The judge takes, besides the fields, what some rules need to know
without keeping it: ``no_baselines`` (the CLI's ``--no-baselines``; the API says
``baselines=[]``) and whether ``prefs``, ``metrics`` and ``qrels`` were given.

The click layer still parses text into numbers (click's job) and shows the ranges
declared here in ``--help`` (:data:`RANGES`, :data:`CHOICES`); the judging is done here.
Rules about inputs rather than settings stay with the inputs (two runs at least; that
``agree`` needs baselines is still checked by both ``api.agree`` and ``cli.agree``,
which name the inputs differently: ``qrels and runs``, ``QRELS RUN...``), and the CLI's
rules about flags the API does not have (``--plot-log`` needs ``--plot``, ``-q/--query``
or ``--top`` in ``explain``, ``--against`` refused by the commands that need every
pair) are written once, in the CLI.
"""

from __future__ import annotations

import math
import numbers
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any

from .core.limits import MAX_RANK
from .core.parallel import usable_cpus

#: query partitions hold at most this many cube cells (queries x pairs x measures)
PARTITION_CELLS = 1 << 22

ENGINES = ("local", "dask")
METHODS = ("mc4", "borda", "winrate", "copeland")
#: the significance tests; the default ones of discpower and report come first
TESTS = ("ttest", "sign", "hsd", "randomization")
DEFAULT_TESTS = ("ttest", "sign", "hsd")
#: the one-sided tests of gate (the HSD compares every pair, not one with a reference)
GATE_TESTS = ("ttest", "sign", "randomization")
#: the confidence intervals of a mean difference: Student's t, or the percentile bootstrap
INTERVALS = ("t", "bootstrap")
CORRECTIONS = ("bonferroni", "holm", "bh", "by", "none")
POLICIES = ("uniform", "pool")
#: the sections of a report, in the order it prints them (``--sections``)
SECTIONS = (
    "summary", "table", "data", "against", "baselines", "matrices", "discpower", "tau",
    "agreement", "robustness",
)  # fmt: skip

#: the options with a fixed set of values
CHOICES = {
    "engine": ENGINES,
    "method": METHODS,
    "tests": TESTS,
    "correction": CORRECTIONS,
    "policy": POLICIES,
    "ci": INTERVALS,
}


@dataclass(frozen=True)
class Range:
    """The numbers an option takes: ``lo``..``hi`` (None: unbounded), ends open or not;
    floats are finite."""

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    integer: bool = False

    def __contains__(self, value) -> bool:
        return not (
            (self.lo is not None and (value <= self.lo if self.lo_open else value < self.lo))
            or (self.hi is not None and (value >= self.hi if self.hi_open else value > self.hi))
        )

    def describe(self) -> str:
        """The range as click's ``--help`` shows it (``0<x<=1``, ``x>=1``)."""
        low = "" if self.lo is None else f"{self.lo}{'<' if self.lo_open else '<='}"
        high = "" if self.hi is None else f"{'<' if self.hi_open else '<='}{self.hi}"
        if self.lo is not None and self.hi is None:
            return f"x{'>' if self.lo_open else '>='}{self.lo}"
        return f"{low}x{high}"


SEED = Range(0, 2**63 - 1, integer=True)
#: the numbers of the numeric options
RANGES = {
    "relevance_level": Range(0, lo_open=True),  # relevant means grade >= L: L > 0
    "max_docs": Range(1, integer=True),  # beyond the largest rank: cuts nothing
    "teleport": Range(0, 1, lo_open=True),
    "alpha": Range(0, 1, lo_open=True, hi_open=True),
    "level": Range(0, 1, lo_open=True, hi_open=True),
    "resamples": Range(1, integer=True),
    "margin": Range(0),
    "min_queries": Range(1, integer=True),
    "trials": Range(1, integer=True),
    "seed": SEED,
    "samples": Range(1, 10**6, integer=True),
    "digits": Range(0, 15, integer=True),
    "top": Range(1, integer=True),
    "partition_cells": Range(1, integer=True),
    "jobs": Range(1, integer=True),
}

_NOT_GIVEN = object()


class OptionError(ValueError):
    """An option's value breaks one of its rules; ``field`` is the API keyword.

    ``message`` names options by ``{key}`` fields: ``{name}``, ``{name=}`` or
    ``{name=VALUE}``; ``{value}`` is the value judged (``value``, when the rule is about
    one value).  :meth:`worded` fills them in, the API's way by default (``str``)."""

    def __init__(self, field: str, message: str, value=_NOT_GIVEN):
        self.field = field
        self.message = message
        self.value = value
        super().__init__(self.worded())

    @property
    def about_value(self) -> bool:
        """Whether the rule is about the value of ``field`` alone."""
        return self.value is not _NOT_GIVEN

    def worded(self, name: Callable[[str, str | None], str] | None = None) -> str:
        """The message with each ``{key}`` worded by ``name(keyword, value text or
        None)``; by default as the API's keywords (``{value}`` as ``field=value``)."""

        class Names(dict):
            def __missing__(self, key):
                keyword, equals, text = key.partition("=")
                if name is not None:
                    return name(keyword, text if text else None)
                return _KEYWORDS.get(keyword, keyword) + equals + text

        names = Names()
        if self.about_value:
            shown = repr(self.value)
            names["value"] = shown if name is not None else f"{self.field}={shown}"
        return self.message.format_map(names)

    def renamed(self, keywords: dict[str, str]) -> OptionError:
        """The same error (same class and value) about the options ``keywords`` renames
        (judge keyword -> the keyword the caller gave): an API function's own keyword
        for a judge keyword (``metrics(measures=)`` for ``baselines``)."""

        def rename(match: re.Match) -> str:
            keyword, rest = match.group(1), match.group(2)
            return "{" + keywords.get(keyword, keyword) + rest + "}"

        message = _FIELD.sub(rename, self.message)
        field = keywords.get(self.field, self.field)
        return type(self)(field, message, self.value)


#: an option's ``{key}`` field in an :class:`OptionError` message: its keyword, the rest
_FIELD = re.compile(r"\{(\w+)((?:=[^{}]*)?)\}")


class OptionTypeError(OptionError, TypeError):
    """An option's value is of the wrong type (the API's; the CLI parses text)."""


#: the API's wording of a judge keyword that is no API keyword
_KEYWORDS = {"no_baselines": "baselines=[] (no baselines)"}


def cache_default() -> bool:
    """The cache's setting when none is given: on unless the environment variable
    ``PREFEVAL_CACHE`` is ``0``, ``no``, ``off`` or ``false`` (any case)."""
    return os.environ.get("PREFEVAL_CACHE", "1").lower() not in ("0", "no", "off", "false")


@dataclass(frozen=True)
class Options:
    """The settings of one call (defaults: the commands' defaults); build it with
    :func:`judge`."""

    command: str | None = None  # the command (API function) the settings are for
    measures: tuple[str, ...] = ()  # preference measure names as given (-m)
    baselines: tuple[str, ...] | None = None  # as given (-B); None: the default set; (): none
    relevance_level: float | None = None  # relevant means grade >= level (-l)
    max_docs: int | None = None  # each ranking's top K (-M)
    binary: bool = False  # binary RPP (--binary)
    per_query: bool = False  # per-query rows (-q)
    summary: bool = True  # summary rows (not -n)
    against: tuple[str, ...] = ()  # only the pairs (a, RUN) (--against); report: the
    #                                  reference run of its section against it
    both_directions: bool = False  # each pair then its reverse
    engine: str = "local"  # local or dask (--engine)
    scheduler: str | None = None  # Dask scheduler address (--scheduler)
    cache: bool = True  # read and write the cache of reduced runs (not --no-cache);
    #                     judged: default the environment's PREFEVAL_CACHE (cache_default)
    progress: bool | None = False  # tqdm bars; None: the command's bar on a terminal
    partition_cells: int = PARTITION_CELLS  # largest query partition, in cube cells
    jobs: int = field(default_factory=usable_cpus)  # cores the computing may use (-j):
    #     query partitions at once, HSD threads; default the usable CPUs (usable_cpus)
    method: str = "mc4"  # aggregation of per-query rankings (order, tau)
    teleport: float = 0.05  # MC4's teleport weight
    tests: tuple[str, ...] = DEFAULT_TESTS  # significance tests (discpower, report, gate;
    #     judged: the command's default, ttest and sign with --against, ttest for gate)
    correction: str = "bonferroni"  # multiple-comparison correction of ttest, sign, randomization
    alpha: float = 0.05  # significance level
    trials: int = 10000  # trials of the randomized HSD and of the randomization test
    seed: int = 0  # seed of the HSD's and randomization's trials, bootstrap, robustness samples
    per_pair: bool = False  # discpower: one row per run pair (--pairs)
    ties: bool = False  # agree: the share of ties instead
    queries: tuple[int, ...] = ()  # robustness: numbers of queries to draw
    labels: tuple[float, ...] = ()  # robustness: fractions of relevant labels to keep
    policy: str = "uniform"  # robustness: which labels go first
    samples: int = 10  # robustness: samples per level
    ci: str = "t"  # pairs, gate: the interval of the mean difference, t or bootstrap
    level: float = 0.95  # pairs: its confidence level (gate: 1 - alpha)
    resamples: int = 10000  # bootstrap resamples
    margin: float = 0.0  # gate: a regression is a mean difference significantly below -margin
    min_queries: int = 25  # gate: fewer evaluated queries make a verdict inconclusive
    strict: bool = False  # gate: an inconclusive verdict fails (exit status 3)
    robustness: bool = False  # report: with the robustness curves
    digits: int = 3  # report: decimals in the tables
    sections: tuple[str, ...] = SECTIONS  # report: the sections it prints (--sections);
    #     those that apply: "against" needs --against, "robustness" --robustness
    top: int | None = None  # explain: the N queries with the largest |Delta|
    order_by: str | None = None  # table: the rows in the MC4 order of this measure, or
    #                              "given" (the runs' order); None: the first preference measure


FIELDS = tuple(f.name for f in fields(Options))

#: the defaults of the commands whose own default of a field is not the field's: the
#: gate and the table judge by one test; the gate corrects by Holm's step-down method,
#: which controls the family-wise error as Bonferroni's does with more power, where the
#: verdicts of a CI job must not miss a regression
COMMAND_DEFAULTS: dict[str, dict[str, object]] = {
    "gate": {"tests": ("ttest",), "correction": "holm"},
    "table": {"tests": ("ttest",)},
}


def default(field: str, command: str | None = None) -> Any:
    """The default of the option ``field`` for ``command``: its entry in
    :data:`COMMAND_DEFAULTS`, else the :class:`Options` field's default (the one source
    of the defaults the API's keywords and the CLI's options show)."""
    if field in COMMAND_DEFAULTS.get(command or "", {}):
        return COMMAND_DEFAULTS[command or ""][field]
    found = next(f for f in fields(Options) if f.name == field)
    return found.default_factory() if callable(found.default_factory) else found.default


#: the keywords :func:`judge` takes: the fields, and what some rules need to know
KEYWORDS = (*FIELDS, "no_baselines", "prefs", "metrics", "qrels")


# ----------------------------------------------------------------------- rules of values


def text_list(value, field: str) -> tuple[str, ...]:
    """A str or an iterable of str as a tuple (None: empty)."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    try:
        values = tuple(value)
    except TypeError:
        raise OptionTypeError(
            field, "{value} is not a string or a list of strings.", value
        ) from None
    if not all(isinstance(v, str) for v in values):
        raise OptionTypeError(field, "{value} is not a string or a list of strings.", value)
    return values


def _check_measures(options: Options) -> None:
    """A preference measure named (``-m``, ``measures=``; each may be a comma list, parsed
    by the engine) that is no preference measure but a baseline metric (``AP``,
    ``nDCG@10``, ``map``) is an error that points to where metrics go: the baselines, or
    ``metrics`` for the commands without them.  The measures (and numpy with them) are
    imported here, when a measure is named, so that ``--help`` imports no library."""
    from .measures import MEASURES, parse_measure

    for name in (part.strip() for spec in options.measures for part in spec.split(",")):
        try:
            parse_measure(name)
        except ValueError:
            if not _is_metric(name):
                continue  # the engine's error: unknown measure, cutoff...
            where = (
                "compute it with metrics"
                if options.command in ("compare", "explain")
                else "give it with {baselines=}"
            )
            raise OptionError(
                "measures",
                "{value} is a baseline metric, not a preference measure ("
                + ", ".join(MEASURES)
                + f"): {where}",
                name,
            ) from None


def _is_metric(name: str) -> bool:
    """Whether ``name`` is a baseline metric: one ir-measures reads as a measure (``AP``,
    ``nDCG@10``) or as a trec_eval name (``map``, ``ndcg_cut_10``), or prefeval's own
    ``TSE``, ``ASL`` and ``gm_map``."""
    import ir_measures

    for parse in (ir_measures.parse_measure, ir_measures.parse_trec_measure):
        try:
            parse(name)
        except Exception:  # whatever ir-measures raises on text it cannot read
            continue
        return True
    return re.fullmatch(r"(TSE|ASL|gm_map)\b.*", name, re.DOTALL) is not None


def _number(field: str, value, integer: bool = False, check_range: bool = True):
    """``value`` as an int (``integer``) or a finite float, in the field's range."""
    kind = numbers.Integral if integer else numbers.Real
    if isinstance(value, bool) or not isinstance(value, kind):
        what = "an integer" if integer else "a number"
        raise OptionTypeError(field, f"{{value}} is not {what}.", value)
    number: Any = value  # an Integral or a Real: int() and float() take both
    value = int(number) if integer else float(number)
    if not integer and not math.isfinite(value):
        raise OptionError(field, "{value} is not a finite number.", value)
    bounds = RANGES.get(field) if check_range else None
    if bounds is not None and value not in bounds:
        raise OptionError(field, f"{{value}} is not in the range {bounds.describe()}.", value)
    return value


def _choice(field: str, value) -> str:
    choices = CHOICES[field]
    if value not in choices:
        raise OptionError(field, f"{{value}} is not one of {', '.join(choices)}.", value)
    return value


def _numbers(field: str, value, integer: bool) -> tuple:
    """A comma-separated string or an iterable of numbers (``queries``, ``labels``)."""
    if isinstance(value, str):
        try:
            parsed = [(int if integer else float)(x) for x in value.split(",") if x.strip()]
        except ValueError:
            raise OptionError(
                field, "{value} is not a comma-separated list of numbers.", value
            ) from None
        if not parsed:
            raise OptionError(field, "{value} is an empty list.", value)
        return tuple(_number(field, v, integer) for v in parsed)
    items = [value] if isinstance(value, numbers.Real) else value
    try:
        items = list(items)
    except TypeError:
        raise OptionTypeError(field, "{value} is not a list of numbers.", value) from None
    if not items:
        raise OptionError(field, "{value} is an empty list.", value)
    return tuple(_number(field, v, integer) for v in items)


def _engine(value) -> str:
    return _choice("engine", str(value).lower())


def _max_docs(value) -> int | None:
    return None if value is None else min(_number("max_docs", value, integer=True), MAX_RANK)


def _cache(value) -> bool:
    return cache_default() if value is None else bool(value)


def _tests(value) -> tuple[str, ...] | None:
    # a list, or a comma list as measures= takes ("ttest,sign")
    tests = tuple(t.strip() for text in text_list(value, "tests") for t in text.split(","))
    for test in tests:
        _choice("tests", test)
    return tests or None  # None: the command's default


def _sections(value) -> tuple[str, ...]:
    # a list, or a comma list ("summary,data"); kept in the report's order
    names = {s.strip() for text in text_list(value, "sections") for s in text.split(",")}
    names.discard("")
    unknown = sorted(names - set(SECTIONS))
    if unknown:
        raise OptionError(
            "sections",
            f"{{value}}: unknown section {', '.join(unknown)}; the sections are "
            + ", ".join(SECTIONS),
            value,
        )
    if not names:
        raise OptionError("sections", "{value} names no section.", value)
    return tuple(s for s in SECTIONS if s in names)


def _text(field: str, value) -> str:
    if not isinstance(value, str):
        raise OptionTypeError(field, "{value} is not a string.", value)
    if not value.strip():
        raise OptionError(field, "{value} is empty.", value)
    return value.strip()


def _optional(rule):
    return lambda field, value: None if value is None else rule(field, value)


#: field -> its rule: the value given -> the value kept (None for a field: kept as given)
_RULES: dict[str, Callable] = {
    "measures": lambda f, v: text_list(v, f),
    "baselines": lambda f, v: None if v is None else text_list(v, f),
    "against": lambda f, v: text_list(v, f),
    "relevance_level": _optional(_number),
    "max_docs": lambda f, v: _max_docs(v),
    "engine": lambda f, v: _engine(v),
    "cache": lambda f, v: _cache(v),
    "method": _choice,
    "correction": _choice,
    "policy": _choice,
    "tests": lambda f, v: _tests(v),
    "teleport": _number,
    "alpha": _number,
    "ci": _choice,
    "level": _number,
    "resamples": lambda f, v: _number(f, v, integer=True),
    "margin": _number,
    "min_queries": lambda f, v: _number(f, v, integer=True),
    "trials": lambda f, v: _number(f, v, integer=True),
    "seed": lambda f, v: _number(f, v, integer=True),
    "samples": lambda f, v: _number(f, v, integer=True),
    "digits": lambda f, v: _number(f, v, integer=True),
    "partition_cells": lambda f, v: _number(f, v, integer=True),
    "jobs": lambda f, v: usable_cpus() if v is None else _number(f, v, integer=True),
    "top": _optional(lambda f, v: _number(f, v, integer=True)),
    "order_by": _optional(lambda f, v: _text(f, v)),
    "queries": lambda f, v: () if v is None else _numbers(f, v, integer=True),
    "labels": lambda f, v: () if v is None else _numbers(f, v, integer=False),
    "sections": lambda f, v: SECTIONS if v is None else _sections(v),
}
_FLAGS = (
    "binary", "per_query", "summary", "both_directions", "per_pair", "ties", "robustness", "strict",
)  # fmt: skip


def check(field: str, value):
    """The value of one option after its own rule (the value kept); :class:`OptionError`
    if it breaks it.  The CLI's option types call this on the number they parsed."""
    rule = _RULES.get(field)
    if rule is not None:
        return rule(field, value)
    return bool(value) if field in _FLAGS else value


# ------------------------------------------------------------------------------ the judge


def judge(**given) -> Options:
    """The :class:`Options` of a call from the keywords given (the fields of
    :class:`Options`, and ``no_baselines``, ``prefs``, ``metrics``, ``qrels``: see the
    module docstring), each judged by its rule, then the rules between them;
    :class:`OptionError` for the first rule broken."""

    unknown = sorted(set(given) - set(KEYWORDS))
    if unknown:
        raise TypeError(f"judge() got unexpected keywords: {', '.join(unknown)}")
    no_baselines = bool(given.pop("no_baselines", False))
    prefs = given.pop("prefs", None) is not None
    metrics = given.pop("metrics", None) is not None
    qrels = given.pop("qrels", None) is not None
    given.setdefault("cache", None)  # not given: the environment's (cache_default)
    for name, value in COMMAND_DEFAULTS.get(given.get("command") or "", {}).items():
        if given.get(name) is None:  # not given: the command's own default
            given[name] = value
    if given.get("level") is None:
        given.pop("level", None)
    ci = given.get("ci")
    if isinstance(ci, numbers.Real) and not isinstance(ci, bool):  # a level: a t interval
        if given.get("command") == "gate":
            raise OptionError(
                "ci", "{value}: the gate's interval is at 1 - alpha; give 't' or 'bootstrap'", ci
            )
        if "level" in given:
            raise OptionError("ci", "{ci=} (a confidence level) and {level=} contradict each other")
        given["level"], given["ci"] = ci, "t"
    values = {name: check(name, value) for name, value in given.items()}
    options = Options(**{"tests": None, **values})  # tests=None: the command's, below
    _check_measures(options)

    if not options.summary and not options.per_query:
        raise OptionError("summary", "{summary=False} without {per_query=True} leaves no rows")
    if options.scheduler is not None and options.engine != "dask":
        raise OptionError("scheduler", "{scheduler=} needs {engine='dask'}")
    if options.engine == "dask":
        try:
            import dask  # noqa: F401
            import distributed  # noqa: F401
        except ImportError:
            raise OptionError(
                "engine", "{engine='dask'} needs Dask: pip install 'prefeval[dask]'"
            ) from None
    if no_baselines:
        if options.baselines:
            raise OptionError("baselines", "{baselines} and {no_baselines} contradict each other")
        if metrics:
            raise OptionError("metrics", "{metrics=} and {no_baselines} contradict each other")
        options = replace(options, baselines=())
    elif options.baselines == () and metrics:
        raise OptionError("metrics", "{metrics=} and {no_baselines} contradict each other")
    if prefs:
        changing = [
            key
            for key, value in (
                ("binary", options.binary),
                ("relevance_level", options.relevance_level is not None and not qrels),
                ("max_docs", options.max_docs is not None),
                ("engine='dask'", options.engine == "dask"),
            )
            if value
        ]
        if changing:
            raise OptionError(
                changing[0].partition("=")[0],
                ", ".join(f"{{{key}}}" for key in changing)
                + " cannot change preferences read with {prefs=} (they were computed when "
                "the table was written); drop " + ("them" if len(changing) > 1 else "it"),
            )
    if options.command == "gate":
        tests = options.tests or default("tests", "gate")
        if len(tests) != 1 or tests[0] not in GATE_TESTS:
            raise OptionError(
                "tests", f"gate takes one test: one of {', '.join(GATE_TESTS)}", tests
            )
        if tests[0] == "sign" and options.margin:
            raise OptionError(
                "margin",
                "{margin} with {tests='sign'}: the sign test counts wins and losses, not "
                "by how much; use ttest or randomization",
            )
        options = replace(options, tests=tests)
    if options.command == "table":  # one test marks the cells
        tests = options.tests or default("tests", "table")
        if len(tests) != 1:
            raise OptionError(
                "tests", f"the table marks its cells by one test, not {len(tests)}", tests
            )
        options = replace(options, tests=tests)
    # report: --against names the reference run of its section "Against the reference"
    # (every pair is still compared); one run
    pairs_against = bool(options.against) and options.command != "report"
    if options.command in ("report", "table") and len(set(options.against)) > 1:
        raise OptionError(
            "against",
            f"{{against}}: the {options.command} compares with one reference run (given "
            f"{len(set(options.against))})",
        )
    if pairs_against and options.tests is not None and "hsd" in options.tests:
        raise OptionError(
            "tests",
            "{tests='hsd'} with {against=}: the HSD ranks every run by its win rate over all "
            "pairs; drop one of them",
        )
    if options.command == "report" and "robustness" not in options.sections:
        options = replace(options, robustness=False)  # a section not printed: not computed
    if options.command == "robustness" and not (options.queries or options.labels):
        raise OptionError("queries", "give {queries=} and/or {labels=}")
    if options.tests is None:  # the command's default: the HSD needs every pair
        options = replace(options, tests=("ttest", "sign") if pairs_against else DEFAULT_TESTS)
    return options
