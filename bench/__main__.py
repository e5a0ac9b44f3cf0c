"""Run one benchmark by name, or list them: ``python -m bench [NAME] [ARGS...]``.

Each benchmark is a script in this folder that prints its figures and the ratios against the baseline
its issue names. Benchmarks measure speed; tests never do.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def available() -> list[str]:
    return sorted(p.stem for p in HERE.glob("*.py") if not p.stem.startswith("_"))


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in available():
        print("usage: python -m bench NAME [ARGS...]\nbenchmarks:", *available(), sep="\n  ")
        return 0 if not argv else 2
    name, *rest = argv
    sys.argv = [str(HERE / f"{name}.py"), *rest]
    runpy.run_path(sys.argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
