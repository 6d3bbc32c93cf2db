"""Persistent shifts in an entity's nightly series (a node, a link, a switch, the fleet at a size).

Each series is a figure a run (log busbw against the fleet for a node, a link's residual, ...), in
run order. A shift at run ``s`` compares the medians of a window of ``WINDOW`` runs before and after
it; it is reported when

- it is large: ``|shift| >= min_effect`` of the kind (a node 3%, a link 10%: one pair's figure is a
  single measurement a night, a node's the median over all its partners);
- it is certain: ``|shift| / se >= Z_MIN`` (a link ``Z_LINK``), ``se`` from the series' own noise
  (the median absolute first difference: one step does not inflate it, heavy tails barely do);
- it persists: the first two runs from ``s`` (a link's three) are past half the shift (one noisy
  night moves a window's median by nothing and fails this), and for a link most runs of both windows
  lie on their own side of the midpoint (``MAJORITY``: a heavy tail parts two medians of 7 single
  measurements by chance; a real step moves nearly every night).

Of the splits that pass, each entity keeps the strongest within a window (the rest are the same
shift seen from nearby splits). A shift is a ``drift`` when a straight line fits its window better
than two levels do (a cable or optic degrading night by night), else a ``step``; neighbouring drifts
of one entity are one. Every series is searched at once with numpy: a 90-night history of 32,640
links is 90 window medians over a (links x nights) array.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np

WINDOW = 7
MIN_BEFORE = 5  # runs before a shift: a baseline first (at 3, 3 of 20 simulated histories had a false one)
Z_MIN = 6.0
#: links: one measurement a night each, and 32,640 of them at 256 nodes: a tail that many series
#: reach by chance (benchmarks/README.md, "Fleet history")
Z_LINK = 7.5
#: runs a shift must last: a link's 3 (under a Student-t law two nights past half, at the edge of a
#: history where a window is short, happened 8 times over 5 simulated histories of 32,640 links)
LASTING = {"link": 3}
#: share of each window's runs that must lie on its own side of the midpoint between the medians: a
#: link's (single measurements under a Student-t law parted by chance 6 times over 20 simulated
#: histories with the medians alone; benchmarks/README.md, "Fleet history")
#: and the least number of the later window's runs that must (two wild nights of 32,640 links' 90
#: happen: at a history's end, 3 runs of 4 past the midpoint was a false -18%)
MAJORITY = {"link": (0.75, 4)}
#: per kind: the least shift reported (log) and the least noise a series is assumed to have
MIN_EFFECT = {"node": 0.03, "switch": 0.05, "fleet": 0.03, "link": 0.10}
NOISE_FLOOR = {"node": 0.002, "switch": 0.003, "fleet": 0.003, "link": 0.01}
_DRIFT_FIT = 0.8  # a line's squared error below this share of the best two levels' makes the shift a drift


@dataclass(frozen=True)
class EnvChange:
    """A field that changed on the entity between its last good and first bad run, and how the
    fleet's other hosts that got the same change (``changed``) or not (``unchanged``) fared. ``at``:
    where on the entity, for one of several hosts (a link's end, most of a switch's hosts)."""

    field: str
    old: str | None
    new: str | None
    changed: int
    lost_changed: int
    unchanged: int
    lost_unchanged: int
    p_value: float
    likely_cause: bool
    lost_range_pct: tuple[float, float] | None = None
    at: str = ""

    def text(self) -> str:
        where = f" ({self.at})" if self.at else ""
        said = (f"{self.field} {self.old or '-'} -> {self.new or '-'}{where} on {self.changed} "
                f"host{'s' if self.changed != 1 else ''}, {self.lost_changed} of them lost")
        if self.lost_range_pct is not None and self.lost_changed:
            lo, hi = self.lost_range_pct
            said += f" {lo:.0f}%" if round(lo) == round(hi) else f" {lo:.0f}-{hi:.0f}%"
        said += f"; {self.lost_unchanged} of {self.unchanged} that did not change lost anything"
        if self.likely_cause:
            return said + f": the likely cause (p={self.p_value:.1g})"
        if self.changed <= 1:
            return said + ": this host only, so a part going bad is as likely"
        return said + ": not tied to the loss"


@dataclass(frozen=True)
class Change:
    kind: str
    entity: str
    shape: str  # step | drift
    split: int  # index of the first bad run in the catalog
    last_good: str  # run id
    first_bad: str
    last_good_at: str
    first_bad_at: str
    shift_pct: float  # (after / before - 1) x 100
    low_pct: float  # 95% interval of the shift
    high_pct: float
    z: float
    env: list[EnvChange] = field(default_factory=list)

    @property
    def confidence(self) -> str:
        return "high" if abs(self.z) >= 2 * Z_MIN else "medium"

    @property
    def cause(self) -> EnvChange | None:
        return next((e for e in self.env if e.likely_cause), None)


@dataclass(frozen=True)
class Shift:
    """A shift found in one series, before it is dated and attributed."""

    row: int
    split: int
    shift: float  # log
    se: float
    z: float
    shape: str
    start: int  # first run of a drift (a step's: its split)


def noise(x: np.ndarray, floor: float) -> np.ndarray:
    """Each series' noise sigma: the median absolute first difference over sqrt(2), as a normal
    sigma, at least ``floor``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        mad = np.nanmedian(np.abs(np.diff(x, axis=1)), axis=1)
    return np.fmax(np.nan_to_num(1.4826 * mad / math.sqrt(2), nan=floor), floor)


