"""The OS saying no (issue 44): a path too long, a path through a file, ``$HOME`` or
``$NETBENCH_BASELINES`` a file, a read-only run directory, a full disk, a full standard output, a
baseline that is a symbolic link. Each is ONE ``netbench: error:`` line naming the path, with the
status of docs/exit-status.md, never ``internal error``; and two simultaneous ``baseline save`` of
one new name save once. Every case on the real command line, against a real 2-rank local sweep."""

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
from fixtures_path import fixture

LONG = "a" * 300  # one path component past every file system's 255 bytes
NCCL_LOG = fixture("nccl-tests-public") / "lessizzmore-create-a3mega-ztan-fork__ztan-NCCL-test-result.txt"
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="a small or read-only file system here is a mount")


def netbench(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
             stdout: object = subprocess.PIPE) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("NETBENCH_BASELINES", "XDG_DATA_HOME")}
    env = {**base, "CUDA_VISIBLE_DEVICES": "", **(env or {})}
    return subprocess.run([sys.executable, "-m", "netbench", *args], stdout=stdout, stderr=subprocess.PIPE,
                          text=True, timeout=240, cwd=cwd, env=env)


def one_error(res: subprocess.CompletedProcess, code: int, *says: str) -> None:
    """Exit ``code`` and one ``netbench: error:`` line on stderr holding each of ``says``."""
    assert res.returncode == code, (res.returncode, res.stderr)
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("netbench: error: "), res.stderr
    assert "internal error" not in res.stderr and "Traceback" not in res.stderr
    for s in says:
        assert s in lines[0], lines[0]


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A healthy run: a quick 2-rank local sweep (gloo), reported."""
    out = tmp_path_factory.mktemp("good") / "run"
    res = netbench("sweep", "-p", "2", "-k", "all_reduce", "-b", "1K", "-e", "4K", "-n", "1", "-w", "0",
                   "--out", str(out))
    assert res.returncode == 0, res.stdout + res.stderr
    return out


@contextmanager
def mounted(where: Path, *options: str) -> Iterator[Path]:
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", *options, "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


# -- a path no file can have ---------------------------------------------------------------------------


@pytest.mark.parametrize("args", [
    ["report", LONG],
    ["report", "{good}", "--baseline", LONG],
    ["compare", LONG, "--baseline", "{good}"],
    ["compare", "{good}", "--baseline", LONG],
    ["export", LONG, "--out", "x"],
    ["import", "nccl-tests", str(NCCL_LOG), "--out", LONG],
], ids=["report", "report-baseline", "compare", "compare-baseline", "export", "import-out"])
def test_a_path_component_too_long_is_one_line_exit_2(good: Path, tmp_path: Path, args: list[str]) -> None:
    res = netbench(*[a.replace("{good}", str(good)) for a in args], cwd=tmp_path)
    one_error(res, 2, "File name too long", LONG)
    assert not (tmp_path / "x").exists()


def test_home_that_is_a_file_is_named(good: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.write_text("not a folder\n")
    res = netbench("baseline", "save", str(good), "--name", "nightly", env={"HOME": str(home)})
    one_error(res, 2, f"the baseline store {home}/.local/share/netbench/baselines is not a directory")
    assert home.read_text() == "not a folder\n"
    listed = netbench("baseline", "list", env={"HOME": str(home)})  # not "no baselines": a setting to mend
    one_error(listed, 2, f"the baseline store {home}/.local/share/netbench/baselines is not a directory")


def test_netbench_baselines_that_is_a_file_is_named(good: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.write_text("x")
    res = netbench("baseline", "save", str(good), "--name", "nightly", env={"NETBENCH_BASELINES": str(store)})
    one_error(res, 2, f"the baseline store {store} is not a directory", "NETBENCH_BASELINES")
    listed = netbench("baseline", "list", env={"NETBENCH_BASELINES": str(store)})
    one_error(listed, 2, f"the baseline store {store} is not a directory", "NETBENCH_BASELINES")
    long = netbench("baseline", "list", env={"NETBENCH_BASELINES": str(tmp_path / LONG)})
    one_error(long, 2, "File name too long")


# -- the standard output and the disks -------------------------------------------------------------------


def test_stdout_on_a_full_device_is_one_line_exit_3(good: Path) -> None:
    with open("/dev/full", "w") as full:
        res = netbench("report", str(good), "--no-html", stdout=full)
    one_error(res, 3, "cannot write the standard output (/dev/full): No space left on device")
    assert json.loads((good / "findings.json").read_text())["findings"] is not None  # the report is written


@root_only
def test_a_disk_that_fills_under_import_is_exit_3_and_keeps_the_rows(tmp_path: Path) -> None:
    """1 MiB holds the imported rows and findings.json, not report.html: the report stage's full disk
    is 3 and one line (it was click's Abort: "interrupted by SIGINT", 130, after a blank line)."""
    with mounted(tmp_path / "small", "-o", "size=1m") as small:
        res = netbench("import", "nccl-tests", str(NCCL_LOG), "--out", str(small / "imp"))
        assert res.returncode == 3, res.stderr
        full = f"cannot write {small}/imp/report.html: No space left on device"
        assert res.stderr == f"netbench: error: stopped: {full}\n"
        assert len((small / "imp" / "results.jsonl").read_text().splitlines()) == 62


@root_only
def test_a_read_only_run_directory_under_report_is_exit_3(good: Path, tmp_path: Path) -> None:
    with mounted(tmp_path / "ro") as ro:
        shutil.copytree(good, ro / "run")
        before = {f: f.read_bytes() for f in (ro / "run").rglob("*") if f.is_file()}
        subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True)
        for extra in ([], ["--no-html"]):
            res = netbench("report", str(ro / "run"), *extra)
            one_error(res, 3, f"cannot write the report into {ro / 'run'}: Read-only file system")
        assert {f: f.read_bytes() for f in (ro / "run").rglob("*") if f.is_file()} == before


