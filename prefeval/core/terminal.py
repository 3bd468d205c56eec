"""What a terminal is shown of text that comes from the data (run, file and query names,
tags, measures of a table): its control characters escaped, as ``ls`` shows file names.

A control character written to a terminal is a command to it, not text: ``ESC [2J``
clears the screen, ``ESC ]0;...BEL`` retitles the window, a bidirectional override
reverses what follows.  On a terminal each of them is shown as its Python escape
(``\\x1b``, ``\\x9b``, ``\\u202e``), and a byte that is not UTF-8 (kept by
``surrogateescape``) as ``\\xNN``; a pipe or a file gets the exact bytes.  The readable
table (:func:`prefeval.io.writers.readable_chunks`), standard output on a terminal
(:func:`prefeval.io.writers.write_stdout`) and every line on stderr (notices, errors,
the bar's label) pass through :func:`escaped`.
"""

from __future__ import annotations

import re

#: the code points a terminal takes as commands: C0 (ESC among them), DEL, C1, and the
#: bidirectional marks, embeddings, overrides and isolates
CONTROLS = (
    (0x00, 0x1F),
    (0x7F, 0x9F),
    (0x061C, 0x061C),
    (0x200E, 0x200F),
    (0x202A, 0x202E),
    (0x2066, 0x2069),
)
#: the bytes of a file name or a text that are not UTF-8, as ``surrogateescape`` keeps them
_UNDECODED = (0xDC80, 0xDCFF)


def _class(ranges, point) -> str:
    return "[" + "".join(f"{point(lo)}-{point(hi)}" for lo, hi in ranges) + "]"


#: :data:`CONTROLS` as an RE2 character class (Arrow's regular expressions)
RE2_CONTROLS = _class(CONTROLS, lambda code: f"\\x{{{code:04x}}}")
_PATTERN = re.compile(_class((*CONTROLS, _UNDECODED), lambda code: f"\\u{code:04x}"))


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    if _UNDECODED[0] <= code <= _UNDECODED[1]:
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escaped(text: str, keep: str = "") -> str:
    """``text`` with its control characters (:data:`CONTROLS`) and undecoded bytes
    escaped, those in ``keep`` (such as ``"\\n"`` between lines) left as they are."""
    if keep:
        return _PATTERN.sub(lambda m: m.group() if m.group() in keep else _escape(m), text)
    return _PATTERN.sub(_escape, text)


#: what lines written to a terminal keep: their line breaks and tabs
LINES = "\n\t"


def shown(text: str, stream) -> str:
    """``text`` as written to ``stream``: :func:`escaped` (line breaks and tabs kept)
    when it is a terminal, else as it is."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError, OSError):
        tty = False
    return escaped(text, LINES) if tty else text
