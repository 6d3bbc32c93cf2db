"""reports.compare: matching rows by size/group, medians, env differences, fingerprints."""

from __future__ import annotations

import pytest
from netbench.reports.compare import SizeComparison, compare_rows, env_diff, fingerprint, flatten_env


def row(nbytes: int, time_us: float, busbw: float | None = 10.0, **kw) -> dict:
    base = {
        "collective": "all_reduce", "pattern": "world", "bytes": nbytes, "dtype": "float",
        "in_place": False, "hosts": ["a", "b"], "ranks": 16, "time_us": time_us, "busbw_GBps": busbw,
        "status": "ok", "group": None,
    }
    base.update(kw)
    return base


def test_ratios_per_size():
    base = [row(1024, 10.0, 5.0), row(1 << 20, 100.0, 50.0)]
    cur = [row(1024, 12.0, 4.0), row(1 << 20, 100.0, 50.0)]
    out = compare_rows(cur, base)
    assert [c.bytes for c in out] == [1024, 1 << 20]
    small = out[0]
    assert isinstance(small, SizeComparison)
    assert small.base_time_us == 10.0 and small.cur_time_us == 12.0
    assert small.time_ratio == pytest.approx(1.2)
    assert small.busbw_ratio == pytest.approx(0.8)
    assert out[1].time_ratio == pytest.approx(1.0)


def test_median_of_repeats_and_only_ok_rows():
    base = [row(8, 10.0), row(8, 11.0), row(8, 1000.0)]  # one outlier repeat
    cur = [row(8, 20.0), row(8, 5.0, status="timeout"), row(8, None)]
    [c] = compare_rows(cur, base)
    assert c.base_time_us == 11.0
    assert c.cur_time_us == 20.0


def test_busbw_ratio_none_when_zero():
    [c] = compare_rows([row(8, 2.0, 0.0)], [row(8, 1.0, 0.0)])
    assert c.busbw_ratio is None
    assert c.time_ratio == pytest.approx(2.0)


def test_keys_must_match():
    base = [row(8, 1.0, dtype="half"), row(8, 1.0, in_place=True), row(16, 1.0),
            row(8, 1.0, collective="all_gather"), row(8, 1.0, pattern="pair")]
    assert compare_rows([row(8, 2.0)], base) == []


def test_groups_matched_where_both_have_them():
    base = [row(8, 10.0, pattern="pair", hosts=["a", "b"], group="pair:a|b"),
            row(8, 30.0, pattern="pair", hosts=["c", "d"], group="pair:c|d")]
    cur = [row(8, 20.0, pattern="pair", hosts=["a", "b"], group="pair:a|b"),
           row(8, 60.0, pattern="pair", hosts=["e", "f"], group="pair:e|f")]
    out = compare_rows(cur, base)
    assert len(out) == 1  # e|f has no baseline: it must not be compared with a|b or c|d
    assert out[0].group == "pair:a|b" and out[0].time_ratio == pytest.approx(2.0)


def test_pair_rows_without_group_use_hosts():
    base = [row(8, 10.0, pattern="pair", hosts=["b", "a"]), row(8, 99.0, pattern="pair", hosts=["c", "d"])]
    [c] = compare_rows([row(8, 10.0, pattern="pair", hosts=["a", "b"])], base)
    assert c.group == "a|b" and c.base_time_us == 10.0


def test_world_rows_compare_across_allocations_but_not_rank_counts():
    base = [row(8, 10.0, hosts=["x", "y"], ranks=16)]
    [c] = compare_rows([row(8, 20.0, hosts=["a", "b"], ranks=16)], base)
    assert c.time_ratio == pytest.approx(2.0)
    assert compare_rows([row(8, 20.0, ranks=8)], base) == []


def test_env_diff_collapses_hosts():
    base = {"schema": "netbench.env/1", "hosts": {
        "a": {"torch": "2.5", "nccl": "2.21.5", "env": {"NCCL_ALGO": "Ring"}},
        "b": {"torch": "2.5", "nccl": "2.21.5", "env": {"NCCL_ALGO": "Ring"}}}}
    cur = {"schema": "netbench.env/1", "hosts": {
        "c": {"torch": "2.5", "nccl": "2.23.4", "env": {}},
        "d": {"torch": "2.5", "nccl": "2.21.5", "env": {}}}}
    diff = dict((k, (b, c)) for k, b, c in env_diff(cur, base))
    assert "hosts.*.torch" not in diff
    assert diff["hosts.*.nccl"] == ("2.21.5", "2.21.5 (1 host), 2.23.4 (1 host)")
    assert diff["hosts.*.env.NCCL_ALGO"] == ("Ring", None)
    assert env_diff(base, base) == []


