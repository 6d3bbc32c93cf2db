"""The policy file: defaults, the shipped example, strict validation that names the bad key."""

from __future__ import annotations

from pathlib import Path

import pytest
from netbench.reports.policy import Policy, PolicyError, load_policy
from netbench.reports.rules import RULE_IDS

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "policy.example.toml"


def write(tmp_path, text: str) -> Path:
    p = tmp_path / "policy.toml"
    p.write_text(text)
    return p


def test_defaults_without_a_file():
    pol = load_policy(None)
    assert pol == Policy()
    assert pol.thresholds.large_min_bytes == 64 << 20 and pol.severity == {}


@pytest.mark.parametrize("klass", ["intra", "leaf", "spine", "core", "tier-4", "unknown", "any"])
def test_every_hop_class_of_the_topology_vocabulary_is_a_policy_word(klass, tmp_path):
    path = tmp_path / "p.toml"
    path.write_text(f'[[expect.busbw]]\ncollective = "all_reduce"\nbusbw_GBps = 10\nhop_class = "{klass}"\n')
    assert load_policy(path).expect.busbw[0].hop_class == klass


def test_example_loads_and_means_what_it_says():
    pol = load_policy(EXAMPLE)
    assert pol.expect.gpus_per_node == 8 and pol.expect.link_rate_gbps == 400
    assert pol.thresholds.small_max_bytes == 64 << 10
    assert [b.hop_class for b in pol.expect.busbw] == ["leaf", "spine"]
    assert pol.expect.busbw[0].min_bytes == 1 << 30
    assert pol.versions.minimum_for("nic_firmware", "MT4129") == "28.39.1002"
    assert pol.versions.minimum_for("nic_firmware", "MT9999") is None
    assert pol.versions.minimum_for("driver") == "550.54.15"
    assert pol.severity["outdated_firmware"] == "fail"


def test_example_documents_every_rule_id():
    text = EXAMPLE.read_text()
    missing = [r for r in RULE_IDS if r not in text and r not in ("analysis_error", "findings_truncated")]
    assert missing == []


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[thresholds]\nslow_pair_factr = 0.8\n", "thresholds.slow_pair_factr"),
        ("[thresholds]\nslow_pair_factor = 1.5\n", "thresholds.slow_pair_factor"),
        ('[thresholds]\nlarge_min_bytes = "64Q"\n', "thresholds.large_min_bytes"),
        ("[expect]\ngpus = 8\n", "expect.gpus"),
        ('[[expect.busbw]]\ncollective = "all_reduce"\nbusbw_GBps = 10\nhop_class = "rack"\n', "hop_class"),
        ('[[expect.busbw]]\ncollective = "all_reduce"\nbusbw_GBps = 10\nhop_class = "tier-3"\n', "hop_class"),
        ('[[expect.busbw]]\ncollective = "all_reduce"\n', "busbw_GBps"),
        ('[versions.minimum]\nfirmware = "1.0"\n', "versions.minimum.firmware"),
        ("[versions.minimum]\ndriver = 550\n", "versions.minimum.driver"),
        ('[severity]\nslow_pairs = "fail"\n', "severity.slow_pairs"),
        ('[severity]\nslow_pair = "fatal"\n', "severity.slow_pair"),
        ("[thresholds]\n[surprise]\n", "surprise"),
        ("this is = = not toml", "not valid TOML"),
    ],
)
def test_bad_policy_names_the_problem(tmp_path, text, needle):
    with pytest.raises(PolicyError) as err:
        load_policy(write(tmp_path, text))
    assert needle in str(err.value)
    assert str(tmp_path) in str(err.value)


def test_missing_file(tmp_path):
    with pytest.raises(PolicyError, match="not found"):
        load_policy(tmp_path / "nope.toml")
