"""Judging under faults and correlated noise, on synthetic rows (issue 31): a re-test's slow pairs in
rounds whose controls were slow too (CPU contention between concurrent pairs, a burst of congestion)
or in which a host was lost are not evidence; a failed pair is evidence against the host its error
names, never its partner; every host the run lost is named; a pair that never ran is no link to
check. The same on real hosts: tests/test_fault_blame_netns.py."""

from __future__ import annotations

import numpy as np
import pytest
from netbench.reports import verdict as one_verdict
from netbench.reports.context import AnalysisContext
from netbench.reports.engine import load_context, run_rules
from netbench.reports.pairrows import PairRows
from netbench.reports.policy import Thresholds
from netbench.reports.rules import errors
from netbench.reports.stats import binomial_sf, poisson_binomial_sf
from synthetic import host_names, make_fleet, write_run_dir

from netbench.agents.coordinator import Fault, Outcome
from netbench.common.rows import blamed_hosts, never_ran
from netbench.confirm import judge, unusable_hosts

SW = {"a1": "A", "a2": "A", "a3": "A", "a4": "A", "b1": "B", "b2": "B", "b3": "B", "b4": "B"}
PARTNERS = ["a2", "a3", "a4"]
ROUNDS = range(10, 24)  # 14 re-test rounds, as the issue's healthy sweep had


def row(hosts: tuple[str, str], rnd: int, bw: float, **kw: object) -> dict:
    return {"pattern": "pair", "status": "ok", "hosts": list(hosts), "round": rnd, "bytes": 1 << 20,
            "busbw_GBps": bw, "collective": "all_reduce"} | kw


def failed(hosts: tuple[str, str], rnd: int, why: str, blame: tuple[str, ...] = (), ran: bool = True) -> dict:
    """A failed row as the coordinator writes it: its words, the hosts it blames, whether it ran."""
    return row(hosts, rnd, 0.0, status="error", error=why, bytes=0, busbw_GBps=None, blame=list(blame),
               ran=ran)


def retest_rounds(suspect_slow: set[int], disturbed: set[int], seed: int) -> list[dict]:
    """a1 re-tested against a leaf partner each round, two leaf controls beside it (b1-b2, b3-b4),
    both the in-place and out-of-place rows of each pair. In a ``disturbed`` round a random half of
    the round's pairs run at 0.3x (contention: slow together); in ``suspect_slow`` rounds a1 is."""
    rng = np.random.default_rng(seed)
    out = []
    for k, r in enumerate(ROUNDS):
        pairs = [("a1", PARTNERS[k % 3]), ("b1", "b2"), ("b3", "b4")]
        hit = set(rng.permutation(3)[:2].tolist()) if r in disturbed else set()
        for j, p in enumerate(pairs):
            slow = (j in hit) or (j == 0 and r in suspect_slow)
            for _ in range(2):
                out.append(row(p, r, (0.3 if slow else 1.0) * 10.0 * (1 + 0.03 * rng.standard_normal())))
    return out


def verdict(rows: list[dict], n_tests: int = 8):
    return judge(PairRows.from_records(rows), ROUNDS, ["a1"], [], SW, Thresholds(), 0.05, {}, n_tests)["a1"]


def test_a_healthy_suspect_slow_only_in_rounds_its_controls_were_slow_is_not_confirmed() -> None:
    """The issue's healthy sweep: slow in 3 of 14 re-test pairs, each in a round where contention slowed
    the controls too; the independent count said p = 6.4e-09 and drained it. Ten noise draws."""
    for seed in range(10):
        rng = np.random.default_rng(100 + seed)
        disturbed = set(rng.choice(list(ROUNDS), 4, replace=False).tolist())
        rows = retest_rounds(set(sorted(disturbed)[:3]), disturbed, seed)
        rt = verdict(rows)
        assert rt.verdict != "confirmed", (seed, rt.reason)


