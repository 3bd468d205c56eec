"""Runs resolved once: every run argument becomes one :class:`Run` of a
:class:`RunSet` (name, kind, stored bytes) at the edge, each file opened once per command,
parsed once where the baselines may keep the engine's columns."""

from __future__ import annotations

import gzip
import json
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import invoke

import prefeval
from prefeval.analysis import evidence
from prefeval.core.errors import InputError
from prefeval.io import runs as runs_module
from prefeval.io import textpass
from prefeval.io.runs import NamedPath, RunSet, read_run, resolve_runs, run_argument
from prefeval.io.source import run_name

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "sample_data"
QRELS = SAMPLE / "qrels.txt"
RUNS = sorted((SAMPLE / "runs").glob("input.*"))

PROBE = r"""
import json, os, sys
targets = [os.path.realpath(p) for p in json.loads(sys.argv[1])]
count = {p: 0 for p in targets}
def hook(event, args):
    if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        try:
            path = os.path.realpath(os.fsdecode(args[0]))
        except (OSError, ValueError):
            return
        if path in count:
            count[path] += 1
sys.addaudithook(hook)
from prefeval.cli import cli
try:
    cli.main(sys.argv[2:], standalone_mode=False)
except SystemExit:
    pass
sys.stdout.flush()
print("OPENS", json.dumps(list(count.values())), file=sys.stderr)
"""


@pytest.mark.parametrize(
    "args",
    [
        ["compare", "-q"],
        ["metrics"],
        ["metrics", "--names", "tag"],  # the tags read from the bytes held
        ["order"],
        ["order", "--no-baselines"],
        ["tau"],
        ["explain"],
    ],
    ids=lambda a: " ".join(a),
)
def test_each_run_file_opened_once(args):
    """A command opens each run file once (an audit hook counts the ``open`` events of
    its path), whatever reads it: naming, format, cache key, engine, baselines."""
    runs = [str(p) for p in RUNS[: 2 if args[0] == "explain" else 3]]
    env = dict(os.environ, PREFEVAL_CACHE="0", PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(runs), *args, str(QRELS), *runs],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [x for x in done.stderr.splitlines() if x.startswith("OPENS ")]
    assert lines, done.stderr[-2000:]
    assert json.loads(lines[-1].split(maxsplit=1)[1]) == [1] * len(runs), done.stderr[-2000:]


@pytest.mark.parametrize("whole", [0, 32 << 20])
def test_kinds_and_names(tmp_path, monkeypatch, whole):
    """One function names runs and tells their kind, from the bytes (not the file name),
    files read whole or as they are used (``READ_WHOLE``)."""
    monkeypatch.setattr(runs_module, "READ_WHOLE", whole)
    text = tmp_path / "input.a"
    text.write_bytes(RUNS[0].read_bytes())
    packed = tmp_path / "b.gz"
    packed.write_bytes(gzip.compress(RUNS[1].read_bytes()))
    frame = read_run(RUNS[2])
    one = tmp_path / "c.parquet"
    columns = {"query_id": frame.query_id, "doc_id": frame.doc_id, "score": frame.score}
    pq.write_table(pa.table(columns), one)
    table = tmp_path / "many.txt"  # Parquet whatever its name
    many = pa.table({"run": ["y"] * len(frame) + ["x"] * len(frame)} | {
        k: pa.concat_arrays([pa.array(v), pa.array(v)]) for k, v in columns.items()
    })  # fmt: skip
    pq.write_table(many, table)
    data = pd.DataFrame({"query_id": ["1"], "doc_id": ["d"], "score": [1.0]})
    got = resolve_runs([str(text), packed, one, table, data, frame])
    assert isinstance(got, RunSet)
    assert list(got) == ["a", "b", "c", "x", "y", "run5", frame.name]
    assert [r.kind for r in got.values()] == [
        "text", "gzip", "parquet", "table", "table", "frame", "columns",
    ]  # fmt: skip
    assert got["x"].data is got["y"].data  # one table, opened once for its runs
    assert isinstance(got["a"].data, bytes) == bool(whole)
    assert resolve_runs(got) is got
    assert resolve_runs({"k": got["a"]})["k"].data is got["a"].data  # no new reading
    assert list(got["b"].read().doc_id) == list(read_run(RUNS[1]).doc_id)
    with pytest.raises(InputError, match="two runs are named 'a'"):
        resolve_runs([text, text])


