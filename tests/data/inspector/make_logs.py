"""NCCL Inspector logs derived from the format's definition (no GPU here to run the plugin).

Keys and nesting as NVIDIA/nccl plugins/profiler/inspector/inspector_json.cc writes them (format
v4.0: header / metadata / coll_perf, one JSON object a line, a file per process). Two nodes x 4 ranks,
``COLLS`` AllReduce of 64 MiB on one communicator: each rank's kernel runs from its own start to the
common end; rank ``LATE`` (on node-b) starts ``LATE_US`` later than the rest, so its kernel is the
shortest and the others' are longer by about that much. Noise: exponential, 30 us.

    python make_logs.py OUT_DIR [--late RANK]
"""

import json
import os
import random
import sys

COLLS, LATE_US, SIZE = 60, 400.0, 64 << 20
HOSTS = ["node-a"] * 4 + ["node-b"] * 4


def main() -> None:
    out = sys.argv[1]
    late = int(sys.argv[sys.argv.index("--late") + 1]) if "--late" in sys.argv else None
    rng = random.Random(27)
    os.makedirs(out, exist_ok=True)
    lines: dict[int, list[str]] = {r: [] for r in range(len(HOSTS))}
    for sn in range(1, COLLS + 1):
        starts = [rng.expovariate(1 / 30.0) + (LATE_US if r == late else 0.0) for r in range(len(HOSTS))]
        end = max(starts) + 2000.0
        for r, host in enumerate(HOSTS):
            t = end - starts[r] + rng.uniform(0, 5)
            algbw = SIZE / 1e9 / (t / 1e6)
            lines[r].append(json.dumps({
                "header": {"id": "0x5e1f00d27a", "comm_name": "DP Group 0", "rank": r, "n_ranks": len(HOSTS),
                           "nnodes": 2},
                "metadata": {"inspector_output_format_version": "v4.0", "git_rev": "", "rec_mechanism":
                             "nccl_profiler_interface", "dump_timestamp_us": 1748030377748202 + sn * 5000,
                             "hostname": host, "pid": 4000 + r},
                "coll_perf": {"coll": "AllReduce", "coll_sn": sn, "coll_msg_size_bytes": SIZE,
                              "coll_exec_time_us": int(t), "coll_timing_source": "kernel_gpu",
                              "coll_algobw_gbs": round(algbw, 6),
                              "coll_busbw_gbs": round(algbw * 2 * 7 / 8, 6)},
            }))
    for r, ls in lines.items():
        with open(os.path.join(out, f"{HOSTS[r]}-pid{4000 + r}.log"), "w") as fh:
            fh.write("\n".join(ls) + "\n")


if __name__ == "__main__":
    main()