def test_an_intermittent_node_slow_while_its_controls_are_fast_is_still_confirmed() -> None:
    for seed in range(10):
        rows = retest_rounds({11, 14, 17, 20}, set(), seed)  # slow in 4 of 14 rounds, controls steady
        rt = verdict(rows)
        assert rt.verdict == "confirmed" and "4 of 14" in rt.reason, (seed, rt.reason)


def test_an_intermittent_node_is_confirmed_beside_disturbed_rounds_elsewhere() -> None:
    """Contention in other rounds raises every round's chance a little, not enough to hide a node slow
    in 5 rounds whose controls were fast."""
    rows = retest_rounds({10, 13, 16, 19, 22}, {12, 18}, 3)
    assert verdict(rows).verdict == "confirmed"


def test_slow_pairs_in_rounds_where_a_host_was_lost_are_no_evidence() -> None:
    rows = retest_rounds({11, 15, 19}, set(), 1)
    lost = "lost: rank(s) [3] on a2 (host a2: lost contact)"
    rows += [failed(("b1", "a2"), r, lost, ("a2",)) for r in (11, 15)]
    rows += [failed(("b3", "a3"), 19, "hung: rank(s) [5] on a3", ("a3",))]
    assert verdict(rows).verdict != "confirmed"
    # the same slow rounds without the loss: confirmed (the rounds, not the count, changed)
    assert verdict(retest_rounds({11, 15, 19}, set(), 1)).verdict == "confirmed"


def test_poisson_binomial_matches_the_binomial_when_every_round_is_alike() -> None:
    assert abs(poisson_binomial_sf(3, [0.1] * 14) - binomial_sf(3, 14, 0.1)) < 1e-12
    assert poisson_binomial_sf(2, [1.0, 1.0, 0.0]) == 1.0 and poisson_binomial_sf(3, [1.0, 1.0, 0.0]) == 0.0


# -- blame -------------------------------------------------------------------------------------------
HOSTS6 = ["a1", "a2", "a3", "b1", "b2", "b3"]


def dead_host_rows() -> list[dict]:
    """a2 lost in round 2 of a 6-host pairwise sweep: its pair of that round is "lost", its later
    ones "not run"; every other pair measured."""
    import itertools

    out = []
    why = "agent ended before its ranks finished"
    for k, p in enumerate(itertools.combinations(HOSTS6, 2)):
        r = 1 + k % 5
        if "a2" not in p or r < 2:
            out.append(row(p, r, 10.0))
        elif r == 2:
            out.append(failed(p, r, f"lost: rank(s) [1] on a2 (host a2: {why})", ("a2",)))
        else:
            out.append(failed(p, r, f"not run: host a2 is down (host a2: {why})", ("a2",), ran=False))
    return out


def test_a_lost_host_is_named_and_drained_its_partners_are_not_and_no_link_is_to_check() -> None:
    rows = dead_host_rows()
    run = {"status": "completed", "hosts": HOSTS6, "down_hosts": ["a2"],
           "faults": [{"kind": "exit", "message": "host a2: agent ended", "host": "a2", "rank": None}]}
    ctx = AnalysisContext.from_data(rows, run=run)
    found = errors.check(ctx)
    assert list(one_verdict.judge(found, 6).drain) == ["a2"], [f.title for f in found]
    # no "check link" for pairs that never ran, or failed for a2
    assert list(one_verdict.judge(found, 6).check) == []
    assert not any(" at 0" in f.title for f in found)


def test_a_host_lost_in_a_later_launch_is_named_even_without_failed_rows() -> None:
    """A host that died during the re-tests (run.json's merged faults), with every sweep pair fine."""
    rows = [r for r in dead_host_rows() if r["status"] == "ok"]
    run = {"status": "completed", "hosts": HOSTS6, "down_hosts": ["b3"],
           "faults": [{"kind": "hang", "message": "host b3: hung in re-test 1/2", "host": "b3", "rank": 5}]}
    found = errors.check(AnalysisContext.from_data(rows, run=run))
    assert list(one_verdict.judge(found, 6).drain) == ["b3"] and "hung in re-test" in found[0].title


