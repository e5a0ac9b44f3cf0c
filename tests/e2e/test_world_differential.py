"""The simulator against the real control plane (issue 32): the small scenario, run for real twice.

Two runs of the compressed small trace (``world_scenarios.small``) on fresh testbeds (Kueue v0.19.2,
kube-scheduler, kwok pods that run for their durations, ``gpufleet record`` writing the ledger), and a
seeded ensemble of ``simulate`` runs on the same trace: every measure's sim-to-real distance must stay
within the real-vs-real floor (``simulate.differential.judge``). Then the first run's own ledger goes
through ``gpufleet trace convert --from-ledger`` and ``simulate`` under the same policy, which must
reproduce the recorded run within that floor, and under another policy, where every job must run.
The run folders (testbed logs, bundle, ledger) stay in pytest's temporary folder.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.policy import load_policy, resolve
from gpufleet.simulate.differential import WorldMeasures, ensemble, ensemble_config, from_records, judge
from gpufleet.testbed.world import ORIGIN, RealRun, run_real, run_simulated
from gpufleet.trace.compression import check_runnable, compress
from gpufleet.trace.native import read_trace
from tests.e2e.conftest import built_testbed
from tests.e2e.world_scenarios import HERE as SCENARIOS
from tests.e2e.world_scenarios import small

SEEDS = 4
# Measures a race of a second still decides on this trace (docs/simulate.md, "World differential"),
# printed beside the floor and not held to it. The bench's three real runs of this trace (2026-12-05,
# /tmp/wr-work, judged pair by pair as CI's two runs would be) show which: every pair of them agreed
# with the simulator on goodput, lost GPU-hours, hours admitted but unplaced and the counts of
# InClusterQueue preemptions and podsReady evictions, which are held to the floor. The per-team waits
# and completions, the admission order and the count of InCohortReclamation preemptions moved with
# which way a one-second race went (two runs took one branch, the third another: beta's reclaim takes
# one victim more or fewer, 6 or 5), and so did the hours of quota held idle: one pair of real runs
# repeated each other to the ledger's resolution (0.0175 GPU-h) while the simulator, a second off on
# some attempts, was 0.024 GPU-h from them. Goodput, race-bound before the simulator modelled the
# finish delay (docs/simulate.md, item 6), is held now.
RACE_BOUND = frozenset(
    {"wait alpha", "wait beta", "completion alpha", "completion beta", "held idle", "admission order",
     "preemptions InCohortReclamation"}
)  # fmt: skip
# The replay of a recorded run (its ledger through ``trace convert --from-ledger``): in the same three
# runs it agreed on goodput, lost and held-idle hours and every count; the waits, completions and the
# admission order follow the race as above, and once (run 0 against runs 0 and 2) the hours admitted
# but unplaced did too. CI (stop 39, 2026-12-05) then saw the replay's InCohortReclamation count one
# off two real runs that agreed with each other: the same one-second race as above, and the replayed
# trace may lack the one job whose finishing attempt has no start (``_replayed``), so beta's reclaim
# can take one victim fewer. Race-bound, but not unbounded: see ``RACE_SLACK``.
REPLAY_RACE_BOUND = frozenset(
    {"wait alpha", "wait beta", "completion alpha", "completion beta", "admitted unplaced", "admission order",
     "preemptions InCohortReclamation"}
)  # fmt: skip
# What a race-bound measure may still not exceed: the race decides one victim, never two.
RACE_SLACK = {"preemptions InCohortReclamation": 1.0}
CI_RUNS = 2  # the bench runs the scenario's three; two fit CI's budget


@dataclass
class Runs:
    real: list[RealRun]
    measures: list[WorldMeasures]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    binaries = built_testbed()
    scenario = small()
    fleet = scenario.fleet()
    jobs = compress(scenario.jobs, scenario.factor)
    check_runnable(jobs, fleet)
    real = []
    for i in range(CI_RUNS):
        run = run_real(fleet, jobs, tmp_path_factory.mktemp(f"world-{i}"), binaries,
                       drain_timeout_s=scenario.drain_timeout_s)  # fmt: skip
        assert not run.undrained, f"Jobs still running at the drain deadline: {run.undrained}"
        assert not run.unrecorded, f"Jobs succeeded that the ledger holds no finish for: {run.unrecorded}"
        real.append(run)
    yield Runs(real, [from_records(r.records, r.origin) for r in real])


def _disagreements(
    real: list[WorldMeasures], simulated: list[WorldMeasures], race_bound: frozenset[str] = RACE_BOUND
) -> list[str]:
    verdicts = judge(real, simulated)
    for v in verdicts:  # every figure, in the test's output, the race-bound ones included
        print(f"{v.measure.name:<32} {v.sim_to_real:9.3f} {v.measure.unit:<22} floor {v.floor:9.3f}")
    return [
        f"{v.measure.name}: {v.sim_to_real:.3f} {v.measure.unit} > floor {v.floor:.3f}"
        for v in verdicts
        if not v.agrees and v.measure.name not in race_bound
    ] + [
        f"{v.measure.name}: {v.sim_to_real:.3f} {v.measure.unit} > race slack {RACE_SLACK[v.measure.name]:.3f}"
        for v in verdicts
        if v.measure.name in race_bound and v.sim_to_real > RACE_SLACK.get(v.measure.name, float("inf"))
    ]


def test_every_job_of_the_trace_ran_on_the_testbed(runs: Runs) -> None:
    jobs = len(small().jobs)
    assert [(m.jobs, m.finished) for m in runs.measures] == [(jobs, jobs)] * len(runs.measures)


def test_the_simulator_agrees_with_the_testbed_within_the_floor(runs: Runs) -> None:
    scenario = small()
    jobs = compress(scenario.jobs, scenario.factor)
    sims = [
        from_records(run_simulated(scenario.fleet(), ensemble(jobs, seed), ensemble_config(seed)), ORIGIN)
        for seed in range(SEEDS)
    ]
    assert _disagreements(runs.measures, sims) == []


def _replayed(runs: Runs, policy: Path, out: Path) -> WorldMeasures:
    """The first real run's ledger → ``trace convert --from-ledger`` → ``simulate`` under ``policy``."""
    trace = out / "replayed.csv"
    result = CliRunner().invoke(
        app, ["trace", "convert", "--from-ledger", runs.real[0].ledger, "--policy", str(policy), "-o", str(trace)]
    )
    assert result.exit_code == 0, result.output
    jobs = read_trace(trace)
    # every job but one whose pods succeeded in the second Kueue preempted it: its finishing attempt has
    # no start, and ``trace convert --from-ledger`` leaves it out (no duration of its own)
    assert len(small().jobs) - 1 <= len(jobs) <= len(small().jobs)
    return from_records(run_simulated(resolve(load_policy(policy)), jobs), ORIGIN)


def test_the_recorded_ledger_replays_within_the_floor(runs: Runs, tmp_path: Path) -> None:
    replay = _replayed(runs, small().policy, tmp_path)
    assert replay.finished == replay.jobs
    assert _disagreements(runs.measures, [replay], REPLAY_RACE_BOUND) == []


def test_the_recorded_ledger_runs_under_another_policy(runs: Runs, tmp_path: Path) -> None:
    """Under the fair-sharing policy (three teams, the same nodes) the replayed jobs are placed and finish:
    none is pinned to a GPU model no node carries."""
    replay = _replayed(runs, SCENARIOS / "fair.yaml", tmp_path)
    assert replay.jobs >= len(small().jobs) - 1 and replay.finished == replay.jobs
