"""Port counters during the run (``reports.counters``): a port whose error counters rose while
netbench measured, or whose link went down and up again. One finding per port, naming it, with
the counters and by how much: the evidence a ticket to the network team needs.

``link_flap`` (a link_downed / link_down* counter rose) is a failure by default: collectives on
that link stalled or failed over while it was down. ``port_errors`` is a warning: symbol errors
and discards mean a marginal cable or transceiver before they mean a dead one.
"""

from __future__ import annotations

from netbench.reports.context import AnalysisContext
from netbench.reports.rule_ids import ids
from netbench.reports.rules.base import Rule

from netbench.common.findings import Finding

_ACTION_FLAP = ("Check the cable, transceiver and switch port of this NIC (switch logs for the same "
                "time); reseat or replace it, or drain the node until it is fixed.")
_ACTION_ERR = ("Errors rose during the run: watch this port (perfquery / ethtool -S), and replace the "
               "cable or transceiver if they keep rising; compare with the switch side's counters.")


def check(ctx: AnalysisContext) -> list[Finding]:
    out: list[Finding] = []
    for p in ctx.analyses.counters.ports:
        if not p.errors and not p.flaps:
            continue
        listed = ", ".join(f"{k} +{d}" for k, d in sorted(p.errors.items(), key=lambda kv: -kv[1]))
        evidence = {"port": p.port, "source": p.source, "errors": dict(p.errors), "link_flaps": p.flaps,
                    "rose": dict(sorted(p.rose.items())[:50]), "went_back": list(p.went_back)}
        if p.flaps:
            out.append(Finding(
                rule="link_flap", severity="fail", subject_kind="node", subject=p.host,
                title=f"{p.host} {p.port}: link went down {p.flaps} time(s) during the run ({listed})",
                evidence=evidence, action=_ACTION_FLAP, hosts=[p.host],
            ))
        else:
            out.append(Finding(
                rule="port_errors", severity="warn", subject_kind="node", subject=p.host,
                title=f"{p.host} {p.port}: error counters rose during the run: {listed}",
                evidence=evidence, action=_ACTION_ERR, hosts=[p.host],
            ))
    return out


RULE = Rule(name="port_counters", ids=ids("link_flap", "port_errors"), check=check, doc=__doc__ or "")
