"""The coordinator: hosts the rendezvous store, starts one agent per host, releases the plan's
phases one at a time, and turns the ranks' messages into rows on disk.

It is the only process that writes the run directory, so a rank or host that dies can never damage
what was measured: every row is fsync'd as it arrives. Faults are judged here:
- a rank that exits before its plan ends is named at once (its host is marked down);
- a group that reports nothing for ``op_timeout + grace`` seconds is declared hung, and the ranks
  that never reported are named;
- with ``fail_fast`` (one local run) the first fault ends the run; otherwise (a cluster sweep) the
  fault costs only the groups of the host concerned and the next phase goes on without it.
"""

from __future__ import annotations

import datetime as _dt
import json
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from netbench.collectives import messages
from netbench.collectives.ops import get_collective
from netbench.collectives.plan import GroupSpec, Phase, WorkerPlan
from netbench.common.rows import failed_row
from netbench.launch import AgentProcess, HostSlot, Launcher

GRACE_S = 3.0  # after some ranks of a group report failure, how long the silent ones get
START_TIMEOUT_S = 120.0
START_CONCURRENCY = 64  # agents started at once


@dataclass
class Fault:
    kind: str  # exit | hang | error | timeout | start
    message: str
    host: str | None = None
    rank: int | None = None


@dataclass
class Outcome:
    status: str  # completed | failed | interrupted
    faults: list[Fault] = field(default_factory=list)
    rows: int = 0
    env: dict[str, dict[str, Any]] = field(default_factory=dict)
    down_hosts: set[str] = field(default_factory=set)
    startup_s: float | None = None  # launch until every rank joined (imports, rendezvous)
    phases: list[dict[str, Any]] = field(default_factory=list)  # name, groups, seconds of each phase


def count_points(phase: Phase, group: GroupSpec) -> int:
    """How many rows a group of a phase will produce (for progress and for nothing else)."""
    from netbench.collectives.dtypes import get_dtype

    n, esize, total = len(group.ranks), get_dtype(phase.spec.dtype).size, 0
    for cname in phase.spec.collectives:
        coll = get_collective(cname)
        sizes = {coll.layout(s, esize, n).nbytes for s in phase.spec.sizes} - {0}
        modes = [ip for ip in phase.spec.in_place if (coll.in_place if ip else coll.out_of_place)]
        total += len(sizes) * len(modes)
    return total


