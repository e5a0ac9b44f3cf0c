"""Atomic file writes: a reader sees the old file or the whole new one, never half of it.

Every command that writes a file (a policy, a trace, an export, a report) goes through here: the
content is written to a temporary file in the same folder and renamed over the target. Only a
regular file is ever replaced: a folder, a device such as ``/dev/null``, a FIFO, a socket or a
symbolic link at the target is refused (``InputError``, exit 2), since a rename would swap it for a
plain file. The new file gets the mode the caller names (a private key: 0600), else the mode the
old one had, or the umask's for a new one (not ``mkstemp``'s 0600).
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gpufleet.errors import InputError

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
)


def _mode_for(path: Path) -> int:
    """The mode the written file gets; raises when ``path`` is something a rename must not replace."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask
    if stat.S_ISREG(info.st_mode):
        return stat.S_IMODE(info.st_mode)
    kind = next((text for test, text in _KINDS if test(info.st_mode)), "not a regular file")
    raise InputError.one(
        f"exists and is {kind}: gpufleet replaces only a regular file there, never {kind}; choose another path",
        file=str(path),
    )


@contextmanager
def atomic_path(path: Path, suffix: str = "", *, mode: int | None = None) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it replaces ``path``, on failure it is removed.

    The temporary file is mkstemp's 0600 while it is written, whatever ``mode`` it ends with."""
    kept = _mode_for(path)
    mode = kept if mode is None else mode
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        _mode_for(path)  # nothing else appeared there meanwhile
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(path: Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
