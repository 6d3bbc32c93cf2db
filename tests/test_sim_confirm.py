"""`netbench simulate`'s confirm step: the sweep's suspects re-tested on the simulated fabric as
`sweep --hosts` re-tests them (one loop, netbench.confirm; one follow-up launch, pipeline.RetestLaunch,
through the simulated launcher), within a budget of fabric time."""

from __future__ import annotations

import json

from click.testing import CliRunner
from netbench.reports.engine import analyze
from rowfiles import rows_of

from netbench.cli import cli
from netbench.confirm import CANDIDATE_RUNS, intermittent_phases
from netbench.run.options import PairOptions
from netbench.sim.confirm import confirm_on_fabric
from netbench.sim.fabric import FabricSpec, Fault
from netbench.sim.launcher import LaunchCosts
from netbench.sim.options import SimOptions
from netbench.sim.run import simulate

SLOW = {"slow_node", "slow_pair", "slow_switch"}


def sweep(tmp_path, name, faults=(), seed=1, noise=0.05):  # noqa: ANN001, ANN201
    spec = FabricSpec(nodes=16, leaves=2, oversubscription=2.0)
    opts = SimOptions(spec, tuple(Fault.parse(f) for f in faults), seed=seed, out=str(tmp_path / name),
                      noise=noise, pairs=PairOptions(pair_sizes=[1 << 30]))
    return opts, simulate(opts)


def serious(run_dir):  # noqa: ANN001, ANN201
    found = analyze(run_dir)
    return sorted((f.rule, f.subject) for f in found if f.rule in SLOW and f.severity in ("warn", "fail"))


def run_json(res):  # noqa: ANN001, ANN201
    return json.loads((res.rundir.path / "run.json").read_text())


def test_a_planted_slow_node_is_confirmed_against_known_good_partners(tmp_path):
    opts, res = sweep(tmp_path, "slow", ["node:node0005=0.6"])
    said: list[str] = []
    done, fabric_s = confirm_on_fabric(opts, res, 60.0, said.append)
    assert done.retests["node0005"].verdict == "confirmed"
    assert all(r <= 0.7 for r in done.retests["node0005"].ratios.values())  # 0.6x the controls, plus noise
    assert "# re-test node0005: confirmed (slow with 2 of 2 known-good partner(s))" in said
    run = run_json(res)
    assert run["retests"]["results"]["node0005"]["verdict"] == "confirmed"
    # the budget is fabric time: the launch's start-up as simulated, then its phases
    assert LaunchCosts().launch_s(16) < run["confirm"]["seconds"] == round(fabric_s, 3) < 60.0
    # the re-tests are rows of the run, in rounds after the sweep's, with known-good partners
    rows = rows_of(res.rundir.path)
    first, last = run["confirm"]["launches"][0]["rounds"]
    retest = [r for r in rows if r["pattern"] == "pair" and first <= r["round"] <= last]
    assert {h for r in retest if "node0005" in r["hosts"] for h in r["hosts"]} - {"node0005"} == set(
        done.retests["node0005"].ratios
    )
    assert serious(res.rundir.path) == [("slow_node", "node0005")]


def test_a_node_found_intermittent_gets_enough_phases_to_show_it(tmp_path):
    """Slow in a third of the rounds, the node is named intermittent by the sweep's analysis; two
    re-test phases would miss it about half the time, so it gets enough phases that it is fast in all
    of them at most 5 % of the time (confirm.intermittent_phases of its share of slow pairs)."""
    opts, res = sweep(tmp_path, "now-and-then", ["intermittent:node0003=0.5@0.3"], seed=8)
    (before,) = [f for f in analyze(res.rundir.path) if f.rule == "slow_node"]
    assert before.subject == "node0003" and before.evidence["kind"] == "intermittent"
    done, _ = confirm_on_fabric(opts, res, 120.0)  # 21 phases of ~3.3 s: each pays its pairs' set-up
    share = before.evidence["partners_slow"] / before.evidence["partners"]
    assert intermittent_phases(0.3) == 9 and 0.7**9 <= 0.05 < 0.7**8  # slow in 30 % of the rounds
    assert done.launches[0]["phases_planned"] == done.launches[0]["phases_run"] == intermittent_phases(share)
    assert done.retests["node0003"].verdict == "confirmed"
    assert done.retests["node0003"].reason.startswith("intermittent")
    assert serious(res.rundir.path) == [("slow_node", "node0003")]


