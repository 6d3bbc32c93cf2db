"""The analyses that several rules (and the HTML, and preflight) read, computed once per analysis into
typed, frozen results. Rules format findings from these; they never read another rule's findings.

- the pair model (``reports.pairmodel``): node effects, link residuals, hop-class levels;
- node verdicts: which nodes are slow within a hop class (capped) or in many rounds (intermittent),
  which switches' uplinks explain their hosts' slowness across the spine, and the borderline
  suspects, with the numbers that say so;
- re-test evidence: re-runs of the suspects against known-good partners (preflight's escalation,
  ``sweep --hosts --confirm-budget``; ``netbench.confirm``), an *input* of the analysis
  (``AnalysisContext.retests``, else run.json's ``retests``), so the findings already carry it.

The re-test records are ``reports.retests``' and the uplink verdicts ``reports.uplinks``'; both are
importable from here as well.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np
from netbench.reports.arrivals import GroupStragglers
from netbench.reports.arrivals import analyse as analyse_arrivals
from netbench.reports.ceilings import Headline, headlines, references
from netbench.reports.counters import CounterDeltas, counter_deltas
from netbench.reports.noise import MIN_LEARN
from netbench.reports.pairmodel import PairModel, fit_pair_model, nanmedian_rows
from netbench.reports.retests import Retest as Retest  # re-exported: callers import it from here
from netbench.reports.retests import RetestEvidence
from netbench.reports.stats import (
    SIGMA_FLOOR,
    bh_mask,
    binomial_sf,
    fdr_cut,
    holm_bar,
    holm_cut,
    holm_mask,
    robust_sigma,
)
from netbench.reports.uplinks import SwitchVerdict, UplinkPairVerdict, switch_verdicts, uplink_pairs

if TYPE_CHECKING:
    from netbench.reports.context import AnalysisContext
    from netbench.reports.policy import Thresholds


@dataclass(frozen=True)
class NodeVerdict:
    """A slow node and the numbers that say so. ``kind``: ``capped`` (slow with its partners of one
    hop class, e.g. its own leaf, whatever the others say) or ``intermittent`` (slow in some rounds
    only: many of its pairs far below what their cell predicts, while its median is fine)."""

    host: str
    effect_ratio: float  # exp(a_i^K) in its worst hop class K: busbw relative to that class's peers
    robust_z: float
    partners: int
    partners_slow: int  # partners whose pair is slow against their own cell (before attribution)
    median_busbw_GBps: float | None  # its median large-message busbw with its partners
    slowest_partners: Mapping[str, float]  # the five slowest partners -> busbw at the largest size
    kind: str = "capped"
    hop_class: str | None = None  # the class it is slow in (capped)
    class_effect_ratio: Mapping[str, float] = field(default_factory=dict)  # every judged class
    capacity_GBps: float | None = None  # its best class median: what it manages at best (its cap)
    slow_rounds: tuple[int, ...] = ()  # intermittent: the rounds of its slow pairs
    p_value: float | None = None  # intermittent: chance of this many slow pairs from noise alone
    effect_ci: tuple[float, float] | None = None  # 95% interval of effect_ratio (its estimate's error)


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
    effect_spread: float = 0.0  # robust sigma of the judged nodes' effects (log), worst class
    suspects: tuple[NodeVerdict, ...] = ()  # borderline: past the false-discovery bar, not the family-wise
    switches: tuple[SwitchVerdict, ...] = ()  # uplinks that explain their hosts
    uplink_pairs: tuple[UplinkPairVerdict, ...] = ()  # one of two uplinks slow, pairs cannot say which
    tests: int = 0  # node x hop class tests (and intermittency tests) the family-wise bar covers
    seen_below: float | None = None
    """The run's resolution: the effect ratio a node had to fall below to pass the bar, in its best
    judged class (the bar x its typical node's error, exp of it); None without judged nodes. A node
    slower than its peers but above this is neither found nor cleared (``rules.resolution``)."""
    noise_sigma: float | None = None
    """The noise of one pair measurement (log sigma) in that class."""
    noise_bound: bool = False
    """Whether that resolution is the pair noise's (a typical node's own error at least half what the
    bar scales: the spread of a few nodes' noisy effects is noise too), not the nodes' differing among
    themselves far beyond it (a fault's partners: 14x the noise's error after a rank was killed)."""

    def level(self, host: str) -> float | None:
        """A slow node's capacity: what it manages at best, else its median with its partners (None
        for a node that is not slow)."""
        v = next((v for v in self.slow if v.host == host), None)
        if v is None:
            return None
        return v.capacity_GBps if v.capacity_GBps is not None else v.median_busbw_GBps

    def effect(self, host: str) -> float | None:
        """A slow node's effect ratio (busbw relative to its peers), None for a node that is not slow."""
        return next((v.effect_ratio for v in self.slow if v.host == host), None)

    def intermittent(self, host: str) -> bool:
        return any(v.host == host and v.kind == "intermittent" for v in self.slow)

    def uplink_of(self, a: str, b: str) -> str | None:
        """The slow uplink a pair crosses, if any (its slowness is the switch's)."""
        return next((sv.switch for sv in self.switches if sv.crossed_by(a, b)), None)


