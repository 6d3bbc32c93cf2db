"""The coordinator: hosts the rendezvous store, starts one agent per host, releases the plan's
phases one at a time, and turns the ranks' messages into rows on disk.

It is the only process that writes the run directory, so a rank or host that dies can never damage
what was measured: every row is fsync'd as it arrives. Faults are judged here:
- a rank that exits before its plan ends is named at once (its host is marked down);
- a group that reports nothing for ``op_timeout + grace`` seconds is declared hung, and the ranks
  that never reported are named;
- with ``fail_fast`` (one local run) the first fault ends the run; otherwise (a cluster sweep) the
  fault costs only the groups of the host concerned and the next phase goes on without it.

Its parts, each a module: ``outcome`` (what it hears besides messages, and what a launch ends with),
``planview`` (the agents' rows checked against the plan, the failed rows it writes) and
``heartbeats`` (who a stall is pinned on).
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from netbench.agents.heartbeats import Heartbeats
from netbench.agents.launchers import (
    AgentProcess,
    HostSlot,
    Launcher,
    new_secret,
    open_server,
    publish_plan,
    secured,
    without_torch_noise,
)
from netbench.agents.outcome import (  # Fault, Outcome: read by callers
    ChannelLost,
    Event,
    Fault,
    Invalid,
    Outcome,
)
from netbench.agents.planview import PlanView, count_points
from netbench.collectives import messages
from netbench.collectives.plan import GroupSpec, Phase, WorkerPlan
from netbench.common.errors import NetbenchError
from netbench.common.interrupts import checkpoint
from netbench.common.text import quote_untrusted, terminal_safe
from netbench.defaults import START_TIMEOUT_S

THREAD_STACK_BYTES = 1 << 20
"""The stack of a thread that starts an agent or reads one (a thread per host): at 4,096 hosts the
default 8 MiB stacks reserved 32 GiB, and thread starts failed on a busy machine."""
GRACE_S = 3.0  # after some ranks of a group report failure, how long the silent ones get
START_CONCURRENCY = 64  # agents started at once
MAX_BATCH = 4096  # messages handled between two scans of the pending groups (hangs still seen each 0.2 s)


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
        clock: Callable[[], float] = time.monotonic,
        start_timeout_s: float = START_TIMEOUT_S,
    ):
        self.plan = plan
        self.start_timeout_s = start_timeout_s  # every rank's hello within this, or its host is down
        # the clock start-up and phase times are recorded by: a simulated fabric's own (netbench.sim)
        # in place of this machine's; timeouts always run on this machine's clock
        self.clock = clock
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
        self.by_host = {s.host: s for s in slots}  # each message names its host: one look-up
        self.agents: dict[str, AgentProcess] = {}
        self._agents_lock = threading.Lock()  # the launch threads add agents while a stop may end them
        self._closing = False  # set by the teardown: an agent started after it is ended at once
        self._lock = threading.Lock()
        self.q: queue.Queue[tuple[str, Event]] = queue.Queue()
        self.down_reason: dict[str, str] = {}  # host -> why, added to the rows of its groups
        self.outcome = Outcome(status="completed")
        self.total = sum(count_points(p, g) for p in plan.phases for g in p.groups)
        self.done_points = 0
        self.finished_ranks: set[int] = set()
        self.rejected: set[str] = set()  # hosts that broke the protocol
        self.view = PlanView(plan)  # what an agent's word is checked against
        self.beats = Heartbeats()
        # ranks given up on in a stalled group, to be restarted from a later phase: rank -> that
        # phase; ``restart_acked``: their agents have restarted them (a hello from them closes it)
        self.restarts: dict[int, int] = {}
        # rank -> the phase it was last restarted from: its groups of that phase and the plan's
        # ``ahead`` after it are made again under a fresh prefix (``again/N``, collectives/ahead.py)
        self.remade: dict[int, int] = {}
        self.restart_acked: set[int] = set()
        self._ctl_gen = 0
        self._store: Any = None

    # -- plumbing ------------------------------------------------------------------------------
    def _pump(self, host: str, agent: AgentProcess) -> None:
        """Read one agent's lines into the queue. A line that is not a valid message ends the
        reading: the host broke the protocol, so nothing more it says is taken as a measurement."""
        try:
            for line in agent.lines():
                try:
                    msg = messages.decode(line)
                except messages.ProtocolError as exc:
                    self.q.put((host, Invalid(str(exc), line)))
                    break
                if msg is not None:
                    self.q.put((host, msg))
        except Exception as exc:  # noqa: BLE001 - a broken channel is a host fault, reported below
            self.q.put((host, ChannelLost(f"{type(exc).__name__}: {exc}")))
        self.q.put((host, None))

    def _fault(self, kind: str, message: str, host: str | None = None, rank: int | None = None) -> None:
        self.outcome.faults.append(Fault(kind, message, host, rank, round(time.time(), 3)))
        self.on_note(message)

    def _host_down(self, host: str, why: str, rank: int | None = None, kind: str = "exit") -> None:
        with self._lock:  # agents start from several threads
            if host in self.outcome.down_hosts:
                return
            self.outcome.down_hosts.add(host)
            self.down_reason[host] = why
            self._fault(kind, why, host, rank)
        agent = self.agents.get(host)
        if agent is not None:
            threading.Thread(target=agent.terminate, daemon=True).start()

    def _handle(self, host: str, msg: Event, state: dict[str, Any]) -> None:
        """Apply one event of ``host`` to the phase state. ``state`` holds the running phase's
        bookkeeping. Messages arrive type-checked (messages.decode); what only the plan can say (the
        rank is this host's, the row's group is in the plan and has this host) is checked here, and
        a message that fails is that host's fault."""
        if msg is None:  # the agent's stdout closed
            self._agent_ended(host, state)
            return
        if isinstance(msg, ChannelLost):
            if state.get("stopping") or state.get("finishing"):
                # the channels this run closed as it stopped, or one lost once every phase had
                # ended: all it measured is in, so it is no host's fault (as a stdout that closes)
                return
            self._host_down(host, f"host {host}: lost contact ({quote_untrusted(msg.error)})")
            return
        if isinstance(msg, Invalid):
            self._reject(host, msg.reason, msg.line)
            return
        if host in self.outcome.down_hosts and host in self.rejected:
            return  # in flight from a host that already broke the protocol: not trusted
        kind = msg["type"]
        if "rank" in msg and msg["rank"] not in self._slot(host).ranks:
            self._reject(host, f"{kind} message for rank {msg['rank']}, not one of this host's")
            return
        now = time.monotonic()
        if kind == "row":
            self._on_row(host, msg, state, now)
        elif kind == "step":
            state.setdefault("activity", {})[msg["group"]] = now
        elif kind == "env":
            self.outcome.env[host] = msg["info"]  # the sender's own, whatever host it names
        elif kind == "hello":
            state.setdefault("hello", set()).add(msg["rank"])
            if msg["rank"] in self.restart_acked:
                self.restarts.pop(msg["rank"], None)
                self.restart_acked.discard(msg["rank"])
            self._check_caps(host, msg)
        elif kind == "alive":
            self.beats.heard(host, msg, now)
        elif kind == "restarted":
            if self.restarts.get(msg["rank"]) == msg["phase"]:
                self.restart_acked.add(msg["rank"])
        elif kind in ("group_done", "group_error"):
            self._on_group_end(msg, state, now)
        elif kind == "bye":
            self.finished_ranks.add(msg["rank"])
        elif kind == "exit":
            self._on_exit(host, msg, state)

    def _agent_ended(self, host: str, state: dict[str, Any]) -> None:
        """An agent's stdout closed: its host is down when some of its ranks had not finished."""
        if state.get("finishing") or host in self.outcome.down_hosts:
            return
        ranks = [r for r in self._slot(host).ranks if r not in self.finished_ranks]
        if ranks:
            agent = self.agents.get(host)
            said = agent.end_reason() if agent is not None else None
            why = f": {terminal_safe(said[:200], keep_newlines=False)}" if said else ""
            self._host_down(host, f"host {host}: agent ended before its ranks finished (ranks {ranks}){why}")

    def _on_row(self, host: str, msg: dict[str, Any], state: dict[str, Any], now: float) -> None:
        """A row checked against the plan, given the plan's facts and stored."""
        row = msg["row"]
        wrong = self.view.row_mismatch(host, msg["phase"], row)
        if wrong:
            self._reject(host, wrong)
            return
        self.view.record_plan_facts(msg["phase"], row)
        self.on_row(row)
        self.outcome.rows += 1
        self.done_points += 1
        state.setdefault("activity", {})[row.get("group")] = now
        self.on_progress(
            self.done_points,
            self.total,
            f"{row.get('collective')} {row.get('bytes')} B {row.get('pattern')}",
        )

    @staticmethod
    def _on_group_end(msg: dict[str, Any], state: dict[str, Any], now: float) -> None:
        """A rank's word that a group ended (done or failed), and its times for run.json."""
        if msg.get("setup_s") is not None:  # group creation (rendezvous + connections), for run.json
            state["setup_s"] = max(state.get("setup_s", 0.0), float(msg["setup_s"]))
        if msg.get("wait_s") is not None:  # what of it the round waited for (groups made ahead)
            state["wait_s"] = max(state.get("wait_s", 0.0), float(msg["wait_s"]))
            state["group_s"] = max(state.get("group_s", 0.0), float(msg.get("seconds") or 0.0))
        gid, rank = msg["group"], msg["rank"]
        state.setdefault("reported", {}).setdefault(gid, {})[rank] = msg
        state.setdefault("activity", {})[gid] = now

    def _on_exit(self, host: str, msg: dict[str, Any], state: dict[str, Any]) -> None:
        rank, rc = msg["rank"], msg["rc"]
        if state.get("stopping"):
            return  # ranks this run stopped (a signal, a full disk): netbench's doing, not the host's
        if rc != 0 or rank not in self.finished_ranks:
            how = f"was killed by signal {-rc}" if rc < 0 else f"exited with code {rc}"
            self._host_down(host, f"rank {rank} on host {host} {how} before the sweep ended", rank)

    def _reject(self, host: str, reason: str, line: str | None = None) -> None:
        """A host that sent an invalid message is treated like a dead one: its agent is stopped,
        its groups fail with the reason, and nothing more it sends is stored."""
        self.rejected.add(host)
        seen = f"; line {quote_untrusted(line.rstrip(), 120)}" if line else ""
        self._host_down(
            host,
            f"host {host}: sent an invalid message ({quote_untrusted(reason)}{seen})",
            kind="protocol",
        )

    def _check_caps(self, host: str, hello: dict[str, Any]) -> None:
        why = self.view.caps_unmet(host, hello)
        if why:
            self._host_down(host, why, hello["rank"], kind="capability")

    def _slot(self, host: str) -> HostSlot:
        return self.by_host[host]

    # -- the run -------------------------------------------------------------------------------
    def run(self) -> Outcome:
        with without_torch_noise():  # the store's server and our clients live in this process
            return self._run()

    def _run(self) -> Outcome:
        secret, listener = new_secret(), None
        if self.store is not None:  # already namespaced by whoever opened it (launch/external.py)
            store, reach = self.store, ""
        else:
            bind, reach = self.launcher.store_host()
            try:
                raw, listener = open_server(bind)
            except OSError as exc:
                raise NetbenchError(f"cannot listen on {bind} for the ranks: {exc.strerror}", 2) from None
            store = secured(raw, secret)
        self._store = store
        publish_plan(store, self.plan)  # every host's part: its agent (or its ranks) fetch that alone
        state: dict[str, Any] = {}
        t_launch = self.clock()
        try:
            self._start_agents(reach, listener.getsockname()[1] if listener else 0, secret)
            self._wait_started(state)
            self.outcome.startup_s = round(self.clock() - t_launch, 3)
            for phase in self.plan.phases:
                if self.fail_fast and self.outcome.faults:
                    break
                if self.before_phase is not None and not self.before_phase(phase):
                    store.set(f"go/{phase.index}", "[]")
                    continue
                t_phase = self.clock()
                state["setup_s"] = state["wait_s"] = state["group_s"] = 0.0
                self._run_phase(phase, store, state)
                self.outcome.phases.append(
                    {
                        "index": phase.index,
                        "name": phase.name,
                        "groups": len(phase.groups),
                        "seconds": round(self.clock() - t_phase, 4),
                        "group_setup_s": round(state.get("setup_s", 0.0), 4),  # slowest group creation
                        "group_wait_s": round(state.get("wait_s", 0.0), 4),  # longest wait for one
                        "group_s": round(state.get("group_s", 0.0), 4),  # longest group, creation included
                    }
                )
            if self.fail_fast and self.outcome.faults:
                self.outcome.status = "failed"
            state["finishing"] = True
            self._drain(5.0, state)
        except KeyboardInterrupt:
            self.outcome.status = "interrupted"
            state["stopping"] = True
            raise
        finally:
            state["finishing"] = True
            with self._agents_lock:  # a stop during the launch: its threads may still be adding agents
                self._closing = True
                started = list(self.agents.values())
            for agent in started:
                agent.terminate()
            self._drain(0.5, state)
            if listener is not None:
                listener.close()
        return self.outcome

    def _start_agents(self, reach: str, port: int, secret: str) -> None:
        """Start every host's agent at once (``START_CONCURRENCY`` SSH handshakes in flight): 512 hosts
        then cost a few handshake times, not 512 in a row. A host that cannot start is a host fault."""
        from concurrent.futures import ThreadPoolExecutor

        def one(slot: HostSlot) -> None:
            try:
                agent = self.launcher.start(slot, reach, port, secret)
            except Exception as exc:  # noqa: BLE001 - reported as that host's fault
                self._host_down(
                    slot.host, f"host {slot.host}: could not start its ranks: {exc}", kind="start"
                )
                return
            with self._agents_lock:
                if self._closing:  # the run stopped while this host's start was in flight
                    agent.terminate()
                    return
                self.agents[slot.host] = agent
            try:
                threading.Thread(target=self._pump, args=(slot.host, agent), daemon=True).start()
            except RuntimeError as exc:  # no thread left on this machine: that host is not run
                self._host_down(slot.host, f"host {slot.host}: cannot read its agent ({exc})", kind="start")

        workers = max(1, min(START_CONCURRENCY, len(self.slots)))
        before = threading.stack_size(THREAD_STACK_BYTES)  # for the threads made here only
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="launch")
        try:
            for done in [pool.submit(one, slot) for slot in self.slots]:
                done.result()
        finally:
            threading.stack_size(before)
            # a stop (a signal raised in this thread) leaves without waiting: the hosts not started
            # never are, and one in flight ends its agent itself (``_closing``)
            pool.shutdown(wait=False, cancel_futures=True)

    def _drain(self, seconds: float, state: dict[str, Any]) -> None:
        """Take what is still queued (rows in flight are kept, never dropped). No checkpoint here:
        this is also the teardown of a stopped run, whose stop is on its way up, not yet taken."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                host, msg = self.q.get(timeout=0.05)
            except queue.Empty:  # asked only then: per message, it was hosts x rows polls at 1,024 hosts
                with self._agents_lock:
                    started = list(self.agents.values())
                if all(a.returncode() is not None for a in started):
                    break
                continue
            self._handle(host, msg, state)

    def _wait_started(self, state: dict[str, Any]) -> None:
        """Wait until every rank said hello (or its host failed); name the ones that never did."""
        want = {r for s in self.slots if s.host not in self.outcome.down_hosts for r in s.ranks}
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if want <= state.get("hello", set()) | self._down_ranks():
                return
            try:
                host, msg = self._get(0.2)
            except queue.Empty:
                continue
            while True:  # what is queued already, then the check: once a message, it was ranks^2
                self._handle(host, msg, state)
                if self.fail_fast and self.outcome.faults:
                    return
                try:
                    host, msg = self.q.get_nowait()
                except queue.Empty:
                    break
        missing = sorted(want - state.get("hello", set()) - self._down_ranks())
        for host in sorted({self.rank_host[r] for r in missing}):
            agent = self.agents.get(host)  # what its launcher says of it (Kubernetes: the pod Pending, why)
            said = agent.end_reason() if agent is not None else None
            why = f": {terminal_safe(said[:300], keep_newlines=False)}" if said else ""
            self._host_down(
                host,
                f"host {host}: ranks {[r for r in missing if self.rank_host[r] == host]} "
                f"did not start within {self.start_timeout_s:g} s{why}",
                kind="start",
            )

    def _down_ranks(self) -> set[int]:
        return {r for s in self.slots if s.host in self.outcome.down_hosts for r in s.ranks}

    def _get(self, timeout: float) -> tuple[str, Any]:
        """The next agent message (``queue.Empty`` after ``timeout`` seconds); a stop that a library
        dropped is raised first (``interrupts.checkpoint``): every wait of the run passes here, but
        for the drain."""
        checkpoint()
        return self.q.get(timeout=timeout)

    def _run_phase(self, phase: Phase, store: Any, state: dict[str, Any]) -> None:
        if self.restarts:
            self._await_restarts(state)
        down = self.outcome.down_hosts
        groups = list(phase.groups)  # once: a pairwise round's groups are made as they are read
        run_groups = [g for g in groups if not set(g.hosts) & down]
        for g in groups:
            if set(g.hosts) & down:
                gone = sorted(set(g.hosts) & down)
                why = f" ({self.down_reason[gone[0]]})" if gone[0] in self.down_reason else ""
                self._failed_group(phase, g, "error", f"not run: host {', '.join(gone)} is down{why}", gone,
                                   ran=False)
        state.update(reported={}, activity={})
        start = time.monotonic()
        for g in run_groups:
            state["activity"][g.id] = start
        if self.plan.ahead:  # before the release: a rank reads it once it sees its group released
            store.set(f"again/{phase.index}", json.dumps(self._again(phase, run_groups)))
        store.set(f"go/{phase.index}", json.dumps([g.id for g in run_groups]))
        pending = {g.id: g for g in run_groups}
        # ranks' own operation timeouts fire at op_timeout_s; the silent ones are named GRACE_S later
        limit = self.plan.op_timeout_s + GRACE_S
        while pending:
            try:
                host, msg = self._get(0.2)
                self._handle(host, msg, state)
                # take what else is queued before the scan below, which costs groups x ranks: one scan
                # per message made a 1,024-node phase (16 ranks a pair) quadratic, minutes of CPU
                for _ in range(MAX_BATCH):
                    host, msg = self.q.get_nowait()
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
                    self._stalled(phase, g, reported, dead, silent, limit)
                    del pending[gid]
            if self.fail_fast and self.outcome.faults:
                for g in pending.values():
                    stop = "run stopped: " + self.outcome.faults[0].message
                    self._failed_group(phase, g, "error", stop, [])
                return

    def _stalled(
        self, phase: Phase, g: GroupSpec, reported: dict[int, Any], dead: list[int], silent: list[int],
        limit: float,
    ) -> None:
        """A group past its time with ``silent`` ranks: find who stalled it, and cost the others nothing.

        A silent rank is the stall's cause when its host's agent has stopped answering or says the
        rank is stopped (or, for ranks no agent watches, when it is silent at all). Every other silent
        rank is alive and waiting: on the culprit, on a rank that died (``dead``), or on a transfer too
        slow for ``--timeout``, as when one slow host drags a whole ring. Those are not hung: they are
        restarted from the next phase (``_Agent.restart``) and keep their host's other pairs, so one
        slow or dead host never drains its partners, and the pairs that follow say which host was slow."""
        now = time.monotonic()
        culprits, waiting = [], []
        for r in silent:
            host = self.rank_host[r]
            if self.fail_fast or self.beats.stalls(host, r, now):
                culprits.append(r)
            else:
                waiting.append(r)
        gid = g.id
        if culprits:
            hosts = sorted({self.rank_host[r] for r in culprits})
            self._fault(
                "hang",
                f"{phase.name}: rank(s) {culprits} on {', '.join(hosts)} made no progress "
                f"for {limit:.0f} s in group {gid}",
                hosts[0],
                culprits[0],
            )
            for h in hosts:
                self._host_down(h, f"host {h}: {self.beats.hang_cause(h, now)} in {phase.name} (group {gid})",
                                kind="hang")
            why, blame = f"hung: rank(s) {sorted(culprits)} on {', '.join(hosts)}", hosts
        elif dead:
            gone = sorted({self.rank_host[r] for r in dead})
            why, blame = f"lost: rank(s) {sorted(dead)} on {', '.join(gone)}", gone
            reasons = [self.down_reason[h] for h in gone if h in self.down_reason]
            why += f" ({reasons[0]})" if reasons else ""
        else:
            why = (f"timed out: no progress for {limit:.0f} s, every rank alive (the group was abandoned; "
                   "its hosts' other pairs say which one is slow)" + self.beats.reach.refusing(g.hosts))
            blame = []
        if waiting:
            self.on_note(f"{phase.name}: group {gid} stalled; restarting rank(s) {sorted(waiting)} on "
                         f"{', '.join(sorted({self.rank_host[r] for r in waiting}))} for the next phase "
                         "(alive, waiting: not a host fault)")
            self._restart(waiting, phase.index + 1)
        self._close_group(phase, g, reported, dead + silent, why=why, blame=blame)

    def _restart(self, ranks: list[int], first_phase: int) -> None:
        """Ask the agents of ``ranks`` to restart them from ``first_phase``: one store key a host,
        carrying every request of that host not yet acknowledged (an agent that polled late still
        sees an earlier one; it applies a rank's request once, by its phase)."""
        for r in ranks:
            self.restarts[r] = self.remade[r] = first_phase
            self.restart_acked.discard(r)
        self._ctl_gen += 1
        for host in sorted({self.rank_host[r] for r in ranks}):
            asked = {str(r): p for r, p in self.restarts.items() if self.rank_host[r] == host}
            self._store.set(f"ctl/{host}", json.dumps({"gen": self._ctl_gen, "restart": asked}))

    def _again(self, phase: Phase, run_groups: list[GroupSpec]) -> list[str]:
        """The released groups of ``phase`` to be made again under a fresh prefix: those of a rank
        restarted from this phase or up to ``plan.ahead`` phases before, whose partners may have made
        them ahead with the process that is gone (collectives/ahead.py)."""
        fresh = {r for r, first in self.remade.items() if first <= phase.index < first + self.plan.ahead}
        return [g.id for g in run_groups if fresh.intersection(g.ranks)] if fresh else []

    def _await_restarts(self, state: dict[str, Any]) -> None:
        """Before a phase is released: the ranks restarted for it are back (their hello), so their
        partners do not wait on a process still importing torch. One that is not back within
        ``start_timeout_s`` costs its host, as at the start."""
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            waiting = [r for r in self.restarts if self.rank_host[r] not in self.outcome.down_hosts]
            if not waiting:
                self.restarts.clear()
                return
            if time.monotonic() > deadline:
                break
            try:
                host, msg = self._get(0.2)
            except queue.Empty:
                continue
            self._handle(host, msg, state)
        for host in sorted({self.rank_host[r] for r in waiting}):
            ranks = [r for r in waiting if self.rank_host[r] == host]
            self._host_down(
                host, f"host {host}: rank(s) {ranks} did not come back within {self.start_timeout_s:g} s "
                "of their restart", kind="start"
            )
        self.restarts.clear()

    def _close_group(
        self, phase: Phase, g: GroupSpec, reported: dict[int, Any], lost: list[int], why: str | None = None,
        blame: list[str] | None = None,
    ) -> None:
        """The failed rows of a group that ended without all its rows: ``why`` and ``blame`` given (a
        stall, ``_stalled``), else from the ranks ``lost`` (their hosts went down, and are blamed) or
        the errors reported (which blame no host: a collective's own error)."""
        errors = [m for m in reported.values() if m.get("type") == "group_error"]
        if not errors and not lost:
            return
        if why is not None:
            status = "timeout"
        elif lost:
            hosts = sorted({self.rank_host[r] for r in lost})
            why, blame = f"lost: rank(s) {sorted(lost)} on {', '.join(hosts)}", hosts
            reasons = [self.down_reason[h] for h in hosts if h in self.down_reason]
            if reasons:
                why += f" ({reasons[0]})"
            status = "timeout" if any(m.get("kind") == "timeout" for m in errors) else "error"
        else:
            status = "timeout" if any(m.get("kind") == "timeout" for m in errors) else "error"
            why = f"rank {errors[0]['rank']}: {errors[0].get('error')}" + self.beats.reach.refusing(g.hosts)
        if self.fail_fast and not self.outcome.faults:
            # buffers too large for the host's memory are the sizes asked for, not the host's fault
            memory = bool(errors) and not lost and all(m.get("kind") == "memory" for m in errors)
            self._fault(
                "memory" if memory else status,
                f"{phase.name}: {why}",
                self.rank_host.get(errors[0].get("rank")) if errors and not memory else None,
                errors[0].get("rank") if errors else None,
            )
        self._failed_group(phase, g, status, why, blame or [])

    def _failed_group(
        self, phase: Phase, g: GroupSpec, status: str, why: str, blame: list[str], ran: bool = True
    ) -> None:
        for row in self.view.failed_rows(phase, g, status, why, blame, ran):
            self.on_row(row)
