"""The measures that answer "which policy should we run?", both worlds over one stated window.

The older figures (``gpufleet.simulate.metrics``) count every GPU a pod held as allocated, each over
its own run's span. These separate what the GPUs did, from the pods' holds the engine records
(``Attempt.holds``), each clipped to the window ``[start, end]``:

- *goodput*: GPU-hours of runs that completed (an attempt that ended ``Finished``, from its start);
- *held idle*: GPU-hours of pods bound for an attempt that was not running: a partial gang, pods
  waiting for their siblings, an admitted job not yet started;
- *lost*: GPU-hours of runs that were preempted (no checkpoint: the work is gone), the grace period
  included;
- *usable idle* per pool: free GPU-hours while a waiting job could have used them
  (``gpufleet.simulate.idle``);
- *capacity*: every card times the window, the same for both worlds.

Per team, over the jobs that arrived within the window: waits (seconds not running between
submission and the start of the run that finished, or the end of the run) and completion times
(submission to the finish) as nearest-rank p50 and p95; jobs no quota can ever admit
(``NeverAdmissible``) are counted apart and left out of the waits, since they would stretch them to
the end of any run. *Makespan*: from the first arrival to the last completion, or to the end of the
run when jobs that could run did not finish. *Jain*: Jain's index, among the teams with jobs in the
window, of each team's goodput over its weighted max-min fair share of all the goodput, capped by the
work it asked for in the window (``metrics.fair_shares``, ``metrics.demand``): 1 when each team got
what it asked or its weighted part of the rest, not only when goodput shares equal weight shares. *Serving starvation*: replica-minutes wanted
replicas had no GPU, in the window. *Preemptions per job*: the most and the p95 over the window's
jobs.

``common_window``: from second 0 to the end of the shortest run, the first moment one world was done
(every job finished, or nothing left that could happen); both are measured up to it, so capacity is
the same and goodput says how much finished work each world had by then.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpufleet.policy import Fleet
from gpufleet.simulate.config import HOUR
from gpufleet.simulate.jobs import Attempt, JobRun, State
from gpufleet.simulate.metrics import demand, fair_jain, percentile
from gpufleet.simulate.serving import SERVING

if TYPE_CHECKING:
    from gpufleet.simulate.result import RunResult

MINUTE = 60


@dataclass(frozen=True)
class TeamMeasures:
    team: str
    weight: float  # the team's fair-sharing weight (1.0 when fair sharing is off)
    jobs: int  # jobs of the team that arrived within the window
    finished: int
    goodput_gpu_h: float  # GPU-hours of runs that completed (within the window)
    wait_p50_s: int | None  # None when the team had no job
    wait_p95_s: int | None
    completion_p50_s: int | None
    completion_p95_s: int | None
    never_admissible: int  # jobs larger than the team can ever reach
    held_idle_gpu_h: float = 0.0
    lost_gpu_h: float = 0.0
    preemptions: int = 0


@dataclass(frozen=True)
class Measures:
    world: str  # "queue" | "first-apply" (or a label given by the caller)
    window_s: tuple[int, int]  # the one stated window both worlds are measured over
    capacity_gpu_h: float
    goodput_gpu_h: float
    held_idle_gpu_h: float  # GPUs bound to jobs not running (partial gangs, pods waiting for siblings)
    lost_gpu_h: float  # preempted work without checkpoint
    usable_idle_gpu_h: dict[str, float]  # per pool: idle while a waiting job could have used it
    makespan_s: int | None
    teams: tuple[TeamMeasures, ...]
    jain: float | None  # Jain over goodput ÷ weighted max-min fair share among teams with demand
    serving_starved_replica_min: float
    preemptions_max: int  # most preemptions of one job
    preemptions_p95: int
    serving_gpu_h: float = 0.0
    jobs: int = 0
    finished: int = 0
    never_admissible: int = 0

    @property
    def usable_idle_total_gpu_h(self) -> float:
        return sum(self.usable_idle_gpu_h.values())

    def team(self, name: str) -> TeamMeasures | None:
        return next((t for t in self.teams if t.team == name), None)


def _clip(a: int, b: int, window: tuple[int, int]) -> int:
    return max(0, min(b, window[1]) - max(a, window[0]))


@dataclass
class _Split:
    """One job's GPU-seconds in the window, by what its pods were doing."""

    good: float = 0.0
    held_idle: float = 0.0
    lost: float = 0.0


def split(run: JobRun, end: int, window: tuple[int, int]) -> _Split:
    """Goodput, held-idle and lost GPU-seconds of one job: each pod hold is idle until its attempt
    started, then working; the working part is goodput if the attempt finished, lost if it was
    preempted (and neither while it still runs at the end)."""
    out = _Split()
    for a in run.attempts:
        for h in a.holds:
            released = h.released if h.released is not None else end
            started = a.started if a.started is not None else released
            started = min(max(started, h.bound), released)
            out.held_idle += h.worth * _clip(h.bound, started, window)
            working = h.worth * _clip(started, released, window)
            if a.end_reason == "Finished":
                out.good += working
            elif a.end_reason == "Preempted":
                out.lost += working
    return out


def _finished_at(run: JobRun) -> int | None:
    last: Attempt | None = run.attempts[-1] if run.attempts else None
    return last.ended if run.state is State.FINISHED and last is not None else None


def _pct(values: list[int], p: int) -> int | None:
    return percentile(values, p) if values else None


def _hours(seconds: float) -> float:
    return round(seconds / HOUR, 3)


