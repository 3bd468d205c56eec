"""Qrels given as an ir_datasets id (``irds:ID``): the same tables as the file they hold,
in the CLI and the API, subtopic qrels included; one line and exit status 2 (an
InputError in Python) without the package, for an unknown id or a dataset without
qrels, and for qrels neither in ir_datasets' cache nor downloadable, in seconds.

No test uses the network: the datasets are registered on local files, or an existing
id's qrels are laid out in a temporary ``IR_DATASETS_HOME``, and name resolution is
made to fail (or to hang) where a download would be tried."""

from __future__ import annotations

import gzip
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from helpers import invoke

import prefeval
from prefeval.io import irds

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_data"
QRELS = SAMPLE / "qrels.txt"
SUBTOPICS = SAMPLE / "qrels.subtopics.txt"
RUNS = sorted((SAMPLE / "runs").glob("input.*"))
#: datasets registered by the ``registered`` fixture
SAMPLE_ID = "irds:prefeval-test/sample"
SUBTOPICS_ID = "irds:prefeval-test/subtopics"
#: downloaded from prefeval.invalid, or its mirror (.invalid never resolves: RFC 2606)
ABSENT_ID = "irds:prefeval-test/absent"
LOCAL_ID = "irds:prefeval-test/local-absent"  # a local file that is not there
NO_QRELS_ID = "irds:prefeval-test/queries-only"
MALFORMED_ID = "irds:prefeval-test/malformed"  # a qrels line of three fields
#: ir_datasets' id of the TREC 2012 Web track (ClueWeb09), its qrels files in its cache
WEB2012 = "irds:clueweb09/en/trec-web-2012"
#: what a command says of an id without the package
NO_PACKAGE = "ir_datasets ids need ir-datasets: pip install 'prefeval[irds]'"
#: a child that runs the command with name resolution failing: no download can happen
OFFLINE = (
    "import socket, sys\n"
    "def offline(*args, **kwargs):\n"
    "    raise socket.gaierror(socket.EAI_NONAME, 'Name or service not known')\n"
    "socket.getaddrinfo = offline\n"
)
OFFLINE_MAIN = OFFLINE + "from prefeval.cli import main\nmain(sys.argv[1:])\n"
#: ``ir_datasets ARGS`` (its command) offline
OFFLINE_EXPORT = OFFLINE + "import ir_datasets\nir_datasets.main_cli()\n"
PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


@pytest.fixture(scope="module")
def registered(tmp_path_factory):
    """ir_datasets, imported with its home in a temporary folder, and the test datasets
    registered: the sample qrels, the sample subtopic qrels, qrels to download from a
    host that does not exist, a local qrels file that is not there, and queries only."""
    home = tmp_path_factory.mktemp("irds-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("IR_DATASETS_HOME", str(home))
        ir_datasets = pytest.importorskip("ir_datasets")
        from ir_datasets.formats import TrecQrels, TrecSubQrels, TsvQueries
        from ir_datasets.util.download import Download, LocalDownload, RequestsDownload

        queries = home / "queries.tsv"
        queries.write_text("301\tone query\n", encoding="utf-8")
        malformed = home / "malformed.txt"
        malformed.write_text("301 0 doc1 1\n301 doc2 1\n", encoding="utf-8")
        datasets = {
            SAMPLE_ID: TrecQrels(LocalDownload(QRELS), {}),
            SUBTOPICS_ID: TrecSubQrels(LocalDownload(SUBTOPICS), {}),
            ABSENT_ID: TrecQrels(
                Download(
                    [
                        RequestsDownload("https://prefeval.invalid/qrels"),
                        RequestsDownload("https://mirror.prefeval.invalid/qrels"),
                    ],
                    cache_path=str(home / "absent" / "qrels"),
                ),
                {},
            ),
            LOCAL_ID: TrecQrels(LocalDownload(home / "local" / "qrels"), {}),
            NO_QRELS_ID: TsvQueries(LocalDownload(queries)),
            MALFORMED_ID: TrecQrels(LocalDownload(malformed), {}),
        }
        for name, handler in datasets.items():
            try:
                ir_datasets.registry.register(name[len("irds:") :], ir_datasets.Dataset(handler))
            except RuntimeError:  # registered by an earlier run in this process
                pass
        yield home


@pytest.fixture
def offline(monkeypatch):
    """Name resolution fails at once, and no proxy is set."""
    for name in PROXIES:
        monkeypatch.delenv(name, raising=False)

    def fail(*args, **kwargs):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", fail)


def _needs_ir_datasets() -> None:
    """Skip without the package, which the child processes import: not imported here,
    where its import would make folders in the user's own IR_DATASETS_HOME."""
    if importlib.util.find_spec("ir_datasets") is None:
        pytest.skip("ir-datasets is not installed (the irds extra)")


def _cache_home(folder: Path, adhoc: Path, diversity: Path) -> Path:
    """An IR_DATASETS_HOME holding the TREC 2012 Web track's qrels files where
    ir_datasets keeps them: ``adhoc`` and ``diversity`` (ndeval's qrels.all), each
    decompressed when gzip."""
    place = folder / "clueweb09" / "trec-web-2012"
    place.mkdir(parents=True)
    for source, name in ((adhoc, "qrels"), (diversity, "qrels.all")):
        opener = gzip.open if source.suffix == ".gz" else open
        with opener(source, "rb") as src, open(place / name, "wb") as out:
            shutil.copyfileobj(src, out)
    return folder


def _child(args, home: Path, timeout: float = 120, main: str = OFFLINE_MAIN, stdin=None):
    """``prefeval ARGS`` (or another ``main``) in a child process with
    ``IR_DATASETS_HOME=home``, offline; ``stdin``: bytes on its standard input."""
    env = {k: v for k, v in os.environ.items() if k not in PROXIES}
    env["IR_DATASETS_HOME"] = str(home)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", main, *map(str, args)],
        input=stdin,
        capture_output=True,
        timeout=timeout,
        env=env,
    )
    return proc, time.monotonic() - start


