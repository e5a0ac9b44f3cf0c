"""Testbed start-up: reuse of the cached binaries, and each start step, against the issue's baseline.

Issue 8 asks that later runs "start in seconds" and that a cold build keeps CI "well inside its 90
minutes". This prints the binaries' reuse time, each start step and the whole warm start and stop
(the median of ``--runs``), and the cold build's per-binary times if ``--build-log`` names the output
of a cold ``testbed/build.sh``. Run: ``python -m bench testbed_start [--runs 3] [--build-log FILE]``.
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
import time
from pathlib import Path

from gpufleet.policy import load_policy, resolve
from gpufleet.testbed import Testbed, ensure

REPO = Path(__file__).resolve().parents[1]
CI_BUDGET_S = 90 * 60


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--policy", type=Path, default=REPO / "examples" / "fleet.yaml")
    parser.add_argument("--build-log", type=Path, help="stderr of a cold testbed/build.sh")
    args = parser.parse_args()
    fleet = resolve(load_policy(args.policy))

    began = time.monotonic()
    binaries = ensure(REPO)
    print(f"binaries reused in {time.monotonic() - began:.2f}s from {binaries.root}")

    ups: list[float] = []
    downs: list[float] = []
    steps: dict[str, list[float]] = {}
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="gpufleet-bench-") as run:
            bed = Testbed(Path(run), binaries)
            began = time.monotonic()
            state = bed.up(fleet)
            ups.append(time.monotonic() - began)
            began = time.monotonic()
            bed.down()
            downs.append(time.monotonic() - began)
            for step, seconds in state.timings.items():
                steps.setdefault(step, []).append(seconds)
    for step, values in steps.items():
        print(f"  {step:<16} {statistics.median(values):6.2f}s")
    up = statistics.median(ups)
    print(f"warm up   {up:6.2f}s (median of {args.runs}); down {statistics.median(downs):.2f}s")
    print(f"warm up is {up / CI_BUDGET_S:.4%} of CI's 90-minute budget")

    if args.build_log:
        built = {m[1]: int(m[2]) for m in re.finditer(r"built (\S+) in (\d+)s", args.build_log.read_text())}
        total = sum(built.values())
        for tool, seconds in built.items():
            print(f"  cold {tool:<24} {seconds:5d}s")
        print(f"cold build {total}s = {total / CI_BUDGET_S:.0%} of CI's 90-minute budget")


if __name__ == "__main__":
    main()