#: ``python -m prefeval`` whose run files, once resolved (opened, not yet read), are
#: truncated in place, as a pipeline rewriting them does
TRUNCATED = """
import sys

from prefeval.cli import main, params

resolve = params.resolve_runs


def truncated(*args, **kwargs):
    got = resolve(*args, **kwargs)
    for run in got.values():
        with open(run.path, "r+b") as handle:
            handle.truncate(100)
    return got


params.resolve_runs = truncated
main()
"""


@pytest.mark.parametrize("size", ["read whole", "in pieces", "parquet table"])
def test_a_run_truncated_while_read_is_an_input_error(tmp_path, size):
    """A run file truncated after it is opened, before or while it is read (one read
    whole, one beyond 16 MiB read in pieces and spilled, a Parquet table of runs): one
    line saying so, exit 2, and no temporary folder left (its memory map crashed the
    command with SIGBUS, exit 135, and left the spill's folder)."""
    run = tmp_path / "input.big"
    if size == "parquet table":
        import numpy as np

        rows = 300_000
        docs = np.random.default_rng(1).integers(0, 1 << 62, rows).astype(str)
        columns = {"run": np.repeat(["a", "b"], rows // 2), "query_id": ["301"] * rows}
        columns |= {"doc_id": docs, "score": np.arange(rows, dtype=float)}
        pq.write_table(pa.table(columns), run)
        assert run.stat().st_size > 5 << 20  # beyond READ_WHOLE
    else:
        lines = RUNS[0].read_bytes()
        repeat = (5 << 20 if size == "read whole" else 17 << 20) // len(lines) + 1
        with open(run, "wb") as handle:
            for k in range(repeat):  # other queries each time (k301, ...): no document twice
                handle.write(b"".join(b"%d" % k + line for line in lines.splitlines(True)))
    other = tmp_path / RUNS[1].name  # truncated too
    other.write_bytes(RUNS[1].read_bytes())
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = dict(os.environ, PREFEVAL_CACHE="0", PYTHONPATH=str(REPO), TMPDIR=str(scratch))
    done = subprocess.run(
        [sys.executable, "-c", TRUNCATED, "compare", str(QRELS), str(run), str(other)],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert (done.returncode, done.stderr) == (2, f"{run}: changed while being read\n")
    assert done.stdout == ""
    assert list(scratch.iterdir()) == []


# --------------------------------------------------------------------------- naming


@pytest.mark.parametrize(
    "argument, name, path",
    [
        ("bm25=runs/bm25.txt", "bm25", "runs/bm25.txt"),
        ("a=b=c.run", "a", "b=c.run"),  # cut at the first '='
        ("s=-", "s", "-"),  # standard input, named
        ("runs/k=10/bm25.txt", None, "runs/k=10/bm25.txt"),  # '/' before the '='
        ("=x.run", None, "=x.run"),  # no name
        ("x=", None, "x="),  # no path
        ("a b=c.run", None, "a b=c.run"),  # a blank is no name
        ("plain.run", None, "plain.run"),
    ],
)
def test_run_argument_rule(argument, name, path):
    got = run_argument(argument)
    assert str(got) == path and type(str(got)) is str
    assert getattr(got, "name", None) == name
    assert isinstance(got, NamedPath) == (name is not None)


def test_existing_file_with_equals_is_a_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "k=10.run").write_bytes(RUNS[0].read_bytes())
    assert type(run_argument("k=10.run")) is str
    assert list(resolve_runs([run_argument("k=10.run")])) == ["k=10"]


def test_name_holding_equals_cut_where_the_path_exists(tmp_path, monkeypatch):
    """NAME=PATH is cut at the ``=`` whose right side exists, so a name may hold ``=``;
    two right sides that exist are refused, ``./`` saying which is meant."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "a.txt").write_bytes(RUNS[0].read_bytes())
    got = run_argument("bm25_k1=0.9=runs/a.txt")
    assert (got.name, str(got)) == ("bm25_k1=0.9", "runs/a.txt")
    assert list(resolve_runs([got])) == ["bm25_k1=0.9"]
    got = run_argument("k=1=-")
    assert (got.name, str(got)) == ("k=1", "-")
    (tmp_path / "b=c").write_bytes(RUNS[1].read_bytes())
    (tmp_path / "c").write_bytes(RUNS[2].read_bytes())
    with pytest.raises(InputError) as caught:
        run_argument("a=b=c")
    assert str(caught.value) == (
        "a=b=c: NAME=PATH names run 'a' of 'b=c' or run 'a=b' of 'c', as both files "
        "exist; write the path meant with ./ before it (NAME=./PATH)"
    )
    assert (run_argument("a=./b=c").name, str(run_argument("a=./b=c"))) == ("a", "./b=c")
    assert (run_argument("a=b=./c").name, str(run_argument("a=b=./c"))) == ("a=b", "./c")


def test_only_a_readable_input_is_a_path_to_cut_at(tmp_path, monkeypatch):
    """A folder or a dangling link is no run input to cut at: ``x=d=c`` with a folder
    ``d=c`` (or a link ``e=c`` to nothing) and a file ``c`` names the run ``x=d`` of
    ``c``; the folder itself given is a path (refused when read)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c").write_bytes(RUNS[0].read_bytes())
    (tmp_path / "d=c").mkdir()
    (tmp_path / "e=c").symlink_to(tmp_path / "nothing")
    for argument, name in (("x=d=c", "x=d"), ("x=e=c", "x=e")):
        got = run_argument(argument)
        assert (got.name, str(got)) == (name, "c")
        assert list(resolve_runs([got])) == [name]
    assert type(run_argument("d=c")) is str
    (tmp_path / "f=c").symlink_to(tmp_path / "c")  # a link to a file is a file
    assert type(run_argument("f=c")) is str
    with pytest.raises(InputError, match="run 'x' of 'f=c' or run 'x=f' of 'c'"):
        run_argument("x=f=c")


def test_name_holding_equals_on_the_command_line(tmp_path):
    """``compare QRELS bm25_k1=0.9=PATH ...`` names the run ``bm25_k1=0.9``."""
    out = tmp_path / "prefs.tsv"
    result = invoke("compare", "-m", "rpp", "-o", out, QRELS, f"bm25_k1=0.9={RUNS[0]}", RUNS[1])
    assert result.exit_code == 0, result.output
    assert out.read_text().splitlines()[1].split("\t")[:3] == ["rpp", "bm25_k1=0.9", "sys02"]


def test_a_many_run_table_named_on_the_command_line_is_told_in_its_words(tmp_path):
    """NAME=PATH on a table of many runs: the error says what to write on the command
    line; a dict key in Python still says to put it in a list."""
    table = tmp_path / "runs.parquet"
    frames = [read_run(path) for path in RUNS[:2]]
    pq.write_table(
        pa.table(
            {
                "run": [f.name for f in frames for _ in range(len(f.doc_id))],
                "query_id": [q for f in frames for q in f.query_id],
                "doc_id": [d for f in frames for d in f.doc_id],
                "score": [x for f in frames for x in f.score],
            }
        ),
        table,
    )
    result = invoke("compare", QRELS, f"x={table}", RUNS[2])
    assert result.exit_code == 2
    assert result.stderr == (
        f"{table}: a table of many runs (a run column) given as the one run 'x'; give its "
        "path alone, without NAME=: its run column names its runs\n"
    )
    with pytest.raises(InputError, match="given as the one run 'x'; give it in a list of runs"):
        resolve_runs({"x": str(table), "y": str(RUNS[2])})


def test_named_path_pickles():
    named = pickle.loads(pickle.dumps(NamedPath("runs/x.txt", "x")))
    assert (str(named), named.name, type(named)) == ("runs/x.txt", "x", NamedPath)


@pytest.mark.parametrize(
    "filename, name",
    [
        ("bm25.run", "bm25"),
        ("bm25.trec", "bm25"),
        ("bm25.txt", "bm25"),
        ("bm25.res", "bm25"),
        ("bm25.tsv", "bm25"),
        ("bm25.run.gz", "bm25"),
        ("bm25.trec.gz", "bm25"),
        ("input.bm25.txt.gz", "bm25"),
        ("bm25.parquet", "bm25"),
        ("bm25.txt.run", "bm25.txt"),  # one suffix only
        ("bm25.gz.run", "bm25.gz"),  # .gz only last
        ("bm25.RUN", "bm25.RUN"),  # as written
        (".run", ".run"),  # never an empty name
        ("input.", "input."),
        ("input..gz", ".gz"),
        ("bm25", "bm25"),
    ],
)
def test_run_suffix_stripped(filename, name):
    assert run_name(f"runs/{filename}") == name


def sample_copy(path: Path, source: Path, tag: str | None = None, gz: bool = False) -> Path:
    """``source`` (a sample run) written to ``path``, its tag column replaced by ``tag``."""
    lines = source.read_text().splitlines()
    if tag is not None:
        lines = [" ".join(line.split()[:5] + [tag]) for line in lines]
    data = "".join(line + "\n" for line in lines).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def test_names_given_and_by_tag(tmp_path):
    """NAME=PATH and a dict's keys name runs; ``names="tag"`` names the others by their
    run tag (text, gzip, Parquet tag or run_id column); a many-run table keeps its run
    column's names, in-memory runs theirs."""
    a = sample_copy(tmp_path / "exp1" / "run.txt", RUNS[0], "bm25")
    b = sample_copy(tmp_path / "exp2" / "run.txt", RUNS[1], "dense", gz=True)
    frame = read_run(RUNS[2])
    columns = {"query_id": frame.query_id, "doc_id": frame.doc_id, "score": frame.score}
    tagged = tmp_path / "exp3" / "run.parquet"
    tagged.parent.mkdir()
    pq.write_table(pa.table({**columns, "run_id": ["splade"] * len(frame)}), tagged)
    assert list(resolve_runs([a, b, tagged], names="tag")) == ["bm25", "dense", "splade"]
    given = [run_argument(f"first={a}"), b, str(tagged)]
    assert list(resolve_runs(given, names="tag")) == ["first", "dense", "splade"]
    with pytest.raises(InputError, match="two runs are named 'run' .*exp2.*exp3"):
        resolve_runs(given)  # by file: exp2/run.txt and exp3/run.parquet are both 'run'
    assert list(resolve_runs({"x": a, "y": b}, names="tag")) == ["x", "y"]
    data = pd.DataFrame({"query_id": ["1"], "doc_id": ["d"], "score": [1.0]})
    assert list(resolve_runs([a, data], names="tag")) == ["bm25", "run2"]
    # the named runs read their own files
    got = resolve_runs(given, names="tag")
    assert list(got["first"].read().doc_id) == list(read_run(RUNS[0]).doc_id)
    assert list(got["splade"].read().doc_id) == list(frame.doc_id)


def test_colliding_names_say_how_to_name_them(tmp_path):
    a = sample_copy(tmp_path / "exp1" / "run.txt", RUNS[0])
    b = sample_copy(tmp_path / "exp2" / "run.txt", RUNS[1])
    with pytest.raises(InputError) as caught:
        resolve_runs([a, b])
    assert str(caught.value) == (
        f"{b}: two runs are named 'run' (inputs 1 and 2: {a} and {b}); name them "
        "NAME=PATH (in Python, a dict {name: run}) or use --names tag (trec_eval's runid, "
        "each file's run tag)"
    )
    same = sample_copy(tmp_path / "exp3" / "x.run", RUNS[2], "sys01")
    with pytest.raises(InputError, match=r"two runs are named 'sys01' .*name them NAME=PATH"):
        resolve_runs([RUNS[0], same], names="tag")
    with pytest.raises(InputError, match="two runs are named 'n' .*give runs distinct names"):
        resolve_runs([run_argument(f"n={a}"), run_argument(f"n={b}")])
    result = invoke("compare", QRELS, f"caf\u00e9={a}", f"cafe\u0301={b}")
    assert result.exit_code == 2
    assert result.stderr == (
        f"{b}: two runs are named alike, 'caf\\xe9' and 'cafe\\u0301' (one Unicode NFC "
        f"name) (inputs 1 and 2: {a} and {b}); the names of NAME=PATH arguments "
        "'caf\\xe9' and 'cafe\\u0301' are one name; give runs distinct names\n"
    )


def test_names_alike_after_unicode_normalisation_refused(tmp_path):
    """Names equal in their Unicode NFC form print alike: refused as one name, however
    they are given (file names, NAME=PATH, run tags, a dict's keys)."""
    composed, decomposed = "caf\u00e9", "cafe\u0301"
    a = sample_copy(tmp_path / f"{composed}.run", RUNS[0], composed)
    b = sample_copy(tmp_path / f"{decomposed}.run", RUNS[1], decomposed)
    alike = re.escape(
        r"two runs are named alike, 'caf\xe9' and 'cafe\u0301' (one Unicode NFC name)"
    )
    with pytest.raises(InputError) as caught:
        resolve_runs([a, b])
    assert str(caught.value) == (
        f"{b}: two runs are named alike, 'caf\\xe9' and 'cafe\\u0301' (one Unicode NFC "
        f"name) (inputs 1 and 2: {a} and {b}); name them NAME=PATH (in Python, a dict "
        "{name: run}) or use --names tag (trec_eval's runid, each file's run tag)"
    )
    with pytest.raises(InputError, match=alike):
        resolve_runs([run_argument(f"{composed}={RUNS[0]}"), run_argument(f"{decomposed}={b}")])
    other = sample_copy(tmp_path / "x" / "other.run", RUNS[1], decomposed)
    with pytest.raises(InputError, match=alike):
        resolve_runs([a, other], names="tag")
    keys = re.escape(r"keys 'caf\xe9' and 'cafe\u0301' are one name")
    with pytest.raises(InputError, match=f"{alike}.*{keys}"):
        prefeval.compare(QRELS, {composed: RUNS[0], decomposed: RUNS[1]})
    result = invoke("compare", QRELS, a, b)
    assert result.exit_code == 2 and "two runs are named alike" in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    "lines, line, message",
    [
        (["1 Q0 d 1 2.0 t1", "1 Q0 e 2 1.0 t2"], 2, "run tag 't2', not 't1' as on line 1"),
        (["# c", "1 Q0 d 1 2.0 t1", "", "2 Q0 e 2 1.0 t2 x"], 4, "run tag 't2', not 't1'"),
        (["1 Q0 d 1 2.0 t1", "1 Q0 e 2 1.0"], 2, "expected at least 6 columns"),
        (["# nothing"], None, "no result line, so no run tag"),
    ],
)
def test_tag_errors_name_the_line(tmp_path, lines, line, message):
    path = tmp_path / "r.run"
    path.write_text("".join(x + "\n" for x in lines))
    with pytest.raises(InputError) as caught:
        resolve_runs([path], names="tag")
    assert (caught.value.path, caught.value.line) == (str(path), line)
    assert message in caught.value.message


def test_tag_read_in_chunks_counts_lines(tmp_path, monkeypatch):
    """Tags are read a chunk of lines at a time: line numbers count across chunks."""
    monkeypatch.setattr(runs_module, "TAG_CHUNK", 40)
    lines = [f"1 Q0 d{i} {i + 1} {100 - i} same" for i in range(30)]
    lines[23] = lines[23].replace("same", "other")
    path = tmp_path / "r.run"
    path.write_text("\r\n".join(lines) + "\r\n")
    with pytest.raises(InputError) as caught:
        resolve_runs([path], names="tag")
    assert caught.value.line == 24 and "run tag 'other', not 'same'" in caught.value.message
    lines[23] = lines[22]
    path.write_text("\n".join(lines))
    assert list(resolve_runs([path], names="tag")) == ["same"]


def test_tag_of_a_large_gzip_run_is_read_in_bounded_memory(tmp_path, monkeypatch):
    """A run's tag is checked on every line, a chunk of lines at a time, a gzip run
    decompressed as it is read: the text held (Python's allocations, traced) stays
    within a few chunks, whatever the run's size, here 64 chunks."""
    import tracemalloc

    chunk = 1 << 16
    monkeypatch.setattr(runs_module, "TAG_CHUNK", chunk)
    line = b"301 Q0 clueweb12-0000tw-00-00000 1 12.5 tagged\n"
    data = line * (64 * chunk // len(line))
    path = tmp_path / "r.run.gz"
    path.write_bytes(gzip.compress(data))
    tracemalloc.start()
    try:
        assert list(resolve_runs([path], names="tag")) == ["tagged"]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * chunk, peak
    last = data[: -len(line)] + line.replace(b"tagged", b"other")  # the last line differs
    path.write_bytes(gzip.compress(last))
    with pytest.raises(InputError) as caught:
        resolve_runs([path], names="tag")
    assert caught.value.line == len(data) // len(line)
    assert "run tag 'other', not 'tagged' as on line 1" in caught.value.message


def test_parquet_tag_errors(tmp_path):
    frame = read_run(RUNS[0])
    columns = {"query_id": frame.query_id, "doc_id": frame.doc_id, "score": frame.score}
    untagged = tmp_path / "u.parquet"
    pq.write_table(pa.table(columns), untagged)
    with pytest.raises(InputError, match=r"column tag: missing \('tag' or 'run_id'\)"):
        resolve_runs([untagged], names="tag")
    mixed = tmp_path / "m.parquet"
    tags = ["a"] * (len(frame) - 1) + ["b"]
    pq.write_table(pa.table({**columns, "tag": tags}), mixed)
    with pytest.raises(InputError, match=f"row {len(frame)}: run tag 'b', not 'a' as on row 1"):
        resolve_runs([mixed], names="tag")
    with pytest.raises(ValueError, match="names: 'id'"):
        resolve_runs([untagged], names="id")


def test_unreadable_run_is_reported_when_read(tmp_path):
    """A run file that cannot be opened is an error when it is read (after the judgments
    are read and checked), with the reader's message."""
    got = resolve_runs([tmp_path / "missing"])
    with pytest.raises(InputError, match="missing: cannot read file"):
        got["missing"].read()


@pytest.mark.parametrize("keep", [True, False])
def test_baselines_read_the_engines_columns(keep, monkeypatch):
    """With ``order`` the baselines take the columns the engine parsed (each run parsed
    once) where they fit in :data:`KEEP_COLUMNS`, else parse each run again from the
    bytes of the run set (never reopened); the table is the same either way."""
    parsed = []
    parse = runs_module.parse_any_run
    monkeypatch.setattr(
        runs_module, "parse_any_run", lambda raw, path, *a, **k: parsed.append(path) or parse(
            raw, path, *a, **k
        )
    )  # fmt: skip
    monkeypatch.setattr(evidence, "KEEP_COLUMNS", (1 << 40) if keep else 0)
    # the engine's columns from the text reader, which the count sees (not the one-pass
    # reader of prefeval.io.textpass, which makes none)
    monkeypatch.setenv(textpass.ENV, "0")
    runs = [str(p) for p in RUNS[:3]]
    # cache=False: every run parsed by the engine
    table = prefeval.order(QRELS, runs, notify=None, cache=False)
    assert sorted(parsed) == sorted(runs * (1 if keep else 2))
    monkeypatch.setattr(evidence, "KEEP_COLUMNS", 0 if keep else (1 << 40))
    assert table.equals(prefeval.order(QRELS, runs, notify=None, cache=False))


def test_api_dict_names_runs(tmp_path):
    """In Python a dict {name: path or frame} names runs, whatever the files are called
    (two run.txt files): the rows are those of the same runs named by NAME=PATH."""
    a = sample_copy(tmp_path / "exp1" / "run.txt", RUNS[0])
    b = sample_copy(tmp_path / "exp2" / "run.txt", RUNS[1])
    frame = pd.DataFrame(
        {"query_id": read_run(RUNS[2]).query_id, "doc_id": read_run(RUNS[2]).doc_id}
    ).assign(score=read_run(RUNS[2]).score)
    got = prefeval.compare(QRELS, {"bm25": a, "dense": b, "mem": frame}, measures="rpp")
    assert list(zip(got.run_a, got.run_b)) == [("bm25", "dense"), ("bm25", "mem"), ("dense", "mem")]
    same = prefeval.compare(QRELS, [RUNS[0], RUNS[1], RUNS[2]], measures="rpp", notify=None)
    assert got.value.tolist() == same.value.tolist()
    table = prefeval.metrics(QRELS, {"bm25": a, "dense": b}, measures="AP")
    assert table.run.tolist() == ["bm25", "dense"]
    with pytest.raises(InputError, match="two runs are named 'run'"):
        prefeval.compare(QRELS, [a, b])


def test_input_error_pickles_whole():
    """An InputError raised in another process (a Dask worker) arrives with its path, line
    and message (the default pickling called __init__ with the message alone: TypeError)."""
    from prefeval.core.errors import InputError

    error = pickle.loads(pickle.dumps(InputError("runs/a.txt", 7, "a bad score")))
    assert (error.path, error.line, error.message) == ("runs/a.txt", 7, "a bad score")
    assert str(error) == "runs/a.txt:7: a bad score"
