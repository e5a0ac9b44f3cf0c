"""Are the forecast's runtime draws calibrated? The probability-integral-transform table (issue 34).

At moments of a simulated week (the bundled example's unless ``--fleet`` names another), every
workload the forecast draws a runtime for (running, waiting fresh, preempted victims waiting to run
again, and the jobs that arrive within the next two days, drawn fresh as the sampled arrivals are)
gets many draws as the forecast makes them (one bootstrap of the history per sample,
``RuntimeHistory.bootstrap``, then ``draw`` conditioned on the time it is known to have run). Its
PIT value is where its true runtime falls among its draws (ties split at random). Calibrated draws
give uniform PITs: a mean of 0.5, 10 % in each tail decile. A pile near 1 is draws too short (the
forecast too early), near 0 too long.

Grouped by state, by the level the draw rests on (``RuntimeHistory.describe``), by kind and size;
each row also weighted by GPUs (the cards the job holds or will hold): the big gangs decide the
queue's waits, and an unweighted table is mostly short evaluations. Not by GPU-seconds of the true
runtime: that weight grows with the truth itself, so even calibrated draws would pile near 1. The
last column compares the work: GPU-seconds left, drawn (mean of the draws) over true, each runtime
left at most two days; a queue's wait is a sum of them, so a mean too short makes it early even where
the PITs look uniform (a heavy tail's mean lies in runs the history has not seen finish).

Run: ``python -m bench forecast_pit [--moments N | --at SECONDS ...] [--seed S] [--days D] [--samples S]
[--draws D] [--trace-seed T] [--fleet F] [--workers W]``; the moments are the calibration bench's (same
seed, same range), or those ``--at`` names. ``--trace-seed`` synthesizes another week of the same spec
(default: the bundled one's seed); ``--fleet`` is the calibration bench's (``example``, ``bench`` for
the 1,000-GPU fleet, or a policy file run on the example's week).
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from bench.forecast_calibration import fleet_problem, world
from gpufleet.demo import SEED
from gpufleet.forecast.calibration import moments
from gpufleet.forecast.estimate import DONE, WAITING, ran_at_least, shape_of
from gpufleet.forecast.runtimes import BEYOND, Shape
from gpufleet.forecast.simulated import moment_at
from gpufleet.simulate.config import SimulationConfig

DAY = 86_400
AHEAD_S = 2 * DAY  # arrivals within this of the moment are drawn too (fresh, as sampled arrivals are)
CAP_S = 2 * DAY  # the work left is compared up to this: what a queue's wait of days is made of


@dataclass(frozen=True)
class Pit:
    at: int
    state: str  # running, waiting fresh, victim, arriving
    level: str  # the level the draws rest on (the first draw's, by describe), or beyond history
    kind: str
    team: str
    gpus: int
    weight: float  # GPUs
    pit: float
    drawn_s: float  # mean drawn runtime left (from the time run), each at most CAP_S
    true_s: float  # true runtime left, at most CAP_S


def _level_name(label: str) -> str:
    """A level's label without its team, model and size figures, for grouping."""
    if label.startswith(BEYOND):
        return BEYOND
    body = label.split(" (n=", maxsplit=1)[0]
    parts = body.split(" · ")
    if body == "fleet-wide":
        return body
    if body.startswith("≥"):
        return "≥size"
    if body.endswith("any size"):
        return "kind"
    return {4: "team·kind·model·size", 3: "team·kind·size" if "×" in parts[-1] else "?", 2: "kind·size", 1: "size"}.get(
        len(parts), body
    )


