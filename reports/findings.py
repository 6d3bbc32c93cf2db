"""Findings: what the analysis concludes, the unit every output (HTML, terminal, JSON, JUnit,
Prometheus, preflight's exit code) is built from.

A finding always names a subject and carries the evidence, so the reader can check the claim
without re-running anything.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

SCHEMA = "netbench.findings/1"
SEVERITIES = ("info", "warn", "fail")
SEVERITY_RANK = {s: i for i, s in enumerate(SEVERITIES)}


@dataclass
class Finding:
    rule: str  # stable id of the rule, e.g. "slow_pair", "outdated_firmware"
    severity: str  # info | warn | fail
    subject_kind: str  # node | pair | switch | rank | run | component
    subject: str  # "gpu-07", "gpu-03|gpu-11", "leaf2"
    title: str  # one line a human reads first
    evidence: dict[str, Any] = field(default_factory=dict)  # numbers and peers compared against
    action: str = ""  # what to do about it
    hosts: list[str] = field(default_factory=list)  # hosts implicated (to drain, to mark)

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {SEVERITIES}, got {self.severity!r}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Finding:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def worst(findings: list[Finding]) -> str | None:
    """The highest severity present, or None when there are no findings."""
    if not findings:
        return None
    return max((f.severity for f in findings), key=SEVERITY_RANK.__getitem__)
