"""Ranks started by someone else: torchrun, srun (inside a Slurm allocation) or mpirun.

Each process is one rank; its identity comes from the launcher's environment. They meet at one store:
torchrun's own (MASTER_ADDR:MASTER_PORT, kept by its agent), or one that rank 0 opens (its address sent
to everyone through MPI under mpirun; MASTER_ADDR/MASTER_PORT or the allocation's first node under
srun). stdout belongs to the launcher there, so ranks post protocol lines to the store and rank 0 runs
the coordinator in a thread, reading them back (``StoreAgent``): same coordinator, same rows, same
run directory as every other launcher.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from netbench.agents.launchers import HostSlot
from netbench.collectives import messages
from netbench.common.errors import NetbenchError, UsageError


@dataclass
class RankEnv:
    rank: int
    world: int
    local_rank: int
    source: str  # torchrun | slurm | mpi
    master_addr: str | None = None
    master_port: int | None = None


#: the most ranks a launcher's environment may name: far above any fleet, far below a number that
#: only a typo or a hostile environment writes
MAX_RANKS = 1 << 24


def _env_int(name: str, low: int = 0, high: int = MAX_RANKS, default: int | None = None) -> int:
    """The launcher's variable ``name`` as an integer in [low, high), else a UsageError naming it:
    ``RANK=abc`` is the environment's mistake, not netbench's (never ``internal error``)."""
    text = os.environ.get(name, "").strip()
    if not text and default is not None:
        return default
    value = int(text) if text.isascii() and text.isdigit() and len(text) <= 12 else None
    if value is None or not low <= value < high:
        shown = repr(text) if len(text) <= 32 else f"{text[:24]!r}... ({len(text)} characters)"
        raise UsageError(
            f"netbench worker: the environment's {name}={shown} is not a whole number in [{low}, {high})"
        )
    return value


def _rank_env(source: str, names: tuple[str, str, str], world_floor: int = 1, **where: Any) -> RankEnv:
    """(rank, world size, local rank) from the variables ``names``, each checked where it enters:
    0 <= rank < world size, 0 <= local rank < world size. A world size of 0 (mpirun without
    OMPI_COMM_WORLD_SIZE) is taken from MPI itself later (``open_store``)."""
    rank_name, world_name, local_name = names
    world = _env_int(world_name, world_floor, MAX_RANKS + 1, default=0 if world_floor == 0 else None)
    bound = world or MAX_RANKS
    rank = _env_int(rank_name, 0, bound)
    local = _env_int(local_name, 0, bound, default=0)
    return RankEnv(rank, world, local, source, **where)


def _master_port() -> int | None:
    """MASTER_PORT as a TCP port (1-65535); None when unset."""
    if not os.environ.get("MASTER_PORT", "").strip():
        return None
    return _env_int("MASTER_PORT", 1, 65536)


def detect() -> RankEnv:
    """Who am I? torchrun's variables first (they are the most specific), then Open MPI/PMI, then
    Slurm. Every variable read is checked (``_env_int``): one line naming it, exit 2."""
    e = os.environ
    if "RANK" in e and "WORLD_SIZE" in e and ("TORCHELASTIC_RUN_ID" in e or "MASTER_ADDR" in e):
        return _rank_env("torchrun", ("RANK", "WORLD_SIZE", "LOCAL_RANK"),
                         master_addr=e.get("MASTER_ADDR"), master_port=_master_port())
    if "OMPI_COMM_WORLD_RANK" in e or ("SLURM_PROCID" not in e and ("PMI_RANK" in e or "PMIX_RANK" in e)):
        rank = next(n for n in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK") if n in e)
        world = "OMPI_COMM_WORLD_SIZE" if "OMPI_COMM_WORLD_SIZE" in e else "PMI_SIZE"
        local = "OMPI_COMM_WORLD_LOCAL_RANK" if "OMPI_COMM_WORLD_LOCAL_RANK" in e else "MPI_LOCALRANKID"
        return _rank_env("mpi", (rank, world, local), world_floor=0)
    if "SLURM_PROCID" in e and "SLURM_NTASKS" in e:
        addr = e.get("MASTER_ADDR")
        if not addr and e.get("SLURM_JOB_NODELIST"):
            from netbench.inventory.hostlist import expand_hostlist

            try:
                addr = expand_hostlist(e["SLURM_JOB_NODELIST"])[0]
            except (ValueError, IndexError) as exc:
                raise UsageError(f"netbench worker: the environment's SLURM_JOB_NODELIST: {exc}") from None
        port = _master_port()
        if port is None:  # one port a job, so two jobs' workers on a node do not meet
            port = 20000 + _env_int("SLURM_JOB_ID", 0, 1 << 32, default=0) % 20000
        return _rank_env("slurm", ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"),
                         master_addr=addr, master_port=port)
    raise UsageError(
        "netbench worker: no launcher environment found (expected torchrun's RANK/WORLD_SIZE, "
        "mpirun's OMPI_COMM_WORLD_RANK or srun's SLURM_PROCID)"
    )


def load_mpi() -> Any:
    """mpi4py's MPI, for a worker that mpirun (or a PMI launcher) started: without mpi4py or its MPI
    library the loader's own words end the worker as one line (3: it could not run), naming the way
    out, instead of an ImportError's ``internal error``."""
    try:
        from mpi4py import MPI
    except (ImportError, OSError, RuntimeError) as exc:
        said = str(exc).strip().splitlines()
        why = said[0][:200] if said else type(exc).__name__
        raise NetbenchError(
            "netbench worker: the environment says an MPI launcher started it (OMPI_COMM_WORLD_RANK, "
            f"PMI_RANK or PMIX_RANK) but MPI cannot be loaded ({why}): "
            "install mpi4py and its MPI library (pip install 'netbench[mpi]'), or launch with torchrun or "
            "srun",
            exit_code=3,
        ) from None
    return MPI