# --- the same tables as the files -----------------------------------------------------

CASES = {  # name: (arguments before QRELS, file, id)
    "compare": (["compare", "-q"], QRELS, SAMPLE_ID),
    "metrics": (["metrics", "-q"], QRELS, SAMPLE_ID),
    "order": (["order", "-B", "AP"], QRELS, SAMPLE_ID),
    "subtopic-compare": (["compare", "-q", "-m", "ST-RPP,rpp"], SUBTOPICS, SUBTOPICS_ID),
    "subtopic-metrics": (["metrics", "-q"], SUBTOPICS, SUBTOPICS_ID),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_command_on_an_id_writes_what_it_writes_on_the_file(registered, case):
    args, path, dataset = CASES[case]
    on_file = invoke(*args, path, *RUNS)
    on_id = invoke(*args, dataset, *RUNS)
    assert on_file.exit_code == 0, on_file.stderr
    assert on_id.exit_code == 0, on_id.stderr
    assert on_id.stdout_bytes == on_file.stdout_bytes
    assert on_id.stderr == on_file.stderr  # the same notices (sys04 misses a query)


def test_api_on_an_id_returns_the_tables_of_the_file(registered):
    runs = [str(p) for p in RUNS]
    for path, dataset, measures in ((QRELS, SAMPLE_ID, "rpp"), (SUBTOPICS, SUBTOPICS_ID, "strpp")):
        pd.testing.assert_frame_equal(
            prefeval.compare(dataset, runs, measures=measures, per_query=True, notify=None),
            prefeval.compare(str(path), runs, measures=measures, per_query=True, notify=None),
        )
        pd.testing.assert_frame_equal(
            prefeval.metrics(dataset, runs, per_query=True, notify=None),
            prefeval.metrics(str(path), runs, per_query=True, notify=None),
        )
    judged = prefeval.read_qrels(SUBTOPICS_ID)
    assert judged.name == SUBTOPICS_ID
    assert judged.has_subtopics
    assert len(judged.query_ids()) == 20


def test_qrels_absent_from_the_cache_are_downloaded_once(registered, monkeypatch, tmp_path):
    """Served on this machine (no network): the first read downloads them into the
    cache, through the reachability check; later reads need no server."""
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    import ir_datasets
    from ir_datasets.formats import TrecQrels
    from ir_datasets.util.download import Download, RequestsDownload

    for name in PROXIES:
        monkeypatch.delenv(name, raising=False)
    served = tmp_path / "served"
    served.mkdir()
    shutil.copy(QRELS, served / "qrels.txt")

    class Quiet(SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(served), **kwargs)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    cached = tmp_path / "cache" / "qrels"
    url = f"http://127.0.0.1:{server.server_address[1]}/qrels.txt"
    name = f"prefeval-test/served-{tmp_path.name}"
    ir_datasets.registry.register(
        name, ir_datasets.Dataset(TrecQrels(Download([RequestsDownload(url)], str(cached)), {}))
    )
    expected = invoke("compare", "-q", QRELS, *RUNS)
    try:
        downloaded = invoke("compare", "-q", f"irds:{name}", *RUNS)
    finally:
        server.shutdown()
        server.server_close()
    assert downloaded.stdout_bytes == expected.stdout_bytes, downloaded.stderr
    assert downloaded.stderr == expected.stderr  # no log line; no bar off a terminal
    assert cached.read_bytes() == QRELS.read_bytes()
    again = invoke("compare", "-q", f"irds:{name}", *RUNS)
    assert again.stdout_bytes == expected.stdout_bytes
    assert again.stderr == expected.stderr


def test_a_file_named_like_an_id_is_read_by_its_path(tmp_path):
    path = tmp_path / "irds:sample"
    shutil.copy(QRELS, path)
    assert invoke("compare", path, *RUNS[:2]).stdout == invoke("compare", QRELS, *RUNS[:2]).stdout


def test_an_existing_id_reads_its_qrels_from_the_cache_offline(tmp_path):
    """ir_datasets' own id of the Web 2012 track, its qrels files laid out in its cache
    (the sample qrels standing for them): the command never downloads."""
    _needs_ir_datasets()
    home = _cache_home(tmp_path / "home", QRELS, SUBTOPICS)
    for args, path, dataset in (
        (["compare", "-q"], QRELS, WEB2012),
        (["compare", "-q", "-m", "ST-RPP"], SUBTOPICS, f"{WEB2012}/diversity"),
    ):
        on_id, _ = _child([*args, dataset, *RUNS], home)
        on_file = invoke(*args, path, *RUNS)
        assert on_id.returncode == 0, on_id.stderr
        assert on_id.stdout == on_file.stdout_bytes
        assert on_id.stderr.decode() == on_file.stderr


def test_ir_datasets_export_piped_in_gives_the_same_tables(tmp_path):
    """docs/formats.md's pipes: ``ir_datasets export ID qrels | prefeval compare -``, and
    for subtopic qrels the columns in ndeval order (TSV)."""
    _needs_ir_datasets()
    home = _cache_home(tmp_path / "home", QRELS, SUBTOPICS)
    ndeval = ["--format", "tsv", "--fields", "query_id", "subtopic_id", "doc_id", "relevance"]
    for args, path, export in (
        (["compare", "-q"], QRELS, ["export", WEB2012[5:], "qrels"]),
        (
            ["compare", "-q", "-m", "ST-RPP"],
            SUBTOPICS,
            ["export", f"{WEB2012[5:]}/diversity", "qrels", *ndeval],
        ),
    ):
        exported, _ = _child(export, home, main=OFFLINE_EXPORT)
        assert exported.returncode == 0, exported.stderr
        piped, _ = _child([*args, "-", *RUNS], home, stdin=exported.stdout)
        assert piped.returncode == 0, piped.stderr
        assert piped.stdout == invoke(*args, path, *RUNS).stdout_bytes


def test_web2012_by_id_equals_the_shared_files(web2012, tmp_path):
    """The real TREC 2012 Web track qrels, ad hoc and diversity, by their ir_datasets ids
    (laid out in its cache) and by their files."""
    _needs_ir_datasets()
    adhoc, diversity = web2012 / "qrels.adhoc.txt.gz", web2012 / "qrels.diversity-ndeval.txt.gz"
    home = _cache_home(tmp_path / "home", adhoc, diversity)
    runs = sorted((web2012 / "runs").glob("*.run.gz"))[:3]
    for args, path, dataset in (
        (["metrics", "-m", "AP,nDCG@20"], adhoc, WEB2012),
        (["compare", "-m", "ST-RPP,rpp"], diversity, f"{WEB2012}/diversity"),
        (["metrics", "-m", "alpha_nDCG@20"], diversity, f"{WEB2012}/diversity"),
    ):
        on_id, _ = _child([*args, dataset, *runs], home)
        on_file = invoke(*args, path, *runs)
        assert on_id.returncode == 0, on_id.stderr
        assert on_id.stdout == on_file.stdout_bytes
        assert on_id.stdout.count(b"\n") > 3


# --- errors: one line, exit status 2 ---------------------------------------------------


def _one_line(result, expected: str) -> None:
    assert result.exit_code == 2, result.stdout
    assert result.stderr == expected + "\n"
    assert result.stdout == ""


def test_without_the_package_an_id_is_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "ir_datasets", None)  # import ir_datasets fails
    _one_line(invoke("compare", "irds:vaswani", *RUNS[:2]), f"irds:vaswani: {NO_PACKAGE}")
    with pytest.raises(prefeval.InputError, match=r"pip install 'prefeval\[irds\]'"):
        prefeval.compare("irds:vaswani", [str(p) for p in RUNS[:2]])


