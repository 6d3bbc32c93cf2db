"""The agent protocol at the coordinator's boundary: whatever a host sends, the coordinator never
raises, never stores it as a measurement unless it is a valid row of the plan, and a host that
breaks the protocol is named as that host's fault. Also the run store's secret."""

from __future__ import annotations

import json
import math
import os
import queue
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from netbench.collectives import messages

from netbench.agents.coordinator import Coordinator
from netbench.agents.launchers import HostSlot
from netbench.run.options import MeasureOptions
from netbench.run.planner import PlanRequest, build_plan

SLOTS = [HostSlot(host="h0", nprocs=1, rank_base=0), HostSlot(host="h1", nprocs=1, rank_base=1)]


class LinesAgent:
    def __init__(self, host: str, lines: list[str]):
        self.host, self._lines = host, lines

    def lines(self):  # noqa: ANN201
        yield from self._lines

    def terminate(self) -> None:
        pass

    def returncode(self) -> int | None:
        return 0

    def end_reason(self) -> str | None:
        return None


def make_coordinator() -> tuple[Coordinator, list[dict[str, Any]]]:
    req = PlanRequest(measure=MeasureOptions(collectives=["all_reduce"], min_bytes=1024, max_bytes=2048))
    plan = build_plan(req, "run-1", SLOTS, "gloo")
    stored: list[dict[str, Any]] = []
    return Coordinator(plan, SLOTS, launcher=None, on_row=stored.append), stored  # type: ignore[arg-type]


def feed(coord: Coordinator, host: str, lines: list[str]) -> None:
    """What the coordinator does with one agent's output: its pump, then its message handling."""
    coord._pump(host, LinesAgent(host, lines))
    state: dict[str, Any] = {"finishing": True}
    while True:
        try:
            h, msg = coord.q.get_nowait()
        except queue.Empty:
            return
        coord._handle(h, msg, state)


def good_row(coord: Coordinator, **change: Any) -> dict[str, Any]:
    row = {
        "run_id": coord.plan.run_id, "collective": "all_reduce", "backend": "gloo", "pattern": "world",
        "hosts": ["h0", "h1"], "ranks": 2, "round": None, "bytes": 1024, "count": 256, "dtype": "float",
        "op": "sum", "in_place": False, "iters": 20, "warmup": 5, "time_us": 10.0, "time_us_min": 9.0,
        "time_us_max": 11.0, "rank_time_us": [9.0, 11.0], "algbw_GBps": 0.1, "busbw_GBps": 0.1,
        "wrong": 0, "status": "ok", "error": None, "group": "world", "device": "cpu",
    }
    return {**row, **change}


def line(obj: Any) -> str:
    return messages.PREFIX + json.dumps(obj) + "\n"


class BrokenAgent(LinesAgent):
    """An agent whose channel breaks after its lines (SSH dropped, a log stream cut)."""

    def lines(self):  # noqa: ANN201
        yield from self._lines
        raise OSError("connection reset")


@pytest.mark.parametrize(
    ("state", "down"),
    [({}, True), ({"finishing": True}, False), ({"finishing": True, "stopping": True}, False)],
)
def test_a_channel_lost_mid_run_is_a_host_fault_once_every_phase_ended_it_is_not(
    state: dict[str, Any], down: bool
) -> None:
    coord, stored = make_coordinator()
    coord._pump("h0", BrokenAgent("h0", [line({"type": "row", "phase": 0, "row": good_row(coord)})]))
    while not coord.q.empty():
        coord._handle(*coord.q.get_nowait(), state)
    assert len(stored) == 1  # what it said before is kept either way
    assert ("h0" in coord.outcome.down_hosts) is down
    assert [f.message for f in coord.outcome.faults] == (
        ["host h0: lost contact ('OSError: connection reset')"] if down else []
    )


def test_a_valid_row_is_stored() -> None:
    coord, stored = make_coordinator()
    feed(coord, "h0", [line({"type": "row", "phase": 0, "row": good_row(coord)})])
    assert len(stored) == 1 and not coord.outcome.faults


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"collective": "evil"}, "known collective"),
        ({"hosts": "h0"}, "list of host names"),
        ({"hosts": [["h0"], "h1"]}, "list of host names"),
        ({"time_us": "fast"}, "'time_us'"),
        ({"busbw_GBps": math.inf}, "busbw_GBps"),
        ({"busbw_GBps": math.nan}, "busbw_GBps"),
        ({"bytes": None}, "'bytes'"),
        ({"bytes": 10**400}, "'bytes'"),
        ({"ranks": True}, "'ranks'"),
        ({"hosts": ["h0", "h9"]}, "hosts is not the plan's"),
        ({"group": "pair:h0|h9"}, "not in world"),
        ({"run_id": "another-run"}, "run_id is not the plan's"),
    ],
)
def test_an_invalid_row_is_its_hosts_fault_and_never_stored(change: dict[str, Any], why: str) -> None:
    coord, stored = make_coordinator()
    row = good_row(coord, **change)
    text = messages.PREFIX + json.dumps({"type": "row", "phase": 0, "row": row}, allow_nan=True) + "\n"
    feed(coord, "h1", [text, line({"type": "row", "phase": 0, "row": good_row(coord)})])
    assert stored == []  # neither the bad row nor anything the host sent after it
    assert coord.outcome.down_hosts == {"h1"}
    (fault,) = coord.outcome.faults
    assert fault.kind == "protocol" and fault.host == "h1"
    assert "invalid message" in fault.message and why in fault.message


