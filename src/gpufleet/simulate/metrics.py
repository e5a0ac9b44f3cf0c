"""The figures of one run, as JSON-ready data with stable keys (documented in docs/simulate.md).

Definitions, all over the run's span ``[0, end]``:

- *wait* of a job: seconds it spent not running between submission and the start of the run that
  finished (or the end of the simulation, for a job that never got there); percentiles are
  nearest-rank: the p-th of n sorted waits is the ``ceil(p/100 · n)``-th.
- *GPU-hours*: what pods held, a MIG instance counting its compute slices over the card's and a
  time-slice replica 1/replicas of a card; bound-but-not-yet-running pods count (they hold the GPU).
- *share* of a team: its GPU-hours over all teams' (serving excluded); *weight share*: its weight
  over the sum of the policy's weights; *Jain's index* over the teams that submitted work, of their
  GPU-hours over their weighted max-min fair share of all teams' GPU-hours, capped by the work each
  asked for (``fair_shares``): 1 = each team got what it asked, or its weighted share of what was
  left when it asked more (share / weight share alone would call a team that asked for little unfair).
- *utilization*: allocated GPU-hours (serving included) over capacity GPU-hours (every card, for
  the whole span); *idle GPU-hours while work waited*: unallocated GPU-hours during the time at
  least one job waited.
- *admitted-but-unplaced hours*: hours jobs held quota without every pod running.
- *serving starved replica-minutes*: minutes each wanted replica had no GPU.
- *most preempted*: the jobs preempted most often (``MOST_PREEMPTED`` of them), ordered by
  preemptions, then work lost (more first), then ``namespace/job``; each with its preemptions
  counted by Kueue's reason and by the preemptor's team. A job preempted dozens of times is
  usually one side of a loop (reclaimed by a lender, then preempting back by fair sharing).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from gpufleet.simulate.config import HOUR
from gpufleet.simulate.jobs import WAITING, JobRun, State
from gpufleet.simulate.outcome import Outcome
from gpufleet.simulate.serving import SERVING
from gpufleet.trace.job import MILLI

MINUTE = 60
MOST_PREEMPTED = 5


def percentile(values: list[int], p: int) -> int:
    """Nearest-rank percentile of a non-empty list."""
    ordered = sorted(values)
    return ordered[max(math.ceil(p / 100 * len(ordered)), 1) - 1]


def wait_stats(waits: list[int]) -> dict[str, int | None]:
    if not waits:
        return {"p50": None, "p95": None, "max": None}
    return {"p50": percentile(waits, 50), "p95": percentile(waits, 95), "max": max(waits)}


def jain(values: Iterable[float]) -> float | None:
    """Jain's fairness index ``(Σx)² / (n·Σx²)``; None without values or when all are zero."""
    xs = list(values)
    squares = sum(x * x for x in xs)
    if not xs or squares == 0:
        return None
    return sum(xs) ** 2 / (len(xs) * squares)


MIG_SLICES = 7  # compute slices of an A100 or H100, for a MIG job that never bound (its pool unknown)


def demand(run: JobRun, window: tuple[int, int]) -> float:
    """GPU-seconds of work the job could have done in the window, had it started on arrival (or at the
    window's start): its pods' worth (as its holds
    counted it; a job never bound: one card per ``gpus``, a MIG instance its compute slices of seven,
    a time-slice share its milli-cards) times its runtime, cut at the window's end. A job that never
    ran asked for nothing the scheduler could give: a never-admissible job counts for no team's
    share (the stranding count judges those)."""
    if run.never:
        return 0.0
    job = run.job
    held = next((h.worth for a in run.attempts for h in a.holds), None)
    if held is None:
        mig = job.mig_profile.partition("g.")[0]
        held = job.gpus * (int(mig) / MIG_SLICES if mig.isdigit() else 1.0) or job.gpu_milli / MILLI
    return job.pods * held * max(0, min(job.duration_s, window[1] - max(job.submit_s, window[0])))


def fair_shares(demand: Mapping[str, float], weights: Mapping[str, float], total: float) -> dict[str, float]:
    """The weighted max-min fair split of ``total`` among teams that cannot use more than they asked
    (``demand``): water-filling, each team's share its weight times one common level, or its demand
    where that is less, and the level such that the shares add up to ``total`` (or to every demand,
    when ``total`` covers them all). Teams are filled in the order of demand per weight, then name.

    Why: a team that asked for less than its weighted share cannot be given more, so "every team got
    its weighted share" is only the fair outcome when every team wants more than that. A Jain index
    over goodput ÷ this share is 1 both when each got all it asked and when the teams left wanting
    split the rest by weight. Teams of weight 0 get nothing here (they only borrow what is idle)."""
    shares = dict.fromkeys(demand, 0.0)
    filling = sorted((t for t in demand if weights.get(t, 0.0) > 0), key=lambda t: (demand[t] / weights[t], t))
    left, weight_left = max(total, 0.0), sum(weights[t] for t in filling)
    for team in filling:
        level = left / weight_left
        share = min(demand[team], level * weights[team])
        shares[team] = share
        left -= share
        weight_left -= weights[team]
    return shares


def fair_jain(served: Mapping[str, float], demand: Mapping[str, float], weights: Mapping[str, float]) -> float | None:
    """Jain's index over the teams with demand and a share, of what each was served over its fair
    share (``fair_shares`` of everything served): 1 = the service was split max-min fair by weight."""
    shares = fair_shares(demand, weights, sum(served.get(t, 0.0) for t in demand))
    return jain(served.get(t, 0.0) / shares[t] for t in demand if shares[t] > 0)


def _hours(seconds: float) -> float:
    return round(seconds / HOUR, 3)


