"""One verdict (``reports.verdict``): docs/exit-status.md's table against the one function, every
command's CLI ending in each situation it can reach cheaply, and the drain list every output names."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner
from fixtures_path import fixture
from netbench.reports import verdict as V
from netbench.reports.verdict import RunFacts, exit_code, judge, run_situation
from synthetic import make_fleet, write_run_dir

from netbench.cli import cli, main
from netbench.common.findings import Finding, read_findings

DOC = Path(__file__).resolve().parents[1] / "docs" / "exit-status.md"
FAIL_ON_COMMANDS = ("sweep", "worker", "simulate", "report", "preflight")


def doc_tables() -> list[list[list[str]]]:
    """Every markdown table of docs/exit-status.md: rows of cells, the header first."""
    tables: list[list[list[str]]] = []
    block: list[list[str]] = []
    for line in [*DOC.read_text().splitlines(), ""]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= set("-: ") for c in cells):  # the separator row
                block.append(cells)
        elif block:
            tables.append(block)
            block = []
    return tables


def table(first: str) -> list[list[str]]:
    [found] = [t for t in doc_tables() if t[0][0] == first]
    return found


def cells(first: str) -> list[tuple[str, str, str]]:
    """(column, row, cell) of the table whose first header cell is ``first``."""
    head, *rows = table(first)
    return [(col, row[0].strip("`"), cell)
            for row in rows for col, cell in zip(head[1:], row[1:], strict=True)]


# -- the table is the function ------------------------------------------------------------------------
@pytest.mark.parametrize(("command", "situation", "cell"), cells("situation"))
def test_every_cell_of_the_table_is_the_one_function(command: str, situation: str, cell: str) -> None:
    if cell == "—":  # a situation the command cannot end in
        with pytest.raises(ValueError, match="does not end in"):
            exit_code(command, situation)
    else:
        assert exit_code(command, situation) == int(cell)


def test_the_table_names_every_command_and_situation_the_module_knows() -> None:
    head, *rows = table("situation")
    assert set(head[1:]) == set(V.COMMANDS) == set(V.TABLE)
    assert [r[0].strip("`") for r in rows] == list(V.SITUATIONS)
    for command, codes in V.TABLE.items():  # and nothing the page says cannot happen
        listed = {s for col, s, cell in cells("situation") if col == command and cell != "—"}
        assert listed == set(codes) | set(V.STOPS), command


@pytest.mark.parametrize("command", FAIL_ON_COMMANDS)
@pytest.mark.parametrize(("fail_on", "status", "cell"), cells("verdict"))
def test_fail_on_moves_only_the_verdicts(command: str, fail_on: str, status: str, cell: str) -> None:
    assert exit_code(command, status, fail_on.strip("`").removeprefix("--fail-on ")) == int(cell)
    for other in ("error", "bad-input", "disk-full", "SIGTERM"):
        assert exit_code(command, other, "never") == exit_code(command, other)


def test_an_unknown_command_or_bar_is_a_bug_never_a_silent_0() -> None:
    with pytest.raises(ValueError):
        exit_code("nosuch", "pass")
    with pytest.raises(ValueError):
        exit_code("report", "pass", "sometimes")


def test_every_error_has_one_situation() -> None:
    from netbench.common.errors import NetbenchError, UsageError
    from netbench.common.interrupts import DiskFull, Interrupted

    said = {
        DiskFull("/runs/x/results.jsonl"): ("disk-full", 3, 3),
        Interrupted("SIGTERM"): ("SIGTERM", 143, 143),
        KeyboardInterrupt(): ("SIGINT", 130, 130),
        UsageError("bad"): ("bad-input", 2, 3),
        NetbenchError("cannot listen", 2): ("bad-input", 2, 3),
        NetbenchError("no store"): ("named-error", 1, 3),
        NetbenchError("could not run", 3): ("error", 3, 3),
        ZeroDivisionError(): ("internal-error", 1, 3),
    }
    for exc, (situation, sweep, preflight) in said.items():
        assert V.error_situation(exc) == situation, exc
        assert (exit_code("sweep", situation), exit_code("preflight", situation)) == (sweep, preflight)


def test_a_run_that_measured_is_never_better_than_its_counts() -> None:
    warn = [Finding("slow_pair", "warn", "pair", "a|b", "slow", hosts=["a", "b"])]
    said = {
        "stopped": (RunFacts(stopped="SIGTERM", rows=9), warn, 143),
        "disk full": (RunFacts(stopped="disk-full", rows=9), warn, 3),
        "capability": (RunFacts(bad_input=True, rows=9), warn, 2),
        "no row": (RunFacts(rows=0), [], 3),
        "no report": (RunFacts(rows=9), None, 3),
        "counted, judged": (RunFacts(rows=9, counted_failure=True), warn, 2),
        "judged": (RunFacts(rows=9), warn, 1),
        "--no-report, fine": (RunFacts(rows=9, judged=False), None, 0),
        "--no-report, counted": (RunFacts(rows=9, judged=False, counted_failure=True), None, 2),
    }
    for name, (facts, findings, code) in said.items():
        assert exit_code("sweep", run_situation(facts, findings)) == code, name
    assert exit_code("sweep", run_situation(RunFacts(rows=9, counted_failure=True), []), "never") == 0


# -- the drain rule ------------------------------------------------------------------------------------
def test_the_one_drain_rule() -> None:
    def f(sev: str, kind: str, subject: str, hosts: list[str]) -> Finding:
        return Finding("r", sev, kind, subject, "t", hosts=hosts)

    fleet = [f"n{i}" for i in range(10)]
    said = judge([
        f("fail", "node", "n1", ["n1"]),
        f("fail", "component", "NIC fw 1", ["n2", "n3"]),  # 2 of 10: the odd ones out
        f("fail", "component", "NCCL 2.1", fleet[5:]),  # half the fleet: a fleet-wide fix
        f("fail", "switch", "leaf3", ["n7", "n8"]),  # the hosts behind a switch stay
        f("fail", "pair", "n4|n9", ["n4", "n9"]),
        f("warn", "node", "n6", ["n6"]),
        f("fail", "run", "run", ["n0"]),
    ], len(fleet))
    assert said.status == "fail" and said.code == 2
    assert said.drain == ("n1", "n2", "n3") and said.check == ("leaf3", "n4|n9")
    assert judge([], 3, could_run=False) == V.Verdict("error", 3)


# -- each command's CLI ends through the table --------------------------------------------------------
def report_json(run: Path, *args: str) -> tuple[int, dict]:
    res = CliRunner().invoke(cli, ["report", str(run), "--format", "json", "--no-html", *args])
    return res.exit_code, json.loads(res.stdout)


@pytest.mark.parametrize(("status", "fleet"), [
    ("pass", {}),
    ("warn", {"old_nic": 2}),
    ("fail", {"slow_nodes": {"gpu003": 0.5}}),
])
def test_report_of_a_finished_sweep_exits_by_its_verdict(tmp_path: Path, status: str, fleet: dict) -> None:
    old = fleet.pop("old_nic", None)
    made = make_fleet(8, 2, noise=0.02, seed=41, **fleet)
    if old is not None:
        for nic in made.inventory[old]["nics"]:
            nic["firmware"] = "28.38.1000"
    run = write_run_dir(made, tmp_path / "run")
    code, doc = report_json(run)
    assert (doc["verdict"], code, doc["exit_code"]) == (status, exit_code("report", status), code)
    assert doc["schema"] == "netbench.report/1" and {"headline", "top", "retests", "check"} <= set(doc)
    for fail_on in ("warn", "never"):
        assert report_json(run, "--fail-on", fail_on)[0] == exit_code("report", status, fail_on)


def test_bad_input_of_every_command_is_the_table_s(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    missing = str(tmp_path / "nosuch")
    argvs = {
        "sweep": ["sweep", "--hosts", missing],
        "worker": ["worker", "--no-such-option"],
        "simulate": ["simulate", "--nodes", "0"],
        "report": ["report", missing],
        "import": ["import", "nccl-tests", missing],
        "preflight": ["preflight", "--hosts", missing],
        "compare": ["compare", missing, "--baseline", missing],
        "inventory": ["inventory", "--hosts", missing],
        "baseline": ["baseline", "save", missing, "--name", "x"],
        "export": ["export", missing, "--out", str(tmp_path / "o")],
    }
    for command, argv in argvs.items():
        with pytest.raises(SystemExit) as ex:
            main(argv)
        err = capsys.readouterr().err
        assert ex.value.code == exit_code(command, "bad-input"), (command, err)
        assert "error:" in err and "Traceback" not in err, (command, err)


def test_preflight_could_not_run_and_its_bugs_exit_3(tmp_path, monkeypatch, capsys) -> None:  # noqa: ANN001
    import netbench.preflight

    hosts = tmp_path / "hosts"
    hosts.write_text("h1\nh2\n")
    with pytest.raises(SystemExit) as ex:
        main(["preflight", "--hosts", str(hosts), "--dry-run"])  # without --drain: could not run
    assert ex.value.code == exit_code("preflight", "error") == 3
    assert "--dry-run shows what --drain would run" in capsys.readouterr().err
    monkeypatch.setattr(netbench.preflight, "run_preflight", lambda opts: 1 / 0)
    with pytest.raises(SystemExit) as ex:
        main(["preflight", "--hosts", str(hosts)])
    assert ex.value.code == exit_code("preflight", "internal-error") == 3
    assert "internal error: ZeroDivisionError" in capsys.readouterr().err


@pytest.mark.parametrize(("fault", "status"), [(None, "pass"), ("gpu:node0003", "fail")])
def test_preflight_exits_by_its_verdict(tmp_path: Path, fault: str | None, status: str) -> None:
    argv = ["simulate", "--preflight", "--nodes", "8", "--leaves", "2", "--seed", "2",
            "--out", str(tmp_path / "r")]
    res = CliRunner().invoke(cli, [*argv, *(["--fault", fault] if fault else [])])
    assert res.exit_code == exit_code("preflight", status), res.output


@pytest.mark.parametrize(("fault", "status"), [(None, "pass"), ("node:node0002=0.3", "fail")])
def test_simulate_exits_by_its_verdict(tmp_path: Path, fault: str | None, status: str) -> None:
    argv = ["simulate", "--nodes", "4", "--leaves", "1", "--confirm-budget", "0",
            "--out", str(tmp_path / "r")]
    res = CliRunner().invoke(cli, [*argv, *(["--fault", fault] if fault else [])])
    findings = list(read_findings(tmp_path / "r").findings)
    assert V.status_of(findings) == status, [f.title for f in findings]
    assert res.exit_code == exit_code("simulate", status), res.output


def test_import_exits_by_the_verdict_of_its_report(tmp_path: Path) -> None:
    log = fixture("nccl-tests-h200-1gpu") / "all_reduce.txt"
    res = CliRunner().invoke(cli, ["import", "nccl-tests", str(log), "--out", str(tmp_path / "ok")])
    status = V.status_of(list(read_findings(tmp_path / "ok").findings))
    assert res.exit_code == exit_code("import", status), res.output
    lines = log.read_text().splitlines()
    cut = next(i for i, line in enumerate(lines) if line.split()[:1] == ["1048576"])
    broken = tmp_path / "broken.log"  # a log ending in an NCCL failure: imported_run_failed
    failure = ["vm: Test NCCL failure common.cu:1005 'unhandled system error'",
               " .. vm pid 1182: Test failure common.cu:892"]
    broken.write_text("\n".join([*lines[:cut], *failure]) + "\n")
    res = CliRunner().invoke(cli, ["import", "nccl-tests", str(broken), "--out", str(tmp_path / "bad")])
    assert res.exit_code == exit_code("import", "fail"), res.output


def test_compare_exits_by_regression(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("NETBENCH_BASELINES", str(tmp_path / "store"))
    run = write_run_dir(make_fleet(4, 2, noise=0.0, seed=5), tmp_path / "base")
    slow = write_run_dir(make_fleet(4, 2, noise=0.0, seed=5, slow_nodes={"gpu001": 0.4}), tmp_path / "slow")
    runner = CliRunner()
    assert runner.invoke(cli, ["compare", str(run), "--baseline", str(run)]).exit_code == exit_code(
        "compare", "pass")
    # issue 47: a regression is a failure (2), as every failure of the tool
    assert runner.invoke(cli, ["compare", str(slow), "--baseline", str(run)]).exit_code == exit_code(
        "compare", "fail") == 2


def test_inventory_of_a_host_it_cannot_reach_is_its_warning(tmp_path: Path) -> None:
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host *\n    HostName 127.0.0.1\n    Port 1\n    ConnectTimeout 2\n")
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("down1\n")
    res = CliRunner().invoke(cli, ["inventory", "--hosts", str(hosts), "--ssh-config", str(cfg),
                                   "--out", str(tmp_path / "run"), "--json"])
    assert res.exit_code == exit_code("inventory", "warn") == 1, res.output


# -- the same nodes in every output --------------------------------------------------------------------
class _Kube:
    """What ``k8s_remedy`` asks of the Kubernetes API: the nodes it changes, recorded."""

    def __init__(self) -> None:
        self.tainted: list[str] = []

    def update_node(self, host: str, change) -> None:  # noqa: ANN001 - a node -> node function
        node: dict = {"metadata": {"name": host, "labels": {}}, "spec": {}}
        if change(node) and node["spec"].get("taints"):  # changed in place, as Kube.update_node's
            self.tainted.append(host)


OLD_DRIVER = ("node0004", "node0013")


def _old_driver_on_two(monkeypatch: pytest.MonkeyPatch) -> None:
    """The simulated fleet's inventory with a GPU driver below the policy's minimum on two nodes."""
    from netbench.sim.preflight import SimSite

    probe = SimSite.inventory

    def inventory(self, entries, echo, timeout_s=60.0):  # noqa: ANN001, ANN202
        nodes = probe(self, entries, echo, timeout_s)
        for n in nodes:
            n.driver_version = "535.54.03" if n.host in OLD_DRIVER else "550.54.15"
        return nodes

    monkeypatch.setattr(SimSite, "inventory", inventory)


RUNS = {  # what is planted -> the nodes every output must name
    "slow node": (["node:node0005=0.5"], {}, ["node0005"]),
    "component on a minority": ([], {}, sorted(OLD_DRIVER)),
    "switch": (["uplink:leaf02=0.5"], {"nodes": 32, "leaves": 4, "oversubscription": 2.0}, []),
}


@pytest.mark.parametrize("name", list(RUNS))
def test_every_output_names_the_same_nodes(tmp_path: Path, monkeypatch, name: str) -> None:  # noqa: ANN001
    from netbench.preflight import PreflightOptions, json_report
    from netbench.preflight.outputs import drain_in_slurm
    from netbench.run.options import ReportOptions
    from netbench.sim.fabric import FabricSpec, Fault
    from netbench.sim.options import SimOptions
    from netbench.sim.preflight import simulate_preflight
    from netbench.sites.k8s.remedy import remediate

    faults, fabric, want = RUNS[name]
    policy = tmp_path / "policy.toml"
    policy.write_text('[versions.minimum]\ndriver = "550.54.15"\n')
    if name == "component on a minority":
        _old_driver_on_two(monkeypatch)
    spec = FabricSpec(**({"nodes": 16, "leaves": 2} | fabric))
    sim = SimOptions(spec, tuple(Fault.parse(f) for f in faults), seed=1, out=str(tmp_path / "run"))
    result = simulate_preflight(sim, PreflightOptions(report=ReportOptions(policy=str(policy)))).result
    run = result.rundir.path

    stdout = list(result.drain)  # what `netbench preflight` prints, one node a line
    doc = json.loads(json.dumps(json_report(result)))
    html = (run / "report.html").read_text()
    banner = re.search(r"<strong>Drain:</strong> <span class=\"mono\">([^<]*)</span>", html)
    in_html = banner.group(1).split(", ") if banner else []
    slurm = [dict(w.split("=", 1) for w in shlex.split(line) if "=" in w)["NodeName"]
             for line in drain_in_slurm(result, dry_run=True)]
    kube, swept = _Kube(), _Kube()
    remediate(kube, result.rundir, result.findings, result.drain, result.hosts, label=False, taint=True)
    remediate(swept, result.rundir, result.findings, None, result.hosts, label=False, taint=True)  # sweep's
    _, reported = report_json(run, "--policy", str(policy))  # `netbench report` of the same run

    said = {"stdout": stdout, "json": doc["drain"], "report.html": in_html, "slurm": slurm,
            "k8s taint (preflight)": kube.tainted, "k8s taint (sweep)": swept.tainted,
            "netbench report --format json": reported["drain"]}
    assert said == dict.fromkeys(said, want), name
    if name == "switch":  # named to check, its healthy hosts never drained
        assert doc["check"] == reported["check"] == ["leaf02"] and "leaf02" in html
