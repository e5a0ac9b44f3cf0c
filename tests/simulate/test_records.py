"""The simulated allocations in the ledger's record format."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from gpufleet.ledger.records import Allocation, EndReason, WaitInterval, from_plain, to_plain
from gpufleet.simulate.config import Mode, SimulationConfig
from gpufleet.simulate.run import simulate
from tests.simulate.fleets import FLAT, TWO_TEAMS, fleet, job

START = datetime(2026, 1, 5, tzinfo=UTC)


def records() -> list[Allocation | WaitInterval]:
    jobs = [job("j1", "a", 0, 3600, gpus=2), job("j2", "b", 600, 1800), job("j3", "a", 700, 600)]
    return simulate(fleet(TWO_TEAMS), jobs, SimulationConfig(serving=FLAT, start=START, finish_delay_s=0)).records


def test_each_admission_attempt_is_one_allocation() -> None:
    """j1 (see test_metrics): admitted at 0 and preempted at 600; admitted again at 2431 (one requeue
    batch after j2's end), done at 6031."""
    j1 = [r for r in records() if isinstance(r, Allocation) and r.name == "j1"]
    assert [(r.attempt, r.end_reason, r.started, r.finished) for r in j1] == [
        (1, EndReason.PREEMPTED, START, START + timedelta(seconds=600)),
        (2, EndReason.FINISHED, START + timedelta(seconds=2431), START + timedelta(seconds=6031)),
    ]
    first = j1[0]
    assert first.workload_uid == "sim:queue:a/j1"
    assert first.local_queue == "a/a" and first.cluster_queue == "a"
    assert first.flavors == (("nvidia.com/gpu", "train"),)
    assert first.gpu_count == 2 and first.priority == 100
    assert [(p.node, p.gpus, p.devices, p.gpu_model) for p in first.placements] == [
        ("n1", 2, ("gpu0", "gpu1"), "H100-SXM5-80GB")
    ]
    assert all(r.simulated for r in j1)


def test_waits_carry_kueue_s_reason() -> None:
    waits = {(r.name, r.index): r for r in records() if isinstance(r, WaitInterval)}
    # j1's second wait ran from the release of its quota (601: preempted at 600, Kueue clears the
    # reservation a release delay later, QuotaReserved=False) to its admission (2431).
    second = waits[("j1", 2)]
    assert (second.start, second.end) == (START + timedelta(seconds=601), START + timedelta(seconds=2431))
    assert second.reason == "WaitingForQuota"


def test_first_apply_allocations_have_no_queue() -> None:
    jobs = [job("j1", "a", 0, 60)]
    result = simulate(fleet(TWO_TEAMS), jobs, SimulationConfig(mode=Mode.FIRST_APPLY, serving=FLAT, start=START))
    (alloc,) = [r for r in result.records if isinstance(r, Allocation)]
    assert (alloc.cluster_queue, alloc.local_queue, alloc.quota_reserved) == ("", "", None)


def test_records_survive_the_ledger_s_plain_form() -> None:
    for record in records():
        assert from_plain(to_plain(record)) == record
