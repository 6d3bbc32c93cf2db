"""An imported log names GPUs and hosts but never NICs: without ``--nics`` its ceiling is unknown,
yet a 2 x 8 H100 log far below what such nodes reach must not be a quiet PASS (issue 30). The
platform references (reports/assets/references.toml) judge it, saying what they assume."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from fixtures_path import fixture

from netbench.cli import cli

A3MEGA = fixture("nccl-tests-public") / "lessizzmore-create-a3mega-ztan-fork__ztan-NCCL-test-result.txt"


def slowed(factor: float, to: Path) -> Path:
    """The real 2 x 8 H100 log with every measurement ``factor`` as fast: times / factor, algbw and
    busbw x factor, as nccl-tests would print them for a fabric that slow."""
    out = []
    for line in A3MEGA.read_text().splitlines():
        tok = line.split()
        if len(tok) == 13 and tok[0].isdigit():
            for t, a, b in ((5, 6, 7), (9, 10, 11)):
                tok[t] = f"{float(tok[t]) / factor:.1f}"
                tok[a] = f"{float(tok[a]) * factor:.2f}"
                tok[b] = f"{float(tok[b]) * factor:.2f}"
            line = "  " + "  ".join(tok)
        out.append(line)
    to.write_text("\n".join(out) + "\n")
    return to


def imported(log: Path, out: Path, *extra: str) -> tuple[int, str, list[dict]]:
    res = CliRunner().invoke(cli, ["import", "nccl-tests", str(log), "--out", str(out), *extra])
    findings = json.loads((out / "findings.json").read_text())["findings"]
    return res.exit_code, res.output, findings


def test_a_slow_2x8_h100_log_without_nics_is_held_against_the_dgx_figure(tmp_path):
    log = slowed(0.6, tmp_path / "all_reduce.log")
    rc, output, findings = imported(log, tmp_path / "run")
    [f] = [f for f in findings if f["rule"] == "below_reference"]
    assert rc == 1 and f["severity"] == "warn", output
    assert "197.4 GB/s is 54% of what DGX/HGX H100-H200 with eight 400 Gb/s ConnectX-7" in f["title"]
    assert "368-384 GB/s" in f["title"] and "assumes that platform" in f["title"]
    assert "--nics PORTSxGBPS" in f["action"]
    assert f["evidence"]["assumes"].startswith("DGX/HGX H100-H200") and f["evidence"]["ceiling_unknown"]
    assert "below_reference" in output


def test_the_real_log_and_a_log_with_nics_given_are_not_held_against_an_assumption(tmp_path):
    """The real A3 Mega log (329 GB/s at the largest sizes) is within reach of the figure; with
    --nics the nodes' own ceiling judges, and the assumption is dropped."""
    rc, output, findings = imported(A3MEGA, tmp_path / "real")
    assert rc == 0 and not [f for f in findings if f["rule"] == "below_reference"], output
    log = slowed(0.6, tmp_path / "all_reduce.log")
    rc, output, findings = imported(log, tmp_path / "given", "--nics", "8x200")
    assert not [f for f in findings if f["rule"] == "below_reference"], output
    assert "of ceiling 200.0 GB/s" in output


def test_a_policy_can_move_the_bar(tmp_path):
    policy = tmp_path / "policy.toml"
    policy.write_text("[thresholds]\nbelow_reference_factor = 0.5\n")
    rc, output, findings = imported(slowed(0.6, tmp_path / "all_reduce.log"), tmp_path / "run")
    assert [f["rule"] for f in findings if f["rule"] == "below_reference"]
    res = CliRunner().invoke(cli, ["report", str(tmp_path / "run"), "--policy", str(policy)])
    findings = json.loads((tmp_path / "run" / "findings.json").read_text())["findings"]
    assert not [f for f in findings if f["rule"] == "below_reference"], res.output
