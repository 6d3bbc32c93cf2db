"""Read NVIDIA nccl-tests output (stdout tables and ``-J`` JSON) into a netbench run directory.

Years of nccl-tests logs exist in tickets and wikis; importing them lets ``netbench compare`` and the
report judge them next to netbench's own runs. The stdout layouts seen in real logs differ by
version, and the parser reads the column header instead of assuming one:

- 2.0-2.10 (2018-2021): ``size count type [redop] [root] time algbw busbw error`` x2, where
  ``error`` is the largest *relative error* (``2e-07``), not a count, so ``wrong`` stays None and
  the value goes to ``extra["max_error"]``. ``Rank  0 Pid ...`` device lines have no ``Group``.
- 2.11+ (2022-): every table has ``redop`` and ``root`` and a ``#wrong`` count; ``N/A`` where the
  check did not run (``-c 0``, or in-place sendrecv). 2.17+ print ``# nccl-tests version``.
- 2.19+: ``-I 1`` adds ``i_min i_max i_p99 i_cv%`` per placement, ``-S 1`` a timestamp column,
  ``-C 1`` names the time column ``cputime``.
- Launchers prefix lines: ``[1,0]<stdout>:`` (Open MPI ``--tag-output``), `` 0: `` (``srun -l``).
  NCCL_DEBUG=INFO lines may be interleaved; ``NCCL version 2.21.5+cuda12.4`` is read from them.

The ``-J`` JSON (JSON_FILE_VERSION 1-3 in src/util.cu) writes booleans as the strings "true"/
"false", NaN as "nan", ``root`` as a padded string, and has no collective name except in
``args[0]``. A value that nccl-tests printed is stored as printed (the table rounds to 2 decimals).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from netbench.common.errors import UsageError
from netbench.common.rows import ResultRow

if TYPE_CHECKING:
    from netbench.progress import Progress

# -- what a log says --------------------------------------------------------------------------------
# numbers are at most 18 digits: a line of thousands of digits is not nccl-tests output, and int() of
# one raises ValueError (Python's limit on digits) where this parser expects a match or none

_PREFIX_RE = re.compile(r"^(?:\[\d{1,18},(?P<mpi>\d{1,18})\]<std(?:out|err)>:|\s*(?P<srun>\d{1,18}): )")
_VERSION_RE = re.compile(
    r"#\s*nccl-tests version (?P<ver>\S+)(?:\s+\((?P<git>[0-9a-f]+)\))?"
    r"(?:\s+nccl-headers=(?P<hdr>\d{1,18}))?(?:\s+nccl-library=(?P<lib>\d{1,18}))?"
)
_STARTING_RE = re.compile(r"#\s*Collective test starting:\s*(?P<name>\S+)")
_NTHREAD_RE = re.compile(r"#?\s*nThread\s+(?P<nthread>\d{1,18})\s+nGpus\s+(?P<ngpus>\d{1,18})"
                         r"\s+minBytes\s+(?P<min>\d{1,18})\s+maxBytes\s+(?P<max>\d{1,18})(?P<rest>.*)")
_KV_RE = re.compile(r"(warmup iters|agg iters|iters|validation|graph|unalign):\s*(-?\d{1,18})")
_STEP_RE = re.compile(r"step:\s*(\d{1,18})\((factor|bytes)\)")
_RANK_RE = re.compile(
    r"#?\s*Rank\s+(?P<rank>\d{1,18})\s+(?:Group\s+(?P<group>\d{1,18})\s+)?Pid\s+(?P<pid>\d{1,18})\s+on\s+(?P<host>\S+)"
    r"\s+device\s+(?P<device>\d{1,18})\s+\[(?P<bus>[^\]]*)\]\s*(?P<name>.*)$"
)
_NCCL_VERSION_RE = re.compile(r"NCCL version (?P<ver>\d{1,9}\.\d{1,9}\.\d{1,9})(?:\+cuda(?P<cuda>[\d.]+))?")
_OOB_RE = re.compile(r"#\s*Out of bounds values\s*:\s*(?P<n>\d{1,18})\s*(?P<verdict>OK|FAILED)?")
_AVG_RE = re.compile(r"#\s*Avg bus bandwidth\s*:\s*(?P<bw>[-+\d.eE]+|nan|inf)")
_PROGRAM_RE = re.compile(r"(?:^|[/\s])(?P<name>[a-z_]+)_perf(?:_mpi)?\b")
# a line that starts as a table row does (two numbers, however written: 1e30, 1,048,576, -8): read as
# one and checked column by column, or counted and named as a line left out
_ROW_RE = re.compile(r"^\s*[-+]?[\d.,]+(?:[eE][-+]?\d+)?\s+[-+]?[\d.,]+(?:[eE][-+]?\d+)?(?:\s|$)")
_NUMERIC_START = frozenset("0123456789+-.")
_INT_RE = re.compile(r"^\d{1,19}$")  # bounded: int() of 5000 digits raises
# the run failed or was aborted: nccl-tests' own checks (src/common.h: "<host>: Test NCCL failure
# common.cu:1005 'unhandled system error / ...'", "Test CUDA failure", " .. <host> pid N: Test failure
# common.cu:892"), and the launchers' words for a job that ended under it
_FAILURE_RE = re.compile(
    r"Test (?:NCCL |CUDA )?failure|MPI_ABORT was invoked|mpirun noticed that process rank"
    r"|srun: error: .*(?:exit code|Killed|Aborted|Segmentation)"
)
_NCCL_LOG_RE = re.compile(r"\bNCCL (?:INFO|WARN|TRACE)\b")

_COLLECTIVES = {"alltoall": "all_to_all", "alltoallv": "all_to_allv"}
#: the element types nccl-tests prints (src/common.cu test_typenames, and NCCL 1's char/int), bytes each
DTYPE_BYTES = {
    "int8": 1, "uint8": 1, "char": 1, "f8e4m3": 1, "f8e5m2": 1, "half": 2, "bfloat16": 2,
    "int32": 4, "uint32": 4, "int": 4, "float": 4, "int64": 8, "uint64": 8, "double": 8,
}
#: the reduction ops it prints (test_opnames), "none" in tables of collectives without one
REDOPS = frozenset({"sum", "prod", "max", "min", "avg", "mulsum", "premulsum", "none"})
#: line numbers kept per problem (its count is always complete)
MAX_LINES_LISTED = 200
#: the largest log read (a full sweep of every collective and type is a few MB)
MAX_LOG_BYTES = 256 << 20
_TIME_COLS = ("time", "cputime")


def collective_name(program: str) -> str:
    """``all_reduce_perf`` / ``./build/alltoall_perf_mpi`` -> netbench's name (``all_to_all``)."""
    base = Path(program).name
    base = re.sub(r"_perf(_mpi)?$", "", base)
    return _COLLECTIVES.get(base, base)


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
    but are not rows nccl-tests printed: left out, one problem per reason), ``repeated`` (a size
    printed again: left out), ``unfinished`` (no closing summary line), ``collective`` (the file
    name disagrees with the log)."""

    kind: str
    reason: str
    count: int = 0
    lines: list[int] = field(default_factory=list)  # the first MAX_LINES_LISTED
    example: str = ""  # the first line it was met on, as printed (untrusted text)

    def add(self, line_no: int) -> None:
        self.count += 1
        if len(self.lines) < MAX_LINES_LISTED:
            self.lines.append(line_no)

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


# -- text ---------------------------------------------------------------------------------------------

def _number(token: str) -> float | None:
    """A table cell: ``N/A`` -> None; ``1e+06`` and ``24745`` as printed."""
    if token in ("N/A", "-", ""):
        return None
    try:
        value = float(token)
    except ValueError:
        return None
    return None if math.isnan(value) else value


@dataclass
class _Layout:
    """Where each value sits in a data line, derived from the ``#  size count type ...`` header."""

    prefix: list[str]  # size count type [redop] [root]
    blocks: list[list[str]]  # [out-of-place columns, in-place columns]
    extra: int  # columns printed after the two blocks (-S 1: a timestamp)
    width: int = 0  # the columns of prefix and blocks (worked out once: read for every line)

    def __post_init__(self) -> None:
        self.width = len(self.prefix) + sum(len(b) for b in self.blocks)

    @classmethod
    def from_header(cls, tokens: list[str]) -> _Layout | None:
        starts = [i for i, t in enumerate(tokens) if t in _TIME_COLS]
        if len(starts) != 2 or tokens[:2] != ["size", "count"]:
            return None
        first = tokens[starts[0]:starts[1]]
        second = [t for t in tokens[starts[1]:] if t != "timestamp"][: len(first)]
        return cls(prefix=tokens[: starts[0]], blocks=[first, second],
                   extra=len(tokens) - starts[1] - len(second))


