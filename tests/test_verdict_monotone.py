"""Issue 47: verdicts that agree with themselves. Running out of re-test budget never weakens what the
sweep alone showed, and the advice names the command's own option; the headline lists every failure
(a failing switch is never cut for warning links); a link confirmed far below its peers fails; what
the analysis could not judge is said, never a silent PASS; compare exits 2 for a regression as every
failure does; a run that reached no host exits 3 (nothing measured); Slurm's drain reason is cut at
a word's end. Each on the real command line (``netbench simulate``, ``report``, ``sweep``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner
from netbench.reports.verdict import headline, judge
from synthetic import make_fleet, write_run_dir

from netbench.cli import cli
from netbench.common.findings import Finding
from netbench.sites.slurm.scontrol import REASON_MAX, drain_reason


def simulate(tmp_path: Path, name: str, *args: str) -> tuple[int, str, list[dict]]:
    out = tmp_path / name
    res = CliRunner().invoke(cli, ["simulate", "--out", str(out), *args])
    path = out / "findings.json"
    found = json.loads(path.read_text())["findings"] if path.exists() else []
    return res.exit_code, res.output, found


def test_running_out_of_retest_budget_never_weakens_the_sweeps_finding(tmp_path: Path) -> None:
    """6 hosts, node0005 at half rate: with --confirm-budget 0 the sweep alone fails it and drains it;
    a budget too short for its re-test gives the same (was WARN "Not drained ... a longer --budget")."""
    fault = ["--nodes", "6", "--leaves", "1", "--fault", "node:node0005=0.5"]
    code0, out0, _ = simulate(tmp_path, "none", *fault, "--confirm-budget", "0")
    code2, out2, found = simulate(tmp_path, "short", *fault, "--confirm-budget", "2s")
    assert code0 == code2 == 2, out0 + out2
    for out in (out0, out2):
        assert "FAIL: 1 failure" in out and "Drain node0005." in out, out
    (slow,) = [f for f in found if f["rule"] == "slow_node"]
    assert slow["severity"] == "fail" and slow["title"].startswith("Not re-tested (budget"), slow["title"]
    assert slow["evidence"]["retest"]["verdict"] == "not_run"
    assert "--budget" not in out2 and "Not drained" not in out2  # sweep has --confirm-budget only


def test_a_link_confirmed_60_percent_slow_fails_and_is_in_the_headline(tmp_path: Path) -> None:
    code, out, found = simulate(tmp_path, "link", "--nodes", "16", "--leaves", "2",
                                "--fault", "link:node0003,node0007=0.4")
    (link,) = [f for f in found if f["rule"] == "slow_pair" and f["subject"] == "node0003|node0007"]
    assert link["evidence"]["retest"]["verdict"] == "confirmed"
    assert link["severity"] == "fail", link["title"]
    head = next(line for line in out.splitlines() if line.startswith("FAIL:"))
    assert code == 2 and "Check link node0003-node0007" in head, out
    assert "Drain" not in head  # a link is a cable or a port: neither node is drained for it


def finding(rule: str, severity: str, kind: str, subject: str) -> Finding:
    return Finding(rule=rule, severity=severity, subject_kind=kind, subject=subject,
                   title=f"{rule} {subject}",
                   hosts=subject.split("|") if kind == "pair" else [subject] if kind == "node" else [])


def test_the_headline_lists_every_failure_ahead_of_warnings() -> None:
    """At 512 nodes an uplink failure sorted after a dozen warning links was cut ("and N more"); the
    drain list too is every failing node, however many."""
    found = [finding("slow_pair", "warn", "pair", f"node{i:04d}|node{i + 1:04d}") for i in range(1, 24, 2)]
    found += [finding("slow_switch", "fail", "switch", "spine07")]
    found += [finding("slow_node", "fail", "node", f"node{i:04d}") for i in range(100, 110)]
    said = headline(judge(found, 512))
    assert "spine07" in said and said.index("spine07") < said.index("node0001-node0002"), said
    assert all(f"node{i:04d}" in said for i in range(100, 110)), said
    assert "and 7 more" in said  # warnings still capped: 12 links, 5 shown after the failing switch


def test_what_could_not_be_judged_is_said_never_a_silent_pass(tmp_path: Path) -> None:
    """A fleet with every pair row of gpu003 failed: the pair model cannot judge it, and the
    report says so (WARN, exit 1, headline "Could not test gpu003"), not PASS."""
    fleet = make_fleet(8, 1, noise=0.02, seed=3)
    run = write_run_dir(fleet, tmp_path / "run")
    rows = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    kept = [r for r in rows if not (r.get("pattern") == "pair" and "gpu003" in r.get("hosts", []))]
    assert len(kept) < len(rows)
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))
    res = CliRunner().invoke(cli, ["report", str(run)])
    first = res.output.splitlines()[0]
    assert res.exit_code == 1 and first.startswith("WARN:") and "Could not test gpu003" in first, res.output
    found = json.loads((run / "findings.json").read_text())["findings"]
    (said,) = [f for f in found if f["rule"] == "pairs_not_judged"]
    assert said["hosts"] == ["gpu003"] and said["severity"] == "warn"
    assert "gpu003" not in judge([Finding.from_dict(f) for f in found], 8).drain


def test_no_host_reached_is_nothing_measured_exit_3(tmp_path: Path) -> None:
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host *\n    HostName 127.0.0.1\n    Port 1\n    ConnectTimeout 2\n")
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("nodeo4\nnode05\n")
    res = subprocess.run([sys.executable, "-m", "netbench", "sweep", "--hosts", str(hosts), "--ssh-config",
                          str(cfg), "--out", str(tmp_path / "run"), "-b", "1M", "-e", "1M"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 3, res.stderr
    assert res.stderr.strip().splitlines()[-1].startswith("netbench: error: no host could be reached")
    assert json.loads((tmp_path / "run" / "run.json").read_text())["status"] == "failed"


def test_compare_exits_2_for_a_regression(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("NETBENCH_BASELINES", str(tmp_path / "store"))
    base = write_run_dir(make_fleet(4, 2, noise=0.0, seed=5), tmp_path / "base")
    slow = write_run_dir(make_fleet(4, 2, noise=0.0, seed=5, slow_nodes={"gpu001": 0.4}), tmp_path / "slow")
    assert CliRunner().invoke(cli, ["compare", str(slow), "--baseline", str(base)]).exit_code == 2
    assert CliRunner().invoke(cli, ["compare", str(base), "--baseline", str(base)]).exit_code == 0


def test_the_slurm_drain_reason_is_cut_at_a_word_end() -> None:
    why = "slow_node: Node node05 is 50% slower (95% CI 49-51%) than its leaf peers, " * 4
    where = "run 20261207T130404Z-0602e2, report /home/u/netbench-runs/20261207T130404Z-0602e2/report.html"
    reason = drain_reason(why, where)
    assert len(reason) <= REASON_MAX and reason.endswith(f"[{where}]")
    cut = reason.removesuffix(f" [{where}]")
    assert cut.endswith("...")
    last = cut.removesuffix("...").split()[-1]
    assert last in why.split(), last  # a whole word, never "tha"


def test_report_html_banner_lists_every_failure_and_what_it_could_not_test() -> None:
    """The banner of report.html: 30 warning links sorted ahead of a failing switch cut it at 20; the
    failing switch comes first now, and the hosts it could not test are named."""
    from netbench.reports.html.findings import _verdict

    found = [finding("slow_pair", "warn", "pair", f"node{i:04d}|node{i + 1:04d}") for i in range(1, 60, 2)]
    found += [finding("slow_switch", "fail", "switch", "spine07")]
    found += [Finding(rule="host_cannot_run", severity="warn", subject_kind="node", subject="node0200",
                      title="Could not test node0200: its python3 has no torch", hosts=["node0200"])]
    html = _verdict(found, 512)
    check = html.split("<strong>Check", 1)[1]
    assert check.index("spine07") < check.index("node0001 - node0002"), check
    assert "and 11 more" in check  # 30 links + the switch: 20 shown
    assert '<strong>Could not test:</strong> <span class="mono">node0200</span>' in html
