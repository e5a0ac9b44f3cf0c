"""``gpufleet tune``'s core: the three worlds, the study between them, and the recommendation.

The same trace runs in three worlds: first apply (no queue), the input policy, and the tuned
policy. The first two fix the window every trial is measured over (``common_window``), so goodput
and waits compare like for like. The study starts from the input policy (trial 0) and the reasoned
candidates (``remedies``); the recommended trial is simulated once more, in this process, to get
its full run for the report and its findings (the simulator is deterministic: the same figures).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from optuna.trial import TrialState

from gpufleet.errors import InputError
from gpufleet.policy import FleetPolicy, resolve
from gpufleet.simulate.config import Mode, SimulationConfig
from gpufleet.simulate.measures import Measures, common_window, measure
from gpufleet.simulate.pathologies import Finding, diagnose
from gpufleet.simulate.result import RunResult
from gpufleet.simulate.run import simulate
from gpufleet.trace.job import Job
from gpufleet.tune import remedies, study
from gpufleet.tune.diff import Change, diff, touches
from gpufleet.tune.objectives import Constraints, lost_guarantees, objectives, violations
from gpufleet.tune.recommend import Candidate, candidates, pareto_front, recommend
from gpufleet.tune.space import Space, build_space
from gpufleet.tune.strand import Beyond, in_window, ran_keys, stranded_in, stranding
from gpufleet.tune.trial import Evaluated, Problem, evaluate, named

WORLDS = ("first-apply", "input", "tuned")
FINGERPRINT_ATTR = "gpufleet.fingerprint"
WINDOW_ATTR = "gpufleet.window"

Stage = Callable[[str], None]


@dataclass(frozen=True)
class World:
    name: str  # one of WORLDS
    result: RunResult
    measures: Measures
    findings: tuple[Finding, ...]


@dataclass(frozen=True)
class Tuning:
    space: Space
    spec: study.StudySpec
    constraints: Constraints
    window: tuple[int, int]
    trials: list[Candidate]  # completed trials, in order
    pruned: int  # trials whose choices made no valid policy
    front: list[Candidate]
    recommended: Candidate | None  # None: no trial met the constraints
    policy: FleetPolicy  # the recommended policy (the input's when there is none)
    worlds: tuple[World, World, World]
    changes: list[Change]
    beyond: tuple[Beyond, ...] = ()  # never-admissible jobs no knob in the space can save


def fingerprint(
    policy: FleetPolicy,
    jobs: Sequence[Job],
    constraints: Constraints,
    config: SimulationConfig,
    window: tuple[int, int],
) -> str:
    """What a study is about; resuming it with another policy, trace, window or constraint is refused."""
    h = hashlib.sha256()
    h.update(policy.model_dump_json().encode())
    h.update(json.dumps([repr(j) for j in jobs]).encode())
    h.update(repr((constraints, config.placement, config.pods_ready, config.until_s, window)).encode())
    return h.hexdigest()[:16]


def _world(name: str, result: RunResult, policy: FleetPolicy, window: tuple[int, int]) -> World:
    fleet = resolve(policy)
    m = measure(result, fleet, window)
    return World(name, result, m, tuple(diagnose(result, fleet, m)))


def _check_resume(opened: object, mark: str) -> None:
    attrs = getattr(opened, "user_attrs", {})
    known = attrs.get(FINGERPRINT_ATTR)
    if known is not None and known != mark:
        raise InputError.one(
            "this study was made for another policy, trace or constraints; give another --study name "
            "or another output folder",
            path="--study",
        )


def tune(
    policy: FleetPolicy,
    jobs: Sequence[Job],
    spec: study.StudySpec,
    *,
    constraints: Constraints | None = None,
    config: SimulationConfig | None = None,
    tick: study.Tick | None = None,
    stage: Stage | None = None,
    baseline: tuple[RunResult, RunResult] | None = None,
    reasoned: bool = True,
    window: tuple[int, int] | None = None,
    simplify: bool = True,
) -> Tuning:
    """Run the three worlds and the study; ``baseline`` reuses first-apply and input runs already made;
    ``reasoned`` enqueues the candidates of ``remedies`` before the sampler's own choices; ``window``
    is the one window every world is measured over (default: until the shorter baseline run ends);
    ``simplify`` tries the recommendation without each change no finding points at (``study.simplify``)."""
    say = stage or (lambda _text: None)
    constraints = constraints or Constraints()
    config = config or SimulationConfig()
    space = build_space(policy)
    fleet = resolve(policy)
    if baseline is None:
        say("simulating first apply and the input policy")
        first = simulate(fleet, jobs, replace(config, mode=Mode.FIRST_APPLY))
        given = named(simulate(fleet, jobs, replace(config, mode=Mode.QUEUE)), "input")
    else:
        first, given = baseline[0], named(baseline[1], "input")
    window = window or common_window([first, given])
    input_never = {r.key for r in given.outcome.runs if r.never}
    saving = stranding(space, in_window(jobs, window), ran_keys(first), input_never)
    problem = Problem(policy, tuple(jobs), replace(config, mode=Mode.QUEUE), window, constraints, saving.protected)
    mark = fingerprint(policy, jobs, constraints, config, window)
    opened = study.load(spec)
    _check_resume(opened, mark)
    worlds_before = (_world("first-apply", first, policy, window), _world("input", given, policy, window))
    base = _evaluated(problem, worlds_before[1], policy)
    reasoned_ones = remedies.candidates(space, worlds_before[1].findings) if reasoned else []
    study.seed_study(opened, space, base, reasoned_ones)
    opened.set_user_attr(FINGERPRINT_ATTR, mark)
    opened.set_user_attr(WINDOW_ATTR, list(window))
    say(f"searching: {spec.trials} trials, {spec.jobs} worker(s)")
    done = study.run(problem, spec, tick)
    base_params = space.base_params()
    if simplify:
        say("simplifying the recommendation")
        study.simplify(done, problem, base_params, _pointed(space, worlds_before[1].findings))
    trials = candidates(done)
    pruned = len(done.get_trials(deepcopy=False, states=(TrialState.PRUNED,)))
    chosen = recommend(trials, base_params)
    if chosen is None or chosen.params == base_params:
        tuned_policy = policy
        tuned = World("tuned", named(given, "tuned"), worlds_before[1].measures, worlds_before[1].findings)
    else:
        say("simulating the recommended policy")
        ran = evaluate(problem, space, chosen.params, "tuned")
        tuned_policy = ran.fleet.policy
        tuned = World("tuned", ran.result, ran.measures, tuple(diagnose(ran.result, ran.fleet, ran.measures)))
    changes = diff(
        base=base_params,
        tuned=chosen.params if chosen else base_params,
        before=worlds_before[1].measures,
        after=tuned.measures,
        found_before=worlds_before[1].findings,
        found_after=tuned.findings,
    )
    return Tuning(
        space=space,
        spec=spec,
        constraints=constraints,
        window=window,
        trials=trials,
        pruned=pruned,
        front=pareto_front(trials),
        recommended=chosen,
        policy=tuned_policy,
        worlds=(worlds_before[0], worlds_before[1], tuned),
        changes=changes,
        beyond=saving.beyond,
    )


def _pointed(space: Space, findings: Sequence[Finding]) -> set[str]:
    """The knobs some finding of the input policy names."""
    return {k.path for k in space.knobs if any(touches(s, k.path) for f in findings for s in f.settings)}


def _evaluated(problem: Problem, world: World, policy: FleetPolicy) -> Evaluated:
    lost = tuple(lost_guarantees(problem.policy, policy))
    m = world.measures
    stranded = stranded_in(world.result, problem.protected)
    values = violations(m, problem.constraints, len(lost), stranded)
    return Evaluated(world.result, resolve(policy), m, objectives(m), values, lost, stranded)
