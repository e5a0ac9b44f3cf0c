"""``gpufleet tune``'s core: the three worlds, the study between them, and the recommendation.

The same trace runs in three worlds: first apply (no queue), the input policy, and the tuned
policy. The first two fix the window every trial is measured over (``common_window``), so goodput
and waits compare like for like. The study starts from the input policy (trial 0) and the reasoned
candidates (``remedies``); the recommended trial is simulated once more to get its full run for the
report and its findings (the simulator is deterministic: the same figures), beside the judging on
held-out weeks when there are some and more than one process (``fanout``), else in this process.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from itertools import islice

import optuna
from optuna.trial import TrialState

from gpufleet.errors import InputError
from gpufleet.policy import Fleet, FleetPolicy, resolve
from gpufleet.simulate.config import Mode, SimulationConfig
from gpufleet.simulate.federation_compare import Comparison, fleet_questions
from gpufleet.simulate.measures import Measures, common_window, measure
from gpufleet.simulate.pathologies import Finding, diagnose
from gpufleet.simulate.result import RunResult
from gpufleet.trace.job import Job
from gpufleet.tune import clusters, fanout, feasibility, judge, remedies, study
from gpufleet.tune.diff import Change, diff, touches
from gpufleet.tune.feasibility import Infeasible
from gpufleet.tune.fidelity import PRUNED_ATTR, Fidelity
from gpufleet.tune.holdout import Week
from gpufleet.tune.objectives import CONSTRAINTS, Constraints, lost_guarantees, objectives, violations
from gpufleet.tune.recommend import Candidate, candidates, pareto_front, ranked
from gpufleet.tune.space import Space, SpaceError, build_space
from gpufleet.tune.strand import Beyond, in_window, ran_keys, stranded_in, stranding
from gpufleet.tune.trial import CONSTRAINTS_ATTR, Evaluated, Problem, evaluate, named

WORLDS = ("first-apply", "input", "tuned")
FINGERPRINT_ATTR = "gpufleet.fingerprint"
WINDOW_ATTR = "gpufleet.window"
# What a trial's figures mean: bump it when a trial of an older study would be judged by other rules
# (2: the ``stranded`` constraint; a study made before it holds trials without that value).
STUDY_FORMAT = 2

Stage = Callable[[str], None]


@dataclass(frozen=True)
class World:
    name: str  # one of WORLDS
    result: RunResult
    measures: Measures
    findings: tuple[Finding, ...]
    stranded: int = 0  # jobs first apply runs (or the input admits) that this world makes never-admissible


@dataclass(frozen=True)
class Tuning:
    space: Space
    spec: study.StudySpec
    constraints: Constraints
    window: tuple[int, int]
    trials: list[Candidate]  # completed trials, in order
    pruned: int  # trials whose choices made no valid policy, and those stopped early (``stopped``)
    front: list[Candidate]
    recommended: Candidate | None  # None: no trial met the constraints
    policy: FleetPolicy  # the recommended policy (the input's when there is none)
    worlds: tuple[World, World, World]
    changes: list[Change]
    beyond: tuple[Beyond, ...] = ()  # never-admissible jobs no knob in the space can save
    infeasible: tuple[Infeasible, ...] = ()  # what no knob can do (``feasibility``); blocking ones skip the search
    heldout: tuple[judge.Baseline, ...] = ()  # the held-out weeks' first-apply and input worlds
    judged: tuple[judge.Judged, ...] = ()  # the candidates judged on them, the recommendation last (if any)
    stopped: int = 0  # trials stopped early at a rung (``fidelity``), among ``pruned``
    # a federated policy: residency's cost and one cluster against the federation, for ``policy``
    questions: tuple[Comparison, ...] = ()

    @property
    def shown(self) -> judge.Judged | None:
        """The candidate the held-out table shows: the one that holds, or else the best one judged."""
        if not self.judged:
            return None
        return self.judged[-1] if self.judged[-1].holds else self.judged[0]

    def heldout_table(self) -> list[dict[str, object]]:
        teams = [t.team for t in self.worlds[1].measures.teams]
        return judge.table(self.heldout, self.shown, teams)

    @property
    def blocked(self) -> bool:
        return any(i.blocks for i in self.infeasible)


def fingerprint(
    policy: FleetPolicy,
    jobs: Sequence[Job],
    constraints: Constraints,
    config: SimulationConfig,
    window: tuple[int, int],
    *,
    protected: frozenset[str] = frozenset(),
) -> str:
    """What a study is about; resuming it with another policy, trace, window or constraint is refused.

    The constraints' names and ``STUDY_FORMAT`` are part of it, and so are the jobs no trial may strand
    (``protected``): a study made before a constraint existed holds trials without its value, and
    resuming it would rank them as if they met it."""
    h = hashlib.sha256()
    h.update(f"format {STUDY_FORMAT} constraints {','.join(CONSTRAINTS)}".encode())
    h.update(policy.model_dump_json().encode())
    h.update(json.dumps([repr(j) for j in jobs]).encode())
    h.update(repr((constraints, config.placement, config.pods_ready, config.until_s, window)).encode())
    h.update(json.dumps(sorted(protected)).encode())
    return h.hexdigest()[:16]


def _world(
    name: str, result: RunResult, policy: FleetPolicy, window: tuple[int, int], protected: frozenset[str] = frozenset()
) -> World:
    fleet = resolve(policy)
    m = measure(result, fleet, window)
    return World(name, result, m, tuple(diagnose(result, fleet, m)), stranded_in(result, protected))


def _check_resume(opened: optuna.Study, mark: str, width: int) -> None:
    """Refuse a study made for another question, or under other rules (exit 2, never a silent mix).

    ``width``: how many constraint values each trial carries now; a trial with another count was
    judged by other constraints (a study from before ``stranded``, whatever its fingerprint says)."""
    known = opened.user_attrs.get(FINGERPRINT_ATTR)
    if known is not None and known != mark:
        raise InputError.one(
            "this study was made for another policy, trace or constraints, or by an older gpufleet "
            "(before the stranded constraint); give another --study name or another output folder",
            path="--study",
        )
    for t in opened.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        held = t.user_attrs.get(CONSTRAINTS_ATTR)
        if isinstance(held, list) and len(held) != width:
            raise InputError.one(
                f"trial {t.number} of this study carries {len(held)} constraint values where this gpufleet "
                f"judges {width} ({', '.join(CONSTRAINTS)}): the study was made by an older gpufleet; "
                "give another --study name or another output folder",
                path="--study",
            )


def _seed(
    opened: optuna.Study, created: bool, *, shared: bool, mark: str, width: int, seed: Callable[[float], None]
) -> None:
    """Seed the study (its creator), or wait for the creator's seed (a worker that joined a study in a
    database: workers of one Job start together) and check that it was made for the same question.
    A journal is one run's own: an unseeded one was left by a run stopped before seeding, no wait."""
    if created:  # the fingerprint before the seed, so a worker that waited for the seed checks it
        opened.set_user_attr(FINGERPRINT_ATTR, mark)
    seed(study.SEED_WAIT_S if shared and not created else 0.0)
    _check_resume(opened, mark, width)
    opened.set_user_attr(FINGERPRINT_ATTR, mark)


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
    holdout: Sequence[Week] = (),
    holdout_candidates: int = 3,
    fidelity: Fidelity | None = None,
    search_only: bool = False,
) -> Tuning:
    """Run the three worlds and the study; ``baseline`` reuses first-apply and input runs already made;
    ``reasoned`` enqueues the candidates of ``remedies`` before the sampler's own choices; ``window``
    is the one window every world is measured over (default: until the shorter baseline run ends);
    ``simplify`` tries the recommendation without each change no finding points at (``study.simplify``);
    ``holdout``: weeks the recommendation must also meet the constraints on (``judge``), trying at most
    ``holdout_candidates`` of the best feasible trials. ``search_only``: a cluster worker's part, the
    study's trials and nothing after them (no simplification, no held-out weeks, no recommendation):
    the run that then opens the finished study recommends once from every worker's trials."""
    say = stage or (lambda _text: None)
    clusters.refuse_rungs(policy, fidelity is not None)
    constraints = constraints or Constraints()
    config = config or SimulationConfig()
    space = build_space(policy)
    weeks = () if search_only else tuple(holdout)
    tasks = _world_tasks(resolve(policy), jobs, config, baseline is None, weeks)
    with fanout.ordered(tasks, spec.jobs) as ran_worlds:  # the held-out weeks' run while this one is set up
        first, given = _baselines(baseline, ran_worlds, say)
        window = window or common_window([first, given])
        input_never = {r.key for r in given.outcome.runs if r.never}
        saving = stranding(space, in_window(jobs, window), ran_keys(first), input_never)
        problem = Problem(
            policy, tuple(jobs), replace(config, mode=Mode.QUEUE), window, constraints, saving.protected, fidelity
        )
        worlds_before = (
            _world("first-apply", first, policy, window),
            _world("input", given, policy, window, saving.protected),
        )
        _open(problem, spec, space, worlds_before[1], reasoned=reasoned)
        proven = [
            *feasibility.serving(policy, (window[0], min(window[1], given.outcome.end)), constraints, config.serving),
            *feasibility.beyond(saving.beyond),
        ]
        blocked = any(i.blocks for i in proven)
        if weeks and not blocked:
            say(f"simulating first apply and the input policy on {len(weeks)} held-out week(s)")
        week_runs = [] if blocked else _week_runs(ran_worlds, len(weeks))
    done = _search(problem, spec, tick, say, blocked)
    base_params = space.base_params()
    if simplify and not blocked and not search_only:
        say("simplifying the recommendation")
        study.simplify(done, problem, base_params, _pointed(space, worlds_before[1].findings))
    trials = candidates(done)
    pruned, stopped = _pruned(done)
    held = [judge.prepare(policy, space, w, config, constraints, ran=r) for w, r in zip(weeks, week_runs, strict=False)]
    if held:
        say(f"judging on {len(held)} held-out week(s)")
    chosen, judged, ran = (
        (None, [], None)
        if blocked or search_only
        else _choose(trials, space, held, holdout_candidates, problem=problem, workers=spec.jobs)
    )
    if not (blocked or search_only):
        proven += _said(trials, constraints, chosen, judged)
    if chosen is None or chosen.params == base_params:
        tuned_policy = policy
        tuned = replace(worlds_before[1], name="tuned", result=named(given, "tuned"))
    else:
        if ran is None:  # not run beside the judging (no held-out weeks, or one process)
            say("simulating the recommended policy")
            ran = evaluate(problem, space, chosen.params, "tuned")
        tuned_policy = ran.fleet.policy
        found = tuple(diagnose(ran.result, ran.fleet, ran.measures))
        tuned = World("tuned", ran.result, ran.measures, found, ran.stranded)
    changes = clusters.located(policy, diff(
        base=base_params,
        tuned=chosen.params if chosen else base_params,
        before=worlds_before[1].measures,
        after=tuned.measures,
        found_before=worlds_before[1].findings,
        found_after=tuned.findings,
    ))  # fmt: skip
    asked = clusters.federated(policy) and not (blocked or search_only)
    questions = _questions(tuned_policy, jobs, config, window=window, ran=tuned.result, say=say) if asked else ()
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
        infeasible=tuple(proven),
        heldout=tuple(held),
        judged=tuple(judged),
        stopped=stopped,
        questions=questions,
    )


