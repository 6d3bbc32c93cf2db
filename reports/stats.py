"""Robust statistics shared by the rules: median, MAD, and how many MADs make a finding.

Median/MAD instead of mean/stddev because the thing we look for (a slow node, a bad link) is
exactly the outlier that would drag a mean and inflate a stddev until it hides itself.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from statistics import NormalDist
from typing import Any

import numpy as np

MAD_TO_SIGMA = 1.4826  # MAD * this = stddev for normal data
SIGMA_FLOOR = 0.005  # 0.5% in log space: below this, noise-free data would make any speck "significant"


def robust_sigma(values: np.ndarray) -> float:
    """1.4826 * MAD of the finite values (0.0 when there are none)."""
    v = values[np.isfinite(values)]
    if v.size == 0:
        return 0.0
    return float(MAD_TO_SIGMA * np.median(np.abs(v - np.median(v))))


RESIDUAL_QUANTILE = 0.9
"""The share of a fit's residuals inside the band ``residual_sigma`` reads the noise from."""
GROSS_SIGMAS = 6.0
"""Residuals further than this many of the MAD's sigmas are faults, never noise, even where the MAD
reads the noise at half its width: ``residual_sigma`` leaves them out of its band."""


def residual_sigma(values: np.ndarray) -> float:
    """The noise of a median polish's residuals: the larger of 1.4826 * MAD and the band around the
    median holding RESIDUAL_QUANTILE of them, in sigmas of a normal (0.0 when there are none).

    Why not the MAD alone: the polish zeroes each node's median residual, so where nodes have few
    partners (7-8 a hop class at 16 nodes) many residuals sit near zero and the MAD reads 5 % noise
    as 3.5 %, while the tails, which the tests count, keep the noise's full width (one pair's own
    noise hardly moves its nodes' medians): pairs past 3 sigma came out 10x as often as noise gives
    them. The 90 % band is past that zeroed middle (4.8 % at 16 nodes, 5.1 % at 64, where the MAD
    reads 4.8 %; past 3 sigma then 0.16-0.18 % of a healthy 16-node fleet's pairs, a normal's 0.13 %).
    Gross outliers are left out of the band first (GROSS_SIGMAS): with 6 hosts, a slow link and a
    slow node are a third of the 15 pairs and would be the band."""
    v = values[np.isfinite(values)]
    if v.size == 0:
        return 0.0
    # v, dev and kept are this function's own copies, and a median or quantile does not depend on
    # the order: each is reordered and overwritten in place (8.4 M residuals at 4,096 hosts: a
    # copy each was ~0.2 GB more at once)
    dev = v
    dev -= np.median(v, overwrite_input=True)
    np.abs(dev, out=dev)
    mad = float(MAD_TO_SIGMA * np.median(dev, overwrite_input=True))
    kept = dev[dev <= GROSS_SIGMAS * mad]
    if kept.size == 0:
        return mad
    band = float(np.quantile(kept, RESIDUAL_QUANTILE, overwrite_input=True)) / NormalDist().inv_cdf(
        0.5 + RESIDUAL_QUANTILE / 2)
    return max(mad, band)


def z_threshold(k: float, n_tests: int, alpha: float = 0.05) -> float:
    """The z a deviation must exceed: at least ``k``, and more when many things are tested at once.

    With n tests and a one-sided family-wise error of ``alpha`` (Bonferroni), noise alone flags
    nothing with probability 1 - alpha: 523,776 pairs need about 5.2 sigma, 16 nodes 3.0.
    """
    if n_tests <= 1:
        return k
    return max(k, -NormalDist().inv_cdf(alpha / n_tests))


def fdr_cut(z: np.ndarray, n_tests: int, k: float, q: float = 0.05) -> float:
    """The z at or below which deviations are findings: Benjamini-Hochberg at false-discovery rate
    ``q`` over ``n_tests`` one-sided tests, and never looser than ``-k``.

    Why FDR and not only Bonferroni: what a reader needs is that (nearly) every finding is real
    (precision). With no real faults BH is as strict as Bonferroni (a healthy fleet stays clean);
    with 30 clearly slow links among 500k pairs it relaxes just enough not to miss the borderline
    ones. Returns -inf when nothing qualifies.
    """
    return _cut(z, k, lambda p: bh_mask(p, n_tests, q))


def holm_cut(z: np.ndarray, n_tests: int, k: float, alpha: float = 0.05) -> float:
    """The z at or below which deviations are findings with the family-wise error held at ``alpha``
    (Holm's step-down over ``n_tests`` one-sided tests), and never looser than ``-k``.

    Why family-wise and not only false-discovery control for warnings: each false "check the cables
    between A and B" sends an engineer to a switch. BH lets a few noise pairs in once real faults
    are present and grows them with the fleet; Holm keeps the chance of any false warning at
    ``alpha`` whatever the fleet size, and is uniformly a little more powerful than Bonferroni.
    Returns -inf when nothing qualifies.
    """
    return _cut(z, k, lambda p: holm_mask(p, n_tests, alpha))


def _cut(z: np.ndarray, k: float, test) -> float:  # noqa: ANN001 - p-values -> passed mask
    """The least extreme z among those at or below ``-k`` whose normal p-values ``test`` passes."""
    cand = z[np.isfinite(z) & (z <= -k)]
    if cand.size == 0:
        return float("-inf")
    passed = test(0.5 * np.array([math.erfc(-float(v) / math.sqrt(2)) for v in cand]))
    return float(cand[passed].max()) if passed.any() else float("-inf")


