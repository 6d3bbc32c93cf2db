"""``netbench baseline``: save, list and delete named baselines for ``netbench compare``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from netbench.run.baselines import BaselineStore


@click.group(
    short_help="Save, list or delete named baselines.",
    epilog="""\b
Examples:
  netbench baseline save netbench-runs/20261129T020000Z-1a2b3c --name nightly
  netbench baseline save latest --name nightly      # the newest run under netbench-runs/
  netbench baseline list
  netbench compare netbench-runs/<id> --baseline nightly
""",
)
def command() -> None:
    """Named copies of runs, kept in $NETBENCH_BASELINES or ~/.local/share/netbench/baselines."""


@command.command("save", short_help="Save a run directory as a named baseline.")
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--name", required=True, help="Baseline name (letters, digits, . _ -).")
@click.option(
    "--overwrite", is_flag=True, help="Replace an existing baseline of that name (says what it replaces)."
)
@click.option(
    "--force",
    is_flag=True,
    help="Save a run that is empty, ended early, or not wholly readable (refused otherwise).",
)
def save(run_dir: str, name: str, overwrite: bool, force: bool) -> None:
    """Copy RUN_DIR's data files (``latest``: the newest run under netbench-runs/) as NAME."""
    from netbench.common.rundir import resolve_run
    from netbench.run.baselines import BaselineStore

    store = BaselineStore()
    with _locked(store, name):  # two saves of one name: the second waits, then finds the first's
        saved = store.save(resolve_run(run_dir), name, overwrite=overwrite, force=force)
    for problem in saved.forced:
        click.echo(f"netbench: warning: saved with --force: {problem}", err=True)
    old, new = saved.replaced, saved.info
    if old is not None:
        click.echo(f"netbench: replaced baseline {name!r}: {old.rows} rows of run {old.run_id or '-'} -> "
                   f"{new.rows} rows of run {new.run_id or '-'}", err=True)
    click.echo(f"saved baseline {name!r} at {saved.path} ({new.rows} rows of run {new.run_id or '-'})")


@command.command("list", short_help="List saved baselines.")
def list_() -> None:
    from netbench.run.baselines import BaselineStore

    store = BaselineStore()
    items = store.list()
    if not items:
        click.echo(f"no baselines in {store.root}")
    for b in items:
        unread = f"  ({b.left_out} unreadable lines)" if b.left_out else ""
        click.echo(f"{b.name:<24} {b.rows:>7} rows  {b.started or '-':<26} {b.run_id or '-'}{unread}")


@command.command("delete", short_help="Delete a saved baseline.")
@click.argument("name")
def delete(name: str) -> None:
    import os

    from netbench.common.errors import UsageError
    from netbench.common.text import terminal_safe
    from netbench.run.baselines import BaselineStore

    store = BaselineStore()
    with _locked(store, name):
        path = store.path(name)
        if path.is_symlink():  # netbench makes none: whatever it leads to is not a baseline to delete
            target = terminal_safe(os.readlink(path), keep_newlines=False)
            raise UsageError(f"baseline {name!r} in {store.root} is a symbolic link (to {target}), not a "
                             "baseline netbench saved; refusing to delete through it "
                             "(remove the link yourself)")
        store.delete(name)
    click.echo(f"deleted baseline {name!r}")


@contextmanager
def _locked(store: BaselineStore, name: str) -> Iterator[None]:
    """Hold the store's folder exclusively (``flock`` on the folder itself: no lock file is left in
    it) for a save or delete, so of two simultaneous saves of a new name one saves and the other is
    refused as for a name that exists (the store checks under the lock). The store's root is made
    first; one that cannot be (``$NETBENCH_BASELINES`` a file, ``$HOME`` on a read-only disk) is one
    line naming it."""
    from netbench.history.folderlock import locked_folder

    root = store.path(name).parent  # the name is checked first
    with locked_folder(root, "baseline store", "NETBENCH_BASELINES", follow=True):
        yield
