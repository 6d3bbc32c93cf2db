"""Each node of a run against its own last good run in the fleet history: the record the history
(``netbench.history.lastgood``, application level) hands the analysis as an input
(``AnalysisContext.last_good``), and the rule ``reports/rules/last_good.py`` judges."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from netbench.collectives.sizes import format_size


@dataclass(frozen=True)
class LastGood:
    host: str
    run_id: str  # the last good run
    started: str
    bytes: int
    then_GBps: float
    now_GBps: float
    noise_pct: float  # the node's run-to-run spread (one sigma of its effect), in percent

    @property
    def change_pct(self) -> float:
        return 100 * (self.now_GBps / self.then_GBps - 1)

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"change_pct": round(self.change_pct, 2), "size": format_size(self.bytes)}