def holm_mask(p: np.ndarray, n_tests: int, alpha: float) -> np.ndarray:
    """Which p-values (NaN: not a candidate) Holm's step-down over ``n_tests`` tests rejects at
    family-wise error ``alpha``: the smallest against alpha / n, the next against alpha / (n - 1) ...,
    stopping at the first that fails."""
    out, order, ranked = _ranked(p)
    if order.size and n_tests >= 1:
        ok = ranked <= alpha / np.maximum(n_tests - np.arange(order.size), 1)
        out.ravel()[order[: order.size if ok.all() else int(np.argmin(ok))]] = True
    return out


def bh_mask(p: np.ndarray, n_tests: int, q: float) -> np.ndarray:
    """Which p-values (NaN: not a candidate) Benjamini-Hochberg over ``n_tests`` tests rejects at
    false-discovery rate ``q``: every one up to the largest rank r with p <= r q / n."""
    out, order, ranked = _ranked(p)
    if order.size and n_tests >= 1:
        ok = ranked <= np.arange(1, order.size + 1) * q / n_tests
        if ok.any():
            out.ravel()[order[: np.nonzero(ok)[0].max() + 1]] = True
    return out


def _ranked(p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(an all-False mask shaped as ``p``, the flat positions of its finite values smallest first,
    those values)."""
    flat = p.ravel()
    idx = np.nonzero(np.isfinite(flat))[0]
    order = idx[np.argsort(flat[idx], kind="stable")]
    return np.zeros(p.shape, dtype=bool), order, flat[order]


def holm_bar(z: np.ndarray, n_tests: int, k: float, alpha: float = 0.05) -> float:
    """The bar of ``holm_cut``, as a positive z, for people: the critical value the weakest finding
    had to pass at its step (alpha / (n_tests - its rank)), or the first step's when none passed;
    never below ``k``. ``holm_cut`` itself is the weakest finding's own z, which would tell a reader
    of a lone finding that it only just passed."""
    cut = holm_cut(z, n_tests, k, alpha)
    passed = int(np.sum(np.isfinite(z) & (z <= cut))) if np.isfinite(cut) else 0
    step = max(n_tests - max(passed - 1, 0), 1)
    return max(k, -NormalDist().inv_cdf(alpha / step))


@functools.lru_cache(maxsize=1 << 16)
def binomial_sf(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p), summed in log space (n up to a few thousand partners).
    Remembered: a fleet's nodes mostly have as many partners and few slow pairs, so the same few
    sums come back for thousands of nodes (at 4,096 nodes, 2,000 sums of 4,000 terms each)."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    lp, lq = math.log(p), math.log1p(-p)
    terms = [
        math.lgamma(n + 1) - math.lgamma(x + 1) - math.lgamma(n - x + 1) + x * lp + (n - x) * lq
        for x in range(k, n + 1)
    ]
    top = max(terms)
    return min(1.0, math.exp(top) * sum(math.exp(t - top) for t in terms))


def poisson_binomial_sf(k: int, probs: list[float]) -> float:
    """P(X >= k) for X the number of successes of independent trials with chances ``probs``: the
    count test of a suspect whose pairs ran in rounds disturbed unequally (``netbench.confirm``),
    each round's chance its own. Exact by dynamic programming over the trials (a suspect's few
    hundred rounds at most)."""
    if k <= 0:
        return 1.0
    if k > len(probs):
        return 0.0
    dist = np.zeros(k + 1)  # dist[x]: P(x successes so far), the last cell "k or more"
    dist[0] = 1.0
    for p in probs:
        top = dist[k] + dist[k - 1] * p
        dist[1:k] = dist[1:k] * (1 - p) + dist[: k - 1] * p
        dist[0] *= 1 - p
        dist[k] = top
    return float(min(1.0, dist[k]))


def sig3(x: float | None) -> float | None:
    """Round to 3 significant digits for evidence and plots (measurements are not better)."""
    if x is None or not np.isfinite(x):
        return None
    if x == 0:
        return 0.0
    return float(f"{x:.3g}")


def g3(x: float | None) -> str:
    """3 significant digits as text for titles: 192.4 -> '192', 0.8567 -> '0.857', None -> '?'."""
    if x is None or not np.isfinite(x):
        return "?"
    return f"{x:.3g}" if abs(x) < 1e6 else f"{x:.3e}"


def majority(values: list[Any]) -> Any:
    """The most common value (ties: the first seen); None for no values."""
    return Counter(values).most_common(1)[0][0] if values else None


def pooled_interval(
    a: tuple[float, float] | None, b: tuple[float, float] | None
) -> tuple[float, float] | None:
    """Two independent 95% intervals of one ratio (each symmetric in log space) as one, weighted by
    their precision: a node's interval from the sweep's pairs and the one from its re-test pairs
    against known-good partners. Either alone where the other is None."""
    if a is None or b is None:
        return a or b
    mids, weights = [], []
    for lo, hi in (a, b):
        lo, hi = math.log(max(min(lo, hi), 1e-12)), math.log(max(max(lo, hi), 1e-12))
        half = max((hi - lo) / 2, 1e-9)
        mids.append((lo + hi) / 2)
        weights.append(1 / half**2)
    mid = sum(m * w for m, w in zip(mids, weights, strict=True)) / sum(weights)
    half = 1 / math.sqrt(sum(weights))
    return math.exp(mid - half), math.exp(mid + half)

