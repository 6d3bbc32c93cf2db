"""``netbench history changes`` ties a link's or a switch's persistent loss to the environment changes
between its last good and first bad run (issue 49), as it does a node's: a link's on either end, a
switch's on the hosts behind it (only a change most of them made), each tested across the fleet's
hosts. On a simulated 64-node history (4 leaves, 24 nights) with planted events:

- tied: a NIC firmware rollout to 4 hosts on night 8 after which every link among them lost 30%
  (each end changed, no other host's links lost: the firmware is named), and an NCCL rollout to 12
  of leaf02's 16 hosts on night 10 after which its cross-switch pairs lost 15%;
- untied: a link lost 30% on night 12 while a driver rollout hit one of its ends and 7 other hosts
  that lost nothing (said, not blamed); a link lost 30% on night 16 with nothing changed; leaf03 lost
  15% on night 18 while 4 of its 16 hosts moved NCCL (a minority: not the switch's change); leaf04
  lost 15% on night 20 while a kernel rollout hit 12 of its hosts and all 16 of leaf01, which lost
  nothing (said, not blamed).

A switch's figure (its cross-switch pairs against their class) is written into the store's files, as
tests/test_history_robust.py writes a link's: the simulator plants no uplink fault."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from netbench.history.store import HistoryStore
from netbench.sim.nightly import Event, History, write_history

ROLLOUT = ("node0002", "node0019", "node0035", "node0051")  # one on each leaf
TIED_LINKS = [",".join(p) for p in itertools.combinations(ROLLOUT, 2)]
COINCIDENT, LONE = "node0005,node0040", "node0010,node0060"
SWITCH_LOSS = {"leaf02": 10, "leaf03": 18, "leaf04": 20}


def hosts(first: int, last: int) -> tuple[str, ...]:
    return tuple(f"node{i:04d}" for i in range(first, last + 1))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("attr") / "store"
    events = [
        Event("benign", 8, ROLLOUT, 0.0, "nic_firmware", "28.41.1000"),
        *(Event("link", 8, tuple(link.split(",")), 0.3) for link in TIED_LINKS),
        Event("link", 12, tuple(COINCIDENT.split(",")), 0.3),
        Event("benign", 12, ("node0005", "node0006", "node0007", "node0020", "node0021", "node0044",
                             "node0045", "node0060"), 0.0, "driver_version", "580.105.08"),
        Event("link", 16, tuple(LONE.split(",")), 0.3),
        Event("benign", 10, hosts(17, 28), 0.0, "nccl", "2.28.3"),
        Event("benign", 18, hosts(33, 36), 0.0, "nccl", "2.28.3"),
        Event("benign", 20, hosts(1, 16) + hosts(49, 60), 0.0, "kernel", "6.8.0-60"),
    ]
    write_history(History(nodes=64, nights=24, noise=0.03, shape="normal", seed=11, events=events),
                  HistoryStore(path))
    for night, f in enumerate(sorted((path / "switches").glob("*.parquet"))):
        t = pq.read_table(f)
        lost = [night >= SWITCH_LOSS.get(name, 99) for name in t.column("switch").to_pylist()]
        effect = t.column("effect").to_numpy(zero_copy_only=False) + np.where(lost, np.log(0.85), 0.0)
        pq.write_table(t.set_column(t.schema.get_field_index("effect"), "effect",
                                    pa.array(effect, pa.float32())), f)
    return path


def netbench(store: Path, *args: str) -> str:
    res = subprocess.run([sys.executable, "-m", "netbench", "history", "changes", *args], capture_output=True,
                         text=True, env=os.environ | {"NETBENCH_HISTORY": str(store)}, timeout=300)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_links_and_switches_are_tied_to_what_changed_on_their_hosts(store: Path) -> None:
    found = {c["entity"]: c for c in json.loads(netbench(store, "--format", "json"))["changes"]}
    assert sorted(found) == sorted([*TIED_LINKS, COINCIDENT, LONE, *SWITCH_LOSS]), sorted(found)
    for link in TIED_LINKS:
        c = found[link]
        assert c["kind"] == "link" and c["first_bad"].endswith("n008") and c["likely_cause"] == "nic_firmware"
        (e,) = c["env"]
        assert e["at"] == "at both ends"
        assert (e["changed"], e["lost_changed"], e["lost_unchanged"]) == (4, 4, 0)
    (sw,) = found["leaf02"]["env"]
    assert found["leaf02"]["likely_cause"] == "nccl" and found["leaf02"]["first_bad"].endswith("n010")
    assert sw["at"] == "12 of 16 hosts behind it" and (sw["old"], sw["new"]) == ("2.27.3", "2.28.3")


def test_no_change_is_blamed_for_an_untied_loss(store: Path) -> None:
    found = {c["entity"]: c for c in json.loads(netbench(store, "--format", "json"))["changes"]}
    untied = [COINCIDENT, LONE, "leaf03", "leaf04"]
    assert [found[e]["likely_cause"] for e in untied] == [None] * 4
    assert not [e for name in untied for e in found[name]["env"] if e["likely_cause"]]
    (driver,) = found[COINCIDENT]["env"]  # said where it was made, and that it is not tied
    assert (driver["field"], driver["at"], driver["lost_changed"]) == ("driver_version", "at node0005", 1)
    assert found[LONE]["env"] == [] and found["leaf03"]["env"] == []  # 4 of 16 hosts: not the switch's
    (kernel,) = found["leaf04"]["env"]
    assert (kernel["field"], kernel["at"], kernel["changed"]) == ("kernel", "12 of 16 hosts behind it", 28)


def test_the_terminal_and_markdown_say_it(store: Path) -> None:
    text = netbench(store, "--kind", "switch")
    (row,) = [line for line in text.splitlines() if line.startswith("switch  leaf02")]
    assert "nccl 2.27.3 -> 2.28.3 (12 of 16 hosts behind it) on 12 hosts" in row and "the likely cause" in row
    assert "12 of them lost 15% through their switch (leaf02)" in text
    assert "the nccl change is the likely cause" in text and "kernel change is the likely" not in text
    md = netbench(store, "--kind", "link", "--format", "markdown")
    (row,) = [line for line in md.splitlines() if f"| {COINCIDENT} |" in line]
    assert "driver_version 580.95.05 -> 580.105.08 (at node0005) on 8 hosts" in row and "not tied" in row
    assert "through their links (node0002-node0019, " in md
