"""Bad input is one ``netbench: error:`` line and exit 2 (preflight: 3), never a traceback, a hang or
a verdict on nothing (issue 24): every number an option takes is finite and bounded, size lists
that plan nothing are refused, and netbench writes standard JSON only."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import click
import numpy as np
import pytest
from netbench.collectives.names import MEASURED, ROW_PATTERNS
from netbench.inventory.hosts import HostEntry, parse_hosts_file
from netbench.inventory.topology import MAX_TIERS, TopologyError, depth, parse_topology
from netbench.reports.policy import PolicyError, load_policy

from netbench.cli import LazyGroup, main
from netbench.commands._params import Count, Number
from netbench.common.errors import UsageError
from netbench.common.files import read_user_text
from netbench.common.jsontext import dumps, number_texts
from netbench.common.rundir import RunDirError, open_regular

GROUP = LazyGroup(name="netbench")


def _commands() -> list[tuple[list[str], click.Command]]:
    """Every command and sub-command, as its command line's words."""
    out: list[tuple[list[str], click.Command]] = []
    for name in GROUP.list_commands(None):  # type: ignore[arg-type]
        cmd = GROUP.get_command(None, name)  # type: ignore[arg-type]
        assert cmd is not None
        if isinstance(cmd, click.Group):
            out += [([name, sub], c) for sub, c in cmd.commands.items()]
        else:
            out.append(([name], cmd))
    return out


def _numeric_options(kind: type) -> list[tuple[list[str], click.Command, click.Option]]:
    return [
        (words, cmd, p)
        for words, cmd in _commands()
        for p in cmd.params
        if isinstance(p, click.Option) and isinstance(p.type, kind) and not p.is_flag
    ]


FLOATS = _numeric_options(click.types.FloatParamType)
INTS = _numeric_options(click.types.IntParamType)


def _argv(words: list[str], cmd: click.Command, option: click.Option, value: str) -> list[str]:
    """The command line with ``option value`` and a stand-in for each required argument/option."""
    argv = list(words)
    for p in cmd.params:
        if isinstance(p, click.Argument) and p.required:
            argv.append("x")
        elif isinstance(p, click.Option) and p.required and p is not option:
            argv += [p.opts[0], "x"]
    return [*argv, option.opts[0], value]


def _one_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as ex:
        main(argv)
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "netbench" in err and "error:" in err, err
    return int(ex.value.code or 0), err


def _bad_input_status(words: list[str]) -> int:
    return 3 if words[0] == "preflight" else 2  # preflight: 2 means "drain", bad input is 3


def test_every_number_an_option_takes_is_bounded() -> None:
    assert FLOATS and INTS
    unbounded = [f"{' '.join(w)} {o.opts[0]}" for w, _, o in FLOATS if not isinstance(o.type, Number)]
    unbounded += [
        f"{' '.join(w)} {o.opts[0]}"
        for w, _, o in INTS
        if not isinstance(o.type, Count) or o.type.max is None or o.type.min is None or o.type.min < 0
    ]
    assert not unbounded, f"options without params.Number / params.Count: {unbounded}"


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1", "1e308", "NaN"])
@pytest.mark.parametrize(
    "words,cmd,option", FLOATS, ids=[f"{' '.join(w)} {o.opts[0]}" for w, _, o in FLOATS]
)
def test_float_options_refuse_what_is_not_a_usable_number(
    capsys: pytest.CaptureFixture[str], words: list[str], cmd: click.Command, option: click.Option, value: str
) -> None:
    code, err = _one_line(capsys, _argv(words, cmd, option, value))
    assert code == _bad_input_status(words) and option.opts[0] in err, err


@pytest.mark.parametrize("value", ["1" + "0" * 30, "-1", "nan"])
@pytest.mark.parametrize("words,cmd,option", INTS, ids=[f"{' '.join(w)} {o.opts[0]}" for w, _, o in INTS])
def test_count_options_refuse_past_their_range(
    capsys: pytest.CaptureFixture[str], words: list[str], cmd: click.Command, option: click.Option, value: str
) -> None:
    code, err = _one_line(capsys, _argv(words, cmd, option, value))
    assert code == _bad_input_status(words) and option.opts[0] in err, err


