"""inventory.table: majority marking, failures, hostile text, JSON; built from real probe output."""

from __future__ import annotations

import json
from pathlib import Path

from fake_tools import H200_PROFILE, make_fake_tools, older_firmware_profile, probe_env
from netbench.inventory.local import probe_local
from netbench.inventory.model import NodeInventory
from netbench.inventory.table import differing, majority, render_json, render_table


def _probe(tmp: Path, name: str, profile: dict[str, str]) -> NodeInventory:
    tools = make_fake_tools(tmp / name, profile)
    return probe_local(python="/nonexistent/python", env=probe_env(tools), host=name)


def test_old_firmware_is_marked(tmp_path: Path) -> None:
    good = _probe(tmp_path, "n1", H200_PROFILE)
    old = older_firmware_profile(tmp_path)
    nodes = [good, _probe(tmp_path, "n2", H200_PROFILE), _probe(tmp_path, "n3", old),
             NodeInventory(host="n4", status="unreachable", error="connection refused by 10.0.0.4:22")]
    assert differing(nodes) == {"n1": set(), "n2": set(), "n3": {"NIC firmware"}, "n4": set()}
    text = render_table(nodes)
    rows = {ln.split()[0]: ln for ln in text.splitlines()[1:] if ln.strip() and ln.split()[0] in "n1n2n3n4"}
    assert "28.35.1012" in rows["n3"] and "*" in rows["n3"] and "*" not in rows["n1"]
    assert "unreachable" in rows["n4"] and "connection refused" in rows["n4"]
    assert "4 host(s): 3 inventoried, 1 unreachable" in text
    coloured = render_table(nodes, color=True)
    assert "\x1b[" in coloured and "\x1b[" not in text


def test_no_majority_no_marks_and_hostile_text() -> None:
    a = NodeInventory(host="a", driver_version="550.1")
    b = NodeInventory(host="b\x1b[2J", driver_version="535.2\x1b[31m")
    assert majority(["x", "y"]) == (False, None) and majority(["x", "x", "y"]) == (True, "x")
    assert differing([a, b]) == {"a": set(), "b\x1b[2J": set()}
    text = render_table([a, b])
    assert "\x1b" not in text and "b?[2J" in text


def test_json_is_the_records() -> None:
    nodes = [NodeInventory(host="a", driver_version="1"), NodeInventory(host="b", status="timeout")]
    data = json.loads(render_json(nodes))
    assert [NodeInventory.from_dict(d) for d in data] == nodes


def test_a_host_without_nccl4py_is_marked() -> None:
    """The host that would make ``--engine auto`` time through torch stands out (planner)."""
    fleet = [NodeInventory(host=f"n{i}", nccl4py=True, nccl4py_version="0.6.0") for i in range(3)]
    fleet.append(NodeInventory(host="n3", nccl4py=False))
    fleet.append(NodeInventory(host="n4"))  # a record from before nccl4py was asked
    marks = differing(fleet)
    assert marks["n3"] == {"nccl4py"} and marks["n4"] == {"nccl4py"} and marks["n0"] == set()
    rows = {ln.split()[0]: ln for ln in render_table(fleet).splitlines()[1:] if ln.strip()}
    assert "0.6.0" in rows["n0"] and " no*" in rows["n3"] and "-*" in rows["n4"]