def _open(problem: Problem, spec: study.StudySpec, space: Space, given: World, *, reasoned: bool) -> None:
    """Open the study, refuse one made for another question, and seed it: trial 0 the input (``given``),
    then the reasoned candidates (``remedies``)."""
    p = problem
    mark = fingerprint(p.policy, p.jobs, p.constraints, p.config, p.window, protected=p.protected)
    opened, created = study.open_study(spec)
    _check_resume(opened, mark, p.constraints.width)
    base = _evaluated(problem, given, p.policy)
    reasoned_ones = remedies.candidates(space, given.findings) if reasoned else []
    _seed(
        opened,
        created,
        shared="://" in spec.storage,
        mark=mark,
        width=p.constraints.width,
        seed=lambda wait_s: study.seed_study(opened, space, base, reasoned_ones, wait_s=wait_s),
    )
    opened.set_user_attr(WINDOW_ATTR, list(p.window))


def _world_tasks(
    fleet: Fleet, jobs: Sequence[Job], config: SimulationConfig, tuned_week: bool, weeks: Sequence[Week]
) -> list[Callable[[], RunResult]]:  # fmt: skip
    """The independent worlds before the search, for ``fanout``: the tuned week's input and first apply
    (unless the caller made them), then every held-out week's input worlds and first applies. The input
    worlds are the slow ones (preemption loops), so they go first: the last task to start is a short one."""
    policy = fleet.policy
    tasks: list[Callable[[], RunResult]] = []
    if tuned_week:
        tasks += [
            lambda: named(clusters.queue(fleet, jobs, config), "input"),
            lambda: clusters.first_apply(fleet, jobs, config),
        ]
    tasks += [partial(judge.input_world, policy, w, config) for w in weeks]
    tasks += [partial(judge.first_world, policy, w, config) for w in weeks]
    return tasks


