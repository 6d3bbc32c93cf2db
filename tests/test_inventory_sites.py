"""The sites other commands than sweep choose from the registry: ``netbench inventory``'s (the probe
alone, ``sites.probe``), preflight's launcher list, and the simulated fabric's (``sites.sim``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from netbench.cli import cli
from netbench.common.errors import UsageError
from netbench.run.options import Options, SiteOptions
from netbench.sites import INVENTORY, PREFLIGHT, SITES
from netbench.sites.registry import choose_site


def test_the_commands_offer_sites_of_the_registry() -> None:
    assert set(INVENTORY) <= set(SITES) and set(PREFLIGHT) <= set(SITES)
    for command, offered, bad_input in (("inventory", list(INVENTORY), 2), ("preflight", list(PREFLIGHT), 3)):
        r = CliRunner().invoke(cli, [command, "--launcher", "local"])
        choices = ", ".join(map(repr, offered))
        assert r.exit_code == bad_input and f"'local' is not one of {choices}" in r.output


def test_this_machine_alone_honours_python_and_topology_and_refuses_ssh_options(tmp_path: Path) -> None:
    import os

    here = os.uname().nodename
    topo = tmp_path / "topology.conf"
    topo.write_text(f"SwitchName=leafA Nodes={here}\nSwitchName=spine Switches=leafA\n")
    r = CliRunner().invoke(cli, ["inventory", "--out", str(tmp_path / "run"), "--json", "--python",
                                 "/usr/bin/python3", "--topology", str(topo)])
    assert r.exit_code == 0, r.output
    (node,) = json.loads(r.stdout)
    assert [n["switch"] for n in node["neighbors"] if n["source"] == "topology"] == ["leafA"]
    r = CliRunner().invoke(cli, ["inventory", "--out", str(tmp_path / "r2"), "--ssh-config", str(topo)])
    assert r.exit_code == 2 and not (tmp_path / "r2").exists()
    assert "--ssh-config cannot be used with --launcher local without --hosts" in r.output


def test_hosts_are_the_ssh_sites_own(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("h1\nh2 switch=leafB\n")
    site = choose_site(Options(site=SiteOptions(hosts_file=str(hosts), python="/usr/bin/python3")), INVENTORY)
    assert [e.name for e in site.hosts()] == ["h1", "h2"] and site.name == "ssh"
    assert site.switches(site.hosts(), print).uplinks == {"h2": "leafB"}
    hosts.write_text("h1\nh1\n")
    with pytest.raises(UsageError, match="duplicate host h1"):
        choose_site(Options(site=SiteOptions(hosts_file=str(hosts))), INVENTORY)


@pytest.mark.parametrize("spec", [dict(nodes=12, leaves=3), dict(nodes=16, leaves=4, tiers=3, pods=2),
                                  dict(nodes=8, leaves=2, rails=2)])
def test_the_fabric_site_reads_its_written_inputs_as_its_own_tree(tmp_path: Path, spec: dict) -> None:
    """Preflight reads the hosts file and topology.conf written for the fabric; the sweep reads the
    fabric: both are one set of hosts and one tree."""
    from netbench.sim.fabric import FabricSpec
    from netbench.sim.launcher import SimHosts
    from netbench.sim.options import SimOptions
    from netbench.sim.preflight import write_inputs
    from netbench.sim.rails import build_fabric
    from netbench.sites.sim.site import SimSite

    opts = SimOptions(FabricSpec(**spec))
    fab = build_fabric(opts.fabric, ())
    mine, written = SimSite(SimHosts(fab, opts)), SimSite(SimHosts(fab, opts), write_inputs(fab, tmp_path))
    said: list[str] = []
    assert [e.name for e in mine.hosts()] == [e.name for e in written.hosts()] == list(fab.hosts)
    assert {e.slots for e in mine.hosts()} == {opts.fabric.gpus}
    tree = mine.switches(mine.hosts(), said.append).uplinks
    assert tree == written.switches(written.hosts(), said.append).uplinks == fab.uplinks()
    assert said == []
