"""Reading NCCL Inspector logs with bounds (``read_logs``): each line checked, each file alone.

A line that is not an Inspector collective record (not JSON, not the format, a value out of range:
a message of 1e300 bytes, a rank not below n_ranks) is left out and counted per reason, with its
line numbers: run.json's ``imported[].problems`` of that file, so the report never passes on a
log it did not read whole. A file that cannot be read, or holds no record, is skipped with its
reason; the others are read. No record in any file: one error line (exit 2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from netbench.common.errors import UsageError
from netbench.common.jsonread import decode_json
from netbench.importers.bounded import Limits, Reading, Refused

LIMITS = Limits(bytes=1 << 30, line=1 << 16, seconds=120.0)
MAX_FILES = 65536
MAX_LINES_LISTED = 20
#: bounds of a real record: far above any real collective (a GPU holds well under 1 TiB; a
#: collective of hours is a hang, not a timing), far below what breaks arithmetic
MAX_MSG_BYTES = 1 << 48
MAX_EXEC_US = 1e10
MAX_BUSBW_GBPS = 1e6
MAX_RANKS = 1 << 24
#: the timing whose kernel durations can be compared across ranks (inspector.cc's
#: inspectorTimingSourceToString: kernel_gpu, kernel_cpu, collective_cpu, unknown)
GPU_TIMING = "kernel_gpu"

NOT_JSON = "not JSON"
NOT_RECORD = "not an Inspector collective record (header, metadata and coll_perf objects)"
BAD_FIELD = "a field missing or not a number / text (rank, n_ranks, id, coll, coll_sn, size, time)"
OUT_OF_RANGE = (f"a value out of range (rank not below n_ranks, message over {MAX_MSG_BYTES >> 40} TiB, "
                f"time over {MAX_EXEC_US:.0e} us, busbw over {MAX_BUSBW_GBPS:.0e} GB/s)")


@dataclass(frozen=True)
class CollRecord:
    comm: str
    rank: int
    n_ranks: int
    host: str
    coll: str
    sn: int
    nbytes: int
    exec_us: float
    busbw: float | None
    timing: str = GPU_TIMING  # coll_timing_source

    @property
    def usable(self) -> bool:
        """Whether its duration can be compared with the other ranks': a GPU kernel's, and not 0
        (a timer that never ran)."""
        return self.timing == GPU_TIMING and self.exec_us > 0


@dataclass
class LeftOut:
    """Lines of one file left out for one reason."""

    reason: str
    count: int = 0
    lines: list[int] = field(default_factory=list)
    example: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "refused", "reason": self.reason, "count": self.count, "lines": self.lines,
                "example": self.example}


@dataclass
class InspectorLog:
    records: list[CollRecord] = field(default_factory=list)
    p2p: int = 0
    left_out: int = 0
    sources: list[str] = field(default_factory=list)
    problems: dict[str, list[LeftOut]] = field(default_factory=dict)
    """Per file read: its lines left out, per reason."""
    skipped: list[Refused] = field(default_factory=list)
    """Files not read at all, each with why."""


def _float(v: Any) -> float:
    return float(v) if abs(v) < 1e300 else math.inf  # an integer of 400 digits is out of range, not an error


def _whole(x: float) -> bool:
    return math.isfinite(x) and x == int(x)


def _record(obj: Any) -> CollRecord | str:
    """The record a line holds, or why it is not one."""
    if not isinstance(obj, dict):
        return NOT_RECORD
    h, m, c = obj.get("header"), obj.get("metadata"), obj.get("coll_perf")
    if not (isinstance(h, dict) and isinstance(m, dict) and isinstance(c, dict)):
        return NOT_RECORD
    values = [c.get("coll_exec_time_us"), c.get("coll_msg_size_bytes"), h.get("rank"), h.get("n_ranks"),
              c.get("coll_sn")]
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in values):
        return BAD_FIELD
    comm, coll, host, timing = h.get("id"), c.get("coll"), m.get("hostname"), c.get("coll_timing_source")
    if not (isinstance(comm, str) and isinstance(coll, str)):
        return BAD_FIELD
    exec_us, nbytes, rank, n, sn = map(_float, values)
    busbw = c.get("coll_busbw_gbs")
    busbw = _float(busbw) if isinstance(busbw, (int, float)) and not isinstance(busbw, bool) else None
    if not (0 <= exec_us <= MAX_EXEC_US and 0 <= nbytes <= MAX_MSG_BYTES and _whole(nbytes)
            and 1 <= n <= MAX_RANKS and 0 <= rank < n and _whole(rank) and _whole(n)
            and 0 <= sn < 2**63 and _whole(sn) and (busbw is None or 0 <= busbw <= MAX_BUSBW_GBPS)):
        return OUT_OF_RANGE
    return CollRecord(comm=comm[:100], rank=int(rank), n_ranks=int(n),
                      host=host[:253] if isinstance(host, str) and host else "", coll=coll[:40], sn=int(sn),
                      nbytes=int(nbytes), exec_us=exec_us, busbw=busbw,
                      timing=timing[:40] if isinstance(timing, str) else "not given")


def _line(raw: bytes | None, limits: Limits) -> tuple[str | None, Any]:
    """(None, a line's JSON value), or (why it has none, None)."""
    if raw is None:
        return f"line longer than {limits.line:,} bytes", None
    try:
        return None, decode_json(raw)
    except ValueError:
        return NOT_JSON, None


def parse_file(path: str | Path, log: InspectorLog) -> None:
    """One log's records into ``log``; ``Refused`` when the file cannot be read or holds none."""
    reading = Reading(path, LIMITS)
    records: list[CollRecord] = []
    left: dict[str, LeftOut] = {}
    p2p = 0
    for number, raw in enumerate(reading.lines(), start=1):
        if raw is not None and not raw.strip():
            continue
        why, obj = _line(raw, reading.limits)
        if isinstance(obj, dict) and "p2p_perf" in obj:
            p2p += 1
            continue
        rec = _record(obj) if why is None else why
        if isinstance(rec, CollRecord):
            records.append(rec)
            continue
        bad = left.setdefault(rec, LeftOut(rec, example=(raw or b"").decode("utf-8", "replace")[:200]))
        bad.count += 1
        if len(bad.lines) < MAX_LINES_LISTED:
            bad.lines.append(number)
    if not records:
        why = f"; {sum(b.count for b in left.values())} line(s) left out ({next(iter(left))})" if left else ""
        raise reading.refuse(f"no NCCL Inspector collective records (JSON lines with header, metadata, "
                             f"coll_perf){why}")
    log.records += records
    log.p2p += p2p
    log.left_out += sum(b.count for b in left.values())
    log.sources.append(str(path))
    log.problems[str(path)] = list(left.values())


def _files(paths: list[str | Path]) -> list[Path]:
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            try:
                found = sorted(p.rglob("*"))
            except OSError as exc:
                raise UsageError(f"{p}: cannot list the folder: {exc.strerror or exc}") from None
            for f in found:
                if not f.is_dir():
                    files.append(f)
                if len(files) > MAX_FILES:
                    raise UsageError(f"more than {MAX_FILES} files under {p}: not a folder of Inspector logs")
        elif p.exists() or p.is_symlink():
            files.append(p)
        else:
            raise UsageError(f"{p}: no such file or folder")
    return list(dict.fromkeys(files))


def read_logs(paths: list[str | Path]) -> InspectorLog:
    """Every file named (folders read recursively): its records, its lines left out; a file that
    cannot be read or holds no record skipped with its reason. UsageError when none holds one."""
    log = InspectorLog()
    files = _files(paths)
    if not files:
        raise UsageError("no NCCL Inspector logs given")
    for f in files:
        try:
            parse_file(f, log)
        except Refused as exc:
            log.skipped.append(exc)
    if not log.records:
        first = log.skipped[0]
        more = f" (and {len(log.skipped) - 1} more file(s) skipped)" if len(log.skipped) > 1 else ""
        raise UsageError(f"no readable NCCL Inspector log: {first}{more}")
    return log
