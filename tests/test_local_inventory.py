"""A local GPU sweep probes this machine (the probe and parsers of ``--hosts``), so its headline has
the intra-node ceiling. CPU ranks cannot run NCCL here: the fake node tools (real A100 captures:
nvidia-smi -q -x, nvidia-smi nvlink --status) stand in for the GPUs, and the headline rows are a
GPU world's in nccl-tests' units."""

from __future__ import annotations

from pathlib import Path

from fake_tools import make_fake_tools, probe_env
from netbench.inventory.local import probe_local

from netbench.agents.coordinator import Outcome
from netbench.common.rundir import RunDir
from netbench.run.execute import summarize

A100_XML = "public/nvidia-smi-q-x/influxdata-telegraf__a100-sxm4-v12.xml"
A100_NVLINK = "public/nvidia-smi-nvlink-status/leptonai-gpud__nvidia-smi.nvlink.status.a100"
LARGE = (256 << 20, 512 << 20, 1 << 30)


def world_rows(host: str, busbw: float) -> list[dict]:
    return [{"collective": "all_reduce", "pattern": "world", "hosts": [host], "ranks": 8, "bytes": b,
             "busbw_GBps": busbw, "algbw_GBps": busbw / 2, "backend": "nccl", "status": "ok",
             "group": "world", "in_place": False, "dtype": "float32", "time_us": 1.0, "wrong": 0}
            for b in LARGE]


def test_the_local_probe_gives_a_gpu_sweep_its_nvlink_ceiling(tmp_path: Path) -> None:
    tools = make_fake_tools(tmp_path / "bin", {"nvidia-smi -q -x": A100_XML,
                                               "nvidia-smi nvlink --status": A100_NVLINK})
    rundir = RunDir.create(str(tmp_path / "run"))
    node = probe_local(host="gpu-a", env=probe_env(tools))  # what the sweep on one machine probes
    rundir.write_inventory([node])
    assert node.host == "gpu-a" and node.ok and len(node.gpus) == 1
    assert [n["host"] for n in rundir.read_inventory()] == ["gpu-a"]

    lines: list[str] = []
    summarize(world_rows("gpu-a", 230.0), Outcome(status="completed"), lines.append, rundir.read_inventory())
    want = ("#   77% of ceiling 300.0 GB/s (NVLink 3: 12 links up = 300 GB/s per GPU and direction on gpu-a, "
            "the GPU with the least)")
    assert any(x.startswith(want) for x in lines), lines


def test_without_the_probe_the_headline_says_why_the_ceiling_is_unknown() -> None:
    lines: list[str] = []
    summarize(world_rows("gpu-a", 230.0), Outcome(status="completed"), lines.append, [])
    assert any(x.startswith("#   ceiling unknown: the run has no inventory") for x in lines), lines
