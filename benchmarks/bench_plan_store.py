"""Benchmark: the plan through the run's store, from the coordinator's publish to the first phase.

The real ``Coordinator`` opens its real TCPStore, publishes the plan and waits for every rank's hello
before it releases phase 0. Its hosts are simulated agents: ``--procs`` client processes, each many
real TCPStore clients (a connection per agent, or per rank before), that fetch the plan as agents
and ranks do and then say hello for their host's ranks on their stdout, which the launcher hands to
the coordinator as each host's agent output. Measured: the store's bytes served (every byte a client
read back, counted by a wrapper around its store), the most one agent or rank read, the time to the
release of phase 0 (the coordinator's ``before_phase``, then the run is stopped), the publish alone.

- ``--mode after``: each agent fetches its host's part once (``launch.fetch_host_plan``, two keys);
  its ranks would get it on stdin, so they read nothing from the store.
- ``--mode before``: main's protocol before this change: the coordinator stores the whole plan
  (``put_text(store, "plan", plan.json_chunks())``) and each rank reads it whole
  (``get_text(store, "plan", ...)``), a client per rank.

Simulated agents and ranks fetch and do not parse: parsing is each node's own CPU, in parallel on
real hosts, while here it would queue on this machine's cores; each client process parses its first
host's plan to check what it fetched. The plan: ``netbench simulate``'s fat tree (names, leaves), 8
ranks a host, ring + pairwise (``sweep --hosts``'s default patterns), nccl.

    python benchmarks/bench_plan_store.py --hosts 4096 --mode after [--procs 4]
    python benchmarks/bench_plan_store.py --hosts 128 --mode before
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import queue
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

WAIT = _dt.timedelta(seconds=600)


# -- the client processes: simulated agents (after) or ranks (before) -----------------------------------
class CountingStore:
    """A store client counting every byte its reads bring back."""

    def __init__(self, store: Any) -> None:
        self.store, self.read = store, 0

    def get(self, key: str) -> bytes:
        value = self.store.get(key)
        self.read += len(value)
        return value

    def wait(self, keys: list[str], timeout: Any) -> None:
        self.store.wait(keys, timeout)


def client_main() -> None:
    """stdin: a JSON line (address, port, secret, mode), then a line per host: "host rank_base nprocs".
    stdout: "host<TAB>protocol line" for each hello, "#read host bytes most" once a host has fetched."""
    import torch.distributed as dist
    from netbench.collectives.messages import PREFIX
    from netbench.collectives.plan import WorkerPlan

    from netbench.agents.launchers import fetch_host_plan, get_text, secured

    setup = json.loads(sys.stdin.readline())
    lock = threading.Lock()
    held: list[Any] = []  # every connection stays open, as agents' and ranks' do while they run
    checked = threading.Event()

    def connect() -> CountingStore:
        raw = dist.TCPStore(setup["addr"], setup["port"], is_master=False, timeout=WAIT,
                            wait_for_workers=False)
        with lock:
            held.append(raw)
        return CountingStore(secured(raw, setup["secret"]))

    def one(host: str, base: int, nprocs: int) -> None:
        reads = []
        if setup["mode"] == "after":  # the agent, once for its ranks
            store = connect()
            text = fetch_host_plan(store, host, WAIT)
            reads.append(store.read)
            if not checked.is_set():
                checked.set()
                mine = text.plan()
                assert any(host in g.hosts for p in mine.phases for g in p.groups), host
        else:  # every rank, the whole plan
            for _ in range(nprocs):
                store = connect()
                whole = get_text(store, "plan", WAIT)
                reads.append(store.read)
                if not checked.is_set():
                    checked.set()
                    WorkerPlan.from_json(whole)
        out = [f"#read {host} {sum(reads)} {max(reads)}\n"]
        for rank in range(base, base + nprocs):
            hello = {"type": "hello", "rank": rank, "host": host, "addr": "127.0.0.1", "iface": "lo",
                     "caps": {"cuda_available": True}}
            out.append(f"{host}\t{PREFIX}{json.dumps(hello)}\n")
        with lock:
            sys.stdout.write("".join(out))
            sys.stdout.flush()

    with ThreadPoolExecutor(max_workers=32) as pool:  # store calls release the GIL: fetches overlap
        futures = []
        for line in sys.stdin:
            host, base, nprocs = line.split()
            futures.append(pool.submit(one, host, int(base), int(nprocs)))
        for f in futures:
            f.result()
    os._exit(0)


# -- the coordinator's side ------------------------------------------------------------------------------
class FirstPhase(Exception):
    """Raised by ``before_phase`` at phase 0: every rank said hello, the phase would be released."""


class BenchAgent:
    """A simulated host's agent output (``launch.AgentProcess``)."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.q: queue.Queue[str | None] = queue.Queue()
        self._rc: int | None = None

    def lines(self) -> Iterator[str]:
        while (line := self.q.get()) is not None:
            yield line
        self._rc = 0

    def terminate(self) -> None:
        self.q.put(None)

    def returncode(self) -> int | None:
        return self._rc