def _by_process(lines: list[str]) -> Iterator[tuple[int, str | None, str]]:
    """(line number, the launcher's tag of the process, the line without it) of every line. Where a
    launcher tagged several processes' lines (``mpirun --tag-output``, ``srun -l``), each process's
    lines come together, in their own order, the processes in the order their first line came (the
    launcher's own untagged lines first): eight processes each printing a table, interleaved line by
    line, are read as eight tables one after the other. Lazily where they are not (one pass, no list
    of a 50 MB log's lines twice)."""
    def split(line_no: int, raw: str) -> tuple[int, str | None, str]:
        m = _PREFIX_RE.match(raw)
        text = raw[m.end():] if m else raw
        return line_no, (m["mpi"] or m["srun"]) if m else None, text.rstrip("\r\n")

    tags: dict[str, None] = {}
    for raw in lines:
        if (m := _PREFIX_RE.match(raw)) is not None:
            tags[m["mpi"] or m["srun"]] = None
            if len(tags) > 1:
                break
    if len(tags) < 2:
        yield from (split(n, raw) for n, raw in enumerate(lines, start=1))
        return
    out = [split(n, raw) for n, raw in enumerate(lines, start=1)]
    order = {tag: k for k, tag in enumerate(dict.fromkeys(tag for _, tag, _ in out if tag is not None))}
    out.sort(key=lambda item: order.get(item[1], -1))
    yield from out


