"""Where a sweep runs. The pipeline (``netbench.run.pipeline``) is written once; a ``Site`` says only
*where*: the hosts, how to inventory them, their switches, how to start an agent on each, how to read
their port counters. SSH, one machine, a hosts file on this machine, a Slurm allocation and mpirun
(over a hosts file or on this machine) and a Kubernetes cluster (a pod per node) are one module
each, registered in one line of ``SITES``
below (which ``--launcher`` offers; ``netbench.sites.registry`` chooses one); the protocol is
``netbench.sites.base``. The other commands that reach hosts choose from this registry too:
``PREFLIGHT`` and ``INVENTORY``.

Every option of ``netbench sweep`` is either the pipeline's (the measurement, the pairs, the report,
the re-tests: honoured on every site because every site runs the same stages), a site option that a
site says it ``uses``, or refused by that site before anything runs (exit 2, one line naming the
site). ``tests/test_sites.py`` enumerates the click options against this table, so an option
added later cannot be dropped silently on some site.
"""

SITES = {
    "ssh": "netbench.sites.ssh.site",
    "local": "netbench.sites.local.site",
    "mpi": "netbench.sites.mpi.site",
    "slurm": "netbench.sites.slurm.site",
    "k8s": "netbench.sites.k8s.site",
}
"""``--launcher`` value -> the module whose ``make(opts)`` gives its site (with or without --hosts).
Module names, not imports: ``--help`` lists the launchers without importing torch."""

PREFLIGHT = ("ssh", "slurm", "k8s")
"""The sites of ``SITES`` that ``netbench preflight --launcher`` offers: the places a job's hosts are
checked before it starts (``preflight.stages.preflight_site`` chooses through ``registry.choose_site``)."""

INVENTORY = {
    "ssh": "netbench.sites.probe",
    "k8s": "netbench.sites.k8s.site",
}
"""``netbench inventory --launcher`` value -> the module whose ``make(opts)`` gives the site it probes:
ssh's hosts (or this machine) with the probe alone (``sites.probe``: no rank follows, so none is
judged), Kubernetes' own site."""