@dataclass(frozen=True)
class Analyses:
    pair_model: PairModel | None
    nodes: NodeVerdicts
    retests: RetestEvidence | None = None  # None: nothing was re-tested
    headlines: tuple[Headline, ...] = ()  # large-message busbw of each group against its ceiling
    counters: CounterDeltas = CounterDeltas()  # what each port's counters did during the run
    stragglers: tuple[GroupStragglers, ...] = ()  # who arrived last, per group (reports/arrivals.py)


def analyse(ctx: AnalysisContext) -> Analyses:
    """Every shared analysis of the context's inputs (rows, switches, policy, re-tests)."""

    model, nodes = pair_analysis(ctx)
    # without an inventory no pair has a ceiling and pairs get no headline: the frame's rows suffice
    lines = headlines(ctx.whole_ok_rows if ctx.inventory else ctx.ok_rows, ctx.inventory,
                      references(ctx.policy.references))
    return Analyses(pair_model=model, nodes=nodes, retests=ctx.retests, headlines=tuple(lines),
                    counters=counter_deltas(ctx.counters), stragglers=tuple(analyse_arrivals(ctx.arrivals)))


def pair_analysis(ctx: AnalysisContext) -> tuple[PairModel | None, NodeVerdicts]:
    """The pair model and the node verdicts alone (what the history keeps of a run: no headline,
    which reads every row again as a frame)."""
    model = fit_pair_model(ctx)
    nodes = NodeVerdicts()
    if model is not None:
        nodes = judge_nodes(model, ctx.hop_class, ctx.policy.thresholds, ctx.switches)
    if model is not None and nodes.switches:
        model, nodes = _refit_without_slow_uplinks(ctx, model, nodes)
    return model, nodes


def _refit_without_slow_uplinks(
    ctx: AnalysisContext, model: PairModel, nodes: NodeVerdicts
) -> tuple[PairModel, NodeVerdicts]:
    """A slow uplink skews every cell median and node effect its pairs take part in, and nodes of
    other leaves then look slow in some rounds. Fit again without the pairs through it; the uplink
    verdicts of the first fit stand (the second cannot see them)."""
    uplinks = nodes.switches

    def through_slow_uplink(hosts: list[str]) -> np.ndarray:
        out = np.zeros((len(hosts), len(hosts)), dtype=bool)
        for sv in uplinks:  # crossed_by for every pair at once: one end below the switch, one not
            under = np.array([h in sv.below for h in hosts])
            out |= under[:, None] ^ under[None, :]
        return out

    refit = fit_pair_model(ctx, exclude=through_slow_uplink, like=model)  # the same matrices, fewer pairs
    if refit is None:
        return model, nodes
    again = judge_nodes(refit, ctx.hop_class, ctx.policy.thresholds, ctx.switches)
    explained = {h for sv in uplinks for h in sv.hosts}
    return refit, replace(
        again,
        slow=tuple(v for v in again.slow if v.host not in explained),
        suspects=tuple(v for v in again.suspects if v.host not in explained),
        switches=uplinks,
    )