class _Refused(Exception):
    """A line that starts as a table row but is not one nccl-tests printed; ``reason`` says why in
    words that are the same for every line refused for it (the count is per reason)."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(reason)
        self.reason = reason
        self.detail = detail


def _measure(token: str, what: str) -> float | None:
    """A time or bandwidth cell: N/A, or a finite number not below zero."""
    if token == "N/A":
        return None
    try:
        value = float(token)
    except ValueError:
        raise _Refused(f"{what} is not a number", token) from None
    if not math.isfinite(value):
        raise _Refused(f"{what} is not finite", token)
    if value < 0:
        raise _Refused(f"{what} is negative", token)
    return value


def _whole(token: str, what: str) -> int:
    if token.startswith("-") and _INT_RE.match(token[1:]):
        raise _Refused(f"{what} is negative", token)
    if not _INT_RE.match(token):
        raise _Refused(f"{what} is not a whole number", token)
    return int(token)


def check_sizes(nbytes: int, count: int, dtype: str, ranks: int | None) -> None:
    """``_Refused`` unless ``count`` elements of ``dtype`` make ``nbytes``: nccl-tests prints the
    larger of the send and receive buffer as the size and one rank's part as the count, so the size
    is the count's bytes times 1 or the rank count (all_gather, reduce_scatter, alltoall: ``ranks``,
    when the log lists its ranks; else any whole multiple)."""
    if dtype not in DTYPE_BYTES:
        raise _Refused("type is not one nccl-tests prints", dtype)
    if nbytes < 0 or count < 0:
        raise _Refused("size or count is negative", f"{nbytes} {count}")
    part = count * DTYPE_BYTES[dtype]
    if part == 0:
        if nbytes != 0:
            raise _Refused("count does not fit the size", f"{count} {dtype} in {nbytes} B")
        return
    ratio, rest = divmod(nbytes, part)
    if rest or ratio < 1 or (ranks and ratio not in (1, ranks)):
        raise _Refused("count does not fit the size", f"{count} {dtype} in {nbytes} B")


def _read_row(tokens: list[str], layout: _Layout, ranks: int | None, line_no: int) -> list[dict[str, Any]]:
    """The two rows (out of place, in place) of one data line, every column checked; ``_Refused``
    for a line nccl-tests did not print as it stands (glued to another rank's, cut, edited)."""
    if len(tokens) < layout.width:
        raise _Refused("fewer columns than the header", f"{len(tokens)} of {layout.width}")
    if len(tokens) > layout.width + layout.extra:
        raise _Refused("more columns than the header (lines glued together)",
                       f"{len(tokens)} of {layout.width + layout.extra}")
    cells = dict(zip(layout.prefix, tokens, strict=False))
    nbytes, count = _whole(cells["size"], "size"), _whole(cells["count"], "count")
    dtype = cells.get("type", "")
    check_sizes(nbytes, count, dtype, ranks)
    op, root = cells.get("redop"), cells.get("root")
    if op is not None and op not in REDOPS:
        raise _Refused("redop is not one nccl-tests prints", op)
    if root is not None and not re.fullmatch(r"-1|\d{1,9}", root):
        raise _Refused("root is not a rank", root)
    base = {"bytes": nbytes, "count": count, "dtype": dtype, "op": op, "root": root, "line": line_no}
    rows = []
    pos = len(layout.prefix)
    for placement, cols in zip(("out_of_place", "in_place"), layout.blocks, strict=True):
        values = dict(zip(cols, tokens[pos:pos + len(cols)], strict=False))
        pos += len(cols)
        row = dict(base, in_place=placement == "in_place")
        row["time_us"] = _measure(values.get("time", values.get("cputime", "N/A")), "time")
        row["algbw_GBps"] = _measure(values.get("algbw", "N/A"), "algbw")
        row["busbw_GBps"] = _measure(values.get("busbw", "N/A"), "busbw")
        if "#wrong" in values:
            wrong = _measure(values["#wrong"], "#wrong")
            if wrong is not None and not wrong.is_integer():
                raise _Refused("#wrong is not a whole number", values["#wrong"])
            row["wrong"] = int(wrong) if wrong is not None else None
        elif "error" in values:  # old layout: the largest relative error, not a count
            row["wrong"] = None
            row["max_error"] = _measure(values["error"], "error")
        per_iter = {k[2:]: _number(v) for k, v in values.items() if k.startswith("i_")}
        if per_iter:
            row["per_iter"] = per_iter
        if "cputime" in values:
            row["cpu_time"] = True
        rows.append(row)
    return rows


def _header_config(m: re.Match[str]) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "nthread": int(m["nthread"]), "ngpus": int(m["ngpus"]),
        "min_bytes": int(m["min"]), "max_bytes": int(m["max"]),
    }
    rest = m["rest"]
    step = _STEP_RE.search(rest)
    if step:
        cfg["step_factor" if step[2] == "factor" else "step_bytes"] = int(step[1])
    keys = {"warmup iters": "warmup_iters", "agg iters": "agg_iters", "iters": "iters",
            "validation": "validation", "graph": "graph", "unalign": "unalign"}
    for key, value in _KV_RE.findall(rest):
        cfg[keys[key]] = int(value)
    return cfg


def _row_key(row: dict[str, Any]) -> tuple[Any, ...]:
    return row["bytes"], row["count"], row["dtype"], row["op"], row["root"], row["in_place"]


@dataclass
class _Reading:
    """One run's table as it is read: what was kept, what was refused or repeated, and why."""

    test: NcclTest
    keys: set[tuple[Any, ...]] = field(default_factory=set)
    refused: dict[str, Problem] = field(default_factory=dict)
    repeated: Problem | None = None
    rank_numbers: set[int] = field(default_factory=set)
    rank_repeats: int = 0
    closed: bool = False  # the "# Avg bus bandwidth" line that ends a finished run was read
    preamble: bool = False  # the log printed the run's header (version, nThread line)
    tag: str | None = None  # the launcher's tag of the process that printed it

    def same_table(self, other: _Reading) -> bool:
        return (self.tag != other.tag and self.test.collective == other.test.collective
                and self.test.config == other.test.config and other.keys <= self.keys)

    def refuse(self, exc: _Refused, line_no: int, example: str, last: bool) -> None:
        """A line left out (``example``: where and what, for the first of its reason)."""
        reason = exc.reason
        if last and reason == "fewer columns than the header":
            reason = "the log ends in the middle of this row (truncated)"
        p = self.refused.setdefault(reason, Problem("refused", reason, example=example))
        p.add(line_no)

    def add_rows(self, rows: list[dict[str, Any]], line_no: int, example: str) -> None:
        for row in rows:
            key = _row_key(row)
            if key in self.keys:
                if self.repeated is None:
                    self.repeated = Problem(
                        "repeated", "a size already read, printed again (several processes each "
                        "printing the table, interleaved; or -N run cycles): the first kept",
                        example=example)
                if row["in_place"] or len(rows) == 1:
                    self.repeated.add(line_no)
                continue
            self.keys.add(key)
            self.test.rows.append(row)

    def finish(self) -> None:
        t = self.test
        t.problems.extend(self.refused.values())
        if self.repeated is not None:
            if self.rank_repeats:
                self.repeated.reason += f"; {self.rank_repeats} rank line(s) repeated too"
            t.problems.append(self.repeated)
        if self.preamble and t.rows and not self.closed and not t.problems_of("failure"):
            t.problems.append(Problem(
                "unfinished", "the table ends without nccl-tests' closing '# Avg bus bandwidth' line: "
                "the run was cut short (killed, out of time, or the log truncated)"))


