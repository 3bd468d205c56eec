"""Small helpers for writing TREC files and running the CLI in-process."""

from __future__ import annotations

import contextlib
import gzip
import io
import os
from pathlib import Path

import pandas as pd
from click.testing import CliRunner

from prefeval.cli import cli

COLUMNS = ["measure", "run_a", "run_b", "query_id", "value"]


def write_qrels(path: Path, rows, sep: str = " ") -> Path:
    """rows: (qid, iteration, docno, grade)."""
    text = "".join(f"{q}{sep}{it}{sep}{d}{sep}{g}\n" for q, it, d, g in rows)
    Path(path).write_text(text, encoding="utf-8")
    return Path(path)


def run_lines(rows, tag: str | None = "tag"):
    """TREC run lines for (qid, docno, score) rows; ranks count up per query in row order
    (they are ignored by evaluation anyway)."""
    rank: dict[str, int] = {}
    lines = []
    for q, d, s in rows:
        rank[q] = rank.get(q, 0) + 1
        line = f"{q} Q0 {d} {rank[q]} {s!r}"
        if tag is not None:
            line += f" {tag}"
        lines.append(line)
    return lines


def write_run(path: Path, rows, tag: str | None = "tag", compress: bool = False) -> Path:
    """rows: (qid, docno, score)."""
    data = "".join(line + "\n" for line in run_lines(rows, tag)).encode("utf-8")
    if compress:
        data = gzip.compress(data)
    Path(path).write_bytes(data)
    return Path(path)


def invoke(*args):
    """Run ``prefeval ARGS`` in-process; returns the click Result (stdout/stderr separate)."""
    runner = CliRunner()
    return runner.invoke(cli, [str(a) for a in args], catch_exceptions=True)


def read_tsv(text: str) -> pd.DataFrame:
    """All columns as text (values converted by the caller with float(), exactly)."""
    return pd.read_csv(
        io.StringIO(text),
        sep="\t",
        dtype=str,
        keep_default_na=False,
    )


def tsv_to_dict(text: str) -> dict:
    frame = read_tsv(text)
    assert list(frame.columns) == COLUMNS
    return {
        (m, a, b, q): float(v)
        for m, a, b, q, v in zip(
            frame["measure"], frame["run_a"], frame["run_b"], frame["query_id"], frame["value"]
        )
    }


def bad_dictionary_parquet(path: Path, table, column: str) -> Path:
    """``table`` written to ``path`` with ``column`` dictionary-encoded and one index of its
    data page pointing past the dictionary (a corrupt or hostile file: pyarrow writes no
    such file itself).  The column must hold three distinct values in runs of 8 rows, so
    that its indices are three RLE runs of bit width 2, the last (index 2) made 3."""
    import pyarrow.parquet as pq

    out = io.BytesIO()
    pq.write_table(
        table,
        out,
        compression="NONE",
        write_statistics=False,
        use_dictionary=[column],
        data_page_version="1.0",
    )
    data = out.getvalue()
    runs = b"\x02\x10\x00\x10\x01\x10\x02"  # bit width 2; 8 x 0, 8 x 1, 8 x 2
    assert data.count(runs) == 1
    Path(path).write_bytes(data.replace(runs, runs[:-1] + b"\x03"))
    return Path(path)