def open_store(env: RankEnv, connect_timeout_s: float = 60.0) -> tuple[Any, str, int, str, Any]:
    """(the run's store, its address, its port, its secret, the server to keep alive or None).

    The store is a PrefixStore under the run's secret (netbench.agents.launchers's threat model):
    under mpirun rank 0 makes the secret and sends it with the address through MPI; under a user's
    srun or torchrun it is NETBENCH_STORE_SECRET from the environment, if the user set it (``sweep
    --launcher slurm`` starts its own agents and sends them the secret on srun's stdin instead), and
    without it our keys are only namespaced, not secret. torchrun's own store is torchrun's: it
    listens where torchrun put it. A rank that cannot reach the store (rank 0's node does not
    resolve, or never listens) gives up after ``connect_timeout_s`` (the worker's --timeout) with
    a NetbenchError naming the address."""
    from netbench.agents.launchers import SECRET_ENV, new_secret, open_server

    secret = os.environ.pop(SECRET_ENV, "")
    if env.source == "mpi":
        comm = load_mpi().COMM_WORLD
        env.world = comm.Get_size()
        server = None
        info = None
        if env.rank == 0:
            addr = _my_address()
            server = open_server(addr, 0, timeout_s=60)
            info = (addr, server[1].getsockname()[1], new_secret())
        addr, port, secret = comm.bcast(info, root=0)
    elif env.source == "torchrun":
        if not env.master_addr or not env.master_port:
            raise UsageError("torchrun environment without MASTER_ADDR/MASTER_PORT")
        addr, port, server = env.master_addr, env.master_port, None
    else:
        addr, port = env.master_addr or "127.0.0.1", int(env.master_port or 0)
        server = None
        if env.rank == 0:
            try:
                server = open_server(socket.gethostbyname(addr), port, timeout_s=60)
            except OSError as exc:
                why = exc.strerror or str(exc)
                raise UsageError(f"rank 0 cannot listen on {addr}:{port}: {why}") from None
    return client(addr, port, secret, connect_timeout_s), addr, port, secret, server


