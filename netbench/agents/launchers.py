"""Launchers start one agent per host; the coordinator talks to them through their stdout."""

from __future__ import annotations

import os
import re
import secrets
import socket
import sys
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # the plan's module imports torch: launchers import this one without it
    from netbench.collectives.plan import WorkerPlan

# -- the run's store and its secret -----------------------------------------------------------------
# Threat model. torch's TCPStore has no authentication: anyone who can open a TCP connection to its
# port may get, set, add, wait on and delete any key they can name. What we do about it:
# - it listens on one address only (the one the hosts use to reach it; 127.0.0.1 for local runs),
#   not on every interface, so it is not reachable from networks the run does not use;
# - every key of ours lives under ``netbench/<secret>/`` where the secret is 128 random bits made
#   per run. The store offers no way to list keys, so a client without the secret cannot name the
#   plan, the phase releases (``go/N``), the groups' rendezvous keys or the message keys: it cannot
#   inject a row, release or stop a phase, or read the plan.
# - the secret reaches the agents inside the SSH channel (or the local pipe), the ranks on their
#   stdin, and external launchers' ranks through MPI or the environment: never a command line.
# What it does not stop: someone who can read the traffic between hosts (the store protocol is
# plain TCP; use it on a network you trust), a user who can read our processes' memory or
# environment (root, or the same user), and denial of service (a client can still connect, flood
# the store with keys of its own, or hold connections open). Those stay the cluster's business.
SECRET_ENV = "NETBENCH_STORE_SECRET"  # "SECRET" in the name keeps it out of env.json (envinfo)


def new_secret() -> str:
    return secrets.token_hex(16)


def secured(raw: Any, secret: str) -> Any:
    """The run's own view of a raw store: every key under the secret's namespace."""
    import torch.distributed as dist

    return dist.PrefixStore(f"netbench/{secret}/", raw)


STORE_VALUE_BYTES = 4 << 20
"""The most one store value carries. torch's libuv TCPStore (its default since 2.4) refuses a
message over 8 MiB, and a plan is 233 bytes a pair group: past ~270 nodes it no longer fits one value
(the re-test plan of a 4,096-node sweep was 12 MB: every rank's connection was reset)."""


def put_text(store: Any, key: str, pieces: Iterable[str]) -> None:
    """Text under ``key`` in values of at most STORE_VALUE_BYTES: ``key/0``, ``key/1``... then
    ``key`` itself, their count, set last, so whoever sees ``key`` finds every piece (``get_text``)."""
    count, held, size = 0, [], 0
    for text in pieces:
        data = text.encode()
        while data:
            room = STORE_VALUE_BYTES - size
            held.append(data[:room])
            size += len(held[-1])
            data = data[room:]
            if size == STORE_VALUE_BYTES:
                store.set(f"{key}/{count}", b"".join(held))
                count, held, size = count + 1, [], 0
    if held or not count:
        store.set(f"{key}/{count}", b"".join(held))
        count += 1
    store.set(key, str(count))


def get_text(store: Any, key: str, timeout: Any) -> str:
    """What ``put_text`` put under ``key``, once it is there (waiting up to ``timeout``)."""
    store.wait([key], timeout)
    count = int(store.get(key).decode())
    return b"".join(store.get(f"{key}/{i}") for i in range(count)).decode()


# -- the plan in the store --------------------------------------------------------------------------
# Every rank reading the whole plan made one store serve ~1 TB at 1,024 hosts (122 MB x 8,192 ranks)
# before the first row. The coordinator stores the plan as ``WorkerPlan.parts``: under PLAN_KEY what
# every host reads (fields, phases, host table), under ``host_plan_key(host)`` that host's groups. A
# host's agent fetches the two once and hands them to its ranks on their stdin; ranks that an external
# launcher started (no agent) fetch their own host's. Both go in pieces of STORE_VALUE_BYTES.
PLAN_KEY = "plan/common"


def host_plan_key(host: str) -> str:
    return f"plan/host/{host}"


def publish_plan(store: Any, plan: WorkerPlan) -> None:
    """Every host's part first, what every host reads last: a reader that sees PLAN_KEY finds its
    host's part there too (the coordinator publishes before it starts any agent anyway)."""
    parts = plan.parts()
    for host, text in parts.own():
        put_text(store, host_plan_key(host), [text])
    put_text(store, PLAN_KEY, [parts.common])


@dataclass(frozen=True)
class HostPlanText:
    """One host's plan as fetched: what every host reads and the host's own part (both JSON on one
    line each, so an agent hands them to a rank as two lines of its stdin)."""

    common: str
    own: str

    def plan(self) -> WorkerPlan:
        from netbench.collectives.plan import WorkerPlan

        return WorkerPlan.from_parts(self.common, [self.own])


