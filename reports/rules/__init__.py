"""The registry: every rule, in the order their findings are listed. Add a rule = add a module
with a ``RULE``, its finding ids to ``reports.rule_ids`` and one line here; the machinery
(``reports.engine``) needs no change. A rule module imports no other rule module: what two rules
share is an analysis (``reports.analyses``), computed once and read from the context."""

from __future__ import annotations

from netbench.reports.rule_ids import ENGINE_IDS
from netbench.reports.rules import (
    ceiling,
    cross_switch,
    engines,
    errors,
    expected,
    fleet_split,
    host_checks,
    imported,
    last_good,
    link_health,
    mtu,
    port_counters,
    regression,
    resolution,
    retest_pairs,
    rundir,
    slow_node,
    slow_pair,
    slow_rail,
    stragglers,
    telemetry,
    unreadable,
    versions,
)
from netbench.reports.rules.base import Rule

RULES: list[Rule] = [
    errors.RULE,
    slow_node.RULE,
    fleet_split.RULE,
    slow_pair.RULE,
    retest_pairs.RULE,
    slow_rail.RULE,
    link_health.RULE,
    mtu.RULE,
    port_counters.RULE,
    versions.RULE,
    stragglers.RULE,
    telemetry.RULE,
    cross_switch.RULE,
    expected.RULE,
    ceiling.RULE,
    regression.RULE,
    engines.RULE,
    host_checks.RULE,
    resolution.RULE,
    unreadable.RULE,
    rundir.RULE,
    imported.RULE,
    last_good.RULE,
]

#: every finding id the registry and the engine emit -> its default severity, in the registry's order
RULE_IDS: dict[str, str] = {rid: sev for rule in RULES for rid, sev in rule.ids.items()} | ENGINE_IDS
