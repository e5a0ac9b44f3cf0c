"""Judging candidate policies on held-out weeks (``holdout``): the same constraints, other weeks.

Each held-out week runs its own first-apply and input worlds once, which fix its window and the jobs
no policy may strand there (``strand``), exactly as the tuned week does. A candidate then runs the
week's queue world; it *holds* when it meets every constraint on every held-out week. Every figure
is simulated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from gpufleet.policy import FleetPolicy, resolve
from gpufleet.simulate.config import Mode, SimulationConfig
from gpufleet.simulate.measures import Measures, common_window, measure
from gpufleet.simulate.result import RunResult
from gpufleet.simulate.run import simulate
from gpufleet.tune.holdout import Week
from gpufleet.tune.objectives import CONSTRAINTS, Constraints, feasible, lost_guarantees, violations
from gpufleet.tune.recommend import Candidate
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


def prepare(policy: FleetPolicy, space: Space, week: Week, config: SimulationConfig, c: Constraints) -> Baseline:
    fleet = resolve(policy)
    first = simulate(fleet, week.jobs, replace(config, mode=Mode.FIRST_APPLY))
    given = named(simulate(fleet, week.jobs, replace(config, mode=Mode.QUEUE)), "input")
    window = common_window([first, given])
    input_never = {r.key for r in given.outcome.runs if r.never}
    saving = stranding(space, in_window(week.jobs, window), ran_keys(first), input_never)
    problem = Problem(policy, week.jobs, replace(config, mode=Mode.QUEUE), window, c, saving.protected)
    given_fig = figures("input", given, policy, window)
    values = violations(given_fig.measures, c, 0, stranded_in(given, saving.protected))
    return Baseline(week, problem, figures("first-apply", first, policy, window), given_fig, values)


@dataclass(frozen=True)
class Verdict:
    """One candidate on one held-out week."""

    week: str
    tuned: Figures
    violations: tuple[float, ...]

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

    def failures(self) -> str:
        """``trial 7: jain +0.12, stranded +22 on bootstrap-1; …`` (the amounts by which each misses)."""
        parts = [f"{', '.join(v.failing())} on {v.week}" for v in self.verdicts if not v.holds]
        return f"trial {self.candidate.number}: " + "; ".join(parts)


def judge(
    baselines: Sequence[Baseline], space: Space, params: Mapping[str, str], candidate: Candidate
) -> Judged | None:
    """The candidate on every held-out week (None: its choices make no valid policy, cannot happen for a
    completed trial but is not worth a traceback)."""
    verdicts = []
    for b in baselines:
        if dict(params) == space.base_params():
            tuned = replace(b.given, world="tuned")
            verdicts.append(Verdict(b.week.name, tuned, b.given_violations))
            continue
        try:
            ran = evaluate(b.problem, space, params, "tuned")
        except SpaceError:
            return None
        lost = len(lost_guarantees(b.problem.policy, ran.fleet.policy))
        values = violations(ran.measures, b.problem.constraints, lost, ran.stranded)
        verdicts.append(Verdict(b.week.name, figures("tuned", ran.result, ran.fleet.policy, b.problem.window), values))
    return Judged(candidate, tuple(verdicts))


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
            out.append({**row(b.week.name, v.tuned, teams), "meetsConstraints": v.holds, "failing": v.failing()})
    return out
