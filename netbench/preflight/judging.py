"""Preflight's decisions, pure functions: which pairs to run, who is a suspect, what a re-test
says, whom to drain. Tested without any host (tests/test_preflight_plan.py). What a re-test says
is handed to the analysis (``reports.analyses.RetestEvidence``): the rules, not this module, turn
it into the findings' severities."""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from dataclasses import replace
from typing import Any

from netbench.preflight.options import Pair
from netbench.reports.analyses import Retest


def drain_and_check(findings: list[Any], n_hosts: int) -> tuple[list[str], list[str]]:
    """The drain rule (module docstring): nodes to drain, and links/switches to check."""
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


# -- stages 2 and 4: measuring -----------------------------------------------------------------------
def quick_rounds(hosts: list[str], partners: int) -> list[list[Pair]]:
    """The first circle-method rounds, until every host has ``partners`` partners (or all of them)."""
    from netbench.collectives.pairs import circle_rounds

    want = min(partners, len(hosts) - 1)
    have: Counter[str] = Counter()
    out: list[list[Pair]] = []
    for rnd in circle_rounds(hosts):
        if all(have[h] >= want for h in hosts):
            break
        out.append(rnd)
        for a, b in rnd:
            have[a] += 1
            have[b] += 1
    return out


def plan_escalation(
    suspects: list[str],
    links: list[Pair],
    good: list[str],
    tested: set[frozenset],
    switches: dict[str, str],
    phases: int,
) -> list[list[Pair]]:
    """Perfect matchings for the re-tests: each suspect node with a known-good partner per phase (same
    switch first, a partner it has not met first), each suspect link re-run once (in the first phase
    where both its nodes are free), and the other good nodes paired among themselves as the phase's
    controls. At least as many phases as it takes to re-run every link."""
    out: list[list[Pair]] = []
    tested = set(tested)
    bad = set(suspects)
    pending = [p for p in links if not set(p) & bad]

    def pick(a: str, pool: list[str]) -> str:
        return min(
            pool,
            key=lambda g: (switches.get(g) != switches.get(a), frozenset((a, g)) in tested, pool.index(g)),
        )

    while len(out) < phases or pending:
        busy: set[str] = set()
        pairs: list[Pair] = []
        for a, b in list(pending):
            if not {a, b} & busy:
                pairs.append((a, b))
                busy |= {a, b}
                pending.remove((a, b))
        for s in suspects if len(out) < phases else []:
            free = [g for g in good if g not in busy]
            if free:
                g = pick(s, free)
                pairs.append((s, g))
                busy |= {s, g}
        rest = [g for g in good if g not in busy]
        while len(rest) >= 2:
            a = rest.pop(0)
            b = pick(a, rest)
            rest.remove(b)
            pairs.append((a, b))
        tested |= {frozenset(p) for p in pairs}
        out.append(pairs)
    return out


