"""Groups made ahead: a rank makes its next groups' communicators while it measures in this one.

Why: a pair group across two 8-GPU nodes takes seconds to make (NCCL's bootstrap, topology search,
buffers and connections: 2.9 s at 16 ranks, netbench/sim/setup.py says where the figure comes from)
and then measures for about 0.4 s (three sizes at 400G). Made when its round begins, set-up is most
of a pairwise sweep (benchmarks/README.md, "Group set-up"). Made ``depth`` groups ahead, on threads
of their own, set-up runs while earlier rounds measure and a round only waits for what is left of
it.

How it stays safe:

- **Lanes.** Each of ``depth`` lanes is a thread with its own store client (a TCPStore client runs
  one operation at a time: a lane blocked in a rendezvous must not hold up the rank's waits or
  another lane). A group's lane follows from its phase and its place among the phase's groups that
  hold the rank (``lane_of``): the same on every member (a rank has one group a phase in every plan
  netbench makes, and a synthetic plan puts every rank in every group), and round-robin over
  consecutive phases, so each lane has ``depth`` rounds to make its group. Every lane takes its
  groups in the plan's order. So a group a lane is making waits only for its members' same lane,
  whose earlier groups come earlier in the same order: lanes never wait on one another in a circle.
- **The rank never waits for a lane that has not started.** A group still queued when its turn
  comes is taken back and made on the rank's own thread (``take`` returns None). Its members make
  it on a lane or on their own thread: either way each member makes it once, under the same store
  prefix, so they meet. A lane's rendezvous waits as long as it takes (a member may reach the group
  only at its turn, its own lane held up), then its operations get the plan's timeout; at its turn
  the rank waits for it at most that timeout, as for a group it makes itself.
- **A lane held up is replaced.** A lane whose group will not be used (its partner's host went
  down, so the release leaves it out) or that is still making it a timeout after its turn may wait
  on a dead member for ever: it is retired (its thread ends whenever that making does, and the
  group is abandoned then) and a new lane, with a new store client, takes its queue.
- **Not released, not used.** The coordinator releases a phase's groups with ``go/N``; a group
  made ahead that the release leaves out (a host went down) is abandoned as soon as its making
  ends (``settle``). One listed in ``again/N`` (a member was restarted after its partners began
  making it: those partners met a process that is gone) is abandoned too, and made again on the
  rank's own thread under a fresh prefix.
- **Only beside pair measurements.** Lanes make groups only while the rank measures in a pair or
  rail group (``FILLS``): those measure 64 MiB and up, where a making beside them costs nothing
  seen (measured on the H200, benchmarks/README.md "Group set-up": +0.2% at 1 GiB, +0.7% at 64 MiB),
  whereas a ring or world sweep starts at 8 B, where it costs ~2 us an operation (+20-27% at 8 B
  and 1 MiB). The first pair round's groups are therefore made at their turn.
- **Bounded.** At most ``depth`` groups are made ahead at a time, besides the one in use and the
  releases in flight (``groups.IN_FLIGHT``): each holds a communicator (~390 MiB of GPU memory a
  1-rank NCCL group on an H200, more across nodes), so ``depth`` is the plan's, chosen by the
  planner (``planner.groups_ahead``), never open-ended.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from netbench.collectives import groups
from netbench.collectives.groups import MadeGroup

#: makes one group over the given store (the lane's own client): rank.make_group bound to a rank
Maker = Callable[[Any, Any, Any], MadeGroup]  # (store, group, phase)


FILLS = ("pair", "rail")
"""Patterns of the groups beside whose measuring the lanes make the next groups (see above)."""


def lane_of(phase_index: int, place: int, depth: int) -> int:
    """The lane of the group at ``place`` among a phase's groups that hold the rank (plan order)."""
    return (phase_index + place) % depth


@dataclass(eq=False)
class _Item:
    phase: Any
    group: Any
    lane: _Lane
    state: str = "queued"  # queued | making | done | taken (back to the rank's own thread)
    unwanted: bool = False  # not released, given up on, or to be made again: abandoned once made
    made: MadeGroup | None = None
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)


