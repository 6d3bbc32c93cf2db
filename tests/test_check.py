"""The correctness check in isolation: exact expected buffers count 0 wrong, damage is counted exactly."""

from __future__ import annotations

import pytest
import torch
from netbench.collectives.harness import count_wrong
from netbench.collectives.ops import COLLECTIVES, Buffers


def perfect(coll, lay, rank, n, op, dtype):  # noqa: ANN001, ANN201
    j = torch.arange(lay.recv_numel, dtype=torch.int64)
    exp = coll.expected(j, rank, n, lay.chunk, op, 0)
    recv = exp.to(dtype) if exp is not None else torch.zeros(lay.recv_numel, dtype=dtype)
    return Buffers(send=torch.empty(lay.send_numel, dtype=dtype), recv=recv)


@pytest.mark.parametrize("name", sorted(COLLECTIVES))
@pytest.mark.parametrize("n", [2, 3, 5])
@pytest.mark.parametrize("nbytes", [4 * 7, 4 * 1000 + 4, 4 * 4099])  # tails that are not a whole period
@pytest.mark.parametrize("op", ["sum", "prod", "max"])
def test_exact_results_count_zero_and_damage_counts(name: str, n: int, nbytes: int, op: str) -> None:
    coll = COLLECTIVES[name]
    lay = coll.layout(nbytes, 4, n)
    if lay.nbytes == 0:
        pytest.skip("size rounds to nothing")
    op_name = op if coll.reduces else None
    for rank in range(n):
        buf = perfect(coll, lay, rank, n, op_name, torch.float32)
        assert count_wrong(coll, buf, lay, rank, n, op_name, 0) == 0
        if name == "reduce" and rank != 0:
            continue  # only the root's result is defined
        flat = buf.recv.view(-1)
        hits = sorted({0, flat.numel() // 2, flat.numel() - 1})
        for i in hits:
            flat[i] += 1
        assert count_wrong(coll, buf, lay, rank, n, op_name, 0) == len(hits)


def test_integer_wraparound_is_expected_not_wrong() -> None:
    coll = COLLECTIVES["all_reduce"]
    lay = coll.layout(64, 1, 40)  # 40 ranks of int8: sums up to 160 wrap around
    buf = perfect(coll, lay, 0, 40, "sum", torch.int8)
    assert count_wrong(coll, buf, lay, 0, 40, "sum", 0) == 0
