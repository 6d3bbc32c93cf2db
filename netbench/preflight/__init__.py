"""``netbench preflight``: a yes/no before a large job, and the nodes to drain, within a time budget.

Stages, one method each of ``stages.PreflightStages``, preflight's policy over the run's stages
(``netbench.run.stages``: the launches, counters and stops are sweep's); the budget covers all of
them, inventory included:
  1. inventory + policy  every host probed over SSH; the rules that need no traffic (versions and
                         firmware against the policy and the fleet, GPU count, ports, PCIe) run at once.
                         Nodes that already fail are left out of the measurement (``fail_fast``:
                         stop here when anything fails).
  2. quick pass          a few perfect matchings of node pairs (at least ``min_partners`` partners
                         per node so the pair model can judge every node): partners on the node's
                         own leaf first when the topology is known (behind an oversubscribed uplink
                         a capped NIC shows only against its leaf), then a few rounds a tier in
                         which whole leaves (then pods) meet others (a slow uplink is the common
                         factor of its hosts' pairs, which the own-leaf rounds never cross), else
                         circle-method rounds; and the ring over all nodes, at 2-3 sizes. One
                         launch of the ranks.
  3. suspects            the standard analysis of what was measured: nodes flagged slow
                         (``slow_node``) and links flagged slow (``slow_pair``); a node shared by
                         several slow links, or at an end of a link confirmed slow, is a suspect
                         node (slow now and then: re-tested as the node, not as N links).
  4. escalation          one more launch (``netbench.confirm``, shared with ``sweep --hosts``): each
                         suspect node against a known-good partner per phase, suspect links re-run,
                         the remaining good nodes paired as controls (the phase's own reference, of
                         the same hop class and load). A phase starts only while the elapsed time +
                         the measured phase time fit the budget.
  5. sequential tests    what the budget leaves buys rounds of pairs within each leaf, every node
                         at once, the undecided with peers already cleared, until every node is
                         decided (``netbench.preflight.sequential``: per node a sequential test for
                         a node slower by the policy's slow_node_factor and one for a node slow in a
                         quarter of its rounds, family-wise over the nodes) or the budget ends; a
                         progress line a round, then what was decided with its likelihood ratio.
                         Its decisions join the re-tests' verdicts (drained: confirmed).
  6. report              the analysis of everything with the re-tests as its evidence (the rules
                         weigh each suspect's verdict); findings.json, report.html, the exports.

Drain rule: a node is drained when a ``fail`` finding is about the node itself (subject a node, or a
version/firmware finding shared by fewer than half of the hosts: more than that is a fleet-wide fix,
not a drain). A node measured as slow fails only when the re-tests against known-good partners
confirm it (slow with most of them); unconfirmed it is a warning, cleared by the re-test it is info.
A slow link (the pair slow, both nodes fine elsewhere) and a slow switch never drain a node: they go
to the "check" list. Exit codes: 0 pass, 1 warnings, 2 failures, 3 could not run (bad input, nothing
reachable, budget too small for the quick pass), always with one error line.
"""

from netbench.confirm import Budget, PhaseGate, find_suspects, judge, plan_escalation, unusable_hosts
from netbench.preflight.judging import quick_rounds
from netbench.preflight.options import (
    EXIT_COULD_NOT_RUN,
    PreflightError,
    PreflightOptions,
    PreflightResult,
)
from netbench.preflight.outputs import (
    _write_report,
    format_summary,
    json_report,
    write_error_outputs,
    write_outputs,
)
from netbench.preflight.stages import (
    analyse,
    run_preflight,
    stage_inventory,
)
from netbench.reports.analyses import Retest, RetestEvidence

__all__ = [
    "EXIT_COULD_NOT_RUN",
    "Budget",
    "PhaseGate",
    "PreflightError",
    "PreflightOptions",
    "PreflightResult",
    "Retest",
    "RetestEvidence",
    "_write_report",
    "analyse",
    "find_suspects",
    "format_summary",
    "judge",
    "json_report",
    "plan_escalation",
    "quick_rounds",
    "run_preflight",
    "stage_inventory",
    "unusable_hosts",
    "write_error_outputs",
    "write_outputs",
]
