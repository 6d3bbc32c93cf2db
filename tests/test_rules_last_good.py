"""The registry's ``slower_than_last_good`` (issue 49): preflight's comparison with each node's last
good run in the history is judged by the engine like every rule. A node's own loss is a warning at
most, whatever the policy asks (a comparison of two runs never drains), and a policy may lower it."""

from __future__ import annotations

from netbench.reports.context import AnalysisContext
from netbench.reports.engine import run_rules
from netbench.reports.lastgood import LastGood
from netbench.reports.policy import Policy
from netbench.reports.rules import RULES, last_good
from netbench.reports.verdict import judge


def judged(policy: Policy) -> list[str]:
    steady = [LastGood(f"node{i:04d}", "r1", "2026-12-06T02:00:00+00:00", 1 << 30, 180.0, 179.0, 1.0)
              for i in range(1, 13)]
    slow = LastGood("node0013", "r1", "2026-12-06T02:00:00+00:00", 1 << 30, 180.0, 120.0, 1.0)
    ctx = AnalysisContext.from_data([], policy=policy)
    ctx.last_good = (*steady, slow)
    found = [f for f in run_rules(ctx) if f.rule == last_good.ID]
    assert [f.subject for f in found] == ["node0013"] and "run r1" in found[0].title
    assert judge(found, 13, command="preflight").drain == ()
    return [f.severity for f in found]


def test_a_node_s_own_loss_is_a_warning_at_most_and_the_policy_may_lower_it() -> None:
    assert last_good.RULE in RULES
    assert judged(Policy()) == ["warn"]
    assert judged(Policy(severity={"slower_than_last_good": "fail"})) == ["warn"]  # never a drain
    assert judged(Policy(severity={"slower_than_last_good": "info"})) == ["info"]


def test_no_history_no_finding() -> None:
    assert not [f for f in run_rules(AnalysisContext.from_data([])) if f.rule == last_good.ID]