@pytest.mark.parametrize("argv,says", [
    (["simulate", "--nodes", "1000000000"], "2<=x<=8192"),
    (["simulate", "--oversubscription", "nan"], "not a finite number"),
    (["simulate", "--oversubscription", "inf"], "not a finite number"),
    (["simulate", "--oversubscription", "-1"], "1<=x<=1000"),
    (["simulate", "--core-oversubscription", "nan"], "not a finite number"),
    (["simulate", "--nic-gbps", "-180"], "0<x<=10000"),
    (["simulate", "--seed", "-1"], "--seed"),
    (["compare", "run", "--baseline", "b", "--threshold", "nan"], "not a finite number"),
])
def test_the_cases_of_issue_24(capsys: pytest.CaptureFixture[str], argv: list[str], says: str) -> None:
    code, err = _one_line(capsys, argv)
    assert code == 2 and says in err, err


@pytest.mark.parametrize("argv", [
    ["simulate", "--pair-sizes", "0"],
    ["simulate", "--pair-sizes", "1M,0"],
    ["sweep", "--pair-sizes", "0"],
    ["worker", "--pair-sizes", "0B"],
])
def test_pair_sizes_of_0_bytes_are_refused(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    code, err = _one_line(capsys, argv)
    assert code == 2 and "0 bytes moves nothing" in err, err


def test_preflight_refuses_pair_sizes_of_0_bytes_as_could_not_run(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _one_line(capsys, ["preflight", "--pair-sizes", "0"])
    assert code == 3 and "0 bytes moves nothing" in err, err


def test_a_sweep_whose_every_size_is_0_bytes_is_refused(capsys: pytest.CaptureFixture[str], tmp_path) -> None:  # noqa: ANN001
    code, err = _one_line(capsys, ["sweep", "-b", "0", "-e", "0", "--out", str(tmp_path / "run")])
    assert code == 2 and "every size is 0 bytes" in err, err
    assert not (tmp_path / "run" / "results.jsonl").exists()


def test_json_writers_never_write_nan_or_infinity() -> None:
    record = {"a": math.nan, "b": [math.inf, -math.inf, 1.5], "c": (2.0, {"d": math.nan})}
    text = dumps(record)
    assert json.loads(text, parse_constant=lambda c: pytest.fail(f"wrote {c}")) == {
        "a": None, "b": [None, None, 1.5], "c": [2.0, {"d": None}]
    }
    assert dumps({"x": 1.0}, indent=2) == json.dumps({"x": 1.0}, indent=2)
    texts = number_texts(np.array([math.nan, math.inf, 1e-9, 0.5])).to_pylist()
    assert texts == ["null", "null", "1e-09", "0.5"]


# -- files the user names: a FIFO, a device or a directory is refused at once ---------------------

FILE_OPTIONS = [
    (["sweep"], "--hosts"), (["sweep", "--hosts", "HOSTS"], "--topology"), (["sweep"], "--policy"),
    (["sweep", "--hosts", "HOSTS"], "--ssh-config"),
    (["preflight"], "--hosts"), (["preflight"], "--policy"), (["preflight"], "--topology"),
    (["preflight"], "--ssh-config"),
    (["inventory"], "--hosts"), (["inventory"], "--topology"), (["inventory"], "--ssh-config"),
    (["report", "RUN"], "--policy"), (["report", "RUN"], "--topology"),
]


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)  # no writer, ever: a read would wait for ever
    (tmp_path / "hosts").write_text("h1\nh2\n")
    return path


@pytest.mark.parametrize("kind", ["fifo", "/dev/null", "directory"])
@pytest.mark.parametrize("words,option", FILE_OPTIONS, ids=[f"{' '.join(w)} {o}" for w, o in FILE_OPTIONS])
def test_a_file_option_refuses_what_is_not_a_regular_file_at_once(
    fifo: Path, words: list[str], option: str, kind: str
) -> None:
    given = {"fifo": str(fifo), "/dev/null": "/dev/null", "directory": str(fifo.parent)}[kind]
    stand_in = {"HOSTS": str(fifo.parent / "hosts"), "RUN": str(fifo.parent)}
    argv = [stand_in.get(w, w) for w in words]
    r = subprocess.run([sys.executable, "-m", "netbench", *argv, option, given],
                       capture_output=True, text=True, timeout=120, cwd=fifo.parent)
    assert r.returncode == _bad_input_status(words), r
    assert r.stderr.count("\n") == 1 and "is not a regular file" in r.stderr and option in r.stderr, r.stderr


def test_an_anonymous_pipe_is_still_read(tmp_path: Path) -> None:
    """``--hosts <(scontrol show hostnames)``: a pipe whose writer is already there."""
    read, write = os.pipe()
    os.write(write, b"h1\nh2\n")
    os.close(write)
    try:
        assert [e.name for e in parse_hosts_file(f"/dev/fd/{read}")] == ["h1", "h2"]
    finally:
        os.close(read)


def test_run_directory_files_share_the_one_check(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "results.jsonl")
    with pytest.raises(RunDirError, match="is not a regular file \\(a FIFO\\)"):
        open_regular(tmp_path / "results.jsonl")
    with pytest.raises(UsageError, match="is not a regular file \\(a FIFO\\)"):
        read_user_text(tmp_path / "results.jsonl", "hosts file")


# -- policies: a word outside its vocabulary is refused with the nearest one -----------------------


@pytest.mark.parametrize("toml,says", [
    ('[[expect.busbw]]\ncollective = "all_redcue"\nbusbw_GBps = 100\n',
     "expect.busbw.collective = 'all_redcue' is not a collective; did you mean 'all_reduce'?"),
    ('[[expect.busbw]]\ncollective = "all_reduce"\npattern = "wrld"\nbusbw_GBps = 100\n',
     "expect.busbw.pattern = 'wrld' is not a pattern; did you mean 'world'?"),
    ('[[expect.busbw]]\ncollective = "all_reduce"\nhop_class = "spien"\nbusbw_GBps = 100\n',
     "expect.busbw.hop_class = 'spien' is not a hop class"),
    ('[severity]\nslow_nod = "fail"\n', "unknown rule severity.slow_nod; did you mean 'slow_node'?"),
    ('[severity]\nslow_node = "fial"\n',
     "severity.slow_node = 'fial' is not a severity; did you mean 'fail'?"),
    ('[thresholds]\nmad_kk = 3\n', "unknown key thresholds.mad_kk; did you mean 'mad_k'?"),
    ('[thresholds]\nmad_k = nan\n', "thresholds.mad_k = nan is not a finite number"),
    ('[expect]\nlink_rate_gbps = inf\n', "expect.link_rate_gbps = inf is not a finite number"),
    ('[versions.minimum]\nnic_firmwre = "1"\n',
     "unknown key versions.minimum.nic_firmwre; did you mean 'nic_firmware'?"),
    ('[expectt]\n', "unknown key expectt; did you mean 'expect'?"),
    ('[[reference]]\nid = "x"\ncollective = "all_reduce"\nscope = "intar"\nlow_GBps = 1\nhigh_GBps = 2\n'
     'source = "s"\n', "scope = 'intar' is not a reference scope; did you mean 'intra'?"),
    ('[[reference]]\nid = "x"\ncollective = "allredcue"\nscope = "intra"\nlow_GBps = 1\nhigh_GBps = 2\n'
     'source = "s"\n', "collective = 'allredcue' is not a collective; did you mean 'all_reduce'?"),
])
def test_a_policy_typo_is_refused_with_the_nearest_word(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, toml: str, says: str
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(toml)
    with pytest.raises(PolicyError) as ex:
        load_policy(policy)
    assert str(ex.value).startswith(f"{policy}: ") and says in str(ex.value), ex.value
    (tmp_path / "results.jsonl").write_text("")
    code, err = _one_line(capsys, ["report", str(tmp_path), "--policy", str(policy)])
    assert code == 2 and says in err, err


def test_a_policy_takes_the_other_spellings_of_a_collective(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[[expect.busbw]]\ncollective = "AllReduce"\npattern = "pair"\nbusbw_GBps = 100\n')
    assert load_policy(policy).expect.busbw[0].collective == "all_reduce"


def test_the_policy_vocabulary_is_what_rows_carry() -> None:
    from netbench.collectives.ops import COLLECTIVES

    from netbench.run.planner import PATTERNS

    assert set(COLLECTIVES) == set(MEASURED)
    assert set(ROW_PATTERNS) == {"pair" if p == "pairwise" else p for p in PATTERNS}


# -- deeply nested files and preflight's "could not run" ------------------------------------------


@pytest.mark.parametrize("name,text,says", [
    ("policy.toml", "x = " + "[" * 100_000 + "]" * 100_000 + "\n", "not valid TOML: nested too deeply"),
    ("topology.toml", "x = " + "[" * 100_000 + "]" * 100_000 + "\n", "not valid TOML: nested too deeply"),
    ("topology.json", '{"s":' * 100_000 + "1" + "}" * 100_000, "not valid JSON: nested too deeply"),
])
def test_a_deeply_nested_file_is_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, text: str, says: str
) -> None:
    (tmp_path / name).write_text(text)
    (tmp_path / "results.jsonl").write_text("")
    option = "--policy" if name.startswith("policy") else "--topology"
    code, err = _one_line(capsys, ["report", str(tmp_path), option, str(tmp_path / name)])
    assert code == 2 and f"{tmp_path / name}: " in err and says in err, err


def test_preflight_with_a_deeply_nested_policy_could_not_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "policy.toml").write_text("x = " + "[" * 100_000 + "]" * 100_000 + "\n")
    (tmp_path / "hosts").write_text("h1\nh2\n")
    code, err = _one_line(capsys, ["preflight", "--hosts", str(tmp_path / "hosts"), "--policy",
                                   str(tmp_path / "policy.toml"), "--out", str(tmp_path / "run")])
    assert code == 3 and "nested too deeply" in err, err


def test_an_internal_error_in_preflight_exits_3_not_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1 means "warnings" for preflight: a bug must read as "could not run", never as a pass with
    warnings and no node to drain."""
    import netbench.preflight

    def broken(opts: object) -> None:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.delenv("NETBENCH_DEBUG", raising=False)
    monkeypatch.setattr(netbench.preflight, "run_preflight", broken)
    (tmp_path / "hosts").write_text("h1\nh2\n")
    code, err = _one_line(capsys, ["preflight", "--hosts", str(tmp_path / "hosts")])
    assert code == 3 and "internal error: RecursionError" in err, err


# -- work bounded by the input: topology depth, hosts files, names in topologies -------------------


def _chain(switches: int) -> str:
    """A chain of switches, each under the next, listed from the top (each link found below a long
    chain already: the order that made the loop check quadratic)."""
    lines = [f"SwitchName=s{i} Switches=s{i - 1}" for i in range(switches - 1, 0, -1)]
    return "\n".join([*lines, "SwitchName=s0 Nodes=node[0001-0004]"]) + "\n"


def test_a_topology_as_deep_as_the_limit_is_taken() -> None:
    topo = parse_topology(_chain(MAX_TIERS), "chain")
    assert topo.hop_class("node0001", "node0002") == "leaf"
    assert len(topo.ancestors("s0")) == MAX_TIERS


@pytest.mark.parametrize("switches", [MAX_TIERS + 1, 10_000])
def test_a_topology_deeper_than_the_limit_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, switches: int
) -> None:
    (tmp_path / "chain.conf").write_text(_chain(switches))
    (tmp_path / "results.jsonl").write_text("")
    code, err = _one_line(capsys, ["report", str(tmp_path), "--topology", str(tmp_path / "chain.conf")])
    assert code == 2 and f"switches {switches} tiers deep; netbench takes at most {MAX_TIERS}" in err, err


def test_a_loop_in_a_long_chain_is_still_found() -> None:
    text = _chain(MAX_TIERS) + f"SwitchName=s0 Switches=s{MAX_TIERS - 1}\n"  # the top under the bottom
    topo = parse_topology(text, "loop")
    assert any("makes a loop" in w for w in topo.warnings), topo.warnings
    assert depth({"a": "b", "b": "c", "c": "a", "h": "a"}) == 4  # a loop counts its switches once


def test_a_run_json_topology_deeper_than_the_limit_is_ignored_and_named(tmp_path: Path) -> None:
    from netbench.reports.context import _topology_from_run

    uplinks = {"h1": "s0", **{f"s{i}": f"s{i + 1}" for i in range(5000)}}
    unreadable: list = []
    assert _topology_from_run({"topology": uplinks}, unreadable, tmp_path / "run.json") is None
    assert "more than 64 tiers deep" in unreadable[0].reason


def test_a_hosts_file_of_many_parts_of_one_node_is_read_in_one_pass(tmp_path: Path) -> None:
    """20,000 gpus= parts of one name: each line looked up once (it was each line against every
    earlier one: 43 s)."""
    (tmp_path / "hosts").write_text("".join(f"node1 gpus={i}\n" for i in range(20_000)))
    assert len(parse_hosts_file(tmp_path / "hosts")) == 20_000
    (tmp_path / "hosts").write_text("node1 gpus=0\nnode1 gpus=1\nnode1\n")
    with pytest.raises(UsageError, match=r"hosts:3: duplicate host node1 \(first at .*hosts:1\)"):
        parse_hosts_file(tmp_path / "hosts")
    (tmp_path / "hosts").write_text("node1\nnode1 gpus=1\n")
    with pytest.raises(UsageError, match=r"hosts:2: duplicate host node1 \(first at .*hosts:1\)"):
        parse_hosts_file(tmp_path / "hosts")


@pytest.mark.parametrize("text,says", [
    ("SwitchName=s1 Nodes=node[0009-0016];rm\n", "t:1: Nodes=: character(s) ';' not allowed in a host name"),
    ("SwitchName=s1;rm Nodes=node1\n", "t:1: SwitchName=: character(s) ';' not allowed"),
    ("SwitchName=s2 Switches=s$(reboot)\nSwitchName=s1 Nodes=n1\n", "t:1: Switches=: character(s)"),
    ('{"switches": {"leaf1": ["h1", "h2;rm"]}}', "t: switch 'leaf1': character(s) ';' not allowed"),
    ('{"switches": {"leaf 1": ["h1"]}}', "t: switch: character(s) ' ' not allowed"),
])
def test_names_in_a_topology_are_checked_as_in_hosts_files(text: str, says: str) -> None:
    with pytest.raises(TopologyError) as ex:
        parse_topology(text, "t")
    assert says in str(ex.value), ex.value


def test_hosts_the_topology_does_not_place_are_counted_and_named(tmp_path: Path) -> None:
    from netbench.sites.ssh.site import file_switches

    (tmp_path / "half.conf").write_text("SwitchName=s1 Nodes=node[0001-0008]\n")
    entries = [HostEntry(f"node{i:04d}") for i in range(1, 17)]
    said: list[str] = []
    switches = file_switches(entries, str(tmp_path / "half.conf"), said.append)
    assert said == [f"# topology warning: {tmp_path / 'half.conf'}: 8 of 16 host(s) are not in the topology "
                    "(node0009, node0010, node0011, node0012, node0013 ...); their pairs are judged as hop "
                    "class unknown"]
    assert len(switches.uplinks) == 8
    said.clear()
    file_switches(entries[:8], str(tmp_path / "half.conf"), said.append)
    assert said == []
