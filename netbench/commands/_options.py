"""Options every measuring command shares (``sweep``, ``worker``), declared once.

nccl-tests' short flags mean what they mean there (-b -e -f -n -w -d -o -r -c -G -T), so its users
need no new habits: ``-c 0`` turns the check off and ``-G 1`` captures CUDA graphs, as in
nccl-tests. Collectives, which nccl-tests picks by binary, are ``-k``; ``-c all_reduce`` (netbench's
meaning before) gets one line saying so. nccl-tests flags with no counterpart here get one line
saying what netbench does instead (``NCCL_TESTS_INSTEAD``, read by the command line's error path).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

# by name, without torch (collectives/names.py): a typo is refused in a tenth of a second, not
# after the 2.5 s of importing torch that collectives.ops needs
from netbench.collectives.names import measured
from netbench.commands._params import DURATION, PAIR_SIZE_LIST, SIZE, Count, CsvList
from netbench.defaults import MAX_AHEAD, MAX_COUNT, NET_DEPTH, OP_TIMEOUT_S
from netbench.reports.verdict import FAIL_ON as VERDICTS_THAT_FAIL

#: nccl-tests' short flags that netbench has no counterpart for, and what it does instead: the
#: command line's "No such option" line carries this (netbench/cli.py)
NCCL_TESTS_INSTEAD = {
    "-g": "netbench runs one rank per visible GPU; pick GPUs with CUDA_VISIBLE_DEVICES=0,1 (this "
    "machine) or --hosts for more nodes",
    "-t": "netbench runs one process per GPU, never threads; pick GPUs with CUDA_VISIBLE_DEVICES",
    "-i": "sizes grow by a factor (-f); list the sizes you need with --pair-sizes for pairs",
    "-m": "every timed iteration is one operation (nccl-tests -m 1)",
    "-N": "run netbench again (or in a loop) for more cycles; each run is its own run directory",
    "-z": "operations are always non-blocking, as nccl-tests' default (-z 0)",
    "-y": "operations go to torch's current stream, never the NULL stream",
    "-a": "times are the average over ranks (nccl-tests -a 1); rows keep every rank's time",
    "-C": "netbench reports GPU (event) time, never CPU time",
    "-R": "buffers are not registered (nccl-tests -R 0)",
}


class OnOffCount(click.ParamType):
    """An nccl-tests count flag that netbench takes as on or off (-> bool): ``-c N`` the check's
    passes, ``-G N`` CUDA graph launches; 0 is off, any other count on (one check pass, one graph).
    ``moved``: what to say of a value that is not a count (``-c all_reduce``, netbench's -c before)."""

    name = "N"

    def __init__(self, flag: str, off: str, on: str, moved: Callable[[str], str | None] | None = None):
        self.flag, self.off, self.on, self.moved = flag, off, on, moved

    def convert(self, value, param, ctx):  # noqa: ANN001, ANN201 - click's signature
        if isinstance(value, bool):
            return value
        usage = f"{self.flag} 0 {self.off}, {self.flag} 1 {self.on}"
        try:
            count = int(str(value).strip())
        except ValueError:
            said = self.moved(str(value)) if self.moved else None
            self.fail(said or f"{value!r} is not a count: {usage}", param, ctx)
        if count < 0:
            self.fail(f"{count} is not a count: {usage}", param, ctx)
        return count > 0


def _collectives_moved(value: str) -> str | None:
    if any(_known_coll(v) for v in value.split(",")):
        return f"-c is nccl-tests' check now (-c 0: off, -c 1: on); collectives are -k: -k {value}"
    return None


CHECK = OnOffCount("-c", "turns the check off", "on", _collectives_moved)
GRAPH = OnOffCount("-G", "measures without CUDA graphs", "with")


def _known_coll(name: str) -> bool:
    try:
        measured(name.strip())
    except ValueError:
        return False
    return True


FAIL_ON = click.option(
    "--fail-on",
    type=click.Choice(VERDICTS_THAT_FAIL),
    default=VERDICTS_THAT_FAIL[0],
    show_default=True,
    help="Which verdict exits 2: fail (warnings exit 1), warn (warnings too), never (exit 0 whatever "
    "the findings; 3, bad input and stops keep their status). docs/exit-status.md.",
)

_SHARED = [
    click.option(
        "--collectives",
        "-k",
        "collectives",
        type=CsvList(measured),
        default="all_reduce,all_gather",
        show_default=True,
        help="Comma list: all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all, sendrecv.",
    ),
    click.option(
        "--min-bytes", "-b", type=SIZE, default=None, help="Smallest size (K/M/G binary). Default 8 B."
    ),
    click.option(
        "--max-bytes",
        "-e",
        type=SIZE,
        default=None,
        help="Largest size. Default 64M (gloo), 8G capped by free GPU memory (NCCL).",
    ),
    click.option(
        "--factor",
        "-f",
        type=Count(2, 1 << 20),
        default=2,
        show_default=True,
        help="Multiply the size by this each step.",
    ),
    click.option(
        "--iters",
        "-n",
        type=Count(1, 10**9),
        default=20,
        show_default=True,
        help="Timed iterations per size.",
    ),
    click.option(
        "--warmup",
        "-w",
        type=Count(0, 10**9),
        default=5,
        show_default=True,
        help="Untimed warm-up iterations per size.",
    ),
    click.option(
        "--dtype",
        "-d",
        default="float",
        show_default=True,
        help="float, half, bfloat16, double, int8, uint8, int32, int64 (or fp32, bf16, fp16).",
    ),
    click.option("--op", "-o", default="sum", show_default=True, help="Reduction: sum, prod, max, min, avg."),
    click.option(
        "--check",
        "-c",
        "check",
        type=CHECK,
        default="1",
        show_default=True,
        help="Untimed pass that counts wrong result elements; 0 turns it off (nccl-tests -c).",
    ),
    # the flag shares -c's destination, so click reads -c's value through its type as well: the same
    # type, or -c 5 would be judged as a boolean
    click.option("--no-check", "check", flag_value=False, type=CHECK, help="The same as -c 0."),
    click.option(
        "--in-place",
        "in_place",
        type=click.Choice(["both", "out", "in"]),
        default="both",
        show_default=True,
        help="Out-of-place, in-place, or both.",
    ),
    click.option(
        "--root",
        "-r",
        type=Count(0, MAX_COUNT),
        default=0,
        show_default=True,
        help="Root rank of broadcast and reduce.",
    ),
    click.option(
        "--backend",
        type=click.Choice(["gloo", "nccl"]),
        default=None,
        help="Force a backend (default: nccl when CUDA GPUs are visible, else gloo).",
    ),
    click.option(
        "-G",
        "cuda_graph",
        type=GRAPH,
        default="0",
        show_default=True,
        help="1: capture the timed loop in a CUDA graph, 0: plain launches (nccl-tests -G).",
    ),
    click.option("--cuda-graph", "cuda_graph", flag_value=True, type=GRAPH, help="The same as -G 1."),
    click.option(
        "--step-work",
        "step_work",
        type=Count(0, 1_000_000),
        default=0,
        show_default=True,
        help="Before each timed operation every rank does the same N units of work (a matmul on its "
        "CPU or GPU: a training step's compute in miniature), so a rank with a slow or throttled "
        "CPU/GPU arrives late as in a job; 0: back to back (nccl-tests). The time per operation then "
        "leaves the work out.",
    ),
    click.option(
        "--hot-buffers",
        "hot_buffers",
        is_flag=True,
        default=False,
        help="Reuse one send/receive buffer pair for every operation of a size, so the data stays in "
        "the GPU's L2 cache between operations (faster at 1-16 MiB than a job's gradients would be). "
        "By default operations rotate over slots of the largest size's memory, as nccl-tests does.",
    ),
    click.option(
        "--per-iter",
        "per_iter",
        is_flag=True,
        default=False,
        help="Keep every rank's arrival and completion of every timed operation (per_iter.jsonl.gz in "
        "the run directory); by default only a summary per size (arrivals.jsonl, nccl-tests -I's).",
    ),
    click.option(
        "--engine",
        type=click.Choice(["auto", "nccl", "torch", "both"]),
        default="auto",
        show_default=True,
        help="GPU operations through NCCL directly (nccl4py, as nccl-tests) or through torch's process "
        "group (what a training job sees); both: each point twice, side by side. auto: nccl when "
        "every host's python imports nccl4py, else torch on every host. CPU ranks always use torch (gloo).",
    ),
    click.option(
        "--timeout",
        "-T",
        "timeout_s",
        type=DURATION,
        default=OP_TIMEOUT_S,
        show_default=True,
        help="A collective (or rank) silent this long has failed.",
    ),
    click.option(
        "--out",
        type=click.Path(file_okay=False),
        default=None,
        help="Run directory (default netbench-runs/<UTC time>-<id>); refused if it holds a run "
        "already; {id} in it becomes the run id (a fresh directory per run).",
    ),
    click.option(
        "--report/--no-report",
        default=True,
        show_default=True,
        help="Write findings.json and report.html at the end.",
    ),
    FAIL_ON,
]


# how pairs are measured: read by the plan builder wherever the plan is built (sweep, worker rank 0)
_PAIRS = [
    click.option(
        "--pair-batch",
        type=Count(1, MAX_COUNT),
        default=None,
        help="At most K pairs at once (default: whole rounds of disjoint pairs).",
    ),
    click.option(
        "--pair-schedule",
        type=click.Choice(["auto", "circle", "topology"]),
        default="auto",
        show_default=True,
        help="Which pairs run together. topology: leaf against leaf, so every round puts the same "
        "number of pairs through a leaf's uplink (pairs within a leaf fill the idle slots); circle: "
        "the circle method, blind to switches; auto: topology when --topology or switch= labels place "
        "every host.",
    ),
    click.option(
        "--uplink-pairs",
        type=Count(1, MAX_COUNT),
        default=None,
        help="Topology schedule: at most K pairs of a round through one uplink (more rounds, less load).",
    ),
    click.option(
        "--groups-ahead",
        type=Count(0, MAX_AHEAD),
        default=None,
        help="Groups each rank makes ahead of their turn, while it measures (communicator set-up off "
        "the round's path; each holds its communicator's memory). Default: "
        f"{NET_DEPTH} for NCCL groups across hosts, 0 otherwise.",
    ),
    click.option(
        "--pair-sizes",
        type=PAIR_SIZE_LIST,
        default=None,
        help="Sizes for pairs (default 1M,4M,16M gloo; 64M,256M,1G NCCL).",
    ),
    click.option(
        "--pair-collectives",
        type=CsvList(measured),
        default=None,
        help="Collectives for pairs (default: --collectives).",
    ),
]


def _apply(options: list[Callable[..., Any]], f: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(options):  # in the order listed, as --help shows them
        f = option(f)
    return f


def measurement_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The measurement every measuring command shares."""
    return _apply(_SHARED, f)


def pair_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """How pairs are measured (sweep --hosts, and worker ranks with --pattern pairwise)."""
    return _apply(_PAIRS, f)


_K8S = [
    click.option("--kubeconfig", default=None, type=click.Path(dir_okay=False),
                 help="--launcher k8s: the kubeconfig (default $KUBECONFIG, ~/.kube/config, or the pod's "
                 "service account inside a cluster)."),
    click.option("--k8s-context", default=None, help="--launcher k8s: the kubeconfig context (default its "
                 "current one)."),
    click.option("--k8s-namespace", default=None,
                 help="--launcher k8s: the namespace of the run's pods and secrets (default the kubeconfig "
                 "context's namespace, in a pod its own, else default)."),
    click.option("--k8s-nodes", default=None,
                 help="--launcher k8s: node names (n1,n2) or a label selector (pool=gpu,zone in (a,b)); "
                 "default every schedulable, Ready node with nvidia.com/gpu."),
    click.option("--k8s-image", default=None, envvar="NETBENCH_K8S_IMAGE",
                 help="--launcher k8s, needed there: the image of the pods, with netbench and torch in it "
                 "(its python is --python, default python3); docs/k8s/Dockerfile builds one. Default "
                 "$NETBENCH_K8S_IMAGE."),
    click.option("--k8s-resource", "k8s_resources", multiple=True,
                 help="--launcher k8s, repeatable: NAME=COUNT requested (and limited) by each pod, e.g. "
                 "rdma/ib=1; COUNT all is the node's allocatable count. Default nvidia.com/gpu=all (the "
                 "device plugin); nvidia.com/gpu=env: no request, NVIDIA_VISIBLE_DEVICES=all (no plugin)."),
    click.option("--k8s-toleration", "k8s_tolerations", multiple=True,
                 help="--launcher k8s, repeatable: KEY[=VALUE][:EFFECT] the pods tolerate, or all "
                 "(nvidia.com/gpu always)."),
    click.option("--k8s-keep", is_flag=True,
                 help="--launcher k8s: leave the pods (and their logs) when the run ends, for a look."),
]
_K8S_REMEDY = [
    click.option("--k8s-label", is_flag=True,
                 help="--launcher k8s: after the report, label each node netbench.io/verdict=pass|suspect|"
                 "fail, netbench.io/last-run, netbench.io/run-id and netbench.io/busbw-class (full|reduced|"
                 "low against the fleet). Never without this flag."),
    click.option("--k8s-taint", is_flag=True,
                 help="--launcher k8s: after the report, taint the nodes to drain (preflight's drain rule) "
                 "netbench.io/preflight=fail:NoSchedule, suspect ones =suspect:PreferNoSchedule, the reason, "
                 "run and report in the netbench.io/taint-reason annotation; lift it from nodes measured "
                 "clean. Never without this flag."),
]
_K8S_FLEET = [  # a fleet's routine (docs/k8s/README.md): which nodes a run takes, where its metrics go
    click.option("--k8s-idle-only", is_flag=True,
                 help="--launcher k8s: leave out (and name) the nodes where another pod requests "
                 "nvidia.com/gpu: only idle nodes are tested."),
    click.option("--k8s-skip-tested-within", type=DURATION, default=None, metavar="DURATION",
                 help="--launcher k8s: leave out (and name) the nodes netbench.io/verdict=pass whose "
                 "netbench.io/last-run (--k8s-label) is within DURATION, e.g. 24h; suspect and fail nodes "
                 "are re-tested. Nothing left to test: exit 3."),
    click.option("--k8s-metrics-configmap", default=None, metavar="NAME",
                 help="--launcher k8s: after the report, replace ConfigMap NAME in the run's namespace with "
                 "the run's Prometheus text (netbench.prom), each node's verdict and the report's path."),
]


def k8s_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Where the pods of ``--launcher k8s`` go and what they ask for, which nodes a run takes, and what
    the verdict does to the nodes and the metrics (sweep, preflight)."""
    return _apply(_K8S + _K8S_REMEDY + _K8S_FLEET, f)


def k8s_pod_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Where the pods of ``--launcher k8s`` go and what they ask for (inventory: no verdict)."""
    return _apply(_K8S, f)
