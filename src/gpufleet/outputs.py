"""Output folders: written beside the target, renamed into place, and never over what gpufleet did not write.

Every command that writes a folder (``render``, ``evidence``, ``simulate``, ``demo``) goes through
``replace_folder``. The rule, decided once here:

- The target is replaced only when it is missing, an empty folder, or gpufleet's own earlier output:
  a folder holding the marker file ``.gpufleet-output`` (the command, the version, and every path
  that run wrote) and nothing the marker does not list. A file someone added to an earlier output
  makes the folder foreign again.
- A foreign folder is refused (exit 2, naming the first entries in the way) unless ``--force``; with
  ``--force`` it is not deleted but kept beside the target as ``NAME.before-gpufleet`` (or
  ``.before-gpufleet.2``, ...), so even a forced run destroys nothing gpufleet did not write.
- Refused even with ``--force``: anything that is not a real folder (a file, a device node, a
  FIFO, a socket, a symbolic link), a folder holding ``.git``, the current folder or one of its
  ancestors, the home folder, the filesystem root and a mount point.

Writing goes into a dot-prefixed sibling, ``.NAME.gpufleet-PID-XXXX``, renamed over the target at the
end, so a killed run leaves the old output (or none) and a hidden sibling, never half a folder.
The next run for the same target removes such siblings once the process that made them is gone.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from gpufleet import __version__
from gpufleet.errors import InputError

MARKER = ".gpufleet-output"
KEPT_SUFFIX = ".before-gpufleet"
OPTION = "--output"
_SHOWN = 5  # entries named when a folder is in the way
_WALK_LIMIT = 100_000  # a folder with more entries than this is never taken for an earlier output


class State(Enum):
    MISSING = "missing"
    EMPTY = "empty"
    OURS = "ours"
    FOREIGN = "foreign"


@dataclass(frozen=True)
class Target:
    """What is at an output path now, and what writing there will do to it."""

    path: Path  # absolute, the parent's symbolic links resolved, the last component as given
    state: State
    keep_as: Path | None = None  # where a forced run keeps a foreign folder


def _refuse(out: Path, message: str) -> InputError:
    return InputError.one(message, file=str(out), path=OPTION)


def location(out: Path) -> Path:
    """Where ``out`` is: absolute, the parent's links resolved, the last component kept as given."""
    raw = Path(os.path.abspath(out))
    if raw.name in ("", ".", ".."):
        return raw
    return raw.parent.resolve() / raw.name


