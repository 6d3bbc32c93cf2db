"""The Slurm pieces without a cluster: what Slurm prints and puts in the environment is untrusted."""

from __future__ import annotations

import pytest
from netbench.inventory.topology import parse_topology

from netbench.sites.registry import default_launcher as _default_launcher
from netbench.sites.slurm.launcher import StepEvents
from netbench.sites.slurm.scontrol import (
    Allocation,
    SlurmError,
    drain_node,
    drain_reason,
    is_down,
    parse_node_states,
)
from netbench.sites.slurm.step import split_tasks

# `scontrol show topology` of tests/slurm.py's cluster (Slurm 22.05.8): an upper switch lists every
# node below it, and each line carries Level=
SHOW_TREE = """SwitchName=sw0 Level=0 LinkSpeed=1 Nodes=h0,h1
SwitchName=sw1 Level=0 LinkSpeed=1 Nodes=h2
SwitchName=spine Level=1 LinkSpeed=1 Nodes=h[0-2] Switches=sw0,sw1
"""
# topology/block's form of it (Slurm 23.11+)
SHOW_BLOCK = """BlockName=b1 BlockIndex=0 Nodes=n[1-4] BlockSize=4
BlockName=b2 BlockIndex=1 Nodes=n[5-8] BlockSize=4
"""


def test_scontrol_show_topology_parses_like_topology_conf() -> None:
    topo = parse_topology(SHOW_TREE, "scontrol show topology")
    assert topo.warnings == []
    assert topo.uplinks() == {"h0": "sw0", "h1": "sw0", "h2": "sw1", "sw0": "spine", "sw1": "spine"}
    assert topo.hop_class("h0", "h1") == "leaf" and topo.hop_class("h0", "h2") == "spine"
    block = parse_topology(SHOW_BLOCK, "scontrol show topology")
    assert block.warnings == [] and block.kind == "block" and block.leaf_of("n6") == "b2"


