"""The twin, the simulator and placement compiled with mypyc, and the guard that never lets them
run stale.

Why: a forecast, a tune trial or a simulated week is mostly Kueue's cycles in the twin, hundreds of
thousands of small calls in pure Python. mypyc (mypy's own compiler) turns the same strictly typed
source into C extensions, with the same answers bit for bit (``bench/forecast_speed``'s
fingerprint), and CI runs the whole test suite on the compiled build (the twin's differentials
against the real Kueue included).

``make compiled`` (``python -m gpufleet.compiler``) compiles ``MODULES`` in place: each extension
module beside its source (git-ignored), one shared library for the group (``gpufleet__mypyc``, in
``src/``), and a manifest of the sources' SHA-256. An extension module shadows its ``.py``, so a
source edited after the build would silently run as it was built: at import (``gpufleet/__init__``)
``guard`` compares the sources with the manifest, and if any differs, or ``GPUFLEET_PURE=1`` is
set, it imports every compiled module from its source instead, with one warning. All or none:
compiled modules of one group call each other directly in C, so a stale one would still be
reached from a fresh one.

Where nothing was compiled (a wheel, a fresh clone) ``guard`` finds no manifest and no extension
module and does nothing.

Pickling: a tune worker sends its runs back by pickle (the jobs, the meter, the placement cluster),
which mypyc's classes take no part in by default; ``gpufleet.picklable`` gives each compiled class a
reducer as its module is imported. A paused queue world is still not sent: a forecast forks its
samples, which share it page by page (``forecast.estimate``).
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from gpufleet import picklable

SRC = Path(__file__).resolve().parent.parent  # the directory holding the gpufleet package
MANIFEST = "gpufleet/compiled-sources.json"  # relative to SRC, like every path below
GROUP = "gpufleet"  # the shared library is gpufleet__mypyc.<abi>.so in SRC
PURE = "GPUFLEET_PURE"  # set (to anything but "" or "0"): run from the sources even when compiled
# What is compiled: the twin (Kueue's cycles, about 70 % of a simulated week or forecast sample), the
# simulator's loop and placement (most of the rest).
MODULES = ("gpufleet/twin", "gpufleet/simulate", "gpufleet/placement")


def native(cls: type) -> bool:
    """Whether ``cls`` comes from a compiled module: a plain compiled class without a ``__new__`` of its
    own cannot be pickled (``gpufleet.picklable``), so a forecast forks what holds one (the docstring)."""
    return native_file(getattr(sys.modules.get(cls.__module__), "__file__", None) or "")


def running() -> bool:
    """Whether this process runs the compiled modules (a bench prints it beside its figures)."""
    spec = importlib.util.find_spec("gpufleet.twin.kueue")
    return spec is not None and native_file(spec.origin or "")


def native_file(path: str) -> bool:
    return path.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


def sources(src: Path = SRC) -> list[Path]:
    """Every source file ``MODULES`` names (a directory: its ``.py`` files, recursively), sorted."""
    out: set[Path] = set()
    for name in MODULES:
        path = src / name
        out.update(path.rglob("*.py") if path.is_dir() else [path])
    return sorted(out)


def digests(src: Path = SRC) -> dict[str, str]:
    """Each compiled source's SHA-256, by its path relative to ``src``."""
    return {p.relative_to(src).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in sources(src)}


def module_name(relative: str) -> str:
    """``gpufleet/twin/__init__.py`` -> ``gpufleet.twin``; ``gpufleet/twin/kueue.py`` -> ``gpufleet.twin.kueue``."""
    parts = relative.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def extensions(src: Path = SRC) -> list[Path]:
    """Every extension module built here: the group's library and any beside a gpufleet source
    (also one an earlier build compiled that ``MODULES`` no longer names: it would still shadow its
    source, so a build and ``make pure`` remove it too)."""
    return [*src.glob(f"{GROUP}__mypyc.*"), *(p for p in (src / "gpufleet").rglob("*") if native_file(p.name))]


def stale(src: Path = SRC) -> str | None:
    """Why the compiled modules must not run (a source changed since the build, or the build is
    incomplete), or None: they match their sources, or nothing was compiled."""
    try:
        built = json.loads((src / MANIFEST).read_text())
    except (OSError, ValueError):
        built = None
    if built is None:  # one glob: every compiled module needs the group's library
        return "no manifest of a finished build" if any(src.glob(f"{GROUP}__mypyc.*")) else None
    now = digests(src)
    stray = {_source_of(p, src) for p in extensions(src)} - {"", *now}  # an older build's, not compiled now
    changed = sorted(set(now) ^ set(built) | {k for k in now if built.get(k) != now[k]} | stray)
    if changed:
        more = f" and {len(changed) - 1} more" if len(changed) > 1 else ""
        return f"{changed[0]}{more} changed since it was compiled"
    return None


def _source_of(extension: Path, src: Path) -> str:
    """The source an extension module shadows, relative to ``src`` ("" for the group's library)."""
    if extension.parent == src:
        return ""
    return (extension.parent / (extension.name.split(".")[0] + ".py")).relative_to(src).as_posix()


class _FromSource(importlib.abc.MetaPathFinder):
    """Finds each compiled module's ``.py`` (an older build's too), ahead of the extension beside it."""

    def __init__(self, src: Path) -> None:
        found = [*sources(src), *(src / _source_of(p, src) for p in extensions(src) if _source_of(p, src))]
        self.paths = {module_name(p.relative_to(src).as_posix()): p for p in found if p.exists()}

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        source = self.paths.get(fullname)
        if source is None:
            return None
        package = [str(source.parent)] if source.name == "__init__.py" else None
        return importlib.util.spec_from_file_location(fullname, source, submodule_search_locations=package)


def guard(src: Path = SRC) -> str | None:
    """Run the compiled modules only if they are their sources (see the module's docstring); else
    import them from source, warn once on stderr, and say why."""
    forced = os.environ.get(PURE, "") not in ("", "0")
    why = f"{PURE} is set" if forced else stale(src)
    if why is None:
        if (src / MANIFEST).exists() and not any(isinstance(f, picklable.Finder) for f in sys.meta_path):
            sys.meta_path.insert(0, picklable.Finder([m.replace("/", ".") for m in MODULES]))
        return None
    if not any(isinstance(f, _FromSource) for f in sys.meta_path):
        sys.meta_path.insert(0, _FromSource(src))
        if not forced:
            print(
                f"gpufleet: running the compiled modules from source, not their build: {why}; "
                "`make compiled` builds it again (`make pure` removes it)",
                file=sys.stderr,
            )
    return why