def test_failed_pairs_naming_one_host_are_no_evidence_against_its_partner() -> None:
    """b1 met the hung host a2 in 3 of its 5 pairs (re-runs of one pair included): those failures name
    a2, so b1 is not host_failing, though 3 of its 5 pair rows failed."""
    rows = [row(("b1", h), r, 10.0) for r, h in ((1, "b2"), (2, "b3"))]
    rows += [failed(("b1", "a2"), r, "hung: rank(s) [2] on a2", ("a2",)) for r in (3, 4, 5)]
    found = errors.check(AnalysisContext.from_data(rows, run={"status": "completed", "hosts": HOSTS6}))
    assert list(one_verdict.judge(found, 6).drain) == ["a2"], [f.title for f in found]


def test_blame_is_the_rows_own_field_naming_its_own_hosts_only() -> None:
    """The coordinator's record, not its words: a host outside the row, a blame that is not a list,
    or a row from before rows carried it, blames nobody."""
    hung = failed(("b1", "a2"), 1, "hung: rank(s) [2] on a2", ("a2", "b9"))
    assert blamed_hosts(hung) == {"a2"} and not never_ran(hung)
    assert blamed_hosts({**hung, "blame": "a2"}) == set()
    assert blamed_hosts({k: v for k, v in hung.items() if k != "blame"}) == set()
    assert never_ran(failed(("b1", "a2"), 1, "not run: host a2 is down", ("a2",), ran=False))


def test_a_timeout_naming_no_host_is_still_a_link_to_check() -> None:
    rows = [row(("b1", h), 1, 10.0) for h in ("b2", "b3")]
    rows += [failed(("b1", "a1"), 2, "timed out: no progress for 12 s, every rank alive")]
    found = errors.check(AnalysisContext.from_data(rows, run={"status": "completed", "hosts": HOSTS6}))
    said = one_verdict.judge(found, 6)
    assert list(said.check) == ["b1|a1"] and list(said.drain) == []
    assert "(all_reduce)" in found[0].title  # a failed row's bytes 0 is no size


def test_the_partners_of_a_hung_host_stay_usable_for_re_tests() -> None:
    rows = [row(("a1", "b1"), 1, 10.0), failed(("a2", "b2"), 1, "hung: rank(s) [1] on a2", ("a2",))]
    outcome = Outcome("completed", [Fault("hang", "host a2: hung", "a2", 1)], 2, down_hosts={"a2"})
    assert unusable_hosts(outcome, PairRows.from_records(rows)) == {"a2"}
    lost = Outcome("completed", [], 2)  # a failure naming a host the launch did not record as faulty
    assert unusable_hosts(lost, PairRows.from_records(rows)) == set()


def test_leaf_peers_of_a_host_lost_mid_round_are_not_judged_by_that_round() -> None:
    """a2 is lost in round 9; its leaf peers a1-a3, measured beside the loss, ran at 0.2x then.
    That round is not evidence about them: no warning or failure names a1 or a3, a2 is drained."""
    import itertools

    hosts = ["a1", "a2", "a3", "a4", "b1", "b2", "b3", "b4"]
    topo = {h: "leaf" + h[0].upper() for h in hosts}
    rows, lost_at = [], 9  # round 9: a2-a4
    for rnd, p in enumerate(itertools.combinations(hosts, 2), start=1):
        same = p[0][0] == p[1][0]
        bw = 10.0 * (1.0 + 0.01 * (rnd % 5))  # no cross-spine penalty: nothing else to find
        if "a2" in p and rnd == lost_at:
            rows.append(failed(p, rnd, "lost: rank(s) [1] on a2 (host a2: lost contact)", ("a2",)))
        elif "a2" in p and rnd > lost_at:
            rows.append(failed(p, rnd, "not run: host a2 is down (host a2: lost contact)", ("a2",),
                               ran=False))
        else:
            rows.append(row(p, rnd, bw, load=1, hop_class="leaf" if same else "spine"))
        if rnd == lost_at:  # a1-a3 measured in the same round as a2's loss
            rows.append(row(("a1", "a3"), rnd, 2.0, load=1, hop_class="leaf"))
    rows = [r for r in rows if not (r["hosts"] == ["a1", "a3"] and r["round"] != lost_at)]
    run = {"status": "completed", "hosts": hosts, "down_hosts": ["a2"],
           "faults": [{"kind": "exit", "message": "host a2: lost contact", "host": "a2", "rank": None}]}
    from netbench.reports.engine import run_rules

    found = run_rules(AnalysisContext.from_data(rows, run=run, topology=topo))
    serious = [f for f in found if f.severity in ("warn", "fail")]
    assert list(one_verdict.judge(serious, 8).drain) == ["a2"], [f.title for f in serious]
    assert not {"a1", "a3"} & {h for f in serious for h in f.hosts or [f.subject]}, [f.title for f in serious]


