"""Reading a file the user named on the command line (hosts file, policy, topology, logs), and writing
files into a folder the user named (``write_files``: every exporter's files).

One place for every way such a file can be unusable, each one line (and exit 2 at the CLI): missing,
a directory, a FIFO, a device or a socket (refused at once: reading one would wait for ever or never
end), unreadable, larger than any real one of its kind, not UTF-8. An anonymous pipe is read, since
``--hosts <(scontrol show hostnames)`` is one: its writer is the shell's process, already running;
a named FIFO on disk may have no writer at all.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO

from netbench.common.errors import UsageError

MAX_USER_FILE_BYTES = 64 << 20  # far above any real hosts file, policy or topology


def open_regular(
    path: str | Path, what: str = "file", error: type[Exception] = UsageError, pipes: bool = False
) -> BinaryIO:
    """``path`` open for reading in binary, if it is a regular file (or, with ``pipes``, an anonymous
    pipe: process substitution); ``error`` with one line naming the file otherwise. The open is
    O_NONBLOCK, so a FIFO without a writer returns at once instead of waiting for one, and nothing
    is read from a device (``/dev/zero``, a terminal) before it is refused."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except FileNotFoundError:
        raise error(f"{p}: {what} not found") from None
    except OSError as exc:
        raise error(f"{p}: cannot read the {what}: {exc.strerror}") from None
    mode = os.fstat(fd).st_mode
    if not (stat.S_ISREG(mode) or (pipes and stat.S_ISFIFO(mode) and _anonymous_pipe(fd))):
        os.close(fd)
        raise error(f"{p} is not a regular file ({file_kind(mode)}); refusing to read it")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def _anonymous_pipe(fd: int) -> bool:
    """Whether the open FIFO ``fd`` is a pipe with no name (``<(...)``, a shell's ``|``): Linux names
    those ``pipe:[inode]``; a FIFO made by mkfifo has its path."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:")
    except OSError:
        return False


def file_kind(mode: int) -> str:
    """What a file that is not a regular one is, in words."""
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a directory"),
    ):
        if test(mode):
            return name
    return "not a plain file"


def read_user_text(
    path: str | Path, what: str, error: type[Exception] = UsageError, max_bytes: int = MAX_USER_FILE_BYTES
) -> str:
    """The UTF-8 text of ``path``, or ``error`` with one line naming the file and ``what`` it is."""
    p = Path(path)
    with open_regular(p, what, error, pipes=True) as fh:
        try:
            raw = fh.read(max_bytes + 1)
        except OSError as exc:
            raise error(f"{p}: cannot read the {what}: {exc.strerror}") from None
    if len(raw) > max_bytes:
        raise error(f"{p}: larger than {max_bytes >> 20} MiB; not a {what}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{p}: not UTF-8 text (byte {exc.start})") from None


def parse_toml(text: str, where: str, error: type[Exception] = UsageError) -> dict[str, Any]:
    """TOML text as a table; ``error`` naming ``where`` when it is not TOML, or nested so deeply
    (``x = [[[[...`` 100,000 times) that the parser runs out of stack."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{where}: not valid TOML: {exc}") from None
    except RecursionError:
        raise error(f"{where}: not valid TOML: nested too deeply") from None


def write_files(folder: str | Path, texts: dict[str, str | Iterable[str]], option: str = "--out"
                ) -> list[Path]:
    """Write each ``name -> text`` (its pieces, made as written) into ``folder`` (made if missing; the
    user's ``option``), each atomically (a reader never sees half a file), and return the paths written.

    Never through a link: a name that is a symbolic link in the folder, dangling or not, was put
    there by someone else; writing through it would write outside the folder, and replacing it would
    silently undo what it was made for. So any such name (or a directory, a FIFO ...) is refused
    before anything is written: ``UsageError``, one line, exit 2. Each file is first written to a
    fresh temporary name opened with O_EXCL | O_NOFOLLOW (a link planted at that name fails the open,
    never redirects it), then renamed over its name; a link planted in between is replaced by the
    rename, not followed. The folder is held open (``dir_fd``) so every step acts on the one folder.
    A folder the OS will not let it write (read-only, not its user's) is ``UsageError`` naming it; a
    full one ``interrupts.DiskFull`` (exit 3, as a full run directory), the files written so far kept."""
    from netbench.common.interrupts import disk_full

    where = Path(folder)
    try:
        where.mkdir(parents=True, exist_ok=True)
        dfd = os.open(where, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise disk_full(exc, where) or UsageError(f"{option} {where}: cannot write into it: "
                                                  f"{exc.strerror or exc}") from None
    done = 0
    try:
        for name in texts:
            _check_target(dfd, where, name, option)
    except BaseException:
        os.close(dfd)
        raise
    try:
        for name, text in texts.items():
            _write_at(dfd, where, name, text)
            done += 1
    except OSError as exc:  # full (exit 3, as a full run directory), read-only, not ours: one line
        name = list(texts)[done]
        before = f" ({done} of {len(texts)} files written before it)" if done else " (nothing written)"
        raise disk_full(exc, where / name) or UsageError(
            f"{option} {where}: cannot write {name}: {exc.strerror or exc}{before}") from None
    finally:
        os.close(dfd)
    return [where / name for name in texts]


def _check_target(dfd: int, where: Path, name: str, option: str) -> None:
    from netbench.common.text import terminal_safe

    if not name or name in (".", "..") or "/" in name:  # the exporters' own names: a bug, not input
        raise ValueError(f"not a file name: {name!r}")
    try:
        mode = os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode):
        target = terminal_safe(os.readlink(name, dir_fd=dfd), keep_newlines=False)
        raise UsageError(f"{option} {where}: {name} is a symbolic link (to {target}); refusing to write "
                         "through it or replace it, nothing written: remove it or give another folder")
    if not stat.S_ISREG(mode):
        raise UsageError(f"{option} {where}: {name} is {file_kind(mode)}; refusing to replace it, nothing "
                         "written")


def _write_at(dfd: int, where: Path, name: str, text: str | Iterable[str]) -> None:
    tmp = f".{name}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dfd)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.writelines([text] if isinstance(text, str) else text)
            fh.flush()
            os.fsync(fh.fileno())  # the data is on disk before the name points at it
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:  # the old file stays whole, no temporary one is left behind
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dfd)
        raise

