"""Malformed input: exit status 2, ``FILE:LINE: message`` on stderr, and no output file
created or clobbered."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest
from helpers import invoke, run_lines, write_qrels, write_run

GOOD_QRELS = [("1", 0, f"r{i}", 1 + i % 2) for i in range(6)] + [
    ("2", 0, "r0", 1),
    ("2", 0, "n0", 0),
]


def _good_run_rows(n_per_query: int = 10):
    return [
        (q, f"r{i}" if i < 6 else f"x{i}", float(100 - i))
        for q in ("1", "2")
        for i in range(n_per_query)
    ]


@pytest.fixture
def files(tmp_path):
    qrels = write_qrels(tmp_path / "qrels.txt", GOOD_QRELS)
    other = write_run(tmp_path / "input.other", _good_run_rows())
    return tmp_path, qrels, other


def _second(tmp_path: Path) -> Path:
    """A second good run (two runs are needed; the same file twice would be two runs
    with the same name, itself an error)."""
    return write_run(tmp_path / "input.second", _good_run_rows())


def check_error(tmp_path: Path, args, path, line=None, message=None):
    """Run ``prefeval compare ARGS`` three ways and check the error is reported at
    ``path:line:`` with exit 2, without creating or touching an output file."""
    where = f"{path}:{line}:" if line is not None else f"{path}:"
    out_dir = tmp_path / "out"
    out_dir.mkdir(exist_ok=True)

    result = invoke("compare", *args)
    assert result.exit_code == 2, (result.exit_code, result.stderr, repr(result.exception))
    assert where in result.stderr, result.stderr
    if line is None:
        # a line number must not be made up for file-level problems
        assert f"{path}:1:" not in result.stderr
    if message is not None:
        assert message in result.stderr.lower(), result.stderr
    assert result.stdout == ""

    fresh = out_dir / "new.tsv"
    result = invoke("compare", "-o", fresh, *args)
    assert result.exit_code == 2
    assert where in result.stderr
    assert not fresh.exists()

    existing = out_dir / "existing.tsv"
    existing.write_text("measure\trun_a\trun_b\tquery_id\tvalue\nrpp\ta\tb\tall\t0.5\n")
    before = existing.read_bytes()
    result = invoke("compare", "-o", existing, *args)
    assert result.exit_code == 2
    assert where in result.stderr
    assert existing.read_bytes() == before
    assert sorted(os.listdir(out_dir)) == ["existing.tsv"]  # no temporary files left


def _write_lines(path: Path, lines, eol="\n", compress=False) -> Path:
    data = "".join(line + eol for line in lines).encode("utf-8")
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


# --------------------------------------------------------------------------- runs

BAD_RUN_LINES = {
    "4 columns": "1 Q0 r9 1.5",
    "4 columns with tag": "1 Q0 r9 tag",
    "NUL byte in docno": "1 Q0 r\x009 3 1.5 tag",
    "infinite grade-like score text": "1 Q0 r9 3 1.5.5 tag",
    "3 columns": "1 Q0 r9",
    "non-numeric score": "1 Q0 r9 3 high tag",
    "NaN score": "1 Q0 r9 3 NaN tag",
    "nan score": "1 Q0 r9 3 nan tag",
    "invalid UTF-8 docno": b"1 Q0 r\xff9 3 1.5 tag",
}


@pytest.mark.parametrize("case", sorted(BAD_RUN_LINES))
@pytest.mark.parametrize("line", [1, 3, 500])
def test_bad_run_line(files, case, line):
    tmp_path, qrels, other = files
    good = run_lines([(q, f"d{i}", float(-i)) for i in range(600) for q in ("1",)])
    bad = BAD_RUN_LINES[case]
    lines = (
        [x.encode() for x in good[: line - 1]]
        + [bad if isinstance(bad, bytes) else bad.encode()]
        + [x.encode() for x in good[line - 1 : 700]]
    )
    path = tmp_path / "input.bad"
    path.write_bytes(b"".join(x + b"\n" for x in lines))
    check_error(tmp_path, [qrels, other, path], path, line)


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("eol", ["\n", "\r\n"])
def test_late_error_after_regular_lines(files, compress, eol):
    """499 regular single-space lines (the fast path's favourite) and then a bad one."""
    tmp_path, qrels, other = files
    lines = run_lines([("1", f"d{i:04d}", float(1000 - i)) for i in range(499)])
    lines.append("1 Q0 d9999 500 notanumber tag")
    lines += run_lines([("2", f"e{i}", float(-i)) for i in range(50)])
    path = _write_lines(tmp_path / "late.run", lines, eol=eol, compress=compress)
    check_error(tmp_path, [qrels, path, other], path, 500)


@pytest.mark.parametrize("first", [1, 7])
def test_duplicate_docno_reports_second_occurrence(files, first):
    tmp_path, qrels, other = files
    rows = [("1", f"d{i:04d}", float(1000 - i)) for i in range(600)]
    lines = run_lines(rows)
    # the docno of line `first` again for the same query at line 500
    lines.insert(499, f"1 Q0 d{first - 1:04d} 500 0.25 tag")
    path = _write_lines(tmp_path / "input.dup", lines)
    check_error(tmp_path, [qrels, other, path], path, 500)


def test_same_docno_in_two_queries_is_fine(files):
    tmp_path, qrels, other = files
    path = write_run(tmp_path / "input.ok", [("1", "r0", 2.0), ("2", "r0", 1.0)])
    result = invoke("compare", qrels, other, path)
    assert result.exit_code == 0, result.stderr


def test_blank_lines_count_in_line_numbers(files):
    tmp_path, qrels, other = files
    path = tmp_path / "input.blanks"
    path.write_text("1 Q0 r0 1 3.0 t\n\n   \n1 Q0 r1 2 x t\n")
    check_error(tmp_path, [qrels, other, path], path, 4)


def test_missing_run_file(files):
    tmp_path, qrels, other = files
    missing = tmp_path / "input.missing"
    check_error(tmp_path, [qrels, other, missing], missing)


def test_run_is_a_directory(files):
    tmp_path, qrels, other = files
    folder = tmp_path / "input.folder"
    folder.mkdir()
    out = tmp_path / "out.tsv"
    result = invoke("compare", "-o", out, qrels, other, folder)
    assert result.exit_code == 2
    assert str(folder) in result.stderr
    assert not out.exists()


def test_unreadable_run_file(files):
    tmp_path, qrels, other = files
    if os.geteuid() == 0:
        pytest.skip("permissions do not stop root from reading a file")
    path = write_run(tmp_path / "input.secret", _good_run_rows())
    path.chmod(0)
    try:
        check_error(tmp_path, [qrels, other, path], path)
    finally:
        path.chmod(0o644)


def test_missing_qrels_file(files):
    tmp_path, _qrels, other = files
    missing = tmp_path / "no-qrels.txt"
    check_error(tmp_path, [missing, other, _second(tmp_path)], missing)


@pytest.mark.parametrize("kind", ["garbage", "truncated"])
def test_corrupt_gzip_run(files, kind):
    tmp_path, qrels, other = files
    data = gzip.compress(("".join(x + "\n" for x in run_lines(_good_run_rows(300)))).encode())
    if kind == "garbage":
        data = b"\x1f\x8b" + b"this is not deflate data" * 10
    else:
        data = data[: len(data) // 2]
    path = tmp_path / "input.broken.gz"
    path.write_bytes(data)
    check_error(tmp_path, [qrels, other, path], path, message="gzip")


def test_corrupt_gzip_qrels(files):
    tmp_path, _qrels, other = files
    path = tmp_path / "qrels.gz"
    path.write_bytes(gzip.compress(b"1 0 r0 1\n" * 100)[:-12])
    check_error(tmp_path, [path, other, _second(tmp_path)], path, message="gzip")


def test_two_runs_with_the_same_name(files):
    tmp_path, qrels, other = files
    (tmp_path / "d1").mkdir()
    (tmp_path / "d2").mkdir()
    first = write_run(tmp_path / "d1" / "input.same", _good_run_rows())
    second = write_run(tmp_path / "d2" / "same.gz", _good_run_rows(), compress=True)
    result = invoke("compare", qrels, first, second)
    assert result.exit_code == 2
    assert "same" in result.stderr
    check_error(tmp_path, [qrels, first, second], second)


def test_error_in_second_run_names_that_file(files):
    tmp_path, qrels, other = files
    bad = _write_lines(tmp_path / "input.b", ["1 Q0 r0 1 1.0 t", "1 Q0 r1 2"])
    check_error(tmp_path, [qrels, other, bad], bad, 2)


# --------------------------------------------------------------------------- qrels

BAD_QRELS_LINES = {
    # rX is judged nowhere else, so an accepted bad line cannot fail for another reason
    "3 columns": "1 0 rX",
    "5 columns": "1 0 rX 1 extra",
    "non-numeric grade": "1 0 rX relevant",
    "NaN grade": "1 0 rX nan",
    "bad iteration": "1 x rX 1",
    "fractional iteration": "1 1.5 rX 1",
    "duplicate judgment": "1 0 r0 2",  # r0 is judged at line 1
    "duplicate judgment spelled Q0": "1 Q0 r0 2",  # iteration Q0 is iteration 0
}


@pytest.mark.parametrize("case", sorted(BAD_QRELS_LINES))
@pytest.mark.parametrize("line", [2, 500])
def test_bad_qrels_line(files, case, line):
    tmp_path, _qrels, other = files
    good = [f"1 0 r{i} {i % 3}" for i in range(700)]
    lines = [*good[: line - 1], BAD_QRELS_LINES[case], *good[line - 1 :]]
    path = _write_lines(tmp_path / "qrels.bad", lines)
    check_error(tmp_path, [path, other, _second(tmp_path)], path, line)


@pytest.mark.parametrize("eol", ["\n", "\r\n"])
def test_bad_qrels_gzip_late_line(files, eol):
    tmp_path, _qrels, other = files
    good = [f"{q}  0  r{i}  {i % 3}" for q in ("1", "2") for i in range(300)]
    lines = [*good[:499], "1 0 r9999 one", *good[499:]]
    path = _write_lines(tmp_path / "qrels.txt.gz", lines, eol=eol, compress=True)
    check_error(tmp_path, [path, other, _second(tmp_path)], path, 500)


def test_duplicate_subtopic_judgment(files):
    tmp_path, _qrels, other = files
    lines = ["1 1 r0 1", "1 2 r0 0", "1 1 r1 1", "1 2 r0 1"]
    path = _write_lines(tmp_path / "qrels.st", lines)
    check_error(tmp_path, [path, other, _second(tmp_path)], path, 4)


def test_same_document_in_two_subtopics_is_fine(files):
    tmp_path, _qrels, other = files
    path = _write_lines(tmp_path / "qrels.st", ["1 1 r0 1", "1 2 r0 1", "1 3 r1 0"])
    again = write_run(tmp_path / "input.again", _good_run_rows())
    result = invoke("compare", "-m", "strpp", path, other, again)
    assert result.exit_code == 0, result.stderr


def test_gzip_bomb_is_a_clear_error(files, monkeypatch):
    """A run that decompresses beyond the memory limit fails with one line naming it
    (the limit is lowered here instead of writing gigabytes)."""
    from prefeval.io import source

    tmp_path, qrels, other = files
    path = tmp_path / "input.bomb.gz"
    path.write_bytes(gzip.compress(b"1 Q0 d 1 1.0 t\n" * 100_000))
    monkeypatch.setattr(source, "memory_limit", lambda: 1 << 20)
    result = invoke("compare", qrels, other, path)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"{path}: decompresses to more than 1 MiB")
    assert "Traceback" not in result.stderr


def test_multi_member_gzip_is_read_whole(files):
    """Concatenated gzip members (as `cat a.gz b.gz` makes) are one file, as gzip -d reads it."""
    tmp_path, qrels, other = files
    rows = _good_run_rows()
    lines = run_lines(rows)
    half = len(lines) // 2
    joined = tmp_path / "input.joined.gz"
    joined.write_bytes(
        gzip.compress("".join(x + "\n" for x in lines[:half]).encode())
        + gzip.compress("".join(x + "\n" for x in lines[half:]).encode())
    )
    plain = write_run(tmp_path / "input.joined", rows)
    a = invoke("compare", "-q", qrels, other, joined)
    b = invoke("compare", "-q", qrels, other, plain)
    assert a.exit_code == 0 and a.stdout == b.stdout


def _junk_after_a_member(data: bytes, junk: bytes, at_end: bool) -> bytes:
    """``data`` gzip-compressed in two members with ``junk`` after the first (between
    them) or after the last."""
    half = data.index(b"\n", len(data) // 2) + 1
    first, second = gzip.compress(data[:half]), gzip.compress(data[half:])
    return first + second + junk if at_end else first + junk + second


@pytest.mark.parametrize("at_end", [False, True])
@pytest.mark.parametrize("which", ["run", "qrels"])
def test_junk_after_a_gzip_member_is_an_error(files, at_end, which):
    """Bytes after a gzip member that start no other member (a log line, a download
    appended to a partial one) are an error, as ``gzip -d`` reports them, never a file
    read up to the junk: the later members would be dropped without a word."""
    tmp_path, qrels, other = files
    if which == "run":
        text = "".join(x + "\n" for x in run_lines(_good_run_rows(300))).encode()
    else:
        text = "".join(f"{q} 0 r{i} {1 + i % 2}\n" for q in ("1", "2") for i in range(300))
        text = text.encode()
    path = tmp_path / f"{which}.gz"
    path.write_bytes(_junk_after_a_member(text, b"a log line\n", at_end))
    offset = len(gzip.compress(text[: text.index(b"\n", len(text) // 2) + 1]))
    if at_end:
        offset = len(path.read_bytes()) - len(b"a log line\n")
    args = [qrels, other, path] if which == "run" else [path, other, _second(tmp_path)]
    check_error(tmp_path, args, path, message=f"trailing garbage after gzip data at byte {offset}")


def test_junk_after_a_gzip_member_of_a_table_is_an_error(files):
    """A preference table read back (``--prefs``) checks its gzip members as runs do."""
    tmp_path, qrels, other = files
    table = tmp_path / "prefs.tsv"
    result = invoke("compare", "-q", "-o", table, qrels, other, _second(tmp_path))
    assert result.exit_code == 0, result.stderr
    path = tmp_path / "prefs.tsv.gz"
    path.write_bytes(_junk_after_a_member(table.read_bytes(), b"\x00junk", False))
    result = invoke("order", "--prefs", path, "--no-baselines")
    assert result.exit_code == 2, result.stderr
    assert result.stderr.startswith(f"{path}: trailing garbage after gzip data at byte ")
    assert result.stdout == ""


def test_zero_padding_after_the_last_gzip_member_is_ignored(files):
    """Zero bytes after the last member (a block device's or tar's padding) are ignored,
    as ``gzip -d`` ignores them."""
    tmp_path, qrels, other = files
    rows = _good_run_rows()
    padded = tmp_path / "input.padded.gz"
    text = "".join(x + "\n" for x in run_lines(rows)).encode()
    padded.write_bytes(_junk_after_a_member(text, bytes(512), True))
    plain = write_run(tmp_path / "input.padded", rows)
    a = invoke("compare", "-q", qrels, other, padded)
    b = invoke("compare", "-q", qrels, other, plain)
    assert a.exit_code == 0 and a.stdout == b.stdout


# --------------------------------------------------------------------------- line ends

CR_QRELS = [("1", 0, "d1", 1), ("1", 0, "d3", 1), ("1", 0, "d5", 0), ("2", 0, "d2", 1)]
CR_RUN = [("1", f"d{i}", float(6 - i)) for i in range(1, 6)]


@pytest.mark.parametrize("eols", [["\r"], ["\r\n"], ["\r", "\r\n", "\n"], ["\n", "\r"]])
@pytest.mark.parametrize("which", ["run", "qrels"])
def test_cr_and_mixed_line_ends_are_line_ends(tmp_path, eols, which):
    """Old-Mac CR line ends, CRLF, or any mix (a stray CR included) are line ends: the
    file is read as the LF file (``metrics -m NumRet,AP``: 5 documents retrieved, not 1
    with the other four dropped as fields after the tag)."""
    plain = {
        "qrels": write_qrels(tmp_path / "qrels.txt", CR_QRELS),
        "run": write_run(tmp_path / "input.run", CR_RUN),
    }
    lines = Path(plain[which]).read_text().splitlines()
    styled = tmp_path / "styled" / Path(plain[which]).name
    styled.parent.mkdir()
    styled.write_bytes("".join(row + eols[k % len(eols)] for k, row in enumerate(lines)).encode())
    files = dict(plain, **{which: styled})
    want = invoke("metrics", "-q", "-m", "NumRet,AP", plain["qrels"], plain["run"])
    got = invoke("metrics", "-q", "-m", "NumRet,AP", files["qrels"], files["run"])
    assert want.exit_code == got.exit_code == 0, got.stderr
    assert got.stdout == want.stdout
    assert "NumRet\trun\tall\t5\n" in got.stdout
    assert "AP\trun\tall\t0.41666666666666663" in got.stdout


@pytest.mark.parametrize(
    "text, line",
    [
        (b"1 Q0 d1 1 5 t\r1 Q0 d2 2 x t\r", 2),
        (b"1 Q0 d1 1 5 t\r\n1 Q0 d2 2 4 t\r1 Q0 d3 3 3 t\n1 Q0 d4 4 x t\r", 4),
        (b"1 Q0 d1 1 5 t\r\r1 Q0 d2 2 4 t\r\n\r\n1 Q0 d3 3 y t\n", 5),
        (b"1 Q0 d1 1 5 t\r1 Q0 d2 2 4 t\r1 Q0 \xff 3 3 t\r", 3),  # invalid UTF-8
        (b"1 Q0 d1 1 5 t\r1 Q0 d2 2 4 t\r1 Q0 d1 3 3 t\r", 3),  # a duplicate
    ],
)
def test_line_numbers_count_every_line_end_style(files, text, line):
    """FILE:LINE counts a line end as a line end whichever its style (blank CR lines too)."""
    tmp_path, qrels, other = files
    bad = tmp_path / "input.bad"
    bad.write_bytes(text)
    check_error(tmp_path, [qrels, bad, other], bad, line)


@pytest.mark.parametrize("eol", ["\r", "\r\n", "mixed"])
@pytest.mark.parametrize("fmt", ["tsv", "csv", "jsonl"])
def test_tables_with_cr_line_ends(tmp_path, eol, fmt):
    """A --prefs table (tsv, csv or jsonl) with CR, CRLF or mixed line ends is the table."""
    qrels = write_qrels(tmp_path / "qrels.txt", GOOD_QRELS)
    runs = [write_run(tmp_path / f"input.r{k}", _good_run_rows(6 + k)) for k in range(3)]
    table = tmp_path / f"prefs.{fmt}"
    assert invoke("compare", "-q", "-f", fmt, "-o", table, qrels, *runs).exit_code == 0
    lines = table.read_text().splitlines()
    ends = ["\r", "\r\n", "\n"] if eol == "mixed" else [eol]
    styled = tmp_path / f"styled.{fmt}"
    styled.write_text("".join(row + ends[k % len(ends)] for k, row in enumerate(lines)), newline="")
    want = invoke("order", "--prefs", table, "--no-baselines")
    got = invoke("order", "--prefs", styled, "--no-baselines")
    assert want.exit_code == got.exit_code == 0, got.stderr
    assert got.stdout == want.stdout


def test_csv_table_header_ends_at_a_cr(tmp_path):
    """The format of a table is told from its first line, which a CR ends: a csv table
    with CR line ends and a tab inside a later field (a run named ``a<TAB>b``) is csv."""
    qrels = write_qrels(tmp_path / "qrels.txt", GOOD_QRELS)
    runs = [
        write_run(tmp_path / name, _good_run_rows(6 + k))
        for k, name in enumerate(["input.a\tb", "input.c", "input.d"])
    ]
    table = tmp_path / "prefs.csv"
    assert invoke("compare", "-q", "-f", "csv", "-o", table, qrels, *runs).exit_code == 0
    styled = tmp_path / "styled.csv"
    styled.write_bytes(table.read_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r"))
    # csv out too: tsv refuses a run name holding a tab
    want = invoke("order", "-f", "csv", "--no-baselines", "--prefs", table)
    got = invoke("order", "-f", "csv", "--no-baselines", "--prefs", styled)
    assert want.exit_code == got.exit_code == 0, got.stderr
    assert "a\tb" in got.stdout and got.stdout == want.stdout
