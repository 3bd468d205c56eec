"""The commands measured on each shape: one registry, :data:`COMMAND_SETS`.

A data shape (``bench/datasets.py``) names its command set; :func:`build_commands` turns the
set's entries into the :class:`Cmd` list of one shape, in the order they run within each
repeat.  An entry is either an :class:`Entry` (one command; its ``argv`` gets a
:class:`Ctx` with the shape's files and argv helpers) or a function ``Ctx -> list[Cmd]``
that expands to several commands (the scaling points of robust).

Every command runs in its own subprocess, output to ``SCRATCH/out/FOLDER/``, with
prefeval's run cache off (``PREFEVAL_CACHE=0``) unless ``cache`` (warm run cache, filled
once untimed by the first ``cache`` command) or ``pipeline`` (cache on, emptied before every
``fresh`` command) is set.  Only the standard library is imported here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from datasets import Inputs
from harness import HELPER, prefeval_argv

# keys of order + discpower + tau (--no-baselines): summed into the "analysis" rows
# (suffix "" cache off, "_w" warm cache, "_p" pipeline) and judged by a target
ANALYSIS = ("order_nb", "discpower_nb", "tau_nb")
SCALING_RUNS = (10, 30, 110)  # robust: compare and FLOOR on the first N runs

# Engines measured on the Parquet shapes: extra prefeval options per engine, or None when
# this prefeval has no such engine (the rows are then reported as skipped).  The Dask
# engine (a local cluster of one worker process per core) exists for compare only.
PARQUET_ENGINES: dict[str, tuple[str, ...] | None] = {"local": (), "dask": ("--engine", "dask")}
#: the commands of each engine (None: all)
ENGINE_COMMANDS: dict[str, tuple[str, ...] | None] = {"local": None, "dask": None}


@dataclass
class Cmd:
    key: str
    label: str
    argv: list[str]
    table: str = "main"  # "main" or "scaling"
    cache: bool = False  # run with prefeval's run cache on (warm) instead of off
    # the pipeline rows: cache on, in a folder emptied before `fresh` commands, so the
    # sequence order -> discpower -> tau runs as in a fresh Makefile (first one cold)
    pipeline: bool = False
    fresh: bool = False


@dataclass
class Ctx:
    """What an entry needs to build its argv."""

    shape: str
    inputs: Inputs
    out: Path  # folder of the command outputs
    quick: bool
    pf: list[str]  # argv prefix of the prefeval CLI
    py: list[str]  # argv prefix of a helper mode (bench/run.py _MODE ...)

    @property
    def runs(self) -> list[str]:
        return [str(p) for p in self.inputs.runs]

    def o(self, name: str) -> str:
        """Path of an output file."""
        return str(self.out / name)

    def pref(self, *opts: str, runs: list[str] | None = None) -> list[str]:
        """A prefeval command on the preference qrels and the runs (or the given runs)."""
        return [
            *self.pf,
            *opts,
            str(self.inputs.qrels_pref),
            *(self.runs if runs is None else runs),
        ]

    def plain(self, *opts: str) -> list[str]:
        """A prefeval command on the plain graded qrels and all runs."""
        return [*self.pf, *opts, str(self.inputs.qrels), *self.runs]


@dataclass(frozen=True)
class Entry:
    key: str
    label: str
    argv: Callable[[Ctx], list[str]]
    table: str = "main"
    cache: bool = False
    pipeline: bool = False
    fresh: bool = False
    skip: Callable[[Ctx], str | None] | None = None  # reason to leave it out, or None

    def cmd(self, ctx: Ctx) -> Cmd:
        return Cmd(
            self.key, self.label, self.argv(ctx), self.table, self.cache, self.pipeline, self.fresh
        )


TRIALS = ("--trials", "1000")


def _scaling(ctx: Ctx) -> list[Cmd]:
    """robust only: FLOOR and compare on the first N runs (N < all: the main table has all)."""
    if ctx.shape != "robust":
        return []
    cmds = []
    for n in SCALING_RUNS:
        if n >= len(ctx.runs):
            continue  # the full set is the main table's floor / compare
        first = ctx.runs[:n]
        cmds.append(
            Cmd(f"floor{n}", f"FLOOR, first {n} runs", [*ctx.py, "_floor", *first], "scaling")
        )
        cmds.append(
            Cmd(
                f"compare{n}",
                f"`compare`, first {n} runs",
                ctx.pref("compare", "-o", ctx.o(f"compare{n}.tsv"), runs=first),
                "scaling",
            )
        )
    return cmds


def _skip_irm(ctx: Ctx) -> str | None:
    return "skipped (--quick)" if ctx.quick and ctx.shape == "recsys" else None


# The TREC shapes (robust, web, recsys): preference commands use the subtopic qrels when the
# shape has them (all measures, including ST-RPP and the diversity baselines); the
# AP/nDCG/RR comparison with ir-measures uses the plain graded qrels for both sides.
TREC: list[Entry | Callable[[Ctx], list[Cmd]]] = [
    Entry("floor", "FLOOR: pyarrow.csv read of the runs", lambda c: [*c.py, "_floor", *c.runs]),
    Entry(
        "compare", "`compare` (summary only)", lambda c: c.pref("compare", "-o", c.o("compare.tsv"))
    ),
    Entry(
        "compare_q_tsv",
        "`compare -q` (tsv)",
        lambda c: c.pref("compare", "-q", "-o", c.o("cq.tsv")),
    ),
    Entry(
        "compare_q_jsonl",
        "`compare -q -f jsonl`",
        lambda c: c.pref("compare", "-q", "-f", "jsonl", "-o", c.o("cq.jsonl")),
    ),
    Entry(
        "order_nb",
        "`order --no-baselines`",
        lambda c: c.pref("order", "--no-baselines", "-o", c.o("order.tsv")),
    ),
    Entry(
        "discpower_nb",
        "`discpower --no-baselines --trials 1000`",
        lambda c: c.pref("discpower", "--no-baselines", *TRIALS, "-o", c.o("discpower.tsv")),
    ),
    Entry(
        "tau_nb",
        "`tau --no-baselines`",
        lambda c: c.pref("tau", "--no-baselines", "-o", c.o("taunb.tsv")),
    ),
    Entry("tau", "`tau` (default baselines)", lambda c: c.pref("tau", "-o", c.o("tau.tsv"))),
    Entry(
        "metrics",
        "`metrics -q -B AP -B nDCG -B RR`",
        lambda c: c.plain(
            "metrics", "-q", "-B", "AP", "-B", "nDCG", "-B", "RR", "-o", c.o("metrics.tsv")
        ),
    ),
    Entry(
        "irm",
        "IR-MEASURES: AP, nDCG, RR",
        lambda c: [*c.py, "_irm", c.o("irm.tsv"), str(c.inputs.qrels), *c.runs],
        skip=_skip_irm,
    ),
    # the same commands with prefeval's on-disk run cache already filled (informative)
    Entry(
        "compare_w",
        "`compare` (summary only), warm run cache",
        lambda c: c.pref("compare", "-o", c.o("compare-w.tsv")),
        cache=True,
    ),
    Entry(
        "order_nb_w",
        "`order --no-baselines`, warm run cache",
        lambda c: c.pref("order", "--no-baselines", "-o", c.o("order-w.tsv")),
        cache=True,
    ),
    Entry(
        "discpower_nb_w",
        "`discpower --no-baselines --trials 1000`, warm run cache",
        lambda c: c.pref("discpower", "--no-baselines", *TRIALS, "-o", c.o("discpower-w.tsv")),
        cache=True,
    ),
    Entry(
        "tau_nb_w",
        "`tau --no-baselines`, warm run cache",
        lambda c: c.pref("tau", "--no-baselines", "-o", c.o("taunb-w.tsv")),
        cache=True,
    ),
    # the analysis pipeline as shipped: cache on, starting empty in every repeat
    Entry(
        "order_nb_p",
        "`order --no-baselines`, pipeline (cache starts empty)",
        lambda c: c.pref("order", "--no-baselines", "-o", c.o("order-p.tsv")),
        pipeline=True,
        fresh=True,
    ),
    Entry(
        "discpower_nb_p",
        "`discpower --no-baselines --trials 1000`, pipeline (after order)",
        lambda c: c.pref("discpower", "--no-baselines", *TRIALS, "-o", c.o("discpower-p.tsv")),
        pipeline=True,
    ),
    Entry(
        "tau_nb_p",
        "`tau --no-baselines`, pipeline (after discpower)",
        lambda c: c.pref("tau", "--no-baselines", "-o", c.o("taunb-p.tsv")),
        pipeline=True,
    ),
    _scaling,
]


def _parquet_entries() -> list[Entry]:
    """recsys-xl: compare (summary, -q -f parquet), order, discpower (all three tests,
    10,000 HSD trials), each with every engine of PARQUET_ENGINES; cache off."""
    out: list[Entry] = [
        Entry(
            "floor",
            "FLOOR: pyarrow.parquet streamed read of the runs table",
            lambda c: [*c.py, "_floor", *c.runs],
        )
    ]
    for eng, opts in PARQUET_ENGINES.items():
        sfx = "" if eng == "local" else f"_{eng}"
        why = None if opts is not None else f"skipped: no {eng} engine option in this prefeval"

        def skip(_c: Ctx, why: str | None = why) -> str | None:
            return why

        only = ENGINE_COMMANDS.get(eng)

        def skip_analysis(_c: Ctx, why: str | None = why, only=only, eng=eng) -> str | None:
            if only is not None and "order" not in only:
                return f"skipped: the {eng} engine computes compare only"
            return why

        def pf(cmd: str, *o: str, to: str, e: tuple[str, ...] = opts or ()):
            return lambda c: c.pref(cmd, *e, *o, "-o", c.o(to))

        out += [
            Entry(
                f"compare{sfx}",
                f"`compare` (summary only), {eng} engine",
                pf("compare", to=f"compare{sfx}.tsv"),
                skip=skip,
            ),
            Entry(
                f"compare_q_parquet{sfx}",
                f"`compare -q -f parquet`, {eng} engine",
                pf("compare", "-q", "-f", "parquet", to=f"cq{sfx}.parquet"),
                skip=skip,
            ),
            Entry(
                f"order_nb{sfx}",
                f"`order --no-baselines`, {eng} engine",
                pf("order", "--no-baselines", to=f"order{sfx}.tsv"),
                skip=skip_analysis,
            ),
            Entry(
                f"discpower_nb_10k{sfx}",
                f"`discpower --no-baselines --trials 10000` (ttest, sign, hsd), {eng} engine",
                pf("discpower", "--no-baselines", "--trials", "10000", to=f"dp{sfx}.tsv"),
                skip=skip_analysis,
            ),
        ]
    return out


# The command sets, by the name a DataShape gives in bench/datasets.py.
COMMAND_SETS: dict[str, list[Entry | Callable[[Ctx], list[Cmd]]]] = {
    "trec": TREC,
    "parquet": _parquet_entries(),
}


def build_commands(
    shape: str, inputs: Inputs, command_set: str, out: Path, quick: bool
) -> tuple[list[Cmd], dict]:
    """Commands of one shape, in the order they run within each repeat, and the
    commands left out ({key: (label, reason)})."""
    ctx = Ctx(shape, inputs, out, quick, prefeval_argv(), list(HELPER))
    cmds: list[Cmd] = []
    skipped = {}
    for item in COMMAND_SETS[command_set]:
        if not isinstance(item, Entry):
            cmds += item(ctx)
            continue
        why = item.skip(ctx) if item.skip else None
        if why:
            skipped[item.key] = (item.label, why)
        else:
            cmds.append(item.cmd(ctx))
    return cmds, skipped
