"""The Optuna study: where it is stored, how it is seeded, and the worker processes that run it.

The simulator is CPU-bound Python, so parallel trials run in separate processes that share one
study through Optuna's storage: a journal file in the output folder by default, or any database
Optuna's RDB storage takes (``--storage postgresql://…``), which also lets workers on several
machines join the same study. A study is resumed by opening the same storage and study name: its
trials count towards the budget (``trials`` is the study's total, the input policy included).

Trial 0 is the input policy itself, added with the figures of the run the caller already made, so
the recommendation can never be worse than the input. Candidate policies worked out by reasoning
(``candidates``) are enqueued before the sampler's own choices.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import optuna
import sqlalchemy.exc
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.storages import BaseStorage, JournalStorage, RDBStorage
from optuna.storages.journal import JournalFileBackend
from optuna.study import MaxTrialsCallback
from optuna.trial import TrialState

from gpufleet.errors import InputError
from gpufleet.tune.objectives import DIRECTIONS
from gpufleet.tune.recommend import candidates, recommend
from gpufleet.tune.space import Space
from gpufleet.tune.trial import Evaluated, Objective, Problem, named_constraints

JOURNAL = "study.journal"
DEFAULT_NAME = "gpufleet-tune"
SEEDED_ATTR = "gpufleet.seeded"
FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)

Tick = Callable[[int], None]  # called with the number of finished trials


@dataclass(frozen=True)
class StudySpec:
    storage: str  # an Optuna storage URL, or a journal file path
    name: str = DEFAULT_NAME
    trials: int = 20  # the study's total, the input policy (trial 0) included
    jobs: int = 1
    seed: int = 0


def storage_url(url: str) -> str:
    """SQLAlchemy's URL for a database; ``postgresql://`` goes through psycopg 3 (the installed driver)."""
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


SCHEMA_TRIES = 5


def open_storage(where: str) -> BaseStorage:
    """A database URL (``scheme://…``) through RDB storage, anything else a journal file."""
    if "://" in where:
        for attempt in range(SCHEMA_TRIES):
            try:
                return RDBStorage(storage_url(where), skip_compatibility_check=False)
            except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError):
                # workers started together on an empty database all create Optuna's tables; the
                # losers of that race (a duplicate table or alembic row) find them made on a retry
                if attempt == SCHEMA_TRIES - 1:
                    raise
                time.sleep(0.5 + attempt)
            except Exception as exc:  # SQLAlchemy raises many kinds for a bad URL or an unreachable server
                raise InputError.one(f"cannot open the study storage: {exc}", path="--storage") from None
    Path(where).parent.mkdir(parents=True, exist_ok=True)
    return JournalStorage(JournalFileBackend(where))


def _sampler(seed: int) -> optuna.samplers.BaseSampler:
    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=8)


def load(spec: StudySpec, seed: int | None = None) -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(
        storage=open_storage(spec.storage),
        study_name=spec.name,
        directions=list(DIRECTIONS),
        sampler=_sampler(spec.seed if seed is None else seed),
        load_if_exists=True,
    )