class Coordinator:
    def __init__(
        self,
        plan: WorkerPlan,
        slots: list[HostSlot],
        launcher: Launcher,
        on_row: Callable[[dict[str, Any]], None],
        on_progress: Callable[[int, int, str], None] | None = None,
        on_note: Callable[[str], None] | None = None,
        fail_fast: bool = True,
        store: Any = None,
        before_phase: Callable[[Phase], bool] | None = None,
    ):
        self.plan = plan
        self.slots = slots
        self.launcher = launcher
        self.on_row = on_row
        self.on_progress = on_progress or (lambda *_: None)
        self.on_note = on_note or (lambda *_: None)
        self.fail_fast = fail_fast
        # asked before each phase; False skips it (released empty: ranks pass through). Preflight's budget.
        self.before_phase = before_phase
        self.store = store  # given: ranks were started by mpirun/torchrun/srun around an existing store
        self.rank_host = {r: s.host for s in slots for r in s.ranks}
        self.agents: dict[str, AgentProcess] = {}
        self._lock = threading.Lock()
        self.q: queue.Queue[tuple[str, dict[str, Any] | None]] = queue.Queue()
        self.outcome = Outcome(status="completed")
        self.total = sum(count_points(p, g) for p in plan.phases for g in p.groups)
        self.done_points = 0
        self.finished_ranks: set[int] = set()

    # -- plumbing ------------------------------------------------------------------------------
    def _pump(self, host: str, agent: AgentProcess) -> None:
        try:
            for line in agent.lines():
                msg = messages.parse(line)
                if msg is not None:
                    self.q.put((host, msg))
        except Exception as exc:  # noqa: BLE001 - a broken channel is a host fault, reported below
            self.q.put((host, {"type": "agent_error", "error": str(exc)}))
        self.q.put((host, None))

    def _fault(self, kind: str, message: str, host: str | None = None, rank: int | None = None) -> None:
        self.outcome.faults.append(Fault(kind, message, host, rank))
        self.on_note(message)

    def _host_down(self, host: str, why: str, rank: int | None = None, kind: str = "exit") -> None:
        with self._lock:  # agents start from several threads
            if host in self.outcome.down_hosts:
                return
            self.outcome.down_hosts.add(host)
            self._fault(kind, why, host, rank)
        agent = self.agents.get(host)
        if agent is not None:
            threading.Thread(target=agent.terminate, daemon=True).start()

    def _handle(self, host: str, msg: dict[str, Any] | None, state: dict[str, Any]) -> None:
        """Apply one message to the phase state. ``state`` holds the running phase's bookkeeping."""
        if msg is None:  # the agent's stdout closed
            if not state.get("finishing") and host not in self.outcome.down_hosts:
                ranks = [r for r in self._slot(host).ranks if r not in self.finished_ranks]
                if ranks:
                    self._host_down(
                        host, f"host {host}: agent ended before its ranks finished (ranks {ranks})"
                    )
            return
        kind = msg.get("type")
        now = time.monotonic()
        if kind == "row":
            row = msg["row"]
            self.on_row(row)
            self.outcome.rows += 1
            self.done_points += 1
            state.setdefault("activity", {})[row.get("group")] = now
            self.on_progress(
                self.done_points,
                self.total,
                f"{row.get('collective')} {row.get('bytes')} B {row.get('pattern')}",
            )
        elif kind == "step":
            state.setdefault("activity", {})[msg.get("group")] = now
        elif kind == "env":
            self.outcome.env[msg.get("host", host)] = msg.get("info", {})
        elif kind == "hello":
            state.setdefault("hello", set()).add(msg.get("rank"))
        elif kind in ("group_done", "group_error"):
            if msg.get("setup_s") is not None:  # group creation (rendezvous + connections), for run.json
                state["setup_s"] = max(state.get("setup_s", 0.0), float(msg["setup_s"]))
                state["group_s"] = max(state.get("group_s", 0.0), float(msg.get("seconds") or 0.0))
            gid, rank = msg.get("group"), msg.get("rank")
            state.setdefault("reported", {}).setdefault(gid, {})[rank] = msg
            state.setdefault("activity", {})[gid] = now
        elif kind == "bye":
            self.finished_ranks.add(msg.get("rank"))
        elif kind == "exit":
            rank, rc = msg.get("rank"), msg.get("rc")
            if rc != 0 or rank not in self.finished_ranks:
                how = (
                    f"was killed by signal {-rc}"
                    if isinstance(rc, int) and rc < 0
                    else f"exited with code {rc}"
                )
                self._host_down(host, f"rank {rank} on host {host} {how} before the sweep ended", rank)
        elif kind == "agent_error":
            self._host_down(host, f"host {host}: lost contact ({msg.get('error')})")

    def _slot(self, host: str) -> HostSlot:
        return next(s for s in self.slots if s.host == host)

    # -- the run -------------------------------------------------------------------------------
    def run(self) -> Outcome:
        import torch.distributed as dist

        if self.store is not None:
            store, reach = self.store, ""
        else:
            bind, reach = self.launcher.store_host()
            store = dist.TCPStore(
                bind, 0, is_master=True, wait_for_workers=False, timeout=_dt.timedelta(seconds=30)
            )
        store.set("plan", self.plan.to_json())
        state: dict[str, Any] = {}
        t_launch = time.monotonic()
        try:
            self._start_agents(reach, getattr(store, "port", 0))
            self._wait_started(state)
            self.outcome.startup_s = round(time.monotonic() - t_launch, 3)
            for phase in self.plan.phases:
                if self.fail_fast and self.outcome.faults:
                    break
                if self.before_phase is not None and not self.before_phase(phase):
                    store.set(f"go/{phase.index}", "[]")
                    continue
                t_phase = time.monotonic()
                state["setup_s"] = state["group_s"] = 0.0
                self._run_phase(phase, store, state)
                self.outcome.phases.append(
                    {
                        "index": phase.index,
                        "name": phase.name,
                        "groups": len(phase.groups),
                        "seconds": round(time.monotonic() - t_phase, 4),
                        "group_setup_s": round(state.get("setup_s", 0.0), 4),  # slowest group creation
                        "group_s": round(state.get("group_s", 0.0), 4),  # longest group, creation included
                    }
                )
            if self.fail_fast and self.outcome.faults:
                self.outcome.status = "failed"
            state["finishing"] = True
            self._drain(5.0, state)
        except KeyboardInterrupt:
            self.outcome.status = "interrupted"
            raise
        finally:
            state["finishing"] = True
            for agent in self.agents.values():
                agent.terminate()
            self._drain(0.5, state)
        return self.outcome

    def _start_agents(self, reach: str, port: int) -> None:
        """Start every host's agent at once (``START_CONCURRENCY`` SSH handshakes in flight): 512 hosts
        then cost a few handshake times, not 512 in a row. A host that cannot start is a host fault."""
        from concurrent.futures import ThreadPoolExecutor

        def one(slot: HostSlot) -> None:
            try:
                agent = self.launcher.start(slot, reach, port)
            except Exception as exc:  # noqa: BLE001 - reported as that host's fault
                self._host_down(
                    slot.host, f"host {slot.host}: could not start its ranks: {exc}", kind="start"
                )
                return
            self.agents[slot.host] = agent
            threading.Thread(target=self._pump, args=(slot.host, agent), daemon=True).start()

        workers = max(1, min(START_CONCURRENCY, len(self.slots)))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="launch") as pool:
            list(pool.map(one, self.slots))

    def _drain(self, seconds: float, state: dict[str, Any]) -> None:
        """Take what is still queued (rows in flight are kept, never dropped)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            live = [h for h, a in self.agents.items() if a.returncode() is None]
            try:
                host, msg = self.q.get(timeout=0.05)
            except queue.Empty:
                if not live:
                    break
                continue
            self._handle(host, msg, state)

    def _wait_started(self, state: dict[str, Any]) -> None:
        """Wait until every rank said hello (or its host failed); name the ones that never did."""
        want = {r for s in self.slots if s.host not in self.outcome.down_hosts for r in s.ranks}
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if want <= state.get("hello", set()) | self._down_ranks():
                return
            try:
                host, msg = self.q.get(timeout=0.2)
            except queue.Empty:
                continue
            self._handle(host, msg, state)
            if self.fail_fast and self.outcome.faults:
                return
        missing = sorted(want - state.get("hello", set()) - self._down_ranks())
        for host in sorted({self.rank_host[r] for r in missing}):
            self._host_down(
                host,
                f"host {host}: ranks {[r for r in missing if self.rank_host[r] == host]} "
                f"did not start within {START_TIMEOUT_S:.0f} s",
                kind="start",
            )

    def _down_ranks(self) -> set[int]:
        return {r for s in self.slots if s.host in self.outcome.down_hosts for r in s.ranks}

    def _run_phase(self, phase: Phase, store: Any, state: dict[str, Any]) -> None:
        down = self.outcome.down_hosts
        run_groups = [g for g in phase.groups if not set(g.hosts) & down]
        for g in phase.groups:
            if g not in run_groups:
                self._failed_group(
                    phase, g, "error", f"not run: host {', '.join(sorted(set(g.hosts) & down))} is down"
                )
        state.update(reported={}, activity={})
        start = time.monotonic()
        for g in run_groups:
            state["activity"][g.id] = start
        store.set(f"go/{phase.index}", json.dumps([g.id for g in run_groups]))
        pending = {g.id: g for g in run_groups}
        # ranks' own operation timeouts fire at op_timeout_s; the silent ones are named GRACE_S later
        limit = self.plan.op_timeout_s + GRACE_S
        while pending:
            try:
                host, msg = self.q.get(timeout=0.2)
                self._handle(host, msg, state)
            except queue.Empty:
                pass
            now = time.monotonic()
            for gid, g in list(pending.items()):
                reported = state["reported"].get(gid, {})
                dead = [r for r in g.ranks if self.rank_host[r] in down]
                if len(reported) + len([r for r in dead if r not in reported]) >= len(g.ranks):
                    self._close_group(phase, g, reported, dead)
                    del pending[gid]
                elif now - state["activity"].get(gid, start) > (GRACE_S if reported else limit):
                    silent = [r for r in g.ranks if r not in reported and r not in dead]
                    hosts = sorted({self.rank_host[r] for r in silent})
                    self._fault(
                        "hang",
                        f"{phase.name}: rank(s) {silent} on {', '.join(hosts)} made no progress "
                        f"for {limit:.0f} s in group {gid}",
                        hosts[0] if hosts else None,
                        silent[0] if silent else None,
                    )
                    for h in hosts:
                        self._host_down(h, f"host {h}: hung in {phase.name} (group {gid})", kind="hang")
                    self._close_group(phase, g, reported, dead + silent, timed_out=True)
                    del pending[gid]
            if self.fail_fast and self.outcome.faults:
                for g in pending.values():
                    self._failed_group(phase, g, "error", "run stopped: " + self.outcome.faults[0].message)
                return

    def _close_group(
        self, phase: Phase, g: GroupSpec, reported: dict[int, Any], lost: list[int], timed_out: bool = False
    ) -> None:
        errors = [m for m in reported.values() if m.get("type") == "group_error"]
        if not errors and not lost:
            return
        if lost:
            hosts = sorted({self.rank_host[r] for r in lost})
            why = ("hung" if timed_out else "lost") + f": rank(s) {sorted(lost)} on {', '.join(hosts)}"
            status = "timeout" if timed_out or any(m.get("kind") == "timeout" for m in errors) else "error"
        else:
            status = "timeout" if any(m.get("kind") == "timeout" for m in errors) else "error"
            why = f"rank {errors[0].get('rank')}: {errors[0].get('error')}"
        if self.fail_fast and not self.outcome.faults:
            self._fault(
                status,
                f"{phase.name}: {why}",
                self.rank_host.get(errors[0].get("rank")) if errors else None,
                errors[0].get("rank") if errors else None,
            )
        self._failed_group(phase, g, status, why)

    def _failed_group(self, phase: Phase, g: GroupSpec, status: str, why: str) -> None:
        """One row that says a group's measurements did not happen (status timeout/error), naming hosts."""
        for cname in phase.spec.collectives:
            row = failed_row(
                run_id=self.plan.run_id,
                collective=cname,
                backend=self.plan.backend,
                pattern=g.pattern,
                hosts=g.hosts,
                ranks=len(g.ranks),
                round=g.round,
                status=status,
                error=why,
                group=g.id,
                dtype=phase.spec.dtype,
            )
            row.ts = time.time()
            self.on_row(row.to_dict())
