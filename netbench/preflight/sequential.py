"""Preflight's sequential stage: the budget left after the quick pass and the escalation buys more
rounds of pairs, until every node is decided (drained or cleared) or the budget ends.

Why: the quick pass gives each node a few partners on its own leaf, enough to see a node at half
rate but not one 10% slow (two noise sigmas at 5% noise) nor one slow in 30% of its rounds (it is
fast in all three with a chance of 1/3). Every node measures at once in a round of pairs, so a round
costs the same whether it re-tests one node or all of them: each round here pairs every node with
a peer of its own leaf, the undecided ones with peers already cleared, and each node's evidence
grows by one *draw* a round.

A draw is a node's pair in one round at the largest size, as log(busbw / reference): the reference is
the median of that round's control pairs (neither end leaning slow) of the same hop class and load,
else of that class over the rounds. Only draws of the node's own leaf are weighed when the topology
places it on a leaf with peers: behind an oversubscribed uplink a capped or intermittent NIC shows
only there, and a slow uplink never does. A draw with a partner that leans slow more strongly is not
weighed (weighing twice finds who leans).

Two sequential probability ratio tests (Wald) per node, on its draws:
- shift (a capped node): draws ~ N(mu, sigma); H0 mu = log((1 + f) / 2), H1 mu = log(f), f the
  policy's slow_node_factor (0.9: a node certainly 10% slower fails; one 5% slower does not),
  less the partner that adds most (a capped node is slow with every partner, a slow link's end
  with one).
  Each draw is clipped CLIP bulk sigmas past the hypotheses, so that a few outliers of a heavy tail
  cannot decide a node alone, and the means and variance of clipped draws under either hypothesis
  are the control draws' own, moved (``ShiftModel``): no assumed shape of the noise.
- count (a node slow now and then): whether each draw is slow (below log(f) - 2 bulk sigmas); H0 the
  chance of that in the draw's round among the controls (a round congested for every pair weighs
  little; at least P0_FLOOR), H1 a node slow in a share SHARE of its rounds on top of that noise.
  A slow draw counts once per partner: a slow link met again is not a node slow now and then.
Boundaries A = log((1 - BETA) / alpha), B = log(BETA / (1 - alpha)), alpha = fwer / (2 x nodes):
family-wise over every node and both tests. Drained when either test crosses A, cleared when both
cross B, else undecided; the evidence strength is the likelihood ratio reached.

What this assumes of the analysis: nothing of its noise model. Its verdicts arrive as re-test
records (``reports.analyses.Retest``): a node drained here is "confirmed" (the slow_node rule makes
it a failure), one cleared here is "cleared" where it was a suspect; the rules turn those into the
findings, and the drain rule (``reports.verdict.drain_and_check``) reads the findings as before.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np

from netbench.confirm import Budget, Measure, Pair, PhaseGate
from netbench.inventory.topology import LEAF, leaf_of
from netbench.reports.analyses import Retest
from netbench.reports.pairrows import PairRows

SHARE = 0.25
"""H1 of the count test: slow in this share of its rounds (a node slow in 30% is caught)."""
BETA = 0.02
"""The chance a node at either H1 is cleared: recall >= 0.95 wants a margin."""
P0_FLOOR = 0.01
"""The least chance of a slow draw under H0: no tail, however thin the controls' looks, is trusted
beyond it (three slow draws with three partners then drain a node at 1,024 nodes)."""
PRIOR_DRAWS = 20.0
"""The weight, in control draws, of every round's rate in one round's (``weigh``)."""
CLIP = 3.0
"""A draw's weight in the shift test is that of a draw at most CLIP sigmas past the hypotheses."""
MIN_CONTROLS = 30
"""Control draws the shift test learns the noise's shape from; fewer: a normal at their spread."""
MIN_REF = 5
"""Control pairs a reference needs (a round, class and load; else the class over the rounds)."""
SIGMA_FLOOR = 0.01
"""The least noise scale believed (log busbw): no fabric is taken as steadier than 1% a pair, where
a few controls that happened to agree would otherwise let one draw decide a node."""
MAX_PHASES = 32
"""Rounds a launch plans (the gate ends it once every node is decided): a launch's start-up costs
seconds at 1,024 nodes, a round a fraction of one."""
MAX_LAUNCHES = 8
"""Launches at most: each ends when its rounds are used or the gate stops it, undecided nodes left."""
DRAINED, CLEARED, UNDECIDED = "drained", "cleared", "undecided"