def bad_parquet_inputs(folder: Path) -> dict[str, tuple[str, Path, str]]:
    """name -> (what it is: "qrels", "run" or "runs" (many), the Parquet file, a fragment
    of the message expected): a duplicated column name, a string column that is not
    UTF-8 (plain and dictionary-encoded), an index outside a column's dictionary."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    bad = pa.array([b"d1", b"d\xff2", b"d3"], pa.binary()).view(pa.string())
    q = pa.array(["1", "1", "1"])
    score = pa.array([3.0, 2.0, 1.0])
    grade = pa.array([1, 0, 1])
    tables = {
        "run-dup-column": (
            "run",
            pa.Table.from_arrays(
                [q, pa.array(["d1", "d2", "d3"]), pa.array(["d1", "d2", "d3"]), score],
                names=["query_id", "doc_id", "doc_id", "score"],
            ),
            "column doc_id: 2 columns",
        ),
        "runs-dup-column": (
            "runs",
            pa.Table.from_arrays(
                [pa.array(["a", "b", "b"]), pa.array(["a", "b", "b"]), q, q, score],
                names=["run", "run", "query_id", "doc_id", "score"],
            ),
            "column run: 2 columns",
        ),
        "qrels-dup-column": (
            "qrels",
            pa.Table.from_arrays(
                [q, q, grade, grade], names=["query_id", "doc_id", "relevance", "relevance"]
            ),
            "column relevance: 2 columns",
        ),
        "run-not-utf8": (
            "run",
            pa.table({"query_id": q, "doc_id": bad, "score": score}),
            "row 2: document id is not valid UTF-8",
        ),
        "runs-not-utf8": (
            "runs",
            pa.table({"run": bad, "query_id": q, "doc_id": ["a", "b", "c"], "score": score}),
            "row 2: run name is not valid UTF-8",
        ),
        "qrels-not-utf8": (
            "qrels",
            pa.table({"query_id": bad, "doc_id": ["a", "b", "c"], "relevance": grade}),
            "row 2: query id is not valid UTF-8",
        ),
    }
    out = {}
    for name, (kind, table, fragment) in tables.items():
        path = folder / f"{name}.parquet"
        pq.write_table(table, path)
        out[name] = (kind, path, fragment)
    dictionary = folder / "run-not-utf8-dictionary.parquet"
    pq.write_table(
        pa.table({"query_id": q, "doc_id": bad.dictionary_encode(), "score": score}), dictionary
    )
    out["run-not-utf8-dictionary"] = ("run", dictionary, "row 2: document id is not valid UTF-8")
    docs = [f"d{k // 8}" for k in range(24)]
    for kind, columns in (
        ("run", {"score": pa.array([float(24 - k) for k in range(24)])}),
        ("qrels", {"relevance": pa.array([1] * 24)}),
    ):
        table = pa.table({"query_id": ["1"] * 24, "doc_id": docs, **columns})
        path = bad_dictionary_parquet(folder / f"{kind}-bad-index.parquet", table, "doc_id")
        out[f"{kind}-bad-index"] = (kind, path, "not a readable Parquet file: Index not in")
    # a run column as pyarrow writes it (dictionary-encoded), read as a dictionary for
    # the run names: a flaw in a value in use is told at its first row
    table = pa.table({"run": [f"r{k // 8}" for k in range(24)], "query_id": ["1"] * 24,
                      "doc_id": [f"d{k}" for k in range(24)], "score": [1.0] * 24})  # fmt: skip
    path = bad_dictionary_parquet(folder / "runs-bad-index.parquet", table, "run")
    out["runs-bad-index"] = ("runs", path, "not a readable Parquet file: Index not in")
    for flaw, value, fragment in (("empty", "", "row 10: empty run name"),
                                  ("missing", None, "row 10: missing run name")):  # fmt: skip
        names = [f"r{k // 8}" for k in range(24)]
        names[9] = value
        path = folder / f"runs-{flaw}-name.parquet"
        pq.write_table(table.set_column(0, "run", pa.array(names, pa.string())), path)
        out[f"runs-{flaw}-name"] = ("runs", path, fragment)
    return out


@contextlib.contextmanager
def as_other_user(group: bool = False):
    """Run the body as user nobody (65534; with ``group`` also as its group nogroup) when
    root, so that root's files are another user's; a no-op otherwise."""
    if os.geteuid() != 0:
        yield
        return
    if group:
        os.setegid(65534)
    os.seteuid(65534)
    try:
        yield
    finally:
        os.seteuid(0)
        if group:
            os.setegid(0)


@contextlib.contextmanager
def readable_copies(*paths):
    """Copies of the files ``paths`` in a new folder of the system's temporary folder
    that every user may enter and read (the folder 0755, the files 0644), removed at the
    end: what a body run :func:`as_other_user` reads, since the clone the tests run in
    may sit in a folder only its owner can enter (``mktemp -d``, a 0700 home)."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="prefeval-readable-"))
    try:
        folder.chmod(0o755)
        copies = []
        for i, path in enumerate(paths):
            # a folder per file: copies of files with one name in other folders
            (folder / str(i)).mkdir()
            (folder / str(i)).chmod(0o755)
            copy = folder / str(i) / Path(path).name
            shutil.copyfile(path, copy)
            copy.chmod(0o644)
            copies.append(copy)
        yield copies
    finally:
        shutil.rmtree(folder)


