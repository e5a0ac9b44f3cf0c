"""Kueue's scheduler performance baseline, rebuilt as a trace and run through the twin.

Kueue's ``test/performance/scheduler`` baseline: 5 cohorts x 6 ClusterQueues, each with nominal
20 CPU, borrowingLimit 100, reclaimWithinCohort Any, withinClusterQueue LowerPriority; per
ClusterQueue 350 small (1 CPU, 200 ms, priority 50, one every 100 ms), 100 medium (5 CPU,
500 ms, priority 100, one every 500 ms) and 50 large (20 CPU, 1 s, priority 200, one every
1.2 s): 15,000 workloads. Kueue publishes the means of its periodic runs (rangespec.yaml).

A minimal event loop drives the twin: arrivals and completions at integer milliseconds, and
scheduling cycles that take either no time (instant) or a fixed latency per cycle, calibrated so
that the simulated makespan matches Kueue's (the other figures are then a check, not a fit).

Run: ``python -m bench twin_kueue_perf`` (``--latency-ms X`` skips calibration).
"""

from __future__ import annotations

import argparse
import heapq
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from gpufleet.twin.apis.specs import (
    ANY,
    LOWER_PRIORITY,
    ClusterQueueSpec,
    ClusterSpec,
    ConfigSpec,
    FlavorQuotasSpec,
    LabelSelector,
    LocalQueueSpec,
    PodSetSpec,
    PreemptionSpec,
    ResourceFlavorSpec,
    ResourceGroupSpec,
    ResourceQuotaSpec,
    WorkloadSpec,
)
from gpufleet.twin.kueue import Twin

KUEUE = {"wall_s": 351.0, "usage_pct": 55.9, "tta_large_s": 16.5, "tta_medium_s": 76.8, "tta_small_s": 215.0}
CLASSES = {  # name: (cpu, runtime ms, priority, interarrival ms, count per ClusterQueue)
    "small": (1, 200, 50, 100, 350),
    "medium": (5, 500, 100, 500, 100),
    "large": (20, 1000, 200, 1200, 50),
}


@dataclass(order=True)
class Job:
    """One trace entry: when it arrives, how long it runs once admitted, and its class."""

    arrival_ms: int
    name: str = field(compare=True)
    cluster_queue: str = field(compare=False)
    cpu_milli: int = field(compare=False)
    runtime_ms: int = field(compare=False)
    priority: int = field(compare=False)
    klass: str = field(compare=False)
    spec: WorkloadSpec | None = field(compare=False, default=None)

    def workload(self) -> WorkloadSpec:
        """The Workload this job submits (built when the trace is built, outside any timing)."""
        if self.spec is None:
            pod = PodSetSpec("main", 1, (("cpu", self.cpu_milli),))
            self.spec = WorkloadSpec("ns", self.name, self.cluster_queue, (pod,), self.priority, self.arrival_ms)
        return self.spec


def cluster(
    cohorts: int, queues_per_cohort: int, nominal_cpu: int, borrowing_cpu: int | None, *, fair: bool
) -> ClusterSpec:
    """The baseline's quota tree as frozen specs (no YAML in the loop)."""
    cqs = {}
    lqs = {}
    for c in range(cohorts):
        for q in range(queues_per_cohort):
            name = f"cq-{c}-{q}"
            quota = ResourceQuotaSpec(
                "cpu", nominal_cpu * 1000, None if borrowing_cpu is None else borrowing_cpu * 1000
            )
            cqs[name] = ClusterQueueSpec(
                name=name,
                cohort=f"cohort-{c}",
                resource_groups=(ResourceGroupSpec(("cpu",), (FlavorQuotasSpec("default", (quota,)),)),),
                namespace_selector=LabelSelector(),
                preemption=PreemptionSpec(within_cluster_queue=LOWER_PRIORITY, reclaim_within_cohort=ANY),
            )
            lqs[f"ns/{name}"] = LocalQueueSpec("ns", name, name)
    return ClusterSpec({"default": ResourceFlavorSpec("default")}, {}, cqs, lqs, {}, (), ConfigSpec(fair_sharing=fair))


def baseline_trace(cohorts: int = 5, queues_per_cohort: int = 6) -> list[Job]:
    jobs = []
    for c in range(cohorts):
        for q in range(queues_per_cohort):
            cq = f"cq-{c}-{q}"
            for klass, (cpu, runtime, prio, every, count) in CLASSES.items():
                for i in range(count):
                    job = Job(i * every, f"{cq}-{klass}-{i}", cq, cpu * 1000, runtime, prio, klass)
                    job.workload()
                    jobs.append(job)
    return sorted(jobs)


@dataclass
class Outcome:
    makespan_ms: int
    usage_pct: float
    tta_ms: dict[str, float]
    cycles: int
    admissions: int
    preemptions: int
    wall_clock_s: float
    cpu_s: float


