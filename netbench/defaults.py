"""Each default once: the command line (``netbench/commands``), the option records
(``netbench.run.options``) and the coordinator read these names. Imports nothing, so ``--help`` stays
instant."""

OP_TIMEOUT_S = 60.0
"""``--timeout``: a collective (a group's operation) silent this long has failed."""
START_TIMEOUT_S = 120.0
"""``--start-timeout``: every host's agent and ranks must have started (said hello) within this."""
CONFIRM_BUDGET_S = 60.0
"""``--confirm-budget auto``'s seconds of re-testing the pairwise phase's suspects after a sweep, up
to ``CONFIRM_BUDGET_HOSTS`` hosts (``netbench.run.options.RetestOptions.seconds``, the one place
auto becomes seconds)."""
CONFIRM_BUDGET_HOSTS = 256
INVENTORY_TIMEOUT_S = 60.0
"""``--inventory-timeout`` (and ``inventory --timeout``): a host's inventory probe may take this long,
then the host is left out as unreachable; every site's ``inventory()`` defaults to it and preflight
caps its probe at it."""
PAIR_SIZES = {"gloo": [1 << 20, 4 << 20, 16 << 20], "nccl": [64 << 20, 256 << 20, 1 << 30]}
"""``--pair-sizes`` of a sweep: a few large sizes a pair (N-1 rounds of them, not a full sweep each)."""
PREFLIGHT_PAIR_SIZES = {"gloo": [1 << 20, 4 << 20], "nccl": [256 << 20, 1 << 30]}
"""``preflight --pair-sizes``: the two sizes that decide a verdict within a budget of minutes."""
SIM_MAX_NODES = 8192
"""``simulate --nodes``: twice the largest fabric measured (4,096 nodes, benchmarks/README.md); past
it the plan alone (every pair of N nodes) outgrows any machine this runs on, so more is refused."""
SIM_MAX_OVERSUBSCRIPTION = 1000.0
"""``simulate --oversubscription``, ``--core-oversubscription``: 1 is non-blocking."""
SIM_MAX_NIC_GBPS = 10_000.0
"""``simulate --nic-gbps``: 10 TB/s a node, far above any NIC."""
SIM_MAX_RAILS = 64
"""``simulate --rails``: NICs a node."""
SIM_NOISE_SHAPES = ("normal", "lognormal", "skewed", "t3", "t4", "t5", "congestion")
"""The laws of `netbench simulate --noise-shape` (``netbench.sim.run.noise_factor`` draws them)."""
MAX_COUNT = 10**9
"""The upper end of a count option that has no natural one (iterations, rounds, partners, pairs at
once): far above any real use, low enough that nothing sized by it overflows or runs for ever."""

NET_DEPTH = 7
"""Groups made ahead when NCCL groups span nodes (``planner.groups_ahead``): a 16-rank pair group
takes ~2.9 s to make (netbench/sim/setup.py) and a pairwise round measures ~0.42 s (64M, 256M, 1G at
400G, benchmarks/README.md "Group set-up"), so 7 lanes make a round's group in the time of 7
rounds' measuring and the round never waits once the first 7 are made. Each holds a communicator
(collectives/ahead.py) besides the one in use: ~2.7 GiB of an H200 at the 1-rank figure, more
across nodes; ``--groups-ahead`` lowers it."""
MAX_AHEAD = 64  # the most --groups-ahead takes: a thread and a store client each
