"""Every finding id the analysis may emit, with its default severity: the names a policy's
``[severity]`` table may override. The policy validates against this list and the rules declare
their ids from it, so neither imports the other (``ids("slow_pair")`` in a rule module);
tests/test_rules_registry.py checks that the registry emits exactly these.
"""

from __future__ import annotations

#: id -> default severity, grouped by rule in the registry's order (JUnit and JSON list checks so)
FINDING_IDS: dict[str, str] = {
    # errors
    "wrong_results": "fail",
    "timeout": "fail",
    "error": "fail",
    "host_failing": "fail",
    "run_incomplete": "warn",
    "switch_silent": "fail",
    # slow_node
    "slow_node": "fail",
    "slow_switch": "fail",
    # fleet_split
    "fleet_split": "fail",
    # slow_pair
    "slow_pair": "warn",
    # retest_pairs
    "retest_pairs": "info",
    # slow_rail
    "slow_rail": "fail",
    "slow_rail_pair": "warn",
    # link_health
    "node_unreachable": "warn",
    "gpu_count_low": "fail",
    "port_down": "fail",
    "nic_rate_low": "warn",
    "pcie_degraded": "warn",
    "pcie_gen_low": "info",
    "nvlink_down": "fail",
    # mtu
    "mtu_mismatch": "warn",
    # port_counters
    "link_flap": "fail",
    "port_errors": "warn",
    # versions
    "version_below_minimum": "fail",
    "outdated_firmware": "warn",
    "firmware_mismatch": "warn",
    "version_behind_newest": "info",
    "version_mixed": "warn",
    # stragglers
    "straggler": "warn",
    "straggler_periodic": "warn",
    # telemetry (netbench import flight-recorder / inspector)
    "collective_never_entered": "fail",
    "inspector_slow_rank": "warn",
    # cross_switch
    "leaves_learned": "info",
    "cross_switch_order": "warn",
    "cross_spine_penalty": "info",
    "ring_below_pairs": "info",
    # expected
    "below_expected": "warn",
    # ceiling
    "below_ceiling": "warn",
    "above_ceiling": "info",
    "below_reference": "warn",
    # regression
    "regression": "warn",
    "env_changed": "info",
    # engines
    "single_rank": "info",
    "engine_overhead": "info",
    # host_checks
    "host_cannot_run": "warn",  # could not test: its own set-up, never drained (issue 47)
    "host_refuses": "warn",
    "pairs_not_judged": "warn",
    "fabric_shared": "warn",
    "clock_stepped": "warn",
    # resolution (a run too noisy to clear its nodes is never a PASS, issue 47)
    "not_cleared": "warn",
    "coarse_resolution": "info",
    # unreadable (never below warn: no verdict on data that could not be read)
    "unreadable_rows": "warn",
    "unreadable_file": "warn",
    # rundir (never below warn: no verdict on data whose origin or meaning is in doubt)
    "mixed_runs": "warn",
    "schema_unknown": "warn",
    "run_mismatch": "warn",
    # imported (never below warn: a log not fully read, or whose run failed, never gives a PASS)
    "import_incomplete": "warn",
    "imported_run_failed": "fail",
    # last_good (preflight against the history: at most a warning, never a drain)
    "slower_than_last_good": "warn",
}

#: ids the engine itself emits: a rule that crashed on this data (reported, not fatal), and more
#: findings of one rule than the report lists
ENGINE_IDS: dict[str, str] = {"analysis_error": "warn", "findings_truncated": "info"}

ALL_IDS: dict[str, str] = FINDING_IDS | ENGINE_IDS


def ids(*names: str) -> dict[str, str]:
    """A rule's declaration of the ids it emits (KeyError for one missing from the list above)."""
    return {name: FINDING_IDS[name] for name in names}
