"""Engines: NCCL called directly (nccl4py) or through torch's process group; one-rank runs.

The native engine itself needs a GPU (the last test, skipped elsewhere; measured on the lent H200,
benchmarks/README.md). Here: the engine choice (made once, by the planner, from every host's
inventory; the ranks do what the plan says), what CPU users pay for it (nothing), how the
analysis reads a run with both engines, and what a one-rank run says.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from netbench.collectives.envinfo import capabilities
from netbench.collectives.native import PLAN_ENGINES, engine_unmet, engines_of, plan_uses_native
from netbench.collectives.plan import ENGINES, SweepSpec, WorkerPlan
from netbench.collectives.planfile import read_plan
from netbench.inventory.model import NodeInventory
from netbench.reports.context import AnalysisContext
from netbench.reports.engine import run_rules
from rowfiles import rows_of
from test_agent_protocol import feed, line

from netbench.agents.coordinator import Coordinator
from netbench.agents.launchers import HostSlot
from netbench.common.errors import UsageError
from netbench.run.options import MeasureOptions, Options, PairOptions
from netbench.run.planner import CapabilityError, HostCaps, PlanRequest, build_plan, choose_engine


def _netbench(*args: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "netbench", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300)


def test_cpu_ranks_use_torch_and_never_import_the_binding():
    before = {m for m in sys.modules if m == "nccl" or m.startswith("nccl.")}
    for requested in ("auto", "torch"):
        assert choose_engine(requested, "gloo", [HostCaps("a", nccl4py=True)]).engine == "torch"
    assert engines_of("torch") == ["torch"]
    assert {m for m in sys.modules if m == "nccl" or m.startswith("nccl.")} == before


def test_a_torch_without_cuda_is_never_asked_about_nccl4py(monkeypatch):
    before = {m for m in sys.modules if m == "nccl" or m.startswith("nccl.")}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # a CPU build, also on a GPU machine
    caps = capabilities(nccl4py=True)
    assert caps["nccl4py"] is None and caps["nccl4py_error"] is None
    assert {m for m in sys.modules if m == "nccl" or m.startswith("nccl.")} == before


# -- the engine is decided once, in the plan ---------------------------------------------------------
HAS = dict(gpus_seen=8, cuda_available=True, torch_gpus=8)


def _caps(host: str, nccl4py: bool | None, error: str | None = None) -> HostCaps:
    return HostCaps(host, **HAS, nccl4py=nccl4py, nccl4py_error=error)


def test_auto_is_nccl_only_when_every_host_has_nccl4py():
    assert choose_engine("auto", "nccl", [_caps("a", True), _caps("b", True)]) == choose_engine(
        "auto", "nccl", [_caps("a", True)]
    )
    every = choose_engine("auto", "nccl", [_caps("a", True), _caps("b", True)])
    assert every.engine == "nccl" and every.note is None
    # b lacks it: the whole run times through torch, said once with the host and why
    mixed = choose_engine("auto", "nccl", [_caps("a", True), _caps("b", False, "ModuleNotFoundError: nccl")])
    assert mixed.engine == "torch"
    assert mixed.note.endswith("nccl4py does not import on 1 of 2 host(s): b (ModuleNotFoundError: nccl)")
    # not known (no inventory of it) is not "has": auto does not promise NCCL directly
    unknown = choose_engine("auto", "nccl", [_caps("a", True), _caps("c", None)])
    assert unknown.engine == "torch" and "not known on 1 host(s) (no inventory of it): c" in unknown.note
    assert choose_engine("torch", "nccl", [_caps("a", True)]).engine == "torch"
    assert choose_engine("torch", "nccl", [_caps("b", False)]).note is None


def test_the_note_names_a_few_hosts_of_thousands():
    hosts = [_caps(f"n{i:04d}", i % 2 == 0) for i in range(4096)]
    note = choose_engine("auto", "nccl", hosts).note
    assert "2048 of 4096 host(s): n0001, n0003, n0005, n0007, n0009 and 2043 more" in note
    assert len(note) < 300


def test_explicit_nccl_on_a_host_without_nccl4py_is_refused_naming_it():
    for requested in ("nccl", "both"):
        with pytest.raises(CapabilityError) as err:
            choose_engine(requested, "nccl", [_caps("a", True), _caps("b", False, "ImportError: libnccl")])
        assert err.value.exit_code == 2 and isinstance(err.value, UsageError)
        msg = str(err.value)
        assert msg.startswith(f"--engine {requested} needs nccl4py on every host; 1 of 2 host(s)")
        assert "b (ImportError: libnccl)" in msg and "--engine torch" in msg
    # taken at the user's word where nothing is known: the ranks report it if they cannot
    assert choose_engine("nccl", "nccl", [_caps("a", True), _caps("c", None)]).engine == "nccl"
    assert choose_engine("both", "nccl", [_caps("a", True)]).engine == "both"
    with pytest.raises(UsageError, match="needs GPUs"):
        choose_engine("nccl", "gloo", [_caps("a", True)])


def _hosts(n: int) -> list[HostSlot]:
    return [HostSlot(host=f"h{i}", nprocs=2, rank_base=2 * i) for i in range(n)]


def test_the_plan_carries_the_concrete_engine_to_every_phase():
    opts = Options(measure=MeasureOptions(collectives=["all_reduce"]),
                   pairs=PairOptions(patterns=["ring", "pairwise", "rail", "intra"]))
    engine = choose_engine(opts.measure.engine, "nccl", [_caps(f"h{i}", True) for i in range(4)]).engine
    plan = build_plan(PlanRequest.of(opts, engine=engine), "r", _hosts(4), "nccl")
    assert {p.spec.engine for p in plan.phases} == {"nccl"} and len(plan.phases) > 4
    assert plan_uses_native(plan)
    # through the store as the ranks read it: the engine is what the plan says, never auto
    again = WorkerPlan.from_json("".join(plan.json_chunks()))
    assert {p.spec.engine for p in again.phases} == {"nccl"}
    # with no host known, auto never reaches a plan
    bare = build_plan(PlanRequest.of(opts), "r", _hosts(4), "nccl")
    assert {p.spec.engine for p in bare.phases} == {"torch"} and not plan_uses_native(bare)
    gloo = build_plan(PlanRequest.of(opts), "r", _hosts(4), "gloo")
    assert {p.spec.engine for p in gloo.phases} == {"torch"}
    with pytest.raises(ValueError, match="unknown engine 'auto'"):
        SweepSpec(collectives=["all_reduce"], sizes=[8], engine="auto")
    with pytest.raises(UsageError, match="one of nccl, torch, both"):
        PlanRequest(measure=MeasureOptions(), engine="auto")
    assert set(PLAN_ENGINES) == set(ENGINES)


def test_a_rank_does_what_the_plan_says_and_never_chooses():
    assert engines_of("nccl") == ["nccl"] and engines_of("both") == ["nccl", "torch"]
    with pytest.raises(ValueError, match="the planner decides the engine"):
        engines_of("auto")


def test_inventory_drives_the_choice_and_old_records_are_not_known():
    with_it = NodeInventory(host="a", nccl4py=True, nccl4py_version="0.6.0", torch_cuda_available=True)
    without = NodeInventory(host="b", nccl4py=False, torch_cuda_available=True)
    without.missing["nccl4py"] = "does not import: ModuleNotFoundError: No module named 'nccl'"
    old = {k: v for k, v in with_it.to_dict().items() if not k.startswith("nccl4py")}
    caps = [HostCaps.of(n.host, n) for n in (with_it, without, NodeInventory.from_dict({**old, "host": "c"}))]
    assert [c.nccl4py for c in caps] == [True, False, None]
    assert caps[0].nccl4py_version == "0.6.0" and "No module named 'nccl'" in caps[1].nccl4py_error
    assert HostCaps.of("d", None).nccl4py is None


def _coordinator(engine: str) -> Coordinator:
    slots = [HostSlot(host="h0", nprocs=1, rank_base=0), HostSlot(host="h1", nprocs=1, rank_base=1)]
    req = PlanRequest(measure=MeasureOptions(collectives=["all_reduce"], max_bytes=1024), engine=engine)
    plan = build_plan(req, "run-1", slots, "nccl")
    return Coordinator(plan, slots, launcher=None, on_row=lambda row: None)  # type: ignore[arg-type]


def test_a_rank_that_cannot_run_the_plans_engine_is_a_capability_fault():
    good = {"cuda_available": True, "nccl4py": "0.6.0", "nccl4py_error": None}
    why = "ModuleNotFoundError: No module named 'nccl'"
    bad = {"cuda_available": True, "nccl4py": None, "nccl4py_error": why}
    coord = _coordinator("nccl")
    assert engine_unmet(coord.plan, good) is None and engine_unmet(coord.plan, bad)
    feed(coord, "h0", [line({"type": "hello", "rank": 0, "host": "h0", "caps": good})])
    feed(coord, "h1", [line({"type": "hello", "rank": 1, "host": "h1", "caps": bad})])
    (fault,) = coord.outcome.faults
    assert fault.kind == "capability" and fault.host == "h1" and coord.outcome.down_hosts == {"h1"}
    assert "the run's engine is nccl" in fault.message and "No module named 'nccl'" in fault.message
    # a torch plan asks nothing of nccl4py: the same hello is fine
    coord = _coordinator("torch")
    feed(coord, "h1", [line({"type": "hello", "rank": 1, "host": "h1", "caps": bad})])
    assert not coord.outcome.faults


def test_engine_nccl_with_gloo_is_one_line_and_exit_2(tmp_path: Path):
    r = _netbench(
        "sweep", "-p", "2", "--backend", "gloo", "--engine", "nccl", "-e", "1K", "--out", str(tmp_path / "r")
    )
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "netbench: error: --engine nccl needs GPUs (NCCL); gloo runs through torch"
    ]


def test_one_rank_says_nothing_crossed_a_link(tmp_path: Path):
    out = tmp_path / "run"
    r = _netbench(
        *("sweep", "-p", "1", "--backend", "gloo", "-e", "64K", "-f", "8", "-n", "2", "-w", "1"),
        *("--out", str(out)),
    )
    assert r.returncode == 0, r.stderr
    assert "large-message busbw" not in r.stdout  # no busbw summary of a run that crossed nothing
    assert "# one rank: nothing crossed a link" in r.stdout
    rows = rows_of(out)
    assert rows and {row["engine"] for row in rows} == {"torch"} and {row["ranks"] for row in rows} == {1}
    # what the rank used is what the plan said (the plan the ranks got, as written in plan.json)
    plan = read_plan((out / "plan.json").read_text())
    assert [p.spec.engine for p in plan.phases] == ["torch"]
    findings = json.loads((out / "findings.json").read_text())["findings"]
    assert [f["rule"] for f in findings] == ["single_rank"]
    assert findings[0]["severity"] == "info"
    # torch reduces in place; on one rank that is no work, so all_reduce's out-of-place column is
    # N/A with the reason under the section's title, never a no-op's time
    assert {(r["collective"], r["in_place"]) for r in rows} == {
        ("all_reduce", True), ("all_gather", False), ("all_gather", True)
    }
    section = r.stdout.split("# all_reduce ")[1].split("# all_gather ")[0]
    assert "# N/A: torch has no out-of-place all_reduce, and one rank's in-place one does no work" in section
    lines = [ln for ln in section.splitlines()[1:] if ln and not ln.startswith("#")]
    assert lines and all(ln.split()[5:9] == ["N/A"] * 4 for ln in lines)
    assert "# N/A" not in r.stdout.split("# all_gather ")[1]  # all_gather's out-of-place is a real copy


def _row(engine: str, coll: str, nbytes: int, in_place: bool, time_us: float) -> dict:
    return {
        "run_id": "r", "collective": coll, "backend": "nccl", "pattern": "world", "hosts": ["a", "b"],
        "ranks": 2, "round": None, "bytes": nbytes, "count": nbytes // 4, "dtype": "float", "op": "sum",
        "in_place": in_place, "iters": 20, "warmup": 5, "time_us": time_us, "time_us_min": time_us,
        "time_us_max": time_us, "rank_time_us": [time_us, time_us], "algbw_GBps": nbytes / 1e3 / time_us,
        "busbw_GBps": nbytes / 1e3 / time_us, "wrong": 0, "status": "ok", "error": None, "group": "world",
        "engine": engine, "cuda_graph": False,
    }


def test_both_engines_are_compared_and_one_is_judged():
    sizes = [8, 1024, 1 << 20, 64 << 20]
    rows = []
    for nbytes in sizes:
        big = nbytes > (1 << 20)
        rows.append(_row("nccl", "all_reduce", nbytes, False, 300.0 if big else 6.0))
        # torch: 10 us more per small operation; the same at 64 MiB (there the data decides)
        rows.append(_row("torch", "all_reduce", nbytes, False, 300.0 if big else 16.0))
    ctx = AnalysisContext.from_data(rows, [], {"hosts": {}}, {})
    assert ctx.judged_engine == "nccl"
    assert set(ctx.ok_rows["engine"]) == {"nccl"} and len(ctx.ok_rows) == len(sizes)
    assert len(ctx.all_ok_rows) == 2 * len(sizes)
    found = {f.rule: f for f in run_rules(ctx)}
    assert set(found) == {"engine_overhead"}
    ev = found["engine_overhead"].evidence["by_collective"]
    assert ev == [
        {
            "collective": "all_reduce",
            "in_place": False,
            "sizes": 3,  # 8 B, 1 KiB, 1 MiB: the small ones
            "nccl_us_median": 6.0,
            "torch_us_median": 16.0,
            "torch_extra_us_median": 10.0,
        }
    ]
    assert "adds 10 us per operation" in found["engine_overhead"].title


def test_rows_from_before_engines_count_as_torch():
    row = _row("torch", "all_reduce", 1024, False, 10.0)
    del row["engine"]
    ctx = AnalysisContext.from_data([row], [], {"hosts": {}}, {})
    assert ctx.judged_engine == "torch" and len(ctx.ok_rows) == 1


def test_native_engine_on_a_gpu(tmp_path: Path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (measured on the lent H200: benchmarks/README.md)")
    pytest.importorskip("nccl.bindings.nccl", reason="needs nccl4py (pip install 'netbench[nccl]')")
    out = tmp_path / "run"
    colls = "all_reduce,all_gather,reduce_scatter,broadcast,reduce,all_to_all,sendrecv"
    r = _netbench("sweep", "--engine", "both", "-k", colls, "-e", "1M", "-f", "16", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert "destroy_process_group" not in r.stdout + r.stderr
    rows = rows_of(out)
    assert {row["engine"] for row in rows} == {"nccl", "torch"}
    assert all(row["status"] == "ok" and row["wrong"] == 0 for row in rows)
    assert {row["collective"] for row in rows if row["engine"] == "nccl"} == set(colls.split(","))
    # the native engine's eager loops were made from C (native_loop), torch's never
    assert {(row["engine"], row["loop"]) for row in rows} == {("nccl", "c"), ("torch", None)}


def test_the_compiled_loop_runs_nccl_on_every_slot():
    """Through the C loop, each of 5 slots' out-of-place all_reduce and a sendrecv group really ran
    before it returned: on one rank the receive buffers end up holding their send buffers."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (measured on the lent H200: benchmarks/README.md)")
    nccl = pytest.importorskip("nccl.bindings.nccl", reason="needs nccl4py (pip install 'netbench[nccl]')")
    from netbench.collectives import native_loop
    from netbench.collectives.ops import Buffers, NativeCall, get_collective

    comm = nccl.comm_init_rank_scalable(1, 0, 1, bytearray(bytes(nccl.get_unique_id())), 0)
    try:
        native_loop.choose.cache_clear()
        choice = native_loop.choose()
        assert choice.loop is not None, choice.reason
        nc = NativeCall(comm=comm, stream=torch.cuda.current_stream().cuda_stream, rank=0, nranks=1, dtype=7,
                        op=0, root=0)
        bufs = [Buffers(torch.full((1024,), float(i + 1), device="cuda"), torch.zeros(1024, device="cuda"))
                for i in range(5)]
        ops = [get_collective("all_reduce").native(nc, b) for b in bufs]
        pair = Buffers(torch.arange(256.0, device="cuda"), torch.zeros(256, device="cuda"))
        ops.append(get_collective("sendrecv").native(nc, pair))
        stream = torch.cuda.current_stream()
        assert choice.loop.timed(choice.loop.prepare(ops), stream.cuda_stream) > 0
        assert stream.query()  # the loop returned once the stream had finished
        assert all(torch.equal(b.recv, b.send) for b in [*bufs, pair])
    finally:
        native_loop.choose.cache_clear()
        nccl.comm_destroy(comm)


