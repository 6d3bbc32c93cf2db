"""``sites.external``: the ranks a user's torchrun/srun/mpirun started plan through the sweep's own
stage (``pipeline.plan_run``), with the slots of the ranks that exist, whatever GPUs rank 0 sees."""

from __future__ import annotations

from pathlib import Path

from netbench.agents.launchers import HostSlot
from netbench.run.options import Options, from_command_line
from netbench.run.pipeline import plan_run
from netbench.run.planner import HostCaps
from netbench.sites.external.site import ExternalSite

GATHERED = [HostSlot(host="h0", nprocs=2, rank_base=0), HostSlot(host="h1", nprocs=2, rank_base=2)]


def _planned(here: HostCaps, topology: str | None = None, **kw: object):  # noqa: ANN202
    opts = from_command_line(Options, {"patterns": ["ring", "pairwise"], "topology": topology, **kw})
    site = ExternalSite(opts, "torchrun", [HostSlot(s.host, s.nprocs, s.rank_base) for s in GATHERED], here,
                        store=None)
    entries = site.hosts()
    said: list[str] = []
    return plan_run(opts, site, entries, {}, site.switches(entries, said.append), "r1"), site, said


def test_gpu_ranks_plan_nccl_over_the_ranks_that_exist() -> None:
    here = HostCaps("h0", None, "2.9", "12.8", True, 8, nccl4py=False, nccl4py_error="no module")
    planned, site, _ = _planned(here)
    assert planned.backend == "nccl" and site.name == "torchrun"
    assert [(s.host, s.nprocs, s.rank_base) for s in planned.slots] == [("h0", 2, 0), ("h1", 2, 2)]
    assert planned.plan.world_size == 4 and [p.name for p in planned.plan.phases][0] == "ring"
    assert planned.engine_note is not None and "h0 (no module)" in planned.engine_note  # rank 0's, asked


def test_cpu_ranks_plan_gloo_with_the_topology_file(tmp_path: Path) -> None:
    topo = tmp_path / "topology.conf"
    topo.write_text("SwitchName=leafA Nodes=h0\nSwitchName=leafB Nodes=h1\n"
                    "SwitchName=spine Switches=leafA,leafB\n")
    here = HostCaps("h0", None, "2.9", None, False, 0)
    planned, site, said = _planned(here, topology=str(topo))
    assert planned.backend == "gloo" and said == []
    assert [(s.host, s.nprocs) for s in planned.slots] == [("h0", 2), ("h1", 2)]
    assert planned.request.switches == {"h0": "leafA", "h1": "leafB", "leafA": "spine", "leafB": "spine"}
    assert site.inventory(site.hosts(), said.append) == [] and site.counters("before", [], None) is None
