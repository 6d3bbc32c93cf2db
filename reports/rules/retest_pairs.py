"""Pairs most worth re-testing: where a run has no re-test evidence for them, the few pairs a sweep with
a re-test budget would have re-run as candidates, listed as info with the command that measures them
again (issue 46).

Which: the fleet's worst pairs that no bar flagged (``LinkTests.worst_unflagged``, the same pick as the
sweep's ``netbench.confirm.candidate_links``): practically slow (``slow_pair_factor`` of their
prediction or below) and ``mad_k`` of their hop class's sigmas below, most unlikely under the learned
noise first; then, while fewer than RETEST_PAIRS, those beyond the noise that read near slow (NEAR
of their prediction or below, ``LinkTests.near_unflagged``, the sweep's near candidates): a link at
0.75 that noise lifted to 0.82 in its one sample is one. Left out: pairs with an end slow or
intermittent, through a slow uplink (those are the node's or the switch's) or re-tested already.

Why: one sample of a pair cannot tell a link at 0.7 from the healthy pairs heavy-tailed noise puts as
low (Student-t with 3 degrees of freedom: a dozen of 32,640), and a second and third can, since
noise does not repeat and a link does. A report on an old run, an
import, a preflight or a sweep whose re-test budget ran out would otherwise leave the reader nothing
to do with the pairs nearest a finding. Pairs flagged slow have their own ``slow_pair`` finding.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np
from netbench.reports.rule_ids import ids
from netbench.reports.rules.base import Rule, size_label
from netbench.reports.stats import g3, sig3

from netbench.common.findings import Finding

if TYPE_CHECKING:
    from netbench.reports.context import AnalysisContext

RETEST_PAIRS = 8
"""Pairs listed at most: a sweep of their hosts (16 at most) re-measures them within minutes."""
NEAR = 0.9
"""A near candidate's reading at most: ``netbench.confirm.CANDIDATE_NEAR``'s (reports/ does not import
the application)."""
HOSTS_FILE = "retest-hosts.txt"
_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")
"""A host name the command may carry: a run directory is untrusted, and a name with shell characters
in a command to copy would run them."""


def check(ctx: AnalysisContext) -> list[Finding]:
    picks = worth_retesting(ctx)
    if not picks:
        return []
    m = ctx.pair_model
    assert m is not None  # worth_retesting found pairs in it
    size = m.sizes[-1]
    pairs = [(m.hosts[i], m.hosts[j], float(m.resid[i, j])) for i, j in picks]
    hosts = sorted({h for a, b, _ in pairs for h in (a, b)})
    sweep = f"netbench sweep --hosts {HOSTS_FILE} --pattern pairwise --pair-sizes {size_label(size)}"
    plain = all(_PLAIN.fullmatch(h) for h in hosts)
    command = f"printf '%s\\n' {' '.join(hosts)} > {HOSTS_FILE} && {sweep}" if plain else None
    listed = ", ".join(f"{a} - {b} ({g3(float(np.exp(r)))}x)" for a, b, r in pairs)
    return [Finding(
        rule="retest_pairs",
        severity="info",
        subject_kind="run",  # several pairs: a "pair" subject is one "a|b" to the heatmap and exports
        subject="fleet",
        title=(f"{len(pairs)} pair{'s' if len(pairs) > 1 else ''} most worth re-testing, slow or near "
               f"slow in {'their' if len(pairs) > 1 else 'its'} one sample but short of every bar: {listed}"),
        evidence={
            "pairs": [f"{a}|{b}" for a, b, _ in pairs],
            "ratio_to_expected": [sig3(float(np.exp(r))) for _, _, r in pairs],
            "size_bytes": size,
            "command": command,
            "why": "the sweep's re-test candidates (the worst pairs no bar flagged); this run has no "
                   "re-test evidence for them",
        },
        action=(f"Measure them again: {command or sweep + f' with {HOSTS_FILE} listing their hosts'} "
                f"(every pair of their {len(hosts)} hosts, at {size_label(size)}; keep each host's labels "
                "from your hosts file), or re-run the sweep with --confirm-budget, which re-runs such "
                "pairs against controls. A link slow again is a cable or port to check; noise does "
                "not repeat."),
        hosts=hosts,
    )]


def worth_retesting(ctx: AnalysisContext) -> list[tuple[int, int]]:
    """The pair model's (i, j) of the pairs most worth re-testing, worst first (at most RETEST_PAIRS)."""
    from netbench.reports.analyses import link_tests

    m = ctx.pair_model
    if m is None:
        return []
    nodes = ctx.analyses.nodes
    retests = ctx.analyses.retests
    done = {rt.subject for rt in retests.results.values() if rt.kind == "link" and rt.verdict != "not_run"
            } if retests else set()  # re-run: its own finding says what the re-run found
    skip = {v.host for v in nodes.slow} | (set(retests.confirmed_nodes) if retests else set())
    t = ctx.policy.thresholds
    tests = link_tests(m, t)
    out: list[tuple[int, int]] = []
    for i, j in tests.worst_unflagged(4 * RETEST_PAIRS) + tests.near_unflagged(m, t, NEAR, 4 * RETEST_PAIRS):
        a, b = sorted((m.hosts[i], m.hosts[j]))
        if {f"{a}|{b}", f"{b}|{a}"} & done or {a, b} & skip or nodes.uplink_of(a, b) is not None:
            continue
        out.append((i, j))
        if len(out) == RETEST_PAIRS:
            break
    return out


RULE = Rule(name="retest_pairs", ids=ids("retest_pairs"), check=check, doc=__doc__ or "")
