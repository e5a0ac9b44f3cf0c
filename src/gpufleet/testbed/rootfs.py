"""Run a command from an image's unpacked filesystem the way a pod runs it, without a container runtime.

CI has no container daemon, and the webhook and recorder must still be tried from the image the
README tells users to push. ``umoci unpack`` gives the image's root filesystem and its runtime
config (the user and the entrypoint). ``contained`` then builds the command line that runs a
process there as the pod's security context asks (``runAsNonRoot``, ``readOnlyRootFilesystem``):

- a private mount namespace (``unshare --mount``), so nothing mounted here is seen outside or
  outlives the process;
- the root filesystem bound onto itself and remounted read-only, then ``/proc`` and ``/dev``, and
  the volumes (read-only unless asked otherwise, like the rendered ``volumeMounts``);
- ``chroot --userspec UID:GID`` into it, so the process runs as the image's user.

The network is the host's: the testbed's API server on 127.0.0.1 calls the webhook there, as it
would a Service. Needs root (CI runs as root) and util-linux's ``unshare``.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Volume:
    """A host path mounted into the root filesystem at ``target`` (read-only unless ``writable``)."""

    source: Path
    target: str
    writable: bool = False


@dataclass(frozen=True)
class Bundle:
    """An unpacked image (``umoci unpack``): its root filesystem and what its config says to run."""

    rootfs: Path
    uid: int
    gid: int
    args: tuple[str, ...]
    env: tuple[str, ...]

    @classmethod
    def read(cls, folder: Path) -> Bundle:
        """The bundle ``umoci unpack`` wrote to ``folder`` (its ``config.json`` and ``rootfs``)."""
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        process = config["process"]
        user = process.get("user", {})
        return cls(
            rootfs=folder / config["root"]["path"],
            uid=int(user.get("uid", 0)),
            gid=int(user.get("gid", 0)),
            args=tuple(process.get("args", [])),
            env=tuple(process.get("env", [])),
        )

    def environment(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The image's environment (``Env``), plus ``extra``: nothing of this machine's leaks in."""
        env = dict(item.partition("=")[::2] for item in self.env)
        return {**env, **(extra or {})}


def available() -> str | None:
    """Why ``contained`` cannot run here, or None when it can."""
    if os.geteuid() != 0:
        return "running from an image's filesystem needs root (a mount namespace and chroot)"
    missing = [tool for tool in ("unshare", "chroot", "mount") if _which(tool) is None]
    return f"missing {', '.join(missing)} (util-linux, coreutils)" if missing else None


def _inside(root: Path, target: str) -> Path:
    """``target`` under ``root``, refused where a part of it is a symbolic link: an absolute link in the
    image (Debian's ``/var/run -> /run``) would point out of ``root``, at this machine's own folders."""
    point = root
    for part in Path(target).relative_to("/").parts:
        point = point / part
        if point.is_symlink():
            raise ValueError(f"{target} passes through the image's symbolic link {point}; mount it elsewhere")
    return point


def _which(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/bin:/bin")


def _tool(name: str) -> str:
    """This machine's ``name`` by its full path: the process's PATH is the image's, not ours."""
    found = _which(name)
    if found is None:
        raise FileNotFoundError(f"{name} is not installed")
    return found


def contained(bundle: Bundle, args: Sequence[str], volumes: Sequence[Volume] = ()) -> list[str]:
    """The command line running ``args`` (the image's entrypoint and its arguments) inside ``bundle``,
    read-only, as the image's user, with ``volumes`` mounted."""
    root = bundle.rootfs
    for system in ("proc", "dev"):  # the image carries no device nodes; a runtime mounts both
        (root / system).mkdir(exist_ok=True)
    for volume in volumes:  # mount points, made before the root goes read-only (a runtime does the same)
        point = _inside(root, volume.target)
        if volume.source.is_dir():
            point.mkdir(parents=True, exist_ok=True)
        else:
            point.parent.mkdir(parents=True, exist_ok=True)
            point.touch(exist_ok=True)
    q = shlex.quote
    mount, chroot = q(_tool("mount")), q(_tool("chroot"))
    steps = [
        "set -e",
        f"{mount} --bind {q(str(root))} {q(str(root))}",
        f"{mount} -o remount,bind,ro {q(str(root))}",
        f"{mount} --rbind /proc {q(str(root / 'proc'))}",
        f"{mount} --rbind /dev {q(str(root / 'dev'))}",
    ]
    for volume in volumes:
        where = q(str(_inside(root, volume.target)))
        steps.append(f"{mount} --bind {q(str(volume.source))} {where}")
        if not volume.writable:
            steps.append(f"{mount} -o remount,bind,ro {where}")
    command = " ".join(q(a) for a in args)
    steps.append(f"exec {chroot} --userspec={bundle.uid}:{bundle.gid} {q(str(root))} {command}")
    return [_tool("unshare"), "--mount", "--propagation", "private", "--", _tool("sh"), "-c", "\n".join(steps)]
