"""``netbench report``: exit codes 0/1/2, formats, files written, one-line errors."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from netbench.reports.summary import summary_text
from netbench.reports.verdict import judge
from synthetic import host_names, make_fleet, write_run_dir

from netbench.cli import cli, main


def run(*args: str):
    return CliRunner().invoke(cli, ["report", *args])


@pytest.fixture
def healthy(tmp_path):
    return write_run_dir(make_fleet(8, 2, noise=0.03, seed=31), tmp_path / "healthy")


def test_healthy_run_exits_0_and_writes_both_files(healthy):
    res = run(str(healthy))
    assert res.exit_code == 0, res.output
    assert res.output.startswith("PASS:")
    assert (healthy / "findings.json").exists() and (healthy / "report.html").exists()
    doc = json.loads((healthy / "findings.json").read_text())
    assert doc["verdict"] == "PASS" and doc["schema"] == "netbench.findings/1"


def test_warnings_exit_1(tmp_path):
    fleet = make_fleet(8, 2, noise=0.03, seed=32)
    for nic in fleet.inventory[2]["nics"]:
        nic["firmware"] = "28.38.1000"
    res = run(str(write_run_dir(fleet, tmp_path / "r")), "--format", "json", "--no-html")
    assert res.exit_code == 1, res.output
    out = json.loads(res.output)
    assert out["verdict"] == "warn" and out["counts"]["warn"] == 1 and out["exit_code"] == 1
    assert not (tmp_path / "r" / "report.html").exists()


def test_failures_exit_2_markdown(tmp_path):
    hosts = host_names(12)
    fleet = make_fleet(12, 2, slow_nodes={hosts[3]: 0.7}, noise=0.03, seed=33)
    fleet.run["hosts"] = hosts  # as a sweep's run.json has them
    res = run(str(write_run_dir(fleet, tmp_path / "r")), "--format", "markdown", "--plotlyjs", "cdn")
    assert res.exit_code == 2, res.output
    assert res.output.startswith("### netbench: FAIL")
    assert f"| fail | slow_node | {hosts[3]} |" in res.output
    # ready for a ticket: which run, when, on how many hosts, and the headline busbw
    meta = json.loads((tmp_path / "r" / "run.json").read_text())
    second = res.output.splitlines()[2]
    assert second.startswith(f"run {meta['run_id']} · ") and " UTC · 12 hosts" in second, second
    assert any(ln.startswith("- all_reduce large-message busbw ") for ln in res.output.splitlines())


def test_policy_severity_override_changes_exit(tmp_path):
    fleet = make_fleet(8, 2, noise=0.03, seed=34)
    for nic in fleet.inventory[2]["nics"]:
        nic["firmware"] = "28.38.1000"
    rd = write_run_dir(fleet, tmp_path / "r")
    pol = tmp_path / "p.toml"
    pol.write_text('[severity]\noutdated_firmware = "fail"\n')
    assert run(str(rd), "--policy", str(pol), "--no-html").exit_code == 2


def test_baseline_regression_and_topology_file(tmp_path):
    base = make_fleet(8, 2, noise=0.01, seed=35)
    cur = make_fleet(8, 2, noise=0.01, seed=35, peak_GBps=120.0)  # the whole fabric got slower
    b, c = write_run_dir(base, tmp_path / "base"), write_run_dir(cur, tmp_path / "cur")
    topo = tmp_path / "topo.json"
    topo.write_text(json.dumps({"switches": {"leafA": host_names(8)[:4], "leafB": host_names(8)[4:]}}))
    res = run(str(c), "--baseline", str(b), "--topology", str(topo), "--format", "json", "--top", "50")
    assert res.exit_code == 1, res.output
    assert "regression" in {f["rule"] for f in json.loads(res.output)["top"]}
    assert "baseline" in (c / "report.html").read_text()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["/nonexistent/run"], "run directory not found"),
        (["{tmp}"], "is not a run directory"),
        (["{run}", "--policy", "{tmp}/bad.toml"], "unknown key"),
        (["{run}", "--baseline", "/nonexistent/base"], "no baseline or run directory '/nonexistent/base'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, healthy, args, needle):
    (tmp_path / "bad.toml").write_text("[thresholds]\nmad = 3\n")
    args = [a.format(tmp=tmp_path, run=healthy) for a in args]
    res = run(*args)
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in res.output


def test_a_missing_topology_is_one_line_and_exit_2(capsys, tmp_path, healthy):
    """Refused while the command line is read (params.InputFile), as netbench prints it: one line."""
    with pytest.raises(SystemExit) as ex:
        main(["report", str(healthy), "--topology", str(tmp_path / "missing.conf")])
    err = capsys.readouterr().err
    assert ex.value.code == 2 and err.count("\n") == 1 and "topology file not found" in err, err


def test_terminal_summary_does_not_obey_host_control_characters(tmp_path):
    from netbench.common.findings import Finding

    f = Finding(
        rule="port_down",
        severity="fail",
        subject_kind="node",
        subject="h1",
        title="h1: \x1b[2J\x1b[31mport\r down",
        hosts=["h1"],
    )
    text = summary_text([f])
    assert "\x1b" not in text and "\r" not in text and "\\x1b[2J" in text
    assert judge([f], 1).code == 2 and judge([], 1).code == 0