def _baselines(
    baseline: tuple[RunResult, RunResult] | None, ran: Iterator[RunResult], say: Stage
) -> tuple[RunResult, RunResult]:
    """First apply and the input policy's queue world (a federated policy's: through the federation):
    the caller's, or the first two of ``_world_tasks``."""
    if baseline is not None:
        return baseline[0], named(baseline[1], "input")
    say("simulating first apply and the input policy")
    given = next(ran)
    return next(ran), given


def _week_runs(ran: Iterator[RunResult], weeks: int) -> list[tuple[RunResult, RunResult]]:
    """Each held-out week's (first apply, input), from the rest of ``_world_tasks``."""
    given = [next(ran) for _ in range(weeks)]
    return [(next(ran), g) for g in given]


def _questions(
    policy: FleetPolicy, jobs: Sequence[Job], config: SimulationConfig, *, window: tuple[int, int], ran: RunResult,
    say: Stage,
) -> tuple[Comparison, ...]:  # fmt: skip
    """A federation's two questions for the policy ``tune`` recommends (its run is ``ran``)."""
    say("simulating residency lifted and one merged cluster")
    return fleet_questions(resolve(policy), jobs, config, window=window, declared=ran)


def _search(
    problem: Problem, spec: study.StudySpec, tick: study.Tick | None, say: Stage, blocked: bool
) -> optuna.Study:
    """Run the study to its budget; when a constraint is out of every knob's reach, say so and spend nothing."""
    if blocked:
        say("a constraint is out of reach of every knob: not searching")
        return study.load(spec)
    say(f"searching: {spec.trials} trials, {spec.jobs} worker(s)")
    return study.run(problem, spec, tick)


