"""netbench.sites.ssh.transport: config resolution and quoting (no network), then real sshd hosts
(marked netns)."""

from __future__ import annotations

import logging
import subprocess
import time
from pathlib import Path

import pytest
from netbench.inventory.hosts import HostEntry
from netns import TestNetwork, generate_ed25519

from netbench.sites.ssh.transport import SSHError, SSHOptions, connect, remote_command, resolve


# -- no network ------------------------------------------------------------------------------------
def _cfg(tmp_path: Path, text: str) -> SSHOptions:
    p = tmp_path / "ssh_config"
    p.write_text(text)
    return SSHOptions(ssh_config=p, known_hosts=tmp_path / "kh")


def test_resolve_applies_config_and_labels(tmp_path: Path) -> None:
    opts = _cfg(tmp_path, "Host n1\n  HostName 10.1.2.3\n  User ops\n  Port 2200\n  IdentityFile ~/k1\n"
                          "Host *\n  User fallback\n")
    t = resolve(HostEntry("n1"), opts)
    assert (t.hostname, t.user, t.port) == ("10.1.2.3", "ops", 2200)
    assert t.identity_files[-1].endswith("/k1") and not t.identity_files[-1].startswith("~")
    t2 = resolve(HostEntry("n1", labels={"user": "alice", "port": "2222"}), opts)
    assert (t2.user, t2.port, t2.hostname) == ("alice", 2222, "10.1.2.3")
    assert resolve(HostEntry("other"), opts).user == "fallback"
    assert t.key_name == "[10.1.2.3]:2200"


def test_resolve_proxyjump_chain(tmp_path: Path) -> None:
    opts = _cfg(tmp_path, "Host bastion\n  HostName 192.0.2.1\n  User jump\n"
                          "Host inner\n  HostName 192.0.2.2\n  ProxyJump bastion\n"
                          "Host n*\n  ProxyJump inner,admin@192.0.2.9:2022\n")
    t = resolve("n7", opts)
    assert [(j.hostname, j.user, j.port) for j in t.jumps][0] == ("192.0.2.1", "jump", 22)
    assert [j.hostname for j in t.jumps] == ["192.0.2.1", "192.0.2.2", "192.0.2.9"]
    assert (t.jumps[-1].user, t.jumps[-1].port) == ("admin", 2022)


def test_resolve_rejects_bad_names(tmp_path: Path) -> None:
    opts = _cfg(tmp_path, "Host evil\n  HostName -oProxyCommand=touch\n")
    with pytest.raises(SSHError, match="HostName"):
        resolve("evil", opts)
    with pytest.raises(SSHError, match="host name"):
        resolve("a;b", opts)


def test_missing_config_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SSHError, match="not found"):
        resolve("x", SSHOptions(ssh_config=tmp_path / "nope"))


def test_remote_command_quotes_every_argument() -> None:
    """Run the generated command with a real local shell: argv arrives unchanged, env is set."""
    tricky = ["a b", "$(echo pwned)", "`id`", "'quote'", '"dq"', "semi;colon", "*", "--", ""]
    cmd = remote_command(["printf", "<%s>\\n", *tricky], env={"NB_X": "v w;$HOME"})
    out = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert lines[0].startswith("__NETBENCH_PGID__ ")
    assert lines[1:] == [f"<{x}>" for x in tricky]
    env_cmd = remote_command(["sh", "-c", 'printf %s "$NB_X"'], env={"NB_X": "v w;$HOME"})
    assert subprocess.run(["sh", "-c", env_cmd], capture_output=True, text=True).stdout.endswith("v w;$HOME")
    with pytest.raises(ValueError):
        remote_command(["true"], env={"BAD NAME": "x"})


# -- real sshd -------------------------------------------------------------------------------------
def _opts(net: TestNetwork, **kw) -> SSHOptions:
    kw.setdefault("connect_timeout", 3)
    return SSHOptions(ssh_config=net.write_ssh_config(net.workdir / "ssh_config"), **kw)


