"""Fleet history: every run's figures and environment in one store (``store``), read from run
directories (``ingest``), searched for persistent shifts and what changed then (``changes``)."""
