"""The command line as an nccl-tests user and a script meet it: nccl-tests' short flags, one line for
the ones netbench lacks, help on every option, ``--fail-on``, ``latest``, and Slurm drains that lead
back to their evidence (issue 30)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from netbench.reports.verdict import exit_code, judge

from netbench.cli import LazyGroup, main
from netbench.commands._options import NCCL_TESTS_INSTEAD
from netbench.common.findings import Finding
from netbench.common.rundir import DEFAULT_ROOT, LATEST, RunDir
from netbench.run.options import RetestOptions
from netbench.sites.slurm.scontrol import REASON_MAX, drain_command, drain_reason

COMMANDS = LazyGroup(name="x").list_commands(None)  # type: ignore[arg-type]


def _commands() -> list[tuple[str, click.Command]]:
    """Every command and sub-command, by its command line."""
    out = []
    group = LazyGroup(name="netbench")
    for name in COMMANDS:
        cmd = group.get_command(None, name)  # type: ignore[arg-type]
        out.append((name, cmd))
        if isinstance(cmd, click.Group):
            out += [(f"{name} {sub}", c) for sub, c in cmd.commands.items()]
    return out


@pytest.mark.parametrize("name,cmd", _commands(), ids=[n for n, _ in _commands()])
def test_every_option_says_what_it_does(name: str, cmd: click.Command) -> None:
    bare = [p.opts[0] for p in cmd.params if isinstance(p, click.Option) and not (p.help or "").strip()]
    assert not bare, f"netbench {name}: options without help: {bare}"


def _params(*args: str) -> dict:
    cmd = LazyGroup(name="netbench").get_command(None, "sweep")  # type: ignore[arg-type]
    return cmd.make_context("sweep", list(args)).params


@pytest.mark.parametrize("args,field,value", [
    ([], "check", True),
    (["-c", "0"], "check", False),
    (["-c", "1"], "check", True),
    (["-c", "5"], "check", True),
    (["--no-check"], "check", False),
    (["--check", "0"], "check", False),
    (["-c", "0", "--check", "1"], "check", True),  # the last one given wins, as in nccl-tests
    ([], "cuda_graph", False),
    (["-G", "1"], "cuda_graph", True),
    (["-G", "0"], "cuda_graph", False),
    (["-G", "20"], "cuda_graph", True),
    (["--cuda-graph"], "cuda_graph", True),
    (["-r", "3"], "root", 3),
    (["-T", "2m"], "timeout_s", 120.0),
    (["-T", "45"], "timeout_s", 45.0),
    (["-k", "all_reduce,sendrecv"], "collectives", ["all_reduce", "sendrecv"]),
    (["--confirm-budget", "2m"], "confirm_budget_s", 120.0),
    (["--confirm-budget", "0"], "confirm_budget_s", 0.0),
    ([], "confirm_budget_s", None),  # auto: sized by the hosts once they are known (confirm_budget)
    (["--confirm-budget", "auto"], "confirm_budget_s", None),
    (["--fail-on", "warn"], "fail_on", "warn"),
])
def test_nccl_tests_flags_mean_what_they_mean_there(args: list[str], field: str, value: object) -> None:
    assert _params(*args)[field] == value


def _one_line(capsys, argv: list[str]) -> str:  # noqa: ANN001
    with pytest.raises(SystemExit) as ex:
        main(argv)
    err = capsys.readouterr().err
    assert ex.value.code == 2 and len(err.strip().splitlines()) == 1, err
    return err


def test_confirm_budget_auto_grows_with_the_fleet_and_a_given_one_is_kept() -> None:
    """auto: 60 s up to 256 hosts, then the square root of the growth (the two measured points, 60 s
    enough at 256 nodes and 120 s at 1,024); a budget given, 0 included, is the one used."""
    auto = [RetestOptions(None).seconds(n) for n in (1, 16, 256, 512, 1024, 4096)]
    assert auto[:3] == [60.0] * 3 and auto[4] == 120.0 and auto[5] == 240.0
    assert 60.0 < auto[3] < 120.0
    assert RetestOptions(0.0).seconds(1024) == 0.0 and RetestOptions(30.0).seconds(4096) == 30.0


def test_a_bad_confirm_budget_says_auto_is_a_choice(capsys) -> None:  # noqa: ANN001
    assert "1h, or auto" in _one_line(capsys, ["sweep", "--confirm-budget", "soon"])


def test_old_c_for_collectives_says_where_they_went(capsys) -> None:  # noqa: ANN001
    err = _one_line(capsys, ["sweep", "-c", "all_reduce,all_gather"])
    assert "-c is nccl-tests' check" in err and "-k all_reduce,all_gather" in err
    assert "is not a count" in _one_line(capsys, ["sweep", "-c", "fast"])
    assert "is not a count" in _one_line(capsys, ["sweep", "-c", "-1"])
    assert "is not a count" in _one_line(capsys, ["sweep", "-G", "yes"])


@pytest.mark.parametrize("flag", sorted(NCCL_TESTS_INSTEAD))
def test_nccl_tests_flags_netbench_lacks_say_what_it_does_instead(capsys, flag: str) -> None:  # noqa: ANN001
    err = _one_line(capsys, ["sweep", flag, "1"])
    assert f"nccl-tests' {flag} has no counterpart: {NCCL_TESTS_INSTEAD[flag]}" in err
    # and a flag nccl-tests never had gets the plain line
    assert "nccl-tests" not in _one_line(capsys, ["sweep", "-j", "1"])


def test_preflight_takes_the_collective_under_sweeps_name_too() -> None:
    cmd = LazyGroup(name="netbench").get_command(None, "preflight")  # type: ignore[arg-type]
    for args in (["--collective", "sendrecv"], ["--collectives", "sendrecv"], ["-k", "sendrecv"]):
        assert cmd.make_context("preflight", args).params["collective"] == "sendrecv"
    assert cmd.make_context("preflight", ["-T", "1m"]).params["timeout_s"] == 60.0


def _finding(severity: str) -> Finding:
    return Finding("slow_pair", severity, "pair", "a|b", "slow", hosts=["a", "b"])


@pytest.mark.parametrize("severity,fail_on,code", [
    ("info", "fail", 0), ("warn", "fail", 1), ("fail", "fail", 2),
    ("info", "warn", 0), ("warn", "warn", 2), ("fail", "warn", 2),
    ("info", "never", 0), ("warn", "never", 0), ("fail", "never", 0),
])
def test_fail_on_moves_the_bar(severity: str, fail_on: str, code: int) -> None:
    assert judge([_finding(severity)], 2, fail_on=fail_on).code == code


def test_fail_on_leaves_what_is_no_verdict_alone(tmp_path: Path) -> None:
    """preflight --fail-on never: nothing reachable is still 3 (could not run), never a quiet 0."""
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host *\n    HostName 127.0.0.1\n    Port 1\n    ConnectTimeout 2\n")
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("down1\ndown2\n")
    r = subprocess.run([sys.executable, "-m", "netbench", "preflight", "--hosts", str(hosts), "--ssh-config",
                        str(cfg), "--out", str(tmp_path / "run"), "--fail-on", "never"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 3 and r.stdout == "", r.stderr
    statuses = ("pass", "warn", "fail", "error", "SIGINT", "SIGTERM")
    assert [exit_code("preflight", s, "never") for s in statuses] == [0, 0, 0, 3, 130, 143]
    assert [exit_code("preflight", s, "warn") for s in statuses[:4]] == [0, 2, 2, 3]


@pytest.fixture(scope="module")
def failing_run(tmp_path_factory) -> Path:  # noqa: ANN001
    """A simulated fabric with a node at 30%: a real run directory whose verdict is FAIL."""
    out = tmp_path_factory.mktemp("sim") / "run"
    r = subprocess.run([sys.executable, "-m", "netbench", "simulate", "--nodes", "4", "--leaves", "1",
                        "--fault", "node:node0002=0.3", "--confirm-budget", "0", "--no-report",
                        "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr  # --no-report: the counts alone, and every row came back
    return out


def _report(run: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "netbench", "report", str(run), "--no-html", *args],
                          capture_output=True, text=True, timeout=300, cwd=cwd)


def test_report_exits_by_the_verdict_and_fail_on(failing_run: Path, tmp_path: Path) -> None:
    assert _report(failing_run).returncode == 2
    assert _report(failing_run, "--fail-on", "never").returncode == 0
    assert _report(failing_run, "--fail-on", "warn").returncode == 2
    policy = tmp_path / "p.toml"
    policy.write_text('[severity]\nslow_node = "warn"\nslow_pair = "warn"\n')
    warned = _report(failing_run, "--policy", str(policy))
    assert warned.returncode == 1 and warned.stdout.startswith("WARN"), warned.stdout
    assert _report(failing_run, "--policy", str(policy), "--fail-on", "warn").returncode == 2


def test_report_baseline_takes_a_saved_name(failing_run: Path, tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("NETBENCH_BASELINES", str(tmp_path / "baselines"))
    saved = subprocess.run([sys.executable, "-m", "netbench", "baseline", "save", str(failing_run),
                            "--name", "good"], capture_output=True, text=True, timeout=60)
    assert saved.returncode == 0, saved.stderr
    r = _report(failing_run, "--baseline", "good", "--format", "json")
    assert r.returncode == 2 and json.loads(r.stdout)["verdict"] == "fail", r.stderr
    missing = _report(failing_run, "--baseline", "nosuch")
    assert missing.returncode == 2 and "no baseline or run directory 'nosuch'" in missing.stderr


def test_latest_names_the_newest_run_made_under_netbench_runs(tmp_path: Path, monkeypatch, capsys) -> None:  # noqa: ANN001
    monkeypatch.chdir(tmp_path)
    assert "no latest run" in _one_line(capsys, ["report", "latest"])
    first = RunDir.create()
    second = RunDir.create()
    link = DEFAULT_ROOT / LATEST
    assert link.is_symlink() and link.resolve() == second.path.resolve()
    assert Path(str(link.readlink())) == Path(second.path.name)  # relative: the folder can move
    RunDir.create(out=tmp_path / "elsewhere")  # a run outside netbench-runs/ leaves it alone
    assert link.resolve() == second.path.resolve()
    # `latest` is a run directory like any other for report (a run with no rows: told so, exit 2)
    assert "is not a run directory" in _one_line(capsys, ["report", "latest"])
    assert first.path != second.path


def test_a_directory_called_latest_is_not_replaced(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.chdir(tmp_path)
    (DEFAULT_ROOT / LATEST).mkdir(parents=True)
    (DEFAULT_ROOT / LATEST / "keep").write_text("mine")
    RunDir.create()
    assert (DEFAULT_ROOT / LATEST / "keep").read_text() == "mine"
    assert not [p for p in DEFAULT_ROOT.iterdir() if p.name.startswith(".")]  # no temporary link left


def test_drain_reason_leads_back_to_the_run_and_its_report() -> None:
    where = "run 20261202T101500Z-3fa2c1 report /shared/netbench-runs/pf-77/report.html"
    short = drain_reason("slow_node: Node h3 is 31% slower than its leaf peers", where)
    assert short == f"netbench: slow_node: Node h3 is 31% slower than its leaf peers [{where}]"
    long = drain_reason("slow_node: " + "x" * 400, where)
    assert len(long) == REASON_MAX and long.endswith(f"[{where}]")  # the finding is cut, never the run
    argv = drain_command("h3", "slow_node: slow", where)
    assert argv[:4] == ["scontrol", "update", "NodeName=h3", "State=DRAIN"]
    assert argv[4] == f"Reason=netbench: slow_node: slow [{where}]"  # one argv element: no shell


def test_preflight_dry_run_needs_drain(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("h1\n")
    r = subprocess.run([sys.executable, "-m", "netbench", "preflight", "--hosts", str(hosts), "--dry-run"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 3 and "--dry-run shows what --drain would run" in r.stderr, r.stderr
    assert r.stdout == ""  # stdout is the drain list: nothing


def test_drain_dry_run_prints_the_commands_and_runs_none(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    from netbench.preflight.options import PreflightResult
    from netbench.preflight.outputs import drain_in_slurm

    monkeypatch.setenv("PATH", "/nonexistent")  # scontrol cannot be reached: a dry run never tries
    rundir = RunDir.create(out=tmp_path / "pf")
    result = PreflightResult(
        exit_code=2, verdict="fail", drain=["h3", "h[1-2]"], check=[], rundir=rundir, hosts=["h3"], info={},
        findings=[Finding("slow_node", "fail", "node", "h3", "Node h3 is 31% slower", hosts=["h3"])],
        report_html=rundir.path / "report.html",
    )
    lines = drain_in_slurm(result, dry_run=True)
    where = f"run {rundir.run_id} report {(rundir.path / 'report.html').resolve()}"
    assert lines[0] == ("scontrol update NodeName=h3 State=DRAIN "
                        f"'Reason=netbench: slow_node: Node h3 is 31% slower [{where}]'")
    assert lines[1].startswith("netbench: could not drain h[1-2]: will not drain")  # validated all the same