def test_a_gpu_that_dropped_out_is_left_out_and_the_slow_node_is_still_re_tested(tmp_path):
    """node0009 fails a pair with every other node; its partners are fine (confirm.unusable_hosts):
    the slow node is re-tested against them, and node0009 is not started again."""
    opts, res = sweep(tmp_path, "gpu", ["gpu:node0009", "node:node0003=0.5"])
    done, _ = confirm_on_fabric(opts, res, 60.0)
    assert done.retests["node0003"].verdict == "confirmed"
    first, last = done.launches[0]["rounds"]
    rows = rows_of(res.rundir.path)
    retested = {h for r in rows if r["pattern"] == "pair" and first <= r["round"] <= last for h in r["hosts"]}
    assert "node0003" in retested and "node0009" not in retested


def test_a_false_suspect_of_a_healthy_fabric_is_cleared_and_no_warning_remains(tmp_path):
    """Seed 259 at 8 % noise is one whose sweep alone names a healthy link slow (at 5 % noise none of
    150 healthy 16-node fabrics does since the pair model reads the noise from its 80 % band); if the
    analysis stops naming it, pick another such seed: this test is about what the re-test does with it."""
    opts, res = sweep(tmp_path, "healthy", seed=259, noise=0.08)
    before = serious(res.rundir.path)
    assert before and {rule for rule, _ in before} <= {"slow_node", "slow_pair"}
    done, _ = confirm_on_fabric(opts, res, 60.0)
    assert {rt.verdict for rt in done.retests.values()} == {"cleared"}
    assert {subject for _, subject in before} <= set(done.retests)
    assert serious(res.rundir.path) == []
    cleared = [f for f in analyze(res.rundir.path) if f.rule == before[0][0] and f.subject == before[0][1]]
    assert [f.severity for f in cleared] == ["info"] and cleared[0].evidence["retest"]["verdict"] == "cleared"


def test_a_budget_smaller_than_the_launch_re_tests_nothing_and_says_why(tmp_path):
    opts, res = sweep(tmp_path, "tight", ["node:node0005=0.6"])
    done, fabric_s = confirm_on_fabric(opts, res, 3.0)  # the launch alone costs 5.4 s of start-up
    assert done.retests == {} and fabric_s == 0.0
    launch = run_json(res)["confirm"]["launches"][0]
    assert launch["skipped"].startswith("budget: re-testing needs") and launch["phases_run"] == 0
    assert run_json(res)["retests"]["untested_reason"] == f"not re-tested: {launch['skipped']}"


def test_cli_re_tests_by_default_and_not_with_a_zero_budget(tmp_path):
    runner = CliRunner()
    fabric = ["simulate", "--nodes", "16", "--seed", "259", "--noise", "0.08", "--pair-sizes", "1G",
              "--oversubscription", "2"]
    on = runner.invoke(cli, [*fabric, "--out", str(tmp_path / "on")])
    assert on.exit_code == 0, on.output  # the false suspect cleared: nothing to check
    assert ": cleared (re-run at" in on.output and "re-tests: " in on.output
    assert serious(tmp_path / "on") == []  # (2:1 uplinks may warn as cross_spine_penalty: by design)
    assert "# re-tests within 60 s (--confirm-budget)" in on.output  # auto at 16 nodes
    assert json.loads((tmp_path / "on" / "run.json").read_text())["confirm"]["budget_s"] == 60.0
    off = runner.invoke(cli, [*fabric, "--confirm-budget", "0", "--out", str(tmp_path / "off")])
    assert off.exit_code == 1, off.output  # the sweep's analysis alone: a link to check
    assert [rule for rule, _ in serious(tmp_path / "off")] == ["slow_pair"]
    assert "retests" not in json.loads((tmp_path / "off" / "run.json").read_text())
    both = runner.invoke(cli, ["simulate", "--preflight", "--confirm-budget", "30", "--nodes", "16"])
    assert both.exit_code == 2 and "not --preflight" in both.output and "Traceback" not in both.output