def client(addr: str, port: int, secret: str, connect_timeout_s: float = 60.0) -> Any:
    """A client connection of its own: a TCPStore client is used by one thread at a time (a rank's
    blocking wait would stall the coordinator's writes if they shared one).

    TCPStore retries its connection until its timeout, and our waits need days (a rank waits for
    the coordinator as long as it lives): connect under ``connect_timeout_s``, then lengthen it."""
    import datetime as _dt

    import torch.distributed as dist

    from netbench.agents.launchers import secured
    from netbench.collectives.rank import STORE_WAIT
    from netbench.common.errors import NetbenchError

    wait_listening(addr, port, connect_timeout_s)
    try:
        raw = dist.TCPStore(addr, port, is_master=False, wait_for_workers=False,
                            timeout=_dt.timedelta(seconds=connect_timeout_s))
    except (RuntimeError, OSError) as exc:  # DistStoreError / DistNetworkError are RuntimeErrors
        first = str(exc).strip().splitlines()[:1]
        raise NetbenchError(
            f"cannot reach the run's store on {addr}:{port} (rank 0's node) within {connect_timeout_s:g} s"
            + (f": {first[0][:160]}" if first else "")
        ) from None
    raw.set_timeout(STORE_WAIT)
    return secured(raw, secret) if secret else dist.PrefixStore("netbench/", raw)


def wait_listening(addr: str, port: int, timeout_s: float) -> None:
    """Until something listens on ``addr:port``, at most ``timeout_s``: a NetbenchError naming the
    node otherwise. Checked here because TCPStore's own retries run to two or three times its
    timeout and print a C++ warning per try; a name that does not resolve fails at once."""
    from netbench.common.errors import NetbenchError

    try:
        socket.getaddrinfo(addr, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise NetbenchError(f"rank 0's node {addr!r} does not resolve ({exc.strerror}): "
                            "cannot reach the run's store") from None
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection((addr, port), timeout=min(2.0, timeout_s)):
                return
        except OSError as exc:
            if time.monotonic() >= deadline:
                raise NetbenchError(
                    f"nothing listens on {addr}:{port} (rank 0's node) after {timeout_s:g} s "
                    f"({exc.strerror or exc}): cannot reach the run's store"
                ) from None
            time.sleep(0.2)


def _my_address() -> str:
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def gather_slots(store: Any, env: RankEnv, host: str) -> list[HostSlot]:
    """Every rank posts its host; rank 0 turns them into host slots (ranks of a host must be contiguous,
    as torchrun, srun's block distribution and mpirun --map-by node:... all give)."""
    from netbench.collectives.rank import STORE_WAIT

    store.set(f"host/{env.rank}", host)
    if env.rank != 0:
        return []
    keys = [f"host/{r}" for r in range(env.world)]
    store.wait(keys, STORE_WAIT)
    hosts = [store.get(k).decode() for k in keys]
    slots: list[HostSlot] = []
    for r, h in enumerate(hosts):
        if slots and slots[-1].host == h:
            slots[-1].nprocs += 1
        elif any(s.host == h for s in slots):
            raise UsageError(f"ranks of host {h} are not contiguous; launch with a block distribution")
        else:
            slots.append(HostSlot(host=h, nprocs=1, rank_base=r))
    return slots


class StoreAgent:
    """Reads one host's ranks' lines from the store, for the coordinator's pump."""

    def __init__(self, host: str, store: Any, ranks: list[int]):
        self.host, self.store, self.ranks = host, store, ranks
        self._stop = threading.Event()
        self._bye: set[int] = set()

    def lines(self) -> Iterator[str]:
        seen = dict.fromkeys(self.ranks, 0)
        while not self._stop.is_set():
            got = False
            for r in self.ranks:
                new, seen[r] = messages.store_lines(self.store, r, seen[r])
                for line in new:
                    got = True
                    msg = messages.parse(line)
                    if msg and msg.get("type") == "bye":
                        self._bye.add(r)
                    yield line
            if len(self._bye) == len(self.ranks):
                return
            if not got:
                time.sleep(0.02)

    def terminate(self) -> None:
        self._stop.set()

    def returncode(self) -> int | None:
        return 0 if len(self._bye) == len(self.ranks) or self._stop.is_set() else None

    def end_reason(self) -> str | None:
        return None  # the user's scheduler started these ranks: it says why they ended, not us


class ExternalLauncher:
    """Nothing to start: the ranks exist. Hands the coordinator one StoreAgent per host."""

    def __init__(self, store: Any, name: str):
        self.store, self.name = store, name

    def store_host(self) -> tuple[str, str]:  # pragma: no cover - the store is given
        return "", ""

    def start(self, slot: HostSlot, store_addr: str, store_port: int, secret: str) -> StoreAgent:
        return StoreAgent(slot.host, self.store, slot.ranks)