def find_shifts(x: np.ndarray, kind: str) -> list[Shift]:
    """The persistent shifts of every row of ``x`` (entities x runs, NaN: not measured)."""
    n, t = x.shape
    if t < 4 or n == 0:
        return []
    sigma = noise(x, NOISE_FLOOR[kind])
    z_min = Z_LINK if kind == "link" else Z_MIN
    lasting = LASTING.get(kind, 2)
    z = np.zeros((n, t))
    shift = np.zeros((n, t))
    se = np.ones((n, t))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for s in range(MIN_BEFORE, t - lasting + 1):
            before, after = x[:, max(0, s - WINDOW):s], x[:, s:s + WINDOW]
            nb, na = np.isfinite(before).sum(axis=1), np.isfinite(after).sum(axis=1)
            mb, ma = np.nanmedian(before, axis=1), np.nanmedian(after, axis=1)
            d = ma - mb
            err = sigma * 1.2533 * np.sqrt(1 / np.fmax(nb, 1) + 1 / np.fmax(na, 1))  # a median's se
            half = np.abs(d) / 2
            past = np.sign(d)[:, None] * (x[:, s:s + lasting] - mb[:, None]) >= half[:, None]
            persists = past.all(axis=1) & _parted(before, after, mb + d / 2, np.sign(d), kind)
            ok = (nb >= MIN_BEFORE) & (na >= lasting) & persists & (np.abs(d) >= MIN_EFFECT[kind])
            z[:, s] = np.where(ok, np.nan_to_num(d / err), 0.0)
            shift[:, s], se[:, s] = d, err
    found: list[Shift] = []
    for row in np.nonzero((np.abs(z) >= z_min).any(axis=1))[0]:
        found += _kept(x[row], row, z[row], shift[row], se[row], z_min)
    return found


def _parted(before: np.ndarray, after: np.ndarray, mid: np.ndarray, sign: np.ndarray, kind: str
            ) -> np.ndarray:
    """Whether a ``MAJORITY`` share of each window's runs (of the later one, at least its count) lie
    on their own side of the midpoint between the two medians (every row passes for the kinds it
    does not name). Two window medians of single measurements part by chance under a heavy tail (a
    Student-t law's 3-4 wild nights in a window of 7 move its median); a real step moves nearly every
    night of the window."""
    if kind not in MAJORITY:
        return np.ones(before.shape[0], dtype=bool)
    share, least = MAJORITY[kind]
    side_b = (sign[:, None] * (mid[:, None] - before) > 0).sum(axis=1)
    side_a = (sign[:, None] * (after - mid[:, None]) > 0).sum(axis=1)
    nb, na = np.isfinite(before).sum(axis=1), np.isfinite(after).sum(axis=1)
    return (side_b >= share * nb) & (side_a >= np.fmax(share * na, least))


