"""The analyses that several rules (and the HTML, and preflight) read, computed once per analysis into
typed, frozen results. Rules format findings from these; they never read another rule's findings.

- the pair model (``reports.pairmodel``): node effects, link residuals, hop-class levels;
- node verdicts: which nodes are slow over all their partners, with the numbers that say so;
- re-test evidence: preflight's re-runs of the quick pass's suspects against known-good partners,
  an *input* of the analysis (``AnalysisContext.retests``), so the findings already carry it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from netbench.reports.pairmodel import PairModel, fit_pair_model
from netbench.reports.stats import SIGMA_FLOOR, fdr_cut, robust_sigma, z_threshold

if TYPE_CHECKING:
    from netbench.reports.context import AnalysisContext
    from netbench.reports.policy import Thresholds


@dataclass(frozen=True)
class NodeVerdict:
    """A node slow with (nearly) all its partners, and the numbers that say so."""

    host: str
    effect_ratio: float  # exp(a_i): its busbw over all partners relative to the fleet's
    robust_z: float
    partners: int
    partners_slow: int  # partners whose pair is slow against their own hop class (before attribution)
    median_busbw_GBps: float | None  # its median large-message busbw with its partners
    slowest_partners: Mapping[str, float]  # the five slowest partners -> busbw at the largest size


@dataclass(frozen=True)
class NodeVerdicts:
    """The slow nodes of the pair model, worst first, the cut they passed and what they were measured
    with (empty without pair measurements)."""

    slow: tuple[NodeVerdict, ...] = ()
    hosts: tuple[str, ...] = ()  # every host of the pair model, judged or not
    collective: str = ""
    sizes: tuple[int, ...] = ()  # the large sizes, ascending
    class_median_busbw_GBps: Mapping[str, float | None] = field(default_factory=dict)  # largest size
    z_threshold: float | None = None
    effect_spread: float = 0.0  # robust sigma of the judged nodes' effects (log)

    def level(self, host: str) -> float | None:
        """A slow node's median busbw with its partners (None for a node that is not slow)."""
        return next((v.median_busbw_GBps for v in self.slow if v.host == host), None)


@dataclass(frozen=True)
class Retest:
    """A suspect's re-test: confirmed, cleared, inconclusive or not_run (with the reason)."""

    subject: str  # a host, or "a|b" for a link
    kind: str  # node | link
    verdict: str = "not_run"
    ratios: Mapping[str, float] = field(default_factory=dict)  # partner -> busbw / the phase's reference
    reason: str = ""


@dataclass(frozen=True)
class RetestEvidence:
    """Preflight's re-tests, by subject (host or "a|b"); ``untested_reason`` says why a suspect
    without a result was not re-tested (no budget left, not a suspect after the quick pass ...)."""

    results: Mapping[str, Retest]
    untested_reason: str

    def of(self, subject: str, kind: str) -> Retest:
        return self.results.get(subject) or Retest(subject, kind, reason=self.untested_reason)

    @property
    def confirmed_nodes(self) -> frozenset[str]:
        return frozenset(
            rt.subject for rt in self.results.values() if rt.kind == "node" and rt.verdict == "confirmed"
        )


@dataclass(frozen=True)
class Analyses:
    pair_model: PairModel | None
    nodes: NodeVerdicts
    retests: RetestEvidence | None = None  # None outside preflight: nothing was re-tested


def analyse(ctx: AnalysisContext) -> Analyses:
    """Every shared analysis of the context's inputs (rows, switches, policy, re-tests)."""
    model = fit_pair_model(ctx)
    nodes = judge_nodes(model, ctx.hop_class, ctx.policy.thresholds) if model is not None else NodeVerdicts()
    return Analyses(pair_model=model, nodes=nodes, retests=ctx.retests)


def judge_nodes(
    model: PairModel, hop_class: Callable[[str, str], str], thresholds: Thresholds
) -> NodeVerdicts:
    """Slow nodes: exp(a_i) <= slow_node_factor (practical) and a robust z beyond the threshold,
    against the spread of node effects and the node's own estimate's error, false-discovery
    controlled over the judged nodes."""
    m, t = model, thresholds
    if not m.judged.any():
        return NodeVerdicts(hosts=tuple(m.hosts), collective=m.collective, sizes=tuple(m.sizes))
    eff, judged = m.node_effect, m.judged
    spread = robust_sigma(eff[judged])
    se = m.sigma * 1.2533 / np.sqrt(np.maximum(m.partners, 1))  # error of a median of partners
    scale = np.maximum(np.maximum(spread, se), SIGMA_FLOOR)
    z = eff / scale
    practical = judged & (eff <= np.log(t.slow_node_factor))
    cut = fdr_cut(np.where(practical, z, np.nan), int(judged.sum()), t.mad_k, t.fdr)
    zt = -cut if np.isfinite(cut) else z_threshold(t.mad_k, int(judged.sum()))
    bad = practical & (z <= cut)
    slow = []
    for i in sorted(np.nonzero(bad)[0].tolist(), key=lambda k: eff[k]):
        host = m.hosts[i]
        row = m.bw[-1, i]
        partner_idx = np.nonzero(np.isfinite(row))[0]
        slow_with = 0
        for j in partner_idx:
            med = (m.class_median_bw.get(hop_class(host, m.hosts[j])) or [None])[-1]
            if med and row[j] <= t.slow_node_factor * med:
                slow_with += 1
        worst = sorted(partner_idx.tolist(), key=lambda j: row[j])[:5]
        slow.append(
            NodeVerdict(
                host=host,
                effect_ratio=float(np.exp(eff[i])),
                robust_z=float(z[i]),
                partners=int(m.partners[i]),
                partners_slow=slow_with,
                median_busbw_GBps=float(np.median(row[partner_idx])) if partner_idx.size else None,
                slowest_partners={m.hosts[j]: float(row[j]) for j in worst},
            )
        )
    return NodeVerdicts(
        slow=tuple(slow),
        hosts=tuple(m.hosts),
        collective=m.collective,
        sizes=tuple(m.sizes),
        class_median_busbw_GBps={k: v[-1] for k, v in m.class_median_bw.items()},
        z_threshold=float(zt),
        effect_spread=float(spread),
    )
