"""Issue 34's speed targets for the live forecast: one workload within 2 s, and ``gpufleet forecast``
for a cluster of 1,000 pending and 500 running workloads within 30 s, on 2 cores.

The cluster is simulate_week's 1,000-GPU fleet. Its 640 H100 training cards are held, each team's
nominal quota exactly, by 500 running one- and two-GPU Workloads admitted over the last six hours;
1,000 Workloads of 1-8 GPUs wait behind them, created over the last three hours (all at priority
``batch``, so none could be admitted at once: the replay reproduces the cluster). The Workloads are
plain dicts shaped as the API server returns them, with the rendered LocalQueues, so what is timed
is the CLI's whole path minus the API server: ``live_state`` (the listing into a replay),
``forecast_live`` (the replay to now, then the sampled futures) and ``live_document`` (the JSON). The
ledger holds 3,000 finished runs of the same teams and sizes over the last week (log-normal runtimes,
median 40 min), read from memory: the database read is ``ledger_bench``'s.

"One workload" is ``gpufleet why NS/NAME`` / ``forecast --workload`` on the same cluster
(``Settings.only``: each sample stops once that workload is admitted, so its cost grows with its
wait): the next to start and the median one, each checked to get its entry of the full forecast.

Run: ``python -m bench forecast_speed [--samples 40] [--seed 0] [--pending 1000] [--running 500] [--profile FILE]``
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import json
import math
import os
import random
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from bench.simulate_week import TEAMS, TRAIN, policy_text
from gpufleet.cli.forecast import cores
from gpufleet.compiled import running
from gpufleet.forecast.estimate import Report, Settings
from gpufleet.forecast.live import forecast_live, live_document, live_state
from gpufleet.ledger.records import Allocation, EndReason, Placement
from gpufleet.policy import Fleet, parse_policy, resolve
from gpufleet.render import kueue
from gpufleet.simulate.config import SimulationConfig

TARGET_ALL_S, TARGET_ONE_S = 30.0, 2.0
NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
GPU = "nvidia.com/gpu"
Obj = dict[str, Any]


def _stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _workload(team: str, name: str, gpus: int, created: datetime, admitted: datetime | None) -> Obj:
    conditions: list[Obj] = []
    status: Obj = {"conditions": conditions}
    if admitted is not None:
        for kind in ("QuotaReserved", "Admitted"):
            conditions.append({"type": kind, "status": "True", "lastTransitionTime": _stamp(admitted)})
        status["admission"] = {"clusterQueue": team, "podSetAssignments": []}
    else:
        conditions.append({"type": "QuotaReserved", "status": "False", "lastTransitionTime": _stamp(created)})
    template = {"spec": {"containers": [{"name": "main", "resources": {"requests": {GPU: str(gpus)}}}]}}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": f"job-{name}-0a1b2",
            "namespace": team,
            "uid": f"uid-{team}-{name}",
            "creationTimestamp": _stamp(created),
            "ownerReferences": [{"kind": "Job", "name": name}],
        },
        "spec": {
            "queueName": team,
            "priority": 100,
            "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "batch"},
            "podSets": [{"name": "main", "count": 1, "template": template}],
        },
        "status": status,
    }


def cluster(fleet: Fleet, running: int, pending: int, rng: random.Random) -> list[Obj]:
    """The rendered LocalQueues and the Workloads (see the module's docstring)."""
    objects: list[Obj] = list(kueue.local_queues(fleet))
    total = sum(TRAIN)
    counts = [running * q // total for q in TRAIN]
    counts[0] += running - sum(counts)
    for team, quota, count in zip(TEAMS, TRAIN, counts, strict=True):
        two = quota - count  # two-GPU Workloads, the rest one-GPU: exactly the team's nominal quota
        if not 0 <= two <= count:
            raise SystemExit(f"--running {running} cannot fill {team}'s {quota} GPUs with 1- and 2-GPU Workloads")
        for i in range(count):
            admitted = NOW - timedelta(seconds=rng.randint(60, 6 * 3600))
            created = admitted - timedelta(seconds=rng.randint(0, 600))
            objects.append(_workload(team, f"run-{i:04d}", 2 if i < two else 1, created, admitted))
    for i in range(pending):
        team = TEAMS[i % len(TEAMS)]
        created = NOW - timedelta(seconds=rng.randint(30, 3 * 3600))
        objects.append(_workload(team, f"wait-{i:04d}", rng.choice((1, 1, 2, 4, 8)), created, None))
    return objects


def ledger(runs: int, rng: random.Random) -> list[Allocation]:
    """Finished runs of the last week, the teams' and sizes' of the cluster."""
    out = []
    for i in range(runs):
        team, gpus = TEAMS[i % len(TEAMS)], rng.choice((1, 1, 2, 4, 8))
        started = NOW - timedelta(seconds=rng.randint(6 * 3600, 7 * 86_400))
        runtime = max(60, min(int(math.exp(rng.gauss(math.log(2400), 1.0))), 3 * 86_400))
        finished = min(started + timedelta(seconds=runtime), NOW - timedelta(minutes=1))
        out.append(
            Allocation(
                workload_uid=f"old-{i}", attempt=1, namespace=team, name=f"old-{i}", team=team, model=None,
                data_class="internal", checkpoint=None, local_queue=team, cluster_queue=team, priority=100,
                flavors=((GPU, "h100-train"),), gpu_resource=GPU, gpu_count=gpus,
                placements=(Placement(f"h100-train-{i % 80}", gpus, (), "H100-SXM5-80GB"),),
                created=started, quota_reserved=started, admitted=started, started=started, finished=finished,
                end_reason=EndReason.FINISHED, end_detail="", end_message="", borrowing=False, simulated=False,
            )
        )  # fmt: skip
    return out


def _cpu() -> float:
    """CPU seconds of this process and of its finished children (the forecast's sample workers)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def timed(work: Callable[[], Any]) -> tuple[Any, float, float]:
    wall, cpu = time.perf_counter(), _cpu()
    result = work()
    return result, time.perf_counter() - wall, _cpu() - cpu


def whole_path(fleet: Fleet, objects: list[Obj], records: list[Allocation], settings: Settings) -> dict[str, Any]:
    """What ``gpufleet forecast --json`` does after the API server answered."""
    state = live_state(objects, fleet, NOW)
    report = forecast_live(state, fleet, records, settings, SimulationConfig())
    return live_document(report, state, "fleet.yaml", "ledger")


def summary(report: Report) -> str:
    given = sum(1 for f in report.forecasts if f.quantiles)
    declined: dict[str, int] = {}
    for f in report.forecasts:
        if f.declined:
            declined[f.declined.split(":")[0]] = declined.get(f.declined.split(":")[0], 0) + 1
    return f"{len(report.forecasts)} forecasts, {given} with a figure, declined {declined or 'none'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=40, help="futures sampled (the CLI's default: 40)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pending", type=int, default=1000)
    parser.add_argument("--running", type=int, default=500)
    parser.add_argument("--history", type=int, default=3000, help="finished runs in the ledger")
    parser.add_argument("--workers", type=int, default=0, help="processes for the samples (0: every core, the CLI's)")
    parser.add_argument(
        "--profile",
        help="write a cProfile of forecast_live to this file (its parent process: with GPUFLEET_PURE=1 and "
        "--workers 1 the samples run in it; compiled code is invisible to cProfile)",
    )
    args = parser.parse_args()
    rng = random.Random(args.seed)
    fleet = resolve(parse_policy(policy_text(), "forecast_speed.yaml"))
    objects = cluster(fleet, args.running, args.pending, rng)
    records = ledger(args.history, rng)
    settings = Settings(samples=args.samples, seed=args.seed, workers=args.workers or cores())
    print(
        f"forecast_speed: {args.running} running and {args.pending} pending Workloads on simulate_week's fleet, "
        f"{args.history} finished runs, {args.samples} samples (seed {args.seed}) in {settings.workers} processes"
    )
    state, wall, cpu = timed(lambda: live_state(objects, fleet, NOW))
    print(f"  live_state (listing into the replay's jobs): {wall:.2f} s wall, {cpu:.2f} CPU-s")
    print(f"  load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(
        f"  simulator: {'compiled (make compiled)' if running() else 'from source (not compiled, or GPUFLEET_PURE=1)'}"
    )
    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        report = forecast_live(state, fleet, records, settings, SimulationConfig())
        profiler.disable()
        profiler.dump_stats(args.profile)
        print(f"  profile of forecast_live written to {args.profile}; {summary(report)}")
    doc, wall, cpu = timed(lambda: whole_path(fleet, objects, records, settings))
    given = sum(1 for w in doc["workloads"] if w["admissionSeconds"])
    # the answer's fingerprint: runs with the same seed must print the same, whatever --workers
    answer = [(w["workload"], w["admissionSeconds"], w["waitsFor"]) for w in doc["workloads"]]
    digest = hashlib.sha256(json.dumps(answer, sort_keys=True).encode()).hexdigest()[:16]
    print(
        f"forecast, every pending workload (the CLI's path minus the API server): {wall:.2f} s wall, "
        f"{cpu:.2f} CPU-s; {len(doc['workloads'])} forecasts, {given} with a figure (answer {digest}); "
        f"target {TARGET_ALL_S:.0f} s: {wall / TARGET_ALL_S:.2f}x the target"
    )
    # `why NS/NAME` and `forecast --workload` forecast one (``Settings.only``): its samples stop at its
    # admission, so the cost grows with its wait; the next to start and the median one
    given_docs = sorted(
        (w for w in doc["workloads"] if w["admissionSeconds"]),
        key=lambda w: (w["admissionSeconds"]["p50"] or 1e12, w["workload"]),
    )
    for label, w in (("the next to start", given_docs[0]), ("the median", given_docs[len(given_docs) // 2])):
        one = replace(settings, only=frozenset({w["workload"]}))
        got, wall, cpu = timed(partial(whole_path, fleet, objects, records, one))
        same = [x for x in got["workloads"] if x["workload"] == w["workload"]] == [w]
        print(
            f"forecast, one workload ({label}: {w['workload']}, p50 {w['admissionSeconds']['p50']} s; `why`, "
            f"--workload): {wall:.2f} s wall, {cpu:.2f} CPU-s, {'the same answer' if same else 'A DIFFERENT ANSWER'}; "
            f"target {TARGET_ONE_S:.0f} s: {wall / TARGET_ONE_S:.2f}x the target"
        )


if __name__ == "__main__":
    main()