def test_a_row_is_not_a_string_nor_a_message_of_another_hosts_rank() -> None:
    coord, stored = make_coordinator()
    feed(coord, "h0", [line({"type": "row", "phase": 0, "row": "a string"})])
    feed(coord, "h1", [line({"type": "bye", "rank": 0})])  # rank 0 is h0's
    assert stored == [] and coord.outcome.down_hosts == {"h0", "h1"}
    assert "rank 0, not one of this host's" in coord.outcome.faults[1].message


def test_escape_sequences_in_a_bad_line_are_quoted_not_sent_to_the_terminal() -> None:
    coord, _ = make_coordinator()
    notes: list[str] = []
    coord.on_note = notes.append
    feed(coord, "h0", [messages.PREFIX + '{"type": "\x1b]0;owned\x07\x1b[2J"}\n'])
    assert notes and "\x1b" not in notes[0] and "\x07" not in notes[0]
    assert "\\x1b" in notes[0]


def test_terminal_safe_escapes_controls_but_keeps_text() -> None:
    from netbench.common.text import terminal_safe

    assert terminal_safe("ok\tA\n\x1b[31mB\x9b\u202e") == "ok\tA\n\\x1b[31mB\\x9b\\u202e"
    assert terminal_safe("a\nb", keep_newlines=False) == "a\\nb"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=5),
    max_leaves=20,
)
message_like = st.fixed_dictionaries(
    {"type": st.sampled_from(sorted(messages.SCHEMAS) + ["agent_error", "evil"])},
    optional={
        "rank": st.integers(-2, 3) | json_values,
        "phase": st.integers(-1, 2) | json_values,
        "group": st.sampled_from(["world", "?"]) | json_values,
        "row": st.fixed_dictionaries({}, optional={"collective": json_values, "hosts": json_values})
        | json_values,
        "rc": json_values,
        "error": json_values,
        "info": json_values,
    },
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.binary(max_size=200) | message_like | json_values, min_size=1, max_size=6))
def test_arbitrary_agent_output_never_raises_nor_becomes_a_measurement(items: list[Any]) -> None:
    coord, stored = make_coordinator()
    lines = []
    for item in items:
        if isinstance(item, bytes):
            lines.append(messages.PREFIX + item.decode("utf-8", "replace") + "\n")
        else:
            lines.append(messages.PREFIX + json.dumps(item, allow_nan=True) + "\n")
    feed(coord, "h1", lines)
    assert stored == []  # nothing here is a row of this run's plan
    invalid = 0
    for text in lines:
        try:
            messages.decode(text)
        except messages.ProtocolError:
            invalid += 1
    if invalid:  # a host that broke the protocol is never a clean run
        assert "h1" in coord.outcome.down_hosts and coord.outcome.faults


# -- the store's secret ------------------------------------------------------------------------------
def test_a_client_without_the_secret_cannot_inject_a_row_or_release_a_phase() -> None:
    import datetime as _dt

    import torch.distributed as dist

    from netbench.agents.launchers import PLAN_KEY, host_plan_key, new_secret, open_server, secured
    from netbench.sites.external.store import StoreAgent

    raw, sock = open_server("127.0.0.1")
    try:
        assert sock.getsockname()[0] == "127.0.0.1"  # not every interface
        secret = new_secret()
        ours = secured(raw, secret)
        sink = messages.StoreSink(ours, 0)
        sink(line({"type": "bye", "rank": 0}))
        port = sock.getsockname()[1]
        intruder = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=_dt.timedelta(seconds=5))
        fake = line({"type": "row", "phase": 0, "row": {"collective": "all_reduce"}})
        for prefix in ("", "netbench/", "netbench//"):  # the names an intruder can know
            intruder.set(prefix + "msg/0/1", fake)
            intruder.set(prefix + "msg/0/2", fake)
            intruder.add(prefix + "msgn/0", 2)
            intruder.set(prefix + "go/0", "[]")
            intruder.set(prefix + PLAN_KEY, "{}")
            intruder.set(prefix + host_plan_key("h0"), "{}")
        got = list(StoreAgent("h0", ours, [0]).lines())
        assert [messages.decode(x)["type"] for x in got] == ["bye"]  # only our own line
        assert not ours.check(["go/0"])  # no phase released
        assert not ours.check([PLAN_KEY]) and not ours.check([host_plan_key("h0")])  # no plan
    finally:
        sock.close()


