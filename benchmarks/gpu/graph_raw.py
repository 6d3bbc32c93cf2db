"""Graphs of NCCL all_reduce made with CUDA's own graph API (through CuPy), not torch.cuda.CUDAGraph:
does a process that makes graph after graph slow down as netbench's does (issue 28)?

    python benchmarks/gpu/graph_raw.py [--rounds 12] [--sizes 16777216,2097152] [--torch]

On the H200, a torch process timing a fresh graph of 50 one-rank all_reduce operations per round
(graph_probe.py --bare-only) reads 9.46 us an operation at 16 MiB for its first five graphs and
9.82 from the sixth on, with or without a process group, and whatever it slept first; nccl-tests,
which makes a graph per size with cudaStreamBeginCapture / cudaGraphInstantiate / cudaGraphLaunch,
stays at 9.47-9.50. This script does what nccl-tests does, from Python: buffers from CuPy
(cudaMalloc), slots at the front of 1 GiB (nccl-tests' offsets), a non-blocking stream, capture,
instantiate (CuPy's Graph), 20 launches timed by the host clock to the stream's end, the graph
dropped; round by round. ``--torch``: torch imported and its CUDA context made first (the graphs
are still CuPy's), to tell torch's presence from torch's graph class.
"""

from __future__ import annotations

import argparse
import time

OPS, LAUNCHES = 50, 20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--sizes", default="16777216,2097152")
    ap.add_argument("--torch", action="store_true", help="import torch and make its CUDA context first")
    args = ap.parse_args()
    if args.torch:
        import torch

        torch.cuda.init()
        torch.ones(1, device="cuda")
    import cupy as cp
    import nccl.bindings.nccl as nccl

    t0 = time.perf_counter()
    comm = nccl.comm_init_rank_scalable(1, 0, 1, bytearray(bytes(nccl.get_unique_id())), 0)
    stream = cp.cuda.Stream(non_blocking=True)
    send = cp.ones((1 << 30) // 4, dtype=cp.float32)
    recv = cp.empty((1 << 30) // 4, dtype=cp.float32)
    for nbytes in (int(s) for s in args.sizes.split(",")):
        count = nbytes // 4
        ptrs = [(send.data.ptr + i * nbytes, recv.data.ptr + i * nbytes) for i in range(OPS)]
        got = []
        for _ in range(args.rounds):
            for s, r in ptrs[:10]:  # warm-up, eager
                nccl.all_reduce(s, r, count, 7, 0, comm, stream.ptr)
            stream.synchronize()
            stream.begin_capture()
            for s, r in ptrs:
                nccl.all_reduce(s, r, count, 7, 0, comm, stream.ptr)
            graph = stream.end_capture()
            stream.synchronize()
            start = time.perf_counter()
            for _ in range(LAUNCHES):
                graph.launch(stream)
            stream.synchronize()
            got.append(((time.perf_counter() - start) * 1e6 / (OPS * LAUNCHES), time.perf_counter() - t0))
            del graph
        print(f"{nbytes} B, CuPy graphs{' (torch imported, its context made)' if args.torch else ''}, "
              f"round by round (us @ s): {' '.join(f'{u:.3f}@{t:.2f}' for u, t in got)}")
    nccl.comm_destroy(comm)


if __name__ == "__main__":
    main()
