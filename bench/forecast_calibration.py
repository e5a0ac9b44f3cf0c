"""Issue 34's calibration: how often the forecast's 80 % interval holds the real admission.

At random moments of a simulated week (the bundled example policy and its synthetic week, as
``gpufleet demo`` and ``trace synth`` make it), every waiting workload is forecast from the state and
ledger as of that moment (``gpufleet.forecast.simulated``: no later arrival, no unfinished runtime),
and compared with when the same run admitted it. Reported: the coverage of the 80 % interval (goal
75–85 %), the median |p50 − actual| relative to the actual remaining wait, per team and per wait band,
and per moment the misses each way. The forecasts look ``--horizon-days`` ahead (6: the week's longest
wait from a moment is 9.4 days, and 6 leave few checks censored, which are counted apart, not as
covered: ``gpufleet.forecast.calibration``'s rule); the sampled arrivals stop at the trace's end, as
the run's do.
The moments are split over ``--workers`` processes (each simulates the week once).

``--testbed`` adds the same on the real control plane: one run of a world-differential scenario
(``tests/e2e/world_scenarios.py``, ``--scenario``, small by default) on a fresh testbed (Kueue v0.19.2,
kube-scheduler, kwok, ``gpufleet record`` writing the ledger), with probes every ``--every`` seconds
from 5 s after its last arrival (so the probes never compete with the loop creating the Jobs) to its
drain, keeping what ``gpufleet forecast`` reads (the
Workloads, the ledger, the clock; ``gpufleet.forecast.snapshots``). Forecast after the run, every
Workload waiting at a probe is checked against when the real Kueue reserved its quota. The trace is
compressed (10x for the bundled scenarios), so its waits are seconds and the error's floor of the
wait is ``MIN_WAIT_S`` compressed alike. ``--moments 0 --testbed`` runs the testbed part alone.
``--scenario small,fair,example,gang --runs N`` pools N real runs of each (one run's dozen checks
share a few probes, too few to judge the band): each run's tables, then per scenario and per team
over all, each run's probe a moment of its own in the interval over moments. Each run keeps its
probes (``KEPT``: the snapshots and the final ledger) beside its logs; ``--rejudge DIR`` forecasts
the kept runs under a ``--work`` folder again with today's model, so a change is judged on the same
real runs in seconds.

``--known-runtimes`` (simulated part, a diagnostic) gives the forecast every job's true runtime, as if
declared: what error is left is the arrivals' (with ``--no-arrivals``, none is left after the trace's
last submission: ``test_calibration``). ``--known-arrivals`` gives every sample the jobs the run went
on to submit, in place of sampled ones; with both, each forecast is the run's admission (the state at
the moment is then all there is to get wrong: ``test_calibration``).

``--trace-seed`` draws another synthetic week (the default is the example's, ``gpufleet demo``'s): a
model tuned on one week should hold on another. ``--fleet bench`` draws the week for simulate_week's
1,000-GPU fleet instead; ``--fleet FILE`` runs the example's week under another policy, such as
``gpufleet demo``'s tuned one (``demo-out/tune/recommended.yaml``). ``--days 14 --first-day 8``
forecasts the second week of two: what a cluster with a week of history behind it would see (a
weekly rhythm can be learnt only from whole weeks seen).

Run: ``python -m bench forecast_calibration [--moments N] [--samples S] [--days D [--first-day F]] [--horizon-days D] [--trace-seed T] [--fleet F] [--no-arrivals] [--known-runtimes] [--known-arrivals] [--workers W]
[--testbed [--scenario NAME[,NAME...]] [--runs N] [--every S] [--work DIR]] [--rejudge PATH ...]``; ends with the line of each part run.
"""

from __future__ import annotations

