"""A stdout log read line by line into runs: the preamble (version, collective, nThread line), the
rank lines, the column header that opens a table, its rows, failure lines and the closing summary.
Several runs may be concatenated in one log, and several processes' copies of one interleaved."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from netbench.common.errors import UsageError
from netbench.importers.nccl_tests.infer import collective_of_unnamed, ranks_of
from netbench.importers.nccl_tests.model import (
    MAX_LINE_CHARS,
    NcclTest,
    Problem,
    RankLine,
    collective_from_filename,
    collective_name,
    nccl_version_from_code,
)
from netbench.importers.nccl_tests.table import (
    AVG_RE,
    FAILURE_RE,
    NCCL_LOG_RE,
    NCCL_VERSION_RE,
    NTHREAD_RE,
    OOB_RE,
    PROGRAM_RE,
    RANK_RE,
    ROW_RE,
    STARTING_RE,
    TOO_LONG,
    VERSION_RE,
    Layout,
    Reading,
    Refused,
    by_process,
    damaged_table,
    example,
    header_config,
    loose_row,
    number,
    one_copy,
    read_row,
)


def parse_text(text: str, source: str = "<text>",
               progress: Callable[[int, int], None] | None = None) -> list[NcclTest]:
    """Every nccl-tests run found in ``text`` (several runs may be concatenated in one log), each
    with the problems met in it (``NcclTest.problems``); ``progress(lines read, lines)`` now and then."""
    lines = text.splitlines()
    last_line = len(lines)
    while last_line and not lines[last_line - 1].strip():
        last_line -= 1
    reader = _TextReader(source, last_line)
    for done, (line_no, tag, line) in enumerate(by_process(lines), start=1):
        if progress is not None and not done % 65536:
            progress(done, len(lines))
        reader.line(line_no, tag, line)
    if progress is not None:
        progress(len(lines), len(lines))
    return reader.finish()


class _TextReader:
    """The runs read so far and what a line is read against: the run being read (``cur``), its
    table's layout once its column header was read, and what came before any run (a program name,
    failure lines, NCCL's version from its own log lines)."""

    def __init__(self, source: str, last_line: int):
        self.source = source
        self.last_line = last_line  # the last line that is not blank: a row cut there is truncated
        self.readings: list[Reading] = []
        self.cur: Reading | None = None
        self.layout: Layout | None = None
        self.pending_program: str | None = None
        self.pending_failures: list[Problem] = []
        self.nccl_version: tuple[str, str | None] | None = None
        self.unattached: dict[str, Problem] = {}  # lines left out before any run, by reason

    def start(self, tag: str | None) -> Reading:
        name = collective_name(self.pending_program) if self.pending_program else None
        cur = self.cur = Reading(NcclTest(source=self.source, collective=name), tag=tag)
        cur.test.problems.extend(self.pending_failures)
        self.pending_failures.clear()
        self.layout = None
        self.readings.append(cur)
        return cur

    def fresh(self, same: bool, tag: str | None) -> Reading:
        """The run a header line belongs to: the current one while it has no rows yet and this line
        repeats what it said (several processes printing one header, interleaved), else a new one."""
        if self.cur is not None and not self.cur.test.rows and same:
            return self.cur
        return self.start(tag)

    def line(self, line_no: int, tag: str | None, line: str) -> None:
        if len(line) > MAX_LINE_CHARS:  # not split, not searched: said, with its start
            self._left_out(Refused(TOO_LONG), line_no, line[:200])
            return
        stripped = line.strip()
        if not stripped or self._row(line_no, stripped):
            return
        if FAILURE_RE.search(stripped):
            self._failure(line_no, stripped)
        elif (m := NCCL_VERSION_RE.search(line)) and not stripped.startswith("#"):
            self.nccl_version = (m["ver"], m["cuda"])
            if self.cur is not None and self.cur.test.nccl_version is None:
                self.cur.test.nccl_version, self.cur.test.cuda_version = self.nccl_version
        elif not NCCL_LOG_RE.search(stripped) and not self._preamble(line_no, stripped, tag):
            self._run_line(stripped, tag)

    def _row(self, line_no: int, stripped: str) -> bool:
        """A line of the open table read as its row (or refused); False for a line that is none."""
        cur, layout = self.cur, self.layout
        if layout is None or cur is None or not (ROW_RE.match(stripped) or loose_row(stripped, cur, layout)):
            return False
        try:
            rows = read_row(stripped.split(), layout, len(cur.test.ranks) or None, line_no)
        except Refused as exc:
            cur.refuse(exc, line_no, example(line_no, stripped), line_no == self.last_line)
        else:
            cur.add_rows(rows, line_no, stripped)
        return True

    def _left_out(self, exc: Refused, line_no: int, text: str) -> None:
        """A line not read, counted with the run it is in (before any run: with the first run)."""
        if self.cur is not None:
            self.cur.refuse(exc, line_no, example(line_no, text), last=False)
            return
        p = self.unattached.get(exc.reason)
        if p is None:
            p = self.unattached[exc.reason] = Problem("refused", exc.reason, example=example(line_no, text))
        p.add(line_no)

    def _failure(self, line_no: int, stripped: str) -> None:
        held = self.pending_failures if self.cur is None else self.cur.test.problems
        failure = next((p for p in held if p.kind == "failure"), None)
        if failure is None:  # one a run: its first line the example, every line counted
            failure = Problem("failure", "the log says the run failed", example=example(line_no, stripped))
            held.append(failure)
        failure.add(line_no)

    def _preamble(self, line_no: int, stripped: str, tag: str | None) -> bool:
        """The version, "Collective test starting" and nThread lines that open a run; False for
        another line. A collective that is no nccl-tests program (``<b>all_reduce_perf</b>``: HTML
        copied with the log) marks the run's header damaged: its table is left out, and said."""
        cur = self.cur
        if (m := VERSION_RE.match(stripped)):
            r = self.fresh(cur is not None and cur.test.nccl_tests_version == m["ver"], tag)
            t = r.test
            t.nccl_tests_version = m["ver"]
            if m["hdr"]:
                t.nccl_headers_version = nccl_version_from_code(int(m["hdr"]))
            if m["lib"]:
                t.nccl_version = nccl_version_from_code(int(m["lib"]))
        elif (m := STARTING_RE.match(stripped)):
            name = collective_name(m["name"])
            r = self.fresh(name is not None and cur is not None and cur.test.collective in (None, name), tag)
            r.test.collective = name
            if name is None:
                r.damaged = example(line_no, stripped)
        elif (m := NTHREAD_RE.match(stripped)):
            config = header_config(m)
            r = self.fresh(cur is not None and cur.test.config in ({}, config), tag)
            r.test.config.update(config)
        else:
            return False
        r.preamble = True
        return True

    def _run_line(self, stripped: str, tag: str | None) -> None:
        """A rank line, the column header, the closing summary or a line naming the program."""
        rank = RANK_RE.match(stripped)
        tokens = stripped.lstrip("#").split()
        is_header = tokens[:2] == ["size", "count"]
        if not stripped.startswith("#") and not rank and not is_header:
            prog = PROGRAM_RE.search(stripped)  # "Running: ./build/all_gather_perf -b 8", "$ mpirun ..."
            if prog:
                self.pending_program = prog["name"] + "_perf"
            return
        cur = self.cur
        if cur is None:
            if not is_header:
                return
            cur = self.start(tag)  # a table pasted without its preamble: the column header opens a run
        if rank:
            self._rank(cur, rank)
        elif is_header:
            if cur.test.rows:  # a second table: a new run (READMEs and tickets paste several)
                self.start(tag)
            self.layout = Layout.from_header(tokens)
        elif (m := OOB_RE.match(stripped)):
            cur.test.out_of_bounds = int(m["n"])
        elif (m := AVG_RE.match(stripped)):
            cur.test.avg_busbw_GBps = number(m["bw"])
            cur.closed = True

    @staticmethod
    def _rank(cur: Reading, m: re.Match[str]) -> None:
        n = int(m["rank"])
        if n in cur.rank_numbers:  # interleaved copies of one header
            cur.rank_repeats += 1
            return
        cur.rank_numbers.add(n)
        cur.test.ranks.append(RankLine(
            rank=n, host=m["host"], device=int(m["device"]), bus_id=m["bus"],
            device_name=m["name"].strip(), group=int(m["group"]) if m["group"] else None,
            pid=int(m["pid"]),
        ))

    def finish(self) -> list[NcclTest]:
        """The runs with rows, each named and checked against the file name; UsageError where the
        log has no run: every row refused, or the run failed before its table."""
        for r in self.readings:
            r.finish()
        readings = one_copy(self.readings)
        skipped = [r for r in readings if r.damaged is not None and r.test.rows]
        readings = [r for r in readings if r.damaged is None or not r.test.rows]
        single = len([r for r in readings if r.test.rows]) == 1
        found = []
        for r in readings:
            if not r.test.rows:
                self.pending_failures.extend(r.test.problems_of("failure"))  # failed before its table
                continue
            found.append(r.test)
            self._name(r.test, single)
        left_out = list(self.unattached.values()) + [damaged_table(r) for r in skipped[:1]]
        for r in skipped[1:]:
            left_out[-1].add_lines(damaged_table(r))
        if not found and skipped:
            raise UsageError(f"{self.source}: nothing to import: {left_out[-1].summary()}")
        if found:
            found[0].problems.extend(left_out)
        refused = [p for r in readings for p in r.test.problems_of("refused")]
        if not found and refused:
            count = sum(p.count for p in refused)
            raise UsageError(f"{self.source}: no table row could be read: {count} line(s) left out, "
                             f"{refused[0].reason} ({refused[0].example})")
        if not found and self.pending_failures:
            raise UsageError(f"{self.source}: no nccl-tests results before the run failed "
                             f"({self.pending_failures[0].example})")
        return found

    def _name(self, t: NcclTest, single: bool) -> None:
        """A run's NCCL version, collective and rank count where its own lines did not say them."""
        if t.nccl_version is None and self.nccl_version:
            t.nccl_version, t.cuda_version = self.nccl_version
        named = collective_from_filename(self.source)
        if t.collective is None:
            collective_of_unnamed(t, named, self.source)
        elif single and named is not None and named != t.collective:
            t.problems.append(Problem(
                "collective", f"the file name {Path(self.source).name!r} says {named}, the log itself "
                f"{t.collective}: imported as {t.collective}"))
        if not t.ranks and not t.config:
            t.ranks_inferred = ranks_of(t)
            if t.ranks_inferred is None:
                t.problems.append(Problem(
                    "unjudged", "the log has no rank lines and its table does not say how many ranks ran: "
                    "imported as one rank, so nothing in it is judged against the fabric"))
        if t.collective is None:
            t.problems.append(Problem(
                "unjudged", "the log names no collective and its table fits none nccl-tests runs: "
                "imported as 'unknown', its bandwidth judged against nothing"))
