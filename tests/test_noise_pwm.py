"""The noise tail from probability-weighted moments (issue 46): the fit recovers known generalised
Pareto shapes within its own interval, and a normal fleet is judged near a normal's bar (Pickands'
estimator with its margin put it 1.5x further out, and links at 0.7 went unreported)."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest
from netbench.reports.noise import fit_tail, learn
from netbench.reports.stats import residual_sigma

from netbench.sim.measure import noise_factor

PAIRS = 32_640  # a 256-node fleet's pairs


def _gpd(shape: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """A generalised Pareto sample (scale 1): its exceedances over any threshold are generalised
    Pareto of the same shape, so the fit over its worst 5% must find ``shape``."""
    u = rng.random(n)
    return -np.log1p(-u) if shape == 0 else np.expm1(-shape * np.log1p(-u)) / shape


@pytest.mark.parametrize("shape", [-0.2, 0.0, 0.3])
def test_the_fit_recovers_known_shapes_within_its_interval(shape: float) -> None:
    rng = np.random.default_rng(46)
    fits = [fit_tail(_gpd(shape, 400_000, rng), 1.0) for _ in range(12)]
    se = fits[0].shape_se
    assert 0.01 < se < 0.03  # 20,000 exceedances, 5% of them censored
    # each within its one-sided 99% margin's reach, both ways
    assert all(abs(f.fitted_shape - shape) < 2.58 * f.shape_se for f in fits), [f.fitted_shape for f in fits]
    # the standard error is the spread the fits show (12 fits: within 50%)
    spread = float(np.std([f.fitted_shape for f in fits], ddof=1))
    assert 0.5 * se < spread < 1.5 * se, (spread, se)
    # the shape used is the fitted one plus its margin (0.1 at least: the fit's bias), and the tail
    # it gives covers the truth's
    f = fits[0]
    assert f.shape == pytest.approx(min(0.45, f.fitted_shape + max(2.33 * f.shape_se, 0.1)))
    truth = (1 + shape * 30.0) ** (-1 / shape) if shape else math.exp(-30.0)  # P(x > 30)
    assert f.p_below(np.array([30.0]))[0] >= 0.5 * truth


def test_the_standard_error_is_hosking_and_wallis_where_nothing_is_censored() -> None:
    """With next to nothing censored the moments are Hosking and Wallis' own, whose standard error at
    shape 0 is sqrt(4 / (3 m)); censoring 5% costs about 1.5x (the shape is read from the extremes)."""
    from netbench.reports.noise import _shape_se

    m = 10_000
    assert _shape_se(0.0, 0.9995, m) == pytest.approx(math.sqrt(4 / (3 * m)), rel=0.1)
    assert 1.3 < _shape_se(0.0, 0.95, m) / math.sqrt(4 / (3 * m)) < 1.7


def _ideal_normal(p: float, cv: float = 0.05) -> float:
    """The simulator's normal law (time x (1 + cv z)): the log-busbw drop a pair reaches with chance
    ``p``, what a detector knowing the law would bar at."""
    return math.log1p(cv * -NormalDist().inv_cdf(p))


def test_a_normal_fleets_bar_is_near_the_ideal_detectors() -> None:
    """Synthetic residuals of a 256-node fleet under the simulator's normal law: the family-wise bar
    (Holm's first step) through the learned tail is within 1.2x of the ideal detector's in most
    fleets (the normal's own bar, in units of the residuals' sigma: 1.12x), and within 1.5x in all;
    Pickands' estimator put it at 1.5x in the median fleet."""
    rng = np.random.default_rng(7)
    p = 0.05 / PAIRS
    ratios = []
    for _ in range(10):
        r = -np.log(noise_factor("normal", 0.05, rng.standard_normal(PAIRS), rng))
        r -= np.median(r)
        tail = learn(r, np.zeros(r.size, dtype=int), ["spine"], residual_sigma(r)).tail("spine")
        ratios.append(tail.bar(p) * tail.sigma / _ideal_normal(p))
    assert float(np.median(ratios)) < 1.2, ratios
    assert max(ratios) < 1.5, ratios
