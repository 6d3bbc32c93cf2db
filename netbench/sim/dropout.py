"""GPUs that drop out in a sweep simulated without the coordinator (``sim.run``).

A real run records a rank that died the coordinator's way (``netbench.agents.coordinator``): the group it
died in fails with "lost: rank(s) [...] on HOST (rank R on host HOST exited with code 1 ...)", and
every later group of that host is not run, "not run: host HOST is down (...)". ``sim.run`` measures
phases directly for speed, so it writes those rows here in the same words; the report then reads
them exactly as it reads a real run's (``reports/rules/errors.py``: a host failing in most of its
pairs is named as the host). Preflight on the simulator needs none of this: its simulated ranks
run under the real coordinator (``sim.launcher``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from netbench.agents.launchers import HostSlot
from netbench.collectives.plan import GroupSpec, PairGroups, Phase, WorkerPlan
from netbench.common.rows import ResultRow, failed_row


@dataclass
class LostGpus:
    hosts: set[str]
    """Hosts with a GPU that falls off the bus at its first collective (the host's last rank's GPU)."""
    slots: dict[str, HostSlot]
    down: dict[str, str] = field(default_factory=dict)
    """Host -> why it is down, once its rank died."""

    def split(self, phase: Phase) -> tuple[Sequence[GroupSpec], list[GroupSpec]]:
        """The phase's groups that run, and those a lost GPU fails."""
        if not self.hosts:
            return phase.groups, []
        if isinstance(phase.groups, PairGroups):  # a pairwise round: by the hosts' positions
            gone = [i for i, h in enumerate(phase.groups.table.hosts) if h in self.hosts]
            hit = np.isin(phase.groups.index, gone).any(axis=1)
            return phase.groups[~hit], list(phase.groups[hit])
        lost = [g for g in phase.groups if set(g.hosts) & self.hosts]
        return [g for g in phase.groups if not set(g.hosts) & self.hosts], lost

    def rows(self, plan: WorkerPlan, phase: Phase, grp: GroupSpec) -> list[ResultRow]:
        gone = sorted(set(grp.hosts) & set(self.down))
        if gone:
            why, blame, ran = f"not run: host {', '.join(gone)} is down ({self.down[gone[0]]})", gone, False
        else:
            dying = sorted(set(grp.hosts) & self.hosts)
            for h in dying:
                rank = self.slots[h].ranks[-1]
                self.down[h] = f"rank {rank} on host {h} exited with code 1 before the sweep ended"
            lost = sorted(r for h in dying for r in self.slots[h].ranks if r in grp.ranks)
            why = f"lost: rank(s) {lost} on {', '.join(dying)} ({self.down[dying[0]]})"
            blame, ran = dying, True
        out = []
        for cname in phase.spec.collectives:
            row = failed_row(
                run_id=plan.run_id,
                collective=cname,
                backend=plan.backend,
                pattern=grp.pattern,
                hosts=grp.hosts,
                ranks=len(grp.ranks),
                round=grp.round,
                status="error",
                error=why,
                group=grp.id,
                dtype=phase.spec.dtype,
                load=grp.load,
                hop_class=grp.hop_class,
                blame=blame,
                ran=ran,
            )
            row.ts = time.time()
            out.append(row)
        return out