def test_allocation_from_env_validates_slurms_node_list() -> None:
    alloc = Allocation.from_env({"SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "gpu[01-03]"})
    assert alloc == Allocation(job_id="42", nodes=["gpu01", "gpu02", "gpu03"], in_step=False)
    assert Allocation.from_env({}) is None
    assert Allocation.from_env({"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "a", "SLURM_STEP_ID": "0"}).in_step
    with pytest.raises(SlurmError, match="not allowed"):
        Allocation.from_env({"SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "h1,$(reboot)"})
    with pytest.raises(SlurmError, match="not a job id"):
        Allocation.from_env({"SLURM_JOB_ID": "42;x", "SLURM_JOB_NODELIST": "h1"})


@pytest.mark.parametrize("env, expected", [
    ({"SLURM_JOB_ID": "3", "SLURM_JOB_NODELIST": "h[0-2]"}, "slurm"),
    ({"SLURM_JOB_ID": "3", "SLURM_JOB_NODELIST": "h0"}, "ssh"),  # one node: this machine's sweep
    ({"SLURM_JOB_ID": "3", "SLURM_JOB_NODELIST": "h[0-2]", "SLURM_STEP_ID": "1"}, "ssh"),  # a rank
    ({}, "ssh"),
])
def test_default_launcher_is_slurm_only_in_an_allocation_of_several_nodes(monkeypatch, env, expected) -> None:
    for key in ("SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_NODELIST", "SLURM_STEP_ID"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert _default_launcher(None) == expected
    assert _default_launcher("hosts.txt") == "ssh"


@pytest.mark.parametrize("node", ["h[1-2]", "h1,h2", "fe80::1", "h1 State=RESUME", "-h1", ""])
def test_drain_refuses_names_that_are_not_one_node(monkeypatch, node: str) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")  # scontrol would say "not found": it must not be reached
    with pytest.raises(SlurmError, match="will not drain"):
        drain_node(node, "slow")


def test_drain_reason_is_one_short_printable_line() -> None:
    reason = drain_reason("gpu_count_low: h1:\n0 GPUs\x1b[31m " + "x" * 500)
    assert reason.startswith("netbench: gpu_count_low: h1: 0 GPUs\\x1b[31m x")
    assert "\n" not in reason and len(reason) == 200


def test_step_events_say_why_an_agents_step_ended() -> None:
    ev = StepEvents()
    ev.read("slurmstepd: error: *** STEP 12.1 ON h0 CANCELLED AT 2026-12-01T04:50:58 DUE TO TIME LIMIT ***\n")
    assert ev.describe() == "Slurm cancelled step 12.1 on h0 (DUE TO TIME LIMIT)"
    lost = StepEvents()
    lost.read("srun: error: h$(x): task 0: Killed\n")  # not a node name: not repeated
    assert lost.describe() is None
    lost.read("srun: error: h2: task 0: Killed\n")
    assert lost.describe() == "Killed"
    assert StepEvents().describe() is None
    failed = StepEvents()
    for line in ("slurmstepd-h2: error: *** STEP 1.3 ON h2 CANCELLED AT 2026-12-01T04:56:38 DUE TO "
                 "NODE FAILURE ***",
                 "srun: error: h2: task 0: Terminated",  # a consequence of the cancellation
                 "srun: error: Node failure on h2"):  # srun's two lines race: the cause wins
        failed.read(line + "\n")
    assert failed.describe() == ("Slurm cancelled step 1.3 on h2 (DUE TO NODE FAILURE); "
                                 "node failure: its slurmd stopped answering")


def test_split_tasks_maps_tasks_to_the_nodes_asked_only() -> None:
    out = "\n".join([
        "0: @@netbench-node h0 n0nce@@", "0: probe output of h0",
        "1: @@netbench-node h9 n0nce@@", "1: h9 was never asked for",
        "2: @@netbench-node h1 wrong@@", "2: a marker without the nonce",
        "3: probe output first", "3: @@netbench-node h2 n0nce@@",  # not its first line: no marker
        "4: @@netbench-node h0 n0nce@@", "4: a second claim on h0",
    ])
    assert split_tasks(out, ["h0", "h1", "h2"], "n0nce") == {0: ("h0", ["probe output of h0"])}


@pytest.mark.parametrize("status, expected", [("interrupted", ["run_incomplete"]), ("completed", [])])
def test_a_run_that_ended_early_never_reads_pass(status: str, expected: list[str]) -> None:
    from netbench.reports.context import AnalysisContext
    from netbench.reports.rules import errors

    row = {"pattern": "pair", "hosts": ["h0", "h1"], "status": "ok", "bytes": 1 << 20,
           "collective": "all_reduce", "busbw_GBps": 1.0, "wrong": 0}
    ctx = AnalysisContext.from_data([row], run={"status": status, "error": "Slurm cancelled step 3.1 on h0"})
    found = errors.RULE.check(ctx)
    assert [f.rule for f in found] == expected
    assert all(f.severity == "warn" and "Slurm cancelled step 3.1 on h0" in f.title for f in found)


# `sinfo -N -h -o '%N %T'` on tests/slurm.py's cluster (Slurm 22.05.8) once h2's slurmd was killed
SINFO_NODE_DOWN = "h0 allocated\nh1 allocated\nh2 down*\n"


def test_node_states_from_sinfo_keep_only_the_steps_nodes_and_plain_states() -> None:
    states = parse_node_states(SINFO_NODE_DOWN + "h3 down*\nh1;reboot idle\nh0 \x1b[2Jdown\nh1 idle extra\n",
                               ["h0", "h1", "h2"])
    assert states == {"h0": "allocated", "h1": "allocated", "h2": "down*"}
    assert [n for n, s in states.items() if is_down(s)] == ["h2"]
    assert is_down("idle*") and is_down("fail") and not is_down("drained") and not is_down("mixed")


def test_step_events_ask_slurm_when_srun_named_no_cause(monkeypatch) -> None:
    import netbench.sites.slurm.scontrol as slurm

    monkeypatch.setattr(slurm, "nodes_down", lambda nodes: {"h2": "down*"} if "h2" in nodes else {})
    ev = StepEvents()
    ev.read("slurmstepd-h2: error: *** STEP 1.3 ON h2 CANCELLED AT 2026-12-01T04:56:38 DUE TO NODE "
            "FAILURE ***\n")
    ev.ask_slurm("h2")
    assert ev.describe() == "Slurm cancelled step 1.3 on h2 (DUE TO NODE FAILURE); Slurm reports it down*"

    def no_slurm(nodes: list[str]) -> dict[str, str]:
        raise SlurmError("sinfo not found on PATH")

    monkeypatch.setattr(slurm, "nodes_down", no_slurm)
    quiet = StepEvents()
    quiet.ask_slurm("h0")
    assert quiet.describe() is None


def test_torch_noise_never_reaches_stderr_while_the_store_lives() -> None:
    """The store's C++ logger writes to fd 2 itself: the filter works at the fd, keeps the rest."""
    import subprocess
    import sys

    code = ("import os, sys\n"
            "from netbench.agents.launchers import without_torch_noise\n"
            "with without_torch_noise():\n"
            "    os.write(2, b'[W1201 socket.cpp:207] [c10d] The hostname of the client socket cannot be "
            "retrieved. err=-3\\n')\n"
            "    os.write(2, b'a real warning\\n')\n"
            "    print('from python', file=sys.stderr)\n"
            "print('after', file=sys.stderr)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stderr == "a real warning\nfrom python\nafter\n"
