"""The stdout table of a run: the line grammar (what a launcher's prefix, a header, a rank line, a row
look like), the column layout read from the header, every cell of a row checked, and ``Reading``:
one run's table as it is read (rows kept, lines refused or repeated, and why)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from netbench.importers.nccl_tests.model import (
    DTYPE_BYTES,
    MAX_LINE_CHARS,
    MAX_SIZE_BYTES,
    REDOPS,
    NcclTest,
    Problem,
)

# -- what a log says --------------------------------------------------------------------------------
# numbers are at most 18 digits: a line of thousands of digits is not nccl-tests output, and int() of
# one raises ValueError (Python's limit on digits) where this parser expects a match or none

_PREFIX_RE = re.compile(r"^(?:\[\d{1,18},(?P<mpi>\d{1,18})\]<std(?:out|err)>:|\s*(?P<srun>\d{1,18}): )")
VERSION_RE = re.compile(
    r"#\s*nccl-tests version (?P<ver>\S+)(?:\s+\((?P<git>[0-9a-f]+)\))?"
    r"(?:\s+nccl-headers=(?P<hdr>\d{1,18}))?(?:\s+nccl-library=(?P<lib>\d{1,18}))?"
)
STARTING_RE = re.compile(r"#\s*Collective test starting:\s*(?P<name>\S+)")
NTHREAD_RE = re.compile(r"#?\s*nThread\s+(?P<nthread>\d{1,18})\s+nGpus\s+(?P<ngpus>\d{1,18})"
                         r"\s+minBytes\s+(?P<min>\d{1,18})\s+maxBytes\s+(?P<max>\d{1,18})(?P<rest>.*)")
_KV_RE = re.compile(r"(warmup iters|agg iters|iters|validation|graph|unalign):\s*(-?\d{1,18})")
_STEP_RE = re.compile(r"step:\s*(\d{1,18})\((factor|bytes)\)")
RANK_RE = re.compile(
    r"#?\s*Rank\s+(?P<rank>\d{1,18})\s+(?:Group\s+(?P<group>\d{1,18})\s+)?Pid\s+(?P<pid>\d{1,18})\s+on\s+(?P<host>\S+)"
    r"\s+device\s+(?P<device>\d{1,18})\s+\[(?P<bus>[^\]]*)\]\s*(?P<name>.*)$"
)
NCCL_VERSION_RE = re.compile(r"NCCL version (?P<ver>\d{1,9}\.\d{1,9}\.\d{1,9})(?:\+cuda(?P<cuda>[\d.]+))?")
OOB_RE = re.compile(r"#\s*Out of bounds values\s*:\s*(?P<n>\d{1,18})\s*(?P<verdict>OK|FAILED)?")
AVG_RE = re.compile(r"#\s*Avg bus bandwidth\s*:\s*(?P<bw>[-+\d.eE]+|nan|inf)")
PROGRAM_RE = re.compile(r"(?:^|[/\s])(?P<name>[a-z_]+)_perf(?:_mpi)?\b")
# a line that starts as a table row does (two numbers, however written: 1e30, 1,048,576, -8): read as
# one and checked column by column, or counted and named as a line left out
ROW_RE = re.compile(r"^\s*[-+]?[\d.,]+(?:[eE][-+]?\d+)?\s+[-+]?[\d.,]+(?:[eE][-+]?\d+)?(?:\s|$)")
_NUMERIC_START = frozenset("0123456789+-.")
_INT_RE = re.compile(r"^\d{1,19}$")  # bounded: int() of 5000 digits raises
_ROOT_RE = re.compile(r"-1|\d{1,9}")
# the run failed or was aborted: nccl-tests' own checks (src/common.h: "<host>: Test NCCL failure
# common.cu:1005 'unhandled system error / ...'", "Test CUDA failure", " .. <host> pid N: Test failure
# common.cu:892"), and the launchers' words for a job that ended under it
FAILURE_RE = re.compile(
    r"Test (?:NCCL |CUDA )?failure|MPI_ABORT was invoked|mpirun noticed that process rank"
    r"|srun: error: .*(?:exit code|Killed|Aborted|Segmentation)"
)
NCCL_LOG_RE = re.compile(r"\bNCCL (?:INFO|WARN|TRACE)\b")
_TIME_COLS = ("time", "cputime")


def number(token: str) -> float | None:
    """A table cell: ``N/A`` -> None; ``1e+06`` and ``24745`` as printed; None for what is no finite
    number (``nan``, ``1e400``: run.json holds no Infinity)."""
    if token in ("N/A", "-", ""):
        return None
    try:
        value = float(token)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


@dataclass(frozen=True)
class Block:
    """Where one placement's values sit in a data line (column numbers; None: not printed)."""

    time: int | None
    algbw: int | None
    busbw: int | None
    wrong: int | None  # "#wrong": a count of wrong elements
    error: int | None  # "error" (2.0-2.10): the largest relative error, not a count
    per_iter: tuple[tuple[str, int], ...]  # -I 1: (i_min -> "min", column), ...
    cpu_time: bool  # -C 1: the time column is "cputime"

    @classmethod
    def of(cls, cols: list[str], start: int) -> Block:
        at: dict[str, int] = {}
        for k, name in enumerate(cols):  # a name printed twice: the last, as a dict of the cells had it
            at[name] = start + k
        return cls(time=at.get("time", at.get("cputime")), algbw=at.get("algbw"), busbw=at.get("busbw"),
                   wrong=at.get("#wrong"), error=None if "#wrong" in at else at.get("error"),
                   per_iter=tuple((name[2:], k) for name, k in at.items() if name.startswith("i_")),
                   cpu_time="cputime" in at)