def _pits(args: tuple[str, int, int, int, int, int]) -> list[Pit]:
    fleet_name, days, trace_seed, at, samples, per = args
    fleet, jobs, truth = world(fleet_name, days, trace_seed)
    moment = moment_at(fleet, jobs, truth.records, at, config=SimulationConfig())
    true = {f"{j.namespace}/{j.job_id}": j.duration_s for j in jobs}
    subjects: list[tuple[str, Shape, int, int]] = []  # state, shape, elapsed, true runtime
    for r in moment.simulation.runs:
        if r.state in DONE:
            continue
        elapsed = ran_at_least(r, at)
        # waiting for quota, a victim has run before (preempted, evicted)
        state = ("victim" if elapsed > 0 else "waiting fresh") if r.state in WAITING else "running"
        subjects.append((state, shape_of(r), elapsed, true[r.key]))
    catalog = moment.simulation.catalog
    for j in jobs:
        if at < j.submit_s <= at + AHEAD_S:
            ask = catalog.ask_of(j)
            if ask is not None:
                shape = Shape(j.team, j.model, ask.resource, ask.count * j.pods, j.kind.value)
                subjects.append(("arriving", shape, 0, j.duration_s))
    rng = random.Random(at)
    below = [0.0] * len(subjects)
    left = [0.0] * len(subjects)
    for _ in range(samples):
        history = moment.history.bootstrap(rng)
        for i, (_, shape, elapsed, runtime) in enumerate(subjects):
            for _ in range(per):
                d = history.draw(shape, elapsed, rng)
                assert d is not None
                left[i] += min(d.runtime_s - elapsed, CAP_S)
                below[i] += 1.0 if d.runtime_s < runtime else rng.random() if d.runtime_s == runtime else 0.0
    out = []
    n = samples * per
    for (state, shape, elapsed, runtime), b, drawn in zip(subjects, below, left, strict=True):
        level = _level_name(moment.history.describe(shape, elapsed))
        weight = shape.gpus
        out.append(
            Pit(
                at,
                state,
                level,
                shape.kind,
                shape.team,
                shape.gpus,
                float(weight),
                b / n,
                drawn / n,
                float(min(runtime - elapsed, CAP_S)),
            )
        )
    return out


def table(title: str, pits: list[Pit], key: Callable[[Pit], str]) -> None:
    groups: dict[str, list[Pit]] = defaultdict(list)
    for p in pits:
        groups[key(p)].append(p)
    print(f"\n{title}")
    print(
        f"  {'':<24} {'n':>5} {'mean':>5} {'<0.1':>5} {'>0.9':>5} | {'GPUs':>6} {'mean':>5} {'<0.1':>5} {'>0.9':>5} | {'work drawn/true':>15}"
    )
    total = sum(p.weight for p in pits) or 1.0
    for label in sorted(groups):
        g = groups[label]
        w = sum(p.weight for p in g) or 1.0
        print(
            f"  {label:<24} {len(g):>5} {sum(p.pit for p in g) / len(g):>5.2f} "
            f"{sum(p.pit < 0.1 for p in g) / len(g):>5.0%} {sum(p.pit > 0.9 for p in g) / len(g):>5.0%} | "
            f"{sum(p.weight for p in g) / total:>6.0%} {sum(p.pit * p.weight for p in g) / w:>5.2f} "
            f"{sum(p.weight for p in g if p.pit < 0.1) / w:>5.0%} {sum(p.weight for p in g if p.pit > 0.9) / w:>5.0%} | "
            f"{sum(p.weight * p.drawn_s for p in g) / (sum(p.weight * p.true_s for p in g) or 1):>15.2f}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--moments", type=int, default=6)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--samples", type=int, default=40, help="bootstraps of the history per moment")
    parser.add_argument("--draws", type=int, default=5, help="draws per workload per bootstrap")
    parser.add_argument("--trace-seed", type=int, default=SEED)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--fleet", default="example", help="example, bench (the 1,000-GPU fleet) or a policy file")
    parser.add_argument(
        "--at", type=int, action="append", help="a moment (seconds into the week), in place of --moments"
    )
    args = parser.parse_args()
    problem = fleet_problem(args.fleet)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    ats = sorted(args.at) if args.at else moments(args.seed, args.moments, DAY, args.days * DAY)
    print(f"synthetic {args.days}-day week of the {args.fleet} fleet (trace seed {args.trace_seed}); moments {ats}; "
          f"{args.samples} bootstraps x {args.draws} draws per workload")  # fmt: skip
    pits: list[Pit] = []
    work = [(args.fleet, args.days, args.trace_seed, at, args.samples, args.draws) for at in ats]
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        for found in pool.map(_pits, work):
            pits += found
    table("by state (uniform: mean 0.50, 10 % in each tail)", pits, lambda p: p.state)
    table("by level drawn from", pits, lambda p: p.level)
    table("by state · level (running, waiting, victims)", [p for p in pits if p.state != "arriving"],
          lambda p: f"{p.state[:7]} {p.level}")  # fmt: skip
    table("by kind", pits, lambda p: p.kind)
    table("arriving, by team", [p for p in pits if p.state == "arriving"], lambda p: p.team)
    table("training by size", [p for p in pits if p.kind == "training"], lambda p: f"{p.gpus:>2} GPUs")
    table("by moment (not arriving)", [p for p in pits if p.state != "arriving"], lambda p: str(p.at))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
