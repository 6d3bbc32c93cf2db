"""Groups made ahead (collectives/ahead.py): the lanes' bookkeeping, with a maker that blocks until the
test lets it go, so every interleaving below happens for certain rather than by timing. The real
makings (gloo ranks over a real store, on the test hosts) are in tests/test_group_resources.py and
tests/test_stalls_netns.py."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import pytest
from netbench.collectives import ahead as ahead_mod
from netbench.collectives.ahead import Ahead, lane_of
from netbench.collectives.groups import MadeGroup


@dataclass(frozen=True)
class Ph:
    index: int


@dataclass(frozen=True)
class Grp:
    id: str


@dataclass
class Maker:
    """Makes a group once the test releases its id; records which store (lane) made what, in order."""

    gates: dict[str, threading.Event] = field(default_factory=dict)
    started: dict[str, threading.Event] = field(default_factory=dict)
    order: list[tuple[int, str]] = field(default_factory=list)
    fail: set[str] = field(default_factory=set)

    def gate(self, gid: str) -> threading.Event:
        return self.gates.setdefault(gid, threading.Event())

    def began(self, gid: str) -> threading.Event:
        return self.started.setdefault(gid, threading.Event())

    def __call__(self, store: int, group: Grp, phase: Ph) -> MadeGroup:
        self.order.append((store, group.id))
        self.began(group.id).set()
        assert self.gate(group.id).wait(10)
        if group.id in self.fail:
            raise RuntimeError(f"{group.id}: rendezvous failed")
        return MadeGroup(pg=f"pg-{group.id}", grank=0, how="fresh", setup_s=0.25, wait_s=0.25)


@pytest.fixture
def abandoned(monkeypatch):
    got: list[str] = []
    monkeypatch.setattr(ahead_mod.groups, "abandon", lambda pg, native=None: got.append(pg))
    return got


def lanes(depth: int, maker: Maker, wait_s: float = 5.0, floor: int = 0) -> Ahead:
    stores = iter(range(100))
    return Ahead(depth, lambda: next(stores), maker, lambda: None, wait_s, floor)


def upcoming(*phases: int):
    return [(Ph(p), Grp(f"g{p}"), 0) for p in phases]


def test_lanes_take_consecutive_phases_round_robin_and_never_past_the_horizon():
    assert [lane_of(p, 0, 3) for p in range(6)] == [0, 1, 2, 0, 1, 2]
    assert lane_of(4, 1, 3) == 2  # a second group of the phase goes on the next lane
    maker = Maker()
    a = lanes(2, maker)
    a.fill(0, upcoming(1, 2, 3, 4))
    for gid in ("g1", "g2"):
        maker.began(gid).wait(5)
    assert not maker.began("g3").is_set()  # depth 2: two groups ahead, no more
    assert sorted(maker.order) == [(0, "g2"), (1, "g1")]  # phase 1 on lane 1, phase 2 on lane 0
    b = lanes(3, Maker())
    b.fill(0, upcoming(2, 5))  # phase 5 is past 0 + 3: its group is made at its turn
    assert set(b.items) == {(2, "g2")}


def test_a_made_group_is_handed_over_with_what_the_rank_waited():
    maker = Maker()
    a = lanes(2, maker)
    a.fill(0, upcoming(1))
    maker.began("g1").wait(5)
    maker.gate("g1").set()
    made = a.take(1, "g1")
    assert made is not None and made.how == "ahead" and made.pg == "pg-g1" and made.setup_s == 0.25
    assert 0 <= made.wait_s < 0.25
    assert a.take(1, "g1") is None  # taken once; a group never queued is made by the rank


def test_a_group_its_lane_has_not_started_is_taken_back_and_never_made_there():
    maker = Maker()
    a = lanes(1, maker)
    a.fill(0, upcoming(1))
    maker.began("g1").wait(5)
    a.fill(1, upcoming(2))  # queued behind g1 on the one lane
    assert a.take(2, "g2") is None  # its turn came first: the rank makes it itself
    maker.gate("g1").set()
    assert a.take(1, "g1").pg == "pg-g1"
    a.fill(2, upcoming(3))
    maker.began("g3").wait(5)
    maker.gate("g3").set()
    assert a.take(3, "g3").pg == "pg-g3"
    assert [gid for _, gid in maker.order] == ["g1", "g3"]


def test_a_making_that_failed_raises_at_the_group_s_turn():
    maker = Maker(fail={"g1"})
    a = lanes(1, maker)
    a.fill(0, upcoming(1))
    maker.began("g1").wait(5)
    maker.gate("g1").set()
    with pytest.raises(RuntimeError, match="rendezvous failed"):
        a.take(1, "g1")


def until(cond) -> bool:  # noqa: ANN001 - a lane's thread finishes on its own
    done = threading.Event()
    for _ in range(200):
        if cond():
            return True
        done.wait(0.05)
    return False


def test_a_group_left_out_of_the_release_is_abandoned_and_its_held_up_lane_replaced(abandoned):
    maker = Maker()
    a = lanes(1, maker)
    a.fill(0, upcoming(1))
    maker.began("g1").wait(5)  # making g1, whose partner will never come
    a.fill(1, upcoming(2))  # queued behind it on the one lane
    old = a.lanes[0]
    a.settle(1, set())  # the release leaves g1 out
    assert a.lanes[0] is not old and old.retired  # the held-up lane takes no more groups
    maker.began("g2").wait(5)
    maker.gate("g2").set()
    assert a.take(2, "g2").pg == "pg-g2"  # made by the new lane, which took over the queue
    assert abandoned == []
    maker.gate("g1").set()  # the old lane's making ends at last: abandoned then
    assert until(lambda: abandoned == ["pg-g1"]), abandoned


def test_the_rank_waits_a_timeout_at_the_turn_then_gives_the_group_up(abandoned):
    maker = Maker()
    a = lanes(1, maker, wait_s=0.2)
    a.fill(0, upcoming(1))
    maker.began("g1").wait(5)
    with pytest.raises(TimeoutError, match="not made 0.2 s after its turn"):
        a.take(1, "g1")
    maker.gate("g1").set()
    assert until(lambda: abandoned == ["pg-g1"]), abandoned


def test_a_restarted_rank_makes_its_first_phases_itself():
    a = lanes(2, Maker(), floor=5)  # restarted from phase 3 with 2 ahead: phases 3 and 4 are again/N
    a.fill(3, upcoming(4, 5))
    assert set(a.items) == {(5, "g5")}
