"""OpenSSH markers in known_hosts: ``@revoked`` refuses that key, ``@cert-authority`` is skipped;
neither (nor a damaged line) breaks the other hosts' keys."""

from __future__ import annotations

import paramiko
import pytest

from netbench.sites.ssh.transport import SSHError, SSHTarget, check_host_key, known_keys


@pytest.fixture
def keys():
    return [paramiko.ECDSAKey.generate() for _ in range(3)]


def line(names: str, key: paramiko.PKey, marker: str = "") -> str:
    return f"{marker + ' ' if marker else ''}{names} {key.get_name()} {key.get_base64()}\n"


def target(kh, name: str) -> SSHTarget:
    return SSHTarget(name=name, hostname=name, known_hosts_files=(str(kh),))


def test_markers_do_not_break_other_hosts(tmp_path, keys):
    ca, good, bad = keys
    kh = tmp_path / "known_hosts"
    kh.write_text(
        line("*.example.com", ca, "@cert-authority")
        + "node-09 ssh-ed25519 AAAA-not-base64\n"
        + line("node-01", good)
        + line("node-02", bad, "@revoked")
        + line("node-02", bad)
    )
    check_host_key(target(kh, "node-01"), good, accept_new=False)  # trusted as before
    assert known_keys(target(kh, "node-01")) == [good]
    with pytest.raises(SSHError, match="marked @revoked") as err:
        check_host_key(target(kh, "node-02"), bad, accept_new=True)  # revoked wins, even over opt-in
    assert err.value.kind == "host_key_refused"


def test_a_host_trusted_only_through_a_ca_is_unknown(tmp_path, keys):
    ca, host_key, _ = keys
    kh = tmp_path / "known_hosts"
    kh.write_text(line("*.example.com", ca, "@cert-authority"))
    with pytest.raises(SSHError, match="unknown host key"):
        check_host_key(target(kh, "gpu1.example.com"), host_key, accept_new=False)
