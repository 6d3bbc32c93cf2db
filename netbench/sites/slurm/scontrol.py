"""Slurm seen from inside an allocation: its nodes, its switches, and draining a node.

Why here (the bottom layer): the sweep, preflight and the inventory step all need the allocation's
node list and ``scontrol``; one place decides how they are read. Everything Slurm prints or puts in
the environment is untrusted: node names are validated like hosts-file names before they reach a
command line, and every command is an argv list (never a shell).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from netbench.common.errors import UsageError
from netbench.common.text import terminal_safe
from netbench.inventory.hosts import expand_hostnames, validate_hostname
from netbench.inventory.topology import Topology, parse_slurm_topology

SCONTROL_TIMEOUT_S = 15.0
DRAIN_PREFIX = "netbench: "
REASON_MAX = 200  # slurmctld keeps the reason in its state; a novel there helps nobody
ELLIPSIS = "..."  # a reason cut short says so (ASCII: slurmctld and sinfo's readers)
WORD_MAX = 40


class SlurmError(UsageError):
    """Slurm is not usable here (no scontrol, a bad node list, scontrol failing): one line, exit 2."""


@dataclass(frozen=True)
class Allocation:
    """The job this process runs in (``salloc``/``sbatch``): its id and its nodes, in Slurm's order."""

    job_id: str
    nodes: list[str]
    in_step: bool  # inside an ``srun`` step: a rank, not the process that starts them

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Allocation | None:
        """The allocation from ``SLURM_JOB_ID`` and ``SLURM_JOB_NODELIST``; None outside one."""
        e = os.environ if environ is None else environ
        job = e.get("SLURM_JOB_ID", "")
        if not job:
            return None
        if not job.isdigit():
            raise SlurmError(f"SLURM_JOB_ID={terminal_safe(job[:40])!r} is not a job id")
        nodelist = e.get("SLURM_JOB_NODELIST") or e.get("SLURM_NODELIST") or ""
        nodes = expand_hostnames(nodelist, "SLURM_JOB_NODELIST", SlurmError) if nodelist else []
        if not nodes:
            raise SlurmError("SLURM_JOB_ID is set but SLURM_JOB_NODELIST is empty")
        return cls(job_id=job, nodes=nodes, in_step="SLURM_STEP_ID" in e)


def slurm_tool(name: str) -> str:
    path = shutil.which(name)
    if not path:
        raise SlurmError(f"{name} not found on PATH (is this a Slurm login or compute node?)")
    return path


def scontrol(args: Sequence[str], timeout_s: float = SCONTROL_TIMEOUT_S) -> str:
    """``scontrol ARGS``'s stdout; a failure or a hang past ``timeout_s`` is a SlurmError."""
    argv = [slurm_tool("scontrol"), *args]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise SlurmError(f"scontrol {' '.join(args[:2])} did not answer within {timeout_s:g} s") from None
    if r.returncode != 0:
        said = (r.stderr or r.stdout).strip().splitlines()
        why = terminal_safe(said[-1], keep_newlines=False) if said else f"exit {r.returncode}"
        raise SlurmError(f"scontrol {' '.join(args[:2])}: {why[:200]}")
    return r.stdout


def show_topology(timeout_s: float = SCONTROL_TIMEOUT_S) -> tuple[str, Topology | None]:
    """``scontrol show topology`` (the raw text, the parsed switches); None when Slurm has none
    (``TopologyPlugin=topology/none`` prints a sentence, not switches)."""
    text = scontrol(["show", "topology"], timeout_s)
    topo = parse_slurm_topology(text, "scontrol show topology")
    return text, (topo if topo.switches else None)


def parse_node_states(text: str, nodes: Sequence[str]) -> dict[str, str]:
    """``sinfo -N -h -o '%N %T'``'s lines as node -> state, for ``nodes`` only: a line naming
    anything else, or a state that is not one of Slurm's words (``down*``, ``allocated+``), is
    skipped, so nothing but a known node name and a plain word leaves here."""
    asked = set(nodes)
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 2 or parts[0] not in asked or validate_hostname(parts[0]) is not None:
            continue
        if re.fullmatch(r"[a-z_]{1,30}[*~#!%$@^+-]?", parts[1]):
            out[parts[0]] = parts[1]
    return out


def is_down(state: str) -> bool:
    """Slurm holds the node lost: down or failing, or not responding (``*``)."""
    return state.startswith(("down", "fail")) or state.endswith("*")


def nodes_down(nodes: Sequence[str], timeout_s: float = SCONTROL_TIMEOUT_S) -> dict[str, str]:
    """Which of ``nodes`` Slurm holds down or not responding (node -> its state), from ``sinfo``;
    a failure or a hang past ``timeout_s`` is a SlurmError."""
    argv = [slurm_tool("sinfo"), "-N", "-h", "-o", "%N %T", "-n", ",".join(nodes)]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise SlurmError(f"sinfo did not answer within {timeout_s:g} s") from None
    if r.returncode != 0:
        said = r.stderr.strip().splitlines()
        why = terminal_safe(said[-1], keep_newlines=False) if said else f"exit {r.returncode}"
        raise SlurmError(f"sinfo: {why[:200]}")
    return {n: s for n, s in parse_node_states(r.stdout, nodes).items() if is_down(s)}


def drain_reason(why: str, where: str = "") -> str:
    """``netbench: <why> [<where>]`` on one printable line, short enough for slurmctld. ``where``
    (the run id and report path, so ``sinfo -R`` leads back to the evidence) always survives: the
    cut, when one is needed, is in ``why``."""
    flat = " ".join(terminal_safe(why).split())
    tail = f" [{' '.join(terminal_safe(where).split())[: REASON_MAX - 50]}]" if where else ""
    return DRAIN_PREFIX + _cut(flat, REASON_MAX - len(DRAIN_PREFIX) - len(tail)) + tail


def _cut(text: str, room: int) -> str:
    """``text`` in ``room`` characters: whole, or cut at a word's end with an ellipsis ("slower
    than..." rather than "slower tha"), so ``sinfo -R`` never shows half a word; a word longer than
    ``WORD_MAX`` (a path, a run of junk) is cut inside, as nothing shorter would be kept of it."""
    if len(text) <= room:
        return text
    head = text[: room - len(ELLIPSIS) + 1]  # one more: whether the cut fell on a word's end
    whole = head.rsplit(" ", 1)[0] if " " in head[-WORD_MAX:] else head[:-1]
    return whole.rstrip(" ,;:") + ELLIPSIS


def drain_command(node: str, why: str, where: str = "") -> list[str]:
    """The argv of ``scontrol update NodeName=NODE State=DRAIN Reason="netbench: WHY [WHERE]"``.

    The node name is validated first (it came from a hosts file, a probe or Slurm itself); the
    reason travels as one argv element, so nothing in it can reach a shell.
    """
    # a Slurm node name, not an address: no IPv6 colons (validate_hostname already refuses the
    # commas and brackets that would make NodeName= a list of nodes)
    problem = validate_hostname(node) or ("not a Slurm node name" if ":" in node else None)
    if problem:
        raise SlurmError(f"will not drain {terminal_safe(node[:60])!r}: {problem}")
    return ["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={drain_reason(why, where)}"]


def drain_node(node: str, why: str, where: str = "", timeout_s: float = SCONTROL_TIMEOUT_S) -> str:
    """Drain NODE (``drain_command``); returns the reason set."""
    argv = drain_command(node, why, where)
    scontrol(argv[1:], timeout_s)
    return argv[-1].removeprefix("Reason=")
