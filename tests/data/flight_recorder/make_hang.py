"""A real hang with a real torch process group, and its Flight Recorder dumps (fixture maker).

Every rank runs ``N - 1`` all-reduces; the last rank then stops (sleeps) instead of entering
collective N; the others enter it and time out. Each rank then dumps its Flight Recorder buffer as
the NCCL watchdog would on a timeout (``_dump_fr_trace``: a pickle; ``--json``: the JSON variant)
to ``OUT/<hostname>/fr_trace_<rank>``. Backend gloo: torch records gloo collectives since 2.7.

    python make_hang.py RANK WORLD MASTER_ADDR:PORT OUT [--json]
"""

import datetime
import os
import socket
import sys
import time

import torch
import torch.distributed as dist

N = 6


def main() -> None:
    rank, world, master, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    os.environ.setdefault("TORCH_FR_BUFFER_SIZE", "1000")
    dist.init_process_group("gloo", init_method=f"tcp://{master}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=5))
    t = torch.ones(4096)
    for _ in range(N - 1):
        dist.all_reduce(t)
    if rank == world - 1:
        time.sleep(8)  # stops before collective N: the others wait for it
    else:
        try:
            dist.all_reduce(t)
        except RuntimeError as exc:
            print(f"rank {rank}: collective {N} failed: {str(exc)[:80]}", flush=True)
    from torch._C._distributed_c10d import _dump_fr_trace, _dump_fr_trace_json

    folder = os.path.join(out, socket.gethostname())
    os.makedirs(folder, exist_ok=True)
    data = _dump_fr_trace_json() if "--json" in sys.argv else _dump_fr_trace()
    with open(os.path.join(folder, f"fr_trace_{rank}"), "wb") as fh:
        fh.write(data)
    os._exit(0)


if __name__ == "__main__":
    main()
