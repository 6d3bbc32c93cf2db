"""netbench: collective-communication benchmark and diagnostics for GPU clusters."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    import pandas as pd


def load_results(path: Any) -> pd.DataFrame:
    """Load a run directory's results into a pandas DataFrame (see netbench.common.rundir)."""
    from netbench.common.rundir import load_results as _load

    return _load(path)


__all__ = ["__version__", "load_results"]
