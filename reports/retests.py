"""Re-test evidence: the suspects re-run against known-good partners (preflight's escalation,
``sweep --hosts --confirm-budget``; ``netbench.confirm``). An *input* of the analysis
(``AnalysisContext.retests``, else run.json's ``retests``, validated as it is read: a file is
untrusted), so the findings already carry it (``reports.analyses.Analyses.retests``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

RETEST_VERDICTS = ("confirmed", "cleared", "inconclusive", "not_run")


def _ordered_two(value: Any, each: Callable[[Any], bool]) -> bool:
    """None, or two values that each pass ``each``, low before high (run.json is untrusted)."""
    if value is None:
        return True
    two = isinstance(value, list | tuple) and len(value) == 2
    return two and all(map(each, value)) and value[0] <= value[1]


def _runs_ok(value: Any) -> bool:
    """None, or two counts, the slow ones before those measured."""
    return _ordered_two(value, lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 10**9)


def _interval_ok(value: Any) -> bool:
    """None, or two finite ratios, low before high."""
    return _ordered_two(value, lambda v: isinstance(v, int | float) and not isinstance(v, bool)
                        and 0 < v < 1e6)


@dataclass(frozen=True)
class Retest:
    """A suspect's re-test: confirmed, cleared, inconclusive or not_run (with the reason)."""

    subject: str  # a host, "a|b" for a link, "host/railK" for a NIC (netbench.confirm.rails)
    kind: str  # node | link | nic
    verdict: str = "not_run"
    ratios: Mapping[str, float] = field(default_factory=dict)  # partner -> busbw / the phase's reference
    reason: str = ""
    interval: tuple[float, float] | None = None
    """A node's re-test ratios together (their median's 95% interval, low and high), where they
    confirmed it as a node a little slow with every partner: pooled with the analysis' own
    interval, the size its finding's severity goes by (``rules.base.size_severity``)."""
    candidate: bool = False
    """A link re-run as one of the fleet's worst pairs that no bar flagged (``LinkTests.worst_unflagged``):
    confirmed, it is a finding; cleared, it never was one (the log and run.json keep its re-run)."""
    slow_runs: tuple[int, int] | None = None
    """A node's re-test pairs slow beyond the noise, and those measured: whether "a few" slow ones
    are more than the noise gives (``netbench.confirm.split_inconclusive``); a link's re-runs slow,
    and those made (``netbench.confirm.slow_link_ends``)."""


@dataclass(frozen=True)
class RetestEvidence:
    """Re-tests (preflight's escalation, ``sweep --hosts --confirm-budget``), by subject (host or
    "a|b"); ``untested_reason`` says why a suspect without a result was not re-tested (no budget
    left, not a suspect after the quick pass ...)."""

    results: Mapping[str, Retest]
    untested_reason: str
    from_round: int | None = None
    """Pair rows of this round and later are the re-tests' (judged by ``netbench.confirm.judge``,
    against controls measured beside them), kept out of the pair model: their schedule (suspects
    with chosen partners, many rounds of the same few nodes) is not the sweep's, and fitted with it
    they would make suspects of their own."""

    def of(self, subject: str, kind: str) -> Retest:
        return self.results.get(subject) or Retest(subject, kind, reason=self.untested_reason)

    def to_json(self) -> dict[str, Any]:
        """As run.json's ``retests`` (``from_json`` reads it back, so ``netbench report`` rebuilds
        the same findings)."""
        results = {k: asdict(v) for k, v in self.results.items()}
        return {"results": results, "untested_reason": self.untested_reason, "from_round": self.from_round}

    @classmethod
    def from_json(cls, data: Any) -> RetestEvidence:
        """run.json's ``retests``, validated (a file is untrusted): ValueError naming what is wrong."""
        if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
            raise ValueError("expected {results: {subject: re-test}, untested_reason}")
        results = {}
        for key, rt in data["results"].items():
            ok = (
                isinstance(rt, dict)
                and all(isinstance(rt.get(f), str) for f in ("subject", "kind", "verdict", "reason"))
                and rt["kind"] in ("node", "link", "nic")
                and rt["verdict"] in RETEST_VERDICTS
                and isinstance(rt.get("ratios", {}), dict)
                and all(isinstance(v, int | float) for v in rt.get("ratios", {}).values())
                and _interval_ok(rt.get("interval"))
                and isinstance(rt.get("candidate", False), bool)
                and _runs_ok(rt.get("slow_runs"))
            )
            if not ok:
                raise ValueError(f"re-test {str(key)[:80]!r} is not a re-test record")
            ratios = {str(k): float(v) for k, v in rt.get("ratios", {}).items()}
            interval = rt.get("interval")
            runs = rt.get("slow_runs")
            results[str(key)] = Retest(rt["subject"], rt["kind"], rt["verdict"], ratios, rt["reason"],
                                       None if interval is None else (float(interval[0]), float(interval[1])),
                                       rt.get("candidate", False),
                                       None if runs is None else (runs[0], runs[1]))
        start = data.get("from_round")
        if start is not None and (isinstance(start, bool) or not isinstance(start, int)):
            raise ValueError(f"from_round {str(start)[:40]!r} is not a round number")
        return cls(results, str(data.get("untested_reason") or "not re-tested"), start)

    @property
    def confirmed_nodes(self) -> frozenset[str]:
        return frozenset(
            rt.subject for rt in self.results.values() if rt.kind == "node" and rt.verdict == "confirmed"
        )
