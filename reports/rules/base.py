"""What a rule is: a name, the finding ids it may emit (with their default severity), and one
function from an AnalysisContext to findings. The machinery (``reports.engine``) runs every
registered rule, applies the policy's severity overrides and caps, and sorts; rules do none of that,
except a rule whose evidence may lower the severity the policy asks for (``own_severity``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
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
    defers: bool = False
    """Its warnings and failures about a node that a warning or failure of another rule names are
    information (the engine's ``named_nodes``): context for that finding, never a second alarm. The
    rule cannot tell itself: a rule never reads another's findings."""


def policy_severity(ctx: AnalysisContext, rule_id: str, cap: str = "fail", floor: str = "info") -> str:
    """The severity the policy gives ``rule_id`` (its default without an override), at most ``cap``
    and at least ``floor`` (``"warn"``: data not read or not vouched for never gives a PASS)."""
    sev = ctx.policy.severity.get(rule_id, FINDING_IDS[rule_id])
    return max(min(sev, cap, key=SEVERITY_RANK.__getitem__), floor, key=SEVERITY_RANK.__getitem__)


#: the action of a suspect (node or link) that a re-test against known-good partners cleared
CLEARED_ACTION = ("Nothing to do unless it recurs: against known-good partners the re-test showed "
                  "nothing slow beyond the noise.")


def size_severity(ctx: AnalysisContext, rule_id: str, ci: tuple[float, float] | None) -> str:
    """The severity of an effect past the family-wise bar by its size: the policy's for ``rule_id``
    at most, a failure only when the 95% interval ``ci`` (ratios) is certainly ``warn_floor`` slower
    and reaches ``fail_floor``, a warning when it is certainly ``warn_floor`` slower, info nearer
    (certain but small). Why the far end for failures: a node measured exactly at the floor would
    otherwise fail or merely warn by the toss of its noise."""
    if ci is None:
        return policy_severity(ctx, rule_id)
    t = ctx.policy.thresholds
    near, far = 1 - ci[1], 1 - ci[0]
    by_size = "info"
    if near >= t.warn_floor:
        by_size = "fail" if far >= t.fail_floor else "warn"
    return policy_severity(ctx, rule_id, cap=by_size)


def pct_ci(ratio: float, ci: tuple[float, float] | None) -> str:
    """0.9 and (0.89, 0.91) -> '10% slower (95% CI 9-11%)'; without an interval ``pct``'s."""
    if ci is None:
        return pct(ratio)
    lo, hi = sorted((round((1 - ci[1]) * 100), round((1 - ci[0]) * 100)))
    return f"{pct(ratio)} (95% CI {lo}-{hi}%)" if lo >= 0 else f"{pct(ratio)} (95% CI {lo} to {hi}%)"


def retest_said(verdict: str, ratios: Mapping[str, float], reason: str) -> str:
    """How a re-test's verdict reads in a title: 'Confirmed by re-test at 0.50x the controls (3
    pairs; REASON)': the figure a reader weighs, the median of its pairs' busbw over the controls'
    (left to the reason where it gives it already, as a link's re-run does)."""
    word = {"confirmed": "Confirmed", "cleared": "Not confirmed"}.get(verdict, "Unconfirmed")
    if not ratios or "x the controls" in reason:
        return f"{word} by re-test" + (f" ({reason})" if reason else "")
    vals = sorted(ratios.values())
    mid = len(vals) // 2
    med = vals[mid] if len(vals) % 2 else 0.5 * (vals[mid - 1] + vals[mid])
    why = "; ".join(w for w in (f"{len(vals)} pair{'s' * (len(vals) != 1)}", reason) if w)
    return f"{word} by re-test at {med:.2f}x the controls ({why})"


def pct(ratio: float) -> str:
    """0.8 -> '20% slower', 1.1 -> '10% faster' (for titles)."""
    d = round((1 - ratio) * 100)
    return f"{d}% slower" if d >= 0 else f"{-d}% faster"


def size_label(nbytes: int) -> str:
    from netbench.collectives.sizes import format_size

    return format_size(int(nbytes))