INTERMITTENT_Z = 3.0
"""A pair this many sigma below its cell counts towards its nodes' intermittency test."""
INTERMITTENT_MIN_PAIRS = 3
"""Fewer slow pairs than this are links, not a node: one bad cable gives each end one slow pair."""
SUSPECT_K = 3.0
"""The suspect band's floor (z), in a hop class with SUSPECT_MIN_NODES judged nodes or more; below
that, mad_k's. Benjamini-Hochberg over every test still decides: a floor, not a bar."""
SUSPECT_MIN_NODES = 32
"""Judged nodes a hop class needs before its suspects may sit below mad_k: the effects' robust
spread (the z's unit) rests on them, and from a handful it is too uncertain for a lower floor."""
TAIL_SAFETY = 2.0
"""The noise's tail is taken twice as heavy as a normal one's (real timing noise is skewed)."""


def judge_nodes(
    model: PairModel,
    hop_class: Callable[[str, str], str],
    thresholds: Thresholds,
    switches: Mapping[str, str] | None = None,
) -> NodeVerdicts:
    """Slow nodes, judged within each hop class and against the family-wise error of every test.

    Capped: in some class K, exp(a_i^K) at least ``warn_floor`` below its peers (practical) and its
    robust z (against the spread of class-K node effects and its own estimate's error) past Holm's
    cut over every node x class tested; how severe is the rule's (``size_severity``: the effect's
    interval against the policy's floors). Intermittent: more of its pairs more than INTERMITTENT_Z
    below their cell than noise gives (binomial tail under the learned or assumed noise tail,
    Bonferroni over the nodes). Hosts slow only through the uplink of a switch above them are the
    switch's verdict, not theirs. Past the false-discovery bar but not the
    family-wise one: a suspect (info)."""
    m, t = model, thresholds
    base = NodeVerdicts(hosts=tuple(m.hosts), collective=m.collective, sizes=tuple(m.sizes))
    if not m.judged.any() or m.class_effect is None or m.class_judged is None or m.class_partners is None:
        return base
    n_cls, n = m.class_effect.shape
    z = np.full((n_cls, n), np.nan)
    se_k = np.full((n_cls, n), np.nan)
    spreads = []
    sigma_k = [m.noise.tail(c).sigma if c in m.noise.tails else m.sigma for c in m.classes]
    error_k = np.full(n_cls, np.nan)  # a typical judged node's error in class k (what the bar scales)
    own_k = np.full(n_cls, np.nan)  # of it, the pair noise's part (its estimate's error alone)
    for k in range(n_cls):
        judged = m.class_judged[k]
        if not judged.any():
            continue
        eff = m.class_effect[k]
        spread = robust_sigma(eff[judged])
        spreads.append(spread)
        se = sigma_k[k] * 1.2533 / np.sqrt(np.maximum(m.class_partners[k], 1))  # a median's error
        se_k[k] = se
        error_k[k] = float(np.median(np.maximum(np.maximum(spread, se[judged]), SIGMA_FLOOR)))
        own_k[k] = float(np.median(se[judged]))
        z[k] = np.where(judged, eff / np.maximum(np.maximum(spread, se), SIGMA_FLOOR), np.nan)
    practical = m.class_judged & (m.class_effect <= np.log1p(-t.warn_floor))
    cand = np.where(practical, z, np.nan)
    n_tests = int(m.class_judged.sum()) + n  # + one intermittency test per node
    warn_cut = holm_cut(cand.ravel(), n_tests, t.mad_k, t.fwer)
    # the suspect band (re-tested where there is a re-test) reaches below mad_k where the class's
    # effects' spread is known well: a node 10% slow among 256 is measured by its 15 own-leaf
    # partners, and one draw in ten put it at z -3.9, past Holm's 3.8 but short of mad_k's 4
    many = (m.class_judged.sum(axis=1) >= SUSPECT_MIN_NODES)[:, None]
    band = np.where(many | (cand <= -t.mad_k), cand, np.nan)
    info_cut = fdr_cut(band.ravel(), n_tests, min(t.mad_k, SUSPECT_K), t.fdr)
    capped = practical & (z <= warn_cut)
    borderline = (band <= info_cut) & ~capped  # NaN (not in the band) compares False

    cap = _capacity(m)
    slow: dict[int, NodeVerdict] = {}
    suspects: dict[int, NodeVerdict] = {}
    for i in np.nonzero(capped.any(axis=0) | borderline.any(axis=0))[0].tolist():
        worst = int(np.nanargmin(np.where(capped[:, i] | borderline[:, i], z[:, i], np.nan)))
        v = _verdict(m, i, worst, float(z[worst, i]), cap, hop_class, t)
        v = replace(v, effect_ci=_interval(float(m.class_effect[worst, i]), float(se_k[worst, i])))
        (slow if capped[:, i].any() else suspects)[i] = v
    uplinks = switch_verdicts(m, slow, switches or {}, t.slow_node_factor)
    crossing = np.zeros((n, n), dtype=bool)  # pairs through a slow uplink: the switch explains them
    for sv in uplinks:
        under = np.array([h in sv.below for h in m.hosts])
        crossing |= under[:, None] ^ under[None, :]
    for i, v in _intermittent(m, n_tests, t, cap, hop_class, crossing).items():
        passes = v.p_value is not None and v.p_value * n_tests <= t.fwer
        if (i in slow and passes and slow[i].kind == "capped"
                and v.effect_ratio <= t.slow_pair_factor * slow[i].effect_ratio):
            # bimodal: its slow pairs sit far below even its (diluted) capped effect, so it is fast
            # with most partners and slow in some rounds; "capped" would leave those pairs to look
            # like slow links. A node slow with every partner has its slow pairs at its capped
            # effect: it stays capped (six real hosts, one at half rate, read "intermittently slow:
            # 2 of its 5 pairs" when all five were at half rate)
            slow[i] = v
            continue
        if i not in slow:
            (slow if v.p_value is not None and v.p_value * n_tests <= t.fwer else suspects)[i] = v
            if i in slow:
                suspects.pop(i, None)
    explained = {h for sv in uplinks for h in sv.hosts}
    order = sorted(slow.values(), key=lambda v: v.effect_ratio)
    z_bar = holm_bar(cand.ravel(), n_tests, t.mad_k, t.fwer)
    best = int(np.nanargmin(error_k)) if np.isfinite(error_k).any() else None
    return NodeVerdicts(
        slow=tuple(v for v in order if v.host not in explained),
        hosts=tuple(m.hosts),
        collective=m.collective,
        sizes=tuple(m.sizes),
        class_median_busbw_GBps={k: v[-1] for k, v in m.class_median_bw.items()},
        z_threshold=z_bar,
        effect_spread=float(max(spreads, default=0.0)),
        suspects=tuple(sorted(suspects.values(), key=lambda v: v.effect_ratio)),
        switches=tuple(uplinks),
        uplink_pairs=tuple(uplink_pairs(m, switches or {}, t)),
        tests=n_tests,
        seen_below=None if best is None else float(np.exp(-z_bar * error_k[best])),
        noise_sigma=None if best is None else float(sigma_k[best]),
        noise_bound=best is not None and bool(2 * own_k[best] >= error_k[best]),
    )