@dataclass(frozen=True)
class NodeEvidence:
    """One node's draws and both tests."""

    host: str
    draws: int
    """Draws weighed (its own leaf, partners not leaning slow)."""
    mean: float
    """Their mean log ratio to the references."""
    shift_llr: float
    slow: int
    """Slow draws, a partner once."""
    count_llr: float
    decision: str
    ratios: Mapping[str, float] = field(default_factory=dict)
    """Partner -> the median ratio of its draws with this node."""

    def effect(self, sigma: float) -> tuple[float, float, float]:
        """The ratio to the controls and its 95% interval."""
        half = 1.96 * sigma / math.sqrt(self.draws) if self.draws else math.inf
        return math.exp(self.mean), math.exp(self.mean - half), math.exp(self.mean + half)

    @property
    def leaning_slow(self) -> bool:
        return self.decision == DRAINED or self.shift_llr > 0 or self.count_llr > 0


@dataclass(frozen=True)
class Decisions:
    """Every node's evidence after the draws so far, and the bars it was judged by."""

    nodes: dict[str, NodeEvidence]
    sigma: float
    upper: float
    lower: float
    factor: float

    def of(self, decision: str) -> list[str]:
        return sorted(h for h, e in self.nodes.items() if e.decision == decision)

    @property
    def undecided(self) -> list[str]:
        return self.of(UNDECIDED)

    def why(self, e: NodeEvidence) -> str:
        """What decided a node (or how far it got), with the evidence strength."""
        ratio, lo, hi = e.effect(self.sigma)
        shift = (f"{_pct(1 - ratio)} slower than the controls (95% CI {_pct(1 - hi)} to {_pct(1 - lo)}) "
                 f"in {e.draws} round(s) with known-good partners")
        count = f"slow in {e.slow} of {e.draws} round(s) with distinct partners"
        if e.decision == DRAINED:
            if e.shift_llr >= self.upper:
                return (f"{shift}; likelihood ratio {_odds(e.shift_llr)} for >= {_pct(1 - self.factor)} "
                        "slower")
            return (f"slow now and then: {count}; likelihood ratio {_odds(e.count_llr)} for slow in "
                    f">= {SHARE:.0%} of its rounds")
        if e.decision == CLEARED:
            return (f"{shift}; likelihood ratio {_odds(-max(e.shift_llr, e.count_llr))} for healthy "
                    f"against both slow hypotheses")
        lean = "slow" if e.leaning_slow else "healthy"
        llr = max(e.shift_llr, e.count_llr) if e.leaning_slow else -max(e.shift_llr, e.count_llr)
        return f"undecided, leaning {lean} ({_odds(llr)}): {shift}; {count}"

    def retests(self, earlier: Mapping[str, Retest]) -> dict[str, Retest]:
        """Re-test records for the analysis, to lay over ``earlier`` (the escalation's), where they
        differ from it: every node drained here (confirmed, over the escalation's confirmation too:
        its finding's severity then goes by this drain, a test for the failure's size over all of its
        draws, not by the escalation's few pairs, whose interval left two nodes 10% slow of eight a
        warning or info and off the drain list); one cleared here that the escalation re-tested
        (cleared: this weighs all of its draws, the escalation's too); an undecided one that leans
        slow or that the escalation re-tested (inconclusive), unless the escalation's verdict still
        stands (its confirmation, or its clearing of a node that does not lean slow)."""
        out: dict[str, Retest] = {}
        for h, e in sorted(self.nodes.items()):
            before = earlier.get(h)
            said = before.verdict if before is not None else None
            if e.decision == DRAINED:
                verdict = "confirmed"
            elif e.decision == CLEARED:
                verdict = "cleared" if before is not None else ""
            elif said == "confirmed" or (said == "cleared" and not e.leaning_slow):
                verdict = ""
            else:
                verdict = "inconclusive" if e.leaning_slow or before is not None else ""
            if verdict and (verdict != said or e.decision == DRAINED):
                out[h] = Retest(h, "node", verdict, dict(e.ratios), f"sequential test: {self.why(e)}")
        return out

    def summary(self, limit: int = 10) -> list[str]:
        """The decision per node class with its certainty: drained and undecided nodes one by one (at
        most ``limit`` each), the cleared ones together with the weakest clearing."""
        lines = []
        for decision in (DRAINED, UNDECIDED):
            hosts = self.of(decision)
            if decision == DRAINED or hosts:
                lines.append(f"{decision} {len(hosts)}" + (":" if hosts else ""))
            for h in hosts[:limit]:
                lines.append(f"  {h}: {self.why(self.nodes[h])}")
            if len(hosts) > limit:
                lines.append(f"  ... and {len(hosts) - limit} more (run.json's preflight.sequential)")
        cleared = self.of(CLEARED)
        if cleared:
            weakest = max(cleared, key=lambda h: max(self.nodes[h].shift_llr, self.nodes[h].count_llr))
            e = self.nodes[weakest]
            lines.append(
                f"cleared {len(cleared)}: each at least {_odds(-max(e.shift_llr, e.count_llr))} for healthy "
                f"against >= {_pct(1 - self.factor)} slower and against slow in >= {SHARE:.0%} of its rounds "
                f"(the weakest, {weakest}: {e.draws} rounds)"
            )
        return lines

    def to_json(self) -> dict[str, Any]:
        """run.json's record: the counts, the bars, and every node not cleared."""
        return {
            "counts": {d: len(self.of(d)) for d in (DRAINED, CLEARED, UNDECIDED)},
            "noise_sigma": round(self.sigma, 4),
            "log_lr_bounds": [round(self.lower, 3), round(self.upper, 3)],
            "nodes": {h: {"decision": e.decision, "draws": e.draws, "ratio": round(math.exp(e.mean), 4),
                          "shift_log_lr": round(e.shift_llr, 3), "slow_draws": e.slow,
                          "count_log_lr": round(e.count_llr, 3), "why": self.why(e)}
                      for h, e in sorted(self.nodes.items()) if e.decision != CLEARED},
        }


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _odds(llr: float) -> str:
    """A likelihood ratio from its log, as odds ("3e+05:1")."""
    return f"{math.exp(min(llr, 700.0)):.2g}:1" if llr >= 0 else f"1:{math.exp(min(-llr, 700.0)):.2g}"


