"""The run boundary on real test hosts (network namespaces + sshd): a host whose agent breaks the
protocol costs only its own pairs; a host whose torch cannot use its GPUs is one clear error; a
run directory holds one run."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from rowfiles import has_rows, rows_of

pytestmark = pytest.mark.netns

QUICK = ["--pattern", "pairwise", "--pair-sizes", "64K", "-k", "all_reduce", "-n", "2", "-w", "1",
         "--timeout", "10", "--no-report"]

# An agent that forwards the real one's lines and, after the first hello, sends a row that is not
# a row: raw terminal escapes (set the window title, clear the screen) in a line that is not JSON.
HOSTILE_AGENT = r'''
import subprocess, sys
proc = subprocess.Popen([sys.executable] + sys.argv[1:], stdout=subprocess.PIPE)
sent = False
for raw in proc.stdout:
    sys.stdout.buffer.write(raw)
    if not sent and b'"hello"' in raw:
        sent = True
        bad = '{"type": "row", "phase": 0, "row": {"collective": "\x1b]0;owned\x07\x1b[2JPASS"}}'
        sys.stdout.write("@@nb " + bad + "\n")
    sys.stdout.flush()
sys.exit(proc.wait())
'''


def hostile_python(tmp: Path) -> Path:
    """A ``python=`` for one host: the real python, except that its agent is HOSTILE_AGENT."""
    agent = tmp / "hostile_agent.py"
    agent.write_text(HOSTILE_AGENT)
    wrapper = tmp / "hostile-python"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = -m ] && [ "$3" = agent ]; then exec {sys.executable} {agent} "$@"; fi\n'
        f'exec {sys.executable} "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return wrapper


def rows(out: Path) -> list[dict]:
    return rows_of(out)


def test_a_host_that_breaks_the_protocol_costs_only_its_pairs(netns_factory, tmp_path: Path) -> None:
    net = netns_factory(["h0", "h1", "h2"])
    labels = {"h2": {"python": str(hostile_python(tmp_path))}}
    argv = net.netbench_argv(tmp_path, labels=labels)
    out = tmp_path / "run"
    res = subprocess.run([*argv, "--out", str(out), *QUICK], capture_output=True, text=True, timeout=300)
    assert res.returncode == 2, res.stderr[-3000:]  # completed, with a host's fault: a failure
    assert "\x1b" not in res.stdout + res.stderr and "\x07" not in res.stdout + res.stderr
    assert "host h2: sent an invalid message" in res.stdout
    assert "\\x1b" in res.stdout  # the escapes are shown, quoted
    rs = rows(out)
    by_pair = {frozenset(r["hosts"]): r for r in rs if r["pattern"] == "pair"}
    assert by_pair[frozenset({"h0", "h1"})]["status"] == "ok"
    for pair in ({"h0", "h2"}, {"h1", "h2"}):
        r = by_pair[frozenset(pair)]
        assert r["status"] != "ok" and "host h2: sent an invalid message" in r["error"]
    assert all(isinstance(r["hosts"], list) for r in rs)  # the bad row was never stored
    assert {r["collective"] for r in rs} == {"all_reduce"}
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "completed" and run["down_hosts"] == ["h2"]
    assert [f["kind"] for f in run["faults"]] == ["protocol"]


def fake_gpu_tools(tmp: Path) -> Path:
    from fake_tools import H200_PROFILE, make_fake_tools

    return make_fake_tools(tmp / "tools", {"nvidia-smi -q -x": H200_PROFILE["nvidia-smi -q -x"]})


def test_torch_that_cannot_use_the_gpus_is_named_not_taken_for_a_dead_host(
    netns_factory, tmp_path: Path
) -> None:
    """nvidia-smi on both hosts shows an H200 (a real capture); the hosts' torch is this machine's,
    which has no CUDA. The sweep's inventory asks that torch and says so before any rank starts
    (one line, exit 2); preflight's probe asks python3, so there the ranks' hello says it (exit 3)."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine's torch can use CUDA")
    tools = fake_gpu_tools(tmp_path)
    net = netns_factory(["g0", "g1"], tools={"g0": tools, "g1": tools})
    res = subprocess.run([*net.netbench_argv(tmp_path), "--out", str(tmp_path / "run"), *QUICK],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 2, res.stderr[-3000:]
    last = res.stderr.strip().splitlines()[-1]
    assert "g0, g1" in last and "(a CPU build) cannot use CUDA but nvidia-smi shows" in last
    assert "Traceback" not in res.stderr and not has_rows(tmp_path / "run")

    (tmp_path / "pf").mkdir()
    pf_argv = [*net.netbench_argv(tmp_path / "pf", "preflight"), "--out", str(tmp_path / "pf-run")]
    res = subprocess.run(pf_argv, capture_output=True, text=True, timeout=300)
    assert res.returncode == 3, res.stderr[-3000:]
    last = res.stderr.strip().splitlines()[-1]
    assert "2 host(s) cannot run nccl (g0, g1)" in last and "cannot use CUDA" in last

    # asked for gloo, the same hosts run
    res = subprocess.run([*net.netbench_argv(tmp_path), "--out", str(tmp_path / "gloo"), "--backend", "gloo",
                          *QUICK], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]


def test_a_run_directory_holds_one_run(netns_factory, tmp_path: Path) -> None:
    net = netns_factory(["h0", "h1"])
    out = tmp_path / "run"
    first = subprocess.run([*net.netbench_argv(tmp_path), "--out", str(out), *QUICK],
                           capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    before = rows_of(out)
    again = subprocess.run([*net.netbench_argv(tmp_path), "--out", str(out), *QUICK],
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 2 and again.stdout == ""
    assert again.stderr.strip().splitlines() == [
        f"netbench: error: --out {out}: already holds a run (run.json); give a new directory, or put "
        f"{{id}} in the path (e.g. --out {out}/{{id}}) for a fresh run inside it"
    ]
    assert rows_of(out) == before  # nothing appended
    pf = subprocess.run([*net.netbench_argv(tmp_path, "preflight"), "--out", str(out)],
                        capture_output=True, text=True, timeout=300)
    assert pf.returncode == 3 and "already holds a run" in pf.stderr and "KeyError" not in pf.stderr
    fresh = subprocess.run([*net.netbench_argv(tmp_path), "--out", f"{out}/{{id}}", *QUICK],
                           capture_output=True, text=True, timeout=300)
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    (inner,) = [p for p in out.iterdir() if p.is_dir() and p.name != "results.parquet"]
    assert json.loads((inner / "run.json").read_text())["run_id"] == inner.name
    assert len(rows_of(out)) == len(before)