import argparse
import math
import os
import pickle
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from bench.simulate_week import policy_text
from gpufleet.compiled import running
from gpufleet.demo import SEED, example_text, workload_spec
from gpufleet.errors import InputError, Problem
from gpufleet.forecast.calibration import (
    Check,
    by_band,
    censored_line,
    checks_at,
    final_line,
    misses,
    moments,
    row,
    spread_line,
    summarize,
)
from gpufleet.forecast.estimate import Settings
from gpufleet.forecast.snapshots import Snapshot, hindsight
from gpufleet.ledger.records import Record
from gpufleet.policy import Fleet, parse_policy, resolve
from gpufleet.simulate.config import SimulationConfig
from gpufleet.simulate.result import RunResult
from gpufleet.simulate.run import simulate
from gpufleet.trace import synthesize
from gpufleet.trace.job import Job
from tests.e2e.world_scenarios import SCENARIOS

DAY = 86_400
HORIZON_DAYS = 6  # the week's longest wait from a moment is 9.4 days; 6 leave about 4 % of the checks censored
REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Scenario:
    name: str
    days: int


_STATE: dict[tuple[str, int, int], tuple[Fleet, list[Job], RunResult]] = {}
# The fleets a week is drawn for: the bundled example (``gpufleet demo``'s) and simulate_week's
# 1,000-GPU fleet; ``--fleet FILE`` runs the first's week under another policy (its tuned one).
FLEETS = {"example": example_text, "bench": policy_text}


def policy_of(fleet: str) -> tuple[str, str]:
    """The policy's text and the name its errors carry: a ``FLEETS`` name, or a file."""
    if fleet in FLEETS:
        return FLEETS[fleet](), f"{fleet} fleet"
    return Path(fleet).read_text(), fleet


def fleet_problem(fleet: str) -> str | None:
    """Why ``--fleet`` cannot be read (the error line to print), or None: checked before any worker
    starts, so that a fleet given wrong fails once, clearly, not as a worker's traceback."""
    try:
        resolve(parse_policy(*policy_of(fleet)))
    except OSError as exc:
        return f"error: --fleet {fleet}: {exc.strerror or exc}"
    except InputError as exc:
        return f"error: {exc.summary()}"
    return None


def world(fleet_name: str, days: int, seed: int) -> tuple[Fleet, list[Job], RunResult]:
    """The fleet's synthetic trace of ``days`` days from ``seed``, and its run (once a process).
    Under a policy file the trace is the example's, as ``gpufleet demo`` tunes it."""
    key = (fleet_name, days, seed)
    if key not in _STATE:
        text, name = policy_of(fleet_name)
        fleet = resolve(parse_policy(text, name))
        base = fleet if fleet_name in FLEETS else resolve(parse_policy(example_text(), "example fleet"))
        jobs = synthesize(workload_spec(base, days=days), seed)
        _STATE[key] = (fleet, jobs, simulate(fleet, jobs, SimulationConfig()))
    return _STATE[key]


def _moment(args: tuple[str, int, int, int, Settings, bool, bool]) -> list[Check]:
    fleet_name, days, trace_seed, at, settings, known, known_arrivals = args
    fleet, jobs, truth = world(fleet_name, days, trace_seed)
    return checks_at(
        fleet,
        jobs,
        truth.outcome,
        truth.records,
        at,
        settings=settings,
        config=SimulationConfig(),
        known_runtimes=known,
        known_arrivals=known_arrivals,
    )


def pct(x: float) -> str:
    return "–" if math.isnan(x) else "∞" if math.isinf(x) else f"{x * 100:.0f} %"


def table(title: str, rows: list) -> None:  # type: ignore[type-arg]
    print(f"\n{title}")
    print(
        f"  {'':<17} {'admissions':>10} {'80 % covers':>12} {'over moments':>13} {'median error':>13} {'censored':>9}"
    )
    for r in rows:
        spread = "–" if math.isnan(r.low) else f"{r.low * 100:.0f}–{r.high * 100:.0f} %"
        print(
            f"  {r.label:<17} {r.admissions:>10} {pct(r.coverage):>12} {spread:>13} {pct(r.median_error):>13} "
            f"{r.censored:>9}"
        )


@dataclass(frozen=True)
class Kept:
    """A real run's probes, kept as ``KEPT`` beside its logs: what its forecasts read (the snapshots)
    and what judges them (the final ledger), so a model change is judged again on the same real runs
    in seconds (``--rejudge``) rather than on new ones of minutes each, whose races differ."""

    scenario: str
    snapshots: tuple[Snapshot, ...]
    records: tuple[Record, ...]
    origin: datetime