def _capacity(m: PairModel) -> np.ndarray:
    """Per node, its best class's median busbw at the largest size: a node's pairs cannot beat its
    own cap, so what it reaches with its best peers bounds it (medians, so noise does not inflate it)."""
    best = np.full(len(m.hosts), np.nan)
    bw = m.bw[-1]
    for k in range(len(m.classes)):
        med = np.full(len(m.hosts), np.nan)
        for _, rows in _row_blocks(bw):  # each node's median its own: a block of rows at a time
            in_k = np.where(m.cls[rows] == k, bw[rows], np.nan)
            med[rows] = np.where(np.isfinite(in_k).any(axis=1), nanmedian_rows(in_k), np.nan)
        best = np.fmax(best, med)
    return best


def _verdict(
    m: PairModel,
    i: int,
    k: int,
    z: float,
    cap: np.ndarray,
    hop_class: Callable[[str, str], str],
    t: Thresholds,
    kind: str = "capped",
    slow_rounds: tuple[int, ...] = (),
    p_value: float | None = None,
) -> NodeVerdict:
    assert m.class_effect is not None and m.class_judged is not None
    host = m.hosts[i]
    row = m.bw[-1, i]
    partner_idx = np.nonzero(np.isfinite(row))[0]
    slow_with = 0
    for j in partner_idx:
        med = (m.class_median_bw.get(hop_class(host, m.hosts[j])) or [None])[-1]
        if med and row[j] <= t.slow_node_factor * med:
            slow_with += 1
    worst = sorted(partner_idx.tolist(), key=lambda j: row[j])[:5]
    return NodeVerdict(
        host=host,
        effect_ratio=float(np.exp(m.class_effect[k, i])),
        robust_z=z,
        partners=int(partner_idx.size),  # the partners slow_with counts among
        partners_slow=slow_with,
        median_busbw_GBps=float(np.median(row[partner_idx])) if partner_idx.size else None,
        slowest_partners={m.hosts[j]: float(row[j]) for j in worst},
        kind=kind,
        hop_class=m.classes[k],
        class_effect_ratio={
            m.classes[c]: float(np.exp(m.class_effect[c, i]))
            for c in range(len(m.classes))
            if m.class_judged[c, i]
        },
        capacity_GBps=float(cap[i]) if np.isfinite(cap[i]) else None,
        slow_rounds=slow_rounds,
        p_value=p_value,
    )


