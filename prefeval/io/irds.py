"""Qrels of an ir_datasets id, given as ``irds:ID`` wherever qrels are taken (PyTerrier's
prefix; ir-measures' command and ranx take the same ids), read with the optional
``ir-datasets`` package (``pip install 'prefeval[irds]'``), imported only when such an id
is given.

A judgment is the dataset's ``query_id, doc_id, relevance``; ``subtopic_id`` (ir_datasets'
``TrecSubQrel``: the Web track's diversity judgments) is its subtopic, as the
``iter`` column of an ndeval qrels file; any other field (a ``TrecQrel``'s
``iteration``, where ir_datasets keeps an assessment year or a user id) is ignored.

The qrels are read from ir_datasets' cache (``IR_DATASETS_HOME``, by default
``~/.ir_datasets``) and downloaded there when absent, as ir_datasets does.  Before a
download, each host it contacts must resolve and accept a connection within
:data:`REACH_SECONDS` (once per host and read; a resolver that did not answer is not
asked again): offline, or with a resolver that does not answer, the read fails in
seconds instead of waiting on ir_datasets' retries and mirrors.  Every
failure is an :class:`~prefeval.core.errors.InputError` ``irds:ID: what is wrong``;
ir_datasets' own log lines are silenced while it reads, its download bars shown on a
terminal only.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..core.errors import InputError
from ..core.qrels import Qrels
from .frames import qrels_from_frame

if TYPE_CHECKING:
    import pandas as pd

#: what marks a qrels argument as an ir_datasets id
PREFIX = "irds:"
#: seconds a download host may take to resolve and accept a TCP connection
REACH_SECONDS = 5.0
#: how to install the package that reads ``irds:`` ids
INSTALL = "pip install 'prefeval[irds]'"
#: ir_datasets' switch that sends its download bars to /dev/null
BARS_OFF = "IR_DATASETS_DL_DISABLE_PBAR"

#: one read at a time: a read replaces ir_datasets' ``requests`` for its duration
_lock = threading.Lock()


def is_dataset_id(source) -> bool:
    """Whether a qrels argument names an ir_datasets id (a string ``irds:ID``; a file
    whose name starts so is given as ``./irds:...``)."""
    return isinstance(source, str) and source.startswith(PREFIX)


def read_dataset_qrels(source: str, name: str | None = None) -> Qrels:
    """The qrels of ``source``, ``irds:ID``, as :class:`~prefeval.core.qrels.Qrels` named
    ``name`` (by default ``source``).

    An :class:`InputError` when the ir-datasets package is missing, ``ID`` is unknown or
    has no qrels, or its qrels are neither in ir_datasets' cache nor downloadable."""

    dataset_id = source[len(PREFIX) :]
    try:
        import ir_datasets
    except ImportError:
        raise InputError(source, None, f"ir_datasets ids need ir-datasets: {INSTALL}") from None
    except MemoryError:
        raise
    except Exception as error:  # its import makes folders in IR_DATASETS_HOME
        raise InputError(source, None, f"ir_datasets cannot start: {_text(error)}") from None
    with _lock, _quiet(), _guarded_downloads(ir_datasets) as hosts:
        try:
            dataset = ir_datasets.load(dataset_id)
        except KeyError:
            raise InputError(
                source, None, "no such ir_datasets id (`ir_datasets list` lists them)"
            ) from None
        except MemoryError:
            raise
        except Exception as error:  # a dataset built on demand (a pattern of ids)
            raise InputError(source, None, _why(error, hosts, ir_datasets)) from None
        if not dataset.has_qrels():
            raise InputError(source, None, "this ir_datasets dataset has no qrels")
        try:
            frame = _qrels_frame(source, dataset.qrels_cls(), dataset.qrels_iter())
        except (MemoryError, InputError):
            raise
        except Exception as error:  # whatever ir_datasets raises: a download, a parse
            raise InputError(source, None, _why(error, hosts, ir_datasets)) from None
    return qrels_from_frame(frame, name=name or source)


def _qrels_frame(source: str, kind, rows) -> pd.DataFrame:
    """``query_id, doc_id, relevance, iteration`` of ir_datasets' qrel namedtuples of class
    ``kind``: ``iteration`` is ``subtopic_id`` where there is one, else ``0``."""
    import pandas as pd

    fields = getattr(kind, "_fields", ())
    missing = [name for name in ("query_id", "doc_id", "relevance") if name not in fields]
    if missing:
        raise InputError(
            source,
            None,
            f"its qrels ({kind.__name__}) have no {', '.join(missing)} field",
        )
    query, doc, grade = (fields.index(name) for name in ("query_id", "doc_id", "relevance"))
    subtopic = fields.index("subtopic_id") if "subtopic_id" in fields else None
    columns: dict[str, list] = {"query_id": [], "doc_id": [], "relevance": [], "iteration": []}
    for row in rows:
        columns["query_id"].append(row[query])
        columns["doc_id"].append(row[doc])
        columns["relevance"].append(row[grade])
        columns["iteration"].append("0" if subtopic is None else str(row[subtopic]))
    return pd.DataFrame(
        {
            "query_id": pd.Series(columns["query_id"], dtype=object),
            "doc_id": pd.Series(columns["doc_id"], dtype=object),
            "relevance": pd.Series(columns["relevance"], dtype=float),
            "iteration": pd.Series(columns["iteration"], dtype=object),
        }
    )


