"""Findings and ``findings.json``: what the analysis concludes, the unit every output (HTML, terminal,
JSON, JUnit, Prometheus, preflight's exit code) is built from, and the file that keeps them.

A finding always names a subject and carries the evidence, so the reader can check the claim
without re-running anything. This module is the one place that knows the file's schema and layout;
the analysis writes it (``netbench.reports.report``), exporters and preflight read it back.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from netbench.common.jsontext import dumps, finite
from netbench.common.rundir import FINDINGS_JSON, atomic_write

SCHEMA = "netbench.findings/1"
FILE_NAME = FINDINGS_JSON
SEVERITIES = ("info", "warn", "fail")
SEVERITY_RANK = {s: i for i, s in enumerate(SEVERITIES)}
VERDICTS = {None: "PASS", "info": "PASS", "warn": "WARN", "fail": "FAIL"}


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


def verdict(findings: list[Finding]) -> str:
    """PASS (nothing worse than info), WARN (warnings), FAIL (failures)."""
    return VERDICTS[worst(findings)]


def counts(findings: list[Finding]) -> dict[str, int]:
    """Findings per severity, worst first, zeros included."""
    c = Counter(f.severity for f in findings)
    return {s: c.get(s, 0) for s in reversed(SEVERITIES)}


@dataclass(frozen=True)
class FindingsRecord:
    """What ``findings.json`` holds: the verdict, counts and every finding, worst first."""

    findings: tuple[Finding, ...]
    run_id: str | None = None
    policy: str | None = None  # the policy file the analysis used, None for the defaults
    baseline: str | None = None  # the baseline run directory compared against

    @property
    def verdict(self) -> str:
        return verdict(list(self.findings))

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "run_id": self.run_id,
            "verdict": self.verdict,
            "counts": counts(list(self.findings)),
            "policy": self.policy,
            "baseline": self.baseline,
            "findings": [finite(f.to_dict()) for f in self.findings],
        }

    @classmethod
    def from_dict(cls, data: Any) -> FindingsRecord:
        """ValueError, naming what is wrong, for anything that is not a findings document whose every
        finding fits :class:`Finding` (the file may come from elsewhere, or be damaged)."""
        from netbench.common.shape import problem

        schema = data.get("schema") if isinstance(data, dict) else None
        if schema != SCHEMA:
            raise ValueError(f"not a {SCHEMA} document (schema {schema!r})")
        findings = data.get("findings") or []
        if not isinstance(findings, list):
            raise ValueError("'findings' is not a list")
        for i, f in enumerate(findings):
            if (why := problem(f, Finding)) is not None:
                raise ValueError(f"finding {i}: {why}")
        return cls(
            findings=tuple(Finding.from_dict(f) for f in findings),
            run_id=data.get("run_id") if isinstance(data.get("run_id"), str) else None,
            policy=data.get("policy") if isinstance(data.get("policy"), str) else None,
            baseline=data.get("baseline") if isinstance(data.get("baseline"), str) else None,
        )


def write_findings(run_dir: str | Path, record: FindingsRecord) -> Path:
    """``findings.json`` in ``run_dir``, atomically (a half-written file never replaces a good one)."""
    path = Path(run_dir) / FILE_NAME
    atomic_write(path, dumps(record.to_dict(), indent=2, default=str) + "\n")
    return path


def read_findings(run_dir: str | Path) -> FindingsRecord:
    """``findings.json`` of ``run_dir``; FileNotFoundError before the run was analysed, ValueError when
    the file is not JSON, another schema, or a finding in it is malformed; RunDirError (exit 2) when
    it is not a regular file."""
    from netbench.common.rundir import decode_json, open_regular

    with open_regular(Path(run_dir) / FILE_NAME) as fh:
        return FindingsRecord.from_dict(decode_json(fh.read()))
