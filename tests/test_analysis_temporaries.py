"""The analysis' numbers without its largest temporaries (issue 48, 4,096 nodes): the learned pair
rates are each pair's median over its rows as a group-by gives them, the pairs re-tested (several
rows) and not alike; the noise helpers that now work in place on their own copies leave the
caller's residuals as they were and read the same sigma and tails from a copy."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from netbench.reports.learned import pair_rates
from netbench.reports.noise import learn
from netbench.reports.pairrows import PairRows
from netbench.reports.stats import residual_sigma


def _rows(seed: int, repeats: int) -> list[dict]:
    """Every pair of 12 hosts once at 64M and 1G; ``repeats`` of the 1G pairs measured again (a
    re-test), some of them twice more; one failed row and one without busbw."""
    rng = np.random.default_rng(seed)
    hosts = [f"node{i:02d}" for i in range(12)]
    rows = []
    for size in (1 << 26, 1 << 30):
        for i in range(12):
            for j in range(i + 1, 12):
                pair = [hosts[i], hosts[j]] if rng.random() < 0.5 else [hosts[j], hosts[i]]
                rows.append({"pattern": "pair", "hosts": pair, "bytes": size, "status": "ok",
                             "busbw_GBps": float(rng.uniform(50, 200)), "round": len(rows)})
    tops = [r for r in rows if r["bytes"] == 1 << 30]
    for k in range(repeats):
        again = tops[int(rng.integers(len(tops)))]
        for _ in range(1 + k % 3):
            rows.append({**again, "hosts": again["hosts"][::-1], "busbw_GBps": float(rng.uniform(50, 200))})
    rows.append({**tops[0], "status": "error", "busbw_GBps": None})
    rows.append({**tops[1], "busbw_GBps": None})
    return rows


@pytest.mark.parametrize(("seed", "repeats"), [(1, 0), (2, 5), (3, 40)])
def test_pair_rates_are_each_pairs_median_over_its_rows(seed: int, repeats: int) -> None:
    rows = PairRows.from_records(_rows(seed, repeats))
    pairs, rate = pair_rates(rows)
    ok = rows.ok & np.isfinite(rows.busbw) & (rows.busbw > 0) & (rows.nbytes == 1 << 30)
    lo, hi = np.minimum(rows.a[ok], rows.b[ok]), np.maximum(rows.a[ok], rows.b[ok])
    expected = pd.Series(rows.busbw[ok]).groupby([lo, hi]).median()
    assert [tuple(p) for p in pairs.tolist()] == expected.index.tolist()
    assert rate.tolist() == expected.tolist()  # the same numbers, not close ones


def test_the_noise_helpers_leave_the_callers_residuals_as_they_were() -> None:
    rng = np.random.default_rng(7)
    resid = rng.standard_t(3, 20_000) * 0.05
    resid[::97] = np.nan
    cls = rng.integers(0, 2, resid.size)
    before = resid.copy()
    sigma = residual_sigma(resid)
    model = learn(resid, cls, ["leaf", "spine"], sigma)
    assert np.array_equal(resid, before, equal_nan=True)
    assert sigma == residual_sigma(before.copy())
    again = learn(before.copy(), cls, ["leaf", "spine"], sigma)
    assert model.tails == again.tails
    assert all(t.learned for t in model.tails.values())