def noise_scale(x: np.ndarray) -> float:
    """The spread of control draws (log ratios) as a normal sigma, read where it matters: the
    largest of the MAD's and what the 16th, 5th and 1st percentiles below the median imply (each
    where there are draws enough to place it). Bandwidth noise is skewed toward slow and heavier-
    tailed than a normal: its lower tail, not its centre, makes a healthy node look slow."""
    if len(x) < 2:
        return math.nan
    med = float(np.median(x))
    scales = [1.4826 * float(np.median(np.abs(x - med)))]
    for q in (0.16, 0.05, 0.01):
        if len(x) * q >= 5:
            scales.append((med - float(np.quantile(x, q))) / -NormalDist().inv_cdf(q))
    return max(scales + [SIGMA_FLOOR])


@dataclass(frozen=True)
class ShiftModel:
    """The shift test on the controls' own noise: a draw is clipped to [lo, hi] (CLIP bulk scales
    past the hypotheses), and under H0 / H1 a node's clipped draws look like the control draws
    moved by mu0 / mu1 and clipped: their means m0 / m1 and the variance ``var`` are the controls'
    own. With 5% normal noise that is the normal test; where 15% of the pairs run at a third in
    contended rounds, those draws weigh what they weigh among the controls, not twenty sigmas."""

    mu1: float
    scale: float
    """The bulk's spread (MAD as a normal sigma), at least SIGMA_FLOOR: where "slow" starts."""
    spread: float
    """The tail-aware spread (``noise_scale``): the effect's confidence interval."""
    lo: float
    hi: float
    m0: float
    m1: float
    var: float

    @classmethod
    def of(cls, controls: np.ndarray, mu0: float, mu1: float) -> ShiftModel:
        spread = noise_scale(controls)
        spread = SIGMA_FLOOR if math.isnan(spread) else spread
        if len(controls) < MIN_CONTROLS:  # too few to learn a shape from: normal at the tail's spread
            lo, hi = mu1 - CLIP * spread, mu0 + CLIP * spread
            return cls(mu1, spread, spread, lo, hi, mu0, mu1, spread**2)
        med = float(np.median(controls))
        scale = max(1.4826 * float(np.median(np.abs(controls - med))), SIGMA_FLOOR)
        lo, hi = mu1 - CLIP * scale, mu0 + CLIP * scale
        under0 = np.clip(controls + mu0, lo, hi)
        under1 = np.clip(controls + mu1, lo, hi)
        var = max(float((under0.var() + under1.var()) / 2), SIGMA_FLOOR**2)
        return cls(mu1, scale, spread, lo, hi, float(under0.mean()), float(under1.mean()), var)

    def increments(self, x: np.ndarray) -> np.ndarray:
        """Each draw's log likelihood ratio, H1 against H0."""
        return (self.m1 - self.m0) / self.var * (np.clip(x, self.lo, self.hi) - (self.m0 + self.m1) / 2)


