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

The fit is Pickands' estimator from three quantiles of the tail (closed form, no optimiser): it
reads nothing above the top TAIL_SHARE / 4 of the residuals, so a few hundred real faults there
(an intermittent node's slow rounds, a dead cable 14 sigma out) do not make the noise look heavier
than it is and hide the faults beside them. Its shape is taken SHAPE_MARGIN standard errors heavier
than fitted and never lighter than an exponential, because the bar extrapolates to 1e-5 of the
tail and an under-estimated shape is what gives false alarms (a normal's tail fitted this close
reads as lighter than it is). Measured (tests/test_noise.py, benchmarks/README.md): no more than
the promised fwer of healthy fleets raise a finding under log-normal, skewed, Student-t (3-5
degrees of freedom) and congestion-mixture noise; the price is power at 256 nodes (a bar near 7
sigma instead of 4.7 for a normal), which a re-test buys back.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np
from netbench.reports.stats import SIGMA_FLOOR, residual_sigma

MIN_LEARN = 8000
"""Residuals a hop class needs to learn its own tail from: Pickands' m = 100 at TAIL_SHARE; with
fewer the margin on the shape (its error falls as 1/sqrt(m)) leaves no power."""
TAIL_SHARE = 0.05
"""The worst share of residuals whose exceedances the tail is fitted to."""
SHAPE_MARGIN = 2.33
"""Standard errors added to the fitted shape (one-sided 99%): the bar extrapolates far."""
SHAPE_MAX = 0.45
"""The heaviest shape used: the moments' standard error needs shape < 0.5 (and a tail heavier than
Student-t with 2.2 degrees of freedom is no longer noise to be modelled)."""

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
        return (f"learned from {self.residuals:,} residuals of {where}: generalised Pareto over the "
                f"worst {TAIL_SHARE:.0%}, shape {self.shape:.2f} (fitted {self.fitted_shape:.2f})")


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
    per_class = {name: resid[(cls == k) & np.isfinite(resid)] for k, name in enumerate(classes)}
    sigmas = {name: max(residual_sigma(v), SIGMA_FLOOR) if v.size >= MIN_LEARN else sigma
              for name, v in per_class.items()}
    pooled_x = np.concatenate([-v / sigmas[name] for name, v in per_class.items()] or [np.zeros(0)])
    pooled = fit_tail(pooled_x, 1.0) if pooled_x.size >= MIN_LEARN else None
    tails = {}
    for name, v in per_class.items():
        own = fit_tail(-v / sigmas[name], sigmas[name]) if v.size >= MIN_LEARN else None
        if own is not None:
            tails[name] = own
        elif pooled is not None:
            tails[name] = LowerTail(**{**pooled.__dict__, "sigma": sigmas[name], "pooled": True})
        else:
            tails[name] = LowerTail(sigma=sigmas[name], residuals=int(v.size))
    return NoiseModel(tails)


def fit_tail(x: np.ndarray, sigma: float) -> LowerTail:
    """A generalised Pareto tail of ``x`` (sigmas below zero, positive = slower) from three of its
    quantiles, at TAIL_SHARE, half and a quarter of it (Pickands' estimator): the shape from how
    fast their spacing grows, the scale from the spacing of the first two, the shape taken
    SHAPE_MARGIN standard errors heavier and never lighter than an exponential's."""
    x = x[np.isfinite(x)]
    m = int(x.size * TAIL_SHARE / 4)  # Pickands' m: the quantiles at 4m, 2m and m from the top
    if m < 5:
        return LowerTail(sigma=sigma, residuals=int(x.size))
    top = -np.partition(-x, 4 * m)[: 4 * m + 1]  # the 4m + 1 largest, unordered
    top.sort()
    q4, q2, q1 = top[0], top[2 * m], top[3 * m]  # the (4m+1)-th, (2m+1)-th and (m+1)-th largest
    fitted = math.log((q1 - q2) / max(q2 - q4, 1e-12)) / math.log(2) if q1 > q2 > q4 else 0.0
    shape = min(SHAPE_MAX, max(0.0, fitted + SHAPE_MARGIN * math.sqrt(_pickands_var(fitted) / m)))
    spread = max(q2 - q4, 1e-6)
    scale = spread * shape / (2**shape - 1) if shape > 1e-9 else spread / math.log(2)
    return LowerTail(sigma=sigma, residuals=int(x.size), learned=True, threshold=float(q4),
                     share=(4 * m + 1) / x.size, shape=shape, fitted_shape=fitted, scale=scale)


def _pickands_var(shape: float) -> float:
    """m times the asymptotic variance of Pickands' shape estimate (Dekkers and de Haan 1989)."""
    g = min(max(shape, -0.45), SHAPE_MAX)
    if abs(g) < 1e-6:
        return 3 / (4 * math.log(2) ** 4)
    return g**2 * (2 ** (2 * g + 1) + 1) / (2 * (2**g - 1) * math.log(2)) ** 2


def _erfc(v: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erfc, otypes=[float])(v) if v.size else v.astype(float)