def _kind(mode: int) -> str:
    kinds = (
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((text for test, text in kinds if test(mode)), "not a folder")


def _listing(names: list[str]) -> str:
    shown = ", ".join(sorted(names)[:_SHOWN])
    more = len(names) - _SHOWN
    return shown + (f" and {more} more" if more > 0 else "")


def _written(folder: Path) -> set[str] | None:
    """Every path under ``folder`` relative to it, or None when there are too many to be an output."""
    found: set[str] = set()
    for root, dirs, files in os.walk(folder):
        base = Path(root).relative_to(folder)
        for name in [*dirs, *files]:
            found.add((base / name).as_posix())
        if len(found) > _WALK_LIMIT:
            return None
    found.discard(MARKER)
    return found


def _marked(folder: Path) -> set[str] | None:
    """The paths the marker says an earlier run wrote, or None when there is no readable marker."""
    marker = folder / MARKER
    if marker.is_symlink() or not marker.is_file():
        return None
    try:
        data = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    entries = data.get("entries") if isinstance(data, dict) and data.get("tool") == "gpufleet" else None
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        return None
    return set(entries)


def _keep_as(path: Path) -> Path:
    candidate = path.with_name(path.name + KEPT_SUFFIX)
    n = 2
    while os.path.lexists(candidate):
        candidate = path.with_name(f"{path.name}{KEPT_SUFFIX}.{n}")
        n += 1
    return candidate


def _protected(path: Path) -> str | None:
    """Why ``path`` is never replaced, whatever is in it."""
    try:
        cwd = Path.cwd().resolve()
    except OSError:
        cwd = None
    if cwd is not None and (path == cwd or path in cwd.parents):
        return "is the current folder or holds it"
    if path == Path(path.anchor) or path.name in ("", ".", ".."):
        return "is the filesystem root"
    if path == Path.home().resolve():
        return "is the home folder"
    if os.path.ismount(path):
        return "is a mount point"
    return None


def check(out: Path, *, force: bool = False) -> Target:
    """What writing to ``out`` would replace; raises ``InputError`` (exit 2) when it must not."""
    path = location(out)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return Target(path, State.MISSING)
    except OSError as exc:
        raise _refuse(out, f"cannot be inspected: {exc.strerror}") from None
    if stat.S_ISLNK(info.st_mode):
        raise _refuse(
            out,
            f"is a symbolic link (to {os.readlink(path)}): gpufleet writes only a real folder and never "
            "replaces a link or what it points to; choose another -o/--output",
        )
    if not stat.S_ISDIR(info.st_mode):
        raise _refuse(
            out,
            f"exists and is not a folder ({_kind(info.st_mode)}): gpufleet writes a folder and never "
            "replaces anything else, not even with --force; choose another -o/--output",
        )
    reason = _protected(path)
    if reason is not None:
        raise _refuse(
            out, f"{reason}: it is never replaced, not even with --force; write to a new folder such as ./out"
        )
    try:
        names = os.listdir(path)
    except OSError as exc:
        raise _refuse(out, f"cannot be read: {exc.strerror}") from None
    if not names:
        return Target(path, State.EMPTY)
    if ".git" in names:
        raise _refuse(out, "holds a git checkout (.git): it is never replaced, not even with --force")
    marked = _marked(path)
    written = _written(path) if marked is not None else None  # walk only a folder that claims to be ours
    if marked is not None and written is not None and written <= marked:
        return Target(path, State.OURS)
    if not force:
        raise _refuse(out, _in_the_way(path, names, marked, written))
    return Target(path, State.FOREIGN, _keep_as(path))


def _in_the_way(path: Path, names: list[str], marked: set[str] | None, written: set[str] | None) -> str:
    if marked is None:
        what, extra = "a folder gpufleet did not write", names
    else:
        what = "an earlier gpufleet output with entries gpufleet did not write"
        extra = sorted(written - marked) if written is not None else names
    return (
        f"is {what} (it holds {_listing(extra)}); it is left as it is: choose another -o/--output, "
        f"or pass --force to put the new output there and keep the folder beside it as {path.name}{KEPT_SUFFIX}"
    )


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep(path: Path) -> list[Path]:
    """Remove the hidden siblings a killed run left for ``path``; only gpufleet's own, only of dead runs."""
    pattern = re.compile(rf"\.{re.escape(path.name)}\.gpufleet-(?:old-)?(\d+)-[A-Za-z0-9_]+")
    removed = []
    try:
        siblings = list(path.parent.iterdir())
    except OSError:
        return []
    for sibling in siblings:
        match = pattern.fullmatch(sibling.name)
        if match is None or sibling.is_symlink() or not sibling.is_dir() or _alive(int(match.group(1))):
            continue
        ours = (sibling / MARKER).is_file() or (sibling / "old" / MARKER).is_file() or not any(sibling.iterdir())
        if ours:
            shutil.rmtree(sibling, ignore_errors=True)
            removed.append(sibling)
    return removed


def mark(folder: Path, command: str) -> None:
    """Write the marker that makes ``folder`` recognisably gpufleet's output, listing all it holds."""
    entries = sorted(_written(folder) or set())
    document = {"tool": "gpufleet", "command": command, "version": __version__, "entries": entries}
    (folder / MARKER).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _swap(staging: Path, target: Target) -> None:
    path = target.path
    if target.state in (State.MISSING, State.EMPTY):
        os.rename(staging, path)  # rename(2) replaces an empty folder in one step
        return
    if target.state is State.FOREIGN:
        assert target.keep_as is not None
        os.rename(path, target.keep_as)
        os.rename(staging, path)
        return
    retired = Path(tempfile.mkdtemp(prefix=f".{path.name}.gpufleet-old-{os.getpid()}-", dir=path.parent))
    os.rename(path, retired / "old")
    os.rename(staging, path)
    shutil.rmtree(retired, ignore_errors=True)


@contextmanager
def replace_folder(out: Path, command: str, *, force: bool = False) -> Iterator[Path]:
    """Yield an empty staging folder; on success it becomes ``out``, on failure it is removed.

    ``out`` is checked before anything is written and again just before the rename, so a folder that
    appeared meanwhile is not replaced either.
    """
    target = check(out, force=force)
    target.path.parent.mkdir(parents=True, exist_ok=True)
    sweep(target.path)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.path.name}.gpufleet-{os.getpid()}-", dir=target.path.parent))
    try:
        staging.chmod(0o777 & ~_umask())  # mkdtemp's 0700 would otherwise become the output's mode
        mark(staging, command)
        yield staging
        mark(staging, command)
        target = check(out, force=force)
        try:
            _swap(staging, target)
        except OSError as exc:
            raise _refuse(out, f"cannot be put in place: {exc.strerror}") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


__all__ = ["KEPT_SUFFIX", "MARKER", "State", "Target", "check", "location", "mark", "replace_folder", "sweep"]
