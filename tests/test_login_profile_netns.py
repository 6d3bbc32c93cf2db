"""Issue 45 (11): a login profile that never returns leaves nothing on its host. h1's ~/.bashrc sleeps
before any command can start (bash reads it for every SSH command), so netbench's probe, or its
agent, never runs there: h1 is "could not test", as before, and once netbench has exited no process
of those sessions (the login shell, its `sleep`) is left on h1: closing the channel hangs up its pty.
The other hosts are measured and left clean too. The same with --no-inventory, where the agent's
start is the first command on h1 (its ranks did not start: the host is named as now), and when
netbench is killed (SIGKILL) while it waits on h1: its connection's end is enough."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.netns

QUICK = ["--pattern", "pairwise", "--pair-sizes", "64K", "-k", "all_reduce", "-n", "2", "-w", "1",
         "--timeout", "10", "--confirm-budget", "0"]
SLEEP = "sleep 297"  # a length of its own, to name the profile's process among the host's


def sleeping_profile(net, host: str) -> None:  # noqa: ANN001
    """Every test host binds one ~/.bashrc (netns.py's fresh_rc): ``host``'s now sleeps first."""
    rc = net.workdir / "root.bashrc"
    rc.write_text(f'[ "$(cat /etc/hostname)" = {host} ] && {SLEEP}\n' + rc.read_text())


def leftovers(net, host: str) -> list[str]:  # noqa: ANN001
    """Command lines of every process in ``host``'s namespace but its sshd listener."""
    out = []
    for pid in net.pids(host):
        if pid == net.host(host).pid:
            continue
        try:
            out.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip())
        except OSError:  # ended meanwhile
            continue
    return [x for x in out if x]


def settled(net, host: str, wait_s: float = 5.0) -> list[str]:  # noqa: ANN001
    """``leftovers`` once they are gone, or after ``wait_s`` (a hang-up's signals take a moment)."""
    end = time.monotonic() + wait_s
    while (left := leftovers(net, host)) and time.monotonic() < end:
        time.sleep(0.1)
    return left


@pytest.mark.parametrize("stage", ["inventory", "agent", "killed"])
def test_a_profile_that_never_returns_leaves_nothing_behind(netns_factory, tmp_path: Path,
                                                            stage: str) -> None:
    net = netns_factory(["h0", "h1", "h2", "h3"])
    sleeping_profile(net, "h1")
    argv = net.netbench_argv(tmp_path)
    out = tmp_path / "run"
    # the inventory's probe is the first command on h1; without it, the agent's start is
    waits = {"inventory": ["--inventory-timeout", "5s"], "killed": ["--inventory-timeout", "60s"],
             "agent": ["--no-inventory", "--start-timeout", "15s"]}[stage]
    proc = subprocess.Popen([*argv, "--out", str(out), *QUICK, *waits], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60  # while netbench waits on h1, the profile's sleep is there
    while not any(x.startswith(SLEEP) for x in leftovers(net, "h1")) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert any(x.startswith(SLEEP) for x in leftovers(net, "h1")), leftovers(net, "h1")
    if stage == "killed":  # no netbench left to close anything: its connection's end hangs h1 up
        proc.kill()
        proc.communicate(timeout=60)
        assert settled(net, "h1") == []
        return
    stdout, stderr = proc.communicate(timeout=400)
    said = stdout + stderr
    verdicts = [line for line in said.splitlines() if line.startswith(("PASS", "WARN", "FAIL"))]
    head = verdicts[0] if verdicts else said[-3000:]
    if stage == "inventory":  # left out before launch: its own set-up, never a drain, and why
        assert "Could not test h1" in head and "Drain" not in head, said[-3000:]
        assert "did not start within 5 s (a login profile that waits?)" in said, said[-3000:]
    else:  # its ranks never started: the host is named (down during the run), no one else
        assert "h1" in head and not {"h0", "h2", "h3"} & set(head.replace(",", " ").replace(".", " ").split())
    assert settled(net, "h1") == []  # neither the login shell nor its sleep outlives netbench
    for h in ("h0", "h2", "h3"):
        assert settled(net, h) == [], h


def test_a_profile_that_prints_or_resets_the_terminal_changes_no_output(netns_factory) -> None:
    """A profile's own output (with or without a newline) and its `stty sane` (echo and CR/NL back on)
    reach neither a command's output nor its input: what a command reads and prints is its own, byte
    for byte, its stderr stays apart, and none of its streams is a terminal."""
    from netbench.sites.ssh.transport import SSHOptions, connect, resolve

    net = netns_factory(["h0"])
    rc = net.workdir / "root.bashrc"
    noisy = "echo 'motd line'; printf 'no newline'; echo oops >&2; stty sane 2>/dev/null\n"
    rc.write_text(noisy + rc.read_text())
    opts = SSHOptions(ssh_config=net.write_ssh_config(net.workdir / "ssh_config"), connect_timeout=3)
    payload = bytes(range(256)) * 64 + b"\r\n\n\x03\x04\x1a"  # every byte value, the control characters
    with connect(resolve("h0", opts), opts) as c:
        assert c.run(["cat"], stdin=payload) == (0, payload, b"")
        assert c.run(["sh", "-c", "printf 'a\\nb'; echo err >&2; exit 4"]) == (4, b"a\nb", b"err\n")
        # the pty is the channel's alone: a command's own streams are pipes (on a terminal a tool
        # may page or prompt), as they were without one
        assert c.run(["sh", "-c", "test -t 1 || echo out; test -t 2 || echo err >&2; test -t 0 || echo in"]) \
            == (0, b"out\nin\n", b"err\n")
        p = c.start(["sh", "-c", 'read -r x; echo "got $x"; echo warn >&2; echo done'], stdin=b"line\n")
        assert [p.readline(10), p.readline(10), p.readline(10)] == ["got line", "done", None]
        assert p.wait(10) == 0 and "warn" in p.stderr


def test_a_server_that_refuses_a_pty_still_runs_every_command(netns_factory) -> None:
    """``PermitTTY no``: the pty is refused, and the commands run on channels without one, the same."""
    from netbench.sites.ssh.transport import SSHOptions, connect, resolve

    net = netns_factory(["h0"])
    h = net.host("h0")
    h.sshd_config.write_text(h.sshd_config.read_text() + "PermitTTY no\n")
    net.stop_sshd("h0")
    net.start_sshd("h0")
    opts = SSHOptions(ssh_config=net.write_ssh_config(net.workdir / "ssh_config"), connect_timeout=3)
    with connect(resolve("h0", opts), opts) as c:
        assert c.run(["sh", "-c", "test -t 0 || test -t 1 || echo no-tty; cat; echo e >&2"], stdin=b"in\n") \
            == (0, b"no-tty\nin\n", b"e\n")
        p = c.start(["sh", "-c", 'echo "$NETBENCH_STORE_SECRET"; sleep 300'], secret="s3cret")
        assert p.readline(10) == "s3cret" and p.pgid and p.pgid > 1
        p.terminate(grace=0.5)
        assert p.readline(5) is None
