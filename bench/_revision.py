"""A benchmark as it was at another commit, run now on this machine: the baseline side of a
same-machine ratio.

Per-CPU-second figures move with the machine: issue 18's baseline code (``7e47630``) admits
10,167 workloads per CPU-second in ``twin_scale`` on the machine that filed the issue and 16,192
on another of the same kind, so a figure measured today divided by the issue's number says as much
about the machine as about the code. ``--against REV`` in ``twin_scale`` and ``simulate_week``
runs the benchmark of ``REV`` (its ``src`` and ``bench``, from ``git archive``: the checkout is
read, never changed) in a child process with this interpreter, right after this one, and the
ratio is taken between the two.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ISSUE_18_BASELINE = "7e47630"  # the tip when issue 18 was filed: its figures were measured there


class RevisionError(Exception):
    """The revision cannot be run (not a git checkout, unknown revision, its benchmark failed)."""


def run_at(rev: str, name: str, args: list[str]) -> str:
    """Run benchmark ``name`` with ``args`` as of ``rev``; its standard output."""
    try:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", "--format=tar", rev, "src", "bench"],
            capture_output=True,
            check=True,
        ).stdout
    except FileNotFoundError as e:
        raise RevisionError("git is not on PATH: --against needs it to read another revision") from e
    except subprocess.CalledProcessError as e:
        raise RevisionError(f"git archive {rev} in {ROOT}: {e.stderr.decode().strip()}") from e
    with tempfile.TemporaryDirectory(prefix=f"gpufleet-bench-{rev}-") as tmp:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        env = {**os.environ, "PYTHONPATH": str(Path(tmp) / "src")}
        done = subprocess.run(
            [sys.executable, "-m", "bench", name, *args], check=False, cwd=tmp, env=env, capture_output=True, text=True
        )
    if done.returncode != 0:
        tail = "\n".join((done.stderr.strip() or done.stdout.strip()).splitlines()[-5:])
        raise RevisionError(f"benchmark {name} as of {rev} exited with {done.returncode}:\n{tail}")
    return done.stdout


def figure(output: str, pattern: str, what: str, rev: str) -> float:
    """The number ``pattern``'s first group finds in a benchmark's output (commas allowed)."""
    found = re.search(pattern, output)
    if found is None:
        raise RevisionError(f"the output of {rev}'s benchmark has no {what}:\n{output.strip()}")
    return float(found.group(1).replace(",", ""))


def add_option(parser: argparse.ArgumentParser) -> None:
    """``--against [REV]``, the same for every benchmark that takes it."""
    parser.add_argument(
        "--against",
        nargs="?",
        const=ISSUE_18_BASELINE,
        metavar="REV",
        help=f"also run this benchmark as of REV (default {ISSUE_18_BASELINE}, issue 18's baseline) on this machine",
    )


def figures_at(rev: str, name: str, args: list[str], patterns: dict[str, str]) -> dict[str, float]:
    """Run ``name`` as of ``rev`` and read each named figure off its output; what goes wrong ends the
    benchmark with its reason, not a traceback."""
    print(f"running {name} as of {rev} on this machine ...", flush=True)
    try:
        output = run_at(rev, name, args)
        return {what: figure(output, pattern, what, rev) for what, pattern in patterns.items()}
    except RevisionError as e:
        sys.exit(f"--against {rev}: {e}")
