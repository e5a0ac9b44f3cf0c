"""Issue 34's calibration: how often the forecast's 80 % interval holds the real admission.

At random moments of a simulated week (the bundled example policy and its synthetic week, as
``gpufleet demo`` and ``trace synth`` make it), every waiting workload is forecast from the state and
ledger as of that moment (``gpufleet.forecast.simulated``: no later arrival, no unfinished runtime),
and compared with when the same run admitted it. Reported: the coverage of the 80 % interval (goal
75–85 %), the median |p50 − actual| relative to the actual remaining wait, per team and per wait band.
The moments are split over ``--workers`` processes (each simulates the week once).

Run: ``python -m bench forecast_calibration [--moments N] [--samples S] [--no-arrivals] [--workers W]``
"""

from __future__ import annotations

import argparse
import math
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from gpufleet.demo import SEED, example_text, workload_spec
from gpufleet.forecast.calibration import Check, by_band, checks_at, final_line, moments, row, summarize
from gpufleet.forecast.estimate import Settings
from gpufleet.policy import Fleet, parse_policy, resolve
from gpufleet.simulate.config import SimulationConfig
from gpufleet.simulate.result import RunResult
from gpufleet.simulate.run import simulate
from gpufleet.trace import synthesize
from gpufleet.trace.job import Job

DAY = 86_400


@dataclass(frozen=True)
class Scenario:
    name: str
    days: int


_STATE: dict[str, tuple[Fleet, list[Job], RunResult]] = {}


def _world(days: int) -> tuple[Fleet, list[Job], RunResult]:
    key = str(days)
    if key not in _STATE:
        fleet = resolve(parse_policy(example_text(), "fleet.yaml"))
        jobs = synthesize(workload_spec(fleet, days=days), SEED)
        _STATE[key] = (fleet, jobs, simulate(fleet, jobs, SimulationConfig()))
    return _STATE[key]


def _moment(args: tuple[int, int, Settings]) -> list[Check]:
    days, at, settings = args
    fleet, jobs, truth = _world(days)
    return checks_at(fleet, jobs, truth.outcome, truth.records, at, settings=settings, config=SimulationConfig())


def pct(x: float) -> str:
    return "–" if math.isnan(x) else "∞" if math.isinf(x) else f"{x * 100:.0f} %"


def table(title: str, rows: list) -> None:  # type: ignore[type-arg]
    print(f"\n{title}")
    print(f"  {'':<16} {'admissions':>10} {'80 % covers':>12} {'median error':>13}")
    for r in rows:
        print(f"  {r.label:<16} {r.admissions:>10} {pct(r.coverage):>12} {pct(r.median_error):>13}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--moments", type=int, default=12)
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-arrivals", dest="arrivals", action="store_false")
    args = parser.parse_args()
    settings = Settings(samples=args.samples, arrivals=args.arrivals)
    ats = moments(args.seed, args.moments, DAY, args.days * DAY)
    started = time.monotonic()
    print(
        f"bundled example, synthetic {args.days}-day week (seed {SEED}); {args.moments} moments (seed {args.seed}), "
        f"{args.samples} samples each, arrivals {'sampled' if args.arrivals else 'not included'}",
        flush=True,
    )
    checks: list[Check] = []
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        for at, found in zip(ats, pool.map(_moment, [(args.days, at, settings) for at in ats]), strict=True):
            checks += found
            r = row(str(at), found)
            print(f"  moment {at:>7} s: {r.admissions:>4} waiting, 80 % covers {pct(r.coverage)}", flush=True)
    table("per team", summarize(checks, lambda c: c.team))
    table("per wait (actual, from the moment)", by_band(checks))
    early = sum(c.actual > c.p90 for c in checks)
    late = sum(c.actual < c.p10 for c in checks)
    print(f"\nmissed: {early} admitted after p90 (forecast too early), {late} before p10 (too late)")
    print(f"{time.monotonic() - started:.0f} s wall")
    print(final_line(checks))


if __name__ == "__main__":
    main()
