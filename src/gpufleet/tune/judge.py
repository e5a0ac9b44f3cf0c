"""Judging candidate policies on held-out weeks (``holdout``): the same constraints, other weeks.

Each held-out week runs its own first-apply and input worlds once, which fix its window and the jobs
no policy may strand there (``strand``), exactly as the tuned week does. A candidate then runs the
week's queue world; it *holds* when it meets every constraint on every held-out week, and each verdict
says whether it also beats first apply there (``rival``). Every figure is simulated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from gpufleet.policy import FleetPolicy, resolve
from gpufleet.simulate.config import Mode, SimulationConfig
from gpufleet.simulate.measures import Measures, common_window, measure
from gpufleet.simulate.result import RunResult
from gpufleet.tune import clusters
from gpufleet.tune.feasibility import Infeasible
from gpufleet.tune.holdout import Week
from gpufleet.tune.objectives import CONSTRAINTS, Constraints, feasible, lost_guarantees, violations
from gpufleet.tune.recommend import Candidate
from gpufleet.tune.rival import Rival, against, finished_all, on_serving_gpu_h, preference
from gpufleet.tune.space import Space, SpaceError
from gpufleet.tune.strand import in_window, ran_keys, stranded_in, stranding
from gpufleet.tune.trial import Problem, evaluate, named


@dataclass(frozen=True)
class Figures:
    """One world on one week: what the held-out table prints."""

    world: str
    measures: Measures
    stranded: int  # jobs never admissible (every one, protected or not)
    never_ran: int  # jobs submitted in the window that never had every pod running


def figures(world: str, result: RunResult, policy: FleetPolicy, window: tuple[int, int]) -> Figures:
    m = measure(result, resolve(policy), window)
    runs = [r for r in result.outcome.runs if window[0] <= r.job.submit_s < window[1]]
    never_ran = sum(1 for r in runs if not any(a.started is not None for a in r.attempts))
    return Figures(world, m, m.never_admissible, never_ran)


@dataclass(frozen=True)
class Baseline:
    """One held-out week's first-apply and input worlds, and the problem a candidate is run on there."""

    week: Week
    problem: Problem
    first: Figures
    given: Figures
    given_violations: tuple[float, ...]
    first_done: bool = False  # first apply finished every job of the window (its goodput is the ceiling)
    first_on_serving_gpu_h: float = 0.0  # goodput first apply ran on the serving pool's nodes

    def rival(self, tuned: Figures) -> Rival:
        """A candidate's figures on this week against first apply's."""
        return against(
            self.week.name,
            self.first.measures,
            tuned.measures,
            first_done=self.first_done,
            first_on_serving_gpu_h=self.first_on_serving_gpu_h,
        )


def runs(policy: FleetPolicy, week: Week, config: SimulationConfig) -> tuple[RunResult, RunResult]:
    """A held-out week's first-apply and input worlds, one after the other (``tuning`` runs the two as
    separate tasks of its fan-out, ``first_world`` and ``input_world``)."""
    return first_world(policy, week, config), input_world(policy, week, config)


def first_world(policy: FleetPolicy, week: Week, config: SimulationConfig) -> RunResult:
    return clusters.first_apply(resolve(policy), week.jobs, config)


def input_world(policy: FleetPolicy, week: Week, config: SimulationConfig) -> RunResult:
    return named(clusters.queue(resolve(policy), week.jobs, config), "input")


def prepare(
    policy: FleetPolicy,
    space: Space,
    week: Week,
    config: SimulationConfig,
    c: Constraints,
    *,
    ran: tuple[RunResult, RunResult] | None = None,
) -> Baseline:
    """The week's baseline from its first-apply and input worlds (``ran``: already simulated; else here)."""
    fleet = resolve(policy)
    first, given = ran or runs(policy, week, config)
    window = common_window([first, given])
    input_never = {r.key for r in given.outcome.runs if r.never}
    saving = stranding(space, in_window(week.jobs, window), ran_keys(first), input_never)
    problem = Problem(policy, week.jobs, replace(config, mode=Mode.QUEUE), window, c, saving.protected)
    given_fig = figures("input", given, policy, window)
    values = violations(given_fig.measures, c, 0, stranded_in(given, saving.protected))
    return Baseline(
        week,
        problem,
        figures("first-apply", first, policy, window),
        given_fig,
        values,
        finished_all(first, window),
        on_serving_gpu_h(first, fleet, window),
    )


@dataclass(frozen=True)
class Verdict:
    """One candidate on one held-out week."""

    week: str
    tuned: Figures
    violations: tuple[float, ...]
    rival: Rival  # the candidate against first apply on this week

    @property
    def holds(self) -> bool:
        return feasible(self.violations)

    def failing(self) -> list[str]:
        return [f"{name} {value:+g}" for name, value in zip(CONSTRAINTS, self.violations, strict=False) if value > 0]


@dataclass(frozen=True)
class Judged:
    candidate: Candidate
    verdicts: tuple[Verdict, ...]

    @property
    def holds(self) -> bool:
        return all(v.holds for v in self.verdicts)

    @property
    def beaten(self) -> int:
        """Held-out weeks on which it beats first apply on goodput and every team's p95 (``rival``)."""
        return sum(v.rival.beats for v in self.verdicts)

    def failures(self) -> str:
        """``trial 7: jain +0.12, stranded +22 on bootstrap-1; …`` (the amounts by which each misses)."""
        parts = [f"{', '.join(v.failing())} on {v.week}" for v in self.verdicts if not v.holds]
        return f"trial {self.candidate.number}: " + "; ".join(parts)