def open_study(spec: StudySpec) -> tuple[optuna.Study, bool]:
    """The study, and whether this process created it (and so seeds it).

    Workers started together (the pods of one Job) all open the study at once; the storage lets only
    one create it, so exactly one seeds trial 0 and the candidates, and the others wait for that
    (``seed_study``) instead of each adding the input policy again."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        made = optuna.create_study(
            storage=open_storage(spec.storage),
            study_name=spec.name,
            directions=list(DIRECTIONS),
            sampler=_sampler(spec.seed),
        )
    except optuna.exceptions.DuplicatedStudyError:
        return load(spec), False
    return made, True


SEED_WAIT_S = 900.0  # how long a joining worker waits for the creator's seed before seeding itself


def finished(study: optuna.Study) -> int:
    return len(study.get_trials(deepcopy=False, states=FINISHED))


def seed_study(
    study: optuna.Study,
    space: Space,
    base: Evaluated,
    candidates: Sequence[Mapping[str, str]] = (),
    *,
    wait_s: float = 0.0,
) -> None:
    """Trial 0 is the input policy (its known figures); then the candidates, once per study.

    ``wait_s``: a worker that did not create the study waits this long for its creator's seed (which
    comes after the creator's own first-apply and input runs); a creator that died before seeding is
    then replaced by this worker."""
    deadline = time.monotonic() + wait_s
    while not study.user_attrs.get(SEEDED_ATTR) and time.monotonic() < deadline:
        time.sleep(1.0)
    if study.user_attrs.get(SEEDED_ATTR):
        return
    distributions: dict[str, BaseDistribution] = {k.path: CategoricalDistribution(k.choices) for k in space.knobs}
    attrs = base.attrs()
    trial = optuna.trial.create_trial(
        params=space.base_params(),
        distributions=distributions,
        values=list(base.values),
        user_attrs={**attrs, "source": "input"},
        constraints=named_constraints(base.constraints),
    )
    study.add_trial(trial)
    for params in candidates:
        study.enqueue_trial({**space.base_params(), **params}, user_attrs={"source": "candidate"}, skip_if_exists=True)
    study.set_user_attr(SEEDED_ATTR, True)


def _work(problem: Problem, spec: StudySpec, worker: int, n_trials: int) -> None:
    """One worker: open the shared study and run trials until the study holds its budget."""
    study = load(spec, seed=spec.seed + worker)
    stop = MaxTrialsCallback(spec.trials, states=FINISHED)
    study.optimize(Objective(problem), n_trials=n_trials, callbacks=[stop])


def shares(missing: int, workers: int) -> list[int]:
    """Each worker's trials: together exactly the ``missing`` ones, so local workers never run a trial past
    the budget (one that a rounded-up share allowed could be a preemption loop taking minutes; issue 33)."""
    return [missing // workers + (i < missing % workers) for i in range(workers)]


def run(problem: Problem, spec: StudySpec, tick: Tick | None = None) -> optuna.Study:
    """Run the study to its budget with ``spec.jobs`` processes (in this process when 1)."""
    study = load(spec)
    missing = spec.trials - finished(study)
    if missing <= 0:
        return study
    if tick:
        tick(finished(study))
    if spec.jobs <= 1:
        callbacks: list[Callable[[optuna.Study, optuna.trial.FrozenTrial], None]] = [
            MaxTrialsCallback(spec.trials, states=FINISHED)
        ]
        if tick:
            callbacks.append(lambda s, _t: tick(finished(s)))
        study.optimize(Objective(problem), n_trials=missing, callbacks=callbacks)
        return study
    workers = min(spec.jobs, missing)
    done = threading.Event()
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(_work, problem, spec, i + 1, n) for i, n in enumerate(shares(missing, workers))]
        while not done.wait(1.0):
            if tick:
                tick(finished(study))
            if all(f.done() for f in futures):
                done.set()
        for f in futures:
            f.result()  # a worker's exception is this run's
    if tick:
        tick(finished(study))
    return study


SIMPLIFY_LIMIT = 8  # at most this many extra trials


def simplify(study: optuna.Study, problem: Problem, base: Mapping[str, str], pointed: set[str]) -> None:
    """Try the recommendation without each change that no finding points at, one trial each.

    A random trial changes many settings, most of which do nothing on this trace; a policy is easier to
    review, and safer to apply, with only the changes that matter. Each reverted setting is a real trial
    of the study (source "simplify"); ``recommend`` prefers it when its figures are as good, since it
    changes fewer settings. Greedy: each revert starts from the best so far. When the changes are more
    than the reverts allowed, the first trial reverts all of them together (kept if it is as good).
    """
    tried: set[str] = set()
    for attempt in range(SIMPLIFY_LIMIT):
        chosen = recommend(candidates(study), base)
        if chosen is None:
            return
        extra = [k for k, v in chosen.params.items() if base.get(k) != v and k not in pointed and k not in tried]
        if not extra:
            return
        if attempt == 0 and len(extra) > SIMPLIFY_LIMIT:
            # more changes than one-by-one reverts can cover (a sampled trial in a wide space): all at once first
            reverted = {k: base[k] for k in extra}
        else:
            reverted = {extra[0]: base[extra[0]]}
            tried.add(extra[0])
        study.enqueue_trial({**chosen.params, **reverted}, user_attrs={"source": "simplify"})
        study.optimize(Objective(problem), n_trials=1)
