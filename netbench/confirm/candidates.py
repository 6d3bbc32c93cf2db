"""Who is re-tested: the suspects an analysis flags and the links beside them.

- ``find_suspects``: the nodes and links the analysis flags (warn/fail, and the "suspect: re-test"
  info band), not re-tested yet; a node shared by several slow links, or at one end of a link its
  re-run confirmed, is a suspect node (``slow_partners``): a node slow now and then shows as slow
  links that share it, and only a re-test against known-good partners says which end it is;
- ``candidate_links``: beside them, the fleet's worst pairs that no bar flagged (every practically
  slow one, up to 4 a node), re-run three times or as often as ``candidate_runs`` says and kept when
  slow in all but one: under heavy-tailed noise one sample cannot tell a slow link from the healthy
  pairs noise puts as low; then, in half of what the budget leaves, pairs that read near slow (0.9
  or below), kept when slow in every re-run; a node at an end of more of them than chance is a
  suspect node (``shared_ends``);
- after a launch: the links held back while an end was a suspect node (``held_back``), and the
  nodes re-tested once more (``split_inconclusive``, ``slow_link_ends``);
- ``Suspects``: all of it for one launch, with what its plan and its verdicts need; ``unusable_hosts``
  are neither re-tested nor partnered, ``pairs_in`` what a launch measured.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from netbench.confirm.records import Pair
from netbench.reports.analyses import Retest, link_tests, rerun_share
from netbench.reports.pairrows import MetPairs, PairRows
from netbench.reports.stats import binomial_sf

if TYPE_CHECKING:
    from netbench.agents.coordinator import Outcome
    from netbench.common.findings import Finding
    from netbench.reports.context import AnalysisContext

CANDIDATE_LINKS = 32
CANDIDATE_PER_NODE = 4
"""Pairs re-run beside the suspects as the fleet's worst that no bar flagged (``candidate_links``):
every practically slow one, up to this many per node (``CANDIDATE_LINKS`` at least). At 256 nodes
under Student-t noise (3 degrees of freedom) about a dozen healthy pairs sit as low as a link at 0.7
(one sample each), under 1% congestion bursts of 1.1-1.5x about a hundred; at 1,024 nodes under
those bursts 3,191 pairs were practically slow and a link read at 0.73 ranked 1,684th among them
(bench_diagnosis: one candidate for every two nodes found it in 0 of 2 fabrics, one a node in 0
of 4). The phases run worst first as far as the re-test budget goes (``rerun_order``)."""
CANDIDATE_SHARED_ALPHA = 0.05
"""A node at an end of more of the fleet's worst candidate links than chance puts there (the j-th at
position k: Binomial(k, 2/N) >= j, Bonferroni over the nodes and j) is a suspect node, not their
links: a NIC slow in a third of the rounds behind a 2:1 uplink shows in its leaf's pairs only, 2-5
pairs at 0.5 among 15, which heavy-tailed noise keeps below the intermittency test's bar (issue 25's
grid missed 2-3 such nodes in 10 fabrics), and which are the fleet's very worst pairs."""
CANDIDATE_RUNS = 3
"""Re-runs of a candidate link at least, each in its own phase: confirmed when slow in all but one
(a healthy pair reads 0.8 or less in 0.1-0.6% of samples under t3 or 1% congestion bursts, in two of
three runs with p ~ 3e-6 to 1e-4; the link at 0.7 in 96% of runs under t3, so in two of three 99.5%
of the time, where "slow in both of two" missed one link in four at 1,024 nodes: re-run at 0.74x,
then 0.80x). ``candidate_runs`` adds more where the fleet is noisier."""
CANDIDATE_RUNS_MAX = 5
CANDIDATE_FALSE = 0.002
"""Healthy pairs a fabric's candidates may confirm by chance, in expectation (``candidate_runs``),
the worst and the near ones each. At 0.01 one fabric in a hundred carries a false link: 256-node
fabrics under Student-t noise gave one in about eighty (a pair re-run at 0.97x, 0.79x, 0.80x)."""
CANDIDATE_NEAR = 0.9
CANDIDATE_NEAR_RUNS = 2
"""Pairs beyond the noise that read at 0.9 of their prediction or below, not practically slow (the
half of the slow-link test they miss), fill the candidates the worst left (``Candidates.near``),
re-run this often at least, after the worst and while the budget lasts, and kept when slow every
time. At 256 nodes under Student-t noise one link at 0.7 in thirty read 0.84 in its one sample,
ranked 119th of 32,640 pairs, and was never a candidate. A healthy pair is slow in both of two
re-runs with p ~ 4e-5 (the re-run share squared under t3 or congestion bursts), in all of three with
p ~ 2e-7; the link at 0.7 in about 92% and 88%."""
HELD_BACK_ALPHA = 0.05
"""A node re-tested inconclusive whose slow pairs are at least this likely from the noise alone (at
the fleet's share of residual differences that slow, ``rerun_share``) gives back the candidate links
held back for it (``held_back``); one less likely is re-tested once more (``split_inconclusive``)."""


