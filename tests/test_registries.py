"""The importer and exporter registries: every entry has a unique name, a help text with an example,
and is reachable from the CLI; an entry registered in a test appears in the CLI without touching the
command files (the machinery reads the registry, it lists nothing itself)."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from netbench.reports.export import _ALL as ALL_EXPORTERS
from netbench.reports.export import EXPORTERS
from netbench.reports.export.base import Exporter, ExportFile, RunData
from synthetic import make_fleet, write_run_dir

from netbench.cli import cli
from netbench.importers import _ALL as ALL_IMPORTERS
from netbench.importers import IMPORTERS
from netbench.importers.base import Imported, Importer


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small measured run, analysed (findings.json) so every exporter has what it reads."""
    path = write_run_dir(make_fleet(4, 2, noise=0.02, seed=7), tmp_path_factory.mktemp("reg") / "run")
    res = CliRunner().invoke(cli, ["report", str(path), "--no-html"])
    assert res.exit_code in (0, 1, 2) and (path / "findings.json").is_file(), res.output
    return path


def test_importer_names_are_unique_and_each_has_help_and_examples() -> None:
    assert len({i.name for i in ALL_IMPORTERS}) == len(ALL_IMPORTERS) == len(IMPORTERS)
    for imp in IMPORTERS.values():
        assert imp.reads and imp.summary and imp.help, imp.name
        assert imp.examples and all(e.startswith(f"netbench import {imp.name} ") for e in imp.examples)


def test_exporter_names_are_unique_and_each_has_files_help_and_an_example() -> None:
    assert len({e.name for e in ALL_EXPORTERS}) == len(ALL_EXPORTERS) == len(EXPORTERS)
    default = next(iter(EXPORTERS))
    for exp in EXPORTERS.values():
        assert exp.files and exp.help, exp.name
        assert exp.example.startswith("netbench export ")
        assert f"--format {exp.name}" in exp.example or exp.name == default, exp.example


def test_import_help_lists_every_importer_and_each_answers_help() -> None:
    res = CliRunner().invoke(cli, ["import", "--help"])
    assert res.exit_code == 0, res.output
    for imp in IMPORTERS.values():
        assert imp.name in res.output and imp.summary.split(":")[0][:30] in res.output
        sub = CliRunner().invoke(cli, ["import", imp.name, "--help"])
        assert sub.exit_code == 0 and "Example" in sub.output, sub.output
        assert all(e in sub.output for e in imp.examples)
        assert f"{imp.paths.upper()}..." in sub.output
        assert "--out" in sub.output and "--no-report" in sub.output


def test_export_help_lists_every_exporter_and_its_files() -> None:
    res = CliRunner().invoke(cli, ["export", "--help"])
    assert res.exit_code == 0, res.output
    for exp in EXPORTERS.values():
        assert exp.name in res.output and exp.example in res.output
        assert exp.files.split()[0] in res.output


def test_an_importer_registered_in_a_test_is_a_sub_command(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    got = {}

    def load(paths: list[str], out: str | None, flavour: str | None = None) -> Imported:
        got.update(paths=paths, out=out, flavour=flavour)
        return Imported(tmp_path, ("fake: 2 file(s) read \x1b[31m",), ("fake.log: line 3 cut short",))

    fake = Importer(name="fake-tool", reads="fake tool logs", summary="Import a fake tool's logs.",
                    help="A format made up for a test.", examples=("netbench import fake-tool a.log",),
                    load=load, options=(click.option("--flavour"),))
    monkeypatch.setitem(IMPORTERS, fake.name, fake)
    res = CliRunner().invoke(cli, ["import", "--help"])
    assert "fake-tool" in res.output and "Import a fake tool's logs." in res.output
    assert "netbench import fake-tool a.log" in res.output
    res = CliRunner().invoke(cli, ["import", "fake-tool", "a.log", "b.log", "--out", str(tmp_path / "o"),
                                   "--flavour", "sweet", "--no-report"])
    assert res.exit_code == 0, res.output
    assert got == {"paths": ["a.log", "b.log"], "out": str(tmp_path / "o"), "flavour": "sweet"}
    # said on stdout through terminal_safe; the warning on stderr with the one prefix
    assert "fake: 2 file(s) read \\x1b[31m" in res.stdout and "\x1b" not in res.output
    assert "netbench: warning: fake.log: line 3 cut short" in res.stderr


def test_an_exporter_registered_in_a_test_is_a_format(run: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    def render(data: RunData) -> list[ExportFile]:
        return [ExportFile("rows.txt", f"{len(data.rows)} rows of {data.meta.get('run_id')}\n", "counted")]

    fake = Exporter(name="row-count", files="rows.txt", help="How many rows a run has.",
                    example="netbench export RUN --format row-count --out counts/", render=render)
    monkeypatch.setitem(EXPORTERS, fake.name, fake)
    res = CliRunner().invoke(cli, ["export", "--help"])
    assert "row-count" in res.output and "How many rows a run has." in res.output
    res = CliRunner().invoke(cli, ["export", str(run), "--format", "row-count", "--out", str(tmp_path / "c")])
    assert res.exit_code == 0, res.output
    rows = (run / "results.jsonl").read_text().count("\n")
    assert (tmp_path / "c" / "rows.txt").read_text().startswith(f"{rows} rows of ")
    assert res.output == f"{tmp_path / 'c' / 'rows.txt'}: counted\n"


@pytest.mark.parametrize("fmt", list(EXPORTERS))
def test_every_exporter_writes_its_files(run: Path, tmp_path: Path, fmt: str) -> None:
    res = CliRunner().invoke(cli, ["export", str(run), "--format", fmt, "--out", str(tmp_path / "x")])
    assert res.exit_code == 0, res.output
    written = sorted(p.name for p in (tmp_path / "x").iterdir())
    assert written and len(res.output.splitlines()) == len(written)  # a line per file, nothing left over
    if fmt == "json":
        assert json.loads((tmp_path / "x" / "report.json").read_text())["schema"] == "netbench.report/1"


def test_an_exporter_of_findings_wants_an_analysed_run(tmp_path: Path) -> None:
    bare = write_run_dir(make_fleet(4, 1, seed=3), tmp_path / "bare")
    res = CliRunner().invoke(cli, ["export", str(bare), "--format", "junit", "--out", str(tmp_path / "j")])
    assert res.exit_code == 2 and "no findings.json" in res.stderr and "netbench report" in res.stderr
    assert not (tmp_path / "j").exists() or not list((tmp_path / "j").iterdir())
