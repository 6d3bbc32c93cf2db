"""The noise's lower tail, learned from the fleet's own residuals instead of assumed.

A family-wise bar over 32,640 pairs sits near 5 sigma, exactly where an assumed tail and the real
one differ most: bandwidth noise is skewed toward slow (congestion, OS jitter, retransmits) and
heavier-tailed than a normal, so a bar computed from a normal let a healthy 256-node fleet raise
1-2 false link warnings out of "a 5% chance of one" (issue 25). The pair model's residuals are the
fleet's own sample of its noise: within each hop class, the worst TAIL_SHARE of them (in units of
the class's robust sigma) are fitted with a generalised Pareto distribution, the law every
well-behaved tail's exceedances approach (Pickands-Balkema-de Haan), and the chance of a residual
this low is read from that fit, never lighter than a normal's.

Why per hop class and not per load cell: a cell is one round's load, a dozen to a few thousand
pairs, too few to see a 1-in-100,000 tail; the cells' levels are already taken out of the residuals
and their spread is the class's. A class with fewer than MIN_LEARN residuals borrows the tail of
all classes pooled; a fleet with fewer has too little to learn from and keeps the normal (and the
policy's ``mad_k``), which the evidence says.

The fit matches two probability-weighted moments of the exceedances (Hosking and Wallis 1987),
closed form but for one bisection, with the top CENSOR_SHARE of them censored (counted, their values
not read: "partial" moments, Wang 1990), and the residuals past a wider pilot fit's bar left out as
gross faults: a few hundred real faults (an intermittent node's slow rounds, a dead cable 14 sigma
out) do not make the noise look heavier than it is and hide the faults beside them. Its shape is
taken SHAPE_MARGIN of its own asymptotic standard errors heavier than fitted, because the bar
extrapolates to 1e-6 of the tail and an under-estimated shape is what gives false alarms; a fitted
tail lighter than a normal's (a normal fleet's, fitted this close, reads as lighter) leaves the
normal's bar. The moments' standard error at 256 nodes is about half of Pickands' three-quantile
estimator (which this replaced, issue 46), whose margin put a normal fleet's bar near 7 sigma where
the normal's is 4.7: links at 0.7 went unreported in one sample. The shape is raised SHAPE_BIAS at
least, the fit's own bias. Measured (tests/test_noise.py, tests/test_noise_pwm.py,
benchmarks/README.md): no more than the promised fwer of healthy fleets raise a finding under
log-normal, skewed, Student-t (3-5 degrees of freedom) and congestion-mixture noise, and a normal
fleet's bar is the normal's in most fleets.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from statistics import NormalDist

import numpy as np
from netbench.reports.stats import SIGMA_FLOOR, residual_sigma

MIN_LEARN = 8000
"""Residuals a hop class needs to learn its own tail from: 400 exceedances at TAIL_SHARE, the shape's
standard error then about 0.09 (its margin 0.2, a bar above the normal's for a normal fleet)."""
TAIL_SHARE = 0.05
"""The worst share of residuals whose exceedances the tail is fitted to."""
CENSOR_SHARE = 0.05
"""The share of the exceedances (the worst 0.25% of residuals) counted but not read by value: up to
that many gross faults leave the fit as it was (an intermittent node's 300 slow pairs at 1,024
nodes are 1.1% of the exceedances). Censoring costs efficiency, the shape's extremes carry it: a
standard error 1.5x the uncensored moments' here, 3.3x with a quarter censored."""
SHAPE_MARGIN = 2.33
"""Standard errors added to the fitted shape (one-sided 99%): the bar extrapolates far."""
SHAPE_BIAS = 0.1
"""The least the shape is raised, whatever its standard error: the fit's bias, not its noise. A
normal-like tail's exceedances over the worst 5% fit a shape near -0.18 where -0.05 or so holds
further out, towards the bar; at 256 nodes the margin (2.33 x 0.044) covers it, but at 1,024 nodes
(26,000 exceedances, a standard error of 0.011) skewed noise raised a false alarm in 9 fleets of 20
(synthetic residuals). Fitting fewer, further out, instead fitted a congestion burst's bounded bump
alone and alarmed every 1,024-node congested fleet."""
SHAPE_MAX = 0.45
"""The heaviest shape used (a tail heavier than Student-t with 2.2 degrees of freedom is no longer
noise to be modelled)."""
SHAPE_MIN = -0.9
"""The lightest shape searched: a normal's exceedances over its 95% quantile fit near -0.18."""
PILOT_CENSOR = 0.25
"""The pilot fit, which says which residuals are gross faults, reads none of the top quarter of the
exceedances (Pickands' estimator's reach)."""
GROSS_CHANCE = 0.05
"""Residuals past the pilot's bar at this chance over the fleet are faults, not noise, and left out of
the final fit: 67 pairs of an intermittent node at 9-15 sigma among a 256-node fleet's 26,880 shift
every rank of a censored fit and made its bar 14 sigma (a link at 0.5 went unreported beside them);
counted but unread they still say the tail has that much mass. Healthy noise puts a pair past it
in one fleet in twenty at most, and leaving one such pair out moves the fit little."""
PILOT_MARGIN = 0.0
"""The pilot's shape: as fitted."""
_SE_GRID = 400
"""Points of the quadrature of the moments' covariance (``_shape_se``): 1% of its value."""

_NORMAL = NormalDist()


@dataclass(frozen=True)
class LowerTail:
    """The lower tail of one hop class's residuals, in units of ``sigma`` (log busbw): the chance
    noise alone puts a residual ``x`` sigmas or more below zero. ``learned`` False: the normal."""

    sigma: float
    residuals: int
    learned: bool = False
    pooled: bool = False  # learned from every class's residuals (this class had too few)
    threshold: float = 0.0  # x0: where the fitted tail starts, in sigmas below
    share: float = 0.0  # the share of residuals beyond the threshold
    shape: float = 0.0  # the generalised Pareto shape used (fitted + margin)
    fitted_shape: float = 0.0
    shape_se: float = 0.0  # the fitted shape's asymptotic standard error
    gross: int = 0  # residuals past the pilot fit's bar, left out of the noise as faults
    scale: float = 1.0  # its scale, in sigmas

    def p_below(self, x: np.ndarray) -> np.ndarray:
        """P(noise <= -x sigmas) for each ``x`` (positive: below): the fitted tail beyond its
        threshold, never below the normal's."""
        x = np.asarray(x, dtype=float)
        normal = 0.5 * _erfc(x / math.sqrt(2))
        if not self.learned:
            return normal
        over = np.maximum(x - self.threshold, 0.0) / self.scale
        if abs(self.shape) < 1e-9:
            gp = np.exp(-over)
        else:
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                gp = np.power(np.maximum(1 + self.shape * over, 0.0), -1 / self.shape)
        tail = np.where(x > self.threshold, self.share * gp, 1.0)
        return np.maximum(normal, tail)

    def bar(self, p: float) -> float:
        """The x (sigmas below) at which ``p_below`` falls to ``p``: the bar of a test at ``p``."""
        normal = -_NORMAL.inv_cdf(min(max(p, 1e-300), 0.5))
        if not self.learned or p >= self.share:
            return normal
        ratio = p / self.share
        over = -math.log(ratio) if abs(self.shape) < 1e-9 else (ratio ** -self.shape - 1) / self.shape
        return max(normal, self.threshold + self.scale * over)

    def describe(self) -> str:
        """For a finding's evidence: which tail its p-value came from."""
        if not self.learned:
            return (f"normal, assumed: {self.residuals:,} residuals, too few to learn a tail from "
                    f"(at least {MIN_LEARN:,})")
        where = "all hop classes pooled" if self.pooled else "this hop class"
        gross = f", {self.gross:,} gross faults left out" if self.gross else ""
        return (f"learned from {self.residuals:,} residuals of {where}: generalised Pareto over the "
                f"worst {100 * self.share:.2g}% (probability-weighted moments{gross}), "
                f"shape {self.shape:.2f} (fitted {self.fitted_shape:.2f} +/- {self.shape_se:.2f})")


@dataclass(frozen=True)
class NoiseModel:
    """The pair model's noise: a lower tail per hop class (``reports.pairmodel.PairModel.noise``)."""

    tails: Mapping[str, LowerTail] = field(default_factory=dict)

    def tail(self, klass: str) -> LowerTail:
        return self.tails.get(klass) or LowerTail(sigma=SIGMA_FLOOR, residuals=0)

    def p_values(self, resid: np.ndarray, cls: np.ndarray, classes: list[str]) -> np.ndarray:
        """Per residual (log), the chance noise alone puts a pair of its class this low (NaN where
        not measured); ``cls``: each residual's index into ``classes``."""
        out = np.full(resid.shape, np.nan)
        for k, name in enumerate(classes):
            at = (cls == k) & np.isfinite(resid)
            if at.any():
                t = self.tail(name)
                out[at] = t.p_below(-resid[at] / t.sigma)
        return out


def learn(resid: np.ndarray, cls: np.ndarray, classes: list[str], sigma: float) -> NoiseModel:
    """The lower tail of each class's residuals (one value per pair: pass the upper triangle);
    ``sigma``: the fleet's residual sigma, the unit of a class without enough residuals of its own."""
    return learn_classes(by_class(resid, cls, classes), sigma)


def by_class(resid: np.ndarray, cls: np.ndarray, classes: list[str]) -> dict[str, np.ndarray]:
    """Each class's finite residuals, copies (``learn_classes`` writes over them)."""
    return {name: resid[(cls == k) & np.isfinite(resid)] for k, name in enumerate(classes)}


def learn_classes(per_class: dict[str, np.ndarray], sigma: float) -> NoiseModel:
    """``learn`` from each class's residuals (``by_class``: taken apart first, the caller can let the
    whole go: 8.4 M residuals at 4,096 hosts); ``per_class``' arrays are overwritten."""
    sigmas = {name: max(residual_sigma(v), SIGMA_FLOOR) if v.size >= MIN_LEARN else sigma
              for name, v in per_class.items()}
    # -v / sigma of every class, written into one array (no list of copies beside the whole)
    pooled_x = np.empty(sum(v.size for v in per_class.values()))
    at = 0
    for name, v in per_class.items():
        part = pooled_x[at : at + v.size]
        np.negative(v, out=part)
        part /= sigmas[name]
        at += v.size
    pooled = fit_tail(pooled_x, 1.0) if pooled_x.size >= MIN_LEARN else None
    del pooled_x  # before each class's own copy
    tails = {}
    for name, v in per_class.items():
        if v.size >= MIN_LEARN:  # v is this function's copy: -v / sigma written over it
            np.negative(v, out=v)
            v /= sigmas[name]
        own = fit_tail(v, sigmas[name]) if v.size >= MIN_LEARN else None
        if own is not None:
            tails[name] = own
        elif pooled is not None:
            tails[name] = LowerTail(**{**pooled.__dict__, "sigma": sigmas[name], "pooled": True})
        else:
            tails[name] = LowerTail(sigma=sigmas[name], residuals=int(v.size))
    return NoiseModel(tails)


def fit_tail(x: np.ndarray, sigma: float) -> LowerTail:
    """A generalised Pareto tail of ``x`` (sigmas below zero, positive = slower) over its worst
    TAIL_SHARE, less its gross faults (past a pilot fit's bar, GROSS_CHANCE): shape and scale from
    the exceedances' first two probability-weighted moments with the top CENSOR_SHARE of them
    censored (``_moments_fit``), the shape taken SHAPE_MARGIN of its standard errors heavier and the
    scale that keeps the first moment at that shape."""
    finite = np.isfinite(x)
    x = x if finite.all() else x[finite]  # a copy only where some are not
    del finite
    pilot = _moments_fit(x, sigma, PILOT_CENSOR, PILOT_MARGIN)
    if not pilot.learned:
        return pilot
    kept = x[x < pilot.bar(GROSS_CHANCE / x.size)]  # past the pilot's bar: faults (GROSS_CHANCE)
    tail = _moments_fit(kept, sigma, CENSOR_SHARE, own=True)
    return replace(tail, residuals=int(x.size), gross=int(x.size - kept.size))


def _moments_fit(x: np.ndarray, sigma: float, censor: float, margin: float = SHAPE_MARGIN,
                 own: bool = False) -> LowerTail:
    """The tail of ``x`` (finite) from its exceedances' moments (the worst TAIL_SHARE), the top
    ``censor`` of them censored, the shape ``margin`` standard errors (SHAPE_BIAS at least, with a
    margin at all) heavier than fitted. ``own``: ``x`` is the caller's scratch, overwritten."""
    m = int(x.size * TAIL_SHARE)  # exceedances: the m largest over the (m+1)-th
    if m < 20:
        return LowerTail(sigma=sigma, residuals=int(x.size))
    top = np.negative(x, out=x if own else None)
    top.partition(m)  # in place: a copy of its own, or the caller's scratch (8.4 M residuals at 4,096 hosts)
    top = -top[: m + 1]
    top.sort()
    threshold, y = float(top[0]), top[1:] - top[0]
    fc = 1.0 - int(m * censor) / m  # the share of the exceedances read by value
    b0, b1 = _partial_moments(y, fc)
    if b0 <= 0:  # a tail of ties (a quantised or degenerate sample): nothing to extrapolate
        return LowerTail(sigma=sigma, residuals=int(x.size))
    fitted = _solve_shape(b1 / b0, fc)
    se = _shape_se(fitted, fc, m)
    shape = min(SHAPE_MAX, fitted + max(margin * se, SHAPE_BIAS if margin else 0.0))
    scale = b0 / _h(shape, fc)[0]
    return LowerTail(sigma=sigma, residuals=int(x.size), learned=True, threshold=threshold,
                     share=m / x.size, shape=shape, fitted_shape=fitted, shape_se=se, scale=scale)


# Probability-weighted moments of a generalised Pareto (Hosking and Wallis 1987, Technometrics 29,
# 339-349), partial: over the quantiles below a censoring point Fc only (Wang 1990, Water Resources
# Research 26, 1337-1344). With the quantile function x(F) = scale ((1 - F)^-shape - 1) / shape,
#     b_k = integral_0^Fc F^k x(F) dF = scale h_k(shape),  k = 0, 1,
# closed form (``_h``); their ratio b_1 / b_0 depends on the shape alone and grows with it, so the
# shape is the root of one equation. Sample moments, from the m exceedances sorted, y_(1) < ...:
#     b_0 = 1/m sum_{i <= m Fc} y_(i),   b_1 = 1/m sum_{i <= m Fc} (i - 1) / (m - 1) y_(i)
# (Landwehr, Matalas and Wallis 1979's unbiased weights). Uncensored (Fc = 1) these are Hosking and
# Wallis' estimators, shape = 2 - b_0 / (b_0 - 2 b_1), whose variance (1 - s)(2 - s)^2 (1 - s + 2s^2)
# / ((1 - 2s)(3 - 2s) m) the quadrature of ``_shape_se`` reproduces (tests/test_noise_pwm.py).


def _partial_moments(y: np.ndarray, fc: float) -> tuple[float, float]:
    """The sample's b_0 and b_1 over its lowest ``fc`` (``y`` sorted ascending)."""
    m = y.size
    read = int(round(m * fc))
    b0 = float(y[:read].sum()) / m
    b1 = float(np.dot(np.arange(read) / (m - 1), y[:read])) / m
    return b0, b1


def _h(shape: float, fc: float) -> tuple[float, float]:
    """h_0, h_1: integral_0^fc F^k ((1 - F)^-shape - 1) / shape dF, in closed form (at shape 0 the
    limit, read at 1e-4: the 0/0 loses 4 of 16 digits)."""
    s = shape if abs(shape) >= 1e-4 else 1e-4
    gc = 1.0 - fc
    i0 = (1 - gc ** (1 - s)) / (1 - s)  # integral of (1 - F)^-s
    i1 = i0 - (1 - gc ** (2 - s)) / (2 - s)  # of F (1 - F)^-s
    return (i0 - fc) / s, (i1 - fc * fc / 2) / s


def _ratio(shape: float, fc: float) -> float:
    h0, h1 = _h(shape, fc)
    return h1 / h0


def _solve_shape(ratio: float, fc: float) -> float:
    """The shape whose b_1 / b_0 is ``ratio``, by bisection over [SHAPE_MIN, 1.5] (the ratio grows
    with the shape); a bound where the sample lies beyond it."""
    lo, hi = SHAPE_MIN, 1.5
    if _ratio(lo, fc) >= ratio:
        return lo
    if _ratio(hi, fc) <= ratio:
        return hi
    for _ in range(50):  # 2.4 / 2^50: far below the standard error
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if _ratio(mid, fc) > ratio else (mid, hi)
    return (lo + hi) / 2


def _shape_se(shape: float, fc: float, m: int) -> float:
    """The asymptotic standard error of the fitted shape. The sample moments are linear in the
    order statistics, so m Cov(b_j, b_k) = integral integral J_j(s) J_k(t) (min(s, t) - s t)
    x'(s) x'(t) ds dt over [0, Fc]^2, with J_0 = 1, J_1 = F and x'(F) = scale (1 - F)^(-shape - 1)
    (the asymptotic covariance of L-statistics: Chernoff, Gastwirth and Johns 1967; Hosking and
    Wallis 1987 sec. 3), taken by the midpoint rule; then the delta method through b_1 / b_0 and
    the root (the scale cancels)."""
    f = (np.arange(_SE_GRID) + 0.5) * fc / _SE_GRID
    slope = (1 - f) ** (-shape - 1) * fc / _SE_GRID  # x'(F) dF, per unit scale
    kernel = np.minimum.outer(f, f) - np.outer(f, f)
    a0, a1 = slope, f * slope
    cov = np.array([[a @ kernel @ b for b in (a0, a1)] for a in (a0, a1)]) / m
    h0, h1 = _h(shape, fc)
    grad = np.array([-h1 / h0**2, 1 / h0])  # d(b_1 / b_0) / d(b_0, b_1), at unit scale
    d = 1e-4
    slope_ratio = (_ratio(shape + d, fc) - _ratio(shape - d, fc)) / (2 * d)
    return float(math.sqrt(max(float(grad @ cov @ grad), 0.0)) / abs(slope_ratio))


def _erfc(v: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erfc, otypes=[float])(v) if v.size else v.astype(float)
