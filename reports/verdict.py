"""The verdict: findings in, the status, the exit code and the nodes to drain out, for every command
and every output (terminal, JSON, report.html, preflight's stdout, Slurm's drain, Kubernetes' labels
and taints). docs/exit-status.md is this module's table; tests/test_verdict.py reads it back.

Two decisions live here and nowhere else:

- **the drain rule** (``drain_and_check``): a node is drained for a ``fail`` finding about the node
  itself (a slow node, a lost host, wrong results), or for a failing ``component`` (a NIC firmware, a
  driver, a library version) that fewer than half of the hosts share: those hosts are the odd ones out, a
  majority on it is a fleet-wide fix, not a drain. A failing switch and a slow or failing link go to
  ``check``: a switch fault must never drain the healthy hosts behind it, and a link is a cable or a
  port, not either node. Fleet-wide and run-level failures drain nobody (exit 2 with an empty drain).
  A host the run could not test (``UNTESTED_RULES``: its own set-up, a port it refuses, no usable
  measurement) is named ("Could not test ..."), never drained, and its pairs are no links to check.
- **the exit status** (``exit_code``): one table, command x situation, the verdicts' codes and the
  others (bad input, could not run, a stop by a signal), with ``--fail-on`` moving the verdicts' bar;
  ``error_situation`` is the one map from an exception to its situation, ``run_situation`` the one
  reading of a run that measured (its stop, its counts, its findings).

The verdict's words (``headline``) are here too, so the terminal, the JSON and report.html's banner
say the same sentence. This module reads findings only: it sits at the bottom of ``reports`` and
imports nothing above ``netbench.common``.
"""

from __future__ import annotations

import errno
import signal
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from netbench.common.findings import SEVERITIES, Finding

# -- the situations a command ends in ------------------------------------------------------------------
PASS, WARN, FAIL, ERROR = "pass", "warn", "fail", "error"
STATUSES = (PASS, WARN, FAIL, ERROR)
"""A verdict's status: the worst severity of the findings, or ``error`` when nothing could be judged."""
BAD_INPUT = "bad-input"
"""A bad option, hosts file, policy or environment, found before anything was measured."""
NAMED_ERROR = "named-error"
"""The command stopped on an error it names in one line (an SSH failure, a store it cannot reach)."""
INTERNAL_ERROR = "internal-error"
"""A bug: one ``netbench: internal error`` line (the traceback only with --debug)."""
DISK_FULL = "disk-full"
"""The run directory could not be written (ENOSPC, EDQUOT): stopped, what was measured kept."""
STOPS = ("SIGINT", "SIGTERM", "SIGHUP")
"""Stopped by a signal: 128 + its number, as a shell reports it."""
SITUATIONS = (*STATUSES, BAD_INPUT, NAMED_ERROR, INTERNAL_ERROR, DISK_FULL, *STOPS)

FAIL_ON = ("fail", "warn", "never")
"""``--fail-on``: which verdict fails the command (exit 2). ``fail``: failures (warnings exit 1);
``warn``: warnings too; ``never``: no verdict does (exit 0), for a job that only collects data. Only
the verdicts move: no verdict, bad input and the stops keep their status."""

JUDGING = ("sweep", "worker", "simulate", "report", "import")
"""The commands that measure or judge a run: one column of the table, the same on every site."""
COMMANDS = (*JUDGING, "preflight", "compare", "inventory", "baseline", "export")

_JUDGING = {PASS: 0, WARN: 1, FAIL: 2, ERROR: 3, BAD_INPUT: 2, NAMED_ERROR: 1, INTERNAL_ERROR: 1,
            DISK_FULL: 3}
