"""Straggler analysis: which rank (GPU, host) arrives last at a collective, how often, at what cost.

Read from the arrivals of each measured point (``netbench.collectives.arrivals.ArrivalRecord``: per
iteration, who arrived last and how long after the second-last). For one point:

- An iteration counts (is *decisive*) only when the last rank arrived more than twice the clock
  bound after the second-last (``clock_err_us`` bounds each rank's offset, so two ranks' difference
  is uncertain by up to twice it): below that the clocks, not the ranks, may have ordered them.
- A host far late every k-th iteration (below) is *periodic*, whatever else it does.
- Someone is always last. Otherwise a host is the point's straggler when it is last in more decisive
  iterations than chance allows (its share of the ranks, P/n; exact binomial tail, Bonferroni over
  the group's hosts, ``ALPHA``) and in at least ``MIN_SHARE`` times its chance share of them (at
  most half): *persistent*.
- A host last by far (``OUTLIER`` times the point's median gap between last and second-last, and
  beyond the clock bound) in almost every k-th iteration and seldom otherwise is *periodic* (every
  k-th: a timer, a checkpoint, a periodic daemon); the smallest k from 2 whose one residue class
  holds most of that host's far lateness (summed, not counted: a loaded machine's hiccups of a few
  ms are "far" too, and as many of them as periodic 30 ms delays hide nothing of the delays), is
  nearly all of them, and has few outside it.
- Decisive last arrivals spread over many hosts, none beyond chance: *moving* (system noise): no
  one to drain, reported in the point's summary, never a finding.
- The wait it imposes: over its decisive iterations, how long after the second-last it arrived,
  as a share of the iteration's time (nccl-tests' per-iteration time, the slowest rank's own).

Across the sizes of a group, a host named in most (more than half) of the points where anyone was
decisively late is the group's straggler (on a busy machine a host is beyond chance in a size or two
now and then: the scheduler's doing, not the host's); the finding says in how many, and which kind most of
them were. Its rank (and GPU: local rank r % P on a GPU run) is the one of its ranks most often
last.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
from netbench.collectives.arrivals import ArrivalRecord
from netbench.reports.stats import binomial_sf

ALPHA = 0.01
MIN_DECISIVE = 5  # fewer decisive iterations than this decide nothing
MIN_SHARE = 1.5  # a persistent straggler: last in 1.5x its chance share of decisive iterations (<= half)
PERIOD_CLASS_SHARE = 0.6  # of its far lateness (summed) in one residue class ...
PERIOD_HIT_RATE = 0.6  # ... which it is far late in at least this often
PERIOD_MIN_HITS = 3
MAX_PERIOD = 64
OUTLIER = 5.0  # "by far": this many times the point's median gap between the last two arrivals


@dataclass(frozen=True)
class PointVerdict:
    """One point (a row's collective, size, placement, engine) of one group."""

    group: str | None
    hosts: tuple[str, ...]
    collective: str
    bytes: int
    in_place: bool
    engine: str
    iters: int
    clock_err_us: float
    decisive: int  # iterations whose last arrival beat twice the clock bound
    kind: str  # persistent | periodic | moving | none (too few decisive iterations)
    host: str | None = None  # the straggler host (persistent / periodic)
    rank: int | None = None  # its group rank most often last
    local_rank: int | None = None  # that rank on its host (its GPU on a GPU run)
    last_count: int = 0  # decisive iterations the host arrived last in
    p_value: float | None = None
    period: int | None = None
    late_us: float = 0.0  # mean of last_by_us over the host's decisive iterations
    wait_share: float = 0.0  # late_us / the iteration's time, mean over those iterations
    device: str = "cpu"


@dataclass
class GroupStragglers:
    """A group's points and the hosts named across them."""

    group: str | None
    hosts: tuple[str, ...]
    points: list[PointVerdict] = field(default_factory=list)

    @property
    def judged(self) -> list[PointVerdict]:
        """The points where someone was decisively late often enough to judge."""
        return [p for p in self.points if p.kind != "none"]

    def named(self) -> dict[str, list[PointVerdict]]:
        out: dict[str, list[PointVerdict]] = {}
        for p in self.points:
            if p.host is not None:
                out.setdefault(p.host, []).append(p)
        return out

    def stragglers(self) -> list[tuple[str, list[PointVerdict]]]:
        """Hosts named in most of the judged points (at least ``MIN_POINTS``), most named first."""
        judged = len(self.judged)
        named = sorted(self.named().items(), key=lambda kv: -len(kv[1]))
        return [(h, ps) for h, ps in named if len(ps) >= MIN_POINTS and 2 * len(ps) > judged]


MIN_POINTS = 3
"""The fewest sizes a host must be named in: a healthy 4-host gloo ring under load named one host
last in 2 of 2 sizes (CI, preflight's quick pass at 256K and 1M), which chance does often enough."""


def _period(idx: np.ndarray, late: np.ndarray, iters: int) -> tuple[int, float, int, int] | None:
    """(in-class hits, score, k, the class) for the k whose one residue class best separates ``idx`` (the
    iterations a host was far late in, by ``late`` us each) from the rest: at least
    ``PERIOD_CLASS_SHARE`` of their summed lateness in the class, at least ``PERIOD_HIT_RATE`` of the
    class among them, and at most half that rate outside it; of those, the largest difference of the
    two rates, the score (the smallest k on a tie: every 10th is also every 20th's half). None when
    none. The share is of lateness, not of iterations: under load (CI, 2026-12-05) a host sleeping
    30 ms every 10th iteration was also 1-4 ms late in 4-6 other iterations of 50, five times the
    median gap, and by count its 5 delays were under 60% of its far-late iterations."""
    hits = len(idx)
    if hits < PERIOD_MIN_HITS:
        return None
    total = float(late.sum())
    best: tuple[int, float, int, int] | None = None
    for k in range(2, min(MAX_PERIOD, iters // PERIOD_MIN_HITS) + 1):
        mass = np.bincount(idx % k, weights=late, minlength=k)
        rho = int(mass.argmax())
        in_class = int(np.count_nonzero(idx % k == rho))
        size = len(range(rho, iters, k))
        if in_class < PERIOD_MIN_HITS or mass[rho] < PERIOD_CLASS_SHARE * total:
            continue
        rate_in = in_class / size
        rate_out = (hits - in_class) / max(1, iters - size)
        if rate_in >= PERIOD_HIT_RATE and rate_out <= 0.5 * rate_in:
            score = rate_in - rate_out
            if best is None or score > best[1] + 1e-9:
                best = (in_class, score, k, rho)
    return best


def judge_point(rec: ArrivalRecord) -> PointVerdict:
    """The verdict on one point (the module's docstring says how)."""
    last = np.asarray(rec.last_rank, dtype=np.int64)
    by = np.asarray(rec.last_by_us, dtype=np.float64)
    times = np.asarray(rec.per_iter["times_us"], dtype=np.float64)
    threshold = 2.0 * rec.clock_err_us
    decisive = by > threshold
    nd = int(decisive.sum())
    base = dict(group=rec.group, hosts=tuple(rec.hosts), collective=rec.collective, bytes=rec.bytes,
                in_place=rec.in_place, engine=rec.engine, iters=rec.iters, clock_err_us=rec.clock_err_us,
                decisive=nd, device=rec.device)
    per_host = rec.per_host
    if nd < MIN_DECISIVE or not per_host:
        return PointVerdict(kind="none", **base)
    # the unit judged: a host (its ranks together) when the group spans hosts, else the rank (GPU)
    nh = len(rec.hosts) if len(rec.hosts) > 1 else rec.ranks
    host_of = last // per_host if len(rec.hosts) > 1 else last
    dec_hosts = host_of[decisive]
    counts = np.bincount(dec_hosts, minlength=nh)
    order = np.argsort(-counts, kind="stable")
    chance = 1.0 / nh if nh > 1 else 1.0

    def describe(h: int, kind: str, p: float | None, period: int | None, mine=None) -> PointVerdict:  # noqa: ANN001
        mine = decisive & (host_of == h) if mine is None else mine
        ranks = Counter(int(r) for r in last[mine])
        rank = ranks.most_common(1)[0][0]
        share = by[mine] / np.maximum(times[mine], 1e-9)
        host = rec.hosts[h] if len(rec.hosts) > 1 else rec.hosts[0]
        return PointVerdict(kind=kind, host=host, rank=rank, local_rank=rank % per_host,
                            last_count=int(mine.sum()), p_value=p, period=period,
                            late_us=float(by[mine].mean()), wait_share=float(np.minimum(share, 1.0).mean()),
                            **base)

    far = by > max(threshold, OUTLIER * float(np.median(by)))
    far_counts = np.bincount(host_of[far], minlength=nh)
    # periodic: of the hosts most often far late, the one whose period holds the most of its far-late
    # iterations. Not the first with any period: three of a few scattered far-late iterations fit
    # some k by chance (4, 24, 44: every 20th), and on a loaded machine (CI, 2026-12-05) a healthy
    # host far late as often as the periodic one, and ordered before it, was named every 20th
    # (in-class hits, score, k, host, its far-late iterations in the class), most often far late first
    periods = []
    for h in np.argsort(-far_counts, kind="stable")[: min(nh, 4)]:
        mine = far & (host_of == int(h))
        found = _period(np.flatnonzero(mine), by[mine], rec.iters)
        if found is not None:
            hits, score, k, rho = found
            periods.append((hits, score, k, int(h), mine & (np.arange(len(mine)) % k == rho)))
    if periods:  # max keeps the first of equals: the host most often far late
        _, _, k, h, mine = max(periods, key=lambda c: c[:2])
        return describe(h, "periodic", None, k, mine)
    if nh > 1:
        top = int(order[0])
        p = binomial_sf(int(counts[top]), nd, chance)
        if p < ALPHA / nh and counts[top] >= min(0.5, MIN_SHARE * chance) * nd:
            return describe(top, "persistent", p, None)
    return PointVerdict(kind="moving" if nh > 1 else "none", **base)


def analyse(records: list[ArrivalRecord]) -> list[GroupStragglers]:
    """Every group's points judged, in the order the groups first appear."""
    groups: dict[tuple, GroupStragglers] = {}
    for rec in records:
        key = (rec.group, tuple(rec.hosts))
        g = groups.setdefault(key, GroupStragglers(rec.group, tuple(rec.hosts)))
        g.points.append(judge_point(rec))
    return list(groups.values())
