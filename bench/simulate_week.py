"""Benchmark 2 of issue 4: one synthetic week on a 1,000-GPU fleet, simulated end to end.

The fleet: 640 H100 training cards (80 nodes), 160 A100 cards cut all-balanced into MIG instances
(20 nodes), 104 time-sliced L40S cards (26 nodes, 4 replicas each) and 96 H100 serving cards
(12 nodes) running two vLLM deployments; six teams share the queued pools, one of them floods
the queue. The week comes from the same generator as ``gpufleet demo`` (load 0.8). Both worlds
are simulated: the queue (the rendered Kueue objects in the twin, the scheduler model, the
serving curve, waitForPodsReady) and the first apply. The figure is simulated jobs per second of
wall time, end to end (building the run, the event loop, metrics and ledger records included), and
per CPU second (what a busy machine does not distort); the queue world also prints how many Kueue
scheduling cycles the twin ran, which is what its cost grows with.

Issue 18's targets for the queue world: at most 60 CPU-s for the week, and within 3x the first-apply
world's CPU time on the same trace; before scheduling equivalence it replayed 153 million Kueue
cycles in 3,619 CPU-s. ``--check-paths N`` also runs the first N jobs through the queue world with
the twin on its reference path (no memo, no streaks) and on the fast path, and demands identical
results (summary, ledger records, job rows).

Per-CPU-second figures move with the machine (``_revision.py``): ``--against [REV]`` also runs
this benchmark as of ``REV`` (default: issue 18's baseline, 7e47630) on the same machine, same days
and seed, and prints the ratios between the two. The baseline is slow: its first day takes about
45 CPU-s and its week 3,619 CPU-s on issue 18's machine (2,482 on a faster one); ``--days 1`` or
``2`` gives a ratio in minutes.

Run: ``make bench NAME=simulate_week`` or
``python -m bench simulate_week [--days N] [--seed S] [--check-paths N] [--against [REV]]``
"""

from __future__ import annotations

import argparse
import sys
import time

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from bench._revision import add_option, figures_at
from gpufleet.demo import workload_spec
from gpufleet.policy import Fleet, parse_policy, resolve
from gpufleet.simulate.config import Mode, SimulationConfig
from gpufleet.simulate.result import RunResult
from gpufleet.simulate.run import simulate
from gpufleet.trace import synthesize
from gpufleet.trace.job import Job

BASELINE_CYCLES, BASELINE_CPU_S = 153_000_000, 3_619.0  # the queue world's week before issue 18
TARGET_CPU_S, TARGET_FIRST_APPLY_RATIO = 60.0, 3.0
TEAMS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta")
TRAIN = (160, 120, 120, 80, 80, 80)  # H100 cards per team: 640


def policy_text() -> str:
    teams = []
    for name, train in zip(TEAMS, TRAIN, strict=True):
        weight = train // 40
        teams.append(
            f"""  - name: {name}
    namespaces: [{name}]
    weight: {weight}
    quota:
      h100-train: {{gpus: {train}}}
      a100-mig: {{mig: {{1g.10gb: 50, 2g.20gb: 25, 3g.40gb: 25}}}}
      l40s-dev: {{gpus: 64}}
    priorityClasses: [train-high, batch, dev]
    dataClasses: [internal]"""
        )
    return f"""apiVersion: gpufleet.io/v1alpha1
kind: FleetPolicy
cluster: {{provider: onprem, kubernetes: "1.34", dra: off}}
pools:
  - {{name: h100-train, gpu: H100-SXM5-80GB, nodes: 80, gpusPerNode: 8, role: training, slicing: {{mode: full}}}}
  - {{name: a100-mig, gpu: A100-SXM4-80GB, nodes: 20, gpusPerNode: 8, role: batch,
     slicing: {{mode: mig, layout: all-balanced}}}}
  - {{name: l40s-dev, gpu: L40S, nodes: 26, gpusPerNode: 4, role: dev, slicing: {{mode: timeslice, replicas: 4}}}}
  - {{name: h100-serve, gpu: H100-SXM5-80GB, nodes: 12, gpusPerNode: 8, role: serving}}
teams:
{chr(10).join(teams)}
priorityClasses:
  - {{name: train-high, value: 1000}}
  - {{name: batch, value: 100}}
  - {{name: dev, value: 10}}
dataClasses: [{{name: internal, checkpointLocations: ["s3://eu-central-1/"]}}]
serving:
  pool: h100-serve
  deployments:
    - {{name: chat, model: meta-llama/Llama-3.1-70B-Instruct, replicas: 8, gpusPerReplica: 4}}
    - {{name: chat-small, model: meta-llama/Llama-3.1-8B-Instruct, replicas: 64, gpusPerReplica: 1}}
"""


