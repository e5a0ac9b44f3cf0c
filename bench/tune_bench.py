"""Benchmark of issue 14: ``gpufleet tune`` on the 1,000-GPU synthetic fleet of ``simulate_week``.

The fleet and the workload generator are ``simulate_week``'s (six teams, one flooding; load 0.8). The
whole week's queue world takes about an hour of CPU on this 2-core machine, so a study on it would
take a day; ``--hours`` keeps only the jobs submitted in the first H hours of the synthesized week
(and stops every world at twice that, ``until_s``), so a study fits in minutes. The figures: the
trials per hour of wall time (and per CPU-hour of the worker processes), and the best policy's
goodput, worst team p95 wait, serving starvation, most preemptions of one job and Jain beside first
apply's and the input policy's, all measured over the slice (every figure simulated).

Run: ``python -m bench tune_bench [--hours H | --days D] [--trials N] [--jobs J] [--seed S]``
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path

from bench.simulate_week import policy_text
from gpufleet.demo import workload_spec
from gpufleet.policy import parse_policy, resolve
from gpufleet.simulate.config import SimulationConfig
from gpufleet.trace import synthesize
from gpufleet.tune.objectives import worst_p95_s
from gpufleet.tune.study import StudySpec
from gpufleet.tune.tuning import tune

HOUR = 3600


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=7, help="days to synthesize")
    parser.add_argument("--hours", type=float, default=None, help="keep the jobs of the first H hours only")
    parser.add_argument("--trials", type=int, default=6, help="the study's total, the input policy included")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    fleet = resolve(parse_policy(policy_text(), "bench-fleet.yaml"))
    gpus = sum(cap.pool.gpu_count for cap in fleet.pools.values())
    days = max(args.days, int(-(-(args.hours or 0) // 24)) or 1)
    jobs = synthesize(workload_spec(fleet, days=days), args.seed)
    span = round(args.hours * HOUR) if args.hours else days * 24 * HOUR
    jobs = [j for j in jobs if j.submit_s < span]
    config = SimulationConfig(until_s=2 * span)
    print(
        f"fleet: {gpus} GPUs; trace: {len(jobs)} jobs submitted in {span / HOUR:g} h; worlds stop at {2 * span / HOUR:g} h"
    )
    stages: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        spec = StudySpec(str(Path(tmp) / "study.journal"), trials=args.trials, jobs=args.jobs, seed=args.seed)
        started, cpu, child = time.perf_counter(), time.process_time(), _children_cpu()

        def stage(text: str) -> None:
            stages.append((text, time.perf_counter()))

        result = tune(fleet.policy, jobs, spec, config=config, window=(0, span), stage=stage)
        wall = time.perf_counter() - started
        cpu_s = time.process_time() - cpu + _children_cpu() - child
    marks = dict(stages)
    search_start = marks.get(f"searching: {spec.trials} trials, {spec.jobs} worker(s)", started)
    search_end = marks.get("simulating the recommended policy", started + wall)
    searched = len(result.trials) + result.pruned - 1  # the input policy is not a search trial
    search_s = max(search_end - search_start, 1e-9)
    print(
        f"study: {searched} trials (+ the input policy) in {search_s:,.0f} s wall with {spec.jobs} worker(s): "
        f"{searched / search_s * HOUR:,.1f} trials per hour; whole run {wall:,.0f} s wall, {cpu_s:,.0f} CPU-s"
    )
    print(
        f"{'world':12s} {'goodput GPU-h':>14s} {'worst p95 wait h':>17s} {'starved repl-min':>17s} "
        f"{'max preemptions':>16s} {'Jain':>6s}"
    )
    for w in result.worlds:
        m = w.measures
        jain = "–" if m.jain is None else f"{m.jain:.3f}"
        print(
            f"{w.name:12s} {m.goodput_gpu_h:14,.0f} {worst_p95_s(m) / HOUR:17,.1f} "
            f"{m.serving_starved_replica_min:17,.0f} {m.preemptions_max:16d} {jain:>6s}"
        )
    rec = result.recommended
    if rec is None:
        print("recommended: none: no trial met the constraints (" + "; ".join(result.constraints.describe()) + ")")
        print(f"  the tuned world is the input policy; pruned (invalid) trials: {result.pruned}")
    else:
        print(f"recommended: trial {rec.number} ({rec.source}), {len(result.changes)} changed setting(s)")
    first, given, tuned = (w.measures for w in result.worlds)
    if first.goodput_gpu_h and given.goodput_gpu_h:
        print(
            f"tuned / first-apply goodput {tuned.goodput_gpu_h / first.goodput_gpu_h:.3f}; "
            f"tuned / input goodput {tuned.goodput_gpu_h / given.goodput_gpu_h:.3f} (simulated)"
        )
    print("baseline: the issue names no target; the figures above are the measurement (on a slice when --hours is set)")


if __name__ == "__main__":
    main()
