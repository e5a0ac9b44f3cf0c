"""The world differential's measures, distances and floor (values in, values out; no testbed)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpufleet.ledger.records import Allocation, EndReason
from gpufleet.simulate.config import SimulationConfig
from gpufleet.simulate.differential import (
    Measure,
    WorldMeasures,
    distance,
    ensemble,
    from_records,
    judge,
    order_divergence,
    scaled,
    wasserstein,
)
from gpufleet.simulate.measures import measure
from gpufleet.simulate.run import simulate
from tests.simulate.fleets import FLAT, TWO_NODES, TWO_TEAMS, fleet, job

START = datetime(2026, 1, 5, tzinfo=UTC)
samples = st.lists(st.integers(0, 10_000).map(float), min_size=1, max_size=20)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ([0.0], [10.0], 10.0),
        ([0.0, 10.0], [10.0, 0.0], 0.0),
        ([0.0, 0.0, 10.0], [0.0, 10.0, 10.0], 10 / 3),
        ([], [], 0.0),
        ([], [1.0], float("inf")),
    ],
)
def test_wasserstein_by_hand(a: list[float], b: list[float], expected: float) -> None:
    assert wasserstein(a, b) == pytest.approx(expected)


@given(samples, samples, samples)
def test_wasserstein_is_a_metric(a: list[float], b: list[float], c: list[float]) -> None:
    assert wasserstein(a, a) == 0
    assert wasserstein(a, b) == pytest.approx(wasserstein(b, a))
    assert wasserstein(a, c) <= wasserstein(a, b) + wasserstein(b, c) + 1e-6


@given(samples, st.integers(-500, 500))
def test_wasserstein_of_a_shift_is_the_shift(a: list[float], shift: int) -> None:
    assert wasserstein(a, [x + shift for x in a]) == pytest.approx(abs(shift))


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (("x", "y", "z"), ("x", "y", "z"), 0),
        (("x", "y", "z"), ("x", "z", "y"), 2),
        (("x",), ("x", "y"), 1),
        ((), ("a",), 1),
    ],
)
def test_order_divergence_counts_admissions_after_the_first_difference(
    a: tuple[str, ...], b: tuple[str, ...], expected: int
) -> None:
    assert order_divergence(a, b) == expected


def _alloc(name: str, attempt: int, created: int, reserved: int | None, started: int | None, ended: int | None,
           reason: EndReason, detail: str = "", gpus: int = 2) -> Allocation:  # fmt: skip
    def at(s: int | None) -> datetime | None:
        return None if s is None else START + timedelta(seconds=s)

    return Allocation(
        workload_uid=name, attempt=attempt, namespace="a", name=name, team="a", model=None, data_class=None,
        checkpoint=None, local_queue="a/a", cluster_queue="a", priority=0, flavors=(), gpu_resource="nvidia.com/gpu",
        gpu_count=gpus, placements=(), created=START + timedelta(seconds=created), quota_reserved=at(reserved),
        admitted=at(reserved), started=at(started), finished=at(ended), end_reason=reason, end_detail=detail,
        end_message="", borrowing=None, simulated=False,
    )  # fmt: skip


def test_measures_of_a_ledger_worked_by_hand() -> None:
    """j1: admitted 10, ran 12-100, preempted; admitted again 130, ran 131-431. j2: admitted 5, podsReady
    eviction at 65 without running, admitted 200, ran 200-260."""
    records = [
        _alloc("j1", 1, 0, 10, 12, 100, EndReason.PREEMPTED, "InCohortReclamation"),
        _alloc("j1", 2, 0, 130, 131, 431, EndReason.FINISHED, "Succeeded"),
        _alloc("j2", 1, 5, 5, None, 65, EndReason.EVICTED, "PodsReadyTimeout", gpus=1),
        _alloc("j2", 2, 5, 200, 200, 260, EndReason.FINISHED, "Succeeded", gpus=1),
    ]
    m = from_records(records, START)
    assert m.waits == {"a": (43.0, 195.0)}  # j1: 131 - 0 - 88 ran; j2: 200 - 5
    assert m.completions == {"a": (255.0, 431.0)}
    assert m.goodput_gpu_h == pytest.approx((2 * 300 + 60) / 3600)
    assert m.lost_gpu_h == pytest.approx(2 * 88 / 3600)
    assert m.held_idle_gpu_h == pytest.approx((2 * 2 + 2 * 1 + 60) / 3600)
    assert m.admitted_unplaced_h == pytest.approx((2 + 1 + 60) / 3600)
    assert m.preemptions == {"InCohortReclamation": 1}
    assert m.pods_ready_evictions == 1
    assert m.admission_order == ("a/j2", "a/j1")
    clipped = from_records(records, START, window=(0, 100))
    assert clipped.goodput_gpu_h == 0 and clipped.lost_gpu_h == pytest.approx(2 * 88 / 3600)


def test_ledger_measures_agree_with_the_simulator_s_own() -> None:
    """Measured from its ledger records, a simulated run gives what the simulator's own measures say:
    the same goodput, preemptions, podsReady evictions and (per job) waits. With no finish delay: the
    ledger's ``finished`` is Kueue's (the Workload finished), which a finish delay puts after the pods'
    end that the simulator's own GPU-hours count (``test_a_finished_job_s_quota_frees_a_finish_delay_
    after_its_pods_end``)."""
    jobs = [job("j1", "a", 0, 3600, gpus=2), job("j2", "b", 600, 1800), job("j3", "a", 700, 600)]
    f = fleet(TWO_TEAMS)
    result = simulate(f, jobs, SimulationConfig(serving=FLAT, start=START, finish_delay_s=0))
    m = from_records(result.records, START)
    own = measure(result, f, (0, result.outcome.end))
    assert round(m.goodput_gpu_h, 3) == own.goodput_gpu_h
    assert sum(m.preemptions.values()) == sum(r.preemptions for r in result.outcome.runs) > 0
    assert m.pods_ready_evictions == sum(r.requeues for r in result.outcome.runs)
    by_team = {t: sorted(float(r.waited(result.outcome.end)) for r in result.outcome.runs if r.team == t) for t in "ab"}
    assert {t: list(v) for t, v in m.waits.items()} == by_team


def _world(waits: tuple[float, ...], preempted: int) -> WorldMeasures:
    return WorldMeasures(("a",), {"a": waits}, {"a": waits}, 1.0, 0.0, 0.0, 0.0, {"InClusterQueue": preempted}, 0,
                         ("a/x",), 1, 1)  # fmt: skip


def test_a_measure_agrees_within_the_real_runs_spread() -> None:
    real = [_world((10.0, 20.0), 1), _world((14.0, 20.0), 2)]
    close = [_world((12.0, 20.0), 1)]
    far = [_world((40.0, 20.0), 4)]
    verdicts = {v.measure.name: v for v in judge(real, close)}
    assert verdicts["wait a"].real_floor == pytest.approx(2.0) and verdicts["wait a"].agrees
    assert verdicts["preemptions InClusterQueue"].agrees
    verdicts = {v.measure.name: v for v in judge(real, far)}
    assert not verdicts["wait a"].agrees and not verdicts["preemptions InClusterQueue"].agrees


def test_a_time_within_the_ledger_s_resolution_agrees_with_one_real_run() -> None:
    (v,) = [v for v in judge([_world((10.0,), 0)], [_world((11.0,), 0)]) if v.measure.name == "wait a"]
    assert v.real_floor == 0 and v.agrees


def test_scaling_multiplies_every_duration() -> None:
    w = scaled(_world((10.0, 20.0), 1), 10)
    assert w.waits["a"] == (100.0, 200.0) and w.goodput_gpu_h == 10.0 and w.preemptions == {"InClusterQueue": 1}


def test_the_ensemble_breaks_same_second_ties_either_way_and_keeps_the_rest() -> None:
    jobs = [job("a", "a", 10, 60), job("b", "a", 10, 60), job("c", "a", 20, 60), job("d", "a", 21, 60)]
    assert ensemble(jobs, 0) == jobs
    runs = [ensemble(jobs, seed) for seed in range(1, 30)]
    assert all([j.submit_s for j in run[2:]] == [20, 21] for run in runs)  # no tie: never moved
    assert all(all(m.submit_s - j.submit_s in (0, 1) for m, j in zip(run, jobs, strict=True)) for run in runs)
    firsts = {min(run[:2], key=lambda j: (j.submit_s, j.job_id)).job_id for run in runs}
    assert firsts == {"a", "b"}  # the tie went both ways over the seeds
    assert ensemble(jobs, 7) == ensemble(jobs, 7)


def test_distance_refuses_an_unknown_measure() -> None:
    with pytest.raises(ValueError, match="unknown measure"):
        distance(Measure("colour", ""), _world((1.0,), 0), _world((1.0,), 0))


def test_gang_records_measure_alike() -> None:
    """A 2x2 gang on two 2-card nodes: from its records, its goodput is its 4 cards from its start to
    Kueue's finish, a finish delay after its pods' end (the ledger's ``finished``, as the recorder writes it)."""
    config = SimulationConfig(start=START)
    result = simulate(fleet(TWO_NODES), [job("g", "a", 0, 900, gpus=2, pods=2)], config)
    m = from_records(result.records, START)
    assert m.goodput_gpu_h == pytest.approx(4 * (900 + config.finish_delay_s) / 3600) and m.finished == 1
    assert replace(m, goodput_gpu_h=0).jobs == 1


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("job-w016-75ba4", "a/w016"),
        ("job-my-job-0a1b2", "a/my-job"),
        ("w016", "a/w016"),
        ("job-x-XYZ12", "a/job-x-XYZ12"),
    ],
)
def test_kueue_s_workload_names_read_back_as_the_job_s(name: str, expected: str) -> None:
    from gpufleet.simulate.differential import job_name

    assert job_name(replace(_alloc("x", 1, 0, 0, 0, 1, EndReason.FINISHED), name=name)) == expected


