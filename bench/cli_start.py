"""How long the command line takes to start and answer, against issue 37's baseline and targets.

Issue 37 measured ``gpufleet --help`` at 2.2 s and importing the CLI at 1.7 s (every command's
modules, SQLAlchemy, Optuna and the check rules loaded for any command), and asks for ``--version``
and ``--help`` within 0.3 s and ``check`` and ``plan`` on the bundled example within 0.8 s of CPU.
Each case runs in a fresh interpreter (``python -m gpufleet ...``), ``--runs`` times; the median
wall time and CPU time (user + system, of the child) are printed beside the target.
``--against REV`` runs the same cases with ``src`` as of REV (``git archive``; the checkout is not
touched) right after, on this machine, for a same-machine before/after.
Run: ``python -m bench cli_start [--runs 5] [--against REV]``.
"""

from __future__ import annotations

import argparse
import io
import os
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FLEET = REPO / "examples" / "fleet.yaml"
JOBS = REPO / "tests" / "check" / "manifests" / "jobs.yaml"
BASELINE_S = {"--help": 2.2, "import gpufleet.cli": 1.7}

# (label, python arguments, target seconds, what the target bounds)
CASES: list[tuple[str, list[str], float, str]] = [
    ("import gpufleet.cli", ["-c", "import gpufleet.cli"], 0.3, "wall"),
    ("--version", ["-m", "gpufleet", "--version"], 0.3, "wall"),
    ("--help", ["-m", "gpufleet", "--help"], 0.3, "wall"),
    ("check example", ["-m", "gpufleet", "check", str(FLEET), str(JOBS)], 0.8, "cpu"),
    ("plan example", ["-m", "gpufleet", "plan", str(FLEET)], 0.8, "cpu"),
    ("render example", ["-m", "gpufleet", "render", str(FLEET), "-o", "{tmp}/out", "--force"], 0.8, "cpu"),
]


def _once(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """One run in a fresh interpreter: (wall seconds, the child's user + system CPU seconds)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    done = subprocess.run([sys.executable, *args], env=env, capture_output=True, check=False)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):  # check exits 1 on the example's denied Job: a finding, not a failure
        sys.exit(f"{' '.join(args)} exited {done.returncode}: {done.stderr.decode()[-400:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(src: Path | None, runs: int) -> dict[str, tuple[float, float]]:
    """Median (wall, cpu) per case, with gpufleet imported from ``src`` (else as installed)."""
    env = {**os.environ, "COLUMNS": "120"}
    if src is not None:
        env["PYTHONPATH"] = str(src)
    out: dict[str, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="gpufleet-cli-start-") as tmp:
        for label, args, _, _ in CASES:
            argv = [a.replace("{tmp}", tmp) for a in args]
            _once(argv, env)  # warm the bytecode cache and the page cache
            samples = [_once(argv, env) for _ in range(runs)]
            out[label] = (statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples))
    return out


def source_at(rev: str, into: Path) -> Path:
    """``src`` as of ``rev``, unpacked under ``into``."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", rev, "src"], capture_output=True, check=False
    )
    if archive.returncode != 0:
        sys.exit(f"--against {rev}: {archive.stderr.decode().strip()}")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--against", metavar="REV", help="also run the cases with src as of REV")
    args = parser.parse_args()
    now = measure(None, args.runs)
    before: dict[str, tuple[float, float]] = {}
    if args.against:
        with tempfile.TemporaryDirectory(prefix="gpufleet-cli-start-rev-") as tmp:
            before = measure(source_at(args.against, Path(tmp)), args.runs)
    print(f"median of {args.runs} fresh interpreters; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    header = f"{'case':<22}{'wall':>8}{'cpu':>8}   target"
    if before:
        header += f"          {args.against}: wall    cpu   ratio"
    print(header)
    for label, _, target, bound in CASES:
        wall, cpu = now[label]
        value = wall if bound == "wall" else cpu
        verdict = "ok" if value <= target else "OVER"
        line = f"{label:<22}{wall:7.3f}s{cpu:7.3f}s   {bound} ≤ {target}s {verdict:<4}"
        if label in before:
            b_wall, b_cpu = before[label]
            b_value = b_wall if bound == "wall" else b_cpu
            line += f"  {b_wall:10.3f}s {b_cpu:6.3f}s  {b_value / value:5.1f}×"
        if label in BASELINE_S:
            line += f"  (issue's baseline {BASELINE_S[label]}s wall: {BASELINE_S[label] / wall:.1f}×)"
        print(line)


if __name__ == "__main__":
    main()