@pytest.mark.parametrize("seed", range(4))
def test_a_node_slow_with_every_partner_is_capped_not_intermittent(tmp_path, seed) -> None:
    """Six hosts on two leaves, one at half rate: its two leaf pairs have no leaf class effect to
    absorb them (too few partners) and sit at the half rate as residuals; that is its capped effect,
    not a few slow rounds far below it. It read "intermittently slow: 2 of its 5 pairs" on real test
    hosts (benchmarks/readme_demo.py) although all five were at half rate."""
    hosts = host_names(6)
    run = write_run_dir(make_fleet(6, 2, slow_nodes={hosts[4]: 0.5}, noise=0.02, seed=seed), tmp_path / "r")
    [f] = [f for f in run_rules(load_context(run)) if f.rule == "slow_node"]
    assert f.subject == hosts[4] and f.severity == "fail"
    assert f.evidence["kind"] == "capped" and f.evidence["partners_slow"] == 5, f.evidence
    assert "intermittently" not in f.title


def test_an_intermittent_node_of_few_slow_pairs_names_the_links_it_may_be(tmp_path) -> None:
    """Two slow links that share a node read as that node slow in two rounds (defensible: one node
    explains both), but the finding names the alternative until a re-test tells them apart (issue 25)."""
    hosts = host_names(32)
    links = {(hosts[5], hosts[20]): 0.5, (hosts[5], hosts[27]): 0.5}
    run = write_run_dir(make_fleet(32, 4, slow_links=links, noise=0.03, seed=1), tmp_path / "r")
    [f] = [f for f in run_rules(load_context(run)) if f.rule == "slow_node"]
    assert f.subject == hosts[5] and f.evidence["kind"] == "intermittent"
    assert sorted(f.evidence["alternative_links"]) == [f"{hosts[5]}-{hosts[20]}", f"{hosts[5]}-{hosts[27]}"]
    assert "(or 2 slow links: " in f.title and "check those links instead" in f.action


def leaf_lost_rows(lost: set[str]) -> list[dict]:
    """Six hosts on leaves A (a1-a3) and B (b1-b3): every pair of a host in ``lost`` failed, blamed
    on that host; the rest measured."""
    import itertools

    out = []
    for k, p in enumerate(itertools.combinations(HOSTS6, 2)):
        gone = [h for h in p if h in lost]
        out.append(failed(p, 1 + k % 5, f"host {gone[0]}: stopped answering", tuple(gone)) if gone
                   else row(p, 1 + k % 5, 10.0))
    return out


def lost_run(lost: dict[str, float]) -> dict:
    return {"status": "completed", "hosts": HOSTS6, "down_hosts": sorted(lost),
            "faults": [{"kind": "hang", "message": f"host {h}: stopped answering (no word from its agent)",
                        "host": h, "rank": None, "ts": ts} for h, ts in lost.items()]}


LEAVES6 = {"a1": "A", "a2": "A", "a3": "A", "b1": "B", "b2": "B", "b3": "B"}