def intermittent_p_value(slow: int, pairs: int) -> float:
    """The chance that noise alone puts ``slow`` of a node's ``pairs`` (distinct partners) more than
    INTERMITTENT_Z below their cell: ``judge_nodes``' intermittency count test (there per hop class,
    ``_class_binomial``) for a suspect's re-test (``netbench.confirm.judge``), whose pairs are judged
    against references of their own class already; a node passes when p x tests <= fwer. 1.0 below
    INTERMITTENT_MIN_PAIRS: fewer slow pairs are links, not a node."""
    if slow < INTERMITTENT_MIN_PAIRS:
        return 1.0
    return binomial_sf(slow, max(pairs, slow), noise_tail())


def noise_tail() -> float:
    """The chance noise alone puts one pair more than INTERMITTENT_Z below its cell."""
    from statistics import NormalDist

    return min(0.5, TAIL_SAFETY * NormalDist().cdf(-INTERMITTENT_Z))


def _intermittent(
    m: PairModel,
    n_tests: int,
    t: Thresholds,
    cap: np.ndarray,
    hop_class: Callable[[str, str], str],
    explained: np.ndarray,
) -> dict[int, NodeVerdict]:
    """Nodes with more pairs far below their cell than noise explains: slow in some rounds only.
    ``explained``: pairs whose slowness something else owns (a slow uplink they cross).

    The nodes are weighed in order of their low pairs, most first, and a node found intermittent
    owns its low pairs: its partners in its slow rounds each show one low pair with it, which is
    its, not theirs. Without that, a node slow now and then made the end of a slow link beside it
    look intermittent too (the link and one slow round: two slow links on one node)."""
    sig = link_tests(m, t, explained).warn  # first: its (N, N) chances go before z is made
    bar = sig | sig.T
    z = np.empty(m.resid.shape)
    sigma = m.sigma_by_class()
    for _, rows in _row_blocks(z):  # a block of rows at a time: no (N, N) sigma and quotient beside z
        z[rows] = np.where(explained[rows], np.nan, m.resid[rows] / sigma[m.cls[rows]])
    low = np.isfinite(z) & (z <= -INTERMITTENT_Z)
    measured = np.isfinite(z)
    count = low.sum(axis=1)
    # per hop class: the assumed tail, or the learned one where the fleet's noise is heavier, or,
    # where the class has the residuals to learn from (MIN_LEARN), the share of its pairs past
    # INTERMITTENT_Z itself: the tail fitted over the worst 5% read 0.72% there under 1% congestion
    # bursts where 0.88% were, and at 1,024 nodes three healthy fabrics in twenty had a node "slow
    # in 24 of 1,023 pairs" (the pooled share counts a slow node's pairs too: conservative)
    # counted a class at a time (a bincount casts the (N, N) classes to a 0.13 GB int64 copy at 4,096);
    # pairs_k counts both triangles: twice each
    pairs_k = np.array([np.count_nonzero(measured & (m.cls == k)) for k in range(len(m.classes))])
    low_k = np.array([np.count_nonzero(low & (m.cls == k)) for k in range(len(m.classes))])
    p0 = np.array([max(noise_tail(), float(m.noise.tail(c).p_below(np.array([INTERMITTENT_Z]))[0]),
                       low_k[k] / pairs_k[k] if pairs_k[k] >= 2 * MIN_LEARN else 0.0)
                   for k, c in enumerate(m.classes)])
    out: dict[int, NodeVerdict] = {}
    pvals: dict[int, float] = {}
    lows: dict[int, np.ndarray] = {}
    owned = np.zeros_like(low)  # [j, i]: j's pair with i is i's, found intermittent before j
    candidates = np.nonzero((count >= INTERMITTENT_MIN_PAIRS) | (bar.sum(axis=1) >= 2))[0].tolist()
    for i in sorted(candidates, key=lambda i: (-int(count[i]), i)):
        mine = ~owned[i]
        low_i, shared = low[i] & mine, int((bar[i] & mine).sum())
        if low_i.sum() < INTERMITTENT_MIN_PAIRS and shared < 2:
            continue
        pvals[i] = _class_binomial(low_i, measured[i] & mine, m.cls[i], len(m.classes), p0)
        if shared >= 2:
            # two pairs of this node each past the slow-link family-wise bar: one node slow in some
            # rounds explains both, two cable faults on one node would be a coincidence. Behind a
            # loaded uplink most of a node's slow rounds are hidden (its cross pairs run at the
            # uplink's share anyway), so the count test alone misses it and its visible slow
            # rounds came out as slow links
            pvals[i] = min(pvals[i], t.fwer / n_tests)
        lows[i] = low_i
        if pvals[i] * n_tests <= t.fwer:
            owned[np.nonzero(low_i)[0], i] = True
    if not pvals:
        return out
    # the suspect band: Benjamini-Hochberg over the nodes' tests
    ranked = sorted(pvals.items(), key=lambda kv: kv[1])
    passed = [i for r, (i, p) in enumerate(ranked, 1) if p <= r * t.fdr / n_tests]
    keep = set(ranked[k][0] for k in range(len(passed))) if passed else set()
    for i in keep:
        js = np.nonzero(lows[i])[0]
        if js.size == 0:
            continue
        ratio = float(np.exp(np.median(m.resid[i, js])))
        if ratio > t.slow_node_factor:
            continue
        se = 1.2533 * float(np.median(sigma[m.cls[i, js]])) / np.sqrt(js.size)
        seen = m.rounds[i, js] if m.rounds is not None else np.zeros(0, dtype=int)
        rounds = tuple(sorted({int(r) for r in seen if r >= 0}))
        k = int(np.argmax(np.bincount(m.cls[i, js], minlength=len(m.classes))))
        v = _verdict(m, i, k, float(np.median(z[i, js])), cap, hop_class, t, "intermittent", rounds, pvals[i])
        out[i] = replace(v, effect_ratio=ratio, partners_slow=int(len(js)),
                         effect_ci=_interval(float(np.median(m.resid[i, js])), se))
    return out


