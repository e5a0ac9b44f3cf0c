"""Atomic file writes: a reader sees the old file or the whole new one, never half of it.

Every command that writes a file (a policy, a trace, an export, a report) goes through here: the
content is written to a temporary file in the same folder and renamed over the target.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(path: Path, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it replaces ``path``, on failure it is removed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(path: Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