def partition_cells(monkeypatch, cells: int) -> None:
    """Queries computed in partitions of at most ``cells`` cube cells: the field
    ``Options.partition_cells`` of every call, set where the API and the CLI judge their
    options (:func:`prefeval.options.judge`)."""
    from prefeval import api, options

    judge = options.judge

    def with_cells(**given):
        return judge(**{"partition_cells": cells, **given})

    monkeypatch.setattr(options, "judge", with_cells)
    monkeypatch.setattr(api, "judge", with_cells)


#: ``python -m prefeval`` with progress bars from the first moment (DELAY 0): argv after -c
TERMINAL_MAIN = (
    "import sys; from prefeval.core import progress; progress.DELAY = float(sys.argv.pop(1)); "
    "from prefeval.cli import main; main()"
)


def on_terminal(*args, delay: float = 0.0, columns: int = 120, stdout=None):
    """Run ``prefeval ARGS`` with stderr (and stdout, unless ``stdout`` names a file it
    is redirected to) on a pseudo-terminal of ``columns`` columns, its bars after
    ``delay`` seconds; returns (exit status, the bytes the terminal got, the bytes of the
    ``stdout`` file or None)."""
    import sys

    argv = [sys.executable, "-c", TERMINAL_MAIN, str(delay), *map(str, args)]
    return run_on_terminal(argv, columns, stdout)


def run_on_terminal(argv, columns: int = 120, stdout=None):
    """:func:`on_terminal` of the command ``argv``."""
    import fcntl
    import pty
    import struct
    import subprocess
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    redirected = None if stdout is None else open(stdout, "wb")  # noqa: SIM115
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=follower if redirected is None else redirected,
            stderr=follower,
            env={**os.environ, "COLUMNS": str(columns), "TERM": "xterm"},
        )
    finally:
        os.close(follower)
        if redirected is not None:
            redirected.close()
    seen = bytearray()
    try:
        while True:
            try:
                data = os.read(leader, 1 << 16)
            except OSError:  # EIO: every writer of the terminal has closed it
                break
            if not data:
                break
            seen += data
    finally:
        os.close(leader)
    code = proc.wait(timeout=600)
    return code, bytes(seen), None if stdout is None else Path(stdout).read_bytes()


def screen(data: bytes) -> list[str]:
    """The lines a terminal shows after receiving ``data``: carriage return, line feed,
    cursor up (``ESC [ A``) and erase to the end of the line (``ESC [ K``) as a terminal
    does them; other escape sequences dropped; trailing blanks and empty last lines gone."""
    import re

    text = data.decode("utf-8", "replace")
    lines, row, col = [""], 0, 0
    for token in re.findall(r"\x1b\[[0-9;?]*[A-Za-z]|.", text, re.S):
        if token == "\x1b[A":
            row = max(0, row - 1)
        elif token.startswith("\x1b[") and token.endswith("K"):
            lines[row] = lines[row][:col]
        elif token.startswith("\x1b"):
            continue
        elif token == "\r":
            col = 0
        elif token == "\n":
            row, col = row + 1, 0
            lines += [""] * (row + 1 - len(lines))
        else:
            line = lines[row].ljust(col)
            lines[row] = line[:col] + token + line[col + 1 :]
            col += 1
    lines = [line.rstrip() for line in lines]
    while lines and not lines[-1]:
        lines.pop()
    return lines


#: the Web 2012 runs of ../shared/data/web2012, by name (file name, suffix dropped), in
#: the order of their files
WEB2012_RUN_NAMES = [
    "ql-cata-filtered",
    "ql-cata",
    "ql-catb-filtered",
    "ql-catb",
    "rm-cata-filtered",
    "rm-cata",
    "rm-catb-filtered",
    "rm-catb",
]
