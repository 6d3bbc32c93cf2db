"""Fake node tools for probe tests: small sh scripts that print captured fixture output.

``make_fake_tools(dir, profile)`` writes one executable per tool into ``dir``; put ``dir`` first on
PATH and inventory/probe.sh runs them instead of real tools. ``profile`` maps a command line (tool
plus exact arguments, e.g. ``"nvidia-smi -q -x"``, or the bare tool for "no arguments") to what it
prints:

- a fixture path relative to the fixtures dir (``"h200-node/nvidia-smi-q-x.txt"``) or an absolute path
  (e.g. a modified copy written into a temp dir by ``modified_fixture``);
- ``"@text:<literal>"`` to print a literal line (a hostname, say);
- ``"@sleep:<seconds>"`` to hang (timeout tests);
- any of these followed by ``"#rc=<n>"`` to exit with that code (ibstat exits 255 after an ibpanic).

A tool called with arguments not in the profile prints an error and exits 2, like a real tool would.
Fixtures are never modified on disk: variants are copies (``modified_fixture``).
"""

from __future__ import annotations

import shlex
from collections import defaultdict
from pathlib import Path

from fixtures_path import fixture, fixtures_dir

SIM = "generated-ibsim-0.10_infiniband-diags-44.0__"

# A GPU node as seen by the probe: the real H200 capture plus public NIC/fabric captures.
H200_PROFILE: dict[str, str] = {
    "hostname": "@text:gpu-node01",
    "nvidia-smi -q -x": "h200-node/nvidia-smi-q-x.txt",
    "nvidia-smi topo -m": "h200-node/nvidia-smi-topo-m.txt",
    "ibstat": "public/ibstat/leptonai-gpud__ibstat.47.0.h100.all.active.2",
    "ibv_devinfo": "public/ibv_devinfo/kaust-rccl-ksl-docs__interconnect.rst_ibv_devinfo.txt",
    "lldpcli -f json show neighbors details": "public/lldpctl-json/generated-lldpd-1.0.16__"
    "lldpcli_-f_json_show_neighbors_details_2ports.json",
    "iblinkinfo -l": f"public/iblinkinfo/{SIM}iblinkinfo_-l.txt",
    "ofed_info -s": "public/ofed_info/DaoCloud-DaoCloud-docs__ofed_driver.md_ofed_info_-s.txt",
    "ethtool -i ens1f0np0": "public/ethtool-i/UNRESOLVED-index-69764464742__"
    "3FS-troubleshooting-doc_ethtool-i_ens4np0.txt",
}


def _source(value: str) -> tuple[str, str]:
    """(kind, argument) of a profile value without its #rc suffix."""
    if value.startswith("@text:"):
        return "text", value[len("@text:") :]
    if value.startswith("@sleep:"):
        return "sleep", value[len("@sleep:") :]
    path = Path(value) if Path(value).is_absolute() else fixtures_dir() / value
    if not path.is_file():
        raise FileNotFoundError(f"fake tool output {value!r} not found at {path}")
    return "file", str(path)


def _action(value: str) -> str:
    value, _, rc = value.partition("#rc=")
    kind, arg = _source(value)
    if kind == "text":
        body = f"printf '%s\\n' {shlex.quote(arg)}"
    elif kind == "sleep":
        body = f"sleep {float(arg):g}"
    else:
        body = f"cat {shlex.quote(arg)}"
    return f"{body}; exit {int(rc) if rc else 0}"


def make_fake_tools(dir: Path, profile: dict[str, str]) -> Path:  # noqa: A002 - the agreed signature
    """Write one fake executable per tool named in ``profile`` into ``dir`` and return ``dir``."""
    dir.mkdir(parents=True, exist_ok=True)
    by_tool: dict[str, dict[str, str]] = defaultdict(dict)
    for command, value in profile.items():
        tool, _, args = command.strip().partition(" ")
        if not tool or "/" in tool:
            raise ValueError(f"bad tool name in profile: {command!r}")
        by_tool[tool][args.strip()] = value
    for tool, cases in by_tool.items():
        lines = ["#!/bin/sh", f"# fake {tool} for netbench tests", 'case "$*" in']
        for args, value in cases.items():
            lines.append(f"  {shlex.quote(args)}) {_action(value)} ;;")
        lines.append(f'  *) echo "fake {tool}: unsupported arguments: $*" >&2; exit 2 ;;')
        lines.append("esac")
        path = dir / tool
        path.write_text("\n".join(lines) + "\n")
        path.chmod(0o755)
    return dir


def modified_fixture(rel: str, dest: Path, replacements: dict[str, str]) -> Path:
    """A copy of a fixture with text replaced (e.g. an older firmware), written to ``dest``."""
    text = fixture(rel).read_text()
    for old, new in replacements.items():
        if old not in text:
            raise ValueError(f"{old!r} does not occur in {rel}")
        text = text.replace(old, new)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(text)
    return dest


def older_firmware_profile(tmp: Path, old_fw: str = "28.35.1012") -> dict[str, str]:
    """H200_PROFILE but with every ConnectX-7 at ``old_fw`` instead of its peers' 28.41.1000."""
    ibstat = modified_fixture(H200_PROFILE["ibstat"], tmp / "ibstat-old-fw.txt", {"28.41.1000": old_fw})
    return {**H200_PROFILE, "ibstat": str(ibstat)}


def fake_netdevs(tmp: Path, names: list[str]) -> Path:
    """A /sys/class/net look-alike where ``names`` are physical devices (they have ``device``)."""
    root = tmp / "sys-class-net"
    for n in names:
        (root / n / "device").mkdir(parents=True, exist_ok=True)
    (root / "lo").mkdir(parents=True, exist_ok=True)
    return root


def probe_env(
    bin_dir: Path,
    ib_sysfs: Path | None = None,
    net_sysfs: Path | None = None,
    base_path: str = "/usr/bin:/bin",
) -> dict[str, str]:
    """Environment for probe.sh: fake tools first on PATH, then only the basic system dirs (so real
    InfiniBand/NVIDIA tools of the test machine cannot leak in), and sysfs roots redirected."""
    env = {"PATH": f"{bin_dir}:{base_path}"}
    env["NETBENCH_IB_SYSFS"] = str(ib_sysfs) if ib_sysfs else str(bin_dir / "no-such-sysfs-ib")
    env["NETBENCH_NET_SYSFS"] = str(net_sysfs) if net_sysfs else str(bin_dir / "no-such-sysfs-net")
    return env


def h200_sysfs_ib() -> Path:
    """The public /sys/class/infiniband capture (an H100 node's HCAs) as a sysfs root."""
    (root,) = [p for p in (fixtures_dir() / "public/sysfs-infiniband").iterdir() if p.is_dir()]
    return root