def find_suspects(
    findings: list[Finding],
    exclude: set[str],
    done: set[str],
    retests: Mapping[str, Retest] | None = None,
) -> tuple[list[str], list[Pair]]:
    """Nodes flagged slow (or not cleared) and links flagged slow that were not re-tested yet (``done``:
    subjects).
    A node of ``slow_partners`` (several slow links share it, or a link's re-run confirmed it slow)
    is a suspect node, and its links are not re-run: re-testing it against known-good partners says
    whether it is the node or the link. A link with an end re-tested and confirmed slow is that
    node's doing: not a suspect."""
    partners = slow_partners(findings, retests or {})
    slow_nodes = {rt.subject for rt in (retests or {}).values()
                  if rt.kind == "node" and rt.verdict == "confirmed"}
    from_links = {h for h, ps in partners.items() if len(ps) >= 2}
    from_links |= {h for rt in (retests or {}).values() if rt.kind == "link" and rt.verdict == "confirmed"
                   for h in rt.subject.split("|")}
    flagged = {f.subject for f in findings if f.rule == "slow_node"}
    # a node that read far below its peers where the noise hid it from every bar (``not_cleared``):
    # a re-test against controls is what can decide it
    flagged |= {h for f in findings if f.rule == "not_cleared" for h in f.hosts}
    nodes = sorted((flagged | from_links) - exclude - done)
    links = sorted(
        {
            tuple(sorted(f.hosts))
            for f in findings
            if f.rule == "slow_pair"
            and len(f.hosts) == 2
            and not set(f.hosts) & (exclude | set(nodes) | slow_nodes)
            and "|".join(sorted(f.hosts)) not in done
        }
    )
    return nodes, links  # type: ignore[return-value]


def slow_partners(findings: list[Finding], retests: Mapping[str, Retest]) -> dict[str, set[str]]:
    """Per node, its partners in the links flagged slow (any severity: the suspect band too) or
    confirmed slow on re-run, less those a re-run cleared: the evidence that a node is slow now and
    then, which ``judge`` adds to its re-test."""
    cleared = {k for k, rt in retests.items() if rt.kind == "link" and rt.verdict == "cleared"}
    links = {
        "|".join(sorted(f.hosts)) for f in findings if f.rule == "slow_pair" and len(f.hosts) == 2
    } | {k for k, rt in retests.items() if rt.kind == "link" and rt.verdict == "confirmed"}
    out: dict[str, set[str]] = defaultdict(set)
    for key in links - cleared:
        a, b = key.split("|", 1)
        out[a].add(b)
        out[b].add(a)
    return dict(out)


def suspect_classes(findings: list[Finding]) -> dict[str, str]:
    """The hop class each suspect node was found slow in (its finding's evidence), so its re-test
    partners are of that class: a node slow with its own leaf is re-tested within its leaf."""
    out: dict[str, str] = {}
    for f in findings:
        klass = (f.evidence or {}).get("hop_class") if f.rule == "slow_node" else None
        if isinstance(klass, str):
            out.setdefault(f.subject, klass)
    return out


