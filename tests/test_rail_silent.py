"""A rail whose every group failed while the other rails measured is its rail switch (issue 45: "the
same for a rail" as a leaf whose every host went silent): one switch finding on the check list, no
host drained, none of its groups repeated as links or groups to re-run."""

from __future__ import annotations

import copy

from netbench.reports import verdict
from netbench.reports.context import AnalysisContext
from netbench.reports.engine import run_rules
from synthetic import make_fleet


def _fleet_with_rails(dark: set[int], rails: int = 4):
    fleet = make_fleet(4, 1, pair_sizes=(1 << 30,), ring_sizes=(), seed=2)
    base = fleet.rows[0]
    rows = list(fleet.rows)
    for rail in range(rails):
        for a, b in (("gpu001", "gpu002"), ("gpu003", "gpu004"), ("gpu001", "gpu003"), ("gpu002", "gpu004")):
            row = copy.deepcopy(base) | {"pattern": "rail", "hosts": [a, b], "rail": rail, "ranks": 2,
                                         "group": f"rail{rail}:{a}|{b}", "round": 100 + rail}
            if rail in dark:
                row |= {"status": "error", "error": "rank 0: NCCL error: remote process exited or there was "
                        "a network error", "time_us": None, "busbw_GBps": None, "algbw_GBps": None,
                        "rank_time_us": None, "bytes": 0}
            rows.append(row)
    return run_rules(AnalysisContext.from_data(rows, fleet.inventory, fleet.env, fleet.run)), fleet


def test_a_rail_dark_in_every_group_is_its_switch_and_drains_nobody() -> None:
    found, _ = _fleet_with_rails({2})
    silent = [f for f in found if f.rule == "switch_silent"]
    assert [(f.subject_kind, f.evidence["rail"]) for f in silent] == [("switch", 2)], [f.title for f in found]
    assert "Rail 2" in silent[0].title and silent[0].hosts == []
    assert not [f for f in found if f.rule in ("error", "timeout", "host_failing")]
    v = verdict.judge(found, 4, command="sweep")
    assert v.status == "fail" and list(v.drain) == []


def test_every_rail_dark_is_not_one_switch() -> None:
    found, _ = _fleet_with_rails({0, 1, 2, 3})
    assert not [f for f in found if f.rule == "switch_silent"]
    assert [f for f in found if f.rule == "error"]  # the groups' failures, as before
