"""A launcher whose hosts are a simulated fabric: the real coordinator, the real plan, simulated ranks.

``SimLauncher`` implements ``netbench.agents.launchers.Launcher``. The coordinator opens its rendezvous store,
publishes the plan and releases the phases exactly as for SSH hosts; each host's "agent" is a
``SimAgent`` whose stdout lines are the protocol lines real ranks print (hello, env, row,
group_done, group_error, bye, exit). One driver thread per launch plays every rank: it reads every
host's part of the plan (the keys of ``launch.fetch_host_plan``) and each phase's release (``go/N``)
from the store as agents and ranks do, runs the released groups at once on the fabric
(``fabric.Fabric.flow_rates``: the flows of a phase share links max-min fairly) and turns each
group's rate into rows with ``sim.measure._measure``, the same rows ``netbench simulate`` writes. So the
phase gate, the down-host bookkeeping and the failed-group rows are the coordinator's own.

Time is the fabric's, on a ``SimClock``: a launch costs the SSH fan-out and rank start-up of
``LaunchCosts`` (figures measured on the namespaced test network), a phase the simulated time of its
slowest group, communicator set-up included (``sim.setup``). A GPU that drops out (``gpu:NAME``)
fails the rank on it at its first collective, as after an Xid 79: that rank exits with code 1 and
the other ranks of the group report an NCCL error, and the coordinator records it as it records a
real one.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from netbench import __version__
from netbench.agents.launchers import PLAN_KEY, HostSlot, get_text, host_plan_key
from netbench.collectives.messages import PREFIX
from netbench.collectives.plan import GroupSpec, Phase, WorkerPlan
from netbench.sim.fabric import Fabric
from netbench.sim.measure import _flows, _measure, _note_effects, _rates
from netbench.sim.rails import RailFabric
from netbench.sim.setup import Lanes

if TYPE_CHECKING:
    from netbench.sim.options import SimOptions

CHUNK = 64  # groups whose lines are handed over together (SimLauncher._handed_over)
HANDOVER_S = 30.0  # a reader that stopped (the coordinator rejected a host) is not waited for longer
STORE_TIMEOUT = _dt.timedelta(hours=1)  # the driver waits for releases as long as the coordinator lives
#: what NCCL tells the other ranks of a group whose peer died (ncclRemoteError)
PEER_LOST = "DistBackendError: NCCL error: remote process exited or there was a network error"
CAPS = {"cuda_available": True}  # a hello's capabilities: a CUDA build that sees its GPUs
GPU_LOST = "CUDA error: unspecified launch failure (Xid 79: GPU has fallen off the bus)"
#: simulated ranks never hang, but thousands of groups' lines take this machine a while to deliver,
#: and the coordinator judges silence on this machine's clock: a phase must not look hung for that
MIN_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class LaunchCosts:
    """What reaching N hosts costs, from terms measured on the namespaced test network by
    ``benchmarks/bench_preflight.py`` (benchmarks/README.md, "Preflight", 2026-11-29, 2-core VM):
    one inventory wave 0.36 s and 8.5 ms collector CPU a host; an SSH handshake 24 ms (5.2 ms CPU);
    rank start-up 5.4 s (torch imported by every rank; on 2 shared cores, so a pessimistic figure
    for real nodes, which import in parallel). 64 SSH sessions in flight, as the launcher does."""

    concurrency: int = 64
    inventory_wave_s: float = 0.36
    inventory_cpu_per_host_s: float = 0.0085
    handshake_s: float = 0.024
    handshake_cpu_s: float = 0.0052
    rank_startup_s: float = 5.4

    def inventory_s(self, hosts: int) -> float:
        """Probing every host: waves of ``concurrency`` at once, or the collector's CPU if longer."""
        waves = math.ceil(hosts / self.concurrency)
        return max(waves * self.inventory_wave_s, hosts * self.inventory_cpu_per_host_s)

    def launch_s(self, hosts: int) -> float:
        """SSH fan-out to every host, then the ranks' start-up (imports, rendezvous)."""
        waves = math.ceil(hosts / self.concurrency)
        return max(waves * self.handshake_s, hosts * self.handshake_cpu_s) + self.rank_startup_s


class SimClock:
    """Fabric time in seconds: moves only when the simulation says time passed (a launch, a phase)."""

    def __init__(self) -> None:
        self._t = 0.0
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._t

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._t += seconds