def test_unknown_id_and_no_qrels_are_one_line(registered):
    _one_line(
        invoke("compare", "irds:no/such/dataset", *RUNS[:2]),
        "irds:no/such/dataset: no such ir_datasets id (`ir_datasets list` lists them)",
    )
    _one_line(
        invoke("metrics", NO_QRELS_ID, *RUNS[:2]),
        f"{NO_QRELS_ID}: this ir_datasets dataset has no qrels",
    )
    with pytest.raises(prefeval.InputError, match="no such ir_datasets id"):
        prefeval.read_qrels("irds:no/such/dataset")


def test_qrels_ir_datasets_cannot_parse_are_one_line(registered):
    _one_line(
        invoke("compare", MALFORMED_ID, *RUNS[:2]),
        f"{MALFORMED_ID}: ir_datasets cannot give the qrels: RuntimeError: expected 4 "
        "columns, got 3",
    )


def test_a_cache_folder_ir_datasets_cannot_make_is_one_line(tmp_path):
    _needs_ir_datasets()
    (tmp_path / "file").write_text("")
    home = tmp_path / "file" / "home"  # under a file: no folder can be made there
    proc, _ = _child(["compare", "irds:vaswani", *RUNS[:2]], home, timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.decode().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("irds:vaswani: ir_datasets cannot start: ")


def test_qrels_neither_cached_nor_downloadable_are_one_line_at_once(registered, offline):
    start = time.monotonic()
    result = invoke("compare", ABSENT_ID, *RUNS[:2])
    took = time.monotonic() - start
    _one_line(
        result,
        f"{ABSENT_ID}: the qrels are not in ir_datasets' cache ({registered}) and cannot be "
        "downloaded: cannot resolve prefeval.invalid: Name or service not known",
    )
    assert took < 5
    local = registered / "local" / "qrels"
    _one_line(
        invoke("compare", LOCAL_ID, *RUNS[:2]),
        f"{LOCAL_ID}: a file of the qrels is not in ir_datasets' cache ({registered}): {local}",
    )


def test_a_resolver_that_does_not_answer_is_waited_for_a_bounded_time(registered, monkeypatch):
    """Every retry of ir_datasets' (3 by default) finds the host already found
    unreachable, and the mirror is not resolved once the resolver has been silent: one
    wait of REACH_SECONDS in all."""
    for name in PROXIES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(irds, "REACH_SECONDS", 0.5)
    asked = []

    def hang(host, *args, **kwargs):
        asked.append(host)
        time.sleep(30)
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    monkeypatch.setattr(socket, "getaddrinfo", hang)
    start = time.monotonic()
    result = invoke("compare", ABSENT_ID, *RUNS[:2])
    took = time.monotonic() - start
    _one_line(
        result,
        f"{ABSENT_ID}: the qrels are not in ir_datasets' cache ({registered}) and cannot be "
        "downloaded: cannot resolve prefeval.invalid within 0.5 s",
    )
    assert asked == ["prefeval.invalid"]
    assert took < 3


def test_a_host_that_refuses_connections_is_one_line(registered, monkeypatch):
    for name in PROXIES:
        monkeypatch.delenv(name, raising=False)
    with socket.socket() as closed:  # a local port with nobody listening
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]

    def local(host, *args, **kwargs):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]

    monkeypatch.setattr(socket, "getaddrinfo", local)
    result = invoke("compare", ABSENT_ID, *RUNS[:2])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"{ABSENT_ID}: the qrels are not in ir_datasets' cache")
    assert result.stderr.endswith("cannot connect to prefeval.invalid:443: Connection refused\n")


def test_the_command_offline_on_an_uncached_id_ends_in_one_line_quickly(tmp_path):
    """The console entry point, a real id (vaswani), an empty cache and no network."""
    _needs_ir_datasets()
    home = tmp_path / "empty"
    proc, took = _child(["compare", "irds:vaswani", *RUNS[:2]], home, timeout=60)
    assert proc.returncode == 2
    assert proc.stdout == b""
    lines = proc.stderr.decode().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"irds:vaswani: the qrels are not in ir_datasets' cache ({home})")
    assert "cannot resolve" in lines[0]
    assert took < 20  # the interpreter and the imports; the failure itself is at once
