"""Independent simulations of a tune run spread over its processes: the figures a serial run gives."""

from __future__ import annotations

import os
import time
from dataclasses import asdict
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpufleet.simulate.config import SimulationConfig
from gpufleet.tune import fanout
from gpufleet.tune.holdout import Week
from gpufleet.tune.judge import prepare
from gpufleet.tune.objectives import Constraints
from gpufleet.tune.study import StudySpec, shares
from gpufleet.tune.tuning import Tuning, tune
from tests.tune.cases import a_alone, b_comes_back, b_wants_the_pool, policy

CALM = Constraints(max_preemptions=0, min_jain=0.0)
needs_fork = pytest.mark.skipif(not fanout.forks(), reason="tasks run in forked processes; this platform cannot fork")


def _pid_and(n: int) -> tuple[int, int]:
    return os.getpid(), n * n


@needs_fork
@pytest.mark.parametrize("workers", [1, 2, 3, 8])
def test_results_come_back_in_the_tasks_order_from_the_given_processes(workers: int) -> None:
    tasks = [lambda n=n: _pid_and(n) for n in range(7)]
    out = fanout.every(tasks, workers)
    assert [square for _, square in out] == [n * n for n in range(7)]
    pids = {pid for pid, _ in out}
    if workers == 1:
        assert pids == {os.getpid()}  # one process: the caller's own
    else:
        assert os.getpid() not in pids and 1 <= len(pids) <= min(workers, 7)


@needs_fork
def test_stopping_early_abandons_the_tasks_not_read(tmp_path: Path) -> None:
    """The caller reads two results and leaves while both processes are busy with tasks that would run for
    an hour: leaving does not wait for them, and the tasks behind them never start."""

    def mark(n: int) -> int:
        (tmp_path / str(n)).touch()
        if n >= 2:
            time.sleep(3600)
        return n

    tasks = [lambda n=n: mark(n) for n in range(200)]
    with fanout.ordered(tasks, 2) as results:
        assert [next(results), next(results)] == [0, 1]
    assert not (tmp_path / "199").exists() and not (tmp_path / "4").exists()


def _figures(t: Tuning) -> dict[str, object]:
    """Everything the report prints from a run, by value."""
    return {
        "trials": [asdict(c) for c in sorted(t.trials, key=lambda c: c.number)],
        "recommended": None if t.recommended is None else t.recommended.number,
        "worlds": [(w.name, asdict(w.measures), w.stranded, len(w.result.rows)) for w in t.worlds],
        "window": t.window,
        "heldout": t.heldout_table(),
        "judged": [(j.candidate.number, [asdict(v) for v in j.verdicts]) for j in t.judged],
        "infeasible": [(i.reason, i.message) for i in t.infeasible],
        "changes": [c.explanation() for c in t.changes],
    }


@needs_fork
def test_two_processes_give_the_serial_run_s_figures(tmp_path: Path) -> None:
    """Baselines, held-out weeks and the judging run in two processes; the study's trials are the input
    and its four reasoned candidates (no sampled trial, so both runs hold the same trials), and every
    figure, the held-out table and the recommendation equal the one-process run's."""
    weeks = [Week("b-returns", tuple(b_comes_back())), Week("b-pool", tuple(b_wants_the_pool()))]
    runs = []
    for jobs in (1, 2):
        spec = StudySpec(str(tmp_path / f"jobs{jobs}" / "s.journal"), trials=5, jobs=jobs)
        runs.append(tune(policy(), a_alone(), spec, constraints=CALM, holdout=weeks, holdout_candidates=6))
    serial, parallel = runs
    assert [c.source for c in serial.trials] == ["input"] + ["candidate"] * 4  # no sampled trial
    assert len(serial.judged) > 1 and serial.recommended is not None  # the judging has more than one to run
    assert _figures(parallel) == _figures(serial)
    for b in parallel.heldout:  # each week's first apply and input, as the week's own runs give them
        alone = prepare(policy(), parallel.space, b.week, SimulationConfig(), CALM)
        assert (b.first, b.given, b.problem) == (alone.first, alone.given, alone.problem)


@given(st.integers(0, 200), st.integers(1, 16))
def test_the_workers_shares_add_up_to_the_missing_trials(missing: int, workers: int) -> None:
    split = shares(missing, workers)
    assert sum(split) == missing and len(split) == workers and max(split) - min(split) <= 1


def test_two_processes_run_no_trial_past_the_budget(tmp_path: Path) -> None:
    """Four trials with two processes: the input and three of the four reasoned candidates, never the fourth
    (a rounded-up share let the process that finished first start it)."""
    spec = StudySpec(str(tmp_path / "s.journal"), trials=4, jobs=2)
    t = tune(policy(), a_alone(), spec, constraints=CALM)
    assert sorted(c.number for c in t.trials) == [0, 1, 2, 3] and t.pruned == 0