def fetch_host_plan(store: Any, host: str, timeout: Any) -> HostPlanText:
    """``host``'s part of the plan, once the coordinator has published it (waiting up to ``timeout``)."""
    return HostPlanText(get_text(store, PLAN_KEY, timeout), get_text(store, host_plan_key(host), timeout))


def listen_socket(address: str, port: int = 0) -> socket.socket:
    """A listening socket on ``address`` only, for TCPStore's ``master_listen_fd`` (TCPStore by
    itself listens on every interface). Keep it open as long as the store lives."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((address, port))
    sock.listen(1024)
    return sock


def open_server(address: str, port: int = 0, timeout_s: float = 30.0) -> tuple[Any, socket.socket]:
    """A TCPStore server listening on ``address`` alone; (the store, the socket to keep open)."""
    import datetime as _dt

    import torch.distributed as dist

    sock = listen_socket(address, port)
    store = dist.TCPStore(
        address,
        sock.getsockname()[1],
        is_master=True,
        wait_for_workers=False,
        timeout=_dt.timedelta(seconds=timeout_s),
        master_listen_fd=sock.fileno(),
    )
    return store, sock


# torch's store logs this once per connecting rank whenever reverse DNS gives no name for the rank's
# address (usual on cluster networks, and wherever no DNS server answers): it says nothing about the
# run, so it is dropped from what we print and from what a launcher (srun, mpirun) hands us.
TORCH_NOISE = re.compile(r"\[c10d\] The hostname of the client socket cannot be retrieved")


@contextmanager
def without_torch_noise() -> Iterator[None]:
    """This process's stderr, less torch's noise, while the block runs (the store's server and
    clients live in it). The store's C++ logger writes to fd 2 itself, past ``sys.stderr``, so fd 2
    becomes a pipe for the block and a thread copies every other line to the real stderr."""
    sys.stderr.flush()
    try:
        real = os.dup(2)
    except OSError:  # no stderr at all (closed by whoever started us): nothing to keep clean
        yield
        return
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)

    def pump() -> None:
        # until every holder of the write end is gone: fd 2 restored, and any child that inherited it
        with os.fdopen(read_end, "rb") as src, os.fdopen(real, "wb", buffering=0) as dst:
            for raw in src:
                if not TORCH_NOISE.search(raw.decode("utf-8", errors="replace")):
                    dst.write(raw)

    copier = threading.Thread(target=pump, daemon=True)
    copier.start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(real, 2)
        copier.join(1.0)


@dataclass
class HostSlot:
    """One host of the run: its name, how many ranks it runs, and the first global rank."""

    host: str
    nprocs: int
    rank_base: int
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def ranks(self) -> list[int]:
        return list(range(self.rank_base, self.rank_base + self.nprocs))


class AgentProcess(Protocol):
    """A running agent: yields its stdout lines, can be stopped, has an exit code once done."""

    host: str

    def lines(self):  # noqa: ANN201 - an iterator of str
        ...

    def terminate(self) -> None: ...

    def returncode(self) -> int | None: ...

    def end_reason(self) -> str | None:
        """What the launcher itself said about why the agent ended (srun: the step was cancelled,
        the node failed; mpirun: the daemon could not start), or None."""
        ...


class Launcher(Protocol):
    name: str

    def store_host(self) -> tuple[str, str]:
        """(address to bind the store on, address the hosts use to reach it)."""
        ...

    def start(self, slot: HostSlot, store_addr: str, store_port: int, secret: str) -> AgentProcess:
        """Start the host's agent; ``secret`` must reach it off the command line (stdin, the channel)."""
        ...


FORWARDED_PREFIXES = ("NCCL_", "GLOO_", "TORCH_NCCL", "NETBENCH_INJECT", "CUDA_VISIBLE_DEVICES")


def forwarded_env() -> dict[str, str]:
    """The environment every remote agent gets from the user's: NCCL's and gloo's settings (the run
    records them in env.json), whatever starts it (SSH, mpirun; srun hands on all of it)."""
    from netbench.collectives.envinfo import relevant_env

    return {k: v for k, v in relevant_env().items() if k.startswith(FORWARDED_PREFIXES)}


def agent_argv(python: str, slot: HostSlot, store_addr: str, store_port: int) -> list[str]:
    """The command that starts a host's agent (netbench.agents.worker), the same for every launcher."""
    return [
        python,
        "-m",
        "netbench.agents.worker",
        "agent",
        "--store-addr",
        store_addr,
        "--store-port",
        str(store_port),
        "--host",
        slot.host,
        "--rank-base",
        str(slot.rank_base),
        "--nprocs",
        str(slot.nprocs),
    ]
