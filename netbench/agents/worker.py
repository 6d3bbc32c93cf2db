"""Processes that run on each host: the per-host agent and the ranks it starts.

``python -m netbench.agents.worker agent ...`` is what a launcher starts on every host (locally through a
pipe, remotely through one SSH channel): it starts that host's ranks, forwards their protocol lines
on its own stdout, reports each rank's exit, and kills its ranks when its stdin closes (the
coordinator went away or was interrupted) or when it is signalled — so no rank outlives its run.
``python -m netbench.agents.worker rank ...`` is one rank: it joins the run's store and follows the plan.

The agent fetches its host's part of the plan from the store once (``launch.fetch_host_plan``) and
hands it to each rank on stdin, after the secret: a store serving 4,096 hosts of 8 ranks then sends
each host's part once, not once per rank. Rank stdin: the secret, the plan every host reads, the host's own
part, a line each.

The agent's ranks are forks of one process (``netbench.agents.zygote.Zygote``) that imported torch once,
so a rank starts in milliseconds, not seconds: ``python -m netbench.agents.worker rank`` is what the
external launchers (mpirun, srun, torchrun) start instead.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING

from netbench.agents.zygote import Forked, Zygote, set_name

if TYPE_CHECKING:
    from collections.abc import Callable

    from netbench.agents.launchers import HostPlanText
    from netbench.collectives.plan import WorkerPlan


def _read_secret_line() -> str:
    """The run's store secret, the first line of stdin (the agent's pipe; the coordinator's pipe
    for a local agent): never a command-line argument, which `ps` shows to every user."""
    line = sys.stdin.buffer.readline().decode("ascii", "replace").strip()
    if not line:
        sys.stderr.write("netbench.agents.worker: no store secret on stdin\n")
        os._exit(2)
    return line


def _read_plan_lines() -> HostPlanText:
    """The host's plan, the two lines after the secret (the agent writes them once it has fetched
    them); the agent closing stdin first means it could not fetch it, and said why on its stderr."""
    from netbench.agents.launchers import HostPlanText

    common = sys.stdin.buffer.readline()
    own = sys.stdin.buffer.readline()
    if not common.endswith(b"\n") or not own.endswith(b"\n"):
        sys.stderr.write("netbench.agents.worker: no plan on stdin (the agent could not fetch it)\n")
        os._exit(2)
    return HostPlanText(common.decode(), own.decode())


def _rank_main(args: argparse.Namespace) -> None:
    import torch.distributed as dist

    from netbench.agents.launchers import secured
    from netbench.collectives.rank import STORE_WAIT

    secret = _read_secret_line()
    raw = dist.TCPStore(
        args.store_addr, args.store_port, is_master=False, timeout=STORE_WAIT, wait_for_workers=False
    )
    plan = _read_plan_lines().plan()

    def open_store() -> object:  # a lane's own client (collectives/ahead.py)
        lane = dist.TCPStore(args.store_addr, args.store_port, is_master=False, wait_for_workers=False,
                             timeout=STORE_WAIT)
        return secured(lane, secret)

    run_rank(secured(raw, secret), args.store_addr, args.rank, args.local_rank, args.host, plan,
             first_phase=args.first_phase, open_store=open_store)
    sys.stdout.flush()
    os._exit(0)  # skip destructors of abandoned groups: they may wait for dead peers


def _forked_rank(argv: list[str]) -> None:
    """A rank the agent's zygote forked (``netbench.agents.zygote``): ``argv`` is the ``rank`` command's."""
    args = _parser().parse_args(argv)
    set_name(f"nb-rank-{args.rank}")
    _rank_main(args)


def run_rank(
    store: object, store_addr: str, rank: int, local_rank: int, host: str, plan: WorkerPlan | None = None,
    first_phase: int = 0, open_store: Callable[[], object] | None = None,
) -> None:
    """One rank's whole life once it has the store: say hello, follow the phases. ``plan``: its
    host's, as the agent handed it; None (ranks an external launcher started, no agent): the rank
    fetches its host's part itself. ``open_store``: a new client of the store for each lane that
    makes groups ahead (``RankContext.open_store``)."""
    import torch

    from netbench.agents.launchers import fetch_host_plan
    from netbench.collectives import messages
    from netbench.collectives.envinfo import (
        capabilities,
        collect_env,
        interface_of,
        local_address_towards,
    )
    from netbench.collectives.native import engine_unmet, plan_uses_native
    from netbench.collectives.rank import STORE_WAIT, RankContext, run_plan

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
        first_phase=first_phase,
        open_store=open_store,
    )
    run_plan(ctx)
    messages.emit("bye", rank=rank)


def _forward(agent: _Agent, proc: Forked, rank: int) -> None:
    from netbench.collectives import messages

    assert proc.stdout is not None
    for raw in proc.stdout:
        line = raw.decode("utf-8", "replace")
        if line.startswith(messages.PREFIX):
            with agent.lock:
                sys.stdout.write(line)
                sys.stdout.flush()
        else:
            sys.stderr.write(f"[rank {rank}] {line}")
    rc = proc.wait()
    with agent.lock:
        if agent.procs.get(rank) is proc:  # a rank the agent replaced says nothing: its exit was asked for
            messages.emit("exit", rank=rank, rc=rc)


class _PlanFetch(threading.Thread):
    """The host's part of the plan from the run's store, fetched once for every rank of the host.
    The store client stays: the agent reads the coordinator's requests from it (``_Agent.control``)."""

    def __init__(self, store_addr: str, store_port: int, secret: str, host: str) -> None:
        super().__init__(daemon=True, name="plan-fetch")
        self.store_addr, self.store_port, self.secret, self.host = store_addr, store_port, secret, host
        self.text: HostPlanText | None = None
        self.store: object | None = None

    def run(self) -> None:
        try:
            import torch.distributed as dist

            from netbench.agents.launchers import fetch_host_plan, secured
            from netbench.collectives.rank import STORE_WAIT

            raw = dist.TCPStore(
                self.store_addr, self.store_port, is_master=False, timeout=STORE_WAIT, wait_for_workers=False
            )
            self.store = secured(raw, self.secret)
            self.text = fetch_host_plan(self.store, self.host, STORE_WAIT)
        except Exception as exc:  # noqa: BLE001 - the ranks find no plan and exit; the coordinator names them
            why = f"{type(exc).__name__}: {exc}"
            sys.stderr.write(f"netbench.agents.worker: cannot fetch {self.host}'s plan: {why}\n")