def _why(error: Exception, hosts: tuple[dict, set], ir_datasets) -> str:
    """One line saying why ir_datasets could not give the qrels; ``hosts``: the download
    hosts found unreachable (host -> why) and those reached."""
    unreachable, reached = hosts
    try:
        where = ir_datasets.util.home_path()
    except (AttributeError, OSError):
        where = "IR_DATASETS_HOME"
    if unreachable and not reached:  # no download could start
        reason = next(iter(unreachable.values()))
        return (
            f"the qrels are not in ir_datasets' cache ({where}) and cannot be downloaded: {reason}"
        )
    if isinstance(error, FileNotFoundError):
        return f"a file of the qrels is not in ir_datasets' cache ({where}): {_text(error)}"
    return f"ir_datasets cannot give the qrels: {type(error).__name__}: {_text(error)}"


def _text(error: Exception) -> str:
    """An exception's message on one line, at most 300 characters."""
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= 300 else text[:300] + "…"


@contextmanager
def _quiet():
    """ir_datasets' log lines (``[INFO]``, ``[WARNING]``: download retries, deprecation)
    dropped while it reads: a failure is the one line of the InputError.  Its download
    bars are shown on a terminal only, as prefeval's own (``IR_DATASETS_DL_DISABLE_PBAR``
    unless set)."""
    logger = logging.getLogger("ir_datasets")

    def drop(record) -> bool:
        return False

    logger.addFilter(drop)
    bars = None
    if BARS_OFF not in os.environ and not _on_terminal(sys.stderr):
        bars = os.environ[BARS_OFF] = "true"
    try:
        yield
    finally:
        logger.removeFilter(drop)
        if bars is not None:
            os.environ.pop(BARS_OFF, None)


def _on_terminal(stream) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


@contextmanager
def _guarded_downloads(ir_datasets: Any) -> Iterator[tuple[dict[str, str], set[str]]]:
    """ir_datasets' ``requests`` replaced, for the duration, by one whose ``get`` first
    checks that the URL's host (or its proxy) resolves and accepts a connection within
    :data:`REACH_SECONDS`; a host that does not is a ConnectionError at once, for every
    retry.  Once the resolver has not answered, it is not asked again (each further host
    is unreachable at once), so a silent resolver costs one wait.  Yields the unreachable
    hosts (host -> why) and the hosts reached."""
    unreachable: dict[str, str] = {}
    lazy = getattr(ir_datasets, "lazy_libs", None)
    reached: set[str] = set()
    if lazy is None or not hasattr(lazy, "requests"):
        yield unreachable, reached
        return
    real = lazy.requests
    requests = real()
    silent: list[str] = []  # the first host the resolver did not answer for

    def get(url, *args, **kwargs):
        host, port = _target(requests, url)
        if host is not None and host not in reached:
            if host not in unreachable:
                if silent:
                    reason = (
                        f"cannot resolve {host}: the resolver did not answer for "
                        f"{silent[0]} within {REACH_SECONDS:g} s"
                    )
                else:
                    reason, unanswered = _reach(host, port, REACH_SECONDS)
                    if unanswered:
                        silent.append(host)
                if reason is None:
                    reached.add(host)
                else:
                    unreachable[host] = reason
            if host in unreachable:
                raise requests.exceptions.ConnectionError(unreachable[host])
        return requests.get(url, *args, **kwargs)

    class Requests:
        """``requests`` with the checked ``get``."""

        def __getattr__(self, name):
            return get if name == "get" else getattr(requests, name)

    guarded = Requests()
    lazy.requests = lambda: guarded
    try:
        yield unreachable, reached
    finally:
        lazy.requests = real


def _target(requests, url: str):
    """(host, port) a request to ``url`` connects to: its proxy's where one applies."""
    try:
        proxies = requests.utils.get_environ_proxies(url)
        parts = urlsplit(url)
        proxy = proxies.get(parts.scheme) or proxies.get("all")
        if proxy:
            parts = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
    except (ValueError, AttributeError):
        return None, None


def _reach(host: str, port: int, seconds: float) -> tuple[str | None, bool]:
    """(None when ``host`` resolves and accepts a TCP connection on ``port`` within
    ``seconds`` in all, else why not; whether the resolver did not answer in time).  The
    name is resolved on a daemon thread (the system's resolver has no timeout of its
    own), left behind if it does not answer."""
    found: list = []

    def resolve():
        try:
            found.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError as error:
            found.append(error)

    start = time.monotonic()
    thread = threading.Thread(target=resolve, name="prefeval-irds-resolve", daemon=True)
    thread.start()
    thread.join(seconds)
    if not found:
        return f"cannot resolve {host} within {seconds:g} s", True
    if isinstance(found[0], OSError):
        return f"cannot resolve {host}: {found[0].strerror or found[0]}", False
    reason = f"cannot connect to {host}:{port}"
    for family, kind, proto, _, address in found[0]:
        left = seconds - (time.monotonic() - start)
        if left <= 0:
            return f"{reason} within {seconds:g} s", False
        try:
            with socket.socket(family, kind, proto) as sock:
                sock.settimeout(left)
                sock.connect(address)
            return None, False
        except OSError as error:
            reason = f"cannot connect to {host}:{port}: {error.strerror or error}"
    return reason, False
