"""env.json never records a secret-looking variable, whatever its case."""

from __future__ import annotations

import pytest
from netbench.collectives.envinfo import relevant_env


@pytest.mark.parametrize(
    "name",
    [
        "NETBENCH_api_token",
        "NETBENCH_TOKEN",
        "OMPI_MCA_pmix_password",
        "NCCL_SSH_PASSPHRASE",
        "UCX_DB_PASSWD",
        "NETBENCH_CREDENTIALS",
        "NETBENCH_Secret",
        "GLOO_private_key",
        "OMPI_MCA_oob_auth_cookie",
    ],
)
def test_secret_looking_variables_are_not_recorded(monkeypatch, name):
    monkeypatch.setenv(name, "hunter2")
    monkeypatch.setenv("NCCL_ALGO", "Ring")
    env = relevant_env()
    assert name not in env and "hunter2" not in env.values()
    assert env["NCCL_ALGO"] == "Ring"  # the filter keeps what the comparison needs