def judge(
    baselines: Sequence[Baseline], space: Space, params: Mapping[str, str], candidate: Candidate
) -> Judged | None:
    """The candidate on every held-out week (None: its choices make no valid policy, cannot happen for a
    completed trial but is not worth a traceback)."""
    return combined(candidate, [verdict(b, space, params) for b in baselines])


def combined(candidate: Candidate, verdicts: Sequence[Verdict | None]) -> Judged | None:
    """The candidate's verdicts on every week together (None when its choices made no valid policy)."""
    held = [v for v in verdicts if v is not None]
    return Judged(candidate, tuple(held)) if len(held) == len(verdicts) else None


def verdict(b: Baseline, space: Space, params: Mapping[str, str]) -> Verdict | None:
    """The candidate ``params`` on one held-out week (None: no valid policy); one task of the fan-out."""
    if dict(params) == space.base_params():
        tuned = replace(b.given, world="tuned")
        return Verdict(b.week.name, tuned, b.given_violations, b.rival(tuned))
    try:
        ran = evaluate(b.problem, space, params, "tuned")
    except SpaceError:
        return None
    lost = len(lost_guarantees(b.problem.policy, ran.fleet.policy))
    values = violations(ran.measures, b.problem.constraints, lost, ran.stranded)
    tuned = figures("tuned", ran.result, ran.fleet.policy, b.problem.window)
    return Verdict(b.week.name, tuned, values, b.rival(tuned))


def pick(judged: Sequence[Judged]) -> Judged | None:
    """The judged candidate to recommend: among those that meet the constraints on every held-out week,
    the one ``rival.preference`` puts first (beats first apply on the most weeks, then the smaller
    shortfall, then the judging order); None when none meets them."""
    keyed = [(preference(j.holds, [v.rival for v in j.verdicts], i), j) for i, j in enumerate(judged) if j.holds]
    return min(keyed, key=lambda kj: kj[0])[1] if keyed else None


def not_beaten(judged: Sequence[Judged]) -> Infeasible | None:
    """``FirstApplyNotBeaten`` when the recommendation (the last judged) does not beat first apply on
    goodput and every team's p95 on every held-out week: a finding with the figures, not a blocker
    (it meets every constraint); None when it does."""
    if not judged or not judged[-1].holds or judged[-1].beaten == len(judged[-1].verdicts):
        return None
    chosen = judged[-1]
    weeks = len(chosen.verdicts)
    message = (
        f"the recommendation (trial {chosen.candidate.number}) beats first apply on goodput and every team's "
        f"p95 wait on {chosen.beaten} of {weeks} held-out week(s); of the {len(judged)} trial(s) judged, "
        + ", ".join(f"trial {j.candidate.number} on {j.beaten}" for j in judged)
    )
    evidence = tuple(v.rival.describe() for v in chosen.verdicts)
    short = [v.rival for v in chosen.verdicts if not v.rival.beats]
    needs = []
    if any(r.gap_gpu_h < 0 for r in short):
        ceiling = any(r.first_done for r in short)
        needs.append(
            "finishing every job by first apply's end (its goodput is all the work)" if ceiling else "more goodput"
        )
    if any(r.slower for r in short):
        needs.append("shorter p95 waits for " + ", ".join(sorted({s.team for r in short for s in r.slower})))
    served = max((r.first_on_serving_gpu_h for r in short), default=0.0)
    serving = f"; first apply ran up to {served:,.0f} GPU-h of training on the serving pool, which no policy in the search space does"
    needed = " and ".join(needs) + (serving if served > 0 else "") + ": more trials, or more training capacity"
    return Infeasible("FirstApplyNotBeaten", "firstApply", False, message, evidence, needed)


def _p95(m: Measures, team: str) -> int | None:
    t = m.team(team)
    return None if t is None else t.wait_p95_s


def row(week: str, f: Figures, teams: Sequence[str]) -> dict[str, object]:
    """One line of the held-out table: goodput, every team's p95 wait, Jain, preemptions, stranded, never ran."""
    m = f.measures
    return {
        "week": week,
        "world": f.world,
        "goodputGpuHours": m.goodput_gpu_h,
        "p95WaitSeconds": {t: _p95(m, t) for t in teams},
        "jain": m.jain,
        "preemptionsMax": m.preemptions_max,
        "servingStarvedReplicaMinutes": m.serving_starved_replica_min,
        "stranded": f.stranded,
        "neverRan": f.never_ran,
    }


def table(baselines: Sequence[Baseline], judged: Judged | None, teams: Sequence[str]) -> list[dict[str, object]]:
    """First apply, the input and the judged candidate on each held-out week (the candidate's rows carry
    whether it meets the constraints there)."""
    out = []
    for i, b in enumerate(baselines):
        out += [row(b.week.name, b.first, teams), row(b.week.name, b.given, teams)]
        if judged is not None:
            v = judged.verdicts[i]
            beats = {"beatsFirstApply": v.rival.beats, "versusFirstApply": v.rival.describe()}
            out.append(
                {**row(b.week.name, v.tuned, teams), "meetsConstraints": v.holds, "failing": v.failing(), **beats}
            )
    return out
