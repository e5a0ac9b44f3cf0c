"""Multi-fidelity trials (``tune.fidelity``): a run paused at rungs ends as the whole run does, the
rungs' measures only grow where pruning relies on it, and successive halving keeps the best 1/eta."""

from __future__ import annotations

import math
from pathlib import Path

import optuna
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpufleet.simulate.config import Mode, SimulationConfig
from gpufleet.simulate.measures import as_dict, measure
from gpufleet.simulate.run import simulate
from gpufleet.tune.fidelity import PRUNED_ATTR, Fidelity, Staged, for_flags, promoted
from gpufleet.tune.objectives import Constraints
from gpufleet.tune.space import build_space
from gpufleet.tune.study import StudySpec
from gpufleet.tune.tuning import tune
from tests.tune.cases import HOUR, a_alone, b_comes_back, policy

BORROW = "teams[a].quota[train].borrowingLimit"
RECLAIM = "queueing.reclaimWithinCohort"
WINDOW = (0, 3 * HOUR)


@pytest.mark.parametrize(
    "params",
    [{}, {BORROW: "unlimited"}, {BORROW: "unlimited", RECLAIM: "Never"}],
    ids=["input", "lifted", "lifted-no-reclaim"],
)
def test_a_run_paused_at_rungs_ends_as_the_whole_run(params: dict[str, str]) -> None:
    """The staged run is the same simulation: its final measures equal ``simulate``'s, and on the way
    goodput, preemptions of one job and serving starvation never decrease (exact pruning needs the last two)."""
    space = build_space(policy())
    fleet = space.fleet({**space.base_params(), **params})
    config = SimulationConfig(mode=Mode.QUEUE)
    staged = Staged(fleet, b_comes_back(), config)
    rungs = [m for _, m in staged.stages([HOUR // 4, HOUR // 2 + 60, HOUR, 2 * HOUR], WINDOW)]
    whole = measure(simulate(fleet, b_comes_back(), config), fleet, WINDOW)
    assert as_dict(measure(staged.finish(), fleet, WINDOW)) == as_dict(whole)
    for before, after in zip([*rungs], [*rungs[1:], whole], strict=True):
        assert before.goodput_gpu_h <= after.goodput_gpu_h
        assert before.preemptions_max <= after.preemptions_max
        assert before.serving_starved_replica_min <= after.serving_starved_replica_min
    assert rungs[0].goodput_gpu_h < whole.goodput_gpu_h  # the first rung is a real partial view


@pytest.mark.parametrize(
    ("first", "eta", "window", "rungs"),
    [
        (86_400, 3, (0, 7 * 86_400), [86_400, 3 * 86_400]),
        (3600, 2, (0, 5 * 3600), [3600, 7200, 4 * 3600]),
        (86_400, 3, (0, 86_400), []),  # the window is no longer than the first rung: one whole run
        (3600, 2, (7200, 7200 + 3 * 3600), [10_800, 14_400]),
    ],
)
def test_rungs_grow_by_eta_inside_the_window(first: int, eta: int, window: tuple[int, int], rungs: list[int]) -> None:
    assert Fidelity(first_s=first, eta=eta).rungs(window) == rungs


@pytest.mark.parametrize(
    ("every", "window", "rungs"),
    [
        (86_400, (0, 7 * 86_400), [d * 86_400 for d in range(1, 7)]),
        (3600, (7200, 7200 + 3 * 3600), [10_800, 14_400]),
        (86_400, (0, 86_400), []),
    ],
)
def test_exact_stops_come_every_first_s_inside_the_window(
    every: int, window: tuple[int, int], rungs: list[int]
) -> None:
    """Without halving nothing is compared across trials, so the checks may be regular: a loop stops
    within a day of breaking the preemption limit, however late in the week it starts."""
    assert Fidelity.exact(every).rungs(window) == rungs


@pytest.mark.parametrize(
    ("rung_hours", "whole_runs", "expected"),
    [
        (None, False, Fidelity(first_s=86_400, halving=False)),  # tune's default: the exact stops, daily
        (None, True, None),
        (12.0, False, Fidelity(first_s=12 * 3600)),
        (12.0, True, Fidelity(first_s=12 * 3600)),  # asking for rungs wins
    ],
)
def test_tune_stops_exactly_by_default_and_halves_only_when_asked(
    rung_hours: float | None, whole_runs: bool, expected: Fidelity | None
) -> None:
    assert for_flags(rung_hours, whole_runs) == expected


@given(
    st.lists(
        st.tuples(st.integers(0, 50), st.integers(-50, 0)).map(lambda t: (float(t[0]), float(t[1]))),
        min_size=3,
        max_size=30,
        unique=True,
    ),
    st.integers(2, 4),
)
def test_successive_halving_promotes_the_best_ceil_n_over_eta(scores: list[tuple[float, float]], eta: int) -> None:
    f = Fidelity(eta=eta, min_peers=3)
    kept = [s for i, s in enumerate(scores) if promoted(s, scores[:i] + scores[i + 1 :], f)]
    assert len(kept) == math.ceil(len(scores) / eta)
    assert sorted(kept) == sorted(scores)[: len(kept)]


def test_too_few_trials_at_a_rung_promote_every_one() -> None:
    f = Fidelity(eta=3, min_peers=3)
    assert promoted((9.0, 0.0), [(1.0, 0.0)], f)
    assert not promoted((9.0, 0.0), [(1.0, 0.0), (2.0, 0.0)], f)


@pytest.mark.parametrize("fid", [Fidelity(first_s=HOUR, eta=2), Fidelity.exact(HOUR)], ids=["halving", "exact"])
def test_a_trial_that_breaks_a_constraint_for_good_stops_at_that_rung(tmp_path: Path, fid: Fidelity) -> None:
    """With no preemption allowed, a trial whose b reclaims from a (preempting two of a's jobs at 30 min)
    stops at the first rung after it; the recommendation's figures are the ones whole runs give."""
    strict = Constraints(max_preemptions=0, keep_guarantees=True, min_jain=0.0)
    t = tune(
        policy(), b_comes_back(), StudySpec(str(tmp_path / "f.journal"), trials=8), constraints=strict, fidelity=fid
    )
    assert t.recommended is not None
    study = optuna.load_study(
        study_name=t.spec.name,
        storage=optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(t.spec.storage)),
    )
    stopped = [tr.user_attrs[PRUNED_ATTR] for tr in study.trials if PRUNED_ATTR in tr.user_attrs]
    assert stopped, "some trial preempts or lends its guarantee away"
    for s in stopped:  # a lost guarantee is the policy's own: it stops before the run; preemptions at a rung
        fixed_only = all(w.startswith(("guarantees", "stranded")) for w in s["why"])
        assert s["at"] == (t.window[0] if fixed_only else s["at"])
        assert fixed_only or s["at"] in fid.rungs(t.window)
        reasons = ("preemptions", "guarantees", "not among") if fid.halving else ("preemptions", "guarantees")
        assert all(w.startswith(reasons) for w in s["why"])
    whole = tune(policy(), b_comes_back(), StudySpec(str(tmp_path / "w.journal"), trials=8), constraints=strict)
    assert whole.recommended is not None and t.recommended.goodput_gpu_h == whole.recommended.goodput_gpu_h
    assert t.worlds[2].measures == whole.worlds[2].measures  # the same recommended figures as whole runs


@pytest.mark.parametrize(
    ("source", "fid", "halved"),
    [(None, Fidelity(HOUR), True), ("candidate", Fidelity(HOUR), False), (None, Fidelity.exact(HOUR), False)],
    ids=["sampled", "reasoned", "sampled-exact-stops-only"],
)
def test_a_sampled_trial_behind_its_peers_at_a_rung_stops_and_a_reasoned_one_runs_whole(
    source: str | None, fid: Fidelity, halved: bool
) -> None:
    """Three trials already recorded a perfect score at the 1 h rung (no wait, 100 GPU-h: peers from another
    worker, through the study); a sampled trial behind them is not among the best third and stops there,
    a reasoned candidate is never halved and runs whole, and with the exact stops only (tune's default)
    no trial is halved: being behind its peers is no proof it cannot be feasible."""
    from gpufleet.tune.fidelity import rung_key
    from gpufleet.tune.trial import Objective, Problem

    jobs = tuple(a_alone())
    loose = Constraints(min_jain=0.0)
    problem = Problem(policy(), jobs, SimulationConfig(mode=Mode.QUEUE), (0, 2 * HOUR), loose, fidelity=fid)
    objective = Objective(problem)
    study = optuna.create_study(directions=["maximize", "minimize"])
    dist = {k.path: optuna.distributions.CategoricalDistribution(k.choices) for k in objective.space.knobs}
    for _ in range(3):
        study.add_trial(
            optuna.trial.create_trial(
                params=objective.space.base_params(),
                distributions=dist,
                values=[8.0, 0.0],
                user_attrs={rung_key(HOUR): [0.0, -100.0]},
            )
        )
    study.enqueue_trial(objective.space.base_params(), user_attrs={} if source is None else {"source": source})
    study.optimize(objective, n_trials=1)
    last = study.trials[-1]
    assert last.user_attrs[rung_key(HOUR)][0] > 0  # the input's a waits at 1 h: behind every peer
    if halved:
        assert last.state is optuna.trial.TrialState.PRUNED
        assert last.user_attrs[PRUNED_ATTR]["at"] == HOUR
        assert last.user_attrs[PRUNED_ATTR]["why"][0].startswith("not among the best 1/3")
    else:
        assert last.state is optuna.trial.TrialState.COMPLETE and PRUNED_ATTR not in last.user_attrs
