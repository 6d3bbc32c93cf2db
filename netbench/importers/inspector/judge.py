"""Who the others wait for (``slow_ranks``), and what could not be judged (``not_judged``).

Every rank's kernel of one collective (same communicator ``id``, same ``coll_sn``) ends at about the
same moment, so the rank whose kernel was the *shortest* started last: the others' kernels were
already running, waiting for it. A rank shortest in more collectives than chance (1/n; binomial,
Bonferroni over the ranks) and by more than ``MIN_WAIT_SHARE`` of the collective's median time is the
slow rank (its host named); per-rank median duration and busbw are kept for the report. The longest
kernel, or the lowest busbw, points at a rank that waited: Inspector's own bandwidth figures blame the
victims, which is why they are not the test.

Only GPU kernel timings are compared (``CollRecord.usable``): a rank timed by a CPU clock, or whose
timer logged 0 us, would look shortest for no reason; a collective one of its ranks did not time
usably is not compared, and the rank is named as not judged, never blamed. A communicator with
ranks that logged nothing, records that disagree on its size, or too few collectives compared is
named as not judged too: the import says so (and the report never passes on it).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from statistics import median
from typing import Any

from netbench.importers.inspector.read import GPU_TIMING, CollRecord, InspectorLog

ALPHA = 0.01
MIN_WAIT_SHARE = 0.05  # the others waited at least 5% of the collective for it
MIN_COLLECTIVES = 5
MAX_LISTED = 20


@dataclass(frozen=True)
class SlowRank:
    rank: int
    host: str | None
    comm: str
    collectives: int  # collectives of its communicator seen with every rank
    collectives_slow: int  # of them where its kernel was the shortest by MIN_WAIT_SHARE
    wait_us: float  # mean, over those: the others' median time minus its own
    slower: float  # wait_us / the collective's median time (share of the collective spent waiting)
    p_value: float
    busbw_GBps: float | None  # its median (high: it did not wait)
    median_busbw_GBps: float | None
    source: str = "NCCL Inspector"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Comm:
    """One communicator's records: its sizes as logged, each collective's record per rank, and the
    records of each rank whose timing cannot be compared (per reason)."""

    sizes: set[int] = field(default_factory=set)
    by_sn: dict[int, dict[int, CollRecord]] = field(default_factory=lambda: defaultdict(dict))
    unusable: dict[int, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    hosts: dict[int, str] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return max(self.sizes)

    def compared(self) -> list[dict[int, CollRecord]]:
        """The collectives every rank logged with a usable timing: the only ones compared."""
        if len(self.sizes) != 1 or self.n < 2:
            return []
        return [ranks for ranks in self.by_sn.values()
                if len(ranks) == self.n and all(r.usable for r in ranks.values())]


def _comms(log: InspectorLog) -> dict[str, _Comm]:
    comms: dict[str, _Comm] = defaultdict(_Comm)
    for r in log.records:
        c = comms[r.comm]
        c.sizes.add(r.n_ranks)
        c.by_sn[r.sn][r.rank] = r
        c.hosts.setdefault(r.rank, r.host)
        if not r.usable:
            c.unusable[r.rank][f"timed by {r.timing}, not by the GPU kernel," if r.timing != GPU_TIMING
                               else "0 us, a timer that did not run,"] += 1
    return comms


def _listed(ranks: list[int]) -> str:
    shown = ", ".join(map(str, ranks[:MAX_LISTED]))
    return shown + (f" and {len(ranks) - MAX_LISTED} more" if len(ranks) > MAX_LISTED else "")


def not_judged(log: InspectorLog) -> list[tuple[str, str]]:
    """(communicator, why) for each communicator, or rank of one, whose late rank was not judged."""
    out: list[tuple[str, str]] = []
    comms = _comms(log)
    for comm, c in sorted(comms.items()):
        start = len(out)
        if len(c.sizes) > 1:
            sizes = _listed(sorted(c.sizes))
            out.append((comm, f"its records disagree on its size (n_ranks {sizes}): not judged"))
            continue
        seen = {rank for ranks in c.by_sn.values() for rank in ranks}
        missing = sorted(set(range(c.n)) - seen)
        if missing:
            out.append((comm, f"rank(s) {_listed(missing)} of {c.n} logged no collective: who arrives last "
                              "is not judged"))
        for rank, why in sorted(c.unusable.items()):
            where = f"rank {rank}" + (f" on {c.hosts[rank]}" if c.hosts.get(rank) else "")
            total = sum(1 for ranks in c.by_sn.values() if rank in ranks)
            reasons = "; ".join(f"{k} in {v} of {total} record(s)" for k, v in why.most_common(3))
            out.append((comm, f"{where}: timings unusable ({reasons}): it is not blamed, and the "
                              "collectives it took part in are not compared"))
        compared = len(c.compared())
        if c.n >= 2 and compared < MIN_COLLECTIVES and len(out) == start:
            out.append((comm, f"only {compared} collective(s) logged by all {c.n} ranks ({MIN_COLLECTIVES} "
                              "needed): who arrives last is not judged"))
    if all(c.n < 2 for c in comms.values()):  # a communicator of one rank has nobody to wait for
        alone = "1 rank only: no rank waits for another, so nothing was judged"
        out += [(comm, alone) for comm in sorted(comms)]
    return out


def _summary(log: InspectorLog) -> dict[tuple[str, int], dict[str, Any]]:
    per_rank: dict[tuple[str, int], dict[str, Any]] = {}
    for r in log.records:
        d = per_rank.setdefault((r.comm, r.rank), {"host": r.host, "exec_us": [], "busbw": []})
        d["exec_us"].append(r.exec_us)
        if r.busbw is not None:
            d["busbw"].append(r.busbw)
    return {k: {"host": v["host"], "median_exec_us": median(v["exec_us"]),
                "median_busbw_GBps": median(v["busbw"]) if v["busbw"] else None,
                "collectives": len(v["exec_us"])}
            for k, v in per_rank.items()}


def slow_ranks(log: InspectorLog) -> tuple[list[SlowRank], dict[tuple[str, int], dict[str, Any]]]:
    """The ranks the others wait for (per communicator), and every rank's median duration and busbw."""
    from netbench.reports.stats import binomial_sf

    summary = _summary(log)
    out = []
    for comm, c in _comms(log).items():
        compared = c.compared()
        if len(compared) < MIN_COLLECTIVES:
            continue
        shortest: Counter[int] = Counter()
        waits: dict[int, list[tuple[float, float]]] = defaultdict(list)
        for ranks in compared:
            times = sorted(ranks.values(), key=lambda r: r.exec_us)
            med = median(r.exec_us for r in times)
            first = times[0]
            if med > 0 and med - first.exec_us >= MIN_WAIT_SHARE * med:
                shortest[first.rank] += 1
                waits[first.rank].append((med - first.exec_us, (med - first.exec_us) / med))
        total = len(compared)
        all_bw = [r.busbw for ranks in compared for r in ranks.values() if r.busbw is not None]
        for rank, k in shortest.most_common():
            p = binomial_sf(k, total, 1.0 / c.n)
            if p >= ALPHA / c.n or 2 * k < total:
                continue
            w, s = waits[rank], summary[(comm, rank)]
            out.append(SlowRank(rank=rank, host=s["host"] or None, comm=comm, collectives=total,
                                collectives_slow=k,
                                wait_us=sum(x for x, _ in w) / len(w), slower=sum(y for _, y in w) / len(w),
                                p_value=p, busbw_GBps=s["median_busbw_GBps"],
                                median_busbw_GBps=median(all_bw) if all_bw else None))
    return out, summary