KEPT = "probes.pickle"  # the bench's own file: ``--rejudge`` reads only what this bench wrote


def testbed(name: str, samples: int, every: int, work: Path, arrivals: bool = True, run: int = 0) -> list[Check]:
    """One real run of scenario ``name`` with probes, kept under ``work``; each waiting Workload's
    forecast against Kueue (``judge``)."""
    from gpufleet.testbed import ensure
    from gpufleet.testbed.world import run_real
    from gpufleet.trace.compression import check_runnable, compress

    scenario = SCENARIOS[name]()
    fleet, jobs = scenario.fleet(), compress(scenario.jobs, scenario.factor)
    check_runnable(jobs, fleet, source=f"scenario {name}")
    last = max(j.submit_s for j in jobs)
    probes = range(last + 5, last + int(scenario.drain_timeout_s), every)  # never beside the Job creation loop
    print(f"\ntestbed: scenario {name}, {len(jobs)} jobs compressed {scenario.factor:g}x, probes every {every} s "
          f"from {probes.start} s, {samples} samples each, arrivals {'sampled' if arrivals else 'not included'}", flush=True)  # fmt: skip
    here = work / f"{name}-{run}-forecast"
    real = run_real(fleet, jobs, here, ensure(REPO), drain_timeout_s=scenario.drain_timeout_s, probes=probes, say=print)
    print(f"  run: trace wall {real.wall_s:.0f} s, {len(real.snapshots)} probes taken, undrained {list(real.undrained)}, "
          f"late {list(real.late)}; kept in {here / KEPT}", flush=True)  # fmt: skip
    kept = Kept(name, tuple(real.snapshots), tuple(real.records), real.origin)
    with tempfile.NamedTemporaryFile("wb", dir=here, suffix=".tmp", delete=False) as out:
        # its fields, not the class: this script runs as __main__ (``python -m bench``), where a class
        # pickles under that name
        pickle.dump(kept.__dict__, out, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(out.name, here / KEPT)
    return judge(kept, samples, arrivals, run)


def judge(kept: Kept, samples: int, arrivals: bool = True, run: int = 0) -> list[Check]:
    """Forecast a kept run's probes after the run (``hindsight``) and print their tables; the checks
    marked ``run``, so that pooled with other runs' each probe is its own moment."""
    scenario = SCENARIOS[kept.scenario]()
    fleet = scenario.fleet()
    found = hindsight(kept.snapshots, fleet, kept.records, kept.origin, settings=Settings(samples=samples, arrivals=arrivals),
                      config=SimulationConfig(), time_factor=scenario.factor)  # fmt: skip
    for at in sorted({c.at for c in found.checks} | {d.at for d in found.declined}):
        here = [c for c in found.checks if c.at == at]
        r, no = row(str(at), here), sum(d.at == at for d in found.declined)
        print(f"  probe {at:>4} s: {r.admissions:>2} forecast, {no:>2} without a figure, 80 % covers {pct(r.coverage)}")
    reasons = sorted({d.reason.split(":")[0] for d in found.declined})
    print(f"  without a figure: {len(found.declined)} ({'; '.join(reasons) or 'none'})")
    table("testbed per team", summarize(found.checks, lambda c: c.team))
    print(f"  missed: {misses(list(found.checks))}")
    print(f"  {spread_line(found.checks)}")
    print(f"  this run, arrivals {'sampled' if arrivals else 'not included'}: {final_line(found.checks)}")
    # the probes start after the last arrival: every sampled arrival is one the real run never had
    other = hindsight(kept.snapshots, fleet, kept.records, kept.origin, settings=Settings(samples=samples, arrivals=not arrivals),
                      config=SimulationConfig(), time_factor=scenario.factor)  # fmt: skip
    print(f"  the same probes, arrivals {'not included' if arrivals else 'sampled'}: {final_line(other.checks)}; "
          f"missed: {misses(list(other.checks))}")  # fmt: skip
    return [replace(c, run=run) for c in found.checks]


def rejudge(paths: list[Path], samples: int, arrivals: bool) -> list[Check]:
    """Every kept run under ``paths`` (``KEPT`` files, or folders holding them), judged again by
    today's forecast, each a run of its own."""
    files = sorted({f for p in paths for f in ([p] if p.is_file() else p.rglob(KEPT))})
    if not files:
        raise InputError(
            [Problem(f"no {KEPT} here (a --work folder of an earlier --testbed run)", str(p), "") for p in paths]
        )
    checks: list[Check] = []
    for run, path in enumerate(files):
        try:
            with path.open("rb") as f:
                kept = Kept(**pickle.load(f))  # the bench's own file (KEPT): never one from elsewhere
        except Exception as exc:  # a file that is not one unpickles or fails in any of many ways
            raise InputError([Problem(f"not a kept run of this bench: {exc}", str(path), "")]) from exc
        if kept.scenario not in SCENARIOS:
            raise InputError([Problem(f"scenario {kept.scenario!r} is not one of this bench's", str(path), "")])
        print(
            f"\ntestbed, kept: {path} (scenario {kept.scenario}, {len(kept.snapshots)} probes), {samples} samples each"
        )
        checks += judge(kept, samples, arrivals, run)
    return checks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--moments", type=int, default=12)
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument(
        "--first-day",
        type=int,
        default=1,
        help="the moments fall from this day to the trace's end (the days before are history alone)",
    )
    parser.add_argument("--seed", type=int, default=1, help="the moments' seed")
    parser.add_argument(
        "--trace-seed",
        type=int,
        default=SEED,
        help="the synthetic week's seed (another week: a check against overfitting)",
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--fleet",
        default="example",
        help="the simulated week's fleet: example (gpufleet demo's), bench (simulate_week's 1,000 GPUs), "
        "or a policy file run on the example's week (gpufleet demo's tuned policy)",
    )
    parser.add_argument(
        "--horizon-days", type=int, default=HORIZON_DAYS, help="the forecasts' horizon (simulated part)"
    )
    parser.add_argument("--no-arrivals", dest="arrivals", action="store_false")
    parser.add_argument(
        "--known-runtimes", action="store_true", help="the true runtimes, as if declared (a diagnostic; simulated part)"
    )
    parser.add_argument(
        "--known-arrivals",
        action="store_true",
        help="the run's own later submissions in place of sampled ones (a diagnostic; simulated part)",
    )
    parser.add_argument("--testbed", action="store_true", help="add forecasts made during a real testbed run")
    parser.add_argument(
        "--scenario",
        default="small",
        type=scenario_names,
        help=f"the world differential's scenarios, comma-separated ({', '.join(SCENARIOS)}; --testbed)",
    )
    parser.add_argument("--runs", type=int, default=1, help="real runs of each scenario, pooled (--testbed)")
    parser.add_argument("--every", type=int, default=15, help="seconds between probes (--testbed)")
    parser.add_argument("--work", type=Path, help="keep the testbed runs' logs, ledgers and probes under DIR")
    parser.add_argument(
        "--rejudge",
        type=Path,
        nargs="+",
        metavar="PATH",
        help=f"judge the kept runs under these --work folders (or their {KEPT} files) again, with today's forecast",
    )
    args = parser.parse_args()
    lines = []
    if args.moments > 0:
        problem = fleet_problem(args.fleet)
        if not 0 < args.first_day < args.days:
            problem = f"--first-day {args.first_day}: expected a day from 1 to {args.days - 1} (--days {args.days})"
        if problem:
            print(problem, file=sys.stderr)
            return 2
        lines.append(simulated(args))
    if args.rejudge:
        try:
            checks = rejudge(args.rejudge, args.samples, args.arrivals)
        except InputError as exc:
            print(f"error: {exc.summary()}", file=sys.stderr)
            return 2
        if len({c.run for c in checks}) > 1:
            pooled(checks, f"{len({c.run for c in checks})} kept runs pooled", None)
        lines.append(final_line(checks, "testbed, kept runs"))
    if args.testbed:
        if args.runs < 1:
            print(f"error: --runs {args.runs}: expected 1 or more", file=sys.stderr)
            return 2
        with tempfile.TemporaryDirectory(prefix="gpufleet-forecast-") as tmp:
            try:
                lines.append(real_runs(args, args.work or Path(tmp)))
            except InputError as exc:
                print(f"error: {exc.summary()}", file=sys.stderr)
                return 2
    print(*lines, sep="\n")
    return 0


def scenario_names(text: str) -> list[str]:
    """``--scenario``'s comma-separated names, each one of ``SCENARIOS``."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"{text!r}: expected names from {', '.join(SCENARIOS)}, comma-separated")
    return names


def real_runs(args: argparse.Namespace, work: Path) -> str:
    """The testbed's part: ``--runs`` real runs of each scenario, each run's tables, and with more than
    one run the pooled tables (each run's probe a moment of its own) and line."""
    checks: list[Check] = []
    scenario_of: dict[int, str] = {}  # run -> its scenario
    for name in args.scenario:
        for _ in range(args.runs):
            run = len(scenario_of)
            scenario_of[run] = name
            checks += testbed(name, args.samples, args.every, work, args.arrivals, run=run)
    if len(scenario_of) > 1:
        title = f"{len(scenario_of)} runs pooled ({args.runs} of each of {', '.join(args.scenario)})"
        pooled(checks, title, scenario_of)
    return final_line(checks, "testbed")


def pooled(checks: list[Check], title: str, scenario_of: dict[int, str] | None) -> None:
    """The tables of several runs' checks together, each run's probe a moment of its own."""
    print(f"\ntestbed, {title}")
    if scenario_of is not None:
        table("testbed per scenario", summarize(checks, lambda c: scenario_of[c.run]))
    table("testbed per team", summarize(checks, lambda c: c.team))
    print(f"  missed: {misses(checks)}")
    print(f"  {spread_line(checks)}")


def _fleet_words(fleet: str) -> str:
    return {"example": "bundled example", "bench": "simulate_week's 1,000-GPU fleet"}.get(
        fleet, f"{fleet} on the bundled example's week"
    )


def simulated(args: argparse.Namespace) -> str:
    """The simulated week's part: its tables, and its line."""
    settings = Settings(samples=args.samples, arrivals=args.arrivals, horizon_s=args.horizon_days * DAY)
    ats = moments(args.seed, args.moments, args.first_day * DAY, args.days * DAY)
    started = time.monotonic()
    print(
        f"{_fleet_words(args.fleet)}, synthetic {args.days}-day week (seed {args.trace_seed}); {args.moments} moments (seed {args.seed}), "
        f"{args.samples} samples each, arrivals {'sampled' if args.arrivals else 'not included'}, "
        f"horizon {args.horizon_days} days, simulator {'compiled' if running() else 'from source'}"
        + (", runtimes known (the true ones, a diagnostic)" if args.known_runtimes else "")
        + (", arrivals known (the run's own, a diagnostic)" if args.known_arrivals else ""),
        flush=True,
    )
    checks: list[Check] = []
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        for at, found in zip(
            ats,
            pool.map(
                _moment,
                [
                    (args.fleet, args.days, args.trace_seed, at, settings, args.known_runtimes, args.known_arrivals)
                    for at in ats
                ],
            ),
            strict=True,
        ):
            checks += found
            r = row(str(at), found)
            print(
                f"  moment {at:>7} s: {r.admissions:>4} judged, 80 % covers {pct(r.coverage):>5}; "
                f"{sum(c.early for c in found):>2} early, {sum(c.late for c in found):>2} late, {r.censored:>2} censored",
                flush=True,
            )
    table("per team", summarize(checks, lambda c: c.team))
    table("per wait (actual, from the moment)", by_band(checks))
    print(f"\nmissed: {misses(checks)}")
    print(censored_line(checks, settings.horizon_s))
    print(spread_line(checks))
    print(f"{time.monotonic() - started:.0f} s wall")
    return final_line(checks)


if __name__ == "__main__":
    raise SystemExit(main())