# -- the baseline store -------------------------------------------------------------------------------------


def test_a_baseline_that_is_a_symbolic_link_is_never_deleted_through(good: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    victim = tmp_path / "victim"
    shutil.copytree(good, victim)
    (store / "evil").symlink_to(victim)
    res = netbench("baseline", "delete", "evil", env={"NETBENCH_BASELINES": str(store)})
    one_error(res, 2, f"baseline 'evil' in {store} is a symbolic link (to {victim})")
    assert (store / "evil").is_symlink() and sorted(p.name for p in victim.iterdir()) == sorted(
        p.name for p in good.iterdir())


def test_two_simultaneous_saves_of_one_new_name_save_once(good: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    env = {**{k: v for k, v in os.environ.items() if k != "XDG_DATA_HOME"}, "NETBENCH_BASELINES": str(store),
           "CUDA_VISIBLE_DEVICES": ""}
    argv = [sys.executable, "-m", "netbench", "baseline", "save", str(good), "--name", "nightly"]
    procs = [subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    done = [(p.wait(timeout=120), p.stdout.read(), p.stderr.read()) for p in procs]  # type: ignore[union-attr]
    assert sorted(code for code, _, _ in done) == [0, 2], done
    [(_, _, err)] = [d for d in done if d[0] == 2]
    assert err == "netbench: error: baseline 'nightly' exists; pass --overwrite to replace it\n"
    saved = sorted(p.name for p in (store / "nightly").iterdir())
    assert saved == ["env.json", "results.parquet", "run.json"]
    assert not [p.name for p in store.iterdir() if ".tmp-" in p.name]


# -- compare on a run that ended early --------------------------------------------------------------


@pytest.mark.parametrize("status", ["interrupted", "failed", "running"])
def test_compare_on_a_killed_run_says_so_and_is_not_0(good: Path, tmp_path: Path, status: str) -> None:
    assert netbench("compare", str(good), "--baseline", str(good)).returncode == 0
    killed = tmp_path / "killed"
    shutil.copytree(good, killed)
    run = json.loads((killed / "run.json").read_text())
    run.update(status=status, error="interrupted by SIGTERM" if status == "interrupted" else None)
    (killed / "run.json").write_text(json.dumps(run))
    for args in (["compare", str(killed), "--baseline", str(good)], ["compare", str(good), "--baseline",
                                                                     str(killed)]):
        res = netbench(*args)
        assert res.returncode == 1, res.stderr
        [line] = res.stderr.splitlines()
        assert line.startswith("netbench: warning: ") and f"{killed}: run.json says {status}" in line
        assert "ended early or never recorded its end" in line and res.stdout  # the comparison is still shown


@root_only
def test_a_baseline_store_on_a_full_disk_is_exit_3_and_leaves_nothing(good: Path, tmp_path: Path) -> None:
    with mounted(tmp_path / "small", "-o", "size=8k") as small:
        res = netbench("baseline", "save", str(good), "--name", "nightly",
                       env={"NETBENCH_BASELINES": str(small)})
        one_error(res, 3, f"{small}/nightly: cannot save baseline 'nightly': No space left on device")
        assert list(small.iterdir()) == []