def _procs(net: TestNetwork, host: str, word: str) -> list[str]:
    """Command lines of the host's processes that start with ``word`` (its namespace only)."""
    out = []
    for pid in net.pids(host):
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if args.startswith(word):
            out.append(args)
    return out


@pytest.mark.netns
def test_run_output_status_stdin_and_hostname(netns_factory) -> None:
    net = netns_factory(2)
    opts = _opts(net)
    with connect(resolve(HostEntry("h1"), opts), opts) as c:
        rc, out, err = c.run(["sh", "-c", "hostname; echo oops >&2; exit 3"])
        assert (rc, out, err) == (3, b"h1\n", b"oops\n")
        payload = bytes(range(256)) * 4096  # 1 MiB, every byte value
        rc, out, _ = c.run(["cat"], stdin=payload)
        assert rc == 0 and out == payload
        rc, out, _ = c.run(["echo", "$(hostname)", "a;b"])
        assert out == b"$(hostname) a;b\n"


@pytest.mark.netns
def test_run_timeout_kills_remote_group(netns_factory) -> None:
    net = netns_factory(1)
    opts = _opts(net)
    with connect(resolve("h0", opts), opts) as c:
        t0 = time.monotonic()
        with pytest.raises(SSHError) as exc:
            # GNU timeout puts its child in a process group of its own: the kill must still reach it
            c.run(["sh", "-c", "timeout 600 sleep 302 & sleep 301; wait"], timeout=1)
        assert exc.value.kind == "timeout" and time.monotonic() - t0 < 6
        time.sleep(0.3)
        assert _procs(net, "h0", "sleep 30") == [] and _procs(net, "h0", "timeout 600") == []


@pytest.mark.netns
def test_start_streams_lines_and_terminate_kills_tree(netns_factory) -> None:
    net = netns_factory(1)
    opts = _opts(net)
    with connect(resolve("h0", opts), opts) as c:
        script = 'trap "" TERM; sleep 400 & echo "{\\"rank\\": $NB_RANK}"; echo second; wait'
        p = c.start(["sh", "-c", script], env={"NB_RANK": "3"})
        assert p.readline(10) == '{"rank": 3}'
        assert p.readline(10) == "second"
        with pytest.raises(TimeoutError):
            p.readline(0.2)
        assert p.returncode is None and p.pgid and p.pgid > 1
        assert len(_procs(net, "h0", "sleep 400")) == 1
        p.terminate(grace=0.5)  # the shell ignores TERM: KILL must follow
        assert p.returncode is not None
        assert p.readline(1) is None
        time.sleep(0.2)
        assert _procs(net, "h0", "sleep 400") == []


@pytest.mark.netns
def test_lost_session_leaves_nothing_behind(netns_factory) -> None:
    net = netns_factory(1)
    opts = _opts(net)
    c = connect(resolve("h0", opts), opts)
    c.start(["sleep", "500"])
    deadline = time.monotonic() + 5
    while not _procs(net, "h0", "sleep 500") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _procs(net, "h0", "sleep 500")
    c.close()  # like a launcher killed by SIGKILL: no terminate() call
    deadline = time.monotonic() + 5
    while _procs(net, "h0", "sleep 500") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _procs(net, "h0", "sleep 500") == []


@pytest.mark.netns
def test_host_keys_unknown_accepted_changed(netns_factory, tmp_path: Path) -> None:
    net = netns_factory(2)
    kh = net.write_known_hosts(tmp_path / "known_hosts", hosts=["h0"])
    strict = _opts(net, known_hosts=kh)
    with pytest.raises(SSHError) as exc:
        connect(resolve("h1", strict), strict)
    assert exc.value.kind == "host_key_refused" and "--accept-new-host-keys" in str(exc.value)
    assert net.host("h1").addr not in kh.read_text()

    tofu = _opts(net, known_hosts=kh, accept_new_host_keys=True)
    connect(resolve("h1", tofu), tofu).close()
    assert net.host("h1").host_key_line() in kh.read_text().splitlines()
    connect(resolve("h1", strict), strict).close()  # now known: strict mode connects

    net.regenerate_host_key("h1")
    for opts in (strict, tofu):  # a changed key is refused even when new keys are accepted
        with pytest.raises(SSHError) as exc:
            connect(resolve("h1", opts), opts)
        assert exc.value.kind == "host_key_changed" and "CHANGED" in str(exc.value)


