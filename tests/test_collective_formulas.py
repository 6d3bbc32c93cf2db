"""Byte accounting and bus-bandwidth factors against nccl-tests' definitions (doc/PERFORMANCE.md)."""

from __future__ import annotations

import pytest
from fixtures_path import read_fixture
from netbench.collectives.ops import COLLECTIVES, bandwidth, get_collective

# (collective, n, size asked, elem size) -> (size reported, count, send elems, recv elems), and factor(n)
NCCL_TESTS_FACTOR = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "sendrecv": lambda n: 1.0,
}


@pytest.mark.parametrize("name", sorted(COLLECTIVES))
@pytest.mark.parametrize("n", [1, 2, 3, 4, 8, 16])
def test_bus_factor_matches_nccl_tests(name: str, n: int) -> None:
    coll = COLLECTIVES[name]
    assert coll.bus_factor(n) == pytest.approx(NCCL_TESTS_FACTOR[name](n))
    # algbw = S / 1e9 / t (decimal GB/s); busbw = algbw * factor
    lay = coll.layout(1 << 20, 4, n)
    algbw, busbw = bandwidth(lay.nbytes, 250.0, n, coll)
    assert algbw == pytest.approx(lay.nbytes / 1e9 / 250e-6)
    assert busbw == pytest.approx(algbw * NCCL_TESTS_FACTOR[name](n))


def test_layouts_follow_nccl_tests_byte_accounting() -> None:
    n, f = 4, 4  # 4 ranks, float
    ar = get_collective("all_reduce").layout(1024, f, n)
    assert (ar.nbytes, ar.count, ar.send_numel, ar.recv_numel) == (1024, 256, 256, 256)
    ag = get_collective("all_gather").layout(1024, f, n)  # S = n * send bytes
    assert (ag.nbytes, ag.send_numel, ag.recv_numel) == (1024, 64, 256)
    rs = get_collective("reduce_scatter").layout(1024, f, n)  # S = n * recv bytes
    assert (rs.nbytes, rs.send_numel, rs.recv_numel) == (1024, 256, 64)
    a2a = get_collective("all_to_all").layout(1024, f, n)  # S = one rank's send buffer
    assert (a2a.nbytes, a2a.send_numel, a2a.recv_numel, a2a.chunk) == (1024, 256, 256, 64)
    sr = get_collective("sendrecv").layout(1024, f, n)
    assert (sr.nbytes, sr.send_numel) == (1024, 256)


def test_sizes_round_down_like_nccl_tests() -> None:
    # nccl-tests: chunk = (count / nranks) & -(16 / eltSize), whole 16-byte lines per rank.
    # 1000 B of float on 3 ranks: 250 elements, 83 per rank, down to a multiple of 4 -> 80.
    ag = get_collective("all_gather").layout(1000, 4, 3)
    assert (ag.nbytes, ag.chunk) == (80 * 3 * 4, 80)
    rs = get_collective("reduce_scatter").layout(1000, 2, 3)  # half: 500 / 3 = 166 -> multiple of 8: 160
    assert (rs.nbytes, rs.chunk) == (160 * 3 * 2, 160)
    a2a = get_collective("all_to_all").layout(1000, 1, 3)  # int8: 333 -> multiple of 16: 320
    assert (a2a.nbytes, a2a.chunk) == (320 * 3, 320)
    assert get_collective("all_gather").layout(8, 4, 4).nbytes == 0  # too small: skipped by the sweep


@pytest.mark.parametrize("name", ["all_gather", "reduce_scatter"])
def test_sizes_and_counts_are_the_rows_nccl_tests_printed(name: str) -> None:
    """Every (size, count) nccl-tests 2.19.6 printed on the H200 (one rank, float, 8 B..8 GiB)."""
    printed = [
        (int(cols[0]), int(cols[1]))
        for cols in (line.split() for line in read_fixture(f"nccl-tests-h200-1gpu/{name}.txt").splitlines())
        if len(cols) > 10 and cols[0].isdigit()
    ]
    assert len(printed) == 31
    coll = get_collective(name)
    ours = [coll.layout(nbytes, 4, 1) for nbytes in (8 << i for i in range(31))]  # -b 8 -e 8G -f 2
    assert [(lay.nbytes, lay.count) for lay in ours] == printed


def test_aliases_and_unknown_names() -> None:
    assert get_collective("allreduce").name == "all_reduce"
    assert get_collective("all-gather").name == "all_gather"
    with pytest.raises(ValueError, match="unknown collective"):
        get_collective("all_reduse")


def test_zero_time_gives_zero_bandwidth() -> None:
    assert bandwidth(1024, 0.0, 2, get_collective("all_reduce")) == (0.0, 0.0)
