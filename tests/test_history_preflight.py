"""``netbench preflight`` against the history's last good run of each node (issue 49): on a
simulated fabric whose 8 earlier nights are in the history, a node now at half its NIC is drained as
before (the drain rule is the verdict's alone) and its JSON/run.json block and an information
finding say how it measured in its last good run, naming that run; ``--no-history`` compares
nothing. The judgement itself (the registry's rule ``reports/rules/last_good.py``, run by the engine
with the run's other rules): a node's own loss of 10% or more beyond its noise is a warning unless
another rule's warning already names it, a loss the whole fleet shares is one information line, a
loss within a noisy node's spread is nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from history_builder import nightly
from netbench.reports.context import AnalysisContext
from netbench.reports.engine import run_rules
from netbench.reports.lastgood import LastGood
from netbench.reports.rule_ids import ids
from netbench.reports.rules import last_good
from netbench.reports.rules.base import Rule

from netbench.common.findings import Finding
from netbench.history.store import HistoryStore
from netbench.preflight import PreflightOptions, json_report
from netbench.run.options import ReportOptions
from netbench.sim.fabric import FabricSpec, Fault
from netbench.sim.options import SimOptions
from netbench.sim.preflight import simulate_preflight

RULE = last_good.ID


def preflight(out: Path, history: str):  # noqa: ANN201 - sim.preflight.SimPreflight
    sim = SimOptions(FabricSpec(nodes=16, leaves=1), (Fault.parse("node:node0010=0.5"),), seed=1,
                     out=str(out))
    opts = PreflightOptions(budget_s=120.0, html=False, report=ReportOptions(history=history))
    return simulate_preflight(sim, opts)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pfhist") / "store"
    nightly(path, nodes=16, nights=8, events=[])
    return path


def test_a_drained_node_is_told_against_its_last_good_run(store: Path, tmp_path: Path) -> None:
    last = HistoryStore(store).runs().to_pylist()[-1]
    res = preflight(tmp_path / "pf", str(store))
    result = res.result
    assert result.drain == ["node0010"] and result.exit_code == 2
    told = result.info["history"]["nodes"]
    assert list(told) == ["node0010"] and result.info["history"]["compared"] == 16
    g = told["node0010"]
    assert g["run_id"] == last["run_id"] and g["started"] == last["started"] and g["size"] == "1G"
    assert 165 < g["then_GBps"] < 195 and 80 < g["now_GBps"] < 100 and -55 < g["change_pct"] < -45
    (found,) = [f for f in result.findings if f.rule == RULE]
    assert found.severity == "info" and found.subject == "node0010"  # already failing: context
    assert last["run_id"] in found.title and found.evidence["run_id"] == last["run_id"]
    assert json_report(result)["preflight"]["history"]["nodes"]["node0010"]["run_id"] == last["run_id"]
    run = json.loads((result.rundir.path / "run.json").read_text())
    assert run["preflight"]["history"]["nodes"]["node0010"]["then_GBps"] == g["then_GBps"]
    assert result.rundir.run_id in HistoryStore(store).run_ids()  # and added after its verdict


def test_no_history_compares_nothing(tmp_path: Path) -> None:
    res = preflight(tmp_path / "pf", "off")
    assert res.result.drain == ["node0010"] and res.result.exit_code == 2
    assert "history" not in res.result.info and not [f for f in res.result.findings if f.rule == RULE]


def good(host: str, then: float, now: float, noise_pct: float = 1.0) -> LastGood:
    return LastGood(host, "20261206T020000Z-a1b2c3", "2026-12-06T02:00:00+00:00", 1 << 30, then, now,
                    noise_pct)


def findings_for(found: list[LastGood], already: list[Finding]) -> list[Finding]:
    """The rule's findings on ``found``, run by the engine beside a rule that says ``already``."""
    ctx = AnalysisContext.from_data([])
    ctx.last_good = tuple(found)
    said = Rule("said", ids("slow_node"), lambda _: [Finding(**vars(f)) for f in already])
    return [f for f in run_rules(ctx, [said, last_good.RULE]) if f.rule == RULE]


def test_whose_loss_it_is_decides_what_is_said() -> None:
    steady = [good(f"node{i:04d}", 180.0, 179.0) for i in range(1, 13)]
    slow, named, noisy = good("node0013", 180.0, 150.0), good("node0014", 180.0, 150.0), \
        good("node0015", 180.0, 160.0, noise_pct=8.0)
    already = [Finding("slow_node", "warn", "node", "node0014", "slow")]
    said = {f.subject: f for f in findings_for([*steady, slow, named, noisy], already)}
    assert said["node0013"].severity == "warn" and said["node0014"].severity == "info"
    assert "node0015" not in said and len(said) == 2  # 11% down within a node whose runs vary 8%
    fleet = [good(f"node{i:04d}", 180.0, 150.0) for i in range(1, 13)]
    (whole,) = findings_for(fleet, [])
    assert whole.severity == "info" and whole.subject_kind == "run" and "12 of 12 nodes" in whole.title
