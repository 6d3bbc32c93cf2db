"""What a finding tells the user to do about a host, in the words of the site the run was on.

Over SSH a host is a machine reached with ssh, its ranks' python is the hosts file's; on Kubernetes it
is a node, reached by a pod the kubelet starts from an image, and what went wrong is in the node's
and the pod's events and the pod's log. The words differ, the findings do not: each site's are one
``SiteAdvice`` in ``ADVICE``, chosen by run.json's ``launcher`` (the site's name) in ``advice_for``,
and a rule reads them from its context (``ctx.site.about(host).lost``), never testing the site itself.
A run from before sites (no ``launcher``) or a site without words of its own gets the SSH ones.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass


@dataclass(frozen=True)
class SiteAdvice:
    """Sentences about one host (``{host}`` in each is its name), completing a finding's action."""

    unreachable: str
    """What to look at when the inventory could not reach the host or run its probe there."""
    lost: str
    """How to check a host the run lost (died, hung, cut off) before it goes back into service."""
    ranks_ended: str
    """Where to find why the host's ranks failed, beyond run.json's faults and the rows' errors."""
    runtime: str
    """How to give the host the ranks' python and torch."""

    def about(self, host: str) -> SiteAdvice:
        """The sentences with ``host`` in them (a plain replace: a host name is never a template)."""
        return SiteAdvice(*(s.replace("{host}", host) for s in astuple(self)))


SSH = SiteAdvice(
    unreachable="Check SSH access and host keys for {host} (ssh {host} true); nothing about it could "
    "be verified.",
    lost="check {host} is up and reachable (ssh {host} true) before returning it.",
    ranks_ended="why is on the host (dmesg for NCCL errors and Xids, the ranks' python and torch).",
    runtime="give {host} the ranks' python and torch (the hosts file's python= or --python)",
)

SLURM = SiteAdvice(
    unreachable="Check {host} in Slurm (scontrol show node {host}, sinfo -R) and that a step starts "
    "there (srun -w {host} true); nothing about it could be verified.",
    lost="check {host} is up in Slurm (scontrol show node {host}) and a step starts there "
    "(srun -w {host} true) before returning it.",
    ranks_ended=SSH.ranks_ended,
    runtime="give {host} the ranks' python and torch (--python, or the same environment on every node)",
)

K8S = SiteAdvice(
    unreachable="Look at why its probe pod did not run (the pod named in the error: kubectl describe "
    "pod; kubectl describe node {host}: Ready, pressure, taints, allocatable GPUs); nothing about it "
    "could be verified.",
    lost="check node {host} (kubectl describe node {host}: Ready, pressure, events) before returning "
    "it (kubectl uncordon {host}; a netbench taint goes with "
    "kubectl taint nodes {host} netbench.io/preflight:NoSchedule-).",
    ranks_ended="why is in its pod's log (run again with --k8s-keep, then kubectl logs the pod) and on "
    "the node (kubectl debug node/{host}: dmesg for NCCL errors and Xids).",
    runtime="use an image whose python has a torch that can use {host}'s GPUs (--k8s-image; --python "
    "names the image's python)",
)

ADVICE = {"ssh": SSH, "slurm": SLURM, "k8s": K8S}
"""run.json's ``launcher`` -> its words; every other site (mpi, local, the simulator) speaks SSH's."""


def advice_for(launcher: object) -> SiteAdvice:
    """The words of the site named ``launcher`` (run.json's, untrusted: anything else is SSH's)."""
    return ADVICE.get(launcher, SSH) if isinstance(launcher, str) else SSH