def test_a_local_run_keeps_its_secret_off_every_command_line(tmp_path: Path) -> None:
    """A real local run (2 gloo ranks): while it runs, no process's command line holds the secret,
    and an intruder that writes the old, unsecret keys neither stops nor changes it."""
    import datetime as _dt

    import torch.distributed as dist

    from netbench.agents.launchers import PLAN_KEY, host_plan_key
    from netbench.common.rundir import RunDir
    from netbench.run.execute import RunSettings, execute
    from netbench.sites.local.launcher import LocalLauncher

    seen: dict[str, Any] = {}

    class Watching(LocalLauncher):
        def start(self, slot, store_addr, store_port, secret):  # noqa: ANN001, ANN201
            agent = super().start(slot, store_addr, store_port, secret)
            wait = _dt.timedelta(seconds=5)
            intruder = dist.TCPStore(store_addr, store_port, is_master=False, timeout=wait)
            for prefix in ("", "netbench/"):
                intruder.set(prefix + "go/0", "[]")  # would release the phase with no groups
                intruder.set(prefix + PLAN_KEY, "{}")  # would give the ranks an empty plan
                intruder.set(prefix + host_plan_key(slot.host), "{}")
            seen["secret"] = secret
            seen["cmdlines"] = []
            return agent

    req = PlanRequest(measure=MeasureOptions(collectives=["all_reduce"], min_bytes=1024, max_bytes=4096))
    slots = [HostSlot(host="local", nprocs=2, rank_base=0)]
    rundir = RunDir.create(tmp_path / "run")
    plan = build_plan(req, rundir.run_id, slots, "gloo")

    def on_progress(*_: object) -> None:  # ranks are running: read every command line now
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                seen["cmdlines"].append(Path(f"/proc/{pid}/cmdline").read_bytes())
            except OSError:
                pass

    from netbench.run.progress import Progress

    progress = Progress()
    progress.update = on_progress  # type: ignore[method-assign]
    out = execute(plan, slots, Watching(), rundir, RunSettings("local"), lambda _: None, progress)
    assert out.status == "completed" and not out.faults
    assert out.rows == 3 * 2 and all(r["status"] == "ok" for r in rundir.read_rows())
    assert seen["cmdlines"] and not [c for c in seen["cmdlines"] if seen["secret"].encode() in c]


def test_a_text_past_the_stores_message_limit_reaches_the_reader_whole() -> None:
    """torch's TCPStore (libuv, its default) resets the connection of a value over 8 MiB: the re-test
    plan of a 4,096-node sweep (12 MB) killed every rank when ranks read the whole plan. Every text in
    the store (each host's part of a plan too) goes in pieces (``put_text``) and is read whole
    (``get_text``), through a real store: here a whole 300-node plan, far past the limit."""
    import datetime as _dt

    import torch.distributed as dist
    from netbench.collectives.plan import WorkerPlan

    from netbench.agents.launchers import (
        STORE_VALUE_BYTES,
        get_text,
        new_secret,
        open_server,
        put_text,
        secured,
    )

    slots = [HostSlot(host=f"n{i:03d}", nprocs=8, rank_base=8 * i) for i in range(300)]
    req = PlanRequest(
        measure=MeasureOptions(collectives=["all_reduce"]), patterns=["pairwise"], pair_sizes=[1 << 30]
    )
    plan = build_plan(req, "run-big", slots, "nccl")
    text = plan.to_json()
    assert len(text.encode()) > max(2 * STORE_VALUE_BYTES, 8 << 20)  # several pieces, past the limit
    raw, sock = open_server("127.0.0.1")
    try:
        secret = new_secret()
        put_text(secured(raw, secret), "plan", plan.json_chunks())
        client = dist.TCPStore("127.0.0.1", sock.getsockname()[1], is_master=False,
                               timeout=_dt.timedelta(seconds=30))
        got = get_text(secured(client, secret), "plan", _dt.timedelta(seconds=30))
    finally:
        sock.close()
    assert got == text
    assert WorkerPlan.from_json(got).phases[-1].groups[-1].hosts == plan.phases[-1].groups[-1].hosts
