"""The correctness check in isolation: exact results count 0 wrong, damage is counted exactly.

The expected buffers are built here from first principles, not with ``Collective.expected``: every
rank's send buffer is written out with the fill rule that ``collectives.ops`` documents, and each
collective is simulated in plain Python (who sends what to whom, reduced how). Small sizes keep that
cheap; they are chosen so that buffers and chunks end in a partial period of the fill pattern.
"""

from __future__ import annotations

import math

import pytest
import torch
from netbench.collectives.harness import count_wrong
from netbench.collectives.ops import COLLECTIVES, Buffers

ESIZE = 4  # float32


def fill(rank: int, i: int, n: int, op: str | None) -> int:
    """The documented fill (collectives.ops): small integers 1..4, or for prod all 1 but one rank's 2."""
    if op == "prod":
        return 2 if i % n == rank else 1
    return (i + rank) % 4 + 1


def reduce_values(values: list[int], op: str | None) -> int:
    if op == "prod":
        return math.prod(values)
    if op == "max":
        return max(values)
    return sum(values)


def simulate(name: str, nbytes: int, n: int, rank: int, op: str | None, root: int = 0) -> list[int] | None:
    """What ``rank``'s receive buffer must hold after the collective; None where it is undefined.

    Sizes follow nccl-tests: the plain collectives move ``nbytes``; all_gather's size is the gathered
    buffer, reduce_scatter's and all_to_all's one rank's send buffer, each split into n chunks of
    whole 16-byte lines (nccl-tests' ``(count/nranks) & -(16/eltSize)``).
    """
    count = nbytes // ESIZE
    chunk = count // n // (16 // ESIZE) * (16 // ESIZE)

    def send(r: int, numel: int) -> list[int]:
        return [fill(r, i, n, op) for i in range(numel)]

    if name == "all_reduce":
        bufs = [send(r, count) for r in range(n)]
        return [reduce_values([b[i] for b in bufs], op) for i in range(count)]
    if name == "reduce":
        bufs = [send(r, count) for r in range(n)]
        return [reduce_values([b[i] for b in bufs], op) for i in range(count)] if rank == root else None
    if name == "broadcast":
        return send(root, count)
    if name == "sendrecv":
        return send((rank - 1) % n, count)
    if name == "all_gather":  # every rank contributes one chunk, in rank order
        return [v for r in range(n) for v in send(r, chunk)]
    if name == "reduce_scatter":  # rank k gets the reduction of everyone's k-th chunk
        bufs = [send(r, chunk * n) for r in range(n)]
        return [reduce_values([b[rank * chunk + i] for b in bufs], op) for i in range(chunk)]
    if name == "all_to_all":  # rank k gets chunk k of every sender, in sender order
        return [v for src in range(n) for v in send(src, chunk * n)[rank * chunk : (rank + 1) * chunk]]
    raise AssertionError(f"no simulation for {name}")


def received(values: list[int] | None, numel: int, dtype: torch.dtype) -> Buffers:
    recv = torch.tensor(values, dtype=dtype) if values is not None else torch.zeros(numel, dtype=dtype)
    return Buffers(send=torch.empty(0, dtype=dtype), recv=recv)


def test_every_collective_is_simulated() -> None:
    assert set(COLLECTIVES) == {
        "all_reduce", "reduce", "broadcast", "sendrecv", "all_gather", "reduce_scatter", "all_to_all"
    }


@pytest.mark.parametrize("name", sorted(COLLECTIVES))
@pytest.mark.parametrize("n", [2, 3, 5])
@pytest.mark.parametrize("nbytes", [ESIZE * 7 * 5, ESIZE * 61 * 5, ESIZE * 250 * 5 + ESIZE * 3])
@pytest.mark.parametrize("op", ["sum", "prod", "max"])
def test_exact_results_count_zero_and_damage_counts(name: str, n: int, nbytes: int, op: str) -> None:
    coll = COLLECTIVES[name]
    op_name = op if coll.reduces else None
    lay = coll.layout(nbytes, ESIZE, n)
    for rank in range(n):
        want = simulate(name, nbytes, n, rank, op_name)
        if want is not None:
            assert lay.recv_numel == len(want)  # the byte accounting agrees with the simulation
        buf = received(want, lay.recv_numel, torch.float32)
        assert count_wrong(coll, buf, lay, rank, n, op_name, 0) == 0
        if want is None:
            continue  # reduce: only the root's result is defined, so nothing else can be wrong
        flat = buf.recv.view(-1)
        hits = sorted({0, flat.numel() // 2, flat.numel() - 1})
        for i in hits:
            flat[i] += 1
        assert count_wrong(coll, buf, lay, rank, n, op_name, 0) == len(hits)
        flat[hits[0]] = 0  # a different wrong value in the same place is still one wrong element
        assert count_wrong(coll, buf, lay, rank, n, op_name, 0) == len(hits)


def test_a_swapped_pair_of_chunks_is_every_element_of_both() -> None:
    """all_gather with chunks 0 and 1 swapped: each element that differs is counted once."""
    n, chunk = 3, 12  # a whole number of 16-byte lines, so no rounding
    coll = COLLECTIVES["all_gather"]
    lay = coll.layout(ESIZE * n * chunk, ESIZE, n)
    want = simulate("all_gather", ESIZE * n * chunk, n, 0, None)
    assert want is not None
    swapped = want[chunk : 2 * chunk] + want[:chunk] + want[2 * chunk :]
    differing = sum(a != b for a, b in zip(want, swapped, strict=True))
    assert differing > 0
    buf = received(swapped, lay.recv_numel, torch.float32)
    assert count_wrong(coll, buf, lay, 0, n, None, 0) == differing


def test_integer_wraparound_is_expected_not_wrong() -> None:
    coll = COLLECTIVES["all_reduce"]
    n = 64  # 64 ranks of int8: every sum is 16 x (1+2+3+4) = 160, which wraps; the check must expect that
    lay = coll.layout(64, 1, n)
    sums = [sum(fill(r, i, n, "sum") for r in range(n)) for i in range(64)]
    assert max(sums) > 127
    wrapped = [(s + 128) % 256 - 128 for s in sums]
    assert count_wrong(coll, received(wrapped, lay.recv_numel, torch.int8), lay, 0, n, "sum", 0) == 0
    unwrapped = received([min(s, 127) for s in sums], lay.recv_numel, torch.int8)  # saturating is wrong
    assert count_wrong(coll, unwrapped, lay, 0, n, "sum", 0) == sum(s > 127 for s in sums)
