"""The rule registry and the analyses rules share: one list of finding ids, rules independent of each
other, typed analysis results that a rule can be fed by hand, and the findings.json record."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from netbench.reports.analyses import Analyses, NodeVerdict, NodeVerdicts, Retest, RetestEvidence
from netbench.reports.context import AnalysisContext
from netbench.reports.policy import Policy, PolicyError
from netbench.reports.rule_ids import ENGINE_IDS, FINDING_IDS
from netbench.reports.rules import RULE_IDS, RULES, slow_node, slow_pair
from synthetic import host_names, make_fleet

from netbench.common.findings import Finding, FindingsRecord, read_findings, write_findings

RULES_DIR = Path(__file__).resolve().parents[1] / "reports" / "rules"


def test_the_registry_emits_exactly_the_listed_ids_in_order():
    assert list(RULE_IDS) == list(FINDING_IDS) + list(ENGINE_IDS)
    assert len({r.name for r in RULES}) == len(RULES)


def test_policy_checks_severity_keys_against_the_list():
    assert Policy(severity={"slow_pair": "fail"}).severity == {"slow_pair": "fail"}
    with pytest.raises(PolicyError, match="severity.slow_pairs"):
        Policy(severity={"slow_pairs": "fail"})


def test_no_rule_module_imports_another_rule_module():
    """What two rules share is an analysis in the context, never one rule's output."""
    rule_modules = {p.stem for p in RULES_DIR.glob("*.py")} - {"__init__", "base"}
    bad = {}
    for name in sorted(rule_modules):
        tree = ast.parse((RULES_DIR / f"{name}.py").read_text())
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                mod = node.module
                imported |= {mod.rpartition(".")[2]} if mod.startswith("netbench.reports.rules.") else set()
                if mod == "netbench.reports.rules":
                    imported |= {a.name for a in node.names}
            elif isinstance(node, ast.Import):
                imported |= {a.name.rpartition(".")[2] for a in node.names if ".reports.rules." in a.name}
        if imported & (rule_modules - {name}):
            bad[name] = sorted(imported & rule_modules)
    assert bad == {}


def verdict(host: str, level: float) -> NodeVerdict:
    return NodeVerdict(
        host=host,
        effect_ratio=0.6,
        robust_z=-8.0,
        partners=23,
        partners_slow=23,
        median_busbw_GBps=level,
        slowest_partners={},
    )


def test_slow_pair_takes_slow_nodes_from_the_node_verdicts():
    """A pair as slow as its node is with anyone is the node's fault: the slow-pair rule learns which
    nodes are slow from the node verdicts it is handed, not from the slow-node rule."""
    hosts = host_names(24)
    a, b = hosts[2], hosts[17]
    fleet = make_fleet(24, 2, slow_links={(a, b): 0.7}, noise=0.05, seed=4)
    measured = AnalysisContext.from_data(fleet.rows, fleet.inventory, fleet.env, fleet.run)
    assert [f.subject for f in slow_pair.check(measured)] == [f"{a}|{b}"]
    bw = measured.pair_model.pair_bw(measured.pair_model.index[a], measured.pair_model.index[b])[-1]
    # hand-made verdicts: a is slow, at the pair's own level with everyone
    m = measured.pair_model
    nodes = NodeVerdicts(
        slow=(verdict(a, bw),), hosts=tuple(m.hosts), collective=m.collective, sizes=(1 << 30,)
    )
    ctx = AnalysisContext.from_data(
        fleet.rows,
        fleet.inventory,
        fleet.env,
        fleet.run,
        analyses=Analyses(pair_model=m, nodes=nodes),
    )
    assert slow_pair.check(ctx) == []
    # and the slow-node rule reports exactly the node it was handed
    assert [f.subject for f in slow_node.check(ctx)] == [a]


def test_a_link_confirmed_on_retest_says_check_the_path_not_retest():
    hosts = host_names(24)
    a, b = hosts[2], hosts[17]
    fleet = make_fleet(24, 2, slow_links={(a, b): 0.46}, noise=0.05, seed=4)
    confirmed = Retest(f"{a}|{b}", "link", "confirmed", {"run1": 0.46}, "re-run at 0.46x the controls")
    ctx = AnalysisContext.from_data(
        fleet.rows, fleet.inventory, fleet.env, fleet.run,
        retests=RetestEvidence({confirmed.subject: confirmed}, "x"),
    )
    (f,) = slow_pair.check(ctx)
    # issue 47: a link confirmed 54% slow is a failure (a cable or port to fix), no longer a warning
    assert f.severity == "fail" and f.title.startswith("Confirmed by re-test (re-run at 0.46x the controls)")
    assert "re-test" not in f.action.replace("re-tested slow", "") and "drain neither" in f.action


def test_a_link_cleared_on_retest_is_info_and_says_why():
    hosts = host_names(24)
    a, b = hosts[2], hosts[17]
    fleet = make_fleet(24, 2, slow_links={(a, b): 0.7}, noise=0.05, seed=4)
    cleared = Retest(f"{a}|{b}", "link", "cleared", {"run1": 0.98}, "re-run at 0.98x the controls")
    ctx = AnalysisContext.from_data(
        fleet.rows,
        fleet.inventory,
        fleet.env,
        fleet.run,
        retests=RetestEvidence({cleared.subject: cleared}, "x"),
    )
    (f,) = slow_pair.check(ctx)
    assert f.severity == "info"
    assert f.title.startswith("Not confirmed by re-test (re-run at 0.98x the controls)")
    assert f.evidence["retest"] == {
        "subject": f"{a}|{b}",
        "kind": "link",
        "verdict": "cleared",
        "ratios": {"run1": 0.98},
        "reason": "re-run at 0.98x the controls",
        "interval": None,  # a node's only, where its re-test pairs together confirmed it
        "candidate": False,  # flagged by the analysis, not re-run as one of the worst unflagged
        "slow_runs": None,  # a node's only: its re-test pairs slow beyond the noise, of those measured
    }


def test_findings_record_round_trips_through_the_run_directory(tmp_path):
    f = Finding(
        "slow_node", "fail", "node", "gpu-1", "slow", evidence={"ratio": float("nan")}, hosts=["gpu-1"]
    )
    write_findings(tmp_path, FindingsRecord(findings=(f,), run_id="r1", policy=None, baseline=None))
    doc = read_findings(tmp_path)
    assert doc.verdict == "FAIL" and doc.run_id == "r1"
    assert doc.findings[0].evidence == {"ratio": None}  # JSON has no NaN
    assert doc.to_dict()["counts"] == {"fail": 1, "warn": 0, "info": 0}
    (tmp_path / "findings.json").write_text('{"schema": "netbench.report/1"}')
    with pytest.raises(ValueError, match="netbench.findings/1"):
        read_findings(tmp_path)
    for damaged, why in (
        ("[1]", "not a netbench.findings/1 document"),
        ('{"schema": "netbench.findings/1", "findings": [{"rule": 5}]}', "finding 0: field 'rule'"),
        ('{"schema": "netbench.findings/1", "findings": {"a": 1}}', "'findings' is not a list"),
        ("\udcff", "not UTF-8"),
    ):
        (tmp_path / "findings.json").write_bytes(damaged.encode("utf-8", "surrogateescape"))
        with pytest.raises(ValueError, match=why):
            read_findings(tmp_path)
