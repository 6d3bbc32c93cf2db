"""What the words of a finding's evidence mean, for people: one entry per evidence key (its label in
the report, and one line on hover and in the glossary at the report's end), declared once. A key
without an entry is shown by its name, unexplained; the statistical words must have one
(``tests/test_report_evidence.py``), since a reader without the analysis' source cannot guess them.
"""

from __future__ import annotations

TERMS: dict[str, tuple[str, str]] = {
    # -- stragglers: who arrives last (reports/arrivals.py)
    "clock_err_us": ("clock bound (us)", "Each rank's clock is put on group rank 0's through the store "
                     "(NTP-style); its offset is known to within this. Two arrivals closer than twice it "
                     "are not told apart."),
    "late_us": ("late by (us)", "How long after the second-last rank the straggler arrived, averaged over "
                "the iterations it was decisively last: the wait it alone imposed."),
    "wait_share_pct": ("wait share", "That wait as a share of the collective's time (the slowest rank's "
                       "own elapsed time at that iteration): what the others spent waiting for it."),
    "sizes_judged": ("sizes judged", "Sizes where someone arrived last by more than twice the clock bound "
                     "in enough iterations to judge; the straggler must be named in most of them."),
    "sizes_named": ("sizes named", "Sizes where this host arrived last more often than chance (binomial, "
                    "Bonferroni over the group's hosts) or every k-th iteration."),
    "period_iters": ("period", "A periodic straggler is far late every this many iterations and seldom "
                     "otherwise."),
    "wait_us": ("wait (us)", "NCCL Inspector: the other ranks' median kernel time minus this rank's, "
                "averaged over the collectives it was last in: how long they waited for it."),
    # -- the statistics behind slow pairs and nodes
    "robust_z": ("robust z", "How far the value sits from its peers' median, in robust standard deviations "
                 "(1.4826 x the median absolute deviation, so a few faults do not widen the yardstick); "
                 "negative is slower."),
    "z_threshold": ("z bar", "How far below zero a robust z had to be to make a finding (a magnitude), "
                    "after the correction for testing every pair or node at once: Holm's family-wise bar, "
                    "so the chance of even one false finding in the run stays at the policy's fwer, 5%."),
    "tests_family_wise": ("tests corrected for", "How many pairs or nodes were tested at once: the bar "
                          "grows with it, so a large fleet does not turn noise into findings."),
    "p_value": ("p-value", "The chance of a result this extreme if nothing were wrong (the intermittent "
                "test: this many slow rounds by chance)."),
    "noise_tail": ("noise tail", "Which law the p-value came from: the lower tail learned from this run's "
                   "own residuals of the hop class (a generalised Pareto fit to the worst 5%, never lighter "
                   "than a normal), or the normal, assumed where too few pairs were measured to learn one."),
    "effect_ci_ratio": ("95% interval", "The range the true ratio to the peers lies in with 95% confidence, "
                        "from the estimate's own error: certain and small (0.92-0.94) warns, reaching the "
                        "policy's fail_floor fails, wide means re-test."),
    "samples": ("samples", "What the finding rests on: one measurement of the pair (no re-test) is "
                "suggestive, a re-test against known-good partners decides."),
    "noise_sigma_pct": ("noise", "The run's own scatter of pair bandwidth around what the model predicts, "
                        "as a percentage: the yardstick z is measured in."),
    "hop_class": ("hop class", "How far apart the two hosts are in the topology (same leaf, across one "
                  "spine, across the core): pairs are compared only with pairs of the same class."),
    "round_load": ("round load", "How many pairs of the same round crossed the same uplink: a pair in a "
                   "busy round is expected slower, and is compared with pairs that had the same load."),
    "cell_median_busbw_GBps": ("cell median (GB/s)", "The median busbw of the pairs of the same hop class "
                               "and the same load (a cell): what this pair is compared with."),
    "cell_pairs_compared": ("pairs in the cell", "How many pairs make up that median."),
    "class_median_busbw_GBps": ("class median (GB/s)", "The median busbw of every pair of the same hop "
                                "class, per size."),
    "class_pairs_compared": ("pairs in the class", "How many pairs make up the class median."),
    "expected_busbw_GBps": ("expected (GB/s)", "What this pair should give: the cell median times the two "
                            "hosts' own effects (a slow node drags every pair it is in)."),
    "ratio_to_expected": ("measured / expected", "The pair's busbw over what it should give; 1.0 is normal."),
    "node_effect": ("node effects", "Each host's own factor on its pairs' bandwidth, from every pair it was "
                    "in (1.0: neutral; 0.7: its pairs run 30% slow)."),
    "node_effect_ratio": ("node effect", "This node's factor on its pairs' bandwidth (1.0: neutral)."),
    "node_effect_spread_pct": ("spread of node effects", "How much healthy nodes' effects vary, as a "
                               "percentage: a node is slow only well outside it."),
    "class_effect_ratio": ("effect per hop class", "The node's factor in each hop class apart: slow "
                           "everywhere is the node, slow across one uplink only points at the uplink."),
    "effect_ratio": ("effect", "The factor on bandwidth this finding is about (1.0: neutral)."),
    "capacity_busbw_GBps": ("capacity (GB/s)", "The most this node reached with any partner: a capped node "
                            "stays under it whoever the partner."),
    "partners": ("partners", "Hosts this node was measured with."),
    "partners_slow": ("slow partners", "Partners with which its pairs were slow."),
    "slowest_partners": ("slowest partners (GB/s)", "Its pairs with the lowest busbw."),
    "median_busbw_GBps_with_partners": ("its median (GB/s)", "This node's median busbw over its pairs."),
    "fleet_class_median_busbw_GBps": ("fleet median (GB/s)", "Every pair's median busbw per hop class."),
    "slow_rounds": ("slow rounds", "The pairwise rounds in which this node was slow."),
    "alternative_links": ("or these links", "A node slow with few partners may as well be that many slow "
                          "links on it; a re-test against known-good partners tells the two apart."),
    "kind": ("kind", "capped: slow with every partner; intermittent: slow in some rounds only."),
    "retest": ("re-test", "The suspect measured again against known-good partners: confirmed, cleared, "
               "inconclusive or not run, with the ratios to the controls measured beside it."),
    # -- what was measured
    "collective": ("collective", "The operation measured."),
    "sizes_bytes": ("sizes", "Message sizes judged (the bandwidth-bound ones)."),
    "sizes": ("sizes", "Message sizes judged."),
    "busbw_GBps": ("busbw (GB/s)", "Bus bandwidth, nccl-tests' definition: algbw times the collective's bus "
                   "factor, comparable across rank counts."),
    "round": ("round", "The pairwise round the pair ran in."),
    "ring_busbw_GBps": ("ring busbw (GB/s)", "The ring over every host, at the size compared."),
    "switch": ("switch", "The leaf switch of the host."),
    "switches": ("switches", "The leaf switches of the two hosts."),
    "ranks": ("ranks", "Ranks in the group."),
    "engine": ("engine", "nccl: NCCL called directly (as nccl-tests); torch: through torch's process group."),
    # -- ceilings
    "ceiling_GBps": ("ceiling (GB/s)", "The most the links can carry, from the inventory (NIC rate x ports, "
                     "or the NVLink rate)."),
    "fraction_of_ceiling": ("share of ceiling", "busbw over the ceiling."),
    "ceiling_basis": ("ceiling from", "Which links the ceiling was computed from."),
    "reference_GBps": ("published (GB/s)", "The range a published source reports for this shape."),
    "reference": ("reference", "Where that range was published."),
    "reference_low_GBps": ("published low (GB/s)", "The low end of the platform's published range."),
    "below_reference_factor": ("bar", "Below this share of the published low end is a warning "
                               "(thresholds.below_reference_factor)."),
    "assumes": ("assumes", "The platform the published figure is for; the log does not say the nodes "
                "are one (no NIC is known)."),
    "ceiling_unknown": ("no ceiling", "Why the links' own ceiling is unknown."),
}


def term(key: str) -> tuple[str, str]:
    """(label, explanation) of an evidence key; an unknown key is shown as it is, unexplained."""
    return TERMS.get(key, (key.replace("_", " "), ""))