def unusable_hosts(outcome: Outcome, rows: PairRows) -> set[str]:
    """Hosts not to re-test nor to re-test against: those the launch lost (a fault of theirs: they
    died, hung, never started or broke the protocol), and both ends of a pair that failed with no
    lost host in it and no host named in its error. A pair with a dead or hung host fails for that
    host (its error names it): its partner is fine, and after a sweep that partner is every other
    host."""
    dead = {f.host for f in outcome.faults if f.host}
    flaky = {
        h
        for i, failure in rows.failed.items()
        for pair in [(rows.names[rows.a[i]], rows.names[rows.b[i]])]
        if not dead & set(pair) and not failure.blame
        for h in pair
    }
    return dead | flaky


def pairs_in(rows: PairRows, rounds: list[int]) -> set[Pair]:
    """The pairs measured in rounds ``rounds[0]..rounds[1]`` (a pair without a round as round 0)."""
    rnd = np.maximum(rows.round, 0)
    return set(rows.pairs((rnd >= rounds[0]) & (rnd <= rounds[1])))


@dataclass(frozen=True)
class Candidates:
    """The fleet's worst pairs no bar flagged (``candidate_links``) and how often each is re-run."""

    links: list[Pair]
    runs: int  # each candidate's re-runs (``candidate_runs``); 0 with none
    near: list[Pair] = field(default_factory=list)
    """Pairs beyond the noise that read near slow but not practically slow in their one sample
    (``LinkTests.near_unflagged``), worst first: re-run ``near_runs`` times where the budget leaves
    room, kept when slow in each."""
    near_runs: int = 0

    def spares(self) -> dict[Pair, int]:
        """Each candidate with the re-runs ``judge`` lets it read not slow: one sample of its may be
        noise, the sweep's included. The worst were slow in the sweep, so one re-run may not be; the
        near ones were not, so every re-run must be."""
        return {p: 1 for p in self.links} | {p: 0 for p in self.near}


def candidate_links(ctx: AnalysisContext, taken: set[str], done: set[str]) -> Candidates:
    """The fleet's worst pairs that no bar flagged (``LinkTests.worst_unflagged``), every one that is
    practically slow up to ``CANDIDATE_PER_NODE`` per node (``CANDIDATE_LINKS`` at least), to be
    re-run where a re-test follows, worst first, as far as the budget goes: one sample cannot tell a
    slow link from the healthy pairs heavy-tailed noise puts as low, a re-run can. Left out: pairs
    with an end in ``taken`` (suspect, excluded), an end the analysis found slow or intermittent,
    pairs through a slow uplink (those are the node's or the switch's), and those re-tested already
    (``done``). Each is re-run ``candidate_runs`` times for the fleet's own share of slow samples."""
    m = ctx.pair_model
    if m is None:
        return Candidates([], 0)
    nodes = ctx.analyses.nodes
    slow = {v.host for v in nodes.slow}
    limit = max(CANDIDATE_LINKS, CANDIDATE_PER_NODE * len(m.hosts))
    tests = link_tests(m, ctx.policy.thresholds)

    def usable(found: list[tuple[int, int]], room: int) -> list[Pair]:
        out: list[Pair] = []
        for i, j in found:
            a, b = sorted((m.hosts[i], m.hosts[j]))
            if (
                {a, b} & (taken | slow)
                or f"{a}|{b}" in done
                or nodes.uplink_of(a, b) is not None
                or nodes.intermittent(a)
                or nodes.intermittent(b)
            ):
                continue
            out.append((a, b))
            if len(out) == room:
                break
        return out

    worst = usable(tests.worst_unflagged(4 * limit), limit)
    share = max(tests.slow_share(), rerun_share(m, ctx.policy.thresholds))
    room = limit - len(worst)
    near_ones = tests.near_unflagged(m, ctx.policy.thresholds, CANDIDATE_NEAR, 4 * room) if room else []
    near = usable(near_ones, room)
    return Candidates(worst, candidate_runs(len(worst), share), near,
                      candidate_runs(len(near), share, spare=0) if near else 0)


