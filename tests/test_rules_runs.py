"""Run-level rules: failed/wrong measurements, regressions, policy floors, machinery."""

from __future__ import annotations

import copy

from netbench.reports.context import AnalysisContext, Baseline, rows_frame
from netbench.reports.engine import analyze, run_rules
from netbench.reports.policy import Expectations, ExpectedBusbw, Policy, Thresholds
from netbench.reports.rules import errors, expected, regression
from netbench.reports.rules.base import Rule
from synthetic import host_names, make_fleet, write_run_dir

from netbench.common.findings import Finding


def ctx_of(fleet, **kw) -> AnalysisContext:
    return AnalysisContext.from_data(fleet.rows, fleet.inventory, fleet.env, fleet.run, **kw)


# -- stragglers: tests/test_stragglers.py (who arrives last, from arrivals.jsonl) ------------------


# -- errors ----------------------------------------------------------------------------------------


def _fleet_with_failures():
    fleet = make_fleet(8, 2, pair_sizes=(1 << 20, 1 << 30), ring_sizes=(), seed=4)
    for r in fleet.rows:
        hs = r["hosts"]
        if hs == ["gpu001", "gpu008"] and r["bytes"] == 1 << 30:
            r["wrong"] = 12
        if "gpu005" in hs:  # a host that fails with everyone
            r.update(status="timeout", error="pair timed out after 60 s", busbw_GBps=None, time_us=None)
        if sorted(hs) == ["gpu002", "gpu003"]:
            r.update(
                status="error", error="NCCL error: unhandled system error", busbw_GBps=None, time_us=None
            )
    return fleet


def test_wrong_timeouts_errors_reported_and_failing_host_summarised():
    found = errors.check(ctx_of(_fleet_with_failures()))
    got = {(f.rule, f.subject) for f in found}
    assert ("wrong_results", "gpu001|gpu008") in got
    assert ("error", "gpu002|gpu003") in got or ("error", "gpu003|gpu002") in got
    assert ("host_failing", "gpu005") in got
    assert not any(f.rule == "timeout" and "gpu005" in f.hosts for f in found)  # told once, on the host
    assert all(f.severity == "fail" for f in found)
    wrong = next(f for f in found if f.rule == "wrong_results")
    assert wrong.evidence["wrong_elements"] == 12 and wrong.evidence["sizes_bytes"] == [1 << 30]
    err = next(f for f in found if f.rule == "error")
    assert "NCCL error" in next(iter(err.evidence["errors"]))


def test_clean_rows_have_no_error_findings():
    assert errors.check(ctx_of(make_fleet(8, 2, seed=5))) == []


# -- regression -------------------------------------------------------------------------------------


def _regressed(factor_large: float, factor_small: float, both_modes: bool = False):
    base = make_fleet(8, 2, pair_sizes=(1 << 30,), noise=0.01, seed=6)
    if both_modes:  # the fleet is out-of-place only: the same rows again, in-place
        assert not any(r.get("in_place") for r in base.rows)
        base.rows += [{**r, "in_place": True} for r in base.rows]
    cur = copy.deepcopy(base)
    for r in cur.rows:
        if r["pattern"] == "world" and r["bytes"] >= 64 << 20:
            r["time_us"] /= factor_large
            r["busbw_GBps"] *= factor_large
        if r["pattern"] == "world" and r["bytes"] <= 8 << 10:
            r["time_us"] *= factor_small
            r["busbw_GBps"] /= factor_small
    for h in cur.env["hosts"].values():
        h["nccl"] = "2.29.1"
        h["env"]["NCCL_ALGO"] = "Tree"
    baseline = Baseline(
        rows=rows_frame(base.rows), env=base.env, run=base.run, inventory=base.inventory, path="base-run"
    )
    return ctx_of(cur, baseline=baseline)


def test_no_regression_within_the_runs_own_noise():
    """Two runs of one build on a busy machine: every world size off by up to +-12 % at random."""
    import random

    base = make_fleet(8, 2, pair_sizes=(1 << 30,), noise=0.01, seed=6)
    flagged = 0
    for seed in range(5):
        rng = random.Random(seed)
        cur = copy.deepcopy(base)
        for r in cur.rows:
            if r["pattern"] == "world":
                f = 1 + rng.uniform(-0.12, 0.12)
                r["time_us"] *= f
                r["busbw_GBps"] /= f
        baseline = Baseline(rows=rows_frame(base.rows), env=base.env, run=base.run, path="base-run")
        found = [f for f in regression.check(ctx_of(cur, baseline=baseline)) if f.rule == "regression"]
        flagged += len(found)
    assert flagged == 0