def _loose_row(line: str, reading: _Reading, layout: _Layout) -> bool:
    """A line of an open table (before its summary), neither NCCL's log nor a failure nor a comment,
    that starts with a number or is mostly numbers: a row damaged past looking like one
    (``262144\x1b[31mfloat``, a row that lost its first columns), left out and named like the
    rest, not passed over. Other text in a table (a launcher's or a library's message) is not a row."""
    if reading.closed or line.startswith("#") or _NCCL_LOG_RE.search(line) or _FAILURE_RE.search(line):
        return False
    if line[:1] in _NUMERIC_START:
        return True
    return sum(1 for token in line.split() if token == "N/A" or _is_number(token)) * 2 >= layout.width


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def _one_copy(readings: list[_Reading]) -> list[_Reading]:
    """The runs, each table that several processes printed (one run a process: an nccl-tests built
    without MPI under mpirun) kept once, the copies counted as a ``repeated`` problem of the first."""
    kept: list[_Reading] = []
    copies: dict[int, Problem] = {}
    for r in readings:
        first = next((k for k in kept if r.test.rows and k.same_table(r)), None)
        if first is None:
            kept.append(r)
            continue
        p = copies.get(id(first))
        if p is None:
            p = copies[id(first)] = Problem(
                "repeated", "the same table printed by another process (each process its own run: "
                "nccl-tests built without MPI?): the first process's kept",
                example=f"line {r.test.rows[0]['line']}: the table of process {r.tag}")
            first.test.problems.append(p)
        for row in r.test.rows:
            if not row["in_place"]:
                p.add(row["line"])
        first.test.problems.extend(r.test.problems)
    return kept


def _example(line_no: int, text: str) -> str:
    return f"line {line_no}: {text.strip()[:120]}"


def parse_text(text: str, source: str = "<text>",
               progress: Callable[[int, int], None] | None = None) -> list[NcclTest]:
    """Every nccl-tests run found in ``text`` (several runs may be concatenated in one log), each
    with the problems met in it (``NcclTest.problems``); ``progress(lines read, lines)`` now and then."""
    readings: list[_Reading] = []
    cur: _Reading | None = None
    layout: _Layout | None = None
    pending_program: str | None = None
    pending_failures: list[Problem] = []
    nccl_version: tuple[str, str | None] | None = None
    lines = text.splitlines()
    last_line = len(lines)
    while last_line and not lines[last_line - 1].strip():
        last_line -= 1

    def start(tag: str | None) -> _Reading:
        nonlocal cur, layout
        name = collective_name(pending_program) if pending_program else None
        cur = _Reading(NcclTest(source=source, collective=name), tag=tag)
        cur.test.problems.extend(pending_failures)
        pending_failures.clear()
        layout = None
        readings.append(cur)
        return cur

    def fresh(same: bool, tag: str | None) -> _Reading:
        """The run a header line belongs to: the current one while it has no rows yet and this line
        repeats what it said (several processes printing one header, interleaved), else a new one."""
        if cur is not None and not cur.test.rows and same:
            return cur
        return start(tag)

    for done, (line_no, tag, line) in enumerate(_by_process(lines), start=1):
        if progress is not None and not done % 65536:
            progress(done, len(lines))
        stripped = line.strip()
        if not stripped:
            continue
        in_table = layout is not None and cur is not None
        if in_table and (_ROW_RE.match(stripped) or _loose_row(stripped, cur, layout)):
            try:
                rows = _read_row(stripped.split(), layout, len(cur.test.ranks) or None, line_no)
            except _Refused as exc:
                cur.refuse(exc, line_no, _example(line_no, stripped), line_no == last_line)
            else:
                cur.add_rows(rows, line_no, _example(line_no, stripped))
            continue
        if _FAILURE_RE.search(stripped):
            held = pending_failures if cur is None else cur.test.problems
            failure = next((p for p in held if p.kind == "failure"), None)
            if failure is None:  # one a run: its first line the example, every line counted
                failure = Problem("failure", "the log says the run failed",
                                  example=_example(line_no, stripped))
                held.append(failure)
            failure.add(line_no)
            continue
        if (m := _NCCL_VERSION_RE.search(line)) and not stripped.startswith("#"):
            nccl_version = (m["ver"], m["cuda"])
            if cur is not None and cur.test.nccl_version is None:
                cur.test.nccl_version, cur.test.cuda_version = nccl_version
            continue
        if _NCCL_LOG_RE.search(stripped):
            continue
        if (m := _VERSION_RE.match(stripped)):
            r = fresh(cur is not None and cur.test.nccl_tests_version == m["ver"], tag)
            r.preamble = True
            t = r.test
            t.nccl_tests_version = m["ver"]
            if m["hdr"]:
                t.nccl_headers_version = nccl_version_from_code(int(m["hdr"]))
            if m["lib"]:
                t.nccl_version = nccl_version_from_code(int(m["lib"]))
            continue
        if (m := _STARTING_RE.match(stripped)):
            name = collective_name(m["name"])
            r = fresh(cur is not None and cur.test.collective in (None, name), tag)
            r.preamble = True
            r.test.collective = name
            continue
        if (m := _NTHREAD_RE.match(stripped)):
            config = _header_config(m)
            r = fresh(cur is not None and cur.test.config in ({}, config), tag)
            r.preamble = True
            r.test.config.update(config)
            continue
        rank = _RANK_RE.match(stripped)
        tokens = stripped.lstrip("#").split()
        is_header = tokens[:2] == ["size", "count"]
        if not stripped.startswith("#") and not rank and not is_header:
            prog = _PROGRAM_RE.search(stripped)  # "Running: ./build/all_gather_perf -b 8", "$ mpirun ..."
            if prog:
                pending_program = prog["name"] + "_perf"
            continue
        if cur is None:
            if not is_header:
                continue
            start(tag)  # a table pasted without its preamble: the column header opens a run
        if (m := rank):
            number = int(m["rank"])
            if number in cur.rank_numbers:  # interleaved copies of one header
                cur.rank_repeats += 1
                continue
            cur.rank_numbers.add(number)
            cur.test.ranks.append(RankLine(
                rank=number, host=m["host"], device=int(m["device"]), bus_id=m["bus"],
                device_name=m["name"].strip(), group=int(m["group"]) if m["group"] else None,
                pid=int(m["pid"]),
            ))
            continue
        if is_header:
            if cur.test.rows:  # a second table: a new run (READMEs and tickets paste several)
                start(tag)
            layout = _Layout.from_header(tokens)
            continue
        if (m := _OOB_RE.match(stripped)):
            cur.test.out_of_bounds = int(m["n"])
        elif (m := _AVG_RE.match(stripped)):
            cur.test.avg_busbw_GBps = _number(m["bw"])
            cur.closed = True
    if progress is not None:
        progress(len(lines), len(lines))
    for r in readings:
        r.finish()
    readings = _one_copy(readings)
    single = len([r for r in readings if r.test.rows]) == 1
    found = []
    for r in readings:
        t = r.test
        if not t.rows:
            pending_failures.extend(t.problems_of("failure"))  # a run that failed before its table
            continue
        found.append(t)
        if t.nccl_version is None and nccl_version:
            t.nccl_version, t.cuda_version = nccl_version
        named = _collective_from_filename(source)
        if t.collective is None:
            _collective_of_unnamed(t, named, source)
        elif single and named is not None and named != t.collective:
            t.problems.append(Problem(
                "collective", f"the file name {Path(source).name!r} says {named}, the log itself "
                f"{t.collective}: imported as {t.collective}"))
        if not t.ranks and not t.config:
            t.ranks_inferred = _ranks_of(t)
    refused = [p for r in readings for p in r.test.problems_of("refused")]
    if not found and refused:
        count = sum(p.count for p in refused)
        raise UsageError(f"{source}: no table row could be read: {count} line(s) left out, "
                         f"{refused[0].reason} ({refused[0].example})")
    if not found and pending_failures:
        raise UsageError(f"{source}: no nccl-tests results before the run failed "
                         f"({pending_failures[0].example})")
    return found


