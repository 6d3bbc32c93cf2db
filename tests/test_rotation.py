"""Buffer rotation (nccl-tests' startColl offsets): each timed operation of a point runs in the next of
``largest size / size`` buffer slots, so data is not cache-resident between operations as it never
is in a job; ``--hot-buffers`` keeps one slot. Measured through the real harness on a real one-rank
gloo process group, with the collective's issue call watched to see which memory each operation used.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.distributed as dist
from netbench.collectives.harness import PointSpec, Settings, measure, slots_for
from netbench.collectives.ops import get_collective


@pytest.fixture(scope="module")
def pg():
    return dist.ProcessGroupGloo(dist.HashStore(), 0, 1)


def watched(name: str, used: list[tuple[int, int]]):
    coll = get_collective(name)

    def issue(call, buf):  # noqa: ANN001, ANN202
        used.append((buf.send.data_ptr(), buf.recv.data_ptr()))
        return coll.issue(call, buf)

    return dataclasses.replace(coll, issue=issue)


def run_point(pg, name: str, nbytes: int, reach: int, hot: bool, iters: int = 8, warmup: int = 2):  # noqa: ANN001, ANN201
    used: list[tuple[int, int]] = []
    coll = watched(name, used)
    lay = coll.layout(nbytes, 4, 1)
    spec = PointSpec(coll, lay, torch.float32, in_place=False, op_name="sum" if coll.reduces else None,
                     op=dist.ReduceOp.SUM if coll.reduces else None)
    settings = Settings(iters=iters, warmup=warmup, check=True, device="cpu", hot_buffers=hot)
    point = measure(spec, pg, rank=0, nranks=1, settings=settings, reach=reach)
    return point, used


@pytest.mark.parametrize("name", ["all_reduce", "all_gather", "reduce_scatter", "all_to_all"])
def test_operations_rotate_over_distinct_slots_and_results_are_checked(pg, name: str) -> None:
    point, used = run_point(pg, name, 4096, reach=4096 * 4, hot=False)
    assert point.wrong == 0  # the check ran in a filled slot
    timed = used[-8:]
    assert len(set(timed)) == 4  # 16 KiB of room / 4 KiB: four slots, each used in turn
    assert timed[:4] == timed[4:]
    sends, recvs = sorted({s for s, _ in timed}), sorted({r for _, r in timed})
    for ptrs in (sends, recvs):  # nccl-tests' layout: one allocation each, slot i at i x the size
        assert [b - a for a, b in zip(ptrs, ptrs[1:], strict=False)] == [4096] * 3


def test_hot_buffers_reuse_one_pair(pg) -> None:
    point, used = run_point(pg, "all_reduce", 4096, reach=1 << 20, hot=True)
    assert point.wrong == 0 and len(set(used)) == 1


def test_slots_never_hold_more_than_the_largest_point_nor_outnumber_operations() -> None:
    s = Settings(iters=50, warmup=5, check=False, device="cuda")
    assert slots_for(16 << 20, 1 << 30, s) == 50  # 64 would fit; 50 operations use 50
    assert slots_for(256 << 20, 1 << 30, s) == 4  # 4 x 256 MiB = the 1 GiB point's memory
    assert slots_for(1 << 30, 1 << 30, s) == 1
    assert slots_for(3 << 20, 8 << 20, s) == 2  # rounded down: never past the largest point
    assert slots_for(8, 8, s) == 1
    assert slots_for(16 << 20, 1 << 30, dataclasses.replace(s, hot_buffers=True)) == 1