@dataclass
class Layout:
    """Where each value sits in a data line, derived from the ``#  size count type ...`` header."""

    prefix: list[str]  # size count type [redop] [root]
    blocks: list[list[str]]  # [out-of-place columns, in-place columns]
    extra: int  # columns printed after the two blocks (-S 1: a timestamp)
    # worked out once from the above, read for every line (a 50 MB log has 400k of them)
    width: int = 0  # the columns of prefix and blocks
    type_at: int | None = None
    redop_at: int | None = None
    root_at: int | None = None
    placements: tuple[Block, ...] = ()  # out of place, in place

    def __post_init__(self) -> None:
        self.width = len(self.prefix) + sum(len(b) for b in self.blocks)
        at = {name: k for k, name in enumerate(self.prefix)}
        self.type_at, self.redop_at, self.root_at = at.get("type"), at.get("redop"), at.get("root")
        start = len(self.prefix)
        placements = []
        for cols in self.blocks:
            placements.append(Block.of(cols, start))
            start += len(cols)
        self.placements = tuple(placements)

    @classmethod
    def from_header(cls, tokens: list[str]) -> Layout | None:
        starts = [i for i, t in enumerate(tokens) if t in _TIME_COLS]
        if len(starts) != 2 or tokens[:2] != ["size", "count"]:
            return None
        first = tokens[starts[0]:starts[1]]
        second = [t for t in tokens[starts[1]:] if t != "timestamp"][: len(first)]
        return cls(prefix=tokens[: starts[0]], blocks=[first, second],
                   extra=len(tokens) - starts[1] - len(second))


def by_process(lines: list[str]) -> Iterator[tuple[int, str | None, str]]:
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
    if not tags:  # no launcher prefix anywhere: the lines as they are (splitlines left no line end)
        yield from ((n, None, raw) for n, raw in enumerate(lines, start=1))
        return
    if len(tags) < 2:
        yield from (split(n, raw) for n, raw in enumerate(lines, start=1))
        return
    out = [split(n, raw) for n, raw in enumerate(lines, start=1)]
    order = {tag: k for k, tag in enumerate(dict.fromkeys(tag for _, tag, _ in out if tag is not None))}
    out.sort(key=lambda item: order.get(item[1], -1))
    yield from out


