"""Every command answers --help with examples, without importing the heavy libraries; progress bars
are drawn only on a terminal."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

import pytest
from click.testing import CliRunner

from netbench.cli import LazyGroup, cli

COMMANDS = LazyGroup(name="x").list_commands(None)  # type: ignore[arg-type]


def test_all_commands_are_there() -> None:
    want = {"sweep", "inventory", "report", "preflight", "worker", "import", "baseline", "compare"}
    assert want <= set(COMMANDS)


@pytest.mark.parametrize("name", COMMANDS)
def test_help_has_examples(name: str) -> None:
    res = CliRunner().invoke(cli, [name, "--help"])
    assert res.exit_code == 0, res.output
    assert "Example" in res.output and f"netbench {name}" in res.output


def test_help_imports_no_heavy_library() -> None:
    code = ("import sys; from netbench.cli import main\n"
            "try:\n    main(['sweep', '--help'])\nexcept SystemExit: pass\n"
            "print(sorted(m for m in ('torch', 'pandas', 'plotly', 'paramiko') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def _run_on_tty(args: list[str], stream: str = "stderr", env: dict[str, str] | None = None) -> bytes:
    """Run netbench with ``stream`` (stderr or stdout) on a pseudo-terminal, the other one dropped;
    return what the terminal got."""
    master, slave = pty.openpty()
    argv = [sys.executable, "-m", "netbench", *args]
    where = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, stream: slave}
    proc = subprocess.Popen(argv, stdout=where["stdout"], stderr=where["stderr"], env=env)
    os.close(slave)
    got = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        got += chunk
    proc.wait(timeout=300)
    os.close(master)
    return got


def test_progress_bar_on_a_terminal_only(tmp_path) -> None:  # noqa: ANN001
    args = ["sweep", "-p", "2", "-b", "1K", "-e", "64K", "-n", "2", "-w", "0", "--no-report"]
    tty = _run_on_tty([*args, "--out", str(tmp_path / "a")])
    assert b"[#" in tty and b"/28" in tty  # bar with done/total points: 7 sizes x 2 collectives x 2
    piped = subprocess.run([sys.executable, "-m", "netbench", *args, "--out", str(tmp_path / "b")],
                           capture_output=True, text=True, timeout=120)
    assert "[#" not in piped.stderr


def test_verdict_in_colour_on_a_terminal_only(tmp_path) -> None:  # noqa: ANN001
    """FAIL red, [WARN] yellow ... on a terminal; plain through a pipe and with NO_COLOR set."""
    from synthetic import host_names, make_fleet, write_run_dir

    hosts = host_names(12)
    run = write_run_dir(make_fleet(12, 2, slow_nodes={hosts[3]: 0.7}, noise=0.03, seed=33), tmp_path / "r")
    args = ["report", str(run), "--no-html"]
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}  # the caller's NO_COLOR left out
    tty = _run_on_tty(args, "stdout", env)
    assert tty.startswith(b"\x1b[1;31mFAIL\x1b[0m:") and b"[\x1b[1;31mFAIL\x1b[0m] slow_node" in tty
    assert b"\x1b" not in _run_on_tty(args, "stdout", {**env, "NO_COLOR": "1"})
    piped = subprocess.run([sys.executable, "-m", "netbench", *args], capture_output=True, timeout=300,
                           env=env)
    assert piped.stdout.startswith(b"FAIL:") and b"\x1b" not in piped.stdout


def test_preflight_s_verdict_on_stderr_in_colour_on_a_terminal_only(tmp_path) -> None:  # noqa: ANN001
    """Preflight's verdict goes to stderr (stdout: the drain list): coloured where stderr is a
    terminal, plain in a pipe, the drain list never coloured."""
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    args = ["simulate", "--preflight", "--nodes", "16", "--leaves", "2", "--fault", "gpu:node0003",
            "--seed", "2"]
    tty = _run_on_tty([*args, "--out", str(tmp_path / "a")], "stderr", env)
    assert b"\x1b[1;31mFAIL\x1b[0m:" in tty and b"[\x1b[1;31mFAIL\x1b[0m] " in tty, tty[-2000:]
    piped = subprocess.run([sys.executable, "-m", "netbench", *args, "--out", str(tmp_path / "b")],
                           capture_output=True, timeout=300, env=env)
    assert piped.returncode == 2 and piped.stdout == b"node0003\n"
    assert b"FAIL:" in piped.stderr and b"\x1b" not in piped.stderr
