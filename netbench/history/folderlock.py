"""The folder lock of netbench's stores (the fleet history's, and the baselines' above it): one
writer at a time, with no lock file left in the folder."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from netbench.common.errors import NetbenchError, UsageError


@contextlib.contextmanager
def locked_folder(root: Path, what: str, setting: str, follow: bool = False) -> Iterator[None]:
    """``root`` made and held exclusively (``flock`` on the folder itself: no lock file is left in
    it), for a store's writer: of two that add at once, one waits for the other. A link at ``root``
    is not followed unless ``follow`` (a store the user may have linked elsewhere). A root that
    cannot be made is one line naming ``what`` and ``setting`` (the option or variable that moves
    it): a file in the way is the user's (2), the OS's refusal 1."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
        fd = os.open(root, flags)
    except (FileExistsError, NotADirectoryError):
        raise UsageError(f"the {what} {root} is not a directory (or under a file): set {setting} to a "
                         "folder") from None
    except OSError as exc:
        raise NetbenchError(f"the {what} {root}: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
