"""Arrivals and stragglers without hosts: the record, its checks, the clock estimate, the verdicts.

The real runs (a cgroup-throttled host, a periodic one, none) are tests/test_stragglers_netns.py;
here each part is driven by data whose answer is known by construction."""

from __future__ import annotations

import datetime
import threading

import numpy as np
import pytest
from netbench.collectives import clocks
from netbench.collectives.arrivals import PER_ITER_KEYS, ArrivalRecord, Stamps, per_iter_summary, summarise
from netbench.reports.arrivals import analyse, judge_point
from netbench.reports.context import AnalysisContext
from netbench.reports.rules import stragglers

HOSTS = ["n0", "n1", "n2", "n3"]


def stamps(iters=200, ranks=8, late: dict[int, float] | None = None, every: int = 0, noise=20.0, err=5.0,
           seed=0) -> Stamps:
    """Arrivals of ``ranks`` ranks: noise (us) around each iteration's start, ``late`` ranks later by
    that many us (every ``every``-th iteration only, when given); each op lasts until the last
    arrival plus 100 us."""
    rng = np.random.default_rng(seed)
    start = np.arange(iters)[:, None] * 10_000.0
    arrive = start + rng.exponential(noise, (iters, ranks))
    for r, d in (late or {}).items():
        rows = np.arange(iters) % every == every - 1 if every else np.ones(iters, bool)
        arrive[rows, r] += d
    done = arrive.max(axis=1, keepdims=True) + 100.0 + rng.uniform(0, 1, (iters, ranks))
    return Stamps(arrive, done, np.zeros(ranks), np.full(ranks, err))


def record(st: Stamps, size: int = 1024, hosts=HOSTS) -> ArrivalRecord:
    return summarise(st, group="ring", pattern="ring", hosts=list(hosts), collective="all_reduce", bytes=size,
                     in_place=False, engine="torch")


def test_summary_says_who_arrived_last_and_by_how_much():
    st = stamps(late={5: 300.0})
    rec = record(st)
    order = np.sort(st.arrive, axis=1)
    assert rec.last_rank == list(np.argmax(st.arrive, axis=1))
    assert np.allclose(rec.last_by_us, order[:, -1] - order[:, -2])
    assert np.allclose(rec.per_iter["times_us"], (st.done - st.arrive).max(axis=1))
    assert max(range(8), key=rec.late_us.__getitem__) == 5
    assert rec.clock_err_us == 5.0


def test_per_iter_summary_follows_nccl_tests():
    """src/util.cu computeIterStats: p50 = sorted[n/2], pXX = sorted[min(n-1, (n*XX+99)/100-1)],
    population stdev; the -J keys in writePerIterReport's order."""
    t = np.random.default_rng(1).permutation(np.arange(1, 101, dtype=float))
    s = per_iter_summary(t)
    assert tuple(s) == PER_ITER_KEYS
    srt = np.sort(t)
    assert s["p50_us"] == srt[50] and s["p95_us"] == srt[94] and s["p99_us"] == srt[98]
    assert s["min_us"] == 1 and s["max_us"] == 100 and s["times_us"] == list(t)
    assert s["stdev_us"] == pytest.approx(np.std(t))
    assert s["cv_pct"] == pytest.approx(100 * np.std(t) / t.mean())


def test_record_round_trips_and_bad_records_are_named():
    rec = record(stamps(iters=20))
    assert ArrivalRecord.from_dict(rec.to_dict()) == rec
    bad = [("last_rank", [99] * 20, "last_rank"), ("last_by_us", [float("nan")] * 20, "last_by_us"),
           ("late_us", [0.0], "late_us"), ("ranks", True, "ranks"), ("hosts", [], "hosts"),
           ("clock_err_us", -1, "clock_err_us"), ("per_iter", {"times_us": "x"}, "per_iter")]
    for key, value, named in bad:
        d = rec.to_dict() | {key: value}
        with pytest.raises(ValueError, match=named):
            ArrivalRecord.from_dict(d)
    with pytest.raises(ValueError, match="not an object"):
        ArrivalRecord.from_dict([1])


def test_late_rank_is_named_with_its_host_and_local_rank():
    v = judge_point(record(stamps(late={5: 300.0})))
    assert (v.kind, v.host, v.rank, v.local_rank) == ("persistent", "n2", 5, 1)  # 8 ranks on 4 hosts
    assert v.p_value < 1e-6 and 0 < v.wait_share < 1 and v.late_us > 2 * v.clock_err_us