def _ranks_of(t: NcclTest) -> int | None:
    """The rank count of a table pasted without its rank lines, from its collective's busbw/algbw
    factor (2(n-1)/n for all_reduce, (n-1)/n for all_gather, reduce_scatter, alltoall): a README's
    2-node table is 16 ranks, not 1. None where the factor does not say (1 for sendrecv, broadcast)."""
    shape = next((s for s in _SHAPES if s.name == t.collective), None)
    factor = _Traits.of(t).factor
    if shape is None or factor is None or shape.factor(2) == shape.factor(3):
        return None
    top = shape.factor(1 << 20)
    if not 0 <= factor < top:
        return None
    n = round(top / (top - factor))  # factor(n) = top * (n-1)/n
    return n if abs(shape.factor(n) - factor) <= 0.005 * top else None


def _collective_of_unnamed(t: NcclTest, named: str | None, source: str) -> None:
    """The collective of a run whose log does not name it: the file name's when the table fits it,
    else the table's own (and a problem that says the file name was overruled)."""
    shape = next((s for s in _SHAPES if s.name == named), None)
    if shape is not None and _table_fits(t, shape):
        t.collective = named
        t.collective_inferred = f"from the file name {Path(source).name!r}"
        return
    t.collective, t.collective_inferred = infer_collective(t)
    if named is not None:
        t.problems.append(Problem(
            "collective", f"the file name {Path(source).name!r} says {named}, but the table is not "
            f"{named}'s: imported as {t.collective or 'unknown'} ({t.collective_inferred})"))


@dataclass(frozen=True)
class _Shape:
    """What a collective's table looks like: a reduction op printed or not, a root or -1, and the
    busbw/algbw factor for n ranks (nccl-tests' PERFORMANCE.md; DESIGN.md's table)."""

    name: str
    redop: bool | None  # True: a reduction op; False: "none"; None: either (sendrecv prints "sum")
    rooted: bool
    factor: Callable[[int], float]


# in the order an ambiguous table is resolved: the collective run most often first
_SHAPES = (
    _Shape("all_reduce", True, False, lambda n: 2 * (n - 1) / n),
    _Shape("all_gather", False, False, lambda n: (n - 1) / n),
    _Shape("reduce_scatter", True, False, lambda n: (n - 1) / n),
    _Shape("broadcast", False, True, lambda n: 1.0),
    _Shape("reduce", True, True, lambda n: 1.0),
    _Shape("sendrecv", None, False, lambda n: 1.0),
    _Shape("all_to_all", False, False, lambda n: (n - 1) / n),
    _Shape("gather", False, True, lambda n: (n - 1) / n),
    _Shape("scatter", False, True, lambda n: (n - 1) / n),
)


