"""Each pathology on a small run that produces it, and on a near twin that must not report it."""

from __future__ import annotations

import pytest

from gpufleet.policy import Fleet
from gpufleet.simulate.config import Mode, ServingCurve, SimulationConfig
from gpufleet.simulate.measures import measure
from gpufleet.simulate.pathologies import LOOP_AT, Finding, Reason, diagnose
from gpufleet.simulate.run import simulate
from gpufleet.trace.job import Job, JobKind
from tests.simulate.fleets import FLAT, MIG_SPREAD, SERVING_AT_RISK, TWO_TEAMS, fleet, job, limited


def findings(
    f: Fleet, jobs: list[Job], mode: Mode = Mode.QUEUE, *, until_s: int | None = None, serving: ServingCurve = FLAT
) -> list[Finding]:
    result = simulate(f, jobs, SimulationConfig(mode=mode, serving=serving, until_s=until_s))
    return diagnose(result, f, measure(result, f, (0, result.outcome.end)))


def only(found: list[Finding], reason: Reason) -> Finding:
    hits = [x for x in found if x.reason is reason]
    assert len(hits) == 1, found
    return hits[0]


def reclaims(n: int) -> list[Job]:
    """TWO_TEAMS: j1 (a, 2 GPUs, 10 h) borrows b's card; b sends n one-GPU jobs of 300 s, 2000 s
    apart. Each reclaims the card (InCohortReclamation); j1 is admitted again when it ends: n
    preemptions of j1."""
    return [job("j1", "a", 0, 36_000, gpus=2)] + [job(f"b{i}", "b", 600 + 2000 * i, 300) for i in range(n)]


def test_a_job_reclaimed_again_and_again_is_a_preemption_loop() -> None:
    f = fleet(TWO_TEAMS)
    loop = only(findings(f, reclaims(LOOP_AT)), Reason.PREEMPTION_LOOP)
    assert f"a/j1 of a, {LOOP_AT}×" in loop.message
    assert "InCohortReclamation 4" in loop.message
    assert loop.evidence[0].startswith(f"a/j1 (a, batch): preempted {LOOP_AT}× by b {LOOP_AT}× (InCohortReclamation)")
    assert loop.settings == (
        "queueing.reclaimWithinCohort",
        "queueing.prioritizePreemptorWorkloads",
        "teams[a].quota[train].borrowingLimit",
    )
    assert "a/j1" in loop.subjects and "train" in loop.subjects


def test_fewer_preemptions_than_the_bound_are_no_loop() -> None:
    found = findings(fleet(TWO_TEAMS), reclaims(LOOP_AT - 1))
    assert not [x for x in found if x.reason is Reason.PREEMPTION_LOOP]


def test_a_job_beyond_its_teams_reach_is_never_admissible() -> None:
    """a's reach on train: 1 nominal + b's 1 = 2 cards; a 3-GPU job can never be admitted."""
    f = fleet(TWO_TEAMS)
    never = only(
        findings(f, [job("big", "a", 0, 3600, gpus=3), job("ok", "a", 0, 600, gpus=2)]), Reason.NEVER_ADMISSIBLE
    )
    assert never.message.startswith("1 a job(s) ask 3 GPUs but a can reach at most 2 on train (1 nominal")
    assert never.subjects == ("a", "a/big")
    assert "teams[a].quota[train].borrowingLimit" in never.settings


def test_a_job_within_reach_is_not_never_admissible() -> None:
    found = findings(fleet(TWO_TEAMS), [job("ok", "a", 0, 600, gpus=2)])
    assert not [x for x in found if x.reason is Reason.NEVER_ADMISSIBLE]


def test_quota_no_node_can_place_is_quota_without_node() -> None:
    """MIG_SPREAD: one 3g.40gb per node, quota 2. A pod asking two instances is admitted and never
    placed: evicted at 1800, 3660, 5580, 7620 and 9900 s (30 min after each admission; backoff 60,
    120, 240, 480 s) by 3 h: 5 evictions, 5 × 1800 s = 2.5 hours unplaced."""
    found = findings(fleet(MIG_SPREAD), [job("m", "a", 0, 600, gpus=2, mig="3g.40gb")], until_s=3 * 3600)
    hit = only(found, Reason.QUOTA_WITHOUT_NODE)
    assert "5 waitForPodsReady eviction(s), 2.5 hours holding quota unplaced" in hit.message
    assert hit.evidence[0].startswith("a/m (a, 1×2 mig-3g.40gb): 5 eviction(s), 2.5 h admitted unplaced")
    assert "Insufficient nvidia.com/mig-3g.40gb" in hit.evidence[0]  # the scheduler's own word
    assert hit.settings == ("scheduling.nodeScoring", "queueing.waitForPodsReady.timeoutSeconds")
    assert all(setting in hit.remedy for setting in hit.settings)  # the remedy names each policy path


def test_pods_one_instance_each_fit_and_are_not_quota_without_node() -> None:
    found = findings(fleet(MIG_SPREAD), [job("m", "a", 0, 600, gpus=1, pods=2, mig="3g.40gb")])
    assert not [x for x in found if x.reason is Reason.QUOTA_WITHOUT_NODE]


