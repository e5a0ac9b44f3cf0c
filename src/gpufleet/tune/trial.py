"""One trial: a policy from the search space, simulated on the trace, measured, judged.

Everything a trial needs travels in ``Problem`` (plain, picklable data), so a worker process or a
worker on another machine rebuilds the same search space from the same input policy and gets the
same figures for the same choices: the simulator is deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from gpufleet.policy import Fleet, FleetPolicy
from gpufleet.simulate.config import Mode, SimulationConfig
from gpufleet.simulate.measures import Measures, as_dict, measure
from gpufleet.simulate.records import job_rows, ledger_records
from gpufleet.simulate.result import RunResult
from gpufleet.trace.job import Job
from gpufleet.tune import clusters
from gpufleet.tune.fidelity import HALVED, PRUNED_ATTR, Fidelity, Staged, broken, fixed, promoted, rung_key, score
from gpufleet.tune.objectives import CONSTRAINTS, Constraints, lost_guarantees, objectives, violations
from gpufleet.tune.space import Space, SpaceError, build_space
from gpufleet.tune.strand import stranded_in

if TYPE_CHECKING:  # optuna (and numpy) load with a study, not with every command
    import optuna

CONSTRAINTS_ATTR = "constraints"
MEASURES_ATTR = "measures"
INVALID_ATTR = "invalid"
STRANDED_ATTR = "stranded"


@dataclass(frozen=True)
class Problem:
    policy: FleetPolicy  # the input policy
    jobs: tuple[Job, ...]
    config: SimulationConfig
    window: tuple[int, int]  # every trial is measured over this one window
    constraints: Constraints
    protected: frozenset[str] = frozenset()  # jobs no trial may strand (``strand.stranding``)
    fidelity: Fidelity | None = None  # stop poor trials at rungs (``fidelity``); None: every trial runs whole


@dataclass(frozen=True)
class Evaluated:
    result: RunResult
    fleet: Fleet
    measures: Measures
    values: tuple[float, float]
    constraints: tuple[float, ...]
    lost: tuple[str, ...]
    stranded: int = 0  # protected jobs this policy makes never-admissible

    def attrs(self) -> dict[str, Any]:
        return {
            MEASURES_ATTR: as_dict(self.measures),
            CONSTRAINTS_ATTR: list(self.constraints),
            "lost": list(self.lost),
            STRANDED_ATTR: self.stranded,
        }


def evaluate(problem: Problem, space: Space, params: Mapping[str, str], name: str = "queue") -> Evaluated:
    """Simulate the queue world under ``params`` (raises ``SpaceError`` for an invalid combination)."""
    fleet = space.fleet(params)
    config = replace(problem.config, mode=Mode.QUEUE)
    result = named(clusters.queue(fleet, problem.jobs, config), name)
    m = measure(result, fleet, problem.window)
    lost = tuple(lost_guarantees(problem.policy, fleet.policy))
    stranded = stranded_in(result, problem.protected)
    values = violations(m, problem.constraints, len(lost), stranded)
    return Evaluated(result, fleet, m, objectives(m), values, lost, stranded)


def named(result: RunResult, name: str) -> RunResult:
    """The same run under another world name (the three-world report has two queue worlds)."""
    if result.name == name:
        return result
    outcome = result.outcome
    return replace(result, name=name, records=ledger_records(outcome, name), rows=job_rows(outcome, name))


def named_constraints(values: Sequence[float]) -> dict[str, float]:
    """Optuna's named constraints (``Trial.set_constraint``, which replaced ``constraints_func`` in 5.0)."""
    return dict(zip(CONSTRAINTS, values, strict=False))


class Objective:
    """The callable Optuna runs per trial; it keeps the space it built from the problem."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self.space = build_space(problem.policy)

    def __call__(self, trial: optuna.Trial) -> tuple[float, float]:
        import optuna

        params = {k.path: str(trial.suggest_categorical(k.path, k.choices)) for k in self.space.knobs}
        try:
            done = (
                evaluate(self.problem, self.space, params)
                if self.problem.fidelity is None
                else self.staged(trial, params)
            )
        except SpaceError as exc:
            trial.set_user_attr(INVALID_ATTR, str(exc)[:2000])
            raise optuna.TrialPruned(f"not a valid policy: {exc}") from None
        for key, value in done.attrs().items():
            trial.set_user_attr(key, value)
        for name, value in named_constraints(done.constraints).items():
            trial.set_constraint(name, value)
        return done.values

    def staged(self, trial: optuna.Trial, params: Mapping[str, str]) -> Evaluated:
        """The trial's run in rungs: stopped (``TrialPruned``) at the first rung where it already breaks a
        constraint for good, or, for a sampled trial, where successive halving does not promote it."""
        import optuna

        problem, fidelity = self.problem, self.problem.fidelity
        assert fidelity is not None
        fleet = self.space.fleet(params)
        staged = Staged(fleet, problem.jobs, problem.config)
        lost = len(lost_guarantees(problem.policy, fleet.policy))
        stranded = sum(1 for r in staged.world.runs if r.never and r.key in problem.protected)
        halved = fidelity.halving and str(trial.user_attrs.get("source", "search")) in HALVED
        static = fixed(problem.constraints, stranded, lost)
        if static:  # fixed by the policy itself: known before a single instant runs
            trial.set_user_attr(PRUNED_ATTR, {"at": problem.window[0], "why": static})
            raise optuna.TrialPruned(f"stopped before running: {'; '.join(static)}")
        for at, m in staged.stages(fidelity.rungs(problem.window), problem.window):
            mine = score(m)
            trial.set_user_attr(rung_key(at), list(mine))
            why = broken(m, problem.constraints, stranded, lost)
            if not why and halved and not promoted(mine, _peers(trial, at), fidelity):
                why = [f"not among the best 1/{fidelity.eta} at this rung (worst p95 {mine[0]:g} h)"]
            if why:
                trial.set_user_attr(PRUNED_ATTR, {"at": at, "why": why})
                raise optuna.TrialPruned(f"stopped at {at} s: {'; '.join(why)}")
        result = named(staged.finish(), "queue")
        m = measure(result, fleet, problem.window)
        lost_names = tuple(lost_guarantees(problem.policy, fleet.policy))
        values = violations(m, problem.constraints, len(lost_names), stranded)
        return Evaluated(result, fleet, m, objectives(m), values, lost_names, stranded)


def _peers(trial: optuna.Trial, at: int) -> list[tuple[float, float]]:
    """The rung scores the study's other trials recorded at ``at`` (shared through its storage)."""
    key = rung_key(at)
    out = []
    for t in trial.study.get_trials(deepcopy=False):
        held = t.user_attrs.get(key)
        if t.number != trial.number and isinstance(held, list) and len(held) == 2:
            out.append((float(held[0]), float(held[1])))
    return out