@pytest.mark.netns
def test_unreachable_and_auth_failures(netns_factory, tmp_path: Path) -> None:
    net = netns_factory(3)
    opts = _opts(net)
    net.stop_sshd("h0")
    with pytest.raises(SSHError) as exc:
        connect(resolve("h0", opts), opts)
    assert exc.value.kind == "unreachable" and "refused" in str(exc.value)

    net.kill_host("h1", cut_link=True)
    quick = _opts(net, connect_timeout=0.5)
    t0 = time.monotonic()
    with pytest.raises(SSHError) as exc:
        connect(resolve("h1", quick), quick)
    assert exc.value.kind == "unreachable" and time.monotonic() - t0 < 3

    generate_ed25519(tmp_path / "stranger")
    wrong = _opts(net)
    cfg = Path(wrong.ssh_config).read_text().replace(str(net.key_path), str(tmp_path / "stranger"))
    Path(wrong.ssh_config).write_text(cfg)
    with pytest.raises(SSHError) as exc:
        connect(resolve("h2", wrong), wrong)
    assert exc.value.kind == "auth_failed" and "stranger" in str(exc.value)


@pytest.mark.netns
def test_proxyjump_two_hops(netns_factory) -> None:
    """h2 reached through h0 then h1: the target sees the connection coming from h1's address."""
    net = netns_factory(3)
    cfg = net.write_ssh_config(net.workdir / "cfg", extra={"h2": ["ProxyJump h0,h1"]})
    opts = SSHOptions(ssh_config=cfg, connect_timeout=3)
    target = resolve("h2", opts)
    assert [j.name for j in target.jumps] == ["h0", "h1"]
    with connect(target, opts) as c:
        rc, out, _ = c.run(["sh", "-c", 'hostname; echo "$SSH_CLIENT"'])
    name, client = out.decode().split("\n")[:2]
    assert (rc, name, client.split()[0]) == (0, "h2", net.host("h1").addr)

    net.stop_sshd("h1")
    with pytest.raises(SSHError) as exc:
        connect(resolve("h2", opts), opts)
    assert exc.value.kind == "unreachable" and "jump host h1" in str(exc.value)


@pytest.mark.netns
def test_secrets_stay_out_of_logs(netns_factory, caplog) -> None:
    net = netns_factory(1)
    opts = _opts(net, accept_new_host_keys=True)
    secret = "s3cr3t-token-value"
    caplog.set_level(logging.DEBUG)
    with connect(resolve("h0", opts), opts) as c:
        rc, out, _ = c.run(["sh", "-c", 'printf %s "$NB_TOKEN"'], env={"NB_TOKEN": secret}, stdin=b"x")
    assert out.decode() == secret
    key_body = "".join(net.key_path.read_text().splitlines()[1:-1])
    for rec in caplog.records:
        msg = rec.getMessage()
        assert secret not in msg and key_body[:40] not in msg


@pytest.mark.netns
def test_remote_output_is_bounded(netns_factory) -> None:
    net = netns_factory(1)
    opts = _opts(net, accept_new_host_keys=True)
    with connect(resolve("h0", opts), opts) as c:
        rc, out, _ = c.run(["head", "-c", "1000", "/dev/zero"], max_output=4096)
        assert (rc, len(out)) == (0, 1000)
        with pytest.raises(SSHError, match="wrote more than 4096 bytes of output; killed") as exc:
            c.run(["cat", "/dev/zero"], max_output=4096, timeout=30)
        assert exc.value.kind == "error"
        assert c.run(["echo", "still usable"])[1] == b"still usable\n"