@dataclass
class SimHosts:
    """The simulated hosts every launch of one run reaches: their fabric, measurement noise, clock,
    and what happened to them so far (a GPU that dropped out stays out in the next launch)."""

    fabric: Fabric | RailFabric
    opts: SimOptions
    clock: SimClock = field(default_factory=SimClock)
    costs: LaunchCosts = field(default_factory=LaunchCosts)
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))
    worst: dict[int, float] = field(default_factory=dict)
    """Fault index -> the lowest faulty/healthy rate it caused (what truth.json's observability is)."""
    slow_phases: dict[str, int] = field(default_factory=dict)
    """Intermittent node -> pair phases it was slow in."""

    def __post_init__(self) -> None:
        self.dropped = {f.subject for f in self.fabric.faults if f.kind == "gpu"}
        self.intermittent = [f for f in self.fabric.faults if f.kind == "intermittent"]

    def launcher(self, hosts: list[str]) -> SimLauncher:
        return SimLauncher(self, len(hosts))

    def slow_now(self, phase: Phase) -> frozenset[str]:
        """Intermittent nodes slow in this phase: in pair phases, each with its fault's probability."""
        if not phase.groups or phase.groups[0].round is None:
            return frozenset()
        slow = frozenset(f.subject for f in self.intermittent if self.rng.random() < f.fraction)
        for h in slow:
            self.slow_phases[h] = self.slow_phases.get(h, 0) + 1
        return slow


class SimAgent:
    """One host's agent (``netbench.agents.launchers.AgentProcess``): the lines its ranks would print."""

    def __init__(self, slot: HostSlot) -> None:
        self.host = slot.host
        self.slot = slot
        self._q: queue.Queue[str | None] = queue.Queue()
        self._rc: int | None = None
        self._final_rc = 0
        self._lock = threading.Lock()
        self.stopped = False
        for rank in slot.ranks:  # every rank says hello; the host's first one sends the environment
            self.say("hello", rank=rank, host=self.host, addr="127.0.0.1", iface="sim", caps=CAPS)
        self.say("env", host=self.host, info={"netbench": __version__, "simulated": True})

    def say(self, msg_type: str, **fields: Any) -> None:
        with self._lock:
            if not self.stopped:
                self._q.put(PREFIX + json.dumps({"type": msg_type, **fields}) + "\n")

    def end(self, rc: int) -> None:
        """The agent's output ends; its exit status is ``rc`` once the reader has seen the end."""
        with self._lock:
            if not self.stopped:
                self.stopped, self._final_rc = True, rc
                self._q.put(None)

    def pending(self) -> int:
        """Lines not read yet by the coordinator."""
        return self._q.qsize()

    def lines(self) -> Iterator[str]:
        while (line := self._q.get()) is not None:
            yield line
        self._rc = self._final_rc

    def terminate(self) -> None:
        self.end(-15)

    def returncode(self) -> int | None:
        return self._rc

    def end_reason(self) -> str | None:
        return None  # a simulated host ends as its fabric says, in its own lines


