"""The control plane's own latencies, as the world differential measured them on the testbed (issue 32):
a Job's quota frees a finish delay after its pods end, Kueue can preempt a Workload in that gap, the
pods of what a Kueue cycle admits bind before its next cycle, and a seeded run draws kube-scheduler's
pick among nodes of equal score. Times worked out by hand."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from gpufleet.ledger.records import Allocation, EndReason
from gpufleet.placement import Cluster, NodeSpec, PodSpec, Unschedulable
from gpufleet.simulate.config import SimulationConfig
from gpufleet.simulate.differential import from_records
from gpufleet.simulate.run import simulate
from tests.simulate.fleets import FLAT, SERVING_AT_RISK, TWO_TEAMS, fleet, job

START = datetime(2026, 1, 5, tzinfo=UTC)

# tests.simulate.fleets.TWO_TEAMS in one cohort: a may borrow b's card on the two-card training node,
# and b reclaims it (Kueue's default reclaimWithinCohort: Any).
SHARED = TWO_TEAMS + "queueing: {cohort: c}\n"


def _allocations(records: list[object], name: str) -> list[Allocation]:
    return sorted((r for r in records if isinstance(r, Allocation) and r.name == name), key=lambda r: r.attempt)


def _at(seconds: float) -> datetime:
    return START + timedelta(seconds=seconds)


@pytest.mark.parametrize("delay", [0, 1, 2])
def test_a_finished_job_s_quota_frees_a_finish_delay_after_its_pods_end(delay: int) -> None:
    """t1 holds team a's two cards for 100 s; t2, parked behind it, is admitted by the requeue batch one
    second after Kueue finishes t1 (a finish delay after its pods' end): at 101 + delay. The ledger's
    ``finished`` is Kueue's, and t1's GPU-hours are its pods' 100 s whatever the delay."""
    jobs = [job("t1", "a", 0, 100, gpus=2), job("t2", "a", 10, 100, gpus=2)]
    config = SimulationConfig(serving=FLAT, start=START, finish_delay_s=delay)
    result = simulate(fleet(SERVING_AT_RISK), jobs, config)
    (t1,) = _allocations(result.records, "t1")
    (t2,) = _allocations(result.records, "t2")
    assert (t1.started, t1.finished) == (_at(0), _at(100 + delay))
    assert t2.quota_reserved == _at(101 + delay) and t2.started == _at(101 + delay)
    run = next(r for r in result.outcome.runs if r.job.job_id == "t1")
    assert run.gpu_seconds == 2 * 100


def test_kueue_may_preempt_a_workload_whose_pods_already_succeeded() -> None:
    """a's x borrows b's card and its pods end at 100, the second b's y arrives; Kueue has not yet seen
    x's Job complete (finish delay 1 s), so it reclaims the card from x. The recorder writes what the
    testbed showed (docs/simulate.md, world differential item 10): attempt 1 preempted with its run,
    attempt 2 finished with quota and no pod; x counts as finished, and the simulator loses none of its work."""
    jobs = [job("x", "a", 0, 100, gpus=2), job("y", "b", 100, 50)]
    result = simulate(fleet(SHARED), jobs, SimulationConfig(serving=FLAT, start=START))
    first, second = _allocations(result.records, "x")
    assert (first.end_reason, first.end_detail, first.started) == (
        EndReason.PREEMPTED, "InCohortReclamation", _at(0),
    )  # fmt: skip
    assert second.end_reason is EndReason.FINISHED and second.started is None and not second.placements
    assert from_records(result.records, START).finished == 2
    x = next(r for r in result.outcome.runs if r.job.job_id == "x")
    assert x.work_lost == 0 and x.gpu_seconds == 2 * 100  # its run was whole: nothing held past its end
    (y,) = _allocations(result.records, "y")
    assert y.started == _at(101)  # the quota frees at the victim's release, a second after the reclaim


def test_without_the_finish_delay_the_job_ends_before_the_reclaim() -> None:
    """The same trace with Kueue seeing the finish at once (the simulator before issue 32's
    measurement): x finishes, y takes the freed card, no preemption."""
    jobs = [job("x", "a", 0, 100, gpus=2), job("y", "b", 100, 50)]
    result = simulate(fleet(SHARED), jobs, SimulationConfig(serving=FLAT, start=START, finish_delay_s=0))
    assert [r.end_reason for r in _allocations(result.records, "x")] == [EndReason.FINISHED]


def _nodes(count: int) -> list[NodeSpec]:
    return [NodeSpec(f"n{i}", cpu_milli=64_000, memory=512 << 30, gpus=4) for i in range(count)]


def test_a_seeded_tie_break_leans_to_the_first_name_as_kube_scheduler_does_and_repeats() -> None:
    """Four empty nodes score alike: without a generator the lowest name wins every time; with one, the
    pick is a seeded draw that takes the first by name unless the filters' race (``TIE_RACE``) draws
    among all four, so n0 with probability 1 - 3/4 TIE_RACE and each other node TIE_RACE / 4; the same
    for the same seed."""
    import random

    from gpufleet.placement.cluster import TIE_RACE

    pod = PodSpec(name="p", gpus=1)
    assert {Cluster(_nodes(4)).schedule(pod).node for _ in range(20)} == {"n0"}  # type: ignore[union-attr]
    seeds = 800
    picks = [Cluster(_nodes(4), tie_break=random.Random(seed)).schedule(pod) for seed in range(seeds)]
    assert not any(isinstance(p, Unschedulable) for p in picks)
    share = Counter(p.node for p in picks)  # type: ignore[union-attr]
    for node, expected in (("n0", 1 - 0.75 * TIE_RACE), *((f"n{i}", TIE_RACE / 4) for i in (1, 2, 3))):
        sd = (expected * (1 - expected) / seeds) ** 0.5
        assert abs(share[node] / seeds - expected) < 4 * sd, (node, share)
    again = [Cluster(_nodes(4), tie_break=random.Random(seed)).schedule(pod) for seed in range(seeds)]
    assert [p.node for p in again] == [p.node for p in picks]  # type: ignore[union-attr]


def test_a_seeded_tie_break_never_picks_a_node_of_lower_score() -> None:
    """One node already holds a card: under MostAllocated it scores best, so every seed picks it."""
    import random

    from gpufleet.placement import MostAllocated

    for seed in range(20):
        cluster = Cluster(_nodes(3), MostAllocated(), tie_break=random.Random(seed))
        first = cluster.schedule(PodSpec(name="a", gpus=1))
        assert not isinstance(first, Unschedulable)
        cluster.bind(PodSpec(name="a", gpus=1), first)
        second = cluster.schedule(PodSpec(name="b", gpus=1))
        assert not isinstance(second, Unschedulable) and second.node == first.node


def test_simulate_without_a_seed_is_the_same_run_twice_and_a_seed_repeats_itself() -> None:
    jobs = [job(f"j{i}", "a", i * 5, 60) for i in range(8)]
    f = fleet(SERVING_AT_RISK)

    def placements(config: SimulationConfig) -> list[object]:
        return [r.placements for r in simulate(f, jobs, config).records if isinstance(r, Allocation)]

    base = SimulationConfig(serving=FLAT, start=START)
    assert placements(base) == placements(base)
    seeded = SimulationConfig(serving=FLAT, start=START, jitter_seed=7)
    assert placements(seeded) == placements(seeded)


@pytest.mark.parametrize(
    "field", ["finish_delay_s", "pod_start_delay_s", "release_delay_s"],
)  # fmt: skip
def test_a_negative_control_plane_delay_is_refused(field: str) -> None:
    with pytest.raises(ValueError, match="control-plane delay"):
        SimulationConfig(**{field: -1})  # type: ignore[arg-type]
