"""Processes that run on each host: the per-host agent and the ranks it starts.

``python -m netbench.worker agent ...`` is what a launcher starts on every host (locally through a
pipe, remotely through one SSH channel): it starts that host's ranks, forwards their protocol lines
on its own stdout, reports each rank's exit, and kills its ranks when its stdin closes (the
coordinator went away or was interrupted) or when it is signalled — so no rank outlives its run.
``python -m netbench.worker rank ...`` is one rank: it joins the run's store and follows the plan.

The agent fetches its host's part of the plan from the store once (``launch.fetch_host_plan``) and
hands it to each rank on stdin, after the secret: a store serving 4,096 hosts of 8 ranks then sends
each host's part once, not once per rank. It fetches while its ranks import torch, so the fetch
costs the ranks no start-up time. Rank stdin: the secret, the plan every host reads, the host's own
part, a line each.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import signal
import subprocess
import sys
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from netbench.collectives.plan import WorkerPlan
    from netbench.launch import HostPlanText


def _read_secret_line() -> str:
    """The run's store secret, the first line of stdin (the agent's pipe; the coordinator's pipe
    for a local agent): never a command-line argument, which `ps` shows to every user."""
    line = sys.stdin.buffer.readline().decode("ascii", "replace").strip()
    if not line:
        sys.stderr.write("netbench.worker: no store secret on stdin\n")
        os._exit(2)
    return line


def _read_plan_lines() -> HostPlanText:
    """The host's plan, the two lines after the secret (the agent writes them once it has fetched
    them); the agent closing stdin first means it could not fetch it, and said why on its stderr."""
    from netbench.launch import HostPlanText

    common = sys.stdin.buffer.readline()
    own = sys.stdin.buffer.readline()
    if not common.endswith(b"\n") or not own.endswith(b"\n"):
        sys.stderr.write("netbench.worker: no plan on stdin (the agent could not fetch it)\n")
        os._exit(2)
    return HostPlanText(common.decode(), own.decode())


def _rank_main(args: argparse.Namespace) -> None:
    import torch.distributed as dist

    from netbench.collectives.rank import STORE_WAIT
    from netbench.launch import secured

    secret = _read_secret_line()
    raw = dist.TCPStore(
        args.store_addr, args.store_port, is_master=False, timeout=STORE_WAIT, wait_for_workers=False
    )
    plan = _read_plan_lines().plan()
    run_rank(secured(raw, secret), args.store_addr, args.rank, args.local_rank, args.host, plan)
    sys.stdout.flush()
    os._exit(0)  # skip destructors of abandoned groups: they may wait for dead peers


def run_rank(
    store: object, store_addr: str, rank: int, local_rank: int, host: str, plan: WorkerPlan | None = None
) -> None:
    """One rank's whole life once it has the store: say hello, follow the phases. ``plan``: its
    host's, as the agent handed it; None (ranks an external launcher started, no agent): the rank
    fetches its host's part itself."""
    import torch

    from netbench.collectives import messages
    from netbench.collectives.envinfo import (
        capabilities,
        collect_env,
        interface_of,
        local_address_towards,
    )
    from netbench.collectives.native import engine_unmet, plan_uses_native
    from netbench.collectives.rank import STORE_WAIT, RankContext, run_plan
    from netbench.launch import fetch_host_plan

    if plan is None:
        plan = fetch_host_plan(store, host, STORE_WAIT).plan()
    caps = capabilities(nccl4py=plan_uses_native(plan))
    addr = local_address_towards(store_addr)
    iface = interface_of(addr)
    if iface and plan.backend == "nccl" and iface != "lo":
        os.environ.setdefault("NCCL_SOCKET_IFNAME", iface)
    messages.emit("hello", rank=rank, host=host, pid=os.getpid(), addr=addr, iface=iface, caps=caps)
    if plan.device == "cuda" and not caps["cuda_available"]:
        return  # the coordinator names the cause from the hello's capabilities; nothing to run
    if engine_unmet(plan, caps):
        return  # the same: the plan's engine is the run's, never switched on one rank
    if plan.device == "cuda":
        torch.cuda.set_device(local_rank)
    if local_rank == 0:
        messages.emit(
            "env", host=host, info={**collect_env(plan.device), "address": addr, "interface": iface}
        )
    ctx = RankContext(
        rank=rank,
        local_rank=local_rank,
        host=host,
        plan=plan,
        store=store,
        device=plan.device,
        gloo_addr=addr,
    )
    run_plan(ctx)
    messages.emit("bye", rank=rank)


def _forward(proc: subprocess.Popen, rank: int, lock: threading.Lock) -> None:
    from netbench.collectives import messages

    assert proc.stdout is not None
    for raw in proc.stdout:
        line = raw.decode("utf-8", "replace")
        if line.startswith(messages.PREFIX):
            with lock:
                sys.stdout.write(line)
                sys.stdout.flush()
        else:
            sys.stderr.write(f"[rank {rank}] {line}")
    rc = proc.wait()
    with lock:
        messages.emit("exit", rank=rank, rc=rc)


