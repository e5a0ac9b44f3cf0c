"""Races of a second that the world differential found the simulator deciding the other way from the
testbed (issue 32; docs/simulate.md, "World differential"), held on the scenarios' own traces: what
every real run showed is what the simulator must do."""

from __future__ import annotations

from gpufleet.ledger.records import Allocation, Record
from gpufleet.simulate.differential import job_name
from gpufleet.testbed.world import ORIGIN, run_simulated
from gpufleet.trace.compression import compress
from tests.e2e.world_scenarios import SCENARIOS


def _records(name: str) -> dict[str, list[Allocation]]:
    scenario = SCENARIOS[name]()
    records: list[Record] = run_simulated(scenario.fleet(), compress(scenario.jobs, scenario.factor))
    out: dict[str, list[Allocation]] = {}
    for r in records:
        if isinstance(r, Allocation):
            out.setdefault(job_name(r).split("/")[1], []).append(r)
    return {k: sorted(v, key=lambda a: a.attempt) for k, v in out.items()}


def _s(a: Allocation, field: str) -> float | None:
    value = getattr(a, field)
    return None if value is None else (value - ORIGIN).total_seconds()


def test_gang_a_workload_admitted_and_reclaimed_in_one_second_holds_its_nodes_for_its_grace() -> None:
    """``gang``, trace second 128-129: alpha's w010 (3 x 4 cards) is admitted onto the three free nodes
    and reclaimed by beta within the second. On the testbed (2 of 2 runs) its pods had bound in between
    and held the nodes for their 30 s grace period, so beta's w002 and w007 started 29-30 s after their
    admission; the simulator ran Kueue's cycles to the end before binding, so w010 never bound and they
    started at once. Now a cycle's admissions bind before Kueue's next cycle."""
    jobs = _records("gang")
    first = jobs["w010"][0]
    assert first.end_detail == "InCohortReclamation" and len(first.placements) == 3
    for name in ("w002", "w007"):
        attempt = jobs[name][0]
        started, reserved = _s(attempt, "started"), _s(attempt, "quota_reserved")
        assert started is not None and reserved is not None and started - reserved >= 29


def test_fair_a_job_arriving_the_second_a_parked_one_wakes_is_admitted_first() -> None:
    """``fair``, trace second 178-179: alpha's w015 ends and frees quota during second 178; alpha's
    parked w021 (older) wakes with Kueue's requeue batch a second later, and alpha's w012 arrives on
    second 179. On the testbed (3 of 3 runs) w012 was admitted on its arrival and w021 waited until
    216-222 s; the simulator's batch fired on the second itself and took w021 first."""
    jobs = _records("fair")
    assert _s(jobs["w012"][0], "quota_reserved") == 179
    reserved = _s(jobs["w021"][0], "quota_reserved")
    assert reserved is not None and reserved > 200