def weigh(
    rows: PairRows, hosts: list[str], switches: Mapping[str, str], factor: float, fwer: float
) -> Decisions:
    """Both tests of every node of ``hosts`` on every pair row so far (module docstring): the draws'
    references left out pairs with a node that leans slow, found by weighing twice."""
    f = min(max(factor, 1e-6), 1 - 1e-6)
    mu0, mu1 = math.log((1 + f) / 2), math.log(f)
    alpha = fwer / (2 * max(len(hosts), 1))
    upper, lower = math.log((1 - BETA) / alpha), math.log(BETA / (1 - alpha))
    ok = rows.ok & (rows.busbw > 0)
    empty = Decisions({h: NodeEvidence(h, 0, 0.0, 0.0, 0, 0.0, UNDECIDED) for h in hosts},
                      SIGMA_FLOOR, upper, lower, f)
    if not ok.any():
        return empty
    top = ok & (rows.nbytes == rows.nbytes[ok].max())
    load, klass, class_names = rows.facts(switches, ok)
    mine = rows.mask_of(hosts)
    idx = np.flatnonzero(top & mine[rows.a] & mine[rows.b])
    if not len(idx):
        return empty
    a, b, rnd = rows.a[idx], rows.b[idx], rows.round[idx]
    k, n = klass[idx], load[idx]
    logbw = np.log(rows.busbw[idx])
    leaf_code = class_names.index(LEAF) if LEAF in class_names else -2
    # a node is judged on its own leaf's pairs when it has leaf peers among the hosts, else on all
    leaves = Counter(leaf_of(h, switches) for h in hosts)
    on_leaf = np.array([leaf_of(h, switches) is not None and leaves[leaf_of(h, switches)] >= 2
                        for h in rows.names], dtype=bool)
    in_class = k == leaf_code
    counts_a, counts_b = in_class | ~on_leaf[a], in_class | ~on_leaf[b]
    lean = np.zeros(len(rows.names))  # how strongly each node leans slow (its larger log LR, > 0)
    out = empty
    for _ in range(2):
        control = (lean[a] <= 0) & (lean[b] <= 0)
        x = logbw - _references(rnd, k, n, logbw, control)
        judged = control & np.isfinite(x) & (counts_a | counts_b)
        out = _tests(rows.names, hosts, a, b, rnd, x, counts_a, counts_b, lean, judged,
                     ShiftModel.of(x[judged], mu0, mu1), (upper, lower), f)
        lean = np.array([max(out.nodes[h].shift_llr, out.nodes[h].count_llr) if h in out.nodes else 0.0
                         for h in rows.names])
    return out