def test_every_host_of_a_leaf_lost_at_once_is_the_switch_and_drains_none() -> None:
    """Issue 45 (4): leaf B's uplink cut, its three hosts stop answering seconds apart while leaf A
    runs on: one finding about B (to check), no host drained, no pair to check."""
    lost = {"b1": 1000.0, "b2": 1003.5, "b3": 1006.0}
    ctx = AnalysisContext.from_data(leaf_lost_rows(set(lost)), run=lost_run(lost), topology=LEAVES6)
    found = errors.check(ctx)
    v = one_verdict.judge(found, 6)
    assert (list(v.drain), list(v.check)) == ([], ["B"]), [f.title for f in found]
    assert [(f.rule, f.subject) for f in found] == [("switch_silent", "B")]
    assert "b1, b2, b3" in found[0].title


@pytest.mark.parametrize("case", ["apart in time", "part of the leaf", "every host", "no stamps"])
def test_hosts_lost_apart_or_not_a_whole_leaf_are_the_hosts(case) -> None:
    """Two of a leaf's three hosts, a whole leaf lost minutes apart, every host of the run, or faults
    without stamps (an older run): the hosts, as before."""
    lost = {"apart in time": {"b1": 1000.0, "b2": 1100.0, "b3": 1300.0},
            "part of the leaf": {"b1": 1000.0, "b2": 1001.0},
            "every host": {h: 1000.0 + k for k, h in enumerate(HOSTS6)},
            "no stamps": {"b1": None, "b2": None, "b3": None}}[case]
    ctx = AnalysisContext.from_data(leaf_lost_rows(set(lost)), run=lost_run(lost), topology=LEAVES6)
    found = errors.check(ctx)
    assert not [f for f in found if f.rule == "switch_silent"]
    assert list(one_verdict.judge(found, 6).drain) == sorted(lost)


def noisy_retest(suspect: list[float], spread: float, seed: int) -> list[dict]:
    """a1 against a leaf partner each round, with two control pairs beside it whose busbw spreads by
    ``spread`` (log sd) round to round, as the re-test rounds of a loaded machine do; a1's pair runs
    at ``suspect[k]`` times the controls' level in round k."""
    rng = np.random.default_rng(seed)
    out = []
    for k, r in enumerate(ROUNDS[: len(suspect)]):
        for p, level in ((("a1", PARTNERS[k % 3]), suspect[k]), (("b1", "b2"), 1.0), (("b3", "b4"), 1.0)):
            noise = float(np.exp(spread * rng.standard_normal())) if level == 1.0 else 1.0
            bw = 10.0 * level * noise
            out += [row(p, r, bw), row(p, r, bw)]
    return out


def judged(rows: list[dict], sigma: float = 0.02):
    return judge(PairRows.from_records(rows), ROUNDS, ["a1"], [], SW, Thresholds(), sigma, {}, 8)["a1"]


@pytest.mark.parametrize("seed", range(4))
def test_a_healthy_node_at_the_controls_own_spread_is_not_confirmed(seed) -> None:
    """Issue 45 (10): 5 of 8 re-test pairs at 0.73-0.88x, in rounds whose controls themselves differ
    by 15% (log sd): a quiet sweep's sigma (2%) called each of those slow and the node "confirmed".
    Slow is judged beyond the re-test's own noise, so the node is not confirmed."""
    draws = [0.8, 0.88, 0.73, 1.02, 0.85, 0.97, 0.78, 1.05]
    v = judged(noisy_retest(draws, 0.15, seed))
    assert v.verdict != "confirmed", v.reason


@pytest.mark.parametrize("seed", range(4))
def test_a_slow_node_is_still_confirmed_under_the_same_noise(seed) -> None:
    v = judged(noisy_retest([0.45, 0.5, 0.42, 0.48, 0.5, 0.46, 0.44, 0.5], 0.15, seed))
    assert v.verdict == "confirmed", v.reason