class SimLauncher:
    """``netbench.agents.launchers.Launcher`` for simulated hosts: see the module docstring."""

    name = "simulated"

    def __init__(self, sim: SimHosts, hosts: int) -> None:
        self.sim, self.hosts = sim, hosts
        self.agents: dict[str, SimAgent] = {}
        self._by_rank: dict[int, SimAgent] = {}
        self._lock = threading.Lock()
        self._driver: threading.Thread | None = None

    def store_host(self) -> tuple[str, str]:
        return "127.0.0.1", "127.0.0.1"

    def start(self, slot: HostSlot, store_addr: str, store_port: int, secret: str) -> SimAgent:
        with self._lock:
            if self._driver is None:  # the launch's cost is paid once, when the fan-out begins
                self.sim.clock.advance(self.sim.costs.launch_s(self.hosts))
                self._driver = threading.Thread(
                    target=self._drive, args=(store_addr, store_port, secret), daemon=True, name="sim-ranks"
                )
                self._driver.start()
            agent = self.agents[slot.host] = SimAgent(slot)
            self._by_rank.update(dict.fromkeys(slot.ranks, agent))
        return agent

    # -- the ranks -----------------------------------------------------------------------------------
    def _drive(self, addr: str, port: int, secret: str) -> None:
        """Follow the plan's phases as ranks do; when the coordinator goes away, the agents end. A
        fault of the simulation itself is not caught: its traceback shows, and the run's groups hang."""
        try:
            store = self._connect(addr, port, secret)
            plan = self._plan(store) if store is not None else None
            lanes = Lanes(plan.ahead, self.sim.opts.ahead_slowdown) if plan is not None else None
            for phase in plan.phases if plan is not None else []:
                go = self._wait(store, f"go/{phase.index}")
                if go is None:
                    break
                # the release lists the groups in the plan's order; the parts put pairs in host order
                order = {gid: k for k, gid in enumerate(json.loads(go.decode()))}
                groups = sorted((g for g in phase.groups if g.id in order), key=lambda g: order[g.id])
                self._phase(plan, phase, groups, lanes)
        finally:
            with self._lock:
                agents = list(self.agents.values())
            for agent in agents:
                for rank in agent.slot.ranks:
                    agent.say("bye", rank=rank)
                    agent.say("exit", rank=rank, rc=0)
                agent.end(0)

    @staticmethod
    def _connect(addr: str, port: int, secret: str) -> Any:
        import torch.distributed as dist

        from netbench.agents.launchers import secured

        try:
            return secured(dist.TCPStore(addr, port, is_master=False, timeout=STORE_TIMEOUT), secret)
        except RuntimeError:  # the coordinator already stopped listening
            return None

    @staticmethod
    def _plan(store: Any) -> WorkerPlan | None:
        """Every host's plan as its agent fetches it (what every host reads, once here, and the host's
        own part), put together: the driver plays every rank. None once the store is gone."""
        try:
            common = get_text(store, PLAN_KEY, STORE_TIMEOUT)
            hosts = json.loads(common)["hosts"]
            own = (get_text(store, host_plan_key(h), STORE_TIMEOUT) for h in hosts)
            return WorkerPlan.from_parts(common, own)
        except RuntimeError:  # torch's DistStoreError: the coordinator is done with us
            return None

    @staticmethod
    def _wait(store: Any, key: str) -> bytes | None:
        """The key's value once set, as ranks wait for it; None once the store is gone."""
        try:
            store.wait([key], STORE_TIMEOUT)
            return store.get(key)
        except RuntimeError:  # torch's DistStoreError: the coordinator is done with us
            return None

    def _phase(self, plan: WorkerPlan, phase: Phase, groups: list[GroupSpec], lanes: Lanes) -> None:
        """Run a phase's released groups at once on the fabric; the clock moves by its slowest group."""
        sim = self.sim
        failing = [g for g in groups if set(g.hosts) & sim.dropped]
        running = [g for g in groups if not set(g.hosts) & sim.dropped]
        slow_now = sim.slow_now(phase)
        flows = _flows(running, sim.fabric, sim.opts.fabric.gpus)
        group_rate = flows.group_rates(_rates(sim.fabric, flows, slow_now), len(running))
        if flows.a.size:  # what each pair measurement lost to faults (a slow ring names no node: not counted)
            healthy = flows.group_rates(_rates(sim.fabric, flows, slow_now, faults=False), len(running))
            pair = np.array([len(g.hosts) == 2 for g in running])[flows.owner]
            ratio = (group_rate / healthy)[flows.owner][pair]
            _note_effects(sim.fabric, flows.subset(pair), ratio, slow_now, sim.worst)
        measured = _measure(plan, phase, running, group_rate, sim.opts, sim.rng, lanes, sim.clock())
        sim.clock.advance(float(measured.seconds.max(initial=0.0)))
        touched: set[SimAgent] = set()
        for k, (grp, rows, seconds) in enumerate(zip(running, measured.rows_of(), measured.seconds.tolist(),
                                                      strict=True)):
            if k % CHUNK == 0:
                self._handed_over(touched)
            first = self.agents[grp.hosts[0]]
            for row in rows:
                # a rank does not know its pair's load and hop class: the coordinator writes the plan's
                row.load = row.hop_class = None
                first.say("row", row=row.to_dict(), phase=phase.index)
            for rank in grp.ranks:
                agent = self._agent_of(rank)
                agent.say(
                    "group_done", rank=rank, phase=phase.index, group=grp.id, seconds=seconds,
                    setup_s=measured.setup_s, wait_s=measured.wait_s,
                )
                touched.add(agent)
        for grp in failing:
            self._gpu_lost(phase, grp)

    def _handed_over(self, agents: set[SimAgent]) -> None:
        """Wait until the coordinator has read every line ``agents`` were given so far. Real ranks
        report over a phase as their groups end; lines dumped for thousands of groups at once would
        queue behind one another in the coordinator's reader threads, and a group whose first host
        was read long before its second would be judged hung (GRACE_S) for this simulation's sake."""
        deadline = time.monotonic() + HANDOVER_S
        while any(a.pending() for a in agents) and time.monotonic() < deadline:
            time.sleep(0.002)
        agents.clear()

    def _gpu_lost(self, phase: Phase, grp: GroupSpec) -> None:
        """The rank on the lost GPU (its host's last) dies; the group's other ranks see NCCL fail."""
        dead = {self.agents[h].slot.ranks[-1] for h in grp.hosts if h in self.sim.dropped}
        for rank in grp.ranks:
            agent = self._agent_of(rank)
            error = GPU_LOST if rank in dead else PEER_LOST
            agent.say("group_error", rank=rank, phase=phase.index, group=grp.id, kind="error", error=error)
            if rank in dead:
                agent.say("exit", rank=rank, rc=1)

    def _agent_of(self, rank: int) -> SimAgent:
        return self._by_rank[rank]
