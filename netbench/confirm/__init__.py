"""Confirming suspects: re-measure them against known-good partners within a time budget, and say
what the re-tests show. One procedure for ``netbench preflight`` (its escalation) and for
``netbench sweep --hosts`` (after the pairwise phase, ``--confirm-budget``; ``netbench simulate``
runs the sweep's on its fabric), so they cannot disagree about who is a suspect, whom a suspect is
paired with or what its re-test says. Its modules, each importing only those above it in this list:

- ``records``: the names they all share, ``Pair`` and ``PhaseList`` (one launch's phases);
- ``candidates``: who is re-tested. ``find_suspects``: the nodes and links the analysis flags
  (warn/fail, and the "suspect: re-test" info band), not re-tested yet; a node shared by several
  slow links, or at one end of a link its re-run confirmed, is a suspect node (``slow_partners``).
  ``candidate_links``: beside them, the fleet's worst pairs that no bar flagged, re-run as often as
  ``candidate_runs`` says, then pairs that read near slow; ``shared_ends``, ``held_back``,
  ``split_inconclusive``, ``slow_link_ends``: the nodes and links a later launch takes up.
  ``Suspects`` is all of it for one launch;
- ``budget``: the clock. The ``Budget`` (the report's reserve kept back), the ``PhaseGate`` that
  starts a phase only while it fits, ``Measure``: the caller's one launch of re-test phases;
- ``schedule``: how many phases a launch takes (``intermittent_phases``, ``shift_phases``) and who
  meets whom in each (``plan_escalation``: perfect matchings, each suspect node with a known-good
  partner of the hop class it was slow in, each suspect link re-run with a control of its own hop
  class beside it, the other good nodes paired among themselves as the phase's controls;
  ``rerun_order``: the candidates' re-runs, worst first);
- ``chances``: the count test's null (``RoundChances``: slow rounds come together, under CPU
  contention or congestion, so one assumed tail for independent pairs is not the null;
  ``reports.analyses.intermittent_p_value`` where every round is alike), and the intermittency test;
- ``judging``: ``judge``, each re-test against the controls of its phase measured under the same
  load (hop class and pairs per uplink, ``common.topology.round_load``), never against another
  class; a node slow with some known-good partners only is confirmed as intermittent by a count test
  over its slow rounds, earlier ones included;
- ``rails``: rail by rail (``rail_launch``): a node the re-tests confirmed slow on a rail-optimised
  fabric (its rails' NICs named by the inventory) re-tested once more in rail groups, rank k of both
  ends on GPU k's NIC alone, against known-good partners; ``judge_rails`` names the slow NIC, each
  rail against the same rail's controls of its phase;
- ``launch``: ``retest_suspects``, the one re-test loop: analyse what the sweep (or quick pass)
  measured, re-test the suspects in one launch (the caller's ``Measure``), phase by phase while they
  fit the ``Budget``, again while the verdicts name new suspects (the ends of a link confirmed slow);
  a ``RetestSetup`` says what differs between callers (how they analyse, their hosts, what was
  measured, their log's words), ``Retested`` is what it found.

The re-tests' rows stay out of the analysis' pair model (``RetestEvidence.from_round``): they are
judged here, each against the controls measured beside it, and their schedule (a few suspects,
chosen partners, phase after phase) is not the sweep's: fitted with it, it made suspects of its own.

What a re-test says is handed to the analysis (``reports.analyses.RetestEvidence``); the rules turn
it into the findings' severities, and every re-tested subject appears in the findings with its
verdict, so the log, the report and the terminal summary say the same. Pure functions but the loop,
tested without hosts (tests/test_confirm.py, tests/test_preflight_plan.py); the loop runs on hosts in
tests/test_sweep_confirm_netns.py and tests/test_preflight*.py, on a simulated fabric in
tests/test_sim_preflight.py and tests/test_sim_confirm.py.

Every name the module ``netbench.confirm`` had before it became this package is exported here, so
callers import from ``netbench.confirm`` alone.
"""

from netbench.confirm.budget import (
    CANDIDATE_NEAR_BUDGET,
    FIRST_PHASE_PRIOR_S,
    REPORT_RESERVE_S,
    Budget,
    Measure,
    PhaseGate,
)
from netbench.confirm.candidates import (
    CANDIDATE_FALSE,
    CANDIDATE_LINKS,
    CANDIDATE_NEAR,
    CANDIDATE_NEAR_RUNS,
    CANDIDATE_PER_NODE,
    CANDIDATE_RUNS,
    CANDIDATE_RUNS_MAX,
    CANDIDATE_SHARED_ALPHA,
    HELD_BACK_ALPHA,
    Candidates,
    Suspects,
    candidate_links,
    candidate_runs,
    find_suspects,
    held_back,
    pairs_in,
    shared_ends,
    slow_link_ends,
    slow_partners,
    split_inconclusive,
    suspect_classes,
    unusable_hosts,
)
from netbench.confirm.chances import AFTER, ANY_LOAD, ANY_ROUND, BEFORE, PRIOR_CONTROLS, RETESTS, RoundChances
from netbench.confirm.judging import judge
from netbench.confirm.launch import (
    MAX_LAUNCHES,
    PREFLIGHT_WORDS,
    SWEEP_WORDS,
    Retested,
    RetestSetup,
    RetestWords,
    retest_suspects,
)
from netbench.confirm.rails import RAIL_PARTNERS, RailSetup, judge_rails, node_rails, rail_subject
from netbench.confirm.records import Pair, PhaseList
from netbench.confirm.schedule import (
    CONFIRM_PARTNERS,
    INTERMITTENT_MAX_PHASES,
    INTERMITTENT_MISS,
    INTERMITTENT_PARTNERS,
    SHIFT_MAX_PHASES,
    intermittent_phases,
    plan_escalation,
    rerun_order,
    shift_phases,
)

__all__ = [
    "AFTER",
    "ANY_LOAD",
    "ANY_ROUND",
    "BEFORE",
    "Budget",
    "CANDIDATE_FALSE",
    "CANDIDATE_LINKS",
    "CANDIDATE_NEAR",
    "CANDIDATE_NEAR_BUDGET",
    "CANDIDATE_NEAR_RUNS",
    "CANDIDATE_PER_NODE",
    "CANDIDATE_RUNS",
    "CANDIDATE_RUNS_MAX",
    "CANDIDATE_SHARED_ALPHA",
    "CONFIRM_PARTNERS",
    "Candidates",
    "FIRST_PHASE_PRIOR_S",
    "HELD_BACK_ALPHA",
    "INTERMITTENT_MAX_PHASES",
    "INTERMITTENT_MISS",
    "INTERMITTENT_PARTNERS",
    "MAX_LAUNCHES",
    "Measure",
    "PREFLIGHT_WORDS",
    "PRIOR_CONTROLS",
    "Pair",
    "PhaseGate",
    "PhaseList",
    "REPORT_RESERVE_S",
    "RAIL_PARTNERS",
    "RETESTS",
    "RailSetup",
    "RetestSetup",
    "RetestWords",
    "Retested",
    "RoundChances",
    "SHIFT_MAX_PHASES",
    "SWEEP_WORDS",
    "Suspects",
    "candidate_links",
    "candidate_runs",
    "find_suspects",
    "held_back",
    "intermittent_phases",
    "judge",
    "judge_rails",
    "node_rails",
    "pairs_in",
    "plan_escalation",
    "rail_subject",
    "rerun_order",
    "retest_suspects",
    "shared_ends",
    "shift_phases",
    "slow_link_ends",
    "slow_partners",
    "split_inconclusive",
    "suspect_classes",
    "unusable_hosts",
]