def test_regression_per_size_with_env_differences():

    found = regression.check(_regressed(0.7, 1.6))
    env = [f for f in found if f.rule == "env_changed"]
    assert env and {d["key"] for d in env[0].evidence["differences"]} >= {
        "hosts.*.nccl",
        "hosts.*.env.NCCL_ALGO",
    }
    reg = [f for f in found if f.rule == "regression"]
    assert len(reg) == 1 and reg[0].subject.startswith("all_reduce world")
    sizes = reg[0].evidence["sizes"]
    assert {s["judged_on"] for s in sizes} == {"time", "busbw"}
    assert all(s["bytes"] <= 8 << 10 for s in sizes if s["judged_on"] == "time")
    assert all(0.65 < s["busbw_ratio"] < 0.75 for s in sizes if s["judged_on"] == "busbw")
    assert reg[0].evidence["env_differences"]


def test_one_regression_finding_holds_both_modes():
    """Out-of-place and in-place rows of one collective regress together: one finding, both modes in
    its evidence (two findings with one title read as a duplicate)."""
    reg = [f for f in regression.check(_regressed(0.7, 1.6, both_modes=True)) if f.rule == "regression"]
    assert len(reg) == 1 and reg[0].subject == "all_reduce world float", [f.title for f in reg]
    assert "out-of-place and in-place; worst: " in reg[0].title
    modes = [(s["bytes"], s["in_place"]) for s in reg[0].evidence["sizes"]]
    assert {ip for _, ip in modes} == {False, True} and len(set(modes)) == len(modes)


def test_no_regression_when_same():

    found = regression.check(_regressed(1.0, 1.0))
    assert [f.rule for f in found] == ["env_changed"]  # the env still differs; the numbers do not


# -- policy floors ----------------------------------------------------------------------------------


def test_below_expected_busbw_by_hop_class():
    fleet = make_fleet(8, 2, pair_sizes=(1 << 30,), spine_factor=0.5, noise=0.01, seed=7, peak_GBps=180.0)
    pol = Policy(
        expect=Expectations(
            busbw=[
                ExpectedBusbw(
                    collective="all_reduce", pattern="pair", hop_class="spine", min_bytes="1G", busbw_GBps=150
                )
            ]
        )
    )
    found = expected.check(ctx_of(fleet, policy=pol))
    assert len(found) == 1 and found[0].evidence["below_rows"] == 16  # 4 x 4 cross-leaf pairs at ~90 GB/s
    ok = Policy(
        expect=Expectations(
            busbw=[
                ExpectedBusbw(
                    collective="all_reduce", pattern="pair", hop_class="leaf", min_bytes="1G", busbw_GBps=150
                )
            ]
        )
    )
    assert expected.check(ctx_of(fleet, policy=ok)) == []
    assert expected.check(ctx_of(fleet)) == []  # no expectation, no guess


# -- machinery --------------------------------------------------------------------------------------


def test_severity_override_cap_and_crashing_rule():
    def noisy(ctx):
        return [
            Finding(
                rule="slow_pair",
                severity="warn",
                subject_kind="pair",
                subject=f"a|{i}",
                title="t",
                hosts=["a", str(i)],
            )
            for i in range(7)
        ]

    def broken(ctx):
        raise RuntimeError("boom")

    ctx = ctx_of(
        make_fleet(4, 1, seed=8),
        policy=Policy(severity={"slow_pair": "fail"}, thresholds=Thresholds(max_findings_per_rule=5)),
    )
    found = run_rules(ctx, rules=[Rule("noisy", {"slow_pair": "warn"}, noisy), Rule("broken", {}, broken)])
    assert [f.severity for f in found if f.rule == "slow_pair"] == ["fail"] * 5
    trunc = [f for f in found if f.rule == "findings_truncated"]
    assert len(trunc) == 1 and trunc[0].evidence["more"] == 2
    crash = [f for f in found if f.rule == "analysis_error"]
    assert crash and "boom" in crash[0].title
    assert found[0].severity == "fail"


def test_analyze_reads_a_run_directory(tmp_path):
    hosts = host_names(16)
    fleet = make_fleet(16, 2, slow_nodes={hosts[3]: 0.75}, seed=9)
    write_run_dir(fleet, tmp_path / "run")
    found = analyze(tmp_path / "run")
    assert [f.subject for f in found if f.rule == "slow_node"] == [hosts[3]]
