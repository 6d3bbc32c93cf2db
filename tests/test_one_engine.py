"""One engine (issue 43): every run that measures is assembled by ``netbench.run.stages.run_stages``, and
every launch of ranks in it, the first and each re-test, is a ``netbench.run.launch.Launch``.

Two proofs: the source (no module of netbench/ but ``run/launch.py`` calls ``run.execute.execute``, and
there only ``Launch.run`` does), and the behaviour (a sweep and a preflight on a simulated fabric with
a slow node, the real coordinator: every launch they make, their re-tests included, reaches the
coordinator from ``run_stages`` through ``Launch.run``)."""

from __future__ import annotations

import ast
import inspect
import json
from pathlib import Path

import numpy as np
import pytest

import netbench
from netbench.agents.coordinator import Coordinator

PACKAGE = Path(netbench.__file__).parent
ENGINE_MODULE = "netbench.run.execute"
THE_CALLER = ("run/launch.py", "Launch.run")

def _execute_calls(tree: ast.Module) -> list[str]:
    """The functions (``Class.method`` or ``function``) of a module that call ``run.execute.execute``,
    however it was imported (``from netbench.run.execute import execute [as x]``, ``netbench.run.execute``
    or the module itself, ``from netbench.run import execute as engine``)."""
    names: set[str] = set()  # local names bound to run.execute.execute
    modules: set[str] = set()  # local names bound to the engine module
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == ENGINE_MODULE:
            names |= {a.asname or a.name for a in node.names if a.name == "execute"}
        elif isinstance(node, ast.ImportFrom) and node.module == "netbench.run":
            modules |= {a.asname or a.name for a in node.names if a.name == "execute"}
        elif isinstance(node, ast.Import):
            modules |= {a.asname or a.name for a in node.names if a.name == ENGINE_MODULE}

    def calls_execute(call: ast.Call) -> bool:
        f = call.func
        if isinstance(f, ast.Name):
            return f.id in names
        if isinstance(f, ast.Attribute) and f.attr == "execute":
            return ast.unparse(f.value) in modules
        return False

    found: list[str] = []

    def visit(node: ast.AST, where: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(child, [*where, child.name])
                continue
            if isinstance(child, ast.Call) and calls_execute(child):
                found.append(".".join(where) or "<module>")
            visit(child, where)

    visit(tree, [])
    return found


def test_only_launch_run_calls_the_execute_step() -> None:
    callers: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        found = _execute_calls(ast.parse(path.read_text(), str(path)))
        if found:
            callers[rel] = found
    assert callers.pop(THE_CALLER[0], None) == [THE_CALLER[1]]
    assert callers == {}, f"run.execute.execute is Launch.run's alone (netbench.run.launch): {callers}"


def test_the_check_finds_every_way_of_calling_execute() -> None:
    """The AST check above is not blind: each import style is found, with the function calling it."""
    source = """
from netbench.run.execute import execute as run_it
from netbench.run import execute as engine
import netbench.run.execute

def a():
    run_it(1)

class B:
    def c(self):
        engine.execute(2)
        netbench.run.execute.execute(3)
"""
    assert _execute_calls(ast.parse(source)) == ["a", "B.c", "B.c"]
    assert _execute_calls(ast.parse("from x import execute\nexecute()")) == []


@pytest.fixture
def launches(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, object]]:
    """Every launch that reaches the real coordinator: its phases, and the functions it came through."""
    seen: list[dict[str, object]] = []
    real = Coordinator.run

    def spy(self: Coordinator):  # noqa: ANN202 - the coordinator's own Outcome
        stack = [f.frame.f_code.co_qualname for f in inspect.stack()]
        seen.append({"phases": [p.name for p in self.plan.phases], "stack": stack})
        return real(self)

    monkeypatch.setattr(Coordinator, "run", spy)
    return seen