# preflight, for scheduler scripts: 2 is only ever "the checks ran and nodes failed", so whatever kept
# the checks from running, a typo or a bug included, is 3 and never reads as "drain nothing"
_PREFLIGHT = {**_JUDGING, BAD_INPUT: 3, NAMED_ERROR: 3, INTERNAL_ERROR: 3}
_PLAIN = {PASS: 0, BAD_INPUT: 2, NAMED_ERROR: 1, INTERNAL_ERROR: 1, DISK_FULL: 3}
# inventory: a host it could not inventory is its warning (1)
_WARNING = {**_PLAIN, WARN: 1}
# compare: a regression is a failure (2, as every failure of the tool); a side that ended early
# (sizes it never measured are missing from the comparison) is its warning (1)
_COMPARE = {**_WARNING, FAIL: 2}
TABLE: dict[str, dict[str, int]] = {
    **dict.fromkeys(JUDGING, _JUDGING),
    "preflight": _PREFLIGHT,
    "compare": _COMPARE,
    "inventory": _WARNING,
    **dict.fromkeys(("baseline", "export"), _PLAIN),
}
"""command -> situation -> exit status (at ``--fail-on fail``; signals: ``exit_code``)."""


def exit_code(command: str, situation: str, fail_on: str = "fail") -> int:
    """THE exit status of ``command`` ending in ``situation`` (docs/exit-status.md). ``fail_on``
    moves the bar of the verdicts (pass, warn, fail) only; a situation the command cannot end in
    is a ValueError (a caller's bug, never a silent 0)."""
    if fail_on not in FAIL_ON:
        raise ValueError(f"--fail-on must be one of {FAIL_ON}, got {fail_on!r}")
    if situation in STOPS:
        return 128 + int(getattr(signal, situation))
    codes = TABLE.get(command)
    if codes is None:
        raise ValueError(f"no exit status table for netbench {command!r}")
    if situation not in codes:
        raise ValueError(f"netbench {command} does not end in {situation!r}")
    if situation in (PASS, WARN, FAIL) and command in (*JUDGING, "preflight"):
        if fail_on == "never":
            return 0
        if fail_on == "warn" and situation == WARN:
            return codes[FAIL]
    return codes[situation]


def error_situation(exc: BaseException) -> str:
    """The situation an exception ends a command in: the one map from errors to exit statuses
    (``cli.py``'s; the command line's own parser errors are ``BAD_INPUT`` there)."""
    from netbench.common.errors import NetbenchError, UsageError
    from netbench.common.interrupts import DiskFull, Interrupted

    if isinstance(exc, DiskFull):
        return DISK_FULL
    if isinstance(exc, Interrupted):
        return exc.signal or "SIGINT"
    if isinstance(exc, KeyboardInterrupt):
        return "SIGINT"
    if isinstance(exc, UsageError):
        return BAD_INPUT
    if isinstance(exc, NetbenchError):  # a code the raiser chose: 2 bad input, 3 could not run
        return {2: BAD_INPUT, 3: ERROR}.get(exc.exit_code, NAMED_ERROR)
    if refused(exc):
        assert isinstance(exc, OSError)
        return _REFUSALS[exc.errno]  # type: ignore[index]
    return INTERNAL_ERROR


_REFUSALS = {
    # no room: what it wrote is kept, what it could not is said (as a run directory that fills up)
    **dict.fromkeys((errno.ENOSPC, errno.EDQUOT), DISK_FULL),
    # a path that cannot name a file: too long, through a file, a directory where a file belongs,
    # a loop of links, a file where a folder belongs: the command line's or the environment's
    **dict.fromkeys((errno.ENAMETOOLONG, errno.ENOTDIR, errno.EISDIR, errno.ELOOP, errno.EEXIST), BAD_INPUT),
    # the OS said no to a path that is fine: permissions, a read-only file system, a file too large
    # for its limit, a pipe whose reader left (stdout's own is no error: ``netbench.commands._streams``)
    **dict.fromkeys((errno.EACCES, errno.EPERM, errno.EROFS, errno.EFBIG, errno.EPIPE), NAMED_ERROR),
}
"""The OS's refusals of a file: one ``netbench: error: PATH: what the OS said`` line at the CLI
(``cli.refusal_line``), never ``internal error``; any other OSError is a bug there."""


def refused(exc: BaseException) -> bool:
    """Whether ``exc`` is the OS refusing a file (``_REFUSALS``), not a bug."""
    return isinstance(exc, OSError) and exc.errno in _REFUSALS