def candidate_runs(n: int, share: float, spare: int = 1) -> int:
    """Re-runs for each of ``n`` candidate links, confirmed when slow in all but ``spare`` of them
    (``judge``): the fewest, from ``CANDIDATE_RUNS`` (``CANDIDATE_NEAR_RUNS`` with no spare), at
    which the candidates a healthy pair slow in ``share`` of its samples (the fleet's own,
    ``LinkTests.slow_share``, or as a re-run against its control reads slow, ``rerun_share``, the
    larger) would confirm by chance stay within ``CANDIDATE_FALSE`` a fabric, at most
    ``CANDIDATE_RUNS_MAX``. Under 1% congestion bursts at 1,024 nodes (share ~0.7%, ~3,200
    candidates) five re-runs; under Student-t noise (0.55%, ~840) four; at 256 nodes (~55) four."""
    least = CANDIDATE_RUNS if spare else CANDIDATE_NEAR_RUNS
    if share <= 0.0 or share >= 1.0:
        return least if share <= 0.0 else CANDIDATE_RUNS_MAX
    runs = least
    while runs < CANDIDATE_RUNS_MAX and n * binomial_sf(runs - spare, runs, share) > CANDIDATE_FALSE:
        runs += 1
    return runs


def held_back(
    ctx: AnalysisContext, taken: set[str], retests: Mapping[str, Retest], explained: set[str]
) -> Candidates:
    """The fleet's worst links (``candidate_links``) a first launch held back because an end was a
    suspect node, now that the node's re-test cleared it or found it slow with no more pairs than
    the noise gives (``explained``, ``split_inconclusive``), with the re-runs the whole worst set
    gets: a link at 0.7 whose end was also at the end of another of the fleet's worst pairs by
    chance looked like a node slow now and then (``shared_ends``), its re-test was slow with 1 of 24
    pairs, inconclusive, and the link was never re-run (a 256-node fabric with a fault of every
    class, Student-t noise with 4 degrees of freedom). A node slow now and then (3 of 24) keeps its
    links: they are its slow rounds."""
    cleared = {rt.subject for rt in retests.values() if rt.kind == "node" and rt.verdict == "cleared"}
    unconfirmed = cleared | explained
    if not unconfirmed:
        return Candidates([], 0)
    found = candidate_links(ctx, taken, set(retests))
    links = [lk for lk in found.links if set(lk) & unconfirmed]
    return Candidates(links, found.runs if links else 0)


def split_inconclusive(ctx: AnalysisContext, retests: Mapping[str, Retest]) -> tuple[set[str], set[str]]:
    """The nodes re-tested inconclusive, split by whether the noise explains their slow re-test
    pairs (binomial at ``rerun_share`` with slow_node_factor, above ``HELD_BACK_ALPHA``): those
    whose links' re-runs decide it (``held_back``), and those slow more often than the noise gives,
    slow now and then perhaps, re-tested once more (``Suspects.again``). A node slow in 30% of its
    rounds was slow in 3 of its 24 first re-test pairs; a link's end at 0.7, in 1 of 24."""
    t = ctx.policy.thresholds
    share = rerun_share(ctx.pair_model, t, t.slow_node_factor) if ctx.pair_model is not None else 0.0
    noise: set[str] = set()
    more: set[str] = set()
    for rt in retests.values():
        if rt.kind == "node" and rt.verdict == "inconclusive" and rt.slow_runs is not None:
            slow, runs = rt.slow_runs
            (noise if binomial_sf(slow, runs, share) > HELD_BACK_ALPHA else more).add(rt.subject)
    return noise, more


