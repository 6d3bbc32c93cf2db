"""The bottom layer: what every package of netbench may import, and which imports none of them.

Hosts files and hostlists, SSH, the switch topology and its hop classes, the run-directory contract
(row fields, findings schema, readers and writers) and the error types. Nothing here imports the
application (commands, launchers, coordinator, preflight) or ``collectives``/``inventory``/``reports``.
"""