def _references(rnd: np.ndarray, k: np.ndarray, n: np.ndarray, logbw: np.ndarray,
                control: np.ndarray) -> np.ndarray:
    """Each draw's reference (log): the median of the control draws of its round, class and load
    with at least MIN_REF of them, else of its round and class, else of its class over the rounds."""
    import pandas as pd

    frame = pd.DataFrame({"r": rnd, "k": k, "n": n, "y": logbw})
    ref = np.full(len(frame), np.nan)
    for keys in (["r", "k", "n"], ["r", "k"], ["k"]):
        grouped = frame[control].groupby(keys)["y"].agg(["median", "size"])
        grouped = grouped[grouped["size"] >= MIN_REF]["median"]
        if grouped.empty:
            continue
        found = frame[keys].merge(grouped.rename("m").reset_index(), on=keys, how="left")["m"].to_numpy()
        ref = np.where(np.isnan(ref), found, ref)
    return ref


def _tests(
    names: list[str], hosts: list[str], a: np.ndarray, b: np.ndarray, rnd: np.ndarray, x: np.ndarray,
    counts_a: np.ndarray, counts_b: np.ndarray, lean: np.ndarray, judged: np.ndarray,
    model: ShiftModel, bounds: tuple[float, float], factor: float,
) -> Decisions:
    """Both tests of each host from its draws: a row is a draw of each end that counts it, but of
    an end whose partner leans slow more strongly than itself (a slow pair is the slower end's).
    The shift test leaves out the partner that adds most to it: a node slow with one partner only
    is a slow link (or that partner), not a capped node, which is slow with every partner."""
    upper, lower = bounds
    tau = model.mu1 - 2 * model.scale
    slow = x <= tau
    # H0 of the count test: each round's rate of slow control draws, drawn towards the overall one
    pooled = float(slow[judged].mean()) if judged.any() else 0.0
    rounds, inverse = np.unique(rnd, return_inverse=True)
    per_n = np.bincount(inverse, weights=judged.astype(float), minlength=len(rounds))
    per_slow = np.bincount(inverse, weights=(judged & slow).astype(float), minlength=len(rounds))
    p0 = np.maximum(P0_FLOOR, (per_slow + PRIOR_DRAWS * pooled) / (per_n + PRIOR_DRAWS))[inverse]
    p1 = p0 + (1 - p0) * SHARE
    shift_inc = model.increments(x)
    fine = np.isfinite(x)
    node = np.concatenate([a, b])
    partner = np.concatenate([b, a])
    blamed_b, blamed_a = (lean[b] > 0) & (lean[b] > lean[a]), (lean[a] > 0) & (lean[a] > lean[b])
    use = np.concatenate([counts_a & ~blamed_b, counts_b & ~blamed_a]) & np.concatenate([fine, fine])
    node, partner = node[use], partner[use]
    xx, inc = np.concatenate([x, x])[use], np.concatenate([shift_inc, shift_inc])[use]
    sl = np.concatenate([slow, slow])[use]
    slow_w = np.log(np.concatenate([p1, p1])[use] / np.concatenate([p0, p0])[use])
    # a slow draw counts once per partner (the first): a slow link met again is not a node slow now and then
    key = node * len(names) + partner
    order = np.lexsort((~sl, key))
    first_slow = np.zeros(len(key), dtype=bool)
    k_sorted, s_sorted = key[order], sl[order]
    first_slow[order] = s_sorted & np.r_[True, k_sorted[1:] != k_sorted[:-1]]
    count_inc = np.where(sl, np.where(first_slow, slow_w, 0.0), math.log(1 - SHARE))
    m = len(names)
    draws = np.bincount(node, minlength=m)
    sums = np.bincount(node, weights=xx, minlength=m)
    pairs, inverse = np.unique(key, return_inverse=True)
    by_partner = np.bincount(inverse.reshape(-1), weights=inc, minlength=len(pairs))
    strongest = np.zeros(m)
    np.maximum.at(strongest, pairs // len(names), np.maximum(by_partner, 0.0))
    shift = np.bincount(node, weights=inc, minlength=m) - strongest
    count = np.bincount(node, weights=count_inc, minlength=m)
    slows = np.bincount(node, weights=first_slow.astype(float), minlength=m)
    code = {h: i for i, h in enumerate(names)}
    nodes = {}
    for h in hosts:
        i = code.get(h)
        if i is None or not draws[i]:
            nodes[h] = NodeEvidence(h, 0, 0.0, 0.0, 0, 0.0, UNDECIDED)
            continue
        s_llr, c_llr = float(shift[i]), float(count[i])
        if s_llr >= upper or c_llr >= upper:
            decision = DRAINED
        elif s_llr <= lower and c_llr <= lower:
            decision = CLEARED
        else:
            decision = UNDECIDED
        ratios = {} if decision == CLEARED else _ratios(names, partner[node == i], xx[node == i])
        nodes[h] = NodeEvidence(h, int(draws[i]), float(sums[i] / draws[i]), s_llr, int(slows[i]), c_llr,
                                decision, ratios)
    return Decisions(nodes, model.spread, upper, lower, factor)


def _ratios(names: list[str], partner: np.ndarray, x: np.ndarray) -> dict[str, float]:
    """Partner -> the median ratio of a node's draws with it (for the nodes not cleared: a few)."""
    per: dict[int, list[float]] = {}
    for g, v in zip(partner.tolist(), x.tolist(), strict=True):
        per.setdefault(g, []).append(v)
    return {names[g]: round(math.exp(statistics.median(v)), 3) for g, v in per.items()}


# -- which pairs ---------------------------------------------------------------------------------------
def plan_rounds(
    decisions: Decisions, hosts: list[str], switches: Mapping[str, str], met: Counter[frozenset], phases: int
) -> list[list[Pair]]:
    """``phases`` rounds of disjoint pairs over the hosts not drained: within each leaf, each
    undecided node (leaning slow first) with a peer that does not lean slow and that it has met the
    fewest times, then the others among themselves the same way; the few left alone (odd leaves,
    unplaced hosts) with each other. ``met`` counts the pairs met so far and is updated."""
    pools: dict[str | None, list[str]] = {}
    for h in hosts:
        e = decisions.nodes.get(h)
        if e is None or e.decision != DRAINED:
            pools.setdefault(leaf_of(h, switches), []).append(h)
    order = {h: i for i, h in enumerate(hosts)}

    def lean(h: str) -> float:
        e = decisions.nodes.get(h)
        return -max(e.shift_llr, e.count_llr) if e is not None else 0.0

    undecided = set(decisions.undecided)
    trusted = {h for h, e in decisions.nodes.items() if not e.leaning_slow}
    out = []
    for k in range(phases):
        pairs: list[Pair] = []
        alone: list[str] = []
        for members in pools.values():
            shift = k % len(members)
            free = members[shift:] + members[:shift]  # a different first pick each round
            busy: set[str] = set()
            for s in sorted((h for h in free if h in undecided), key=lean):
                if s in busy:
                    continue
                pool = [g for g in free if g not in busy and g != s]
                good = [g for g in pool if g in trusted]
                if good or pool:
                    g = min(good or pool, key=lambda g: (met[frozenset((s, g))], order[g]))
                    pairs.append((s, g))
                    busy |= {s, g}
            rest = [h for h in free if h not in busy]
            while len(rest) >= 2:
                s = rest.pop(0)
                g = min(rest, key=lambda g: (met[frozenset((s, g))], order[g]))
                rest.remove(g)
                pairs.append((s, g))
            alone += rest
        while len(alone) >= 2:
            s = alone.pop(0)
            g = min(alone, key=lambda g: (met[frozenset((s, g))], order[g]))
            alone.remove(g)
            pairs.append((s, g))
        met.update(frozenset(p) for p in pairs)
        out.append(pairs)
    return out


# -- the procedure ---------------------------------------------------------------------------------------
@dataclass
class UntilDecided(PhaseGate):
    """The budget's gate, which also ends the launch once every node is decided (``decided`` is
    asked before each round but the first: the rows of the rounds so far)."""

    decided: Callable[[], bool] = lambda: False
    done: bool = False

    def __call__(self, phase: Any) -> bool:
        if not self.skipped and self.started and self.decided():
            self.done = True
            self.skipped.append(phase.name)
            return False
        return super().__call__(phase)


@dataclass(frozen=True)
class SequentialSetup:
    """What the stage needs from preflight: its hosts, topology, thresholds, rows and budget."""

    hosts: list[str]
    """Hosts to decide (live, not lost by a launch)."""
    switches: Mapping[str, str]
    factor: float
    """The policy's slow_node_factor: H1 of the shift test."""
    fwer: float
    read_rows: Callable[[], PairRows]
    budget: Budget
    first_round: int
    """The rows' round of the first sequential round."""
    phase_s: float
    startup_s: float
    echo: Callable[[str], None]


@dataclass
class Sequential:
    """What the stage decided, each launch's record, and why it stopped."""

    decisions: Decisions
    launches: list[dict[str, Any]] = field(default_factory=list)
    stopped: str = ""
    launch_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return self.decisions.to_json() | {"launches": self.launches, "stopped": self.stopped}


def run_sequential(setup: SequentialSetup, measure: Measure) -> Sequential:
    """Weigh every node on what was measured; while some are undecided and a launch and a round fit
    the budget, launch rounds (``plan_rounds``) that stop once all are decided; then the decisions."""
    budget, echo = setup.budget, setup.echo

    hosts = list(setup.hosts)  # less those a launch loses: no more draws will come from them

    def weighed() -> Decisions:
        return weigh(setup.read_rows(), hosts, setup.switches, setup.factor, setup.fwer)

    out = Sequential(weighed())
    met: Counter[frozenset] = Counter(frozenset(p) for p in setup.read_rows().pairs())
    first, phase_s, startup_s = setup.first_round, setup.phase_s, setup.startup_s
    echo(f"# sequential tests: {_tally(out.decisions)} after the quick pass and the escalation")
    for _ in range(MAX_LAUNCHES):
        if not out.decisions.undecided:
            out.stopped = "every node decided"
            break
        room = int((budget.left() - startup_s) / max(phase_s, 1e-3))
        if room < 1:
            out.stopped = (f"budget: a launch needs ~{startup_s + phase_s:.0f} s (start-up + one round), "
                           f"{max(budget.left(), 0):.0f} s left")
            break
        plan = plan_rounds(out.decisions, hosts, setup.switches, met, min(MAX_PHASES, room))
        echo(f"# sequential: up to {len(plan)} round(s) for {len(out.decisions.undecided)} undecided "
             f"node(s), {max(budget.left(), 0):.0f} s left")
        gate = UntilDecided(budget, prior_s=phase_s, decided=_progress(out, weighed, echo, len(plan)))
        t0 = budget.elapsed()
        phases = [(f"sequential {i + 1}/{len(plan)}", first + i, p) for i, p in enumerate(plan)]
        outcome = measure(phases, gate)
        out.launch_s += budget.elapsed() - t0
        startup_s = outcome.startup_s or startup_s
        phase_s = max(gate.durations() or [phase_s])
        out.launches.append({"rounds": [first, first + len(gate.started) - 1], "planned": len(plan),
                             "run": len(gate.started), "startup_s": outcome.startup_s,
                             "phase_s": [round(d, 3) for d in gate.durations()]})
        first += len(plan)
        lost = {f.host for f in outcome.faults if f.host}
        hosts[:] = [h for h in hosts if h not in lost]
        out.decisions = weighed()
        if gate.skipped and not gate.done:
            out.stopped = "budget"
            break
        if not gate.started:
            out.stopped = "nothing measured"
            break
    else:
        out.stopped = f"{MAX_LAUNCHES} launches"
    if not out.stopped:
        out.stopped = "every node decided"
    echo(f"# sequential tests stopped ({out.stopped}): {_tally(out.decisions)}")
    for line in out.decisions.summary():
        echo(f"#   {line}")
    return out


def _tally(d: Decisions) -> str:
    return (f"{len(d.of(DRAINED))} drained, {len(d.of(CLEARED))} cleared, {len(d.undecided)} undecided "
            f"of {len(d.nodes)}")


def _progress(out: Sequential, weighed: Callable[[], Decisions], echo: Callable[[str], None],
              planned: int) -> Callable[[], bool]:
    """The gate's question, asked before each round but the first: weigh the rows so far, say how
    far the decisions got (a progress line a round), and whether every node is decided."""
    done = [0]

    def decided() -> bool:
        done[0] += 1
        out.decisions = weighed()
        echo(f"# sequential round {done[0]}/{planned}: {_tally(out.decisions)}")
        return not out.decisions.undecided

    return decided