def _hand_over(proc: Forked, secret: str, fetched: _PlanFetch) -> None:
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


def _stopped(pid: int) -> bool:
    """The process is stopped (SIGSTOP, a debugger): state T or t in /proc (Linux; elsewhere never)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] in (b"T", b"t")
    except (OSError, IndexError):
        return False


class _Agent:
    """One host's agent: its ranks' processes, their forwarding, and the coordinator's requests.

    Every ``messages.HEARTBEAT_S`` it says it is alive, naming any of its ranks that is stopped: a
    group that stalls is then pinned on a host that stopped answering or a rank that stopped, and
    the ranks that were only waiting on them are not taken for hung. A rank the coordinator gives
    up on (its group stalled) is restarted from the next phase on request (``ctl/<host>`` in the
    store): killing it is the one way to free it from an operation that will not return soon, and a
    fresh process costs a few seconds where a drained host cost all of its pairs."""

    def __init__(self, args: argparse.Namespace, secret: str, zygote: Zygote) -> None:
        from netbench.agents.marker import RunMarker
        from netbench.agents.reach import listen

        self.args, self.secret, self.zygote = args, secret, zygote
        self.procs: dict[int, Forked] = {}
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.readers: list[threading.Thread] = []
        self.replacing = 0  # ranks between their kill and their new process: the agent is not done
        self.fetched = _PlanFetch(args.store_addr, args.store_port, secret, args.host)
        # held for the run's life: another run's inventory on this host finds it (launch/marker.py)
        self.marker = RunMarker.hold(f"{args.store_addr}:{args.store_port}")
        # named in each heartbeat: the coordinator connects to it when a group of this host's stalls
        self.reach = listen(args.store_addr)

    def start_rank(self, local: int, first_phase: int = 0) -> None:
        rank = self.args.rank_base + local
        proc = self.zygote.start(["rank", "--store-addr", self.args.store_addr, "--store-port",
                                  str(self.args.store_port), "--rank", str(rank), "--local-rank", str(local),
                                  "--host", self.args.host, "--first-phase", str(first_phase)])
        with self.lock:
            self.procs[rank] = proc
        # a thread per rank: a write blocks until that rank reads, and the ranks read in any order
        threading.Thread(target=_hand_over, args=(proc, self.secret, self.fetched), daemon=True).start()
        reader = threading.Thread(target=_forward, args=(self, proc, rank), daemon=True)
        reader.start()
        self.readers.append(reader)

    def stop(self, *_: object) -> None:
        if self.stopping.is_set():
            return
        self.stopping.set()
        procs = list(self.procs.values())
        for p in procs:
            if p.poll() is None:
                p.terminate()
        deadline = time.monotonic() + 3  # a wall clock stepped back must not stretch the wait
        for p in procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
        if self.marker is not None:
            self.marker.release()
        os._exit(143)

    def control(self) -> None:
        """The heartbeat, and the restarts the coordinator asks for (``ctl/<host>``: a generation
        and {rank: first phase}; each generation is applied once)."""

        from netbench.collectives import messages

        key, applied = f"ctl/{self.args.host}", 0
        self.fetched.join()
        store = self.fetched.store
        while not self.stopping.wait(messages.HEARTBEAT_S):
            with self.lock:
                stopped = [r for r, p in self.procs.items() if p.poll() is None and _stopped(p.pid)]
                messages.emit("alive", host=self.args.host, stopped=stopped, **self.reach)
            if store is None:
                continue
            try:
                if not store.check([key]):
                    continue
                ask = json.loads(store.get(key).decode())
            except Exception:  # noqa: BLE001 - the store went away: the coordinator ends this agent
                continue
            if int(ask.get("gen", 0)) <= applied:
                continue
            applied = int(ask["gen"])
            for rank_text, first_phase in ask.get("restart", {}).items():
                self.restart(int(rank_text), int(first_phase))

    def restart(self, rank: int, first_phase: int) -> None:
        from netbench.collectives import messages

        old = self.procs.get(rank)
        local = rank - self.args.rank_base
        if old is None or not 0 <= local < self.args.nprocs or self.stopping.is_set():
            return
        with self.lock:
            self.procs.pop(rank)  # its reader stays quiet about the exit
            self.replacing += 1
        try:
            old.kill()
            old.wait()
            with self.lock:
                messages.emit("restarted", rank=rank, phase=first_phase)
            self.start_rank(local, first_phase)
        finally:
            with self.lock:
                self.replacing -= 1


def _agent_main(args: argparse.Namespace) -> None:
    from netbench.agents.launchers import SECRET_ENV

    # local: the first line of the coordinator's pipe; SSH: the remote wrapper read it off the
    # channel into the environment, from where it goes no further (the ranks get it on stdin)
    secret = _read_secret_line() if args.watch_stdin else os.environ.pop(SECRET_ENV, "")
    if not secret:
        sys.stderr.write("netbench.agents.worker: no store secret\n")
        os._exit(2)
    import torch.distributed  # noqa: F401 - once for the host: the store client, and every rank (Zygote)

    zygote = Zygote(_forked_rank)  # before any thread or file of the agent's
    threading.Thread(target=zygote.listen, daemon=True, name="zygote").start()
    agent = _Agent(args, secret, zygote)
    signal.signal(signal.SIGTERM, agent.stop)
    signal.signal(signal.SIGHUP, agent.stop)
    signal.signal(signal.SIGINT, agent.stop)
    agent.fetched.start()  # alongside the ranks' start: each waits for it on its stdin
    if agent.marker is not None:
        threading.Thread(target=agent.marker.name_run, args=(agent.fetched,), daemon=True).start()
    for local in range(args.nprocs):
        agent.start_rank(local)
    threading.Thread(target=agent.control, daemon=True, name="control").start()

    def watch_stdin() -> None:
        try:
            while sys.stdin.buffer.read(4096):
                pass
        except (OSError, ValueError):
            pass
        agent.stop()

    if args.watch_stdin:  # local launcher: our stdin is the coordinator's pipe
        threading.Thread(target=watch_stdin, daemon=True).start()
    while True:  # until every rank, restarted ones included, has ended
        with agent.lock:
            running = [p for p in agent.procs.values() if p.poll() is None]
            replacing = agent.replacing
        if running:
            running[0].wait()
        elif replacing:
            time.sleep(0.05)
        else:
            break
    for reader in list(agent.readers):
        reader.join(timeout=5)
    sys.stdout.flush()
    if agent.marker is not None:
        agent.marker.release()
    os._exit(0)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="netbench.agents.worker")
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
            p.add_argument("--first-phase", type=int, default=0,
                           help="skip the phases before this one (a rank its agent restarted)")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    if args.role == "agent":
        _agent_main(args)
    else:
        _rank_main(args)


if __name__ == "__main__":
    main()
