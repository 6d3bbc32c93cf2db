"""The registry: every rule, in the order their findings are listed. Add a rule = add a module
with a ``RULE`` and one line here; the machinery (``reports.analysis``) needs no change."""

from __future__ import annotations

from netbench.reports.rules import (
    cross_switch,
    errors,
    expected,
    link_health,
    regression,
    slow_node,
    slow_pair,
    stragglers,
    versions,
)
from netbench.reports.rules.base import Rule

RULES: list[Rule] = [
    errors.RULE,
    slow_node.RULE,
    slow_pair.RULE,
    link_health.RULE,
    versions.RULE,
    stragglers.RULE,
    cross_switch.RULE,
    expected.RULE,
    regression.RULE,
]

#: every finding id a rule may emit -> its default severity (policy [severity] keys are checked here)
RULE_IDS: dict[str, str] = {rid: sev for rule in RULES for rid, sev in rule.ids.items()}
RULE_IDS["analysis_error"] = "warn"  # a rule that crashed on this data (reported, not fatal)
RULE_IDS["findings_truncated"] = "info"  # more findings of one rule than the report lists
