"""Probe this machine: run probe.sh with ``sh -s`` (no SSH) and assemble a NodeInventory.

The same script and the same assembler serve the SSH collector, so a local run exercises exactly
the code path a remote node goes through.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
from importlib import resources

from netbench.inventory.assemble import build_inventory, split_sections
from netbench.inventory.model import NodeInventory


def read_probe_script() -> str:
    """The text of inventory/probe.sh (package data, so it works from a wheel too)."""
    return resources.files("netbench.inventory").joinpath("probe.sh").read_text(encoding="utf-8")


def probe_local(python: str | None = None, timeout: float = 60, env: dict[str, str] | None = None,
                labels: dict[str, str] | None = None, host: str | None = None) -> NodeInventory:
    """Run the probe here and return this host's inventory.

    ``python`` is the interpreter asked for python/torch/NCCL versions (default: the one running
    netbench, since that is the one that will run the benchmark). ``env`` is added to the probe's
    environment (tests use it to put fake tools first on PATH). A probe that hangs past ``timeout``
    yields a record with status ``timeout`` instead of an exception.
    """
    nonce = secrets.token_hex(8)
    host = host or socket.gethostname()
    argv = ["sh", "-s", "--", python or sys.executable, nonce]
    start = time.monotonic()
    try:
        proc = subprocess.run(argv, input=read_probe_script().encode(), capture_output=True,
                              timeout=timeout, env={**os.environ, **(env or {})}, check=False)
    except subprocess.TimeoutExpired:
        return NodeInventory(host=host, labels=dict(labels or {}), status="timeout",
                             error=f"local probe did not finish in {timeout:g} s")
    except OSError as e:
        return NodeInventory(host=host, labels=dict(labels or {}), status="error",
                             error=f"cannot run sh: {e}")
    text = proc.stdout.decode("utf-8", errors="replace")
    inv = build_inventory(host, split_sections(text, nonce=nonce), labels=labels)
    inv.probe_seconds = round(time.monotonic() - start, 3)
    if proc.returncode != 0 and inv.status == "ok":
        inv.status = "partial"
        inv.error = f"probe exited {proc.returncode}: {proc.stderr.decode(errors='replace').strip()[:200]}"
    return inv