def _group(runs: list[JobRun], end: int) -> dict[str, Any]:
    return {
        "jobs": len(runs),
        "finished": sum(r.state is State.FINISHED for r in runs),
        "gpuHours": _hours(sum(r.held(end) for r in runs)),
        "waitSeconds": wait_stats([r.waited(end) for r in runs]),
        "preemptions": sum(r.preemptions for r in runs),
        "workLostGpuHours": _hours(sum(r.work_lost for r in runs)),
        "podsReadyEvictions": sum(r.requeues for r in runs),
        "admittedUnplacedHours": _hours(sum(r.unplaced(end) for r in runs)),
    }


def most_preempted(runs: list[JobRun]) -> list[dict[str, Any]]:
    """The jobs preempted most often, with who preempted them and why (see the module's docstring)."""
    team_of = {r.key: r.team for r in runs}
    worst = sorted((r for r in runs if r.preemptions), key=lambda r: (-r.preemptions, -r.work_lost, r.key))
    out = []
    for r in worst[:MOST_PREEMPTED]:
        ended = [a for a in r.attempts if a.end_reason == "Preempted"]
        out.append(
            {
                "job": r.key,
                "team": r.team,
                "kind": r.job.kind.value,
                "preemptions": r.preemptions,
                "workLostGpuHours": _hours(r.work_lost),
                "byReason": dict(sorted(Counter(a.end_detail for a in ended).items())),
                "byTeam": dict(sorted(Counter(team_of.get(a.end_by, "?") for a in ended).items())),
            }
        )
    return out


def summarize(outcome: Outcome) -> dict[str, Any]:
    end = outcome.end
    runs = outcome.runs
    meter = outcome.meter
    capacity = float(sum(p.gpus for p in outcome.pools.values()))
    by_team: dict[str, list[JobRun]] = defaultdict(list)
    by_kind: dict[str, list[JobRun]] = defaultdict(list)
    by_team_kind: dict[str, list[JobRun]] = defaultdict(list)
    for r in runs:
        by_team[r.team].append(r)
        by_kind[r.job.kind.value].append(r)
        by_team_kind[f"{r.team}/{r.job.kind.value}"].append(r)

    total_weight = sum(outcome.weights.values())
    batch_hours = sum(meter.total(f"team:{t}") for t in outcome.teams)
    teams: dict[str, Any] = {}
    served = {team: meter.total(f"team:{team}") for team in outcome.teams if by_team.get(team)}
    asked = {team: sum(demand(r, (0, end)) for r in by_team[team]) for team in served}
    for team in outcome.teams:
        group = _group(by_team.get(team, []), end)
        weight = outcome.weights.get(team, 0.0)
        share = meter.total(f"team:{team}") / batch_hours if batch_hours else 0.0
        weight_share = weight / total_weight if total_weight else 0.0
        group.update(
            weight=weight,
            weightShare=round(weight_share, 4),
            share=round(share, 4),
            shareOverWeight=round(share / weight_share, 4) if weight_share else None,
        )
        teams[team] = group

    allocated = meter.total("alloc")
    buckets = math.ceil(end / meter.bucket_s) if end else 0
    fleet = _group(runs, end)
    fleet.update(
        capacityGpus=capacity,
        capacityGpuHours=_hours(capacity * end),
        allocatedGpuHours=_hours(allocated),
        utilization=round(allocated / (capacity * end), 4) if capacity and end else 0.0,
        idleGpuHoursWhileWaiting=_hours(meter.total("idle_waiting")),
        jainIndex=None if (j := fair_jain(served, asked, outcome.weights)) is None else round(j, 4),
        running=sum(r.state is State.RUNNING for r in runs),
        waiting=sum(r.state in WAITING for r in runs),
        deactivated=sum(r.state is State.DEACTIVATED for r in runs),
        skippedNoGpu=len(outcome.skipped),
        jobsPreempted=sum(1 for r in runs if r.preemptions),
        mostPreempted=most_preempted(runs),
    )
    pools = {
        name: {
            "role": p.role,
            "mode": p.mode,
            "capacityGpus": p.gpus,
            "allocatedGpuHours": _hours(meter.total(f"pool:{name}")),
            "utilization": round(meter.total(f"pool:{name}") / (p.gpus * end), 4) if p.gpus and end else 0.0,
        }
        for name, p in outcome.pools.items()
    }
    serving = {
        "gpuHours": _hours(meter.total(f"team:{SERVING}")),
        "wantedReplicaMinutes": round(meter.total("serving_wanted") / MINUTE, 1),
        "starvedReplicaMinutes": round(meter.total("serving_starved") / MINUTE, 1),
    }
    series = {
        "bucketSeconds": meter.bucket_s,
        "start": [b * meter.bucket_s for b in range(buckets)],
        "allocatedGpus": {
            t: [round(v, 3) for v in meter.means(f"team:{t}", buckets)] for t in [*outcome.teams, SERVING]
        },
        "queueLength": [round(v, 3) for v in meter.means("waiting", buckets)],
        "admittedUnplaced": [round(v, 3) for v in meter.means("unplaced", buckets)],
        "servingStarvedReplicas": [round(v, 3) for v in meter.means("serving_starved", buckets)],
    }
    return {
        "mode": outcome.config.mode.value,
        "placement": str(outcome.config.placement),  # the engine resolved it: the CLI's or the policy's
        "endSeconds": end,
        "fleet": fleet,
        "teams": teams,
        "kinds": {k: _group(v, end) for k, v in sorted(by_kind.items())},
        "teamKinds": {k: _group(v, end) for k, v in sorted(by_team_kind.items())},
        "pools": pools,
        "serving": serving,
        "series": series,
    }
