"""The policy's scheduling.nodeScoring is the scheduler's scoring in the simulator; --placement overrides it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.simulate.config import Mode, PlacementPolicy, SimulationConfig, for_policy
from gpufleet.simulate.run import simulate
from gpufleet.trace import write_trace
from gpufleet.trace.job import Job
from tests.simulate.fleets import TWO_NODES, fleet, job

runner = CliRunner()


def scored(scoring: str) -> str:
    return TWO_NODES + (f"scheduling: {{nodeScoring: {scoring}}}\n" if scoring else "")


def two_singles_then_a_pair() -> list[Job]:
    """TWO_NODES (n1, n2, two cards, 48 CPUs each, quota 4): a and b take one card and 8 CPUs each for
    an hour, then c asks for two cards in one pod. Spread (a stock kube-scheduler: cpu and memory
    scored: n2 161 against n1 153 for b, see tests/placement), b goes to the empty node and leaves one
    free card on each, so c waits for a to end at 3,600 s; packed (MostAllocated, the GPU scored
    too: n1 115 against n2 92), b joins a and c finds n2 whole at once. Without cpu requests the
    stock scheduler would see a tie (99 on both) and pick at random: the simulator takes n1 by name."""
    return [
        replace(job("a", "a", 0, 3600), cpu_milli=8000),
        replace(job("b", "a", 10, 3600), cpu_milli=8000),
        replace(job("c", "a", 20, 600, gpus=2), cpu_milli=8000),
    ]


@pytest.mark.parametrize("mode", [Mode.QUEUE, Mode.FIRST_APPLY])
@pytest.mark.parametrize(
    ("scoring", "packed"),
    [("", False), ("LeastAllocated", False), ("MostAllocated", True)],
    ids=["kube-schedulers-default", "least-allocated", "most-allocated"],
)
def test_the_policys_node_scoring_places_the_jobs(scoring: str, packed: bool, mode: Mode) -> None:
    result = simulate(fleet(scored(scoring)), two_singles_then_a_pair(), SimulationConfig(mode=mode))
    runs = {r.job.job_id: r for r in result.outcome.runs}
    node = {k: {n for n, _ in r.attempts[0].placements.values()} for k, r in runs.items() if r.attempts[0].placements}
    assert (node["a"] == node["b"]) is packed
    started = runs["c"].attempts[-1].started
    assert started is not None
    if packed:
        assert started == 20 and node["c"].isdisjoint(node["a"])  # the whole node b left free
    else:
        assert started >= 3600  # only once a (or b) ends does one node have two free cards
    expected = "MostAllocated" if packed else "LeastAllocated"
    assert result.summary["placement"] == expected and result.outcome.config.placement == expected


@pytest.mark.parametrize(
    ("scoring", "explicit", "expected"),
    [
        ("", None, PlacementPolicy.LEAST_ALLOCATED),
        ("MostAllocated", None, PlacementPolicy.MOST_ALLOCATED),
        ("MostAllocated", PlacementPolicy.LEAST_ALLOCATED, PlacementPolicy.LEAST_ALLOCATED),
        ("LeastAllocated", PlacementPolicy.FRAGMENTATION_AWARE, PlacementPolicy.FRAGMENTATION_AWARE),
    ],
    ids=["default", "policy", "explicit-wins", "simulate-only-model"],
)
def test_an_explicit_placement_overrides_the_policy(
    scoring: str, explicit: PlacementPolicy | None, expected: PlacementPolicy
) -> None:
    config = SimulationConfig(placement=explicit)
    assert for_policy(config, fleet(scored(scoring)).policy).placement is expected


@pytest.mark.parametrize(
    ("scoring", "flag", "expected"),
    [
        ("MostAllocated", [], "MostAllocated"),
        ("MostAllocated", ["--placement", "LeastAllocated"], "LeastAllocated"),
        ("", ["--placement", "MostAllocated"], "MostAllocated"),
        ("", [], "LeastAllocated"),
    ],
    ids=["policy", "flag-over-policy", "flag-over-default", "default"],
)
def test_the_simulate_flag_overrides_the_policys_scoring(
    tmp_path: Path, scoring: str, flag: list[str], expected: str
) -> None:
    policy, trace, out = tmp_path / "fleet.yaml", tmp_path / "trace.csv", tmp_path / "out"
    policy.write_text(scored(scoring))
    write_trace(two_singles_then_a_pair(), trace)
    result = runner.invoke(app, ["simulate", str(policy), "--trace", str(trace), "-o", str(out), "--json", *flag])
    assert result.exit_code == 0, result.output
    run = json.loads((out / "results.json").read_text())["runs"]["queue"]
    assert run["placement"] == expected