def slow_link_ends(ctx: AnalysisContext, retests: Mapping[str, Retest]) -> dict[str, str]:
    """The nodes (and what they showed) at the ends of re-run links that were cleared, slow in
    re-runs of two of them or more (one link's slow re-runs are as much the link's as either end's),
    whose re-runs together were slow more often than the noise gives (binomial at ``rerun_share``, at least
    one in the fleet's pairs; family-wise over the nodes at such ends, ``CANDIDATE_SHARED_ALPHA``):
    a node slow now and then, seen through its links. A node slow in 30% of its rounds (1,024 nodes,
    2:1 uplinks, Student-t noise with 3 degrees of freedom, seed 9) was at the ends of 4 of the
    fleet's 872 worst pairs, its same-leaf ones (behind the uplinks its other pairs read as every
    pair does), no more than chance puts at a node (``shared_ends``); each link was slow in one or
    two of its 4 re-runs and cleared, and the node was never re-tested."""
    m = ctx.pair_model
    if m is None:
        return {}
    pairs = int(np.triu(np.isfinite(m.resid), 1).sum())
    share = max(rerun_share(m, ctx.policy.thresholds), 1.0 / max(pairs, 1))
    tally: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # slow re-runs, re-runs, links slow
    for rt in retests.values():
        if rt.kind == "link" and rt.verdict == "cleared" and rt.slow_runs is not None:
            for h in rt.subject.split("|"):
                tally[h][0] += rt.slow_runs[0]
                tally[h][1] += rt.slow_runs[1]
                tally[h][2] += rt.slow_runs[0] > 0
    family = len(tally)
    return {h: f"slow in {k} of {n} re-runs of its links" for h, (k, n, links) in tally.items()
            if links >= 2 and family * binomial_sf(k, n, share) <= CANDIDATE_SHARED_ALPHA}


def shared_ends(candidates: list[Pair], n_hosts: int) -> list[str]:
    """The nodes at an end of more of ``candidates`` (worst first) than chance puts there: the j-th
    at position k has p = P(Binomial(k + 1, 2 / n_hosts) >= j); a node whose least p, times the
    nodes and the j tried, is within ``CANDIDATE_SHARED_ALPHA``."""
    seen: dict[str, list[int]] = defaultdict(list)
    for k, lk in enumerate(candidates):
        for h in lk:
            seen[h].append(k)
    out = []
    for h, at in seen.items():
        if len(at) < 2:
            continue
        p = min(binomial_sf(j, k + 1, 2 / n_hosts) for j, k in enumerate(at, 1) if j >= 2)
        if p * n_hosts * (len(at) - 1) <= CANDIDATE_SHARED_ALPHA:
            out.append(h)
    return sorted(out)