class _Lane:
    def __init__(self, store: Any, make: Maker, on_thread: Callable[[], None], name: str) -> None:
        self.queue: deque[_Item] = deque()
        self.ready = threading.Condition()
        self.retired = False
        self.store, self.make, self.on_thread = store, make, on_thread
        threading.Thread(target=self._loop, name=name, daemon=True).start()

    def put(self, item: _Item) -> None:
        with self.ready:
            self.queue.append(item)
            self.ready.notify()

    def retire(self) -> list[_Item]:
        """Stop taking groups (the one being made ends on its own): what was still queued."""
        with self.ready:
            self.retired = True
            left = list(self.queue)
            self.queue.clear()
            self.ready.notify()
        return left

    def _loop(self) -> None:
        self.on_thread()
        while True:
            with self.ready:
                while not self.queue and not self.retired:
                    self.ready.wait()
                if self.retired:
                    return
                item = self.queue.popleft()
                if item.state != "queued":  # taken back by the rank before its turn came
                    continue
                item.state = "making"
            try:
                item.made = self.make(self.store, item.group, item.phase)
            except Exception as exc:  # noqa: BLE001 - the rank reports it when the group's turn comes
                item.error = exc
            with self.ready:
                item.state = "done"
                drop = item.unwanted
            item.done.set()
            if drop and item.made is not None:
                groups.abandon(item.made.pg, item.made.native)


class Ahead:
    """A rank's lanes and the groups they make ahead, in plan order (see the module's docstring).
    ``wait_s``: the most the rank waits at a group's turn for a lane still making it."""

    def __init__(self, depth: int, open_store: Callable[[], Any], make: Maker, on_thread: Callable[[], None],
                 wait_s: float, floor: int = 0) -> None:
        self.depth, self.wait_s = depth, wait_s
        self.floor = floor  # phases before this one are made on the rank's own thread (a restarted rank)
        self.items: dict[tuple[int, str], _Item] = {}
        self.lock = threading.Lock()
        self.new_lane = lambda k: _Lane(open_store(), make, on_thread, f"netbench-ahead-{k}")
        self.lanes = [self.new_lane(k) for k in range(depth)]

    def fill(self, now: int, upcoming: Iterable[tuple[Any, Any, int]]) -> None:
        """Have the next ``depth`` of ``upcoming`` (phase, group, its place among the phase's groups
        that hold the rank), in plan order, made ahead; none of a phase past ``now`` + ``depth``, so
        what a rank may have begun with a partner is known by phase alone (the coordinator's
        ``again/N`` after a restart in phase ``now`` covers the ``depth`` phases after it)."""
        ahead = 0
        for phase, group, place in upcoming:
            if ahead >= self.depth or phase.index > now + self.depth:
                return
            if phase.index < self.floor:
                continue
            ahead += 1
            key = (phase.index, group.id)
            with self.lock:
                if key in self.items:
                    continue
                lane = self.lanes[lane_of(phase.index, place, self.depth)]
                item = self.items[key] = _Item(phase, group, lane)
            lane.put(item)

    def take(self, phase_index: int, group_id: str) -> MadeGroup | None:
        """The group made ahead, once its making ends (its error raised, as a group made here would
        raise it); None when it was never queued or its lane had not started it (made here then)."""
        with self.lock:
            item = self.items.pop((phase_index, group_id), None)
        if item is None:
            return None
        with item.lane.ready:  # a lane changes an item's state under it
            if item.state == "queued":
                item.state = "taken"
                return None
        t0 = time.monotonic()
        if not item.done.wait(self.wait_s):
            self._give_up(item)
            raise TimeoutError(f"group set-up timed out: not made {self.wait_s:g} s after its turn")
        if item.error is not None:
            raise item.error
        assert item.made is not None
        return MadeGroup(item.made.pg, item.made.grank, "ahead", item.made.setup_s, time.monotonic() - t0,
                         item.made.native)

    def settle(self, phase_index: int, use: set[str]) -> None:
        """Phase ``phase_index`` was released: its groups made ahead that are not in ``use`` (not
        released, or to be made again) are abandoned as soon as their making ends."""
        with self.lock:
            keys = [k for k in self.items if k[0] == phase_index and k[1] not in use]
            gone = [self.items.pop(k) for k in keys]
        for item in gone:
            self._give_up(item)

    def _give_up(self, item: _Item) -> None:
        """Not to be used: taken off its lane if queued, abandoned when made if made already or once
        its making ends; a lane still making it may wait for ever on a member that is gone, so it is
        replaced by a new one that takes over its queue."""
        with item.lane.ready:
            if item.state == "queued":
                item.state = "taken"
                return
            item.unwanted = True
            making = item.state == "making"
            made = item.made if item.state == "done" else None
        if made is not None:
            groups.abandon(made.pg, made.native)
        if making and item.lane in self.lanes:  # (a lane retired already has its replacement)
            with self.lock:
                k = self.lanes.index(item.lane)
                self.lanes[k] = fresh = self.new_lane(k)
            for queued in item.lane.retire():
                queued.lane = fresh
                fresh.put(queued)
