"""Text from other machines, made safe to print on a terminal (and the one "did you mean" of a
misspelt word).

Anything a host reports (an error message, a host name in a row, NCCL's own words) is untrusted: an
ESC byte in it could move the cursor, rewrite lines above (a PASS over a FAIL), change the window
title or, on some terminals, answer back on stdin. ``terminal_safe`` is the one sanitiser; every
place that echoes text that came from an agent or a run directory goes through it.
"""

from __future__ import annotations

import difflib
import os
import re
import sys
from collections.abc import Collection
from typing import TextIO

# C0 controls but tab and newline, DEL, C1 controls (8-bit CSI/OSC), and the Unicode controls that
# reorder or break lines on screen (bidi overrides and isolates, line/paragraph separators).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_safe(text: object, keep_newlines: bool = True) -> str:
    """``text`` with every control character shown as an escape (``\\x1b``), so it prints as
    characters and never acts on the terminal. ``keep_newlines=False`` escapes newlines too (one
    value that must stay on one line, such as a table cell)."""
    out = _UNSAFE.sub(_escape, str(text))
    return out if keep_newlines else out.replace("\n", "\\n")


def quote_untrusted(text: object, limit: int = 200) -> str:
    """A short, printable, quoted rendering of untrusted text for a fault message: one line, at
    most ``limit`` characters of the original, never a control character."""
    s = str(text)
    cut = s[:limit]
    return repr(terminal_safe(cut, keep_newlines=False)) + (" ..." if len(s) > limit else "")


# the verdict words of a summary: the first word of a line, and a finding's [SEVERITY] tag
_VERDICT = re.compile(r"^(PASS|WARN|FAIL)(?=:)|(?<=\[)(FAIL|WARN|INFO)(?=\s*\])", re.MULTILINE)
_COLOURS = {"PASS": "1;32", "WARN": "1;33", "FAIL": "1;31", "INFO": "2"}


def coloured(text: str, stream: TextIO | None = None) -> str:
    """``text`` (already ``terminal_safe``) with its verdict words in colour when ``stream``
    (stdout) is a terminal and ``NO_COLOR`` is not set (no-color.org); unchanged otherwise, so a
    pipe, a file or a test gets plain text."""
    out = stream or sys.stdout
    if os.environ.get("NO_COLOR") or not (hasattr(out, "isatty") and out.isatty()):
        return text
    return _VERDICT.sub(lambda m: f"\x1b[{_COLOURS[m.group(0)]}m{m.group(0)}\x1b[0m", text)


def did_you_mean(word: object, known: Collection[str]) -> str:
    """``; did you mean 'x'?`` for the nearest known word (difflib), else the known words."""
    close = difflib.get_close_matches(str(word), sorted(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else f" (known: {', '.join(sorted(known))})"
