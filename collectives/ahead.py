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
  another lane). A group's lane is a function of its id alone (``lane_of``), the same on every
  member, and every lane takes its groups in the plan's order. So a group a lane is making waits
  only for its members' same lane, whose earlier groups come earlier in the same order: lanes
  never wait on one another in a circle.
- **The rank never waits for a lane that has not started.** A group still queued when its turn
  comes is taken back and made on the rank's own thread (``take`` returns None). Its members make
  it on a lane or on their own thread: either way each member makes it once, under the same store
  prefix, so they meet. A lane held up (a partner that died mid-rendezvous keeps it until the
  operation timeout) therefore costs only its own group.
- **Not released, not used.** The coordinator releases a phase's groups with ``go/N``; a group
  made ahead that the release leaves out (a host went down) is abandoned as soon as its making
  ends (``settle``). One listed in ``again/N`` (a member was restarted after its partners began
  making it: those partners met a process that is gone) is abandoned too, and made again on the
  rank's own thread under a fresh prefix.
- **Bounded.** At most ``depth`` groups are made ahead at a time, besides the one in use and the
  releases in flight (``groups.IN_FLIGHT``): each holds a communicator (~390 MiB of GPU memory a
  1-rank NCCL group on an H200, more across nodes), so ``depth`` is the plan's, chosen by the
  planner (``planner.groups_ahead``), never open-ended.
"""

from __future__ import annotations

import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from netbench.collectives import groups
from netbench.collectives.groups import MadeGroup

#: makes one group over the given store (the lane's own client): rank.make_group bound to a rank
Maker = Callable[[Any, Any, Any], MadeGroup]  # (store, group, phase)


def lane_of(group_id: str, depth: int) -> int:
    """The lane a group is made on: the same on every member, whatever part of the plan it holds."""
    return zlib.crc32(group_id.encode()) % depth


@dataclass(eq=False)
class _Item:
    phase: Any
    group: Any
    state: str = "queued"  # queued | making | done | taken (back to the rank's own thread)
    unwanted: bool = False  # not released, or to be made again: abandoned once made
    made: MadeGroup | None = None
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def key(self) -> tuple[int, str]:
        return (self.phase.index, self.group.id)


class _Lane:
    def __init__(self, index: int, store: Any, make: Maker, on_thread: Callable[[], None]) -> None:
        self.queue: deque[_Item] = deque()
        self.ready = threading.Condition()
        self.store, self.make, self.on_thread = store, make, on_thread
        threading.Thread(target=self._loop, name=f"netbench-ahead-{index}", daemon=True).start()

    def put(self, item: _Item) -> None:
        with self.ready:
            self.queue.append(item)
            self.ready.notify()

    def _loop(self) -> None:
        self.on_thread()
        while True:
            with self.ready:
                while not self.queue:
                    self.ready.wait()
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
    """A rank's lanes and the groups they make ahead, in plan order (see the module's docstring)."""

    def __init__(self, depth: int, open_store: Callable[[], Any], make: Maker, on_thread: Callable[[], None],
                 floor: int = 0) -> None:
        self.depth = depth
        self.floor = floor  # phases before this one are made on the rank's own thread (a restarted rank)
        self.items: dict[tuple[int, str], _Item] = {}
        self.lock = threading.Lock()
        self.lanes = [_Lane(k, open_store(), make, on_thread) for k in range(depth)]

    def fill(self, upcoming: Iterable[tuple[Any, Any]]) -> None:
        """Have the next ``depth`` of ``upcoming`` (phase, group) pairs, in plan order, made ahead."""
        ahead = 0
        for phase, group in upcoming:
            if ahead >= self.depth:
                return
            if phase.index < self.floor:
                continue
            ahead += 1
            key = (phase.index, group.id)
            with self.lock:
                if key in self.items:
                    continue
                item = self.items[key] = _Item(phase, group)
            self.lanes[lane_of(group.id, self.depth)].put(item)

    def take(self, phase_index: int, group_id: str) -> MadeGroup | None:
        """The group made ahead, once its making ends (its error raised, as a group made here would
        raise it); None when it was never queued or its lane had not started it (made here then)."""
        with self.lock:
            item = self.items.pop((phase_index, group_id), None)
        if item is None:
            return None
        with self.lanes[lane_of(group_id, self.depth)].ready:  # a lane changes an item's state under it
            if item.state == "queued":
                item.state = "taken"
                return None
        t0 = time.time()
        item.done.wait()
        if item.error is not None:
            raise item.error
        assert item.made is not None
        return MadeGroup(item.made.pg, item.made.grank, "ahead", item.made.setup_s, time.time() - t0,
                         item.made.native)

    def settle(self, phase_index: int, use: set[str]) -> None:
        """Phase ``phase_index`` was released: its groups made ahead that are not in ``use`` (not
        released, or to be made again) are abandoned as soon as their making ends."""
        with self.lock:
            keys = [k for k in self.items if k[0] == phase_index and k[1] not in use]
            gone = [self.items.pop(k) for k in keys]
        for item in gone:
            with self.lanes[lane_of(item.group.id, self.depth)].ready:
                if item.state == "queued":
                    item.state = "taken"
                    continue
                item.unwanted = True
                made = item.made if item.state == "done" else None
            if made is not None:
                groups.abandon(made.pg, made.native)
