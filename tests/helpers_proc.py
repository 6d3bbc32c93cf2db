"""Process-tree helpers for tests that kill or stop real ranks (reads /proc, no extra packages)."""

from __future__ import annotations

import os
from pathlib import Path


def children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid:
            out.append(int(d.name))
    return out


def descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in children(p):
            out.append(c)
            todo.append(c)
    return out


def cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return []


def rank_of(pid: int) -> int | None:
    """The global rank process ``pid`` runs, None for any other process: ``nb-rank-N`` (its name,
    a rank its agent forked: ``netbench.agents.zygote.Zygote``) or ``netbench.agents.worker rank --rank N`` (a
    rank a launcher started)."""
    try:
        name = Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None
    if name.startswith("nb-rank-") and name[len("nb-rank-"):].isdigit():
        return int(name[len("nb-rank-"):])
    cmd = cmdline(pid)
    if "netbench.agents.worker" in cmd and "rank" in cmd and "--rank" in cmd:
        return int(cmd[cmd.index("--rank") + 1])
    return None


def rank_pids(root_pid: int) -> dict[int, int]:
    """Global rank -> pid of every rank process under ``root_pid``."""
    return {rank: p for p in descendants(root_pid) if (rank := rank_of(p)) is not None}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