@dataclass(frozen=True)
class _Traits:
    """What a table shows of its collective: the redops, the roots and the median busbw/algbw."""

    ops: set[str]
    roots: set[int | None]
    factor: float | None
    ranks: int | None  # None: the log does not say (a pasted table)

    @classmethod
    def of(cls, test: NcclTest) -> _Traits:
        rows = test.rows
        ratios = sorted(
            r["busbw_GBps"] / r["algbw_GBps"]
            for r in rows
            if r.get("algbw_GBps") and r["algbw_GBps"] >= 1 and r.get("busbw_GBps") is not None
        )
        return cls(
            ops={str(r.get("op")) for r in rows if r.get("op") is not None},
            roots={_to_int(r.get("root")) for r in rows if r.get("root") is not None},
            factor=ratios[len(ratios) // 2] if ratios else None,
            ranks=test.nranks if test.ranks or test.config else None,
        )


def _table_fits(test: NcclTest, shape: _Shape) -> bool:
    t = _Traits.of(test)
    return _shape_fits(shape, t.ops, t.roots, t.factor, t.ranks)


def infer_collective(test: NcclTest) -> tuple[str | None, str | None]:
    """The collective of a table whose log does not name it (no "Collective test" lines, no
    program name): from the redop and root columns and the busbw/algbw factor, which depends on
    the collective and the rank count. Returns (name or None, how it was inferred)."""
    t = _Traits.of(test)
    ops, roots, factor, n = t.ops, t.roots, t.factor, t.ranks
    fits = [s for s in _SHAPES if _shape_fits(s, ops, roots, factor, n)]
    if not fits:
        return None, "the table fits no known collective"
    root_text = "/".join(sorted({str(r) for r in roots})) or "not printed"
    seen = [f"redop {'/'.join(sorted(ops)) or 'not printed'}", f"root {root_text}"]
    if factor is not None:
        seen.append(f"busbw/algbw {factor:.3g}" + (f" on {n} ranks" if n else ""))
    how = "inferred from " + ", ".join(seen)
    if len(fits) > 1:
        how += f" (could also be {', '.join(s.name for s in fits[1:])})"
    return fits[0].name, how


def _shape_fits(
    shape: _Shape, ops: set[str], roots: set[int | None], factor: float | None, n: int | None
) -> bool:
    if ops and shape.redop is not None and (ops != {"none"}) != shape.redop:
        return False
    if roots and roots != {None} and (max(r or -1 for r in roots) >= 0) != shape.rooted:
        return False
    if factor is None:
        return True
    ranks = [n] if n else range(1, 4097)  # a pasted table does not say how many ranks
    return any(abs(shape.factor(k) - factor) <= 0.02 * max(1.0, factor) + 0.01 for k in ranks)


def _collective_from_filename(source: str) -> str | None:
    stem = Path(source).stem.lower()
    for name in ("all_reduce", "all_gather", "reduce_scatter", "alltoallv", "alltoall", "broadcast",
                 "sendrecv", "hypercube", "scatter", "gather", "reduce"):
        if name in stem:
            return _COLLECTIVES.get(name, name)
    return None


# -- JSON (-J) ----------------------------------------------------------------------------------------

def _json_num(value: Any) -> float | None:
    """A finite number, else None ("nan", null, Infinity and 1e999 are not measurements)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # an integer of hundreds of digits
            return None
        return number if math.isfinite(number) else None
    return None


def parse_json(data: dict[str, Any], source: str = "<json>") -> NcclTest:
    """One ``-J`` file: one run of one ``*_perf`` binary. A value of the wrong type anywhere (a
    string size, a list where an object belongs) is the user's input: UsageError naming the file."""
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise UsageError(f"{source}: JSON without a 'results' list is not nccl-tests -J output")
    try:
        return _parse_json(data, source)
    except (TypeError, ValueError, AttributeError, KeyError, IndexError, OverflowError) as exc:
        what = f"missing key {exc}" if isinstance(exc, KeyError) else f"{type(exc).__name__}: {exc}"
        raise UsageError(f"{source}: not nccl-tests -J output as expected ({what})") from None


def _parse_json(data: dict[str, Any], source: str) -> NcclTest:
    args = data.get("args") or []
    name = collective_name(args[0]) if args else _collective_from_filename(source)
    test = NcclTest(source=source, collective=name)
    code = data.get("nccl_version")
    if isinstance(code, int):
        test.nccl_version = nccl_version_from_code(code)
    cfg = data.get("config") or {}
    test.config = {
        "nthread": cfg.get("nthreads", 1), "ngpus": cfg.get("ngpus", 1),
        "min_bytes": cfg.get("minimum_bytes"), "max_bytes": cfg.get("maximum_bytes"),
        "warmup_iters": cfg.get("warmup_iters"), "iters": cfg.get("iterations"),
        "agg_iters": cfg.get("aggregated_iterations"), "validation": cfg.get("validation"),
        "graph": cfg.get("graph"), "json_version": data.get("version"),
    }
    for key in ("step_factor", "step_bytes"):
        if key in cfg:
            test.config[key] = cfg[key]
    for d in cfg.get("devices") or []:
        test.ranks.append(RankLine(
            rank=int(d.get("rank", len(test.ranks))), host=str(d.get("hostname", "")),
            device=int(d.get("device", 0)),
            bus_id=str(d.get("device_hex", "")), device_name=str(d.get("device_info", "")),
            group=d.get("group"), pid=d.get("pid"),
        ))
    for entry in data.get("env") or []:
        if isinstance(entry, str) and entry.startswith("NCCL_") and "=" in entry:
            k, v = entry.split("=", 1)
            test.env[k] = v
    reading = _Reading(test)
    for i, res in enumerate(data["results"]):
        root = str(res.get("root", "")).strip()
        base = {"bytes": _json_int(res["size"]), "count": _json_int(res["count"]),
                "dtype": res.get("type", ""), "op": res.get("redop"), "root": root or None, "line": i}
        rows = []
        for placement in ("out_of_place", "in_place"):
            body = res.get(placement)
            if not isinstance(body, dict):
                continue
            row = dict(base, in_place=placement == "in_place")
            row["time_us"] = _json_num(body.get("time", body.get("cpu_time")))
            row["algbw_GBps"] = _json_num(body.get("alg_bw"))
            row["busbw_GBps"] = _json_num(body.get("bus_bw"))
            wrong = _json_num(body.get("nwrong"))
            row["wrong"] = int(wrong) if wrong is not None else None
            if "cpu_time" in body:
                row["cpu_time"] = True
            per_iter = res.get(f"{placement}_per_iter")
            if isinstance(per_iter, dict):
                row["per_iter"] = {k: v for k, v in per_iter.items() if k != "per_process_max_times_us"}
            rows.append(row)
        try:
            _check_json_row(base, rows, len(test.ranks) or None)
        except _Refused as exc:
            reading.refuse(exc, i, f"results[{i}]: {exc.detail}", last=False)
            continue
        reading.add_rows(rows, i, f"results[{i}]")
    reading.closed = True  # -J is written whole, at the end of the run
    reading.finish()
    oob = data.get("out_of_bounds") or {}
    if isinstance(oob.get("count"), int):
        test.out_of_bounds = oob["count"]
    avg = data.get("average_bus_bandwidth") or data.get("average_bus_bandwidith") or {}  # typo before 2026-02
    test.avg_busbw_GBps = _json_num(avg.get("bandwidth", avg.get("bandwidith")))
    test.errors = [e for e in data.get("errors") or [] if e]
    if test.errors:  # what the run's failure lines said, kept by -J
        failure = Problem("failure", "the log says the run failed",
                          example=f"errors[0]: {str(test.errors[0])[:120]}")
        for k in range(len(test.errors)):
            failure.add(k)
        test.problems.append(failure)
    return test


def _json_int(value: Any) -> int:
    """An integer of a -J file within int64 (ValueError, the caller's exit 2, for anything else)."""
    number = int(value)
    if not -(1 << 63) <= number < 1 << 63:
        raise ValueError(f"{str(value)[:40]}... is out of range")
    return number


def _check_json_row(base: dict[str, Any], rows: list[dict[str, Any]], ranks: int | None) -> None:
    """The checks of a table row, on one ``results`` entry of a -J file."""
    check_sizes(base["bytes"], base["count"], str(base["dtype"]), ranks)
    if base["op"] is not None and base["op"] not in REDOPS:
        raise _Refused("redop is not one nccl-tests prints", str(base["op"]))
    for row in rows:
        for key in ("time_us", "algbw_GBps", "busbw_GBps", "wrong"):
            if row[key] is not None and row[key] < 0:
                raise _Refused(f"{key.split('_')[0]} is negative", str(row[key]))


# -- files and run directories ---------------------------------------------------------------------------

def parse_file(path: str | Path, progress: Callable[[int, int], None] | None = None) -> list[NcclTest]:
    """The runs in one file, text or JSON; UsageError (exit 2) when there are none."""
    from netbench.common.rundir import open_regular

    path = Path(path)
    with open_regular(path) as fh:  # a FIFO or a device is refused, not read forever
        raw = fh.read(MAX_LOG_BYTES + 1)
    if len(raw) > MAX_LOG_BYTES:
        raise UsageError(f"{path}: larger than {MAX_LOG_BYTES >> 20} MiB; split the log per run")
    text = raw.decode("utf-8", errors="replace")
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from exc
        except (ValueError, RecursionError) as exc:  # an integer of thousands of digits, deep nesting
            raise UsageError(f"{path}: not nccl-tests -J output ({type(exc).__name__})") from exc
        tests = [parse_json(data, str(path))]
    else:
        tests = parse_text(text, str(path), progress)
    tests = [t for t in tests if t.rows]
    if not tests:
        raise UsageError(
            f"{path}: no nccl-tests results found (expected the size/count/type table of *_perf, or -J JSON)"
        )
    return tests


def _to_int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def to_rows(test: NcclTest, run_id: str, group: str | None = None) -> Iterator[ResultRow]:
    """ResultRows (the results.jsonl contract) for one parsed run, one at a time (a table of a
    million rows is not held twice); ``group`` keeps it apart from the other runs imported with it
    (two logs' rows of one collective are two measurements, not one)."""
    hosts, ranks = test.hosts, test.nranks
    iters = _to_int(test.config.get("iters")) or 0
    warmup = _to_int(test.config.get("warmup_iters")) or 0
    graph = (_to_int(test.config.get("graph")) or 0) > 0
    for r in test.rows:
        op = r.get("op")
        root = _to_int(r.get("root"))
        extra: dict[str, Any] = {"source": test.source, "line": r["line"], "imported_from": "nccl-tests"}
        for key in ("max_error", "per_iter", "cpu_time"):
            if key in r:
                extra[key] = r[key]
        if test.config.get("agg_iters"):
            extra["agg_iters"] = test.config["agg_iters"]
        if test.collective_inferred:
            extra["collective_inferred"] = test.collective_inferred
        missing = "time" if r["time_us"] is None else "bus bandwidth" if r["busbw_GBps"] is None else None
        yield ResultRow(
            run_id=run_id, collective=test.collective or "unknown", backend="nccl", pattern="world",
            hosts=hosts, ranks=ranks, round=None, bytes=r["bytes"], count=r["count"], dtype=r["dtype"],
            op=None if op in (None, "none") else op, in_place=r["in_place"], iters=iters, warmup=warmup,
            time_us=r["time_us"], time_us_min=None, time_us_max=None, rank_time_us=None,
            algbw_GBps=r["algbw_GBps"], busbw_GBps=r["busbw_GBps"], wrong=r.get("wrong"),
            status="error" if missing else "ok",  # an ok row has its time and busbw (rows.MEASURED)
            error=f"nccl-tests printed no {missing}" if missing else None,
            root=root if root is not None and root >= 0 else None, device="cuda", cuda_graph=graph,
            group=group, engine="nccl",  # nccl-tests calls NCCL directly, as netbench's NCCL engine does
            extra=extra,
        )


def env_hosts(tests: list[NcclTest]) -> dict[str, dict[str, Any]]:
    """env.json's per-host entries from what the logs say (versions, NCCL_* of -J runs)."""
    hosts: dict[str, dict[str, Any]] = {}
    for t in tests:
        for host in t.hosts or ["unknown"]:
            entry = hosts.setdefault(host, {"source": "nccl-tests log"})
            for key, value in (("nccl_tests_version", t.nccl_tests_version), ("nccl", t.nccl_version),
                               ("nccl_headers", t.nccl_headers_version), ("cuda", t.cuda_version)):
                if value:
                    entry.setdefault(key, value)
            if t.env:
                entry.setdefault("env", {}).update(t.env)
    return hosts


@dataclass(frozen=True)
class NicSpec:
    """``import --nics 8x400``: what a log never says, the data ports of every node and their rate
    (Gb/s), from the user; the report then has a ceiling and the published references to judge by."""

    count: int
    gbps: float

    _RE = re.compile(r"^\s*(\d{1,3})\s*[xX*]\s*(\d{1,5}(?:\.\d+)?)\s*(?:[gG](?:b/?s|bps)?)?\s*$")

    @classmethod
    def parse(cls, text: str) -> NicSpec:
        m = cls._RE.match(text)
        if not m or not 1 <= int(m.group(1)) <= 64 or not 1 <= float(m.group(2)) <= 3200:
            raise ValueError(f"--nics {text!r}: give ports x Gb/s a port, e.g. 8x400 "
                             "(1-64 ports, 1-3200 Gb/s)")
        return cls(int(m.group(1)), float(m.group(2)))


NICS_UNKNOWN = "an nccl-tests log names no NIC: import it with --nics PORTSxGBPS (e.g. 8x400) to judge it"


def inventory_nodes(tests: list[NcclTest], nics: NicSpec | None = None) -> list[dict[str, Any]]:
    """Partial NodeInventory records: the GPUs each host's rank lines name (no probe was run), and
    ``nics`` when the user gave them (named ``given-K``, so nobody takes them for inventoried)."""
    from netbench.inventory.model import GPU, NIC, NodeInventory

    missing = {"probe": "imported from an nccl-tests log"}
    if nics is None:
        missing["nics"] = NICS_UNKNOWN
    nodes: dict[str, NodeInventory] = {}
    for t in tests:
        for r in t.ranks:
            node = nodes.setdefault(r.host, NodeInventory(
                host=r.host, status="partial", missing=dict(missing),
                nics=[NIC(name=f"given-{k}", state="Active", rate_gbps=nics.gbps) for k in range(nics.count)]
                if nics else [],
            ))
            if all(g.index != r.device for g in node.gpus):
                bus = r.bus_id.lower() or None
                node.gpus.append(GPU(index=r.device, name=r.device_name or None, pci_bus_id=bus))
    return [n.to_dict() for n in nodes.values()]


#: ResultRow's fields, in order: its dict without dataclasses.asdict's deep copy (a 50 MB log's rows)
_ROW_FIELDS = tuple(f.name for f in dataclasses.fields(ResultRow))


def import_logs(
    paths: list[str | Path], out: str | Path | None = None, nics: NicSpec | None = None,
    progress: Progress | None = None,
) -> tuple[Any, list[NcclTest]]:
    """Parse every file (all must be nccl-tests output) and write one run directory (``nics``: the
    nodes' data ports, which the user gave: ``NicSpec``; ``progress``: a bar on a terminal).

    Returns ``(RunDir, tests)``. Nothing is written when any file fails to parse, so a typo in one
    path never leaves a half-imported run behind; run.json says ``completed`` only once every row
    is written (before that ``starting``: an import that broke off is ``run_incomplete``). Rows left
    out or repeated, failure lines and tables cut short are each test's ``problems``, in run.json.
    """
    from netbench import __version__
    from netbench.common.rundir import RunDir, utc_now

    if not paths:
        raise UsageError("no nccl-tests log given")
    tests: list[NcclTest] = []
    for path in paths:
        def reading(done: int, total: int, name: str = Path(path).name) -> None:
            if progress is not None:
                progress.update(done, total, f"reading {name}")
        tests += parse_file(path, reading)
    run = RunDir.create(out)
    started = utc_now()
    total = sum(len(t.rows) for t in tests)

    def records() -> Iterator[dict[str, Any]]:
        done = 0
        for k, t in enumerate(tests, 1):
            for row in to_rows(t, run.run_id, f"log{k}"):
                yield {name: getattr(row, name) for name in _ROW_FIELDS}
            done += len(t.rows)
            if progress is not None:
                progress.update(done, total, "writing rows")

    with run.writer() as writer:
        writer.write_many(records())
    if progress is not None:
        progress.clear()
    run.write_env(env_hosts(tests))
    run.write_inventory(inventory_nodes(tests, nics))
    run.write_run(
        started=started, finished=utc_now(), netbench_version=__version__, launcher="import",
        status="completed", sources=[str(Path(p)) for p in paths],
        imported=[{
            "source": t.source, "tool": "nccl-tests", "collective": t.collective,
            "collective_inferred": t.collective_inferred,
            "nccl_tests_version": t.nccl_tests_version, "nccl_version": t.nccl_version, "config": t.config,
            "hosts": t.hosts, "ranks": t.nranks, "rows": len(t.rows), "out_of_bounds": t.out_of_bounds,
            "avg_busbw_GBps": t.avg_busbw_GBps, "errors": t.errors,
            "per_iter": "per-process maxima: bound a straggler, cannot name it"
            if any("per_iter" in r for r in t.rows) else None,
            "problems": [p.to_dict() for p in t.problems],
        } for t in tests],
    )
    return run, tests
