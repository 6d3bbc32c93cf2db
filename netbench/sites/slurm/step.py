"""Inventory inside a Slurm allocation: the probe as one job step on every node, no SSH.

Why: inside ``salloc``/``sbatch`` the nodes are Slurm's, and SSH to them is often closed to users
(pam_slurm_adopt) or not set up at all; ``srun`` reaches every node of the allocation already.
One step, one task per node, the same ``inventory/probe.sh`` on every task's stdin
(``--input=all``) and the same assembler as the SSH collector, so the records are identical.

srun merges the tasks' stdout; ``--label`` prefixes each line with the task id. Each task first
prints a marker with the node Slurm started it on (``SLURMD_NODENAME``), so a task id maps to a
node without assuming srun's placement; the name must be one we asked for, and only the task's
first line can be its marker (probe output cannot claim another node).
"""

from __future__ import annotations

import re
import secrets
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass

from netbench.common.text import quote_untrusted
from netbench.defaults import INVENTORY_TIMEOUT_S
from netbench.inventory.assemble import build_inventory, split_sections
from netbench.inventory.local import read_probe_script
from netbench.inventory.model import NodeInventory, check_can_run
from netbench.sites.slurm.scontrol import slurm_tool

_LABELLED = re.compile(r"^\s*(\d+): ?(.*)$")
_MARK = "@@netbench-node "
# the task's first line, then the probe itself with the python and the nonce as its arguments
_TASK = 'printf "@@netbench-node %s %s@@\\n" "$SLURMD_NODENAME" "$2"; exec sh -s -- "$1" "$2"'


@dataclass(frozen=True)
class StepResult:
    """What one ``srun`` step printed, split by task: task id -> (node, its lines)."""

    tasks: dict[int, tuple[str, list[str]]]
    stderr: str
    returncode: int | None  # None: killed at the timeout


def srun_probe_argv(nodes: Sequence[str], python: str, nonce: str) -> list[str]:
    """``srun`` running the probe once on each of ``nodes`` (names already validated)."""
    n = str(len(nodes))
    return [slurm_tool("srun"), f"--nodelist={','.join(nodes)}", "--nodes", n, "--ntasks", n,
            "--ntasks-per-node=1", "--label", "--input=all", "--kill-on-bad-exit=0",
            "--job-name=netbench-inventory", "sh", "-c", _TASK, "sh", python, nonce]


def split_tasks(out: str, nodes: Sequence[str], nonce: str) -> dict[int, tuple[str, list[str]]]:
    """srun's labelled stdout -> task id -> (node, lines). Tasks whose first line is not a valid
    marker for one of ``nodes`` are dropped (their node counts as not probed)."""
    lines: dict[int, list[str]] = {}
    for raw in out.splitlines():
        m = _LABELLED.match(raw)
        if m:
            lines.setdefault(int(m.group(1)), []).append(m.group(2))
    tasks: dict[int, tuple[str, list[str]]] = {}
    claimed: set[str] = set()
    for task, body in sorted(lines.items()):
        first = body[0] if body else ""
        if not (first.startswith(_MARK) and first.endswith(f" {nonce}@@")):
            continue
        node = first[len(_MARK):-len(f" {nonce}@@")]
        if node in nodes and node not in claimed:
            claimed.add(node)
            tasks[task] = (node, body[1:])
    return tasks


def run_probe_step(nodes: Sequence[str], python: str, timeout_s: float) -> tuple[StepResult, str]:
    """Run the step; (its output by task, the nonce the probe headers carry)."""
    nonce = secrets.token_hex(8)
    proc = subprocess.Popen(srun_probe_argv(nodes, python, nonce), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(read_probe_script().encode(), timeout=timeout_s)
        rc: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        # srun cancels its step on the first SIGINT after a second one within a second
        for _ in range(2):
            proc.send_signal(signal.SIGINT)
            time.sleep(0.2)
        try:
            out, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        rc = None
    text = out.decode("utf-8", errors="replace")
    return StepResult(split_tasks(text, nodes, nonce), err.decode("utf-8", errors="replace"), rc), nonce


def _why_missing(node: str, stderr: str, timed_out: bool, timeout_s: float) -> str:
    """srun's own line about the node (``srun: error: h2: ...``), else a generic reason."""
    for line in stderr.splitlines():
        if node in line and "error" in line:
            return quote_untrusted(line.strip(), limit=200)
    if timed_out:
        return f"the inventory step did not finish on {node} within {timeout_s:g} s"
    return f"the inventory step printed nothing from {node}"


def collect_inventory_srun(
    nodes: Sequence[str], python: str, timeout_s: float = INVENTORY_TIMEOUT_S
) -> list[NodeInventory]:
    """One record per node, in ``nodes`` order; a node the step did not reach is a record with
    status ``unreachable`` and srun's reason, never an exception."""
    start = time.monotonic()
    step, nonce = run_probe_step(nodes, python, timeout_s)
    seconds = round(time.monotonic() - start, 3)
    by_node = {node: body for node, body in step.tasks.values()}
    records = []
    for node in nodes:
        if node not in by_node:
            why = _why_missing(node, step.stderr, step.returncode is None, timeout_s)
            records.append(NodeInventory(host=node, status="unreachable", error=why, probe_seconds=seconds))
            continue
        inv = build_inventory(node, split_sections("\n".join(by_node[node]) + "\n", nonce=nonce))
        inv.probe_seconds = seconds
        inv.ranks_python = True  # srun starts the ranks with the python the probe asked
        records.append(check_can_run(inv))
    return records
