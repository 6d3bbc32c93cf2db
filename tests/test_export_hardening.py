"""``netbench export`` on what is not a healthy run, and into what is not a writable folder (issue 44):
a damaged, mixed (rows of two runs) or killed run is exported with a warning line naming what is
wrong; long host names never collide into one file name (they overwrote 5 of 6 pairs' files), nor
do any two files of one export; a read-only ``--out`` is one line, exit 2, a full one one line, exit 3.
The runs are a real 2-rank local sweep and, for the pairs of long host names, a synthetic fleet."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from netbench.reports.export.base import MAX_NAME, ExportFile, file_name, unique_names
from rowfiles import as_jsonl_layout
from synthetic import make_fleet, write_run_dir

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="a small or read-only file system here is a mount")
ENV = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}


def netbench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "netbench", *args], capture_output=True, text=True,
                          timeout=240, env=ENV)


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A healthy run: a quick 2-rank local sweep (gloo), reported."""
    out = tmp_path_factory.mktemp("good") / "run"
    res = netbench("sweep", "-p", "2", "-k", "all_reduce", "-b", "1K", "-e", "4K", "-n", "1", "-w", "0",
                   "--out", str(out))
    assert res.returncode == 0, res.stdout + res.stderr
    return out


def copy(good: Path, dest: Path) -> Path:
    shutil.copytree(good, dest)
    return dest


def warnings(res: subprocess.CompletedProcess) -> list[str]:
    lines = res.stderr.splitlines()
    assert all(line.startswith("netbench: warning: ") for line in lines), res.stderr
    return lines


def test_a_healthy_run_exports_without_a_warning(good: Path, tmp_path: Path) -> None:
    res = netbench("export", str(good), "--out", str(tmp_path / "x"))
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert len(list((tmp_path / "x").iterdir())) == 1


def test_a_killed_run_is_exported_with_a_warning(good: Path, tmp_path: Path) -> None:
    run = copy(good, tmp_path / "run")
    meta = json.loads((run / "run.json").read_text())
    meta.update(status="running")  # SIGKILL: it never recorded its end
    (run / "run.json").write_text(json.dumps(meta))
    res = netbench("export", str(run), "--out", str(tmp_path / "x"), "--format", "csv")
    assert res.returncode == 0 and (tmp_path / "x" / "results.csv").is_file()
    [line] = warnings(res)
    assert f"{run / 'run.json'}: the run is running" in line
    assert "ended early or never recorded its end" in line


def test_a_damaged_run_is_exported_with_a_warning_per_line_left_out(good: Path, tmp_path: Path) -> None:
    run = copy(good, tmp_path / "run")
    as_jsonl_layout(run)  # an older run's rows, damaged line by line
    with (run / "results.jsonl").open("ab") as fh:
        fh.write(b'{"run_id": "x", "collec\n\xff\xfe garbage\n')
    res = netbench("export", str(run), "--out", str(tmp_path / "x"))
    assert res.returncode == 0, res.stderr
    said = warnings(res)
    assert [line for line in said if f"{run / 'results.jsonl'}:7: " in line and "left out" in line]
    assert [line for line in said if f"{run / 'results.jsonl'}:8: not UTF-8" in line]


def test_a_mixed_run_is_exported_with_a_warning_naming_both_runs(good: Path, tmp_path: Path) -> None:
    run = copy(good, tmp_path / "run")
    lines = as_jsonl_layout(run).read_text().splitlines()
    other = [json.dumps({**json.loads(line), "run_id": "20261201T000000Z-other"}) for line in lines]
    (run / "results.jsonl").write_text("\n".join(lines + other) + "\n")
    res = netbench("export", str(run), "--out", str(tmp_path / "x"), "--format", "json")
    assert res.returncode == 0, res.stderr
    [line] = warnings(res)
    assert "rows of 2 run(s)" in line and "20261201T000000Z-other (6 rows)" in line and "(mixed_runs)" in line


def long_named(tmp: Path) -> Path:
    """A synthetic fleet of 4 hosts whose names share a 140-character prefix: 6 pairs, one ring."""
    run = write_run_dir(make_fleet(4, 2, gpus_per_node=2, noise=0.01, seed=3), tmp / "synth")
    long = "rack-a17-row-c-chassis-" * 6
    for f in run.iterdir():
        if f.is_file():
            f.write_text(f.read_text().replace("gpu00", long))
    return run


def test_long_host_names_give_one_file_per_group(tmp_path: Path) -> None:
    run = long_named(tmp_path)
    groups = {json.loads(line)["group"] for line in (run / "results.jsonl").read_text().splitlines()}
    assert len(groups) == 7  # 6 pairs and the world
    res = netbench("export", str(run), "--out", str(tmp_path / "x"))
    assert res.returncode == 0, res.stderr
    names = sorted(p.name for p in (tmp_path / "x").iterdir())
    assert len(names) == 7 and len(res.stdout.splitlines()) == 7, names
    assert all(len(n.encode()) <= MAX_NAME + len(".json") for n in names)
    configs = [json.loads((tmp_path / "x" / n).read_text())["config"] for n in names]
    hosts = {tuple(c["devices"][i]["hostname"] for i in (0, 2)) for c in configs if len(c["devices"]) == 4}
    assert len(hosts) == 6  # every pair's own file, none written over another


def test_names_made_alike_are_made_unique_never_written_over() -> None:
    """``a:b`` and ``a|b`` are one file name once made safe: the second gets ``-2``, never the first's."""
    same = file_name("pair:a|b", "all_reduce", "torch", suffix=".json")
    assert same == file_name("pair:a:b", "all_reduce", "torch", suffix=".json")
    two = "pair_a_b-all_reduce-torch-2.json"  # an earlier name taken already: the next free one
    files = unique_names([ExportFile(same, "1"), ExportFile(same, "2"), ExportFile(two, "3")])
    assert [f.name for f in files] == [same, "pair_a_b-all_reduce-torch-3.json", two]
    assert [f.text for f in files] == ["1", "2", "3"]
    cut = [file_name("x" * 200 + str(i), "all_reduce", suffix=".json") for i in range(6)]
    assert len(set(cut)) == 6 and all(len(n) == MAX_NAME + len(".json") for n in cut)


@contextmanager
def mounted(where: Path, *options: str) -> Iterator[Path]:
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", *options, "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@root_only
def test_a_read_only_out_is_one_line_exit_2(good: Path, tmp_path: Path) -> None:
    with mounted(tmp_path / "ro") as ro:
        subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True)
        for out, says in ((ro, "cannot write world-all_reduce-torch.json"),
                          (ro / "x", "cannot write into it")):
            res = netbench("export", str(good), "--out", str(out))
            assert res.returncode == 2 and res.stdout == "", res.stderr
            [line] = res.stderr.splitlines()
            assert line.startswith(f"netbench: error: --out {out}: {says}")
            assert "Read-only file system" in line


@root_only
def test_a_full_out_is_one_line_exit_3(tmp_path: Path) -> None:
    run = long_named(tmp_path)
    with mounted(tmp_path / "full", "-o", "size=4k") as full:
        res = netbench("export", str(run), "--out", str(full))
        assert res.returncode == 3, res.stderr
        [line] = res.stderr.splitlines()
        assert line.startswith(f"netbench: error: stopped: cannot write {full}/") and \
            line.endswith("No space left on device")
        assert not [p.name for p in full.iterdir() if ".tmp-" in p.name]  # no temporary file left behind
