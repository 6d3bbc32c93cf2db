"""A simulated fabric that the real plan builder and the real report run against (``netbench simulate``).

``fabric``: the physics (a fat tree of 2 or 3 tiers, NIC caps, oversubscribed uplinks, max-min fair
sharing of concurrent flows, planted faults). ``run``: the sweep's plan (``pipeline.plan_run`` on the
fabric's site, ``netbench.sites.sim.site``) measured on that fabric (``measure``: a phase at once, with
numpy) into a real run directory, with ``truth.json`` (what was planted) beside it.

Application level, not a library: it drives the application's plan builder and writes run
directories as the engine does. The report (``reports/``) never imports it; it reads what it wrote
exactly as it reads a real run.
"""
