"""``netbench export`` writes every exporter's files through one writer (``common.files.write_files``):
a symbolic link planted in --out, pointing at a file or at nothing, is never written through (issue
44): the command refuses in one line, exit 2, and nothing outside --out is written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from fixtures_path import fixture
from netbench.reports.export import EXPORTERS
from synthetic import make_fleet, write_run_dir

from netbench.cli import cli
from netbench.common.errors import UsageError
from netbench.common.files import write_files


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = write_run_dir(make_fleet(4, 2, noise=0.02, seed=11), tmp_path_factory.mktemp("wr") / "run")
    CliRunner().invoke(cli, ["report", str(path), "--no-html"])
    assert (path / "findings.json").is_file()
    return path


def tree(folder: Path) -> dict[str, str]:
    """Every entry under ``folder``: a file's text, a link's target."""
    out = {}
    for p in sorted(folder.rglob("*")):
        out[str(p.relative_to(folder))] = f"-> {os.readlink(p)}" if p.is_symlink() else (
            p.read_text() if p.is_file() else "<dir>")
    return out


@pytest.mark.parametrize("dangling", [False, True], ids=["to-a-file", "dangling"])
@pytest.mark.parametrize("fmt", list(EXPORTERS))
def test_a_link_planted_in_out_is_refused_for_every_format(run: Path, tmp_path: Path, fmt: str,
                                                           dangling: bool) -> None:
    clean = tmp_path / "clean"
    assert CliRunner().invoke(cli, ["export", str(run), "--format", fmt, "--out", str(clean)]).exit_code == 0
    names = sorted(p.name for p in clean.iterdir())
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("keep me\n")
    out = tmp_path / "out"
    out.mkdir()
    target = outside / ("nothing-here" if dangling else "precious")
    (out / names[-1]).symlink_to(target)
    before = tree(tmp_path / "outside"), tree(out)
    res = CliRunner().invoke(cli, ["export", str(run), "--format", fmt, "--out", str(out)])
    assert res.exit_code == 2, res.output
    assert res.stdout == "" and len(res.stderr.splitlines()) == 1, res.output
    assert f"{names[-1]} is a symbolic link (to {target})" in res.stderr and "nothing written" in res.stderr
    assert (tree(tmp_path / "outside"), tree(out)) == before  # not through the link, nor beside it


def test_the_writer_checks_every_name_before_writing_any(tmp_path: Path) -> None:
    (tmp_path / "b.txt").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UsageError, match=r"b\.txt is a symbolic link"):
        write_files(tmp_path, {"a.txt": "A\n", "b.txt": "B\n"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.txt"] and not (tmp_path / "elsewhere").exists()


def test_the_writer_replaces_its_own_files_whole_and_leaves_no_temporary(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("old\n")
    assert write_files(tmp_path / "new", {"a.txt": "A\n"}) == [tmp_path / "new" / "a.txt"]
    assert write_files(tmp_path, {"a.txt": "new\n"}) == [tmp_path / "a.txt"]
    assert (tmp_path / "a.txt").read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "new"]


def test_a_directory_or_fifo_in_place_of_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a.txt").mkdir()
    with pytest.raises(UsageError, match=r"a\.txt is a directory"):
        write_files(tmp_path, {"a.txt": "A\n"})
    os.mkfifo(tmp_path / "f.txt")
    with pytest.raises(UsageError, match=r"f\.txt is a FIFO"):
        write_files(tmp_path, {"f.txt": "F\n"})


def test_out_that_is_a_dangling_link_is_one_line(run: Path, tmp_path: Path) -> None:
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    res = CliRunner().invoke(cli, ["export", str(run), "--format", "csv",
                                   "--out", str(tmp_path / "dangling")])
    assert res.exit_code == 2 and len(res.stderr.splitlines()) == 1, res.output
    assert not (tmp_path / "nowhere").exists()


def test_a_link_planted_at_the_run_files_temporary_name_is_not_followed(tmp_path: Path) -> None:
    """report.html, findings.json, run.json go through ``rundir.atomic_write``: its temporary name is
    predictable (the pid), so a link planted there must fail the open, not carry the text elsewhere."""
    from netbench.common.rundir import atomic_write

    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    run = tmp_path / "run"
    run.mkdir()
    (run / f".report.html.tmp-{os.getpid()}").symlink_to(victim)
    atomic_write(run / "report.html", "new")
    assert victim.read_text() == "keep"
    assert (run / "report.html").read_text() == "new" and not (run / "report.html").is_symlink()
    assert sorted(p.name for p in run.iterdir()) == ["report.html"]


@pytest.mark.parametrize("name", ["results.jsonl", "run.json"])
def test_an_out_holding_a_dangling_link_is_not_a_free_run_directory(tmp_path: Path, name: str) -> None:
    """``sweep``/``import`` --out with only a dangling link of a run file in it: refused before anything
    is written (the rows would have gone through the link, outside --out)."""
    out, elsewhere = tmp_path / "d", tmp_path / "elsewhere" / "new.txt"
    out.mkdir()
    elsewhere.parent.mkdir()
    (out / name).symlink_to(elsewhere)
    log = fixture("nccl-tests-h200-1gpu") / "all_reduce.txt"  # a real log: the refusal is the link's
    r = CliRunner().invoke(cli, ["import", "nccl-tests", str(log), "--out", str(out)])
    assert r.exit_code == 2 and "symbolic link" in r.output, r.output
    assert not elsewhere.exists() and sorted(p.name for p in out.iterdir()) == [name]