def test_noise_alone_moves_around_and_names_no_one():
    assert judge_point(record(stamps(seed=3))).kind == "moving"


def test_delay_within_the_clock_bound_is_not_judged():
    v = judge_point(record(stamps(late={5: 300.0}, noise=0.5, err=400.0)))
    assert v.kind == "none" and v.host is None


def test_every_tenth_iteration_is_periodic():
    v = judge_point(record(stamps(late={2: 2000.0}, every=10)))
    assert (v.kind, v.host, v.period) == ("periodic", "n1", 10)


def test_the_period_holding_most_far_late_iterations_wins_over_a_chance_one():
    """n0 far late 5 times (as often as n1, and ordered first), 3 of them 20 apart: every 20th by
    chance. n1 is late at all 5 of its every-10th iterations: n1 is the periodic one."""
    st = stamps(iters=50, late={2: 2000.0}, every=10)
    st.arrive[[4, 24, 44, 7, 31], 0] += 2000.0
    v = judge_point(record(st))
    assert (v.kind, v.host, v.period, v.last_count) == ("periodic", "n1", 10, 5)


def test_a_periodic_delay_is_found_among_a_loaded_machines_hiccups():
    """As on a loaded CI machine: n1 sleeps 30 ms every 10th iteration of 50 and is also 1.5-4 ms
    late (far beyond the median gap) at 6 other iterations, more than its 5 delays by count. Most of
    its lateness is in the every-10th class: periodic, with the 5 delays as its late iterations."""
    st = stamps(iters=50, late={2: 30_000.0}, every=10)
    st.arrive[[0, 3, 7, 17, 26, 33], 2] += [3300.0, 1500.0, 2000.0, 4000.0, 3100.0, 1800.0]
    v = judge_point(record(st))
    assert (v.kind, v.host, v.period, v.last_count) == ("periodic", "n1", 10, 5)
    assert v.late_us > 29_000  # the delays', not diluted by the hiccups


def test_rule_names_the_host_in_most_sizes_and_not_noise():
    recs = [record(stamps(late={6: 200.0}, seed=s), size=1 << (10 + s)) for s in range(5)]
    found = stragglers.check(AnalysisContext.from_data([], arrivals=recs))
    assert [(f.rule, f.subject, f.evidence["straggler_rank"]) for f in found] == [("straggler", "n3", 6)]
    assert found[0].evidence["sizes_named"] == 5
    quiet = [record(stamps(seed=20 + s), size=1 << (10 + s)) for s in range(5)]
    assert stragglers.check(AnalysisContext.from_data([], arrivals=quiet)) == []
    assert len(analyse(quiet)) == 1


def test_clock_offset_estimated_through_a_real_store_within_its_bound():
    import torch.distributed as dist

    wait = datetime.timedelta(seconds=30)
    store = dist.TCPStore("127.0.0.1", 0, 3, True, timeout=wait, wait_for_workers=False)
    skew = {0: 0.0, 1: 5_000.0, 2: -12_345.0}
    got: dict[int, clocks.ClockEstimate] = {}

    def rank(r: int) -> None:
        s = store if r == 0 else dist.TCPStore("127.0.0.1", store.port, 3, False,
                                                timeout=datetime.timedelta(seconds=30))
        got[r] = clocks.estimate(s, r, 3, now=lambda: clocks.now_us() + skew[r])

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert got[0] == clocks.ClockEstimate(0.0, 0.0)
    for r in (1, 2):
        assert abs(got[r].offset_us - skew[r]) <= got[r].err_us + 1.0
        assert 0 <= got[r].err_us < 50_000


@pytest.mark.parametrize(("leaves", "named"), [
    ({"n0": "A", "n1": "A", "n2": "A", "n3": "A"}, ["n3"]),  # one leaf: late is late
    ({"n0": "A", "n1": "A", "n2": "B", "n3": "B"}, []),  # n3 sends to n0 across the uplink: it waits
    ({"n0": "B", "n1": "A", "n2": "A", "n3": "B"}, ["n3"]),  # n3's next host is on its leaf
])
def test_a_rank_whose_sends_cross_an_uplink_is_not_a_straggler(leaves, named):
    """Issue 45 (9): the ring rank before a leaf boundary waits on the uplink, iteration after
    iteration; its lateness is its path's, so it is not named (the uplink is judged by the pairs)."""
    recs = [record(stamps(late={6: 200.0}, seed=s), size=1 << (10 + s)) for s in range(5)]
    found = stragglers.check(AnalysisContext.from_data([], arrivals=recs, topology=leaves))
    assert [f.subject for f in found] == named
