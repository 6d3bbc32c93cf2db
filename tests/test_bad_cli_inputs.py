"""Bad values on the command line are the user's input: one error line and exit 2, through the real
entry point (``netbench.cli.main``), never "internal error" with exit 1."""

from __future__ import annotations

import pytest

from netbench.cli import main


def run_main(capsys, *argv: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(argv))
    return exc.value.code, capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, says",
    [
        (["sweep", "-e", "9" * 400], f"bad size {'9' * 24!r}... (400 characters): larger than 1024T"),
        (["sweep", "-b", "2000T"], "larger than 1024T"),
        (["sweep", "-p", "9" * 20], f"'--procs' / '-p': {'9' * 20} is not in the range"),
        (["sweep", "-n", "99999999999999999999"], "is not in the range 1<=x<=1000000000"),
        (["sweep", "-f", "99999999999999999999"], "is not in the range"),
    ],
)
def test_numbers_too_large_are_one_line_exit_2(capsys, tmp_path, argv, says):
    code, err = run_main(capsys, *argv, "--out", str(tmp_path / "r"))
    assert code == 2 and says in err and err.count("\n") == 1, err


def test_hosts_line_with_a_superscript_slot_count(capsys, tmp_path):
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("host:\u00b2\n", encoding="utf-8")
    code, err = run_main(capsys, "inventory", "--hosts", str(hosts))
    why = "bad slot count '\u00b2' in 'host:\u00b2' (want host:N, N >= 1)"
    assert code == 2 and err == f"netbench: error: {hosts}:1: {why}\n"


def test_preflight_output_in_a_missing_directory_is_refused_before_measuring(capsys, tmp_path):
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("h1\nh2\n")
    code, err = run_main(capsys, "preflight", "--hosts", str(hosts), "--json", "/nonexistent/x.json")
    why = "--json /nonexistent/x.json: directory /nonexistent does not exist"
    assert code == 3 and err == f"netbench: error: {why}\n"  # preflight's bad input: 3 ("could not run")