@pytest.mark.parametrize(("borrow", "expected"), [("0", 1), ("unlimited", 0)], ids=["limit-0", "no-limit"])
def test_idle_behind_a_borrowing_limit(borrow: str, expected: int) -> None:
    """LIMITED: a2 waits 0–3600 next to b's idle card only because a may borrow nothing (1 GPU-h);
    without the limit it borrows the card and nothing idles."""
    found = findings(limited(borrow), [job("a1", "a", 0, 3600), job("a2", "a", 0, 3600)])
    hits = [x for x in found if x.reason is Reason.IDLE_BEHIND_LIMITS]
    assert len(hits) == expected
    if hits:
        assert hits[0].message.startswith("train had 1.0 GPU-h idle")
        assert "a 1.0" in hits[0].message
        assert hits[0].settings == ("teams[a].quota[train].borrowingLimit",)


def test_a_mig_layout_that_offers_no_profile_the_waiting_job_wants_is_a_slicing_misfit() -> None:
    """LIMITED's A100 is cut all-balanced; a job asking one 7g.80gb instance waits while the card
    idles for the hour a1 runs (both worlds). A job asking 3g.40gb would be served (it is offered)."""
    for mode in (Mode.QUEUE, Mode.FIRST_APPLY):
        found = findings(limited("0"), [job("a1", "a", 0, 3600), job("w", "a", 0, 600, mig="7g.80gb")], mode)
        misfit = only(found, Reason.SLICING_MISFIT)
        assert misfit.message.startswith("mig (all-balanced) had 1.0 GPU-h idle")
        assert "1 job(s) asking mig-7g.80gb instances" in misfit.message
        assert misfit.settings == ("pools[mig].slicing",)
    served = findings(limited("0"), [job("a1", "a", 0, 3600), job("w", "a", 0, 600, mig="3g.40gb")])
    assert not [x for x in served if x.reason is Reason.SLICING_MISFIT]


def test_a_whole_card_job_that_fits_a_full_pool_is_no_misfit_of_the_mig_pool() -> None:
    """a2 waits for an H100 (its borrowing limit): the idle A100 cut in MIG is not what it lacks."""
    found = findings(limited("0"), [job("a1", "a", 0, 3600), job("a2", "a", 0, 3600)])
    assert not [x for x in found if x.reason is Reason.SLICING_MISFIT]


def test_first_apply_batch_on_the_serving_node_starves_serving() -> None:
    """test_metrics' serving case: two replicas starve 3600–7260 s in first apply: 122 replica-minutes.
    The queue taints the serving node: nothing starves."""
    curve = ServingCurve(hourly=(0.25,) + (1.0,) * 23)
    jobs = [job("t1", "a", 0, 7200, gpus=2), job("t2", "a", 60, 7200, gpus=2)]
    starved = only(findings(fleet(SERVING_AT_RISK), jobs, Mode.FIRST_APPLY, serving=curve), Reason.SERVING_STARVATION)
    assert "lacked 122.0 replica-minutes" in starved.message
    assert "pools[s1].taints" not in starved.settings and starved.subjects == ("serve",)
    queued = findings(fleet(SERVING_AT_RISK), jobs, Mode.QUEUE, serving=curve)
    assert not [x for x in queued if x.reason is Reason.SERVING_STARVATION]


def test_a_calm_run_has_no_findings() -> None:
    assert findings(fleet(TWO_TEAMS), [job("j", "a", 0, 600), job("k", "b", 0, 600)]) == []


# TWO_TEAMS under classical preemption, b allowed to preempt lower priorities while borrowing.
BORROWING_PREEMPTS = TWO_TEAMS.replace(
    "priorityClasses: [{name: batch, value: 100}]",
    "priorityClasses: [{name: batch, value: 100}, {name: high, value: 1000}]",
).replace(
    "priorityClasses: [batch], dataClasses: [internal]}\nserving",
    "priorityClasses: [batch, high], dataClasses: [internal]}\nserving",
) + ("queueing: {fairSharing: false, borrowWithinCohort: {policy: LowerPriority}}\n")


def test_a_loop_of_preemption_while_borrowing_names_borrow_within_cohort() -> None:
    """a's j1 (2 GPUs, batch) borrows b's card; every 2000 s b sends a 2-GPU high-priority job of
    300 s that needs a's card too: it may borrow while preempting (borrowWithinCohort), so it
    preempts j1 each time (InCohortReclaimWhileBorrowing); j1 is admitted again when it ends."""
    f = fleet(BORROWING_PREEMPTS)
    jobs = [job("j1", "a", 0, 36_000, gpus=2)] + [
        Job(f"b{i}", "b", "b", 600 + 2000 * i, 300, JobKind.TRAINING, gpus=2, priority_class="high")
        for i in range(LOOP_AT)
    ]
    loop = only(findings(f, jobs), Reason.PREEMPTION_LOOP)
    assert f"InCohortReclaimWhileBorrowing {LOOP_AT}" in loop.message
    assert loop.settings[:3] == (
        "queueing.borrowWithinCohort",
        "queueing.reclaimWithinCohort",
        "queueing.prioritizePreemptorWorkloads",
    )
    assert "set queueing.borrowWithinCohort to Never" in loop.remedy


def test_a_reclaim_loop_offers_the_preemptor_gate_and_not_borrow_within_cohort() -> None:
    loop = only(findings(fleet(TWO_TEAMS), reclaims(LOOP_AT)), Reason.PREEMPTION_LOOP)
    assert "turn queueing.prioritizePreemptorWorkloads on" in loop.remedy
    assert "borrowWithinCohort" not in loop.remedy