def test_report_shows_the_engines_side_by_side_per_size():
    from netbench.reports.html import render_html

    rows = [_row(engine, "all_reduce", 1024, False, t) for engine, t in (("nccl", 6.0), ("torch", 16.5))]
    ctx = AnalysisContext.from_data(rows, [], {"hosts": {}}, {})
    page = render_html(ctx, run_rules(ctx), plotlyjs="cdn")
    assert "Engines side by side" in page and "judges the nccl rows" in page
    assert "<tr><td>1K</td><td>6.00</td><td>16.50</td><td>+10.50</td><td>2.75</td></tr>" in page
    one = AnalysisContext.from_data(rows[:1], [], {"hosts": {}}, {})
    assert "Engines side by side" not in render_html(one, run_rules(one), plotlyjs="cdn")


def test_native_engine_graphs_are_made_with_cudas_own_api(tmp_path: Path):
    """The native engine's --cuda-graph points are captured and replayed through CUDA's runtime API
    (harness.RawGraph, as nccl-tests), not torch.cuda.CUDAGraph, whose graphs ran +0.35 us an
    operation from a process's sixth graph on (benchmarks/README.md "Graphs made with CUDA's own API")."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (measured on the lent H200: benchmarks/README.md)")
    pytest.importorskip("nccl.bindings.nccl", reason="needs nccl4py (pip install 'netbench[nccl]')")
    pytest.importorskip("cuda.bindings.runtime", reason="needs cuda-bindings (nccl4py[cu12] or [cu13])")
    import types

    from netbench.collectives import harness
    from netbench.collectives.dtypes import reduce_op
    from netbench.collectives.ops import get_collective

    nccl = __import__("nccl.bindings.nccl", fromlist=["nccl"])
    comm = nccl.comm_init_rank_scalable(1, 0, 1, bytearray(bytes(nccl.get_unique_id())), 0)
    made = []
    capture = harness._capture

    def spy(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        graph, launches, stream = capture(*args, **kwargs)
        made.append(type(graph))
        return graph, launches, stream

    import torch.distributed as dist

    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("nccl", store=store, rank=0, world_size=1, device_id=torch.device("cuda:0"))
    try:
        harness._capture = spy
        coll = get_collective("all_reduce")
        lay = coll.layout(1 << 20, 4, 1)
        spec = harness.PointSpec(coll, lay, torch.float32, False, "sum", reduce_op("sum"))
        settings = harness.Settings(iters=20, warmup=2, check=True, device="cuda", cuda_graph=True)
        point = harness.measure(spec, dist.group.WORLD, 0, 1, settings,
                                native=types.SimpleNamespace(nccl=nccl, comm=comm), reach=1 << 24)
    finally:
        harness._capture = capture
        dist.destroy_process_group()
        nccl.comm_destroy(comm)
    assert made == [harness.RawGraph] and point.wrong == 0 and 0 < point.time_us < 1e4


def test_a_failed_cuda_call_is_named():
    from types import SimpleNamespace as NS

    from netbench.collectives.harness import _cuda_ok

    class Err:
        def __init__(self, name: str):
            self.name = name

    ok = Err("cudaSuccess")
    rt = NS(cudaError_t=NS(cudaSuccess=ok))
    assert _cuda_ok(rt, (ok, "graph"), "cudaStreamEndCapture") == "graph"
    assert _cuda_ok(rt, (ok,), "cudaGraphLaunch") is None
    with pytest.raises(RuntimeError, match="cudaGraphInstantiate: cudaErrorInvalidValue"):
        _cuda_ok(rt, (Err("cudaErrorInvalidValue"), None), "cudaGraphInstantiate")