def judge(
    rows: list[dict[str, Any]],
    rounds: range,
    suspects: list[str],
    links: list[Pair],
    switches: dict[str, str],
    thresholds: Any,
    noise_sigma: float = 0.0,
) -> dict[str, Retest]:
    """Verdicts from one escalation's rows (pair rows whose round is in ``rounds``) at the largest size.

    Each re-test pair's busbw is divided by its phase's reference: the median of that phase's control
    pairs (good-good) of the same hop class, else of any class, else the quick pass's good pairs.
    "Slow" is both practical and beyond noise, as in the rules: a ratio at most the policy's factor
    (slow_node_factor for nodes, slow_pair_factor for links) and log(ratio) at most -mad_k times the
    pair model's noise sigma (log space) from the quick pass. A suspect node is confirmed when slow
    with most of its re-test partners, cleared when slow with none; a link when its re-run is slow.
    """
    import math

    def slow(ratio: float, factor: float) -> bool:
        return ratio <= factor and math.log(max(ratio, 1e-12)) <= -thresholds.mad_k * noise_sigma

    from netbench.common.topology import hop_class

    bad = set(suspects)
    link_keys = {frozenset(p) for p in links}
    out = {s: Retest(s, "node") for s in suspects} | {
        "|".join(sorted(p)): Retest("|".join(sorted(p)), "link") for p in links
    }
    ok = [
        r
        for r in rows
        if r.get("pattern") == "pair"
        and r.get("status") == "ok"
        and (r.get("busbw_GBps") or 0) > 0
        and len(r.get("hosts") or []) == 2
    ]
    esc = [r for r in ok if r.get("round") in rounds]
    if not esc:
        return {k: replace(rt, reason="no re-test was measured") for k, rt in out.items()}
    top = max(r["bytes"] for r in esc)

    def is_control(hosts: list[str]) -> bool:
        return not (set(hosts) & bad) and frozenset(hosts) not in link_keys

    refs: dict[Any, list[float]] = defaultdict(list)
    for r in ok:
        if r["bytes"] == top and is_control(r["hosts"]):
            rnd = (
                r["round"] if r["round"] in rounds else "quick" if (r["round"] or 0) < rounds.start else None
            )
            refs[(rnd, hop_class(*r["hosts"], switches))].append(r["busbw_GBps"])
            refs[(rnd, None)].append(r["busbw_GBps"])

    def ref(rnd: int, klass: str) -> float | None:
        for key in ((rnd, klass), (rnd, None), ("quick", klass), ("quick", None)):
            if refs.get(key):
                return statistics.median(refs[key])
        return None

    node_ratios: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    link_ratios: dict[str, list[float]] = defaultdict(list)
    for r in esc:
        a, b = r["hosts"]
        base = ref(r["round"], hop_class(a, b, switches)) if r["bytes"] == top else None
        if not base:
            continue
        ratio = r["busbw_GBps"] / base
        if frozenset((a, b)) in link_keys:
            link_ratios["|".join(sorted((a, b)))].append(ratio)
        elif (a in bad) != (b in bad):
            s, g = (a, b) if a in bad else (b, a)
            node_ratios[s][g].append(ratio)
    for s in suspects:
        per = {g: round(statistics.median(v), 3) for g, v in node_ratios.get(s, {}).items()}
        n_slow = sum(slow(v, thresholds.slow_node_factor) for v in per.values())
        if not per:
            verdict, reason = "not_run", "no known-good partner was free in the phases that ran"
        elif 2 * n_slow > len(per):
            verdict, reason = "confirmed", f"slow with {n_slow} of {len(per)} known-good partner(s)"
        elif n_slow == 0:
            verdict, reason = "cleared", f"at full speed with all {len(per)} known-good partner(s)"
        else:
            verdict, reason = "inconclusive", f"slow with {n_slow} of {len(per)} known-good partners"
        out[s] = replace(out[s], verdict=verdict, ratios=per, reason=reason)
    for key, ratios in link_ratios.items():
        med = statistics.median(ratios)
        verdict = "confirmed" if slow(med, thresholds.slow_pair_factor) else "cleared"
        out[key] = replace(
            out[key],
            verdict=verdict,
            ratios={f"run{i + 1}": round(v, 3) for i, v in enumerate(ratios)},
            reason=f"re-run at {med:.2f}x the controls",
        )
    return {k: rt if rt.reason else replace(rt, reason="not re-tested") for k, rt in out.items()}




def unusable_hosts(outcome: Any, rows: list[dict[str, Any]]) -> set[str]:
    """Hosts not to re-test nor to re-test against: their ranks exited or never started, or one of
    their pairs failed. A hung ring marks every host down in its launch but names no one, so a
    hang alone does not count (the ring's failure stays a finding of its own)."""
    dead = {f.host for f in outcome.faults if f.kind in ("exit", "start") and f.host}
    flaky = {
        h
        for r in rows
        if r.get("pattern") == "pair" and r.get("status") != "ok"
        for h in r.get("hosts") or []
    }
    return dead | flaky


def find_suspects(findings: list[Any], exclude: set[str], done: set[str]) -> tuple[list[str], list[Pair]]:
    """Nodes flagged slow and links flagged slow that were not re-tested yet (``done``: subjects)."""
    nodes = sorted({f.subject for f in findings if f.rule == "slow_node"} - exclude - done)
    links = sorted(
        {
            tuple(sorted(f.hosts))
            for f in findings
            if f.rule == "slow_pair"
            and len(f.hosts) == 2
            and not set(f.hosts) & (exclude | set(nodes))
            and "|".join(sorted(f.hosts)) not in done
        }
    )
    return nodes, links  # type: ignore[return-value]


def _pairs_in(rows: list[dict[str, Any]], rounds: list[int]) -> set[Pair]:
    return {
        tuple(r["hosts"])
        for r in rows
        if r.get("pattern") == "pair" and rounds[0] <= (r.get("round") or 0) <= rounds[1]
    }
