"""Errors raised for bad input; the CLI turns them into ``FILE:LINE: message`` and exit 2."""

from __future__ import annotations


class InputError(ValueError):
    """Malformed or inconsistent input, located at ``path`` and (when known) ``line``."""

    def __init__(self, path: str, line: int | None, message: str):
        self.path = str(path)
        self.line = line
        self.message = message
        super().__init__(str(self))

    def __reduce__(self):
        """Pickled with its three fields (the default would call ``__init__`` with the
        message alone): an error raised on a Dask worker or in another process arrives
        whole."""
        return type(self), (self.path, self.line, self.message)

    def __str__(self) -> str:
        if self.line is None:
            return f"{self.path}: {self.message}"
        return f"{self.path}:{self.line}: {self.message}"


class PrefevalWarning(UserWarning):
    """A notice of the Python API (queries not evaluated, a run without results for some
    queries...): what the command writes to stderr, issued through :mod:`warnings`."""


class SystemLimitError(RuntimeError):
    """What was asked does not fit this process's resource limits (``ulimit``: open files,
    address space) or the machine; the CLI prints ``prefeval: message``, exit status 2."""


class OutputError(OSError):
    """The output could not be written; the CLI prints ``prefeval: cannot write FILE:
    reason`` and exits with status 2."""

    def __init__(self, path: str, reason: str):
        self.path, self.reason = str(path), reason
        super().__init__(f"cannot write {self.path}: {reason}")

    def __str__(self) -> str:
        return f"cannot write {self.path}: {self.reason}"


class CacheSettingError(ValueError):
    """An environment variable of the cache has a value that makes no sense."""


class Regression(AssertionError):
    """A regression gate failed (``prefeval.gate(..., check=True)``): some candidate run
    is significantly worse than the reference.  ``table`` holds the gate's whole table;
    the message lists the regressions, one line each.  An AssertionError, so a pytest
    test that calls the gate fails with that message."""

    def __init__(self, message: str, table=None):
        super().__init__(message)
        self.table = table
