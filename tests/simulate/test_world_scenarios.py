"""The world differential's scenarios (``tests/e2e/world_scenarios.py``) are what their docstrings say,
checked without a testbed: each compressed trace is one the testbed can run (the bench refuses the
others before starting one), and the deep one keeps dozens waiting, which is what it is for (the
forecast's calibration and the world differential on a busy cluster, docs/simulate.md)."""

from __future__ import annotations

import pytest

from gpufleet.ledger.records import Allocation
from gpufleet.testbed.world import ORIGIN, run_simulated
from gpufleet.trace.compression import compress, refusals
from tests.e2e.world_scenarios import SCENARIOS


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_scenario_is_one_the_testbed_can_run(name: str) -> None:
    scenario = SCENARIOS[name]()
    jobs = compress(scenario.jobs, scenario.factor)
    assert refusals(jobs, scenario.fleet(), source=name) == []


def test_the_deep_scenario_keeps_dozens_waiting_after_its_last_arrival_and_drains_in_its_timeout() -> None:
    """In the simulator's run of the compressed trace: at its last arrival at least 40 of its 80 jobs
    have never held quota, and the last job ends within the drain timeout after it."""
    scenario = SCENARIOS["deep"]()
    jobs = compress(scenario.jobs, scenario.factor)
    last = max(j.submit_s for j in jobs)
    allocations = [r for r in run_simulated(scenario.fleet(), jobs) if isinstance(r, Allocation)]
    first: dict[str, float] = {}
    for a in allocations:
        if a.quota_reserved is not None:
            at = (a.quota_reserved - ORIGIN).total_seconds()
            first[a.name] = min(first.get(a.name, at), at)
    assert len(jobs) == 80 and len(first) == 80  # every job admitted in the end
    waiting = sum(1 for at in first.values() if at > last)
    assert waiting >= 40, waiting
    ended = max((a.finished - ORIGIN).total_seconds() for a in allocations if a.finished is not None)
    assert last < ended <= last + scenario.drain_timeout_s
