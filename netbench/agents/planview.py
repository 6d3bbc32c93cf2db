"""What the coordinator reads from the plan alone: how many rows a group will make, whether an
agent's row can be a measurement of the plan from that host, the facts of the plan a row carries
(``load``, ``hop_class``), what a rank's capabilities leave it unable to run, and the failed rows
of a group that did not finish."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from typing import Any

from netbench.collectives.dtypes import get_dtype
from netbench.collectives.native import engine_unmet, engines_of
from netbench.collectives.ops import get_collective
from netbench.collectives.plan import GroupSpec, Phase, WorkerPlan
from netbench.common.rows import failed_row
from netbench.common.text import quote_untrusted


def count_points(phase: Phase, group: GroupSpec) -> int:
    """How many rows a group of a phase will produce (for progress and for nothing else)."""
    n, esize, total = len(group.ranks), get_dtype(phase.spec.dtype).size, 0
    for cname, engine in itertools.product(phase.spec.collectives, engines_of(phase.spec.engine)):
        coll = get_collective(cname)
        sizes = {coll.layout(s, esize, n).nbytes for s in phase.spec.sizes} - {0}
        modes = [ip for ip in phase.spec.in_place if coll.runs(ip, engine, n)]
        total += len(sizes) * len(modes)
    return total


class PlanView:
    """The run's plan as the coordinator checks the agents' word against it; one a run."""

    def __init__(self, plan: WorkerPlan):
        self.plan = plan
        self._phase_groups: tuple[int, dict[Any, GroupSpec]] = (-1, {})

    def groups_of(self, phase: Phase) -> dict[Any, GroupSpec]:
        """The phase's groups by id, kept for the phase whose rows are coming in (a row was looked up
        by scanning the groups: a 2,048-pair round's rows scanned 4M groups)."""
        if self._phase_groups[0] != phase.index:
            self._phase_groups = (phase.index, {g.id: g for g in phase.groups})
        return self._phase_groups[1]

    def row_mismatch(self, host: str, phase_index: int, row: dict[str, Any]) -> str | None:
        """Why a type-correct row cannot be a measurement of this plan from ``host``, or None."""
        if phase_index >= len(self.plan.phases):
            return f"row for phase {phase_index}, which the plan does not have"
        phase = self.plan.phases[phase_index]
        group = self.groups_of(phase).get(row.get("group"))
        if group is None:
            return f"row for group {row.get('group')!r}, not in {phase.name}"
        if host not in group.hosts:
            return f"row for group {group.id}, which {host} is not part of"
        expected = {
            "run_id": self.plan.run_id,
            "backend": self.plan.backend,
            "pattern": group.pattern,
            "hosts": group.hosts,
            "ranks": len(group.ranks),
            "round": group.round,
            "dtype": get_dtype(phase.spec.dtype).name,
        }
        for key, value in expected.items():
            if row.get(key) != value:
                return f"row's {key} is not the plan's"
        if row["collective"] not in phase.spec.collectives:
            return f"row for {row['collective']}, which {phase.name} does not measure"
        return None

    def record_plan_facts(self, phase_index: int, row: dict[str, Any]) -> None:
        """The row's pair facts as the plan recorded them (``GroupSpec.load`` and ``hop_class``).
        Written here, by the one process that stores rows, rather than by the rank: the coordinator
        holds the whole plan and has just looked the row's group up, a rank's word on them would
        need checking anyway, and the failed rows it writes itself get the same."""
        group = self.groups_of(self.plan.phases[phase_index])[row["group"]]
        row["load"], row["hop_class"] = group.load, group.hop_class

    def caps_unmet(self, host: str, hello: dict[str, Any]) -> str | None:
        """Why a rank cannot run the plan, from the capabilities in its hello (None: it can): that
        is the host's environment, not a dead host, and is named as such."""
        caps = hello.get("caps") or {}
        unmet = engine_unmet(self.plan, caps)
        if unmet:  # the plan's engine, which the rank does not switch (planner.choose_engine)
            return f"host {host}: {unmet}"
        if self.plan.device != "cuda" or caps.get("cuda_available") is not False:
            return None
        torch_v = quote_untrusted(caps.get("torch"), 40)
        return (f"host {host}: torch {torch_v} there cannot use CUDA (a CPU build, or no usable GPU), "
                f"but the run uses {self.plan.backend}; install a CUDA build of torch there or use "
                "--backend gloo")

    def failed_rows(
        self, phase: Phase, g: GroupSpec, status: str, why: str, blame: list[str], ran: bool = True
    ) -> Iterator[dict[str, Any]]:
        """One row per collective that says a group's measurements did not happen (status
        timeout/error), why, and which of its hosts caused it (``rows.blamed_hosts`` reads them)."""
        for cname in phase.spec.collectives:
            row = failed_row(
                run_id=self.plan.run_id,
                collective=cname,
                backend=self.plan.backend,
                pattern=g.pattern,
                hosts=g.hosts,
                ranks=len(g.ranks),
                round=g.round,
                status=status,
                error=why,
                group=g.id,
                dtype=phase.spec.dtype,
                rail=g.rail,
                load=g.load,
                hop_class=g.hop_class,
                blame=blame,
                ran=ran,
            )
            row.ts = time.time()
            yield row.to_dict()
