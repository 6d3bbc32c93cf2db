"""When each rank arrived at and left each timed operation: the record, its summary, its checks.

A synchronous collective ends for everyone at about the same moment; what differs between ranks is
when they *arrive* (issue the call; on a GPU, when the kernel starts). The rank that arrives last
makes the others wait, and a waiting rank's own elapsed time is the longest, so per-rank elapsed
times (``rank_time_us``, nccl-tests' ``per_process_max_times_us``) point at the victims, not at the
straggler. Arrivals can only be compared on one clock: each rank's host clock is put on group
rank 0's by an offset estimated through the store (``collectives.clocks``), and the bound of that
estimate (``clock_err_us``) is what an arrival difference must beat to mean anything.

One ``ArrivalRecord`` per measured point (one row of results.jsonl) goes to ``arrivals.jsonl``:
bounded by the iterations, not by the ranks x iterations, it says per iteration who arrived last
and by how much before the second-last (the wait that rank alone imposed), the per-iteration time
as nccl-tests -I summarises it (``per_iter``: its -J keys, JSON format v3), and each rank's mean
lateness. With ``--per-iter`` every sample (ranks x iterations, arrival and completion) also goes
to ``per_iter.jsonl.gz``. The same ``summarise`` makes the record on group rank 0 and in the
analysis of a ``per_iter`` file, so both say the same.

Everything read back from a file is untrusted: ``ArrivalRecord.from_dict`` checks every field's
type, length and range and names the first thing wrong (ValueError).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from netbench.common.jsonread import JsonlRead, read_jsonl
from netbench.common.rundir import RunDir

SCHEMA = "netbench.arrivals/1"
#: the groups whose arrivals are recorded (and clocks estimated): every rank of a job's collective;
#: a pairwise round's thousands of two-rank groups would only add store traffic
ARRIVAL_PATTERNS = ("world", "ring", "intra")
MAX_ITERS = 1_000_000
MAX_RANKS = 1 << 20

#: nccl-tests' per-iteration summary keys, in the order src/util.cu writePerIterReport writes them
PER_ITER_KEYS = ("skipped_iterations", "min_us", "max_us", "avg_us", "p50_us", "p95_us", "p99_us",
                 "stdev_us", "cv_pct", "times_us")


def _percentile_index(n: int, pct: int) -> int:
    """nccl-tests' percentile: ``min(n - 1, (n * pct + 99) / 100 - 1)`` (src/util.cu)."""
    return min(n - 1, (n * pct + 99) // 100 - 1)


def per_iter_summary(times_us: np.ndarray, skipped: int = 0) -> dict[str, Any]:
    """nccl-tests -I's summary of per-iteration times (computeIterStats: population stdev, p50 the
    upper median), with its -J keys. ``times_us``: one time per iteration."""
    t = np.asarray(times_us, dtype=np.float64)
    s = np.sort(t)
    n = len(s)
    avg = float(s.mean())
    stdev = float(np.sqrt(((s - avg) ** 2).mean()))
    return {
        "skipped_iterations": int(skipped),
        "min_us": float(s[0]),
        "max_us": float(s[-1]),
        "avg_us": avg,
        "p50_us": float(s[n // 2]),
        "p95_us": float(s[_percentile_index(n, 95)]),
        "p99_us": float(s[_percentile_index(n, 99)]),
        "stdev_us": stdev,
        "cv_pct": stdev / avg * 100.0 if avg > 0 else 0.0,
        "times_us": [float(x) for x in t],
    }


@dataclass
class ArrivalRecord:
    """One point's arrivals (one row of results.jsonl: the same group, collective, bytes,
    in_place, engine). Ranks are the group's ranks; ``hosts`` the group's hosts, rank r on
    ``hosts[r // (ranks / len(hosts))]`` as in every world/ring group."""

    group: str | None
    pattern: str
    hosts: list[str]
    ranks: int
    collective: str
    bytes: int
    in_place: bool
    engine: str
    iters: int
    clock_err_us: float
    """The largest bound of any rank's clock offset estimate: an arrival difference within twice
    this may be the clocks, not the ranks."""
    clock_offset_us: list[float]
    """Each rank's clock minus group rank 0's, as estimated (rank 0: 0)."""
    last_rank: list[int]
    """Per iteration: the group rank that arrived last."""
    last_by_us: list[float]
    """Per iteration: how long after the second-last it arrived (the wait it alone imposed)."""
    late_us: list[float]
    """Per rank: mean over iterations of its arrival minus the iteration's median arrival."""
    per_iter: dict[str, Any]
    """nccl-tests -J's per-iteration object (PER_ITER_KEYS): times_us[i] is the longest of the
    ranks' own elapsed times at iteration i, as nccl-tests' per_process_max_times_us reduced."""
    device: str = "cpu"
    backend: str = "gloo"
    dtype: str = "float32"
    schema: str = SCHEMA
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def key(self) -> tuple:
        return (self.group, self.collective, self.bytes, self.in_place, self.engine)

    @property
    def per_host(self) -> int:
        return self.ranks // len(self.hosts) if self.hosts and self.ranks % len(self.hosts) == 0 else 0

    def host_of(self, rank: int) -> str | None:
        p = self.per_host
        return self.hosts[rank // p] if p else None

    @classmethod
    def from_dict(cls, d: Any) -> ArrivalRecord:
        """A record read from a file: every field checked (ValueError naming the first wrong one)."""
        if not isinstance(d, dict):
            raise ValueError("not an object")
        ranks, iters = d.get("ranks"), d.get("iters")
        if not _int(ranks) or not 1 <= ranks <= MAX_RANKS:
            raise ValueError("ranks must be an integer from 1")
        if not _int(iters) or not 1 <= iters <= MAX_ITERS:
            raise ValueError("iters must be an integer from 1")
        hosts = d.get("hosts")
        if not isinstance(hosts, list) or not hosts or not all(isinstance(h, str) and h for h in hosts):
            raise ValueError("hosts must be a list of names")
        for name in ("pattern", "collective", "engine"):
            if not isinstance(d.get(name), str):
                raise ValueError(f"{name} must be a string")
        if d.get("group") is not None and not isinstance(d.get("group"), str):
            raise ValueError("group must be a string")
        if not _int(d.get("bytes")) or d["bytes"] < 0:
            raise ValueError("bytes must be an integer >= 0")
        if not isinstance(d.get("in_place"), bool):
            raise ValueError("in_place must be true or false")
        err = d.get("clock_err_us")
        if not _num(err) or err < 0:
            raise ValueError("clock_err_us must be a finite number >= 0")
        _nums(d.get("clock_offset_us"), ranks, "clock_offset_us")
        last = d.get("last_rank")
        if not isinstance(last, list) or len(last) != iters or not all(
            _int(r) and 0 <= r < ranks for r in last
        ):
            raise ValueError(f"last_rank must be {iters} ranks below {ranks}")
        _nums(d.get("last_by_us"), iters, "last_by_us", low=0.0)
        _nums(d.get("late_us"), ranks, "late_us")
        per_iter = d.get("per_iter")
        if not isinstance(per_iter, dict):
            raise ValueError("per_iter must be an object")
        _nums(per_iter.get("times_us"), iters, "per_iter.times_us", low=0.0)
        known = {f for f in cls.__dataclass_fields__}
        kw = {k: v for k, v in d.items() if k in known}
        for name in ("device", "backend", "dtype", "schema"):
            if name in kw and not isinstance(kw[name], str):
                raise ValueError(f"{name} must be a string")
        if "extra" in kw and not isinstance(kw["extra"], dict):
            raise ValueError("extra must be an object")
        return cls(**kw)


def _int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _num(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _nums(v: object, n: int, name: str, low: float | None = None) -> None:
    if not isinstance(v, list) or len(v) != n or not all(_num(x) and (low is None or x >= low) for x in v):
        bound = f" >= {low:g}" if low is not None else ""
        raise ValueError(f"{name} must be {n} finite numbers{bound}")


@dataclass(frozen=True)
class Stamps:
    """Every rank's samples of one point on one clock (group rank 0's), microseconds.

    ``arrive[i, r]`` / ``done[i, r]``: iteration i, group rank r. ``offset_us[r]`` was already
    applied; ``err_us[r]`` bounds it."""

    arrive: np.ndarray
    done: np.ndarray
    offset_us: np.ndarray
    err_us: np.ndarray


def summarise(st: Stamps, **point: Any) -> ArrivalRecord:
    """The bounded record of one point (``point``: the ArrivalRecord fields that name it).
    Vectorised: 1,024 ranks x 1,000 iterations in tens of milliseconds."""
    arrive, done = st.arrive, st.done
    iters, ranks = arrive.shape
    elapsed = done - arrive  # each rank's own time per iteration (what nccl-tests times per GPU)
    if ranks >= 2:
        part = np.partition(arrive, ranks - 2, axis=1)
        second, last_t = part[:, ranks - 2], part[:, ranks - 1]
    else:
        second = last_t = arrive[:, 0]
    last = np.argmax(arrive, axis=1)
    med = np.median(arrive, axis=1)
    return ArrivalRecord(
        ranks=ranks,
        iters=iters,
        clock_err_us=float(st.err_us.max()) if len(st.err_us) else 0.0,
        clock_offset_us=[float(x) for x in st.offset_us],
        last_rank=[int(x) for x in last],
        last_by_us=[float(x) for x in np.maximum(last_t - second, 0.0)],
        late_us=[float(x) for x in (arrive - med[:, None]).mean(axis=0)],
        per_iter=per_iter_summary(elapsed.max(axis=1)),
        **point,
    )


def read_samples(
    path: Any, max_lines: int = 1_000_000
) -> Iterator[tuple[dict[str, Any], np.ndarray, np.ndarray]]:
    """per_iter.jsonl.gz's points: (the line's key fields, arrive[iters, ranks], done[iters, ranks]),
    microseconds. A line that is not such a point is skipped (ValueError would stop a whole report
    for one bad line); a file cut short ends at its last whole line."""
    import gzip
    import json
    import zlib

    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for n, line in enumerate(fh):
                if n >= max_lines:
                    return
                try:
                    d = json.loads(line)
                    s = d["samples"]
                    a = np.asarray(s["arrive_us"], dtype=np.float64)
                    b = np.asarray(s["done_us"], dtype=np.float64)
                except (ValueError, KeyError, TypeError):
                    continue
                if a.ndim != 2 or a.shape != b.shape or not a.size or not np.isfinite(a).all() \
                        or not np.isfinite(b).all():
                    continue
                yield {k: v for k, v in d.items() if k != "samples"}, a, b
    except (EOFError, OSError, zlib.error, UnicodeDecodeError):
        return


def load_arrivals(rundir: RunDir) -> JsonlRead:
    """A run's arrivals.jsonl: records that fit ``ArrivalRecord`` (every field checked), and every
    line that did not, with its number and why."""

    def check(rec: Any) -> str | None:
        try:
            ArrivalRecord.from_dict(rec)
        except ValueError as exc:
            return f"not an arrivals record: {exc}"
        return None

    return read_jsonl(rundir.arrivals_path, check)
