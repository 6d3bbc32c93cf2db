"""One sample a pair at 256 nodes, read by the report alone (issue 46), on the real command line: a
link at 0.7 under normal noise is reported (the tail fitted by probability-weighted moments, no longer
Pickands' with its wide margin); a healthy fleet under Student-t noise (3 degrees of freedom) has no
finding to act on, and lists the pairs most worth re-testing with the command that measures them
again; a pair with re-test evidence is no longer listed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SIM = ["--nodes", "256", "--leaves", "16", "--pair-sizes", "1G", "--confirm-budget", "0"]


def _netbench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "netbench", *args], capture_output=True, text=True,
                          timeout=600)


def _findings(run: Path) -> list[dict]:
    return json.loads((run / "findings.json").read_text())["findings"]


def test_a_link_at_0_7_is_reported_from_one_sample(tmp_path: Path) -> None:
    run = tmp_path / "link"
    link = "link:node0021,node0150=0.7"
    res = _netbench("simulate", *SIM, "--seed", "5", "--fault", link, "--out", str(run))
    assert res.returncode == 1, res.stderr[-2000:]  # warnings (--fail-on fail): the link, nothing worse
    found = [f for f in _findings(run) if f["severity"] in ("warn", "fail")]
    assert [(f["rule"], f["subject"]) for f in found] == [("slow_pair", "node0021|node0150")], found
    ev = found[0]["evidence"]
    assert "probability-weighted moments" in ev["noise_tail"] and "rests on one sample" in found[0]["title"]
    assert ev["z_threshold"] < 5.5  # the normal's 4.67 or near it; Pickands' margin put it near 7


@pytest.fixture(scope="module")
def healthy_t3(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    run = tmp_path_factory.mktemp("t3") / "run"
    return run, _netbench("simulate", *SIM, "--noise-shape", "t3", "--seed", "2", "--out", str(run),
                          "--fail-on", "never")


def test_a_healthy_t3_fleet_has_no_finding_and_lists_pairs_to_retest(healthy_t3) -> None:
    """No finding to act on: no slow node, link or switch, and no fleet split (this fleet's t3 noise
    speeds some pairs up 2-20x, which fleet_split once read as "19 hosts fast": fixed there)."""
    run, res = healthy_t3
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    findings = _findings(run)
    assert not [f for f in findings if f["severity"] != "info"], [f["rule"] for f in findings]
    (listed,) = [f for f in findings if f["rule"] == "retest_pairs"]
    pairs = listed["evidence"]["pairs"]
    assert 1 <= len(pairs) <= 8 and all(r <= 0.9 for r in listed["evidence"]["ratio_to_expected"])
    hosts = sorted({h for p in pairs for h in p.split("|")})
    assert listed["evidence"]["command"] == (
        f"printf '%s\\n' {' '.join(hosts)} > retest-hosts.txt && "
        "netbench sweep --hosts retest-hosts.txt --pattern pairwise --pair-sizes 1G")
    assert listed["title"].startswith(f"{len(pairs)} pair") and "most worth re-testing" in listed["title"]
    assert "--confirm-budget" in listed["action"]


def test_a_pair_with_retest_evidence_is_not_listed_again(healthy_t3) -> None:
    run, _ = healthy_t3
    first = next(f for f in _findings(run) if f["rule"] == "retest_pairs")["evidence"]["pairs"][0]
    doc = json.loads((run / "run.json").read_text())
    doc["retests"] = {"results": {first: {"subject": first, "kind": "link", "verdict": "cleared",
                                          "ratios": {"r1": 0.99}, "reason": "re-run at 0.99x"}},
                      "untested_reason": "budget"}
    (run / "run.json").write_text(json.dumps(doc))
    res = _netbench("report", str(run), "--no-html", "--fail-on", "never")
    assert res.returncode == 0, res.stderr[-2000:]
    findings = _findings(run)
    listed = [f for f in findings if f["rule"] == "retest_pairs"]
    assert not listed or first not in listed[0]["evidence"]["pairs"]
    cleared = [f for f in findings if f["rule"] == "slow_pair" and f["subject"] == first]
    assert cleared and cleared[0]["severity"] == "info"  # its re-test speaks for it now