def simulate(spec: ClusterSpec, jobs: Iterable[Job], latency_ms: int) -> Outcome:
    """Drive the twin: apply due arrivals and completions, run a cycle, advance the clock.

    With ``latency_ms == 0`` cycles are instant: after each event time, cycles run until one
    changes nothing. Otherwise each cycle costs ``latency_ms`` of simulated time, and the clock
    jumps to the next event when the twin has nothing left to try.
    """
    started, cpu_started = time.perf_counter(), time.process_time()
    twin = Twin(spec)
    nominal = sum(cq.node.subtree[0] for cq in twin.tree.cluster_queues.values())
    by_name: dict[str, Job] = {}
    arrivals = list(jobs)
    arrivals.reverse()
    completions: list[tuple[int, str, int]] = []  # (time, workload key, admission epoch)
    epoch: dict[str, int] = {}
    admitted_at: dict[str, int] = {}
    tta: dict[str, list[int]] = {k: [] for k in CLASSES}
    now = cycles = admissions = preemptions = 0
    used_area = 0  # integral of total usage over time (milli-cpu x ms)
    last_t = 0
    usage = 0  # reserved milli-CPU across all ClusterQueues, kept up to date per event
    while arrivals or completions or twin.has_heads():
        used_area += usage * (now - last_t)  # usage was constant since the previous event
        last_t = now
        while arrivals and arrivals[-1].arrival_ms <= now:
            job = arrivals.pop()
            key = f"ns/{job.name}"
            by_name[key] = job
            twin.add_workload(job.workload())
        while completions and completions[0][0] <= now:
            _, key, ep = heapq.heappop(completions)
            if epoch.get(key) == ep and key in twin.workloads:
                twin.finish(key)
                usage -= by_name[key].cpu_milli
        changed = False
        for _ in range(1 if latency_ms else 1000):
            result = twin.run_cycle()
            cycles += 1
            done = now + latency_ms  # a cycle's decisions land when the cycle ends
            for a in result.admitted:
                key = a.workload
                job = by_name[key]
                epoch[key] = ep = epoch.get(key, 0) + 1
                admitted_at[key] = done
                heapq.heappush(completions, (done + job.runtime_ms, key, ep))
                usage += job.cpu_milli
            preemptions += len(result.preempted)
            for p in result.preempted:
                epoch[p.workload] = epoch.get(p.workload, 0) + 1
                usage -= by_name[p.workload].cpu_milli
            admissions += len(result.admitted)
            changed = changed or result.changed
            if latency_ms or not result.changed:
                break
        if latency_ms and (changed or twin.has_heads()) and _worth_retrying(twin, changed):
            now += latency_ms
            continue
        upcoming = [
            t
            for t in (
                arrivals[-1].arrival_ms if arrivals else None,
                completions[0][0] if completions else None,
            )
            if t is not None
        ]
        if not upcoming:
            break
        now = max(now + (latency_ms if changed else 0), min(upcoming)) if latency_ms else min(upcoming)
    makespan = max(now, max((t for t, _, _ in completions), default=now))
    used_area += usage * (makespan - last_t)
    for key, job in by_name.items():
        tta[job.klass].append(admitted_at.get(key, makespan) - job.arrival_ms)
    return Outcome(
        makespan,
        100.0 * used_area / (nominal * makespan) if makespan else 0.0,
        {k: (sum(v) / len(v) if v else 0.0) for k, v in tta.items()},
        cycles,
        admissions,
        preemptions,
        time.perf_counter() - started,
        time.process_time() - cpu_started,
    )


def _worth_retrying(twin: Twin, changed: bool) -> bool:
    """A busy scheduler keeps cycling; an idle one waits for the next event."""
    return changed or any(q.active for q in twin.queues.by_cq.values())


def calibrate(spec: ClusterSpec, jobs: list[Job], target_s: float) -> tuple[int, Outcome]:
    """Bisect the per-cycle latency (ms) whose simulated makespan is closest to ``target_s``."""
    lo, hi = 1, 2000
    best: tuple[int, Outcome] | None = None
    while lo <= hi:
        mid = (lo + hi) // 2
        out = simulate(spec, jobs, mid)
        if best is None or abs(out.makespan_ms / 1000 - target_s) < abs(best[1].makespan_ms / 1000 - target_s):
            best = (mid, out)
        if out.makespan_ms / 1000 < target_s:
            lo = mid + 1
        else:
            hi = mid - 1
    assert best is not None
    return best


def report(label: str, out: Outcome, latency_ms: int) -> list[str]:
    figures = {
        "wall_s": out.makespan_ms / 1000,
        "usage_pct": out.usage_pct,
        "tta_large_s": out.tta_ms["large"] / 1000,
        "tta_medium_s": out.tta_ms["medium"] / 1000,
        "tta_small_s": out.tta_ms["small"] / 1000,
    }
    lines = [
        f"{label} (cycle latency {latency_ms} ms; {out.cycles} cycles, {out.admissions} admissions, "
        f"{out.preemptions} preemptions; twin ran in {out.wall_clock_s:.1f} s, {out.cpu_s:.1f} s of CPU)"
    ]
    lines.append(f"  {'metric':<14}{'Kueue':>10}{'twin':>10}{'twin/Kueue':>12}")
    for key, kueue in KUEUE.items():
        mine = figures[key]
        lines.append(f"  {key:<14}{kueue:>10.1f}{mine:>10.1f}{mine / kueue:>12.2f}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency-ms", type=int, default=None, help="per-cycle latency; default: calibrate")
    args = parser.parse_args()
    spec = cluster(5, 6, 20, 100, fair=False)
    jobs = baseline_trace()
    print(f"Kueue scheduler baseline as a trace: {len(jobs)} workloads, 30 ClusterQueues in 5 cohorts")
    instant = simulate(spec, jobs, 0)
    print("\n".join(report("instant cycles", instant, 0)))
    if args.latency_ms is None:
        latency, calibrated = calibrate(spec, jobs, KUEUE["wall_s"])
    else:
        latency, calibrated = args.latency_ms, simulate(spec, jobs, args.latency_ms)
    print("\n".join(report("calibrated cycles", calibrated, latency)))


if __name__ == "__main__":
    main()
