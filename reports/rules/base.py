"""What a rule is: a name, the finding ids it may emit (with their default severity), and one
function from an AnalysisContext to findings. The machinery (``reports.engine``) runs every
registered rule, applies the policy's severity overrides and caps, and sorts; rules do none of that.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from netbench.reports.context import AnalysisContext
    from netbench.common.findings import Finding


@dataclass(frozen=True)
class Rule:
    name: str
    ids: dict[str, str]  # finding rule id -> default severity
    check: Callable[[AnalysisContext], list[Finding]]
    doc: str = ""


def pct(ratio: float) -> str:
    """0.8 -> '20% slower', 1.1 -> '10% faster' (for titles)."""
    d = round((1 - ratio) * 100)
    return f"{d}% slower" if d >= 0 else f"{-d}% faster"


def size_label(nbytes: int) -> str:
    from netbench.collectives.sizes import format_size

    return format_size(int(nbytes))
