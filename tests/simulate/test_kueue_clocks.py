"""Kueue's clocks in the simulator: parked workloads wake one requeue batch (1 s) after the
capacity change that frees them, so an active head takes the quota first (issue 18, seed 150); a
victim's quota is released a release delay after its eviction."""

from __future__ import annotations

from itertools import pairwise

import pytest

from gpufleet.simulate.config import Mode, SimulationConfig
from gpufleet.simulate.measures import measure
from gpufleet.simulate.pathologies import LOOP_AT, Reason, diagnose
from gpufleet.simulate.run import simulate
from gpufleet.trace.job import Job, JobKind
from tests.simulate.fleets import FLAT, SERVING_AT_RISK, fleet, job

# SERVING_AT_RISK: team a has 2 cards of quota on a two-card training node.
# j1 holds both cards until 110; j2 (2 cards) arrives at 10 and is parked (no quota);
# j3 (1 card) arrives at 110, the instant j1 finishes.
JOBS = [job("j1", "a", 0, 110, gpus=2), job("j2", "a", 10, 600, gpus=2), job("j3", "a", 110, 600, gpus=1)]


@pytest.mark.parametrize(
    ("clocks", "reserved"),
    [
        # Kueue: j1's end asks for a requeue batch one second later; j3, in the heap, is admitted at
        # once; j2 wakes at 111, does not fit, is parked again, and wakes one batch after j3's end.
        (True, {"a/j1": [0], "a/j3": [110], "a/j2": [711]}),
        # without the clocks j2 (older) is back in the heap before j3's first cycle and goes first
        pytest.param(False, {"a/j1": [0], "a/j2": [110], "a/j3": [710]}, marks=pytest.mark.pure),
    ],
)
def test_a_parked_workload_wakes_one_requeue_batch_after_the_quota_frees(
    clocks: bool, reserved: dict[str, list[int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    _clocks(clocks, monkeypatch)
    result = simulate(fleet(SERVING_AT_RISK), JOBS, SimulationConfig(mode=Mode.QUEUE, serving=FLAT, finish_delay_s=0))
    got = {r.key: [a.reserved for a in r.attempts if a.reserved is not None] for r in result.outcome.runs}
    assert got == reserved


def _clocks(on: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Off: the queue world's twin in Kueue's unit-test world (what the simulator did before)."""
    if not on:
        import gpufleet.simulate.queue as queue

        real = queue.Twin
        monkeypatch.setattr(queue, "Twin", lambda spec, **kw: real(spec, **{**kw, "clocks": None}))


# Three teams on two H100 pools (f0, f1); z's weight 0 makes it the first target of fair sharing
# whenever it borrows. Found by a seeded search of small fleets (seed 384).
THREE_TEAMS = """
apiVersion: gpufleet.io/v1alpha1
kind: FleetPolicy
cluster: {provider: onprem, kubernetes: "1.34", dra: off}
priorityClasses: [{name: batch, value: 100}, {name: high, value: 110}]
dataClasses: [{name: internal, checkpointLocations: ["s3://eu-central-1/"]}]
pools:
  - {name: f0, gpu: H100-SXM5-80GB, nodes: [n1, n2], gpusPerNode: 8, role: training, slicing: {mode: full}}
  - {name: f1, gpu: H100-SXM5-80GB, nodes: [m1, m2], gpusPerNode: 8, role: training, slicing: {mode: full}}
teams:
  - {name: z, namespaces: [z], quota: {f0: {gpus: 3}, f1: {gpus: 0}}, weight: 0, priorityClasses: [batch, high], dataClasses: [internal]}
  - {name: a, namespaces: [a], quota: {f0: {gpus: 2}, f1: {gpus: 1}}, weight: 2, priorityClasses: [batch, high], dataClasses: [internal]}
  - {name: b, namespaces: [b], quota: {f0: {gpus: 1}, f1: {gpus: 0}}, weight: 1, priorityClasses: [batch, high], dataClasses: [internal]}
"""


def _job(name: str, team: str, at: int, pods: int, gpus: int, priority: str) -> Job:
    return Job(name, team, team, at, 36_000, JobKind.TRAINING, pods=pods, gpus=gpus, priority_class=priority)


LOOP_JOBS = [
    _job("big", "a", 0, 3, 4, "high"),  # 12 GPUs: borrows most of f0
    _job("b1", "b", 0, 1, 3, "high"),
    _job("a2", "a", 10, 2, 4, "high"),
    _job("z1", "z", 20, 2, 1, "batch"),
    _job("a3", "a", 20, 2, 4, "high"),
    _job("z2", "z", 20, 1, 4, "batch"),
]


@pytest.mark.parametrize(
    ("clocks", "release_delay", "period"),
    [
        (True, 1, 2),  # Kueue releases a victim's quota a second after the eviction, then the batch
        (True, 0, 1),  # released at the eviction's instant: only the batch's second is left
        (True, 30, 31),  # held as long as the pods (the simulator before issue 18's release delay)
        pytest.param(False, 1, None, marks=pytest.mark.pure),  # the queue world's Twin patched
    ],
    ids=["release-1s", "release-0s", "release-at-pods-gone", "no-clocks"],
)
def test_the_requeue_batch_wakes_a_parked_preemptor_into_a_preempt_back_loop(
    clocks: bool, release_delay: int, period: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """z reclaims big's quota (InCohortReclamation); big, requeued, preempts z1 and z2 by fair sharing
    (z borrows with weight 0). When their quota is released (``release_delay`` after the eviction)
    they are requeued at once and win it back in the tournament (z1 within z's nominal goes first),
    so big no longer fits and is parked. On Kueue's clocks the requeue batch of that release wakes
    big one second later, and it preempts them again: z1 is admitted every release delay + 1 s
    until the run ends (its new pods wait for the GPUs big's terminating pods hold, so with a short
    delay it never runs). Without the clocks the release woke big before it was parked, so it stays
    parked and nothing loops."""
    _clocks(clocks, monkeypatch)
    f = fleet(THREE_TEAMS)
    config = SimulationConfig(
        mode=Mode.QUEUE, serving=FLAT, until_s=1500, release_delay_s=release_delay, finish_delay_s=0
    )
    result = simulate(f, LOOP_JOBS, config)
    preempted = {r.key: r.preemptions for r in result.outcome.runs}
    found = [
        x
        for x in diagnose(result, f, measure(result, f, (0, result.outcome.end)))
        if x.reason is Reason.PREEMPTION_LOOP
    ]
    if period is None:
        assert found == [] and preempted["a/big"] == 1 and preempted["z/z1"] == 0
        return
    assert preempted["z/z1"] == preempted["z/z2"] >= LOOP_AT and preempted["a/big"] == 1
    (loop,) = found
    assert "Kueue's reasons InCohortFairSharing" in loop.message and "z/z1" in loop.subjects
    z1 = next(r for r in result.outcome.runs if r.key == "z/z1")
    assert {a.end_by for a in z1.attempts if a.end_reason == "Preempted"} == {"a/big"}
    starts = [a.reserved for a in z1.attempts if a.reserved is not None]
    assert {b - a for a, b in pairwise(starts)} == {period}  # release delay + the batch
    # big was preempted at 20; z1 first takes the quota when big's is released
    assert starts[0] == 20 + release_delay
