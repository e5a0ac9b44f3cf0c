"""One simulated two-day run of the bundled example, shared by the forecast tests (about a second)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.demo import SEED, example_text, workload_spec
from gpufleet.policy import Fleet, parse_policy, resolve
from gpufleet.simulate.config import SimulationConfig
from gpufleet.simulate.result import RunResult
from gpufleet.simulate.run import simulate
from gpufleet.trace import synthesize, write_trace
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


@pytest.fixture(scope="session")
def files(two_days: World, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The example's policy and the two days' trace, as files for the command line."""
    folder = tmp_path_factory.mktemp("forecast")
    policy, trace = folder / "fleet.yaml", folder / "days.csv"
    policy.write_text(example_text(), encoding="utf-8")
    write_trace(two_days.jobs, trace)
    return policy, trace


def invoke(command: str, files: tuple[Path, Path], *args: str) -> tuple[int, str]:
    """``gpufleet COMMAND --policy P --trace T ARGS``: its exit code and output; never a traceback."""
    policy, trace = files
    result = CliRunner().invoke(app, [command, "--policy", str(policy), "--trace", str(trace), *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output