def test_flatten_env_missing_on_some_hosts():
    flat = flatten_env({"hosts": {"a": {"x": 1}, "b": {}}})
    assert flat == {"hosts.*.x": "1 (missing on 1 host)"}


def test_fingerprint():
    env = {"hosts": {"a": {"torch_version": "2.5.1", "nccl": "2.21.5", "cuda": "12.4",
                           "env": {"NCCL_ALGO": "Ring", "PATH": "/bin"}},
                     "b": {"torch_version": "2.5.1", "nccl": "2.21.5", "cuda": "12.4",
                           "NCCL_IB_HCA": "mlx5"}}}
    inv = [{"host": "a", "driver_version": "580.159.04", "nics": [{"firmware": "28.39.1002"}],
            "gpus": [{"name": "NVIDIA H200", "vbios": "96.00.A5.00.1A"}]},
           {"host": "b", "driver_version": "570.1", "nics": [{"firmware": "28.39.1002"}]},
           {"host": "c", "status": "unreachable"}]
    fp = fingerprint(env, inv)
    assert fp["hosts"] == 3
    assert fp["torch"] == "2.5.1" and fp["nccl"] == "2.21.5" and fp["cuda"] == "12.4"
    assert fp["driver"] == "570.1 | 580.159.04"
    assert fp["nic_firmware"] == "28.39.1002"
    assert fp["gpu_vbios"] == "96.00.A5.00.1A"
    assert fp["nccl_env"] == {"NCCL_ALGO": "Ring", "NCCL_IB_HCA": "mlx5"}
    assert fingerprint({}, [])["torch"] is None


# -- noise: a difference must be larger than what the two runs scatter by ---------------------------


def curve(scale: float, noise: float, seed: int, n: int = 20) -> list[dict]:
    """A latency-then-bandwidth curve (8 B..4 MiB), each size's time off by a random factor within
    +-noise, as two runs of one build on a busy machine are."""
    import random

    rng = random.Random(seed)
    out = []
    for i in range(n):
        nbytes = 8 << i
        t = scale * (5.0 + nbytes / 2e3) * (1 + rng.uniform(-noise, noise))
        out.append(row(nbytes, t, nbytes / 1e3 / t, ranks=1, time_us_min=t, time_us_max=t))
    return out


def test_same_build_within_its_own_noise_is_no_regression():
    from netbench.reports.compare import is_regression

    one_sample_flags, regressions = 0, []
    for seed in range(10):
        comps = compare_rows(curve(1.0, 0.12, 1000 + seed), curve(1.0, 0.12, seed))
        assert all(c.noise_log is not None and c.noise_log > 0.02 for c in comps)
        one_sample_flags += sum(c.time_ratio > 1.10 for c in comps)
        regressions += [(seed, c.bytes) for c in comps if is_regression(c, 0.10)]
    assert one_sample_flags > 20  # what "10 % slower than one baseline sample" used to flag
    assert regressions == []


def test_a_real_slowdown_stands_out_of_the_noise():
    from netbench.reports.compare import is_regression

    base, cur = curve(1.0, 0.03, 1), curve(1.4, 0.03, 2)  # 40 % slower everywhere
    comps = compare_rows(cur, base)
    assert all(c.noise_log is not None for c in comps)
    assert len([c for c in comps if is_regression(c, 0.10)]) >= 18


def test_without_a_noise_estimate_only_twice_the_threshold_counts():
    from netbench.reports.compare import is_regression

    base = [row(8, 10.0, ranks=1), row(64, 10.0, ranks=1)]  # 2 sizes, 1 rank, no repeats: noise unknown
    cur = [row(8, 11.5, ranks=1), row(64, 12.5, ranks=1)]
    comps = compare_rows(cur, base)
    assert [c.noise_log for c in comps] == [None, None]
    assert [is_regression(c, 0.10) for c in comps] == [False, True]  # +15 % is not enough, +25 % is


def test_rank_spread_is_noise_too():
    base = [row(1024, 10.0, time_us_min=8.0, time_us_max=12.5)]
    cur = [row(1024, 11.0, time_us_min=9.0, time_us_max=13.0)]
    [c] = compare_rows(cur, base)
    assert c.noise_log is not None and c.noise_log > 0.15  # half log(12.5/8) on each side, combined
