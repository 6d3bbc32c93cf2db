"""Bounded, tolerant readers of the run directory's JSON and JSON-lines files: a line or file that
cannot be used is left out and named (``Unreadable``), never fatal, and memory stays bounded
whatever a file holds. ``netbench.common.rundir`` re-exports every name here."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from netbench.common import files
from netbench.common.errors import UsageError

#: the longest line of a JSON-lines file kept in memory; a longer one is skipped and named. A
#: NodeInventory line of a large node is a few hundred KB, a result row a few hundred bytes.
MAX_LINE_BYTES = 16 << 20
#: the largest run.json / env.json read (a few KB in practice)
MAX_JSON_BYTES = 64 << 20
_CHUNK = 1 << 20


class RunDirError(UsageError):
    """A run-directory file that cannot be read at all (not a regular file, permission denied):
    one line, exit 2."""


@dataclass(frozen=True)
class Unreadable:
    """Something a reader left out, and why: a line of a JSON-lines file, or a whole file or field."""

    file: str  # the path as the user would type it
    line: int | None  # 1-based line number; None for a whole file or one field of it
    reason: str


@dataclass
class JsonlRead:
    """The usable records of a JSON-lines file and the lines that were not."""

    records: list[dict[str, Any]]
    unreadable: list[Unreadable]
    end: int = 0
    """Bytes read: where a later read of what was appended starts (``GrowingRows``)."""
    lines: int = 0
    """Lines read, the last line's number."""


@dataclass
class JsonRead:
    """A JSON document that should be an object: ``data`` is ``{}`` when it is not (``unreadable`` says)."""

    data: dict[str, Any]
    unreadable: list[Unreadable]


def _reject_constant(name: str) -> float:
    # json.loads turns NaN / Infinity into floats by default; they are never valid in a run file
    raise ValueError(f"non-finite number {name}")


def decode_json(raw: bytes) -> Any:
    """Decode strict UTF-8 JSON without NaN/Infinity; ValueError (with a short reason) otherwise.
    RecursionError (deeply nested arrays) and int-length limits are ValueErrors here too."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg})") from None
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    except ValueError as exc:  # NaN/Infinity above, or Python's limit on digits of an integer
        raise ValueError(str(exc).split(";")[0]) from None


def open_regular(path: Path) -> BinaryIO:
    """``path`` open for reading if it is a regular file, else RunDirError (``files.open_regular``:
    a FIFO is refused without waiting for a writer, a device before a byte is read)."""
    return files.open_regular(path, "run-directory file", RunDirError)


def read_jsonl(
    path: Path, check: Callable[[Any], str | None] | None = None, start: int = 0, line: int = 0
) -> JsonlRead:
    """Read JSON lines. A line that is not UTF-8, not JSON, not an object, longer than
    MAX_LINE_BYTES or refused by ``check`` (returns why, or None) is left out and named with its
    line number: a truncated last line (power cut, kill -9) costs that line, never the file.
    ``start``, ``line``: the bytes and lines of an earlier read to go on after."""
    records: list[dict[str, Any]] = []
    bad: list[Unreadable] = []
    if not path.exists():
        return JsonlRead(records, bad, start, line)
    with open_regular(path) as fh:
        fh.seek(start)
        number = line
        for number, raw in enumerate(_bounded_lines(fh), start=line + 1):
            if raw is None:
                bad.append(Unreadable(str(path), number, f"line longer than {MAX_LINE_BYTES} bytes"))
                continue
            if not raw.strip():
                continue
            try:
                obj = decode_json(raw)
            except ValueError as exc:
                bad.append(Unreadable(str(path), number, str(exc)))
                continue
            why = "not a JSON object" if not isinstance(obj, dict) else check(obj) if check else None
            if why is not None:
                bad.append(Unreadable(str(path), number, why))
                continue
            records.append(obj)
        end = fh.tell()
    return JsonlRead(records, bad, end, number)


def _bounded_lines(fh: BinaryIO) -> Iterator[bytes | None]:
    """The lines of ``fh``; None for a line longer than MAX_LINE_BYTES, whose rest is read in chunks
    and dropped, so memory stays bounded whatever the file holds."""
    while True:
        line = fh.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        if len(line) <= MAX_LINE_BYTES or line.endswith(b"\n"):
            yield line
            continue
        while line and not line.endswith(b"\n"):
            line = fh.readline(_CHUNK)
        yield None


def read_json_object(path: Path) -> JsonRead:
    """A JSON file that should hold one object (run.json, env.json): ``{}`` and a named problem when
    it is missing-in-part, too large, not JSON or not an object; a missing file is simply ``{}``."""
    if not path.exists():
        return JsonRead({}, [])
    with open_regular(path) as fh:
        raw = fh.read(MAX_JSON_BYTES + 1)
    if len(raw) > MAX_JSON_BYTES:
        return JsonRead({}, [Unreadable(str(path), None, f"larger than {MAX_JSON_BYTES} bytes")])
    try:
        data = decode_json(raw)
    except ValueError as exc:
        return JsonRead({}, [Unreadable(str(path), None, str(exc))])
    if not isinstance(data, dict):
        return JsonRead({}, [Unreadable(str(path), None, "not a JSON object")])
    return JsonRead(data, [])