def _fabric(tmp_path: Path, faults: tuple[str, ...]):  # noqa: ANN202 - SimOptions, SimHosts, its files
    from netbench.sim.fabric import FabricSpec, Fault
    from netbench.sim.launcher import SimHosts
    from netbench.sim.options import SimOptions
    from netbench.sim.preflight import write_inputs
    from netbench.sim.rails import build_fabric

    sim = SimOptions(FabricSpec(nodes=8, leaves=2), tuple(Fault.parse(f) for f in faults), seed=1,
                     out=str(tmp_path / "run"))
    fab = build_fabric(sim.fabric, sim.faults)
    hosts = SimHosts(fab, sim, rng=np.random.default_rng(sim.seed))
    hosts_file, topology = write_inputs(fab, tmp_path)
    return sim, hosts, hosts_file, topology


def _through_the_one_engine(launch: dict[str, object]) -> bool:
    stack = launch["stack"]
    assert isinstance(stack, list)
    engine_path = ["execute", "Launch.run", "run_stages"]  # innermost first: run_stages made the launch
    return all(name in stack for name in engine_path) and [stack.index(n) for n in engine_path] == sorted(
        stack.index(n) for n in engine_path)


def test_a_sweep_and_its_re_tests_launch_through_the_one_engine(
    tmp_path: Path, launches: list[dict[str, object]]
) -> None:
    from netbench.run.options import (
        MeasureOptions,
        Options,
        PairOptions,
        ReportOptions,
        RetestOptions,
        SiteOptions,
    )
    from netbench.run.pipeline import run_pipeline
    from netbench.sim.launcher import MIN_TIMEOUT_S
    from netbench.sites.sim.site import SimSite

    _, hosts, hosts_file, topology = _fabric(tmp_path, ("node:node0003=0.5",))
    opts = Options(site=SiteOptions(hosts_file=str(hosts_file), topology=str(topology), launcher="ssh"),
                   pairs=PairOptions(patterns=["pairwise"]), measure=MeasureOptions(timeout_s=MIN_TIMEOUT_S),
                   retest=RetestOptions(60.0), report=ReportOptions(out=str(tmp_path / "sweep")))
    code = run_pipeline(opts, SimSite(hosts, (hosts_file, topology)), echo=lambda s: None)
    run = json.loads((tmp_path / "sweep" / "run.json").read_text())
    assert run["retests"]["results"]["node0003"]["verdict"] == "confirmed" and code == 2
    assert len(launches) == 1 + len(run["confirm"]["launches"]) >= 2
    assert all(_through_the_one_engine(launch) for launch in launches)
    first, *retests = launches
    assert all(str(p).startswith("pairwise") for p in first["phases"])  # type: ignore[union-attr]
    assert all({"retest_suspects", "Launch.__call__"} <= set(r["stack"]) for r in retests)  # type: ignore[operator]


def test_preflight_its_quick_pass_and_escalation_launch_through_the_one_engine(
    tmp_path: Path, launches: list[dict[str, object]]
) -> None:
    from netbench.preflight import PreflightOptions, run_preflight
    from netbench.run.options import ReportOptions, SiteOptions
    from netbench.sim.launcher import MIN_TIMEOUT_S
    from netbench.sites.sim.site import SimSite

    _, hosts, hosts_file, topology = _fabric(tmp_path, ("node:node0003=0.5",))
    opts = PreflightOptions(SiteOptions(hosts_file=str(hosts_file), topology=str(topology)),
                            ReportOptions(out=str(tmp_path / "preflight")), budget_s=120.0, html=False,
                            timeout_s=MIN_TIMEOUT_S)
    site = SimSite(hosts, (hosts_file, topology))
    result = run_preflight(opts, lambda s: None, clock=hosts.clock, site=site)
    assert result.drain == ["node0003"] and result.info["retests"]["node0003"]["verdict"] == "confirmed"
    assert len(launches) >= 2 and all(_through_the_one_engine(launch) for launch in launches)
    quick, *later = launches
    assert "ring" in quick["phases"][-1]  # type: ignore[index]
    assert any("retest_suspects" in r["stack"] for r in later)  # type: ignore[operator]
    # sweep's re-tests and preflight's escalations: the same launch, the same function
    assert all("Launch.__call__" in r["stack"] for r in later)  # type: ignore[operator]
