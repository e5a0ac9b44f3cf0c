"""The simulator's hot path compiled with mypyc, and the guard that never lets it run stale.

Why: a forecast, a tune trial or a simulated week is Kueue's cycles in the twin and the simulator's
loop around them, hundreds of thousands of small calls in pure Python. mypyc (mypy's own compiler)
turns the same strictly typed source into C extensions: ``python -m bench forecast_speed`` runs
about twice as fast, with the same answer bit for bit (its fingerprint), and CI runs the whole
test suite on the compiled build (the twin's differentials against the real Kueue included).

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

SRC = Path(__file__).resolve().parent.parent  # the directory holding the gpufleet package
MANIFEST = "gpufleet/compiled-sources.json"  # relative to SRC, like every path below
GROUP = "gpufleet"  # the shared library is gpufleet__mypyc.<abi>.so in SRC
PURE = "GPUFLEET_PURE"  # set (to anything but "" or "0"): run from the sources even when compiled
# What is compiled: the twin (Kueue's cycles), the placement model, and the simulator's loop. Not the
# simulator's reports, the federation's manager or the differential (they read these, at little cost per cycle).
MODULES = (
    "gpufleet/twin",
    "gpufleet/placement",
    *(
        f"gpufleet/simulate/{name}.py"
        for name in (
            "engine", "scheduler", "queue_world", "queue", "jobs", "meter", "nodes", "serving", "idle",
            "requests", "first_apply", "federation",
        )
    ),
)  # fmt: skip


def native(cls: type) -> bool:
    """Whether ``cls`` comes from a compiled module: its instances cannot be pickled (mypyc's
    classes take no part in pickle's protocol unless told to), so a copy of them is forked."""
    return native_file(getattr(sys.modules.get(cls.__module__), "__file__", None) or "")


def running() -> bool:
    """Whether this process runs the compiled modules (a bench prints it beside its figures)."""
    spec = importlib.util.find_spec("gpufleet.simulate.engine")
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
    """The extension modules built here: the group's library and one per compiled source."""
    found = list(src.glob(f"{GROUP}__mypyc.*"))
    for source in sources(src):
        found += [p for p in source.parent.glob(source.stem + ".*") if native_file(p.name)]
    return found


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
    changed = sorted(set(now) ^ set(built) | {k for k in now if built.get(k) != now[k]})
    if changed:
        more = f" and {len(changed) - 1} more" if len(changed) > 1 else ""
        return f"{changed[0]}{more} changed since it was compiled"
    return None


class _FromSource(importlib.abc.MetaPathFinder):
    """Finds each compiled module's ``.py``, ahead of the extension module beside it."""

    def __init__(self, src: Path) -> None:
        self.paths = {module_name(p.relative_to(src).as_posix()): p for p in sources(src)}

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
        return None
    if not any(isinstance(f, _FromSource) for f in sys.meta_path):
        sys.meta_path.insert(0, _FromSource(src))
        if not forced:
            print(
                f"gpufleet: running the simulator from source, about half as fast: {why}; "
                "`make compiled` builds it again (`make pure` removes it)",
                file=sys.stderr,
            )
    return why