class _PlanFetch(threading.Thread):
    """The host's part of the plan from the run's store, fetched once for every rank of the host."""

    def __init__(self, store_addr: str, store_port: int, secret: str, host: str) -> None:
        super().__init__(daemon=True, name="plan-fetch")
        self.store_addr, self.store_port, self.secret, self.host = store_addr, store_port, secret, host
        self.text: HostPlanText | None = None

    def run(self) -> None:
        try:
            import torch.distributed as dist

            from netbench.collectives.rank import STORE_WAIT
            from netbench.launch import fetch_host_plan, secured

            raw = dist.TCPStore(
                self.store_addr, self.store_port, is_master=False, timeout=STORE_WAIT, wait_for_workers=False
            )
            self.text = fetch_host_plan(secured(raw, self.secret), self.host, STORE_WAIT)
        except Exception as exc:  # noqa: BLE001 - the ranks find no plan and exit; the coordinator names them
            why = f"{type(exc).__name__}: {exc}"
            sys.stderr.write(f"netbench.worker: cannot fetch {self.host}'s plan: {why}\n")


def _hand_over(proc: subprocess.Popen, secret: str, fetched: _PlanFetch) -> None:
    """A rank's stdin: the secret at once (it needs it to join the store), then the host's plan."""
    assert proc.stdin is not None
    try:
        proc.stdin.write((secret + "\n").encode())
        proc.stdin.flush()
        fetched.join()
        if fetched.text is not None:
            proc.stdin.write(f"{fetched.text.common}\n{fetched.text.own}\n".encode())
        proc.stdin.close()
    except OSError:  # the rank is gone already: its exit is reported by its reader
        pass


def _agent_main(args: argparse.Namespace) -> None:
    from netbench.launch import SECRET_ENV
    from netbench.launch.marker import RunMarker

    # local: the first line of the coordinator's pipe; SSH: the remote wrapper read it off the
    # channel into the environment, from where it goes no further (the ranks get it on stdin)
    secret = _read_secret_line() if args.watch_stdin else os.environ.pop(SECRET_ENV, "")
    if not secret:
        sys.stderr.write("netbench.worker: no store secret\n")
        os._exit(2)
    procs: list[subprocess.Popen] = []
    lock = threading.Lock()
    stopping = threading.Event()
    # held for the run's life: another run's inventory on this host finds it (launch/marker.py)
    marker = RunMarker.hold(f"{args.store_addr}:{args.store_port}")

    def stop(*_: object) -> None:
        if stopping.is_set():
            return
        stopping.set()
        for p in procs:
            if p.poll() is None:
                p.terminate()
        deadline = _dt.datetime.now() + _dt.timedelta(seconds=3)
        for p in procs:
            try:
                p.wait(timeout=max(0.1, (deadline - _dt.datetime.now()).total_seconds()))
            except subprocess.TimeoutExpired:
                p.kill()
        if marker is not None:
            marker.release()
        os._exit(143)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    signal.signal(signal.SIGINT, stop)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    threads = []
    fetched = _PlanFetch(args.store_addr, args.store_port, secret, args.host)
    fetched.start()  # alongside the ranks' own start-up (imports), not before it
    if marker is not None:
        threading.Thread(target=marker.name_run, args=(fetched,), daemon=True).start()
    for local in range(args.nprocs):
        rank = args.rank_base + local
        cmd = [
            sys.executable,
            "-m",
            "netbench.worker",
            "rank",
            "--store-addr",
            args.store_addr,
            "--store-port",
            str(args.store_port),
            "--rank",
            str(rank),
            "--local-rank",
            str(local),
            "--host",
            args.host,
        ]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stdin=subprocess.PIPE, env=env)
        procs.append(proc)
        # a thread per rank: a write blocks until that rank reads, and the ranks read in any order
        threading.Thread(target=_hand_over, args=(proc, secret, fetched), daemon=True).start()
        t = threading.Thread(target=_forward, args=(procs[-1], rank, lock), daemon=True)
        t.start()
        threads.append(t)

    def watch_stdin() -> None:
        try:
            while sys.stdin.buffer.read(4096):
                pass
        except (OSError, ValueError):
            pass
        stop()

    if args.watch_stdin:  # local launcher: our stdin is the coordinator's pipe
        threading.Thread(target=watch_stdin, daemon=True).start()
    for t in threads:
        t.join()
    sys.stdout.flush()
    if marker is not None:
        marker.release()
    os._exit(0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="netbench.worker")
    sub = parser.add_subparsers(dest="role", required=True)
    for role in ("agent", "rank"):
        p = sub.add_parser(role)
        p.add_argument("--store-addr", required=True)
        p.add_argument("--store-port", type=int, required=True)
        p.add_argument("--host", required=True)
        if role == "agent":
            p.add_argument("--rank-base", type=int, required=True)
            p.add_argument("--nprocs", type=int, required=True)
            p.add_argument(
                "--watch-stdin",
                action="store_true",
                help="stop the ranks when stdin closes (the coordinator is gone)",
            )
        else:
            p.add_argument("--rank", type=int, required=True)
            p.add_argument("--local-rank", type=int, default=0)
    args = parser.parse_args(argv)
    if args.role == "agent":
        _agent_main(args)
    else:
        _rank_main(args)


if __name__ == "__main__":
    main()
