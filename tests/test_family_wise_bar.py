"""The family-wise bar a finding's evidence shows (issue 30): the critical value it had to pass,
not its own z, which told the reader of every lone finding that it only just passed."""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import pytest
from netbench.reports.stats import holm_bar, holm_cut


def _crit(alpha: float, m: int) -> float:
    return -NormalDist().inv_cdf(alpha / m)


def test_a_lone_finding_shows_the_bar_not_its_own_z() -> None:
    z = np.r_[-21.0, np.zeros(99)]
    assert holm_cut(z, 100, 3.0) == -21.0  # the cut is the finding's own z ...
    assert holm_bar(z, 100, 3.0) == pytest.approx(_crit(0.05, 100))  # ... the bar is 3.29
    assert holm_bar(z, 100, 4.0) == 4.0  # never below the policy's k


def test_the_bar_is_the_weakest_findings_step_and_none_passed_is_the_first_step() -> None:
    z = np.r_[-30.0, -20.0, -10.0, np.zeros(1000 - 3)]
    # three found: the weakest was tested third, against alpha / (1000 - 2)
    assert holm_bar(z, 1000, 1.0) == pytest.approx(_crit(0.05, 998))
    assert holm_bar(np.zeros(50), 50, 1.0) == pytest.approx(_crit(0.05, 50))
    nan = np.full((4, 4), np.nan)  # a matrix with untested cells, as the pair model has
    nan[0, 1] = -9.0
    assert holm_bar(nan, 6, 1.0) == pytest.approx(_crit(0.05, 6))
