"""What a rule is: a name, the finding ids it may emit (with their default severity), and one
function from an AnalysisContext to findings. The machinery (``reports.engine``) runs every
registered rule, applies the policy's severity overrides and caps, and sorts; rules do none of that,
except a rule whose evidence may lower the severity the policy asks for (``own_severity``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from netbench.reports.rule_ids import FINDING_IDS

from netbench.common.findings import SEVERITY_RANK

if TYPE_CHECKING:
    from netbench.reports.context import AnalysisContext

    from netbench.common.findings import Finding


@dataclass(frozen=True)
class Rule:
    name: str
    ids: dict[str, str]  # finding rule id -> default severity
    check: Callable[[AnalysisContext], list[Finding]]
    doc: str = ""
    own_severity: bool = False
    """The rule applies the policy's severity overrides itself (``policy_severity``), because its
    evidence may lower them: a suspect cleared by a re-test is info whatever the policy says."""


def policy_severity(ctx: AnalysisContext, rule_id: str, cap: str = "fail", floor: str = "info") -> str:
    """The severity the policy gives ``rule_id`` (its default without an override), at most ``cap``
    and at least ``floor`` (``"warn"``: data not read or not vouched for never gives a PASS)."""
    sev = ctx.policy.severity.get(rule_id, FINDING_IDS[rule_id])
    return max(min(sev, cap, key=SEVERITY_RANK.__getitem__), floor, key=SEVERITY_RANK.__getitem__)


#: the action of a suspect (node or link) that a re-test against known-good partners cleared
CLEARED_ACTION = "Nothing to do unless it recurs: the re-test against known-good partners was at full speed."


def pct(ratio: float) -> str:
    """0.8 -> '20% slower', 1.1 -> '10% faster' (for titles)."""
    d = round((1 - ratio) * 100)
    return f"{d}% slower" if d >= 0 else f"{-d}% faster"


def size_label(nbytes: int) -> str:
    from netbench.collectives.sizes import format_size

    return format_size(int(nbytes))