def test_the_floor_of_gpu_hours_is_a_second_per_attempt_of_the_real_runs() -> None:
    real = [replace(_world((1.0,), 0), attempt_gpus=36, attempts=12)]
    (v,) = [v for v in judge(real, [replace(_world((1.0,), 0), goodput_gpu_h=1.009)]) if v.measure.name == "goodput"]
    assert v.resolution == pytest.approx(36 / 3600) and v.agrees


PRIORITIES = TWO_NODES.replace(
    "priorityClasses: [{name: batch, value: 100}]",
    "priorityClasses: [{name: batch, value: 100}, {name: low, value: 1}]",
).replace("priorityClasses: [batch]", "priorityClasses: [batch, low]")


def test_a_gang_bound_in_two_steps_started_with_its_first_pod_as_the_recorder_writes() -> None:
    """Found by the world differential: the recorder's ``started`` is the first pod's start; the
    simulator wrote the instant the last pod was bound. A low job holds n1; a gang of 2x2 preempts it
    at 10 and is admitted when the victim's quota is released (11): one pod binds on n2 at once, the other
    when the victim's pod is gone (grace 30 s, at 40)."""
    low = replace(job("x", "a", 0, 600, gpus=2), priority_class="low")
    gang = job("g", "a", 10, 100, gpus=2, pods=2)
    result = simulate(fleet(PRIORITIES), [low, gang], SimulationConfig(start=START))
    (g,) = [r for r in result.records if isinstance(r, Allocation) and r.name == "g"]
    run = next(r for r in result.outcome.runs if r.job.job_id == "g")
    assert run.attempts[0].started == 40  # the simulator's own start: every pod bound
    assert g.started == START + timedelta(seconds=11)  # the ledger's: the first pod's
    assert g.finished == START + timedelta(seconds=141)  # Kueue's finish: a finish delay after its pods' end


def test_a_job_that_succeeded_while_kueue_preempted_it_counts_as_finished() -> None:
    """Found on the testbed: w014's pod succeeded in the second Kueue reclaimed it; the recorder wrote
    attempt 1 Preempted (it ran 12-49) and attempt 2 Finished at 56 with no start of its own."""
    records = [
        _alloc("w014", 1, 0, 2, 12, 49, EndReason.PREEMPTED, "InCohortReclamation"),
        _alloc("w014", 2, 0, 56, None, 56, EndReason.FINISHED, "Succeeded"),
    ]
    m = from_records(records, START)
    assert (m.jobs, m.finished) == (1, 1)
    assert m.waits == {"a": (12.0,)} and m.completions == {"a": (56.0,)}