@dataclass(frozen=True, eq=False)  # eq=False: arrays do not compare as one bool
class LinkTests:
    """The pairs' tests for slow links, each pair once (upper triangle, (N, N) masks): practically
    slow (<= slow_pair_factor of its prediction, ``mad_k`` of its class's sigmas below), and its
    chance under the class's noise tail (``PairModel.noise``, learned or assumed) past Holm's
    family-wise bar over every pair (``warn``) or Benjamini-Hochberg's only (``suspect``)."""

    p: np.ndarray  # the chance noise alone puts the pair this low; NaN: not a candidate
    warn: np.ndarray
    suspect: np.ndarray
    n_tests: int

    def worst_unflagged(self, limit: int) -> list[tuple[int, int]]:
        """The ``limit`` pairs most unlikely under the noise among those practically slow that pass
        neither bar, most unlikely first: worth measuring again where a re-test follows. Under heavy
        tails one sample cannot tell a link at 0.7 from the dozen healthy pairs of 32,640 that noise
        puts as low (Student-t, 3 degrees of freedom), and no bar passes it; a second and a third
        sample can, since the noise does not repeat and the link does (``netbench.confirm``)."""
        left = np.isfinite(self.p) & ~self.warn & ~self.suspect
        ii, jj = np.nonzero(left)
        order = np.argsort(self.p[ii, jj], kind="stable")[:limit]
        return [(int(ii[k]), int(jj[k])) for k in order]

    def near_unflagged(self, m: PairModel, t: Thresholds, factor: float, limit: int) -> list[tuple[int, int]]:
        """The ``limit`` pairs beyond the noise (``mad_k`` sigmas of their class below) that read at
        ``factor`` of their prediction or below in their one sample but not practically slow (no
        test's), most sigmas below first: where a re-test has budget left after the worst, a link at
        0.7 that noise lifted to 0.84, 4.4 sigmas below (one fabric in thirty under Student-t, 3
        degrees of freedom, at 256 nodes), is among them; a healthy pair is seldom slow in every re-run."""
        sigma = np.maximum(m.sigma_by_class(), 1e-12)  # per class: indexed by cls a block at a time
        bar = -t.mad_k * sigma
        found = [(np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.intp))]
        for lo, rows in _row_blocks(m.resid):
            r = m.resid[rows]
            near = np.triu(np.isfinite(r), 1 + lo) & np.isnan(self.p[rows]) & (r <= np.log(factor))
            near &= r <= bar[m.cls[rows]]
            ii, jj = np.nonzero(near)
            found.append((ii + lo, jj))
        ii, jj = (np.concatenate(v) for v in zip(*found, strict=True))
        z = m.resid[ii, jj] / sigma[m.cls[ii, jj]]
        order = np.argsort(z, kind="stable")[:limit]
        return [(int(ii[k]), int(jj[k])) for k in order]

    def slow_share(self) -> float:
        """The share of the fleet's pairs practically slow in their one sample (the pool the worst
        unflagged come from): how often a healthy pair reads as slow as a link, whatever the law."""
        return float(np.isfinite(self.p).sum()) / self.n_tests if self.n_tests else 0.0

    def bar(self, m: PairModel, klass: str, alpha: float, k: float) -> float:
        """The bar (sigmas of ``klass`` below) the weakest warning had to pass at its Holm step, or
        the first step's when none passed; never below ``k``."""
        step = max(self.n_tests - max(int(self.warn.sum()) - 1, 0), 1)
        return max(k, m.noise.tail(klass).bar(alpha / step))


