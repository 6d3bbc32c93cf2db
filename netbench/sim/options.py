"""What ``netbench simulate`` is asked (``SimOptions``): the fabric, its faults, the noise, and the
same measurement and pair records ``sweep --hosts`` is asked (``netbench.run.options``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from netbench.defaults import SIM_NOISE_SHAPES as NOISE_SHAPES
from netbench.run.options import MeasureOptions, Options, PairOptions, ReportOptions
from netbench.sim.fabric import FabricSpec, Fault


@dataclass(frozen=True)
class SimOptions:
    """What ``netbench simulate`` was asked: the fabric, its faults, the noise and what to measure."""

    fabric: FabricSpec
    faults: tuple[Fault, ...] = ()
    noise: float = 0.05
    """Coefficient of variation of each measured time (0.05 = 5%)."""
    noise_shape: str = "normal"
    """The noise's law (``NOISE_SHAPES``): shapes the analysis does not assume, to test it against."""
    contention: float = 0.0
    """The chance a phase (a round) is contended: then each of its groups, with chance 1/2, takes
    CONTENDED_SLOWDOWN longer, together (CPU contention between concurrent pairs on shared hosts, a
    burst of congestion): slow rounds correlated across pairs, which independent noise is not."""
    seed: int = 0
    latency_us: float = 20.0
    measure: MeasureOptions = field(default_factory=lambda: MeasureOptions(
        collectives=["all_reduce"], max_bytes=1 << 30, in_place="out", backend="nccl"))
    """What ``sweep --hosts`` measures on GPUs (``netbench.run.options``): NCCL, out-of-place only,
    all_reduce up to 1 GiB unless asked otherwise; ``groups_ahead`` None: the planner's choice."""
    pairs: PairOptions = field(default_factory=PairOptions)
    """The patterns and the pairs' schedule (auto: by leaf, the fabric's topology is known) and sizes
    (None: the planner's NCCL defaults, 64M, 256M, 1G)."""
    out: str | None = None
    group_made: str = "fresh"
    """How each group's communicator is made, for its set-up charge (``sim.setup.GroupSetup``)."""
    ahead_slowdown: float = 1.0
    """How much longer a group's making takes beside the others made ahead at once (``sim.setup.Lanes``)."""

    def __post_init__(self) -> None:
        from netbench.common.errors import UsageError

        if not 0 <= self.noise < 0.5:
            raise UsageError("--noise must be in [0, 0.5)")
        if not 0 <= self.contention <= 1:
            raise UsageError("--contention must be in [0, 1]")
        if self.noise_shape not in NOISE_SHAPES:
            raise UsageError(f"--noise-shape must be one of {', '.join(NOISE_SHAPES)}")

    def sweep_options(self) -> Options:
        """What ``sweep --hosts`` would be asked for this measurement: the same records."""
        return Options(measure=self.measure, pairs=self.pairs, report=ReportOptions(out=self.out))
