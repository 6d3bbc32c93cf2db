"""Running a sweep end to end: options -> plan -> ranks -> run directory -> table and report.

Used by ``netbench sweep`` (and by preflight). The same coordinator drives a local run (one host,
its ranks as child processes) and a cluster run (one agent per host over SSH); only the launcher and
the plan's phases differ.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from netbench import __version__
from netbench.collectives.ops import DEFAULT_COLLECTIVES, get_collective
from netbench.collectives.plan import GroupSpec, Phase, SweepSpec, WorkerPlan
from netbench.collectives.sizes import format_size, size_sweep
from netbench.common.errors import UsageError
from netbench.common.rundir import RunDir, utc_now
from netbench.coordinator import Coordinator, Outcome
from netbench.launch import HostSlot
from netbench.progress import Progress
from netbench.table import TablePrinter, large_message_summary

GLOO_DEFAULT = (8, 64 << 20)
NCCL_DEFAULT = (8, 8 << 30)


@dataclass
class SweepOptions:
    """Everything a sweep can be asked; the CLI fills it, tests and preflight build it directly."""

    collectives: list[str] = field(default_factory=lambda: list(DEFAULT_COLLECTIVES))
    min_bytes: int | None = None  # None: the backend's default
    max_bytes: int | None = None
    factor: int = 2
    iters: int = 20
    warmup: int = 5
    dtype: str = "float"
    op: str = "sum"
    check: bool = True
    in_place: str = "both"  # both | out | in
    root: int = 0
    procs: int | None = None  # CPU ranks on the local machine (gloo)
    backend: str | None = None  # None: nccl when CUDA is available, else gloo
    timeout_s: float = 60.0
    cuda_graph: bool = False
    out: str | None = None
    report: bool = True

    def modes(self) -> list[bool]:
        return {"both": [False, True], "out": [False], "in": [True]}[self.in_place]


def default_procs() -> int:
    """A few CPU ranks: enough to exercise a real ring, few enough not to oversubscribe small machines."""
    return max(2, min(4, os.cpu_count() or 2))


def detect_backend(requested: str | None) -> tuple[str, str, int]:
    """(backend, device, local GPU count). NCCL whenever CUDA works, as the user expects."""
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    backend = requested or ("nccl" if gpus else "gloo")
    if backend == "nccl" and not gpus:
        raise UsageError("--backend nccl needs CUDA GPUs; none are visible here")
    return backend, ("cuda" if backend == "nccl" else "cpu"), gpus


def free_gpu_cap(check: bool) -> int:
    """Largest size that fits every GPU, as nccl-tests caps -e, less what the harness needs besides.

    Each point holds a send and a receive buffer of up to the size, and the check's comparison makes
    a mask of one byte per element (up to the size again for int8): three buffers' worth, as nccl-tests
    reserves for its expected-result buffer. 2 GiB stay free for the CUDA context and NCCL's own
    buffers. ``check`` is kept for the callers.
    """
    import torch

    free = min(torch.cuda.mem_get_info(i)[0] for i in range(torch.cuda.device_count()))
    return max(1 << 20, (free - (2 << 30)) // 3)


def build_spec(opts: SweepOptions, backend: str, cap: int | None) -> SweepSpec:
    lo, hi = GLOO_DEFAULT if backend == "gloo" else NCCL_DEFAULT
    lo = opts.min_bytes if opts.min_bytes is not None else lo
    hi = opts.max_bytes if opts.max_bytes is not None else hi
    if opts.min_bytes is not None and opts.max_bytes is None and lo > hi:
        hi = lo
    if cap is not None and hi > cap:
        hi = max(lo, 1 << (cap.bit_length() - 1))
    try:
        sizes = size_sweep(lo, hi, opts.factor)
        spec = SweepSpec(
            collectives=opts.collectives,
            sizes=sizes,
            iters=opts.iters,
            warmup=opts.warmup,
            dtype=opts.dtype,
            op=opts.op,
            check=opts.check,
            in_place=opts.modes(),
            root=opts.root,
            cuda_graph=opts.cuda_graph,
        )
        spec.validate_for(backend)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    return spec


def run_local(
    opts: SweepOptions, echo: Callable[[str], None] = print, progress: Progress | None = None
) -> tuple[RunDir, Outcome]:
    """``netbench sweep`` on this machine: every GPU with NCCL, else ``procs`` CPU ranks with gloo."""
    from netbench.launch.local import LocalLauncher

    backend, device, gpus = detect_backend(opts.backend)
    nprocs = gpus if device == "cuda" else (opts.procs or default_procs())
    if nprocs < 1:
        raise UsageError("--procs must be >= 1")
    if opts.root >= nprocs:
        raise UsageError(f"--root {opts.root} is not a rank (there are {nprocs})")
    cap = free_gpu_cap(opts.check) if device == "cuda" else None
    spec = build_spec(opts, backend, cap)
    rundir = RunDir.create(opts.out)
    host = os.uname().nodename
    slots = [HostSlot(host=host, nprocs=nprocs, rank_base=0)]
    group = GroupSpec(id="world", pattern="world", ranks=list(range(nprocs)), hosts=[host])
    plan = WorkerPlan(
        run_id=rundir.run_id,
        backend=backend,
        device=device,
        world_size=nprocs,
        phases=[Phase(index=0, name="world", groups=[group], spec=spec)],
        op_timeout_s=opts.timeout_s,
        rank_hosts=[host] * nprocs,
    )
    echo(
        f"# netbench {__version__}: {len(spec.collectives)} collective(s) on {nprocs} {device} rank(s) "
        f"({backend}), {format_size(spec.sizes[0])}..{format_size(spec.sizes[-1])} x{opts.factor}, "
        f"iters {spec.iters}, warmup {spec.warmup}, check {'on' if spec.check else 'off'}"
    )
    echo(f"# run directory: {rundir.path}")
    return rundir, execute(
        plan, slots, LocalLauncher(), rundir, opts, echo, progress, fail_fast=True, launcher_name="local"
    )


def execute(
    plan: WorkerPlan,
    slots: list[HostSlot],
    launcher: Any,
    rundir: RunDir,
    opts: Any,
    echo: Callable[[str], None],
    progress: Progress | None,
    fail_fast: bool,
    launcher_name: str,
    print_table: Callable[[dict[str, Any]], bool] | None = None,
    store: Any = None,
    before_phase: Callable[[Any], bool] | None = None,
) -> Outcome:
    """Run a plan and keep the run directory true at every moment (run.json says 'running' first)."""
    progress = progress or Progress()
    t0 = time.time()
    rundir.write_run(
        status="running",
        started=utc_now(),
        netbench_version=__version__,
        launcher=launcher_name,
        backend=plan.backend,
        device=plan.device,
        hosts=[s.host for s in slots],
        world_size=plan.world_size,
        options=asdict(opts) if hasattr(opts, "__dataclass_fields__") else dict(opts),
    )
    table = TablePrinter(write=lambda s: (progress.clear(), echo(s)))
    writer = rundir.writer()
    rows: list[dict[str, Any]] = []

    def on_row(row: dict[str, Any]) -> None:
        writer.write(row)
        rows.append(row)
        if print_table is None or print_table(row):
            coll = get_collective(row["collective"])
            table.add(
                row, coll.out_of_place and False in opts.modes(), coll.in_place and True in opts.modes()
            )

    coord = Coordinator(
        plan,
        slots,
        launcher,
        on_row=on_row,
        on_progress=progress.update,
        on_note=lambda s: progress.note(f"netbench: {s}"),
        fail_fast=fail_fast,
        store=store,
        before_phase=before_phase,
    )
    outcome: Outcome | None = None
    try:
        outcome = coord.run()
    except KeyboardInterrupt:
        outcome = coord.outcome
        outcome.status = "interrupted"
    finally:
        progress.clear()
        writer.close()
        out = outcome or coord.outcome
        rundir.write_env(out.env)
        rundir.write_run(
            status=out.status,
            ended=utc_now(),
            seconds=round(time.time() - t0, 3),
            rows=out.rows,
            down_hosts=sorted(out.down_hosts),
            startup_s=out.startup_s,
            phases=out.phases,
            faults=[asdict(f) for f in out.faults],
        )
    summarize(rows, out, echo)
    return out


def summarize(rows: list[dict[str, Any]], outcome: Outcome, echo: Callable[[str], None]) -> None:
    summary = [s for s in large_message_summary(rows) if s["pattern"] in ("world", "ring", "intra")]
    echo("#")
    for s in summary:
        sizes = ", ".join(format_size(b) for b in s["sizes"])
        echo(
            f"# {s['collective']:<15} large-message busbw {s['busbw_GBps']:8.3f} GB/s "
            f"(algbw {s['algbw_GBps']:.3f}; mean of the {len(s['sizes'])} largest sizes: {sizes})"
        )
    wrong = sum(r.get("wrong") or 0 for r in rows if r.get("status") == "ok")
    failed = [r for r in rows if r.get("status") != "ok"]
    echo(f"# Out of bounds values : {wrong} {'OK' if not wrong else 'FAILED'}")
    echo(f"# rows: {len(rows)} measured, {len(failed)} failed; status {outcome.status}")
    for f in outcome.faults:
        echo(f"# fault: {f.message}")


def finish_report(
    rundir: RunDir,
    echo: Callable[[str], None],
    baseline: str | None = None,
    policy: str | None = None,
    topology: str | None = None,
) -> list[Any]:
    """Write findings.json and report.html and print the summary; a report failure never costs the
    measurements (they are on disk already), it only warns."""
    try:
        from netbench.reports.report import write_report
        from netbench.reports.summary import format_summary

        findings, html = write_report(rundir.path, baseline=baseline, policy=policy, topology=topology)
        echo(format_summary(findings, "text", rundir.read_run(), 10))
        if html is not None:
            echo(f"report: {html}")
        return findings
    except Exception as exc:  # noqa: BLE001 - measurements are already safe on disk
        print(f"netbench: warning: report not written: {type(exc).__name__}: {exc}", file=sys.stderr)
        return []


CLUSTER_ONLY = (
    "hosts_file",
    "pair_batch",
    "pair_sizes",
    "pair_collectives",
    "procs_per_host",
    "python",
    "ssh_config",
    "accept_new_host_keys",
    "advertise",
    "launcher",
    "topology",
)


def exit_status(outcome: Outcome, rows: list[dict[str, Any]]) -> int:
    """130 interrupted; 1 a rank/host failed, a group did not run or results were wrong; else 0."""
    if outcome.status == "interrupted":
        return 130
    bad = [r for r in rows if r.get("status") != "ok" or (r.get("wrong") or 0) > 0]
    return 1 if bad or outcome.faults or outcome.down_hosts or outcome.status != "completed" else 0


def main_from_cli(kw: dict[str, Any], echo: Callable[[str], None]) -> int:
    """``netbench sweep``: local (no --hosts) or cluster, then the report, then the exit status."""
    patterns = list(kw.pop("patterns") or [])
    if kw.get("launcher") in ("mpi", "slurm"):  # the scheduler starts the ranks; rank 0 coordinates
        import subprocess

        from netbench.launch.wrap import mpirun_argv, srun_argv

        pats = patterns or (["ring", "pairwise"] if kw.get("hosts_file") else ["world"])
        nprocs = None if kw.get("hosts_file") else (kw.get("procs") or default_procs())
        argv = mpirun_argv(kw, pats, nprocs) if kw["launcher"] == "mpi" else srun_argv(kw, pats)
        echo(f"# {' '.join(argv[:4])} ... netbench worker")
        return subprocess.run(argv).returncode
    if kw.get("hosts_file"):
        from netbench.cluster import ClusterOptions, run_cluster

        copts = ClusterOptions(patterns=patterns or ["ring", "pairwise"], **kw)
        rundir, outcome = run_cluster(copts, echo=echo)
        if copts.report and outcome.status != "interrupted":
            finish_report(rundir, echo, topology=copts.topology)
        return exit_status(outcome, rundir.read_rows())
    for key in CLUSTER_ONLY:
        kw.pop(key, None)
    if patterns and set(patterns) - {"intra"}:
        raise UsageError("--pattern ring/pairwise need --hosts (one machine runs the world pattern)")
    opts = SweepOptions(**kw)
    if patterns == ["intra"]:
        from netbench.intra import run_intra

        rundir = RunDir.create(opts.out)
        rundir.write_run(
            status="running",
            started=utc_now(),
            netbench_version=__version__,
            launcher="local",
            backend="nccl",
            device="cuda",
            hosts=[os.uname().nodename],
            options=asdict(opts),
        )
        rows = run_intra(opts, rundir, echo)
        rundir.write_run(status="completed", ended=utc_now(), rows=len(rows))
        if opts.report:
            finish_report(rundir, echo)
        return 0 if rows and all(r.get("status") == "ok" and not r.get("wrong") for r in rows) else 1
    rundir, outcome = run_local(opts, echo=echo)
    if opts.report and outcome.status != "interrupted":
        finish_report(rundir, echo)
    return exit_status(outcome, rundir.read_rows())