def rerun_share(m: PairModel, t: Thresholds, factor: float | None = None) -> float:
    """How often a healthy pair re-run beside a control reads slow against it (``netbench.confirm.
    judge``: at most ``slow_pair_factor`` and ``mad_k`` of the fleet's sigmas below): the share of
    the fleet's residual differences, each pair's against another's, that low. A re-run's ratio
    carries two samples' noise, the link's and its control's: under Student-t noise (3 degrees of
    freedom) at 256 nodes 0.55% of them against 0.17% of single samples (``LinkTests.slow_share``),
    and a healthy candidate was confirmed at 0.79x and 0.80x in two of three re-runs."""
    r = m.resid[np.triu(np.isfinite(m.resid), 1)]
    if len(r) < 3:
        return 0.0
    d = r - np.roll(r, len(r) // 2)  # each against one half the fleet's list away: independent pairs
    cut = np.log(t.slow_pair_factor if factor is None else factor)  # a node's re-test: slow_node_factor
    return float(np.mean((d <= cut) & (d <= -t.mad_k * m.sigma)))


def link_tests(m: PairModel, t: Thresholds, explained: np.ndarray | None = None) -> LinkTests:
    """Every pair's slow-link test (``rules/slow_pair`` and the intermittency test read the same),
    leaving out ``explained`` pairs (something else owns their slowness: a slow uplink)."""
    finite = np.isfinite(m.resid) if explained is None else np.isfinite(m.resid) & ~explained
    upper = np.triu(finite, 1)
    n_pairs = int(upper.sum())
    p = np.full(m.resid.shape, np.nan)
    if n_pairs >= 3:  # one or two pairs have no peers to be judged against
        bar = -t.mad_k * m.sigma_by_class()  # per class: indexed by cls a block of rows at a time
        cand = upper  # upper's last use: narrowed in place to the candidates
        for _, rows in _row_blocks(m.resid):
            r = m.resid[rows]
            cand[rows] &= (r <= np.log(t.slow_pair_factor)) & (r <= bar[m.cls[rows]])
        p[cand] = m.noise.p_values(m.resid[cand], m.cls[cand], m.classes)
    warn = holm_mask(p, n_pairs, t.fwer)
    return LinkTests(p, warn, bh_mask(p, n_pairs, t.fdr) & ~warn, n_pairs)


ROW_BLOCK = 256
"""Rows of the (N, N) matrices a test takes at a time: its temporaries a few MB, not 0.1 GB each."""


def _row_blocks(matrix: np.ndarray) -> Iterator[tuple[int, slice]]:
    """(first row, rows) of ``matrix``, ROW_BLOCK rows at a time."""
    for lo in range(0, matrix.shape[0], ROW_BLOCK):
        yield lo, slice(lo, lo + ROW_BLOCK)


def _interval(effect: float, se: float) -> tuple[float, float]:
    """The 95% interval of an effect (log) with standard error ``se``, as ratios."""
    return float(np.exp(effect - 1.96 * se)), float(np.exp(effect + 1.96 * se))


def _class_binomial(
    low: np.ndarray, measured: np.ndarray, cls: np.ndarray, n_classes: int, p0: np.ndarray
) -> float:
    """One node's intermittency p-value: the smallest over its hop classes of the chance of this many
    low pairs among its partners of that class, times the classes tested (Bonferroni, so it stays one
    test of the family). Per class because slowness shows where the path is not already narrower:
    a NIC slow in a third of the rounds behind a 2:1 uplink slows its own leaf's pairs (15 partners
    at 256 nodes) and not the 240 cross-spine ones, and pooled over all 255 its 4 low pairs look
    like noise."""
    tested = [(int((low & (cls == k)).sum()), int((measured & (cls == k)).sum()), k)
              for k in range(n_classes)]
    tested = [(c, n, k) for c, n, k in tested if n]
    return min(1.0, len(tested) * min(binomial_sf(c, n, float(p0[k])) for c, n, k in tested))