def run(fleet: Fleet, jobs: list[Job], mode: Mode, *, reference: bool = False) -> RunResult:
    """One world, with a transient bar over the jobs that have arrived."""
    columns = (TextColumn(mode.value), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    config = SimulationConfig(mode=mode, reference_twin=reference)
    with Progress(*columns, transient=True) as bar:
        task = bar.add_task(mode.value, total=len(jobs))
        return simulate(fleet, jobs, config, lambda n, _: bar.update(task, completed=n))


def check_paths(fleet: Fleet, jobs: list[Job]) -> bool:
    """The queue world on the twin's reference path and on its fast path: identical results."""
    cpu = time.process_time()
    reference = run(fleet, jobs, Mode.QUEUE, reference=True)
    reference_s, cpu = time.process_time() - cpu, time.process_time()
    fast = run(fleet, jobs, Mode.QUEUE)
    fast_s = time.process_time() - cpu
    same = (
        reference.summary == fast.summary
        and reference.records == fast.records
        and reference.rows == fast.rows
        and reference.outcome.kueue_cycles == fast.outcome.kueue_cycles
    )
    print(
        f"paths: first {len(jobs)} jobs, reference {reference_s:.1f} CPU-s, fast {fast_s:.1f} CPU-s, "
        f"Kueue cycles {reference.outcome.kueue_cycles:,} and {fast.outcome.kueue_cycles:,}: "
        + ("identical results" if same else "RESULTS DIFFER")
    )
    return same


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--check-paths", type=int, default=0, metavar="N", help="compare both twin paths on N jobs")
    add_option(parser)
    args = parser.parse_args()
    fleet = resolve(parse_policy(policy_text(), "bench-fleet.yaml"))
    gpus = sum(cap.pool.gpu_count for cap in fleet.pools.values())
    started = time.perf_counter()
    jobs = synthesize(workload_spec(fleet, days=args.days), args.seed)
    synth_s = time.perf_counter() - started
    print(
        f"fleet: {gpus} GPUs in {len(fleet.pools)} pools; trace: {len(jobs)} jobs over {args.days} days (synthesized in {synth_s:.2f} s)"
    )
    if args.check_paths and not check_paths(fleet, jobs[: args.check_paths]):
        sys.exit(1)
    cpu_of: dict[Mode, float] = {}
    cycles = 0
    for mode in (Mode.QUEUE, Mode.FIRST_APPLY):
        started, cpu = time.perf_counter(), time.process_time()
        result = run(fleet, jobs, mode)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        cpu_of[mode] = cpu
        cycles = cycles or result.outcome.kueue_cycles
        f = result.summary["fleet"]
        print(
            f"{mode.value:12s} {wall:8.1f} s wall {cpu:8.1f} s CPU  {len(jobs) / wall:7.1f} jobs/s "
            f"({len(jobs) / cpu:.1f} per CPU-s)  Kueue cycles {result.outcome.kueue_cycles:,}  "
            f"utilization {f['utilization']:.1%}  finished {f['finished']}/{f['jobs']}  "
            f"preemptions {f['preemptions']}  podsReady evictions {f['podsReadyEvictions']}  "
            f"ledger records {len(result.records)}"
        )
    queue_s, first_s = cpu_of[Mode.QUEUE], cpu_of[Mode.FIRST_APPLY]
    print(
        f"Kueue cycles replayed: {cycles:,} (before: {BASELINE_CYCLES:,} for the 7-day week, "
        f"{BASELINE_CPU_S:,.0f} CPU-s on issue 18's machine; --against for this machine's)"
    )
    scale = f" (this run covers {args.days} days; the targets are for 7)" if args.days != 7 else ""
    print(
        f"queue world {queue_s:.1f} CPU-s: target <= {TARGET_CPU_S:.0f} (ratio {queue_s / TARGET_CPU_S:.2f}); "
        f"{queue_s / first_s:.1f}x first apply's {first_s:.1f} CPU-s, target <= {TARGET_FIRST_APPLY_RATIO:.0f}x "
        f"(ratio {queue_s / first_s / TARGET_FIRST_APPLY_RATIO:.2f}){scale}"
    )
    if args.against:
        against(args.against, args.days, args.seed, queue_s, first_s)


def against(rev: str, days: int, seed: int, queue_s: float, first_s: float) -> None:
    """The same trace as of ``rev`` on this machine, and the ratios the targets are measured by."""
    cpu = r"\s+[\d.]+ s wall\s+([\d.]+) s CPU"
    worlds = {f"{mode.value} CPU-s": rf"(?m)^{mode.value}{cpu}" for mode in (Mode.QUEUE, Mode.FIRST_APPLY)}
    queue_before, first_before = figures_at(
        rev, "simulate_week", ["--days", str(days), "--seed", str(seed)], worlds
    ).values()
    print(
        f"same machine: {rev} queue world {queue_before:.1f} CPU-s, this code {queue_s:.1f}: "
        f"{queue_before / queue_s:.2f}x faster (the week's target asks {BASELINE_CPU_S / TARGET_CPU_S:.1f}x: "
        f"{TARGET_CPU_S:.0f} against issue 18's {BASELINE_CPU_S:,.0f}); first apply {first_before:.1f} and "
        f"{first_s:.1f} CPU-s"
    )


if __name__ == "__main__":
    main()
