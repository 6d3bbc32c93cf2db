"""What a log says, as records: one nccl-tests run (``NcclTest``), its rank lines and the problems met
reading it, and the names nccl-tests prints (collectives, element types, reduction ops)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: the programs nccl-tests builds (src/<name>.cu, each ``<name>_perf``), by netbench's name of their
#: collective: a header or argv naming anything else is damaged (HTML copied from a page: ``<b>``), never
#: a collective to judge
_COLLECTIVES = {
    "all_reduce": "all_reduce", "all_gather": "all_gather", "reduce_scatter": "reduce_scatter",
    "alltoall": "all_to_all", "alltoallv": "all_to_allv", "broadcast": "broadcast", "reduce": "reduce",
    "sendrecv": "sendrecv", "gather": "gather", "scatter": "scatter", "hypercube": "hypercube",
}
#: the element types nccl-tests prints (src/common.cu test_typenames, and NCCL 1's char/int), bytes each
DTYPE_BYTES = {
    "int8": 1, "uint8": 1, "char": 1, "f8e4m3": 1, "f8e5m2": 1, "half": 2, "bfloat16": 2,
    "int32": 4, "uint32": 4, "int": 4, "float": 4, "int64": 8, "uint64": 8, "double": 8,
}
#: the reduction ops it prints (test_opnames), "none" in tables of collectives without one
REDOPS = frozenset({"sum", "prod", "max", "min", "avg", "mulsum", "premulsum", "none"})
#: line numbers kept per problem (its count is always complete)
MAX_LINES_LISTED = 200
#: the largest log read (a full sweep of every collective and type is a few MB; the parse holds about
#: 10 bytes for each byte of table read)
MAX_LOG_BYTES = 256 << 20
#: the most lines a log may have (a real one averages 100-130 bytes a line: 256 MiB is ~2.5 M lines);
#: a file of millions of two-byte lines would otherwise cost a Python string each
MAX_LOG_LINES = 4_000_000
#: the longest line read: nccl-tests' widest (-I and -S columns, a long device name) is ~300
#: characters, NCCL's INFO lines listing a 4,096-rank ring ~25,000; a longer one is left out and named
MAX_LINE_CHARS = 1 << 16
#: the largest buffer a size may name: nccl-tests allocates it on every GPU (cudaMalloc), and no GPU
#: holds 4 TiB (2026: 288 GB; 1 TB announced): a larger size is a damaged or made-up line, not a
#: measurement a host could be judged by
MAX_SIZE_BYTES = 4 << 40

_PROGRAM_RE = re.compile(r"(?P<name>[a-z_]{1,40}?)_perf(?:_mpi)?$")


def collective_name(program: str) -> str | None:
    """``all_reduce_perf`` / ``./build/alltoall_perf_mpi`` -> netbench's name (``all_to_all``); None
    for a name that is no nccl-tests program (a damaged header: ``<b>all_reduce_perf</b>``)."""
    m = _PROGRAM_RE.fullmatch(program.rsplit("/", 1)[-1])
    return _COLLECTIVES.get(m["name"]) if m else _COLLECTIVES.get(program)


def nccl_version_from_code(code: int) -> str:
    """NCCL_VERSION_CODE -> "2.28.3": 2.9+ use X*10000+Y*100+Z, older X*1000+Y*100+Z (nccl.h)."""
    if code >= 20900:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


@dataclass
class RankLine:
    rank: int
    host: str
    device: int
    bus_id: str
    device_name: str
    group: int | None = None
    pid: int | None = None


@dataclass
class Problem:
    """What in a log was not imported as it stands, said in run.json (``imported[].problems``), on
    stderr and by the report's ``import_incomplete`` / ``imported_run_failed`` findings.

    ``kind``: ``failure`` (a line saying the run failed), ``refused`` (lines that start as table rows
    but are not rows nccl-tests printed, a table under a damaged header, a line too long to read:
    left out, one problem per reason), ``repeated`` (a size printed again, a whole run printed again:
    left out), ``unfinished`` (no closing summary line), ``collective`` (the file name disagrees with
    the log), ``unjudged`` (what the log does not say, so nothing is judged by it: its collective,
    its rank count)."""

    kind: str
    reason: str
    count: int = 0
    lines: list[int] = field(default_factory=list)  # the first MAX_LINES_LISTED
    example: str = ""  # the first line it was met on, as printed (untrusted text)

    def add(self, line_no: int) -> None:
        self.count += 1
        if len(self.lines) < MAX_LINES_LISTED:
            self.lines.append(line_no)

    def add_lines(self, other: Problem) -> None:
        """``other``'s lines counted as this one's (another place the same thing was met)."""
        self.count += other.count
        self.lines += other.lines[: MAX_LINES_LISTED - len(self.lines)]

    def summary(self) -> str:
        """One line: what, how many lines, where first (the text is the log's: escape it to print)."""
        if self.kind == "failure":
            more = f"; {self.count - 1} more failure line(s)" if self.count > 1 else ""
            return f"the run failed ({self.example}{more})"
        if self.kind in ("refused", "repeated"):
            return f"{self.count} line(s) left out: {self.reason} ({self.example})"
        return self.reason

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "reason": self.reason, "count": self.count, "lines": self.lines,
                "example": self.example}


@dataclass
class NcclTest:
    """One nccl-tests invocation (one ``*_perf`` run) as read from a log or JSON file."""

    source: str
    collective: str | None = None
    nccl_tests_version: str | None = None
    nccl_version: str | None = None
    nccl_headers_version: str | None = None
    cuda_version: str | None = None
    config: dict[str, Any] = field(default_factory=dict)  # nthread, ngpus, iters, warmup_iters ...
    ranks: list[RankLine] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)  # one per size x placement, parsed values
    out_of_bounds: int | None = None
    avg_busbw_GBps: float | None = None
    env: dict[str, str] = field(default_factory=dict)  # NCCL_* variables (JSON only)
    errors: list[str] = field(default_factory=list)
    collective_inferred: str | None = None  # how the collective was inferred when the log does not name it
    problems: list[Problem] = field(default_factory=list)
    ranks_inferred: int | None = None  # a table without rank lines: the ranks its busbw/algbw implies

    def problems_of(self, kind: str) -> list[Problem]:
        return [p for p in self.problems if p.kind == kind]

    @property
    def hosts(self) -> list[str]:
        return list(dict.fromkeys(r.host for r in self.ranks))

    @property
    def nranks(self) -> int:
        if self.ranks:
            return len(self.ranks)
        if self.ranks_inferred and not self.config:
            return self.ranks_inferred
        return int(self.config.get("nthread", 1)) * int(self.config.get("ngpus", 1))


def collective_from_filename(source: str) -> str | None:
    stem = Path(source).stem.lower()
    for name in ("all_reduce", "all_gather", "reduce_scatter", "alltoallv", "alltoall", "broadcast",
                 "sendrecv", "hypercube", "scatter", "gather", "reduce"):
        if name in stem:
            return _COLLECTIVES[name]
    return None


def to_int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None