@dataclass(frozen=True)
class Suspects:
    """What one analysis asks to re-test, and what the re-test plan and the verdicts need about it."""

    nodes: list[str]
    links: list[Pair]
    classes: Mapping[str, str]
    """The hop class each node was found slow in (``suspect_classes``): its partners' class."""
    prior: Mapping[str, set[str]]
    """Each node's partners of earlier slow links (``slow_partners``): a node slow now and then."""
    intermittent: Mapping[str, float] = field(default_factory=dict)
    """Nodes the analysis itself found slow in some rounds only (its finding's ``kind``): the share
    of their pairs that were slow."""
    decided: frozenset[str] = frozenset()
    """Nodes an earlier launch re-tested to a verdict (confirmed or cleared): never again an end."""
    measured: Mapping[str, float] = field(default_factory=dict)
    """Each node's ratio to its peers as its finding measured it (else the middle of its interval):
    what its re-test is sized to show (``shift_phases``)."""
    intervals: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    """Each node's 95% interval of that ratio from its finding: pooled with its re-test's (``judge``)."""
    found: Candidates = field(default_factory=lambda: Candidates([], 0))
    """Links no bar flagged, re-run as the fleet's worst and as near slow (``candidate_links``);
    their ends are not suspects."""
    again: Mapping[str, str] = field(default_factory=dict)
    """Nodes re-tested with as many fresh pairs as a node slow now and then gets at most, and why:
    re-tested inconclusive by more slow pairs than the noise gives (``split_inconclusive``), or
    slow in more of their links' re-runs than the noise gives (``slow_link_ends``)."""

    @property
    def candidates(self) -> list[Pair]:
        """The fleet's worst links no bar flagged (``Candidates.links``)."""
        return self.found.links

    @classmethod
    def of(
        cls,
        findings: list[Finding],
        exclude: set[str],
        retests: Mapping[str, Retest],
        ctx: AnalysisContext | None = None,
        looked: frozenset[str] = frozenset(),
    ) -> Suspects:
        """What to re-test after the analysis ``ctx``: with it and no re-test yet, candidate links too;
        after a launch, the candidates held back while an end was a suspect node (``held_back``), and
        once more, unless ``looked`` at again already, the nodes re-tested inconclusive by more slow
        pairs than the noise gives (``split_inconclusive``) and those whose links' re-runs were
        (``slow_link_ends``)."""
        nodes, links = find_suspects(findings, exclude, set(retests), retests)
        taken = exclude | set(nodes) | {h for lk in links for h in lk}
        taken |= {rt.subject for rt in retests.values() if rt.kind == "node" and rt.verdict == "confirmed"}
        # the fleet's worst, once: a later launch is for the suspects the first one's verdicts made,
        # and for the worst held back while one of their ends was a suspect node
        found, again = Candidates([], 0), dict[str, str]()
        if ctx is not None and not retests:
            found = candidate_links(ctx, taken, set(retests))
        elif ctx is not None:
            explained, more = split_inconclusive(ctx, retests)
            retested = {rt.subject for rt in retests.values() if rt.kind == "node"}
            ends = {h: why for h, why in slow_link_ends(ctx, retests).items() if h not in retested | exclude}
            why_again = {h: "inconclusive" for h in more} | ends
            again = {h: why for h, why in why_again.items() if h not in looked}
            found = held_back(ctx, taken, retests, explained)
        candidates = found.links
        first = candidates and not retests  # a node at the ends of many: once, from the fleet's worst
        now_and_then_too = shared_ends(candidates, len(ctx.pair_model.hosts)) if first else []
        prior = slow_partners(findings, retests)
        for h in now_and_then_too:  # its worst pairs are its evidence, as a flagged node's slow links
            prior[h] = prior.get(h, set()) | {g for lk in candidates if h in lk for g in lk}
            prior[h].discard(h)
        nodes = sorted({*nodes, *now_and_then_too, *again})
        keep = lambda links: [lk for lk in links if not set(lk) & set(now_and_then_too)]  # noqa: E731
        found = replace(found, links=keep(candidates), near=keep(found.near))
        now_and_then, measured, intervals = {}, {}, {}
        for f in findings:
            ev = (f.evidence or {}) if f.rule == "slow_node" else {}
            if ev.get("kind") == "intermittent" and ev.get("partners"):
                now_and_then[f.subject] = ev["partners_slow"] / ev["partners"]
            ci, ratio = ev.get("effect_ci_ratio"), ev.get("node_effect_ratio")
            if ratio or ci:
                measured[f.subject] = float(ratio if ratio else math.sqrt(ci[0] * ci[1]))
            if ci and len(ci) == 2 and min(ci) > 0:
                intervals[f.subject] = (float(min(ci)), float(max(ci)))
        decided = frozenset(k for k, rt in retests.items() if rt.kind == "node" and rt.verdict != "not_run")
        return cls(nodes, links, suspect_classes(findings), prior, now_and_then, decided, measured, intervals,
                   found, again)

    def slow_share(self, node: str, tested: MetPairs) -> float | None:
        """The share of its rounds a node seemed slow in: its intermittent finding's, else its slow
        links' among its pairs; None for a node slow with every partner of a class (capped)."""
        if node in self.intermittent:
            return self.intermittent[node]
        met = tested.partners(node)
        return len(self.prior[node]) / met if self.prior.get(node) and met else None

    def names(self) -> list[str]:
        """The suspects the analysis flagged, by name (the candidate links apart)."""
        return self.nodes + ["|".join(p) for p in self.links]

    def said(self) -> str:
        """The suspects for the log: the flagged by name, the candidate links by count, the nodes
        re-tested ``again`` apart."""
        worst = f"{len(self.candidates)} candidate link(s) (the worst pairs no bar flagged)"
        more = [worst] if self.candidates else []
        more += [f"{h} again ({why})" for h, why in sorted(self.again.items())]
        if self.found.near:
            more.append(f"{len(self.found.near)} near-slow pair(s) as the budget allows")
        return ", ".join([n for n in self.names() if n not in self.again] + more)

    @property
    def ends(self) -> list[str]:
        """The nodes of the suspect links, re-tested as nodes beside the link's re-run: a link slow
        once may be a node slow now and then, fast when its link is re-run."""
        return sorted({h for lk in self.links for h in lk} - set(self.nodes) - self.decided)