# -- the verdict of findings ---------------------------------------------------------------------------
UNTESTED_RULES = ("host_cannot_run", "host_refuses", "node_unreachable", "pairs_not_judged")
"""The findings of a host or pair the run could not test (its own set-up, a port it refuses, a name
that does not resolve, hosts and pairs the analysis had no usable measurement of): named in every
output's headline, never drained (each is a warning by default: never a PASS about them)."""


@dataclass(frozen=True)
class Verdict:
    """What a set of findings says, for every output alike."""

    status: str
    """pass | warn | fail (the worst severity; info never fails) | error (nothing could be judged)."""
    code: int
    """The exit status of the command that judged (``exit_code``), ``--fail-on`` applied."""
    drain: tuple[str, ...] = ()
    """Hosts to take out of the scheduler, sorted (``drain_and_check``)."""
    check: tuple[str, ...] = ()
    """Links (``a|b``) and switches to inspect, sorted; never drained."""
    counts: Mapping[str, int] = field(default_factory=lambda: dict.fromkeys(SEVERITIES, 0))
    """Findings per severity, every severity present."""
    failing: tuple[str, ...] = ()
    """The links and switches of ``check`` that a ``fail`` finding names: every output lists them
    all, ahead of the warnings (a failing uplink is never cut for a slow link's warning)."""
    untested: tuple[str, ...] = ()
    """Hosts the run could not test or judge (``UNTESTED_RULES``' findings; "N pairs" where no host
    is named), sorted."""

    @property
    def word(self) -> str:
        """PASS / WARN / FAIL / ERROR, as the terminal and report.html's banner say it."""
        return self.status.upper()


def judge(
    findings: Iterable[Finding],
    n_hosts: int,
    *,
    could_run: bool = True,
    fail_on: str = "fail",
    command: str = "report",
) -> Verdict:
    """THE verdict of ``findings`` over a fleet of ``n_hosts`` (the drain rule needs the fleet's
    size); ``could_run`` False: the checks could not run (status ``error``, exit 3, nothing drained)."""
    items = list(findings)
    counts = dict.fromkeys(SEVERITIES, 0)
    for f in items:
        counts[f.severity] += 1
    if not could_run:
        return Verdict(ERROR, exit_code(command, ERROR, fail_on), counts=counts)
    status = status_of(items)
    drain, check = drain_and_check(items, n_hosts)
    # a pair of a host that refuses connections is that host's fault: not a link to check
    refusing = {f.subject for f in items if f.rule == "host_refuses"}
    check = [s for s in check if not ("|" in s and refusing & set(s.split("|")))]
    failing = {f.subject for f in items if f.severity == "fail" and f.subject_kind in ("pair", "switch")}
    untested = sorted({h for f in items if f.rule in UNTESTED_RULES for h in f.hosts or [f.subject]})
    return Verdict(status, exit_code(command, status, fail_on), tuple(drain), tuple(check), counts,
                   tuple(s for s in check if s in failing), tuple(untested))


def status_of(findings: Iterable[Finding]) -> str:
    """pass | warn | fail: the worst severity among ``findings`` (info never fails)."""
    sevs = {f.severity for f in findings}
    return FAIL if "fail" in sevs else WARN if "warn" in sevs else PASS


def drain_and_check(findings: Sequence[Any], n_hosts: int) -> tuple[list[str], list[str]]:
    """THE drain rule (module docstring): (nodes to drain, links and switches to check), sorted."""
    drain: dict[str, None] = {}
    check: dict[str, None] = {}
    for f in findings:
        if f.subject_kind == "pair" and f.severity in ("warn", "fail"):
            check.setdefault(f.subject, None)
        if f.severity != "fail":
            continue
        if f.subject_kind == "node" or (f.subject_kind == "component" and 0 < 2 * len(f.hosts) < n_hosts):
            for h in f.hosts or [f.subject]:
                drain.setdefault(h, None)
        elif f.subject_kind == "switch":
            check.setdefault(f.subject, None)
    return sorted(drain), sorted(check)