class BenchLauncher:
    """``launch.Launcher`` whose agents live in ``procs`` client processes, assigned round-robin."""

    name = "bench"

    def __init__(self, procs: int, mode: str) -> None:
        self.procs, self.mode = procs, mode
        self.clients: list[subprocess.Popen] = []
        self.agents: dict[str, BenchAgent] = {}
        self.reads: dict[str, tuple[int, int]] = {}
        self._lock = threading.Lock()
        self._next = 0
        self._readers: list[threading.Thread] = []

    def store_host(self) -> tuple[str, str]:
        return "127.0.0.1", "127.0.0.1"

    def start(self, slot: Any, store_addr: str, store_port: int, secret: str) -> BenchAgent:
        with self._lock:
            if not self.clients:
                # the secret on the clients' stdin, never their command line (launch's threat model)
                setup = json.dumps({"addr": store_addr, "port": store_port, "secret": secret,
                                    "mode": self.mode})
                for _ in range(self.procs):
                    proc = subprocess.Popen([sys.executable, __file__, "--client"], stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, text=True, bufsize=1)
                    assert proc.stdin is not None
                    proc.stdin.write(setup + "\n")
                    self.clients.append(proc)
                    reader = threading.Thread(target=self._read, args=(proc,), daemon=True)
                    reader.start()
                    self._readers.append(reader)
            agent = self.agents[slot.host] = BenchAgent(slot.host)
            proc = self.clients[self._next % self.procs]
            self._next += 1
            assert proc.stdin is not None
            proc.stdin.write(f"{slot.host} {slot.rank_base} {slot.nprocs}\n")
        return agent

    def _read(self, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("#read "):
                _, host, total, most = line.split()
                self.reads[host] = (int(total), int(most))
            else:
                host, text = line.split("\t", 1)
                self.agents[host].q.put(text)

    def close(self) -> None:
        for proc in self.clients:
            assert proc.stdin is not None
            proc.stdin.close()
        for proc in self.clients:
            proc.wait(timeout=600)
        for reader in self._readers:
            reader.join(60)


def run(hosts: int, leaves: int, ranks: int, mode: str, procs: int) -> dict[str, Any]:
    import netbench.agents.coordinator as coordinator
    from netbench.agents.coordinator import Coordinator
    from netbench.agents.launchers import HostSlot, put_text
    from netbench.run.options import MeasureOptions
    from netbench.run.planner import PlanRequest, build_plan
    from netbench.sim.fabric import Fabric, FabricSpec

    fab = Fabric.build(FabricSpec(nodes=hosts, leaves=leaves))
    slots = [HostSlot(host=h, nprocs=ranks, rank_base=ranks * i) for i, h in enumerate(fab.hosts)]
    req = PlanRequest(measure=MeasureOptions(collectives=["all_reduce"]), patterns=["ring", "pairwise"],
                      switches=fab.uplinks())
    t0 = time.monotonic()
    plan = build_plan(req, "bench", slots, "nccl")
    build_s = time.monotonic() - t0
    plan_bytes = sum(len(piece.encode()) for piece in plan.json_chunks())
    timing: dict[str, float] = {}
    publish = coordinator.publish_plan

    def timed_publish(store: Any, plan: Any) -> None:
        t = time.monotonic()
        if mode == "after":
            publish(store, plan)
        else:  # main's coordinator: the whole plan under one key, in pieces
            put_text(store, "plan", plan.json_chunks())
        timing["publish_s"] = time.monotonic() - t

    def first_phase(phase: Any) -> bool:
        timing["first_phase_s"] = time.monotonic() - t_run
        raise FirstPhase

    coordinator.publish_plan = timed_publish  # type: ignore[assignment]
    launcher = BenchLauncher(procs, mode)
    coord = Coordinator(plan, slots, launcher, on_row=lambda _: None, fail_fast=False,
                        before_phase=first_phase)
    t_run = time.monotonic()
    try:
        coord.run()
    except FirstPhase:
        pass
    finally:
        coordinator.publish_plan = publish  # type: ignore[assignment]
        launcher.close()
    faults = [f.message for f in coord.outcome.faults]
    read = list(launcher.reads.values())
    return {
        "hosts": hosts, "ranks": hosts * ranks, "mode": mode, "plan_MB": plan_bytes / 1e6, "build_s": build_s,
        "publish_s": timing.get("publish_s"), "first_phase_s": timing.get("first_phase_s"),
        "served_MB": sum(t for t, _ in read) / 1e6, "hosts_read": len(read),
        "most_one_MB": max((m for _, m in read), default=0) / 1e6,
        "rss_GB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, "faults": faults[:3],
    }


def main() -> None:
    if sys.argv[1:] == ["--client"]:
        client_main()
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", default="4096", help="host counts, comma-separated")
    ap.add_argument("--leaves", type=int, default=0, help="leaf switches (default: hosts / 32)")
    ap.add_argument("--ranks", type=int, default=8, help="ranks a host")
    ap.add_argument("--mode", choices=("after", "before"), default="after")
    ap.add_argument("--procs", type=int, default=4, help="client processes the simulated hosts live in")
    args = ap.parse_args()
    print("| hosts | ranks | mode | plan MB | store served MB | served / plan | most one agent/rank MB "
          "| publish s | to phase 0 s | build_plan s | coordinator peak RSS GB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for n in (int(x) for x in args.hosts.split(",")):
        r = run(n, args.leaves or max(2, n // 32), args.ranks, args.mode, args.procs)
        print(f"| {r['hosts']} | {r['ranks']} | {r['mode']} | {r['plan_MB']:.1f} | {r['served_MB']:.1f} "
              f"| {r['served_MB'] / r['plan_MB']:.2f} | {r['most_one_MB']:.3f} | {r['publish_s']:.1f} "
              f"| {r['first_phase_s']:.1f} | {r['build_s']:.1f} | {r['rss_GB']:.2f} |", flush=True)
        if r["faults"] or r["hosts_read"] != n:
            print(f"#   {r['hosts_read']} hosts read; faults: {r['faults']}", flush=True)


if __name__ == "__main__":
    main()