def measure(result: RunResult, fleet: Fleet, window: tuple[int, int]) -> Measures:
    """The measures of one run over ``window`` (seconds from the trace's start)."""
    outcome = result.outcome
    end = outcome.end
    start, stop = window
    fair = fleet.policy.queueing.fairSharing
    weights = {t.name: (float(t.weight) if fair else 1.0) for t in fleet.policy.teams}
    runs = [r for r in outcome.runs if start <= r.job.submit_s < stop]
    splits = {r.key: split(r, end, window) for r in outcome.runs}
    teams: list[TeamMeasures] = []
    for team in outcome.teams:
        mine = [r for r in runs if r.team == team]
        never = [r for r in mine if r.never]
        countable = [r for r in mine if not r.never]
        waits = [r.waited(end) for r in countable]
        completions = [f - r.job.submit_s for r in countable if (f := _finished_at(r)) is not None]
        own = [splits[r.key] for r in outcome.runs if r.team == team]
        teams.append(
            TeamMeasures(
                team=team,
                weight=weights.get(team, 1.0),
                jobs=len(mine),
                finished=sum(r.state is State.FINISHED for r in mine),
                goodput_gpu_h=_hours(sum(s.good for s in own)),
                wait_p50_s=_pct(waits, 50),
                wait_p95_s=_pct(waits, 95),
                completion_p50_s=_pct(completions, 50),
                completion_p95_s=_pct(completions, 95),
                never_admissible=len(never),
                held_idle_gpu_h=_hours(sum(s.held_idle for s in own)),
                lost_gpu_h=_hours(sum(s.lost for s in own)),
                preemptions=sum(r.preemptions for r in mine),
            )
        )
    good = {t.team: sum(splits[r.key].good for r in outcome.runs if r.team == t.team) for t in teams}
    total_good = sum(good.values())
    asked = {t.team: 0.0 for t in teams if t.jobs}
    for r in outcome.runs:
        if r.team in asked and r.job.submit_s < stop:
            asked[r.team] += demand(r, window)
    capacity = float(sum(p.gpus for p in outcome.pools.values()))
    meter = outcome.meter
    preemptions = [r.preemptions for r in runs]
    return Measures(
        world=result.name,
        window_s=(start, stop),
        capacity_gpu_h=_hours(capacity * max(stop - start, 0)),
        goodput_gpu_h=_hours(total_good),
        held_idle_gpu_h=_hours(sum(s.held_idle for s in splits.values())),
        lost_gpu_h=_hours(sum(s.lost for s in splits.values())),
        usable_idle_gpu_h={name: _hours(meter.integral(f"usable:{name}", start, stop)) for name in outcome.pools},
        makespan_s=makespan(outcome.runs, end),
        teams=tuple(teams),
        jain=None if (j := fair_jain(good, asked, weights)) is None else round(j, 4),
        serving_starved_replica_min=round(meter.integral("serving_starved", start, stop) / MINUTE, 1),
        preemptions_max=max(preemptions, default=0),
        preemptions_p95=_pct(preemptions, 95) or 0,
        serving_gpu_h=_hours(meter.integral(f"team:{SERVING}", start, stop)),
        jobs=len(runs),
        finished=sum(r.state is State.FINISHED for r in runs),
        never_admissible=sum(1 for r in runs if r.never),
    )


def makespan(runs: Sequence[JobRun], end: int) -> int | None:
    """First arrival to last completion; to the run's end when a job that could run never finished."""
    if not runs:
        return None
    first = min(r.job.submit_s for r in runs)
    if any(r.state is not State.FINISHED and not r.never for r in runs):
        return end - first
    done = [f for r in runs if (f := _finished_at(r)) is not None]
    return max(done) - first if done else None


def common_window(results: Sequence[RunResult]) -> tuple[int, int]:
    """``[0, the end of the shortest run]``: one window for every world (see the module's docstring)."""
    ends = [r.outcome.end for r in results if r.outcome.end > 0]
    return (0, min(ends) if ends else 0)


def as_dict(m: Measures) -> dict[str, Any]:
    """JSON-ready, with stable camelCase keys (docs/simulate.md, ``measures``); seconds as ints."""
    return {
        "world": m.world,
        "windowSeconds": list(m.window_s),
        "capacityGpuHours": m.capacity_gpu_h,
        "goodputGpuHours": m.goodput_gpu_h,
        "heldIdleGpuHours": m.held_idle_gpu_h,
        "lostGpuHours": m.lost_gpu_h,
        "usableIdleGpuHours": dict(m.usable_idle_gpu_h),
        "usableIdleGpuHoursTotal": round(m.usable_idle_total_gpu_h, 3),
        "servingGpuHours": m.serving_gpu_h,
        "makespanSeconds": m.makespan_s,
        "jobs": m.jobs,
        "finished": m.finished,
        "neverAdmissible": m.never_admissible,
        "jain": m.jain,
        "servingStarvedReplicaMinutes": m.serving_starved_replica_min,
        "preemptionsPerJob": {"max": m.preemptions_max, "p95": m.preemptions_p95},
        "teams": {
            t.team: {
                "weight": t.weight,
                "jobs": t.jobs,
                "finished": t.finished,
                "neverAdmissible": t.never_admissible,
                "goodputGpuHours": t.goodput_gpu_h,
                "heldIdleGpuHours": t.held_idle_gpu_h,
                "lostGpuHours": t.lost_gpu_h,
                "preemptions": t.preemptions,
                "waitSeconds": {"p50": t.wait_p50_s, "p95": t.wait_p95_s},
                "completionSeconds": {"p50": t.completion_p50_s, "p95": t.completion_p95_s},
            }
            for t in m.teams
        },
    }
