"""The twin at scale: 1,000,000 workloads, 1,000 ClusterQueues in 10 cohorts, fair sharing on.

Workloads per second are counted per CPU-second of this process (``time.process_time``), so a
busy shared machine does not distort the figure; real time is printed too.

Each ClusterQueue has 10 CPU of nominal quota and may borrow from its cohort; one workload
(1-4 CPU, 1-8 s) arrives per ClusterQueue per simulated second, so the cohorts run close to
full and fair sharing orders every cycle. Cycles are instant (the event loop of
``twin_kueue_perf``). The figure is workloads admitted per second of real time, on one core.

Per-CPU-second figures move with the machine (``_revision.py``): ``--against [REV]`` also runs
this benchmark as of ``REV`` (default: issue 18's baseline, 7e47630) on the same machine and
prints the ratio between the two, the figure to hold against the target's 4.92x.

Run: ``python -m bench twin_scale [--workloads N] [--profile] [--against [REV]]``.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import random
import time

from bench._revision import add_option, figures_at
from bench.twin_kueue_perf import Job, cluster, simulate

TARGET_PER_S = 50_000
BASELINE_PER_S = 10_167  # issue 18's measurement before scheduling equivalence and the path split
COHORTS, QUEUES_PER_COHORT = 10, 100


def scale_trace(workloads: int, seed: int = 7) -> list[Job]:
    rng = random.Random(seed)
    queues = COHORTS * QUEUES_PER_COHORT
    jobs = []
    for i in range(workloads):
        cq = i % queues
        second = i // queues
        cpu = rng.choice((1, 1, 2, 4))
        job = Job(
            second * 1000,
            f"w{i}",
            f"cq-{cq // QUEUES_PER_COHORT}-{cq % QUEUES_PER_COHORT}",
            cpu * 1000,
            rng.randint(1, 8) * 1000,
            rng.choice((0, 0, 100)),
            "small",
        )
        job.workload()  # the Workload is part of the trace, built outside the timing
        jobs.append(job)
    return sorted(jobs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", type=int, default=1_000_000)
    parser.add_argument("--profile", action="store_true", help="print where the time goes (cProfile)")
    add_option(parser)
    args = parser.parse_args()
    spec = cluster(COHORTS, QUEUES_PER_COHORT, 10, None, fair=True)
    jobs = scale_trace(args.workloads)
    queues = COHORTS * QUEUES_PER_COHORT
    print(f"{args.workloads} workloads, {queues} ClusterQueues in {COHORTS} cohorts, fair sharing on")
    profiler = cProfile.Profile() if args.profile else None
    started = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    out = simulate(spec, jobs, 0)
    if profiler is not None:
        profiler.disable()
    elapsed = time.perf_counter() - started
    rate = out.admissions / out.cpu_s
    print(
        f"admissions {out.admissions}, preemptions {out.preemptions}, cycles {out.cycles}, "
        f"simulated {out.makespan_ms / 1000:.0f} s, mean CQ usage {out.usage_pct:.1f} %"
    )
    print(
        f"real time {elapsed:.1f} s, CPU time {out.cpu_s:.1f} s -> {rate:,.0f} workloads admitted per "
        f"CPU-second on one core (target {TARGET_PER_S:,}; ratio {rate / TARGET_PER_S:.2f}; "
        f"before: {BASELINE_PER_S:,} on issue 18's machine, {rate / BASELINE_PER_S:.2f}x; --against for this machine's)"
    )
    if profiler is not None:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(18)
    if args.against:
        against(args.against, args.workloads, rate)


def against(rev: str, workloads: int, rate: float) -> None:
    """The same run as of ``rev`` on this machine, and the ratio the target is measured by."""
    rates = {"admissions per CPU-second": r"([\d,]+) workloads admitted per CPU-second"}
    (before,) = figures_at(rev, "twin_scale", ["--workloads", str(workloads)], rates).values()
    print(
        f"same machine: {rev} {before:,.0f} admitted per CPU-second, this code {rate:,.0f}: {rate / before:.2f}x "
        f"(the target asks {TARGET_PER_S / BASELINE_PER_S:.2f}x: {TARGET_PER_S:,} against issue 18's {BASELINE_PER_S:,})"
    )


if __name__ == "__main__":
    main()