def test_a_node_ten_percent_slow_short_of_the_bar_is_a_suspect_and_its_re_test_confirms_it(tmp_path):
    """256 nodes on 16-node leaves at 2:1, bottleneck physics, 5 % noise, node0122 at 0.9: its own
    15 leaf partners are its evidence (its cross-leaf pairs are narrower than its cap), and seed 1's
    draws read it 6 % slow at z -3.9, short of the family-wise bar of 4 (issue 25's grid missed it).
    Past the suspect band's floor of 3 in a class of 256 nodes, it is a suspect; its re-test gets the
    cap of phases (sized for a node past the floor, not for the 6 % it read), which confirm it as a
    failure with its interval. Were this seed's draws to move it past the bar, take another: this
    test is about the node short of it."""
    spec = FabricSpec(nodes=256, leaves=16, oversubscription=2.0, physics="bottleneck")
    opts = SimOptions(spec, (Fault.parse("node:node0122=0.9"),), seed=1, out=str(tmp_path / "subtle"),
                      noise=0.05, pairs=PairOptions(pair_sizes=[1 << 30], pair_schedule="auto"))
    res = simulate(opts)
    before = [f for f in analyze(res.rundir.path) if f.rule == "slow_node"]
    assert [(f.subject, f.severity) for f in before] == [("node0122", "info")], before
    assert before[0].title.startswith("Suspect, re-test") and 3 < -before[0].evidence["robust_z"] < 4
    done, _ = confirm_on_fabric(opts, res, 60.0)
    rt = done.retests["node0122"]
    assert rt.verdict == "confirmed" and len(rt.ratios) >= 6 and rt.interval is not None
    after = [f for f in analyze(res.rundir.path) if f.rule == "slow_node" and f.severity != "info"]
    assert [(f.subject, f.severity) for f in after] == [("node0122", "fail")], after
    assert after[0].title.startswith("Confirmed by re-test at 0.")


def test_a_small_but_certain_node_is_info_to_watch_and_its_re_test_does_not_make_it_more(tmp_path):
    """node0010 at 0.94 under 3 % noise: past the family-wise bar, read 5.5 % slow, but its interval's
    near end is nearer than the 5 % warning floor: info, "Small but certain", nothing to drain. Its
    re-test (12 pairs) cannot show it certainly past the floor either, so it is not confirmed: still
    info, the re-test's words first, nothing to drain, and no warning anywhere."""
    spec = FabricSpec(nodes=64, leaves=4, oversubscription=2.0, physics="bottleneck")
    opts = SimOptions(spec, (Fault.parse("node:node0010=0.94"),), seed=2, out=str(tmp_path / "small"),
                      noise=0.03, pairs=PairOptions(pair_sizes=[1 << 30], pair_schedule="auto"))
    res = simulate(opts)
    [before] = [f for f in analyze(res.rundir.path) if f.rule == "slow_node"]
    assert (before.subject, before.severity) == ("node0010", "info")
    assert before.title.startswith("Small but certain: ") and before.action.startswith("Nothing to drain")
    low, high = before.evidence["effect_ci_ratio"]
    assert low < 0.94 < 0.95 < high < 1.0
    done, _ = confirm_on_fabric(opts, res, 60.0)
    assert done.retests["node0010"].verdict == "cleared" and len(done.retests["node0010"].ratios) >= 6
    [after] = [f for f in analyze(res.rundir.path) if f.rule == "slow_node"]
    assert after.severity == "info" and after.title.startswith("Not confirmed by re-test")
    assert "Drain" not in after.action and serious(res.rundir.path) == []