def _choose(
    trials: Sequence[Candidate], space: Space, held: Sequence[judge.Baseline], tries: int, *, problem: Problem,
    workers: int,
) -> tuple[Candidate | None, list[judge.Judged], Evaluated | None]:  # fmt: skip
    """The recommendation: without held-out weeks, the first feasible trial (in ``ranked`` order). With
    them, at most ``tries`` of those trials are judged on every held-out week, stopping at the first
    that meets the constraints and beats first apply on every week; of those judged, the one ``judge.pick``
    prefers (meets the constraints everywhere, then beats first apply on the most weeks). The judged
    come back in judging order with the recommendation moved last.

    The weeks of every candidate are judged in ``workers`` processes (``fanout``), in order, so a free
    process starts on the next candidate before the current one is decided (abandoned if it is); with
    more than one process, each candidate's run on the tuned week goes with its weeks, and the
    recommendation's is returned (the tuned world), so it is not simulated again after the judging."""
    order = ranked(trials, space.base_params())
    if not held:
        return (order[0] if order else None), [], None
    beside = workers > 1 and fanout.forks()
    tasks: list[Callable[[], judge.Verdict | Evaluated | None]] = []
    for c in order[:tries]:
        tasks += [partial(judge.verdict, b, space, c.params) for b in held]
        tasks += [partial(_tuned_run, problem, space, c.params)] if beside else []
    judged: list[judge.Judged] = []
    tuned_runs: dict[int, Evaluated | None] = {}
    with fanout.ordered(tasks, workers) as results:
        for c in order[:tries]:
            verdicts = [v if isinstance(v, judge.Verdict) else None for v in islice(results, len(held))]
            if beside:
                run = next(results)
                tuned_runs[c.number] = run if isinstance(run, Evaluated) else None
            verdict = judge.combined(c, verdicts)
            if verdict is None:
                continue
            judged.append(verdict)
            if verdict.holds and verdict.beaten == len(held):
                break
    best = judge.pick(judged)
    if best is None:
        return None, judged, None
    return best.candidate, [j for j in judged if j is not best] + [best], tuned_runs.get(best.candidate.number)