def _kept(series: np.ndarray, row: int, z: np.ndarray, shift: np.ndarray, se: np.ndarray, z_min: float
          ) -> list[Shift]:
    """One entity's shifts: the strongest split of each neighbourhood, shaped, drifts merged."""
    order = np.argsort(-np.abs(z))
    taken: list[int] = []
    for s in order:
        if abs(z[s]) < z_min:
            break
        if all(abs(int(s) - k) >= WINDOW for k in taken):
            taken.append(int(s))
    refined = (_refined(series, s) for s in taken)
    taken = sorted({k if abs(z[k]) >= z_min else s for s, k in zip(taken, refined, strict=True)})
    shifts = [Shift(int(row), s, float(shift[s]), float(se[s]), float(z[s]), *_shape(series, s))
              for s in taken]
    merged: list[Shift] = []
    for sh in shifts:  # a long drift seen at several splits is one drift
        last = merged[-1] if merged else None
        if last and last.shape == sh.shape == "drift" and np.sign(last.shift) == np.sign(sh.shift) \
                and sh.split - last.split <= 2 * WINDOW:
            merged[-1] = Shift(last.row, last.split, last.shift + sh.shift, math.hypot(last.se, sh.se),
                               max(last.z, sh.z, key=abs), "drift", last.start)
        else:
            merged.append(sh)
    return [_drifted(series, sh, merged[k + 1].start if k + 1 < len(merged) else len(series))
            if sh.shape == "drift" else sh for k, sh in enumerate(merged)]


def _drifted(series: np.ndarray, sh: Shift, end: int) -> Shift:
    """A drift's whole shift: from the level before it started to its last runs (up to the next
    shift), not only the window it was seen in."""
    before = series[max(0, sh.start - WINDOW):sh.start]
    last = series[max(sh.split, end - 3):end]
    if not np.isfinite(before).any() or not np.isfinite(last).any():
        return sh
    total = float(np.nanmedian(last) - np.nanmedian(before))
    return Shift(sh.row, sh.split, total if abs(total) > abs(sh.shift) else sh.shift, sh.se, sh.z, sh.shape,
                 sh.start)


def _two_levels(y: np.ndarray, idx: np.ndarray, s: int) -> float:
    """The squared error of two levels (medians) split at ``s`` over the finite ``y`` at ``idx``."""
    ok = np.isfinite(y)
    before, after = y[ok & (idx < s)], y[ok & (idx >= s)]
    if before.size < 1 or after.size < 1:
        return math.inf
    return float(np.sum((before - np.median(before)) ** 2) + np.sum((after - np.median(after)) ** 2))


def _refined(series: np.ndarray, s: int) -> int:
    """The split near ``s`` that two levels fit best: window medians tie over a few splits around a
    step (each still has most of its nights on the right side), the step is where the levels part."""
    lo, hi = max(0, s - WINDOW), min(len(series), s + WINDOW)
    idx = np.arange(lo, hi)
    near = range(max(MIN_BEFORE, s - 3), min(len(series) - 1, s + 4))
    return min(near, key=lambda k: (_two_levels(series[lo:hi], idx, k), abs(k - s)))


def _shape(series: np.ndarray, s: int) -> tuple[str, int]:
    """``step`` or ``drift`` for the shift at ``s``, and where it started."""
    lo, hi = max(0, s - WINDOW), min(len(series), s + WINDOW)
    idx = np.arange(lo, hi)
    y = series[lo:hi]
    ok = np.isfinite(y)
    if ok.sum() < 5:
        return "step", s
    step = _two_levels(y, idx, s)
    slope, icpt = np.polyfit(idx[ok], y[ok], 1)
    line = np.sum((y[ok] - (slope * idx[ok] + icpt)) ** 2)
    if line >= _DRIFT_FIT * step:
        return "step", s
    return "drift", _drift_start(idx[ok], y[ok], lo, s)


def _drift_start(idx: np.ndarray, y: np.ndarray, lo: int, s: int) -> int:
    """Where a drift seen in the window from ``lo`` began: the knee of a level then a line (the best
    fit of ``y = c + b * max(0, run - k + 1)`` over ``k`` from ``lo`` to ``s``). The window's start
    alone dated an optic degrading from night 10 at night 7, once a node's figure showed it whole."""
    def misfit(k: int) -> float:
        a = np.column_stack([np.ones(idx.size), np.fmax(0, idx - k + 1)])
        coef = np.linalg.lstsq(a, y, rcond=None)[0]
        return float(np.sum((y - a @ coef) ** 2))

    return min(range(lo, s + 1), key=lambda k: (misfit(k), k))
