"""``netbench sweep --pattern copy-matrix``: copy bandwidth between every pair of this machine's GPUs.

The intra-node counterpart of the pair heatmap: cell (i, j) is how fast GPU i's memory reaches GPU j's
(``dst.copy_(src)``, a peer copy over NVLink or PCIe; on the diagonal a device-to-device copy inside one
GPU). A slow cell names a bad link, a GPU whose peer access fell back to the host, or a throttled GPU,
which a collective over all GPUs would only show as "the whole node is slow".

Timing: one process, CUDA events on the source GPU's current stream (torch runs a cross-device copy on
the source device's stream and fences the destination's), ``warmup`` untimed copies then ``iters``
copies back to back; algbw = bytes / 1e9 / time, as nccl-tests; busbw = algbw (one link, one direction).
On the diagonal the copy reads and writes the same HBM, so its algbw is half the memory traffic.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from netbench import __version__
from netbench.agents.coordinator import Outcome
from netbench.collectives.sizes import format_size
from netbench.common.errors import UsageError
from netbench.common.interrupts import Interrupted, as_interrupted
from netbench.common.rundir import RunDir, utc_now
from netbench.run.execute import summarize
from netbench.run.options import MeasureOptions, ReportOptions, flat

COPY_SIZES = [64 << 20, 256 << 20, 1 << 30]
PATTERN = "copy-matrix"  # the rows' pattern: not the ``intra`` collective groups of each host


def copy_sizes(max_bytes: int | None) -> list[int]:
    """The default sizes, cut at ``--max-bytes`` (which then becomes the largest size)."""
    if max_bytes is None:
        return list(COPY_SIZES)
    kept = [s for s in COPY_SIZES if s <= max_bytes]
    return kept if kept and kept[-1] == max_bytes else [*kept, max_bytes]


def copy_row(
    run_id: str,
    host: str,
    src: int,
    dst: int,
    nbytes: int,
    time_us: float,
    iters: int,
    warmup: int,
    wrong: int | None,
) -> dict[str, Any]:
    """One result row (the ResultRow contract) for a copy of ``nbytes`` from GPU ``src`` to ``dst``."""
    algbw = nbytes / 1e9 / (time_us / 1e6) if time_us > 0 else 0.0
    return {
        "run_id": run_id,
        "collective": "copy",
        "backend": "cuda",
        "pattern": PATTERN,
        "hosts": [host],
        "ranks": 1,
        "round": None,
        "bytes": nbytes,
        "count": nbytes,
        "dtype": "uint8",
        "op": None,
        "in_place": False,
        "iters": iters,
        "warmup": warmup,
        "time_us": time_us,
        "time_us_min": time_us,
        "time_us_max": time_us,
        "rank_time_us": [time_us],
        "algbw_GBps": algbw,
        "busbw_GBps": algbw,
        "wrong": wrong,
        "status": "ok",
        "error": None,
        "root": None,
        "group": f"gpu{src}->gpu{dst}",
        "device": "cuda",
        "cuda_graph": False,
        "ts": time.time(),
        "extra": {"src": src, "dst": dst},
    }


def matrix_of(rows: list[dict[str, Any]]) -> tuple[int, dict[tuple[int, int], float], int]:
    """(GPU count, {(src, dst): algbw GB/s at the largest size}, that size) from copy rows."""
    rows = [r for r in rows if r.get("collective") == "copy" and r.get("status") == "ok"]
    if not rows:
        return 0, {}, 0
    top = max(r["bytes"] for r in rows)
    cells = {(r["extra"]["src"], r["extra"]["dst"]): r["algbw_GBps"] for r in rows if r["bytes"] == top}
    n = 1 + max(max(k) for k in cells)
    return n, cells, top


def format_matrix(n: int, cells: dict[tuple[int, int], float], nbytes: int) -> str:
    """The matrix as text: rows are sources, columns destinations, GB/s; a missing cell is '-'."""
    width = max(8, *(len(f"{v:.1f}") + 1 for v in cells.values())) if cells else 8
    lines = [
        f"# copy bandwidth GB/s at {format_size(nbytes)} (row: source GPU, column: destination GPU)",
        "#" + " " * 7 + "".join(f"{'gpu' + str(j):>{width}}" for j in range(n)),
    ]
    for i in range(n):
        vals = "".join(f"{(f'{cells[(i, j)]:.1f}' if (i, j) in cells else '-'):>{width}}" for j in range(n))
        lines.append(f"# {'gpu' + str(i):<6}{vals}")
    return "\n".join(lines)


def _time_copy(src_t: Any, dst_t: Any, src: int, iters: int, warmup: int) -> float:
    import torch

    with torch.cuda.device(src):
        for _ in range(warmup):
            dst_t.copy_(src_t, non_blocking=True)
        torch.cuda.synchronize(src)
        torch.cuda.synchronize(dst_t.device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            dst_t.copy_(src_t, non_blocking=True)
        end.record()
        end.synchronize()
        torch.cuda.synchronize(dst_t.device)
        return start.elapsed_time(end) * 1000.0 / iters


def visible_gpus() -> int:
    """This machine's CUDA GPUs; a UsageError without one."""
    import torch

    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        raise UsageError("--pattern copy-matrix measures this machine's GPUs; no CUDA GPU is visible here")
    return torch.cuda.device_count()