class Refused(Exception):
    """A line that starts as a table row but is not one nccl-tests printed; ``reason`` says why in
    words that are the same for every line refused for it (the count is per reason)."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(reason)
        self.reason = reason
        self.detail = detail


def _measure(token: str, what: str) -> float | None:
    """A time or bandwidth cell: N/A, or a finite number not below zero (``1e400`` is named as the
    value it is, never read as a time nccl-tests did not print)."""
    if token == "N/A":
        return None
    try:
        value = float(token)
    except ValueError:
        raise Refused(f"{what} is not a number", token) from None
    if not math.isfinite(value):
        raise Refused(f"{what} is not finite", token)
    if value < 0:
        raise Refused(f"{what} is negative", token)
    return value


def _cell(tokens: list[str], at: int | None, what: str) -> float | None:
    return None if at is None else _measure(tokens[at], what)


def _whole(token: str, what: str) -> int:
    # ASCII digits, at most 19 (int64): int() of a 5,000-digit cell raises, and \d takes other scripts'
    if token.isdigit() and token.isascii() and len(token) <= 19:
        return int(token)
    if token[:1] == "-" and _INT_RE.match(token[1:]):
        raise Refused(f"{what} is negative", token)
    raise Refused(f"{what} is not a whole number", token)


def check_sizes(nbytes: int, count: int, dtype: str, ranks: int | None) -> None:
    """``Refused`` unless ``count`` elements of ``dtype`` make ``nbytes``: nccl-tests prints the
    larger of the send and receive buffer as the size and one rank's part as the count, so the size
    is the count's bytes times 1 or the rank count (all_gather, reduce_scatter, alltoall: ``ranks``,
    when the log lists its ranks; else any whole multiple). A buffer no GPU can hold
    (``MAX_SIZE_BYTES``) is no measurement either."""
    if dtype not in DTYPE_BYTES:
        raise Refused("type is not one nccl-tests prints", dtype)
    if nbytes < 0 or count < 0:
        raise Refused("size or count is negative", f"{nbytes} {count}")
    if nbytes > MAX_SIZE_BYTES:
        raise Refused(f"size is larger than any GPU's memory (over {MAX_SIZE_BYTES >> 40} TiB)",
                      f"{nbytes} B = {nbytes / (1 << 40):.4g} TiB")
    part = count * DTYPE_BYTES[dtype]
    if part == 0:
        if nbytes != 0:
            raise Refused("count does not fit the size", f"{count} {dtype} in {nbytes} B")
        return
    ratio, rest = divmod(nbytes, part)
    if rest or ratio < 1 or (ranks and ratio not in (1, ranks)):
        raise Refused("count does not fit the size", f"{count} {dtype} in {nbytes} B")


def read_row(tokens: list[str], layout: Layout, ranks: int | None, line_no: int) -> list[dict[str, Any]]:
    """The two rows (out of place, in place) of one data line, every column checked; ``Refused``
    for a line nccl-tests did not print as it stands (glued to another rank's, cut, edited)."""
    if len(tokens) < layout.width:
        raise Refused("fewer columns than the header", f"{len(tokens)} of {layout.width}")
    if len(tokens) > layout.width + layout.extra:
        raise Refused("more columns than the header (lines glued together)",
                       f"{len(tokens)} of {layout.width + layout.extra}")
    nbytes, count = _whole(tokens[0], "size"), _whole(tokens[1], "count")
    dtype = "" if layout.type_at is None else tokens[layout.type_at]
    check_sizes(nbytes, count, dtype, ranks)
    op = None if layout.redop_at is None else tokens[layout.redop_at]
    root = None if layout.root_at is None else tokens[layout.root_at]
    if op is not None and op not in REDOPS:
        raise Refused("redop is not one nccl-tests prints", op)
    if root is not None and not _ROOT_RE.fullmatch(root):
        raise Refused("root is not a rank", root)
    rows = []
    for in_place, b in zip((False, True), layout.placements, strict=True):
        row = {"bytes": nbytes, "count": count, "dtype": dtype, "op": op, "root": root, "line": line_no,
               "in_place": in_place}
        row["time_us"], row["algbw_GBps"], row["busbw_GBps"] = _timing(tokens, b)
        if b.wrong is not None:
            wrong = _measure(tokens[b.wrong], "#wrong")
            if wrong is not None and not wrong.is_integer():
                raise Refused("#wrong is not a whole number", tokens[b.wrong])
            row["wrong"] = int(wrong) if wrong is not None else None
        elif b.error is not None:  # old layout: the largest relative error, not a count
            row["wrong"] = None
            row["max_error"] = _measure(tokens[b.error], "error")
        if b.per_iter:
            row["per_iter"] = {name: number(tokens[k]) for name, k in b.per_iter}
        if b.cpu_time:
            row["cpu_time"] = True
        rows.append(row)
    return rows


def _timing(tokens: list[str], b: Block) -> tuple[float | None, float | None, float | None]:
    """time, algbw and busbw of one placement: three finite numbers not below zero as nccl-tests
    prints them, read at once (the common case, a third of a 50 MB log's parse when read cell by
    cell), else each cell checked on its own (N/A, or which one is bad and why)."""
    if b.time is not None and b.algbw is not None and b.busbw is not None:
        try:
            t, a, bw = float(tokens[b.time]), float(tokens[b.algbw]), float(tokens[b.busbw])
        except ValueError:
            pass
        else:
            if 0.0 <= t < math.inf and 0.0 <= a < math.inf and 0.0 <= bw < math.inf:  # NaN fails too
                return t, a, bw
    return _cell(tokens, b.time, "time"), _cell(tokens, b.algbw, "algbw"), _cell(tokens, b.busbw, "busbw")


def header_config(m: re.Match[str]) -> dict[str, Any]:
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
class Reading:
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
    damaged: str | None = None  # the header line naming no nccl-tests collective: the table left out
    # a problem's example from (line number, the line): made only for a line met in a problem
    example_of: Callable[[int, str], str] = field(default=lambda line_no, text: example(line_no, text))

    def same_table(self, other: Reading) -> bool:
        return (self.tag != other.tag and self.test.collective == other.test.collective
                and self.test.config == other.test.config and other.keys <= self.keys)

    def refuse(self, exc: Refused, line_no: int, example: str, last: bool) -> None:
        """A line left out (``example``: where and what, for the first of its reason)."""
        reason = exc.reason
        if last and reason == "fewer columns than the header":
            reason = "the log ends in the middle of this row (truncated)"
        p = self.refused.setdefault(reason, Problem("refused", reason, example=example))
        p.add(line_no)

    def add_rows(self, rows: list[dict[str, Any]], line_no: int, text: str) -> None:
        """The rows of one line (``text``, as printed), each size and placement once."""
        for row in rows:
            key = _row_key(row)
            if key in self.keys:
                if self.repeated is None:
                    self.repeated = Problem(
                        "repeated", "a size already read, printed again (several processes each "
                        "printing the table, interleaved; or -N run cycles): the first kept",
                        example=self.example_of(line_no, text))
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


def loose_row(line: str, reading: Reading, layout: Layout) -> bool:
    """A line of an open table (before its summary), neither NCCL's log nor a failure nor a comment,
    that starts with a number or is mostly numbers: a row damaged past looking like one
    (``262144\x1b[31mfloat``, a row that lost its first columns), left out and named like the
    rest, not passed over. Other text in a table (a launcher's or a library's message) is not a row."""
    if reading.closed or line.startswith("#") or NCCL_LOG_RE.search(line) or FAILURE_RE.search(line):
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


def one_copy(readings: list[Reading]) -> list[Reading]:
    """The runs, each table that several processes printed (one run a process: an nccl-tests built
    without MPI under mpirun) kept once, the copies counted as a ``repeated`` problem of the first."""
    kept: list[Reading] = []
    copies: dict[int, Problem] = {}
    # the runs kept so far by collective and configuration, then by process: a run is looked for only
    # among other processes' runs of its own table (9,000 runs of one process in a 50 MB log: each
    # compared with every earlier one was 40 M comparisons)
    tables: dict[tuple[str | None, str], dict[str | None, list[Reading]]] = {}
    for r in readings:
        by_tag = tables.setdefault((r.test.collective, repr(sorted(r.test.config.items()))), {})
        first = next((k for tag, ks in by_tag.items() if tag != r.tag for k in ks if k.same_table(r)),
                     None) if r.test.rows else None
        if first is None:
            kept.append(r)
            by_tag.setdefault(r.tag, []).append(r)
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


#: why a line longer than ``MAX_LINE_CHARS`` is not read
TOO_LONG = f"a line longer than {MAX_LINE_CHARS:,} characters (nccl-tests prints none): not read"


def damaged_table(r: Reading) -> Problem:
    """The table of a run whose header is damaged, as the lines left out (one per size)."""
    p = Problem("refused", "a table under a header that names no nccl-tests collective (damaged: HTML "
                "copied with the log, an edit?): left out, not judged as any collective",
                example=r.damaged or "")
    for row in r.test.rows:
        if not row["in_place"]:
            p.add(row["line"])
    return p


def example(line_no: int, text: str) -> str:
    return f"line {line_no}: {text.strip()[:120]}"
