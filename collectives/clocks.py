"""Each rank's host clock against group rank 0's, estimated NTP-style through the group's store.

Why the store and not the process group: it exists before the group does and works the same on
gloo, NCCL and any engine; its round trips are slower than a collective's, which only widens the
bound, never biases it.

One exchange between rank 0 and rank i (i's clock ``t``, 0's clock ``T``):
  i: t1 = now, set ``ping``;  0: get ``ping`` returns, T2 = now, set ``pong`` = T2;  i: get ``pong``
  returns, t3 = now.
T2 was read at a real moment between t1 and t3, so rank i's offset (its clock minus rank 0's)
lies in [t1 - T2, t3 - T2]. Several exchanges are intersected (the clocks do not drift measurably
within milliseconds); the estimate is the middle of the intersection and its half-width the bound
(``err_us``), which is what the analysis requires an arrival difference to beat. Were the
intersection empty (a clock stepped by NTP mid-way), the narrowest single exchange is used instead.

Rank 0 serves the ranks one after another, each after it says ``ready``: a rank's interval then
holds its own exchange only, not the queue before it. Cost: ~4 store round trips per rank and
exchange (a 16-rank group: tens of milliseconds; 1,024 ranks: a few seconds, once per group).
"""

from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

EXCHANGES = 6
WAIT = _dt.timedelta(seconds=300)


@dataclass(frozen=True)
class ClockEstimate:
    offset_us: float  # this rank's clock minus group rank 0's
    err_us: float  # the offset lies within offset_us +- err_us


def now_us() -> float:
    """The host clock every timestamp of a rank is taken on (wall time, microseconds)."""
    return time.time_ns() / 1000.0


def estimate(
    store: Any, grank: int, n: int, exchanges: int = EXCHANGES, tag: str = "clk",
    now: Callable[[], float] = now_us,
) -> ClockEstimate:
    """This rank's clock offset against group rank 0's; every rank of the group must call it.
    ``now``: the clock the rank's timestamps are taken on (a test gives one rank a skewed one)."""
    if n < 2:
        return ClockEstimate(0.0, 0.0)
    if grank == 0:
        for i in range(1, n):
            for k in range(exchanges):
                store.set(f"{tag}/{i}/{k}/go", b"1")
                store.wait([f"{tag}/{i}/{k}/ping"], WAIT)
                t2 = now()
                store.set(f"{tag}/{i}/{k}/pong", repr(t2).encode())
        return ClockEstimate(0.0, 0.0)
    lo, hi, best = -float("inf"), float("inf"), (float("inf"), 0.0)
    for k in range(exchanges):
        store.wait([f"{tag}/{grank}/{k}/go"], WAIT)
        t1 = now()
        store.set(f"{tag}/{grank}/{k}/ping", b"1")
        t2 = float(store.get(f"{tag}/{grank}/{k}/pong").decode())
        t3 = now()
        lo, hi = max(lo, t1 - t2), min(hi, t3 - t2)
        if t3 - t1 < best[0]:
            best = (t3 - t1, (t1 + t3) / 2 - t2)
    if lo <= hi:
        return ClockEstimate((lo + hi) / 2, (hi - lo) / 2)
    return ClockEstimate(best[1], best[0] / 2)
