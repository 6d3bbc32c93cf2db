"""One real rank (``netbench.agents.worker.run_rank``) that follows a synthetic plan of many groups of the
same ranks, one after another, as a rank of a long pairwise sweep does: the load of
tests/test_group_resources.py (on a GPU: benchmarks/gpu/check.sh).

python group_churn.py BACKEND RANK WORLD STORE_PORT GROUPS [AHEAD]   (the store's master is the caller;
AHEAD: groups made ahead on lanes, collectives/ahead.py, default 0)
"""

from __future__ import annotations

import datetime as _dt
import os
import sys

GO = "go/0"  # the key the caller releases the phase with (rank.run_plan waits for it)
AGAIN = "again/0"  # with AHEAD, the groups to make again (none: the caller sets "[]" before GO)


def plan(backend: str, world: int, groups: int, ahead: int = 0):  # noqa: ANN201 - WorkerPlan, imported lazily
    from netbench.collectives.plan import GroupSpec, Phase, SweepSpec, WorkerPlan

    hosts = [f"h{r}" for r in range(world)]
    # all_gather, which torch measures out of place on any number of ranks: a one-rank group (the
    # GPU test's) has no out-of-place all_reduce through torch (ops.Collective.unmeasured: N/A since
    # 2026-12-03), so with all_reduce it ran every group and reported no row
    spec = SweepSpec(collectives=["all_gather"], sizes=[1024], iters=2, warmup=1, in_place=[False])
    specs = [GroupSpec(id=group_id(k), pattern="pair", ranks=list(range(world)), hosts=hosts, round=k)
             for k in range(groups)]
    return WorkerPlan(run_id="churn", backend=backend, device="cuda" if backend == "nccl" else "cpu",
                      world_size=world, phases=[Phase(0, "churn", specs, spec)], op_timeout_s=60.0,
                      rank_hosts=hosts, ahead=ahead)


def group_id(k: int) -> str:
    return f"churn:{k:05d}"


def main() -> None:
    import torch.distributed as dist

    from netbench.agents.worker import run_rank

    backend, rank, world, port, groups = sys.argv[1], *map(int, sys.argv[2:6])
    ahead = int(sys.argv[6]) if len(sys.argv) > 6 else 0
    store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=_dt.timedelta(seconds=120))

    def lane_store():  # noqa: ANN202 - a TCPStore
        return dist.TCPStore("127.0.0.1", port, is_master=False, timeout=_dt.timedelta(days=7))

    run_rank(store, "127.0.0.1", rank, 0, f"h{rank}", plan(backend, world, groups, ahead),
             open_store=lane_store)
    sys.stdout.flush()
    os._exit(0)  # as the worker's rank does


if __name__ == "__main__":
    main()
