"""``make compiled`` and ``make pure``: build the compiled modules of ``gpufleet.compiled``, or remove them.

Apart from ``gpufleet.compiled`` because that one runs at every import of gpufleet, and this one
needs the dev extra's mypy (mypyc) and setuptools.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from gpufleet.compiled import GROUP, MANIFEST, SRC, digests, extensions, sources, stale


def build(src: Path = SRC, work: Path | None = None) -> int:
    """Compile ``MODULES`` in place; the manifest is written last, so an interrupted build is stale.
    Returns how many modules were compiled."""
    from mypyc.build import mypycify  # the dev extra's mypy: only a build needs it
    from setuptools import setup

    clean(src)  # the manifest first (an interrupted build is stale), and any module no longer compiled
    work = work or src.parent / "build" / "mypyc"
    relative = [p.relative_to(src).as_posix() for p in sources(src)]
    here = os.getcwd()
    os.chdir(src)  # mypyc names the modules by their paths from here
    try:
        modules = mypycify(relative, opt_level="3", group_name=GROUP, target_dir=str(work / "c"))
        setup(
            name="gpufleet-compiled",
            ext_modules=modules,
            script_args=[
                "-q",
                "build_ext",
                "--inplace",
                "--build-temp",
                str(work / "temp"),
                "--build-lib",
                str(work / "lib"),
            ],
        )
    finally:
        os.chdir(here)
    text = json.dumps(digests(src), indent=1, sort_keys=True)
    with tempfile.NamedTemporaryFile("w", dir=src / "gpufleet", suffix=".tmp", delete=False) as out:
        out.write(text)
    os.replace(out.name, src / MANIFEST)
    return len(relative)


def clean(src: Path = SRC) -> int:
    """Remove the compiled modules and the manifest; how many files were removed."""
    gone = [*extensions(src), *[src / MANIFEST] * (src / MANIFEST).exists()]
    for path in gone:
        path.unlink()
    return len(gone)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpufleet.compiler", description=__doc__.split("\n")[0])
    parser.add_argument("--clean", action="store_true", help="remove the compiled modules (run from source)")
    parser.add_argument("--check", action="store_true", help="say whether the build matches the sources; exit 1 if not")
    args = parser.parse_args(argv)
    if args.clean:
        print(f"removed {clean()} compiled files: gpufleet runs from source")
        return 0
    why = stale()
    built = (SRC / MANIFEST).exists()
    if args.check:
        print(why or ("compiled, up to date" if built else "not compiled"))
        return 1 if why else 0
    if built and why is None:
        print(f"compiled modules up to date ({len(sources())} sources)")
        return 0
    started = time.perf_counter()
    count = build()
    print(f"compiled {count} modules with mypyc in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