def drain_reasons(findings: Sequence[Any], drain: Sequence[str]) -> dict[str, str]:
    """Each node to drain -> ``rule: title`` of the first (worst) failing finding that names it, for
    Slurm's drain reason and Kubernetes' taint alike."""
    reasons: dict[str, str] = {}
    wanted = set(drain)
    for f in findings:
        if f.severity != "fail":
            continue
        for h in f.hosts or [f.subject]:  # the hosts the drain rule reads
            if h in wanted:
                reasons.setdefault(h, f"{f.rule}: {f.title}")
    return {h: reasons.get(h, "failed") for h in drain}


# -- the verdict in words ------------------------------------------------------------------------------
def headline(verdict: Verdict, with_verdict: bool = True) -> str:
    """One sentence: the verdict and what to do first (its drain and check lists)."""
    c = verdict.counts
    parts = [
        f"{c['fail']} failure{'s' * (c['fail'] != 1)}",
        f"{c['warn']} warning{'s' * (c['warn'] != 1)}",
        f"{c['info']} info",
    ]
    text = f"{verdict.word}: {', '.join(parts)}" if with_verdict else ", ".join(parts).capitalize()
    if verdict.drain:  # every node to drain is a failure: all of them, however many
        text += f". Drain {_few(list(verdict.drain), len(verdict.drain))}"
    if verdict.check:
        text += f". Check {check_words(verdict)}"
    if verdict.untested:
        text += f". Could not test {_few(list(verdict.untested))}"
    return text + "."


def check_words(verdict: Verdict, n: int = 6) -> str:
    """The links and switches to check: every failing one first, then warnings up to ``n`` in all
    ("and N more"); "links a-b, c-d" when all are links."""
    first = list(verdict.failing)
    rest = [s for s in verdict.check if s not in verdict.failing]
    shown = _few([s.replace("|", "-") for s in first + rest], max(n, len(first)))
    if all("|" in s for s in verdict.check):
        return f"link{'s' * (len(verdict.check) > 1)} {shown}"
    return shown  # a switch among them


def _few(items: list[str], n: int = 6) -> str:
    return ", ".join(items[:n]) + (f" and {len(items) - n} more" if len(items) > n else "")


def retests(findings: list[Finding]) -> dict[str, str]:
    """Subject -> re-test verdict, from the findings that carry one (every re-tested node and link
    has one), so the summary says what the report says, whatever the cut of ``top``."""
    out: dict[str, str] = {}
    for f in findings:
        rt = (f.evidence or {}).get("retest")
        if isinstance(rt, dict) and isinstance(rt.get("verdict"), str) and rt["verdict"] != "not_run":
            out.setdefault(f.subject, rt["verdict"])
    return out


# -- the verdict of a run that measured ----------------------------------------------------------------
@dataclass(frozen=True)
class RunFacts:
    """What the application read of a run that measured (``netbench.run.execute.exit_status``), the
    findings aside."""

    stopped: str | None = None
    """A situation of ``STOPS`` or ``DISK_FULL`` when the run was stopped, else None."""
    bad_input: bool = False
    """A host's torch cannot do what the run needs (a capability fault): its environment, bad input."""
    rows: int = 0
    """Rows that came back, failed ones included."""
    counted_failure: bool = False
    """A fault, a lost host, a failed or wrong row, or a run that did not complete: at least ``fail``."""
    judged: bool = True
    """False with --no-report: no findings, the counts alone decide (pass or fail)."""


def run_situation(facts: RunFacts, findings: Sequence[Finding] | None) -> str:
    """The situation of a run that measured: a stop, bad input, no verdict (not a row came back, or
    the report could not be made: ``findings`` None), else the worse of what the coordinator counted
    and the findings' status."""
    if facts.stopped:
        return facts.stopped
    if facts.bad_input:
        return BAD_INPUT
    if not facts.rows or (facts.judged and findings is None):
        return ERROR
    counted = FAIL if facts.counted_failure else PASS
    if not facts.judged:
        return counted
    return max(counted, status_of(findings or []), key=(PASS, WARN, FAIL).index)