def measure_copy_matrix(
    opts: MeasureOptions, rundir: RunDir, echo: Callable[[str], None] = print
) -> list[dict[str, Any]]:
    """Measure every (src, dst) GPU pair of this machine at a few large sizes; write and return rows."""
    import torch

    n = visible_gpus()
    for i in range(n):  # peer access where the hardware allows it; torch falls back to staging otherwise
        for j in range(n):
            if i != j and torch.cuda.can_device_access_peer(i, j):
                with torch.cuda.device(i):
                    try:
                        torch.empty(1, device=f"cuda:{j}").copy_(torch.empty(1, device=f"cuda:{i}"))
                    except RuntimeError:
                        pass
    sizes = copy_sizes(opts.max_bytes)
    host = os.uname().nodename
    iters, warmup, check = opts.iters, opts.warmup, opts.check
    echo(
        f"# netbench copy-matrix: copy bandwidth between {n} local GPU(s), sizes "
        f"{', '.join(format_size(s) for s in sizes)}, iters {iters}, warmup {warmup}"
    )
    rows: list[dict[str, Any]] = []
    with rundir.writer() as writer:
        for nbytes in sizes:
            pattern = torch.arange(nbytes, dtype=torch.int64, device="cuda:0").remainder_(251).to(torch.uint8)
            srcs = [pattern.to(f"cuda:{i}") for i in range(n)]  # every source holds the same bytes
            del pattern
            dsts = [torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{j}") for j in range(n)]
            for i in range(n):
                for j in range(n):
                    dsts[j].fill_(0)
                    t_us = _time_copy(srcs[i], dsts[j], i, iters, warmup)
                    wrong = int((dsts[j] != srcs[j]).sum()) if check else None
                    row = copy_row(rundir.run_id, host, i, j, nbytes, t_us, iters, warmup, wrong)
                    writer.write(row)
                    rows.append(row)
            del srcs, dsts
            torch.cuda.empty_cache()
    echo(format_matrix(*matrix_of(rows)))
    return rows


def run_copy_matrix(
    opts: MeasureOptions, report: ReportOptions, echo: Callable[[str], None] = print
) -> tuple[RunDir, Outcome]:
    """The copy matrix as a run, recorded as ``run.execute.execute`` records a launch: run.json (running,
    then how it ended: status, rows, the phase's time, the stop that ended it), env.json,
    results.jsonl; then the engine's closing lines (``run.execute.summarize``). The ``Outcome`` is what
    happened, for ``run.execute.exit_status``: one phase, ``PATTERN``, of a group per (source,
    destination) cell, with the seconds it took. A stop (a signal, a full disk) is recorded, said and
    raised, as the pipeline does."""
    from netbench.collectives.envinfo import collect_env

    gpus = visible_gpus()  # no GPU: bad input, before a run directory is made
    host = os.uname().nodename
    rundir = RunDir.create(report.out)
    said = flat(opts) | {"out": report.out, "report": report.report, "fail_on": report.fail_on}
    rundir.write_run(status="running", started=utc_now(), netbench_version=__version__, launcher="local",
                     backend="nccl", device="cuda", hosts=[host], world_size=1, options=said)
    t0 = time.monotonic()
    stop: Interrupted | None = None
    try:
        measure_copy_matrix(opts, rundir, echo)
    except KeyboardInterrupt as exc:  # what was measured stays, and run.json says how it ended
        stop = as_interrupted(exc)
    except BaseException:
        rundir.write_run(status="failed", ended=utc_now())
        raise
    rows = rundir.read_rows() if rundir.results_path.is_file() else []
    phase = {"name": PATTERN, "groups": gpus * gpus, "seconds": round(time.monotonic() - t0, 3)}
    outcome = Outcome("interrupted" if stop else "completed", rows=len(rows), env={host: collect_env("cuda")},
                      phases=[phase])
    said = {"signal": stop.signal, "error": stop.what} if stop is not None else {}
    rundir.write_run(status=outcome.status, ended=utc_now(), seconds=phase["seconds"], rows=len(rows),
                     rows_failed=sum(1 for r in rows if r.get("status") != "ok"), phases=outcome.phases,
                     down_hosts=[], faults=[], **said)
    if stop is not None:
        echo(f"# {stop.what} (measuring); what was measured stays in {rundir.path}")
        raise stop
    rundir.write_env(outcome.env)
    summarize(rows, outcome, echo)
    return rundir, outcome