def _tuned_run(problem: Problem, space: Space, params: Mapping[str, str]) -> Evaluated | None:
    """A judged candidate's queue world on the tuned week (None for the input's choices, whose world is
    the input's, or for choices that make no valid policy)."""
    if dict(params) == space.base_params():
        return None
    try:
        return evaluate(problem, space, params, "tuned")
    except SpaceError:
        return None


def _said(
    trials: Sequence[Candidate], constraints: Constraints, chosen: Candidate | None, judged: Sequence[judge.Judged]
) -> list[Infeasible]:
    """Why there is no recommendation, or where the one there is falls short of first apply on held-out weeks."""
    if chosen is None:
        return [_why_none(trials, constraints, judged)]
    short = judge.not_beaten(judged)
    return [] if short is None else [short]


def _why_none(trials: Sequence[Candidate], constraints: Constraints, judged: Sequence[judge.Judged]) -> Infeasible:
    if not judged:
        return feasibility.nearest(trials, constraints)
    message = (
        f"the {len(judged)} best trial(s) meet the constraints on the tuned week but not on every held-out week: "
        + "; ".join(j.failures() for j in judged)
    )
    failing = sorted({f.split(" ")[0] for j in judged for v in j.verdicts for f in v.failing()})
    evidence = tuple(j.failures() for j in judged)
    needed = "a policy that holds on other weeks: more trials, more held-out candidates, or looser constraints"
    return Infeasible("HeldOutConstraintFails", ",".join(failing), False, message, evidence, needed)


def _pruned(done: optuna.Study) -> tuple[int, int]:
    """(pruned trials, those among them stopped early at a rung rather than invalid)."""
    trials = done.get_trials(deepcopy=False, states=(TrialState.PRUNED,))
    return len(trials), sum(1 for t in trials if PRUNED_ATTR in t.user_attrs)


def _pointed(space: Space, findings: Sequence[Finding]) -> set[str]:
    """The knobs some finding of the input policy names."""
    return {k.path for k in space.knobs if any(touches(s, k.path) for f in findings for s in f.settings)}


def _evaluated(problem: Problem, world: World, policy: FleetPolicy) -> Evaluated:
    lost = tuple(lost_guarantees(problem.policy, policy))
    m = world.measures
    stranded = stranded_in(world.result, problem.protected)
    values = violations(m, problem.constraints, len(lost), stranded)
    return Evaluated(world.result, resolve(policy), m, objectives(m), values, lost, stranded)