def test_a_link_at_0_7_under_heavy_tailed_noise_is_found_by_re_running_the_worst_pairs(tmp_path):
    """256 nodes, Student-t noise (3 degrees of freedom, 5 %), node0033-node0040 at 0.7 within their
    leaf: one sample a pair, and about a dozen healthy pairs sit as low, so no bar flags the link (it
    was missed in every such fabric, issue 25). The re-test re-runs the fleet's worst unflagged pairs
    three times or more: the link is slow in all of them and becomes the finding; the healthy
    candidates, fast again, become nothing. Were this seed's draws to flag the link, take another:
    this test is about a link short of the bars."""
    spec = FabricSpec(nodes=256, leaves=16, oversubscription=2.0, physics="bottleneck")
    opts = SimOptions(spec, (Fault.parse("link:node0033,node0040=0.7"),), seed=2, out=str(tmp_path / "link"),
                      noise=0.05, noise_shape="t3",
                      pairs=PairOptions(pair_sizes=[1 << 30], pair_schedule="auto"))
    res = simulate(opts)
    assert not [f for f in analyze(res.rundir.path) if f.rule in SLOW and f.severity != "info"]
    said: list[str] = []
    done, _ = confirm_on_fabric(opts, res, 60.0, echo=said.append)
    rt = done.retests["node0033|node0040"]
    assert rt.candidate and rt.verdict == "confirmed" and len(rt.ratios) >= CANDIDATE_RUNS, rt
    assert all(r <= 0.8 for r in rt.ratios.values())
    cleared = [k for k, r in done.retests.items() if r.candidate and r.verdict != "confirmed"]
    assert len(cleared) >= 32  # the others re-run: one line for all of them, none a finding
    assert any(line.startswith(f"# re-run {len(cleared)} candidate link(s)") for line in said), said
    assert serious(res.rundir.path) == [("slow_pair", "node0033|node0040")]


def test_a_node_inconclusive_once_is_re_tested_again_on_fresh_pairs(tmp_path):
    """256 nodes behind 2:1 uplinks, Student-t noise, a fault of every class (the mixed fabric of
    benchmarks/bench_diagnosis.py, seed 9). node0006, slow in 30% of its rounds, shows with its 15
    leaf partners only (its spine pairs are capped by the uplink anyway): slow with 2 of them in the
    sweep, then with 3 of 24 in its re-test, inconclusive. The next launch re-tests it once more on
    fresh pairs, where it is slow often enough to confirm. Were this seed's first re-test to decide
    it, take another: this test is about the second look."""
    spec = FabricSpec(nodes=256, leaves=16, oversubscription=2.0, physics="bottleneck")
    faults = ("node:node0127=0.8", "node:node0175=0.6", "link:node0079,node0107=0.5", "uplink:leaf13=0.5",
              "intermittent:node0006=0.5@0.3", "node:node0244=0.9", "node:node0036=0.85",
              "link:node0224,node0215=0.7")
    opts = SimOptions(spec, tuple(Fault.parse(f) for f in faults), seed=9, out=str(tmp_path / "mixed"),
                      noise=0.05, noise_shape="t3",
                      pairs=PairOptions(pair_sizes=[1 << 30], pair_schedule="auto"))
    res = simulate(opts)
    said: list[str] = []
    done, fabric_s = confirm_on_fabric(opts, res, 60.0, echo=said.append)
    first = [line for line in said if line.startswith("# re-test node0006: ")]
    assert first[0].startswith("# re-test node0006: inconclusive (slow in 3 of 24 re-test pairs"), said
    assert any(line.startswith("# re-testing ") and "node0006 again (inconclusive)" in line for line in said)
    assert len(first) == 2 and done.retests["node0006"].verdict == "confirmed", first
    assert "node0006" in done.launches[1]["suspects"] and fabric_s <= 60.0
    assert ("slow_node", "node0006") in serious(res.rundir.path)
