"""A preempted victim's quota is released a release delay after the eviction, while its pods hold
their GPUs for the whole grace period (Kueue v0.19.2: the job reconciler clears the reservation once
the batch Job has no active pod, and pods being deleted are not active).

TWO_TEAMS (tests/simulate/fleets.py): a and b guaranteed one card each on the two-card node n1.
j1 (a, 2 GPUs, 3600 s) at 0 borrows b's card; j2 (b, 1 GPU, 1800 s) at 600 reclaims it, so j1 is
preempted at 600 and its pods terminate until 630 on both cards.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from gpufleet.ledger.records import Allocation, WaitInterval
from gpufleet.simulate.config import PodsReady, SimulationConfig
from gpufleet.simulate.jobs import JobRun
from gpufleet.simulate.measures import measure
from gpufleet.simulate.result import RunResult
from gpufleet.simulate.run import simulate
from tests.simulate.fleets import FLAT, TWO_TEAMS, fleet, job

START = datetime(2026, 1, 5, tzinfo=UTC)
JOBS = [job("j1", "a", 0, 3600, gpus=2), job("j2", "b", 600, 1800), job("j3", "a", 700, 600)]


def run(release_delay: int, timeout: int = 1800) -> RunResult:
    config = SimulationConfig(
        serving=FLAT,
        start=START,
        release_delay_s=release_delay,
        pods_ready=PodsReady(timeout_s=timeout),
        finish_delay_s=0,
    )
    return simulate(fleet(TWO_TEAMS), JOBS, config)


def runs(result: RunResult) -> dict[str, JobRun]:
    return {r.job.job_id: r for r in result.outcome.runs}


def at(second: int) -> datetime:
    return START + timedelta(seconds=second)


@pytest.mark.parametrize(
    ("release_delay", "released"),
    [
        (1, 601),  # Kueue's default: a second after the eviction (the twin's RELEASE_DELAY_MS)
        (0, 600),  # at the eviction's own instant
        (30, 630),  # as long as the pods: the quota frees with the GPUs, nothing waits for a node
    ],
    ids=["1s", "0s", "30s"],
)
def test_the_preemptor_is_admitted_at_the_release_and_runs_when_the_victim_s_pods_are_gone(
    release_delay: int, released: int
) -> None:
    """j1's quota is released at 600 + delay and j2 (waiting for it, Kueue's head) is admitted then;
    j2's pod finds both cards held by j1's terminating pods and is bound at 630 when they are gone:
    it holds quota unplaced for 630 − (600 + delay) s. j1 loses 2 GPUs × 630 s = 1260 GPU-s (0.35
    GPU-h) whatever the delay, since its pods hold the cards through the grace period; j2 waits 30 s
    (not running 600–630) whatever the delay."""
    result = run(release_delay)
    j1, j2 = runs(result)["j1"], runs(result)["j2"]
    first = j1.attempts[0]
    assert (first.ended, first.released, first.end_reason) == (600, released, "Preempted")
    assert [(h.bound, h.released) for h in first.holds] == [(0, 630)]  # the GPUs: freed at pods-gone
    (attempt,) = j2.attempts
    assert (attempt.reserved, attempt.started, attempt.ended) == (released, 630, 2430)
    assert j2.unplaced(result.outcome.end) == 630 - released
    assert j2.waited(result.outcome.end) == 30
    assert j1.work_lost == 2 * 630
    f = fleet(TWO_TEAMS)
    assert measure(result, f, (0, result.outcome.end)).lost_gpu_h == 0.35
    # the ledger: j1's first attempt ends at its eviction (Kueue's Evicted condition); its next wait
    # starts when the quota is released (QuotaReserved=False); j2's reservation is the release
    allocations = {(r.name, r.attempt): r for r in result.records if isinstance(r, Allocation)}
    assert allocations[("j1", 1)].finished == at(600)
    assert (allocations[("j2", 1)].quota_reserved, allocations[("j2", 1)].started) == (at(released), at(630))
    waits = {(r.name, r.index): r for r in result.records if isinstance(r, WaitInterval)}
    assert (waits[("j1", 2)].start, waits[("j1", 2)].end) == (at(released), at(2431))


@pytest.mark.parametrize(
    ("timeout", "j2_reserved", "j2_ends", "j1_reserved", "j1_started"),
    [
        # j2, admitted at 601, is bound at 630, before its timeout (641): nothing is evicted
        (40, [601], [2430], [0, 2431], [0, 2431]),
        # j2's timeout (601 + 20 = 621) comes before j1's pods are gone: Kueue evicts it, which frees
        # the quota, and j1 (parked since 601) wakes with the requeue batch at 622; its new pods wait
        # for its own terminating ones and are bound at 630. j2 comes back after 60 s of backoff and
        # reclaims at 681 (j1 preempted again, released at 682, its pods gone at 711); admitted at
        # 682, it times out again at 702, and after 120 s more is admitted at 822 and runs to 2622.
        # j3 took a's card at 700, so j1 fits again only one requeue batch after j2's end.
        (20, [601, 682, 822], [621, 702, 2622], [0, 622, 2623], [0, 630, 2623]),
    ],
    ids=["timeout-after-pods-gone", "timeout-before-pods-gone"],
)
def test_wait_for_pods_ready_counts_from_the_admission_into_released_quota(
    timeout: int, j2_reserved: list[int], j2_ends: list[int], j1_reserved: list[int], j1_started: list[int]
) -> None:
    """Kueue's waitForPodsReady timeout runs from the admission, so a preemptor admitted into quota
    whose GPUs are still held by terminating pods spends the rest of the grace period of its
    timeout waiting for a node."""
    result = run(1, timeout)
    j1, j2 = runs(result)["j1"], runs(result)["j2"]
    assert [a.reserved for a in j2.attempts] == j2_reserved
    assert [a.ended for a in j2.attempts] == j2_ends
    assert [a.reserved for a in j1.attempts] == j1_reserved
    assert [a.started for a in j1.attempts] == j1_started


def test_a_negative_release_delay_is_refused() -> None:
    with pytest.raises(ValueError, match="cannot be negative"):
        SimulationConfig(release_delay_s=-1)


@pytest.mark.parametrize(
    ("grace", "gone"),
    [(30, 630), (5, 605), (0, 601), (120, 720)],
    ids=["kubernetes-default", "short", "none", "long"],
)
def test_each_victim_holds_its_gpus_for_its_own_grace_period(grace: int, gone: int) -> None:
    """j1's pods say ``terminationGracePeriodSeconds: grace``: they hold both cards until 600 + grace
    (as the testbed's kwok holds a deleted pod until its deletionTimestamp), and j2, admitted at the
    release (601), runs from then. With no grace the pods are gone at the eviction, so j2 waits only
    for the quota (601)."""
    jobs = [replace(JOBS[0], termination_grace_s=grace), *JOBS[1:]]
    config = SimulationConfig(serving=FLAT, start=START, release_delay_s=1)
    result = simulate(fleet(TWO_TEAMS), jobs, config)
    j1, j2 = runs(result)["j1"], runs(result)["j2"]
    assert [(h.bound, h.released) for h in j1.attempts[0].holds] == [(0, 600 + grace)]
    assert j2.attempts[0].started == gone
    assert j1.work_lost == 2 * (600 + grace)


@pytest.mark.parametrize(("grace", "started"), [(30, 1830), (0, None)], ids=["kubernetes-default", "none"])
def test_a_pods_ready_eviction_holds_the_bound_pods_for_their_grace_period(grace: int, started: int | None) -> None:
    """TWO_NODES (two 2-card nodes of 48 CPUs, quota 4): g asks 3 pods of one card and 40 CPUs, so one
    pod fits per node and the third never does; Kueue evicts g at 1800 (PodsReadyTimeout). Its two
    bound pods are deleted like a preempted victim's and hold their cards until 1800 + grace, so s
    (one pod of two cards, waiting for quota since 1790) is admitted when g's quota frees and bound
    only when a node is whole again. With no grace it runs as soon as it is admitted."""
    from tests.simulate.fleets import TWO_NODES

    g = replace(job("g", "a", 0, 600, pods=3), cpu_milli=40_000, termination_grace_s=grace)
    s = job("s", "a", 1790, 600, gpus=2)
    config = SimulationConfig(serving=FLAT, start=START, pods_ready=PodsReady(timeout_s=1800, backoff_limit=0))
    result = simulate(fleet(TWO_NODES), [g, s], config)
    gang, single = runs(result)["g"], runs(result)["s"]
    first = gang.attempts[0]
    assert (first.ended, first.end_detail) == (1800, "PodsReadyTimeout")
    assert sorted((h.bound, h.released) for h in first.holds) == [(0, 1800 + grace)] * 2
    (attempt,) = single.attempts
    assert attempt.reserved is not None and attempt.reserved >= 1800
    assert attempt.started == (started if started is not None else attempt.reserved)
