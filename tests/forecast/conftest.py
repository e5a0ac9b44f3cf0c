"""One simulated two-day run of the bundled example, shared by the forecast tests (about a second)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from gpufleet.demo import SEED, example_text, workload_spec
from gpufleet.policy import Fleet, parse_policy, resolve
from gpufleet.simulate.config import SimulationConfig
from gpufleet.simulate.result import RunResult
from gpufleet.simulate.run import simulate
from gpufleet.trace import synthesize
from gpufleet.trace.job import Job


@dataclass(frozen=True)
class World:
    fleet: Fleet
    jobs: list[Job]
    truth: RunResult


@pytest.fixture(scope="session")
def two_days() -> World:
    fleet = resolve(parse_policy(example_text(), "fleet.yaml"))
    jobs = synthesize(workload_spec(fleet, days=2), SEED)
    return World(fleet, jobs, simulate(fleet, jobs, SimulationConfig()))
