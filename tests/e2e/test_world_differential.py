"""The simulator against the real control plane (issue 32): the small scenario, run for real twice.

Two runs of the compressed small trace (``world_scenarios.small``) on fresh testbeds (Kueue v0.19.2,
kube-scheduler, kwok pods that run for their durations, ``gpufleet record`` writing the ledger), and a
seeded ensemble of ``simulate`` runs on the same trace: every measure's sim-to-real distance must stay
within the real-vs-real floor (``simulate.differential.judge``). Then the first run's own ledger goes
through ``gpufleet trace convert --from-ledger`` and ``simulate`` under the same policy, which must
reproduce the recorded run within that floor, and under another policy, where every job must run.
The first run also keeps, at moments of its busy part, what ``gpufleet forecast`` reads of the live
cluster; forecast afterwards, each waiting Workload's interval is checked against when the real Kueue
admitted it (issue 34).
The run folders (testbed logs, bundle, ledger) stay in pytest's temporary folder.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.forecast.calibration import final_line, summarize
from gpufleet.forecast.estimate import Settings
from gpufleet.forecast.snapshots import Snapshot, hindsight
from gpufleet.policy import load_policy, resolve
from gpufleet.simulate.config import SimulationConfig
from gpufleet.simulate.differential import Verdict, WorldMeasures, ensemble, ensemble_config, from_records, judge
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
# finish delay (docs/simulate.md, item 6), is held now, to the floor or two seconds an attempt (``_bound``).
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
# can take one victim fewer. CI (stop 50, 2026-12-07) then saw the replay's InClusterQueue count one
# off two real runs that agreed on it (1.000 against a floor of 0, InCohortReclamation 0.5): the same
# chain, where a high-priority job either preempts in its own queue or waits a second and reclaims.
# The replays of seven kept real ledgers of ``small`` (2026-12-07, four of them beside a CPU load; all
# seven real runs had InClusterQueue 1, InCohortReclamation 5 or 6), each under the ensemble's 16
# seeds (a same-second tie either way, a delay a second longer now and then), give (InClusterQueue,
# InCohortReclamation) = (1, 5) in 95 of 112, (0, 6) in 10, (1, 6) in 6 and (0, 7) in 1: a second
# moves a victim from one count to the other. Race-bound, but not unbounded: see ``RACE_SLACK``.
REPLAY_RACE_BOUND = frozenset(
    {"wait alpha", "wait beta", "completion alpha", "completion beta", "admitted unplaced", "admission order",
     "preemptions InClusterQueue", "preemptions InCohortReclamation"}
)  # fmt: skip
# What a race-bound measure may still not exceed: the race decides one victim, never two.
RACE_SLACK = {"preemptions InClusterQueue": 1.0, "preemptions InCohortReclamation": 1.0}
CI_RUNS = 2  # the bench runs the scenario's three; two fit CI's budget
# When the first run keeps a live forecast's inputs (seconds after trace second 0): from after the trace's
# last arrival (143 s compressed), so the probe thread never competes with the loop creating the Jobs, to
# the drain. A figure needs 10 finished runs in the ledger, which the real runs held from 150-165 s on;
# a probe before that is answered "too little history".
PROBES = tuple(range(150, 300, 15))
HOLDING = "the replay differs: it holds quota on the cluster"  # the answer for a holding Workload the replay waits


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
                       drain_timeout_s=scenario.drain_timeout_s, probes=PROBES if i == 0 else ())  # fmt: skip
        assert not run.undrained, f"Jobs still running at the drain deadline: {run.undrained}"
        assert not run.unrecorded, f"Jobs succeeded that the ledger holds no finish for: {run.unrecorded}"
        real.append(run)
    yield Runs(real, [from_records(r.records, r.origin) for r in real])


def _bound(v: Verdict) -> float:
    """The floor CI holds a measure to. Two real runs can repeat each other more closely than the
    race allows a third (the bench's three runs spread wider), so an hours measure is held to at least
    two seconds of whole-second stamps per attempt (``differential.resolution`` is one): seen in a
    run where the two real runs agreed on goodput to 0.018 GPU-h and the simulator was 0.019 and the
    replay 0.029 GPU-h from them (2026-12-05, 64 attempt-GPUs: one second each is 0.0178 GPU-h)."""
    return max(v.floor, 2 * v.resolution) if v.measure.unit in ("GPU-h", "h") else v.floor


def _disagreements(
    real: list[WorldMeasures], simulated: list[WorldMeasures], race_bound: frozenset[str] = RACE_BOUND
) -> list[str]:
    verdicts = judge(real, simulated)
    for v in verdicts:  # every figure, in the test's output, the race-bound ones included
        print(f"{v.measure.name:<32} {v.sim_to_real:9.3f} {v.measure.unit:<22} floor {_bound(v):9.3f}")
    return [
        f"{v.measure.name}: {v.sim_to_real:.3f} {v.measure.unit} > floor {_bound(v):.3f}"
        for v in verdicts
        if v.sim_to_real > _bound(v) + 1e-9 and v.measure.name not in race_bound
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


def _waiting(snap: Snapshot) -> set[str]:
    """namespace/Job of every Workload the snapshot lists as waiting for quota (read here from the raw
    objects, apart from the forecast's own reading)."""
    out = set()
    for wl in snap.objects:
        conditions = {c["type"]: c["status"] for c in wl.get("status", {}).get("conditions", [])}
        if conditions.get("Finished") == "True" or conditions.get("QuotaReserved") == "True":
            continue
        job = next(o["name"] for o in wl["metadata"]["ownerReferences"] if o["kind"] == "Job")
        out.add(f"{wl['metadata']['namespace']}/{job}")
    return out


def test_forecasts_made_during_the_real_run_against_the_real_kueue(runs: Runs) -> None:
    """``gpufleet forecast``'s answers at the first run's probes, checked against Kueue's admissions."""
    scenario = small()
    run = runs.real[0]
    assert run.snapshots, "no probe was taken during the run"
    found = hindsight(run.snapshots, scenario.fleet(), run.records, run.origin, settings=Settings(samples=40),
                      config=SimulationConfig(), time_factor=scenario.factor)  # fmt: skip
    for c in found.checks:
        print(
            f"{c.at:>4} s {c.workload:<12} p10 {c.p10:>5.0f} p50 {c.p50:>5.0f} p90 {c.p90:>5.0f} real {c.actual:>5.0f}"
        )
    for d in found.declined:
        print(f"{d.at:>4} s {d.workload:<12} no figure: {d.reason}")
    for r in summarize(found.checks, lambda c: c.team):
        print(
            f"{r.label:<8} {r.admissions:>3} admissions, 80 % covers {r.coverage:.0%}, median error {r.median_error:.0%}"
        )
    print(final_line(found.checks, "testbed"))
    # every Workload waiting at a probe has a figure or the answer's reason, none is lost; one holding
    # quota gets no figure, only where the replay does not reproduce it, and then says so
    waiting = {int((s.now - run.origin).total_seconds()): _waiting(s) for s in run.snapshots}
    for c in found.checks:
        assert c.workload in waiting[c.at], f"{c.workload} held quota at {c.at} s, yet got a figure"
    answered = {(c.at, c.workload) for c in found.checks} | {(d.at, d.workload) for d in found.declined}
    assert {(at, key) for at, keys in waiting.items() for key in keys} <= answered
    for d in found.declined:
        holding = d.workload not in waiting[d.at]
        assert d.reason.startswith(HOLDING if holding else ("too little history", "the replay differs")), d
    # every Job of the trace ran, so every checked Workload was admitted, and every figure is a figure
    assert all(c.p10 <= c.p50 <= c.p90 and c.actual < float("inf") and c.p50 < float("inf") for c in found.checks)
    # the ledger holds 10 finishes from 150-180 s on, when beta's Workloads still wait: some are forecast
    assert found.checks, "no Workload waiting at a probe got a figure"
    # The coverage itself is printed, not held to the 75-85 % band, nor to a majority: a dozen checks from
    # one run, the same Workloads at successive probes, are a noisy judge, and the testbed's figure sits
    # below the band (2026-12-05, this machine, four runs of this test: 75 % of 12, 65 % of 17, 59 % of 17,
    # 50 % of 12; single probes 0-100 %; nearly every miss admitted before p10). What must hold on any
    # machine: the forecast and Kueue keep the same clock and the same Workloads, so some real admission
    # falls inside its interval; a wrong time base (compressed against original seconds, the listing's
    # clock against the ledger's) or a wrong key puts none inside.
    assert any(c.covered for c in found.checks), final_line(found.checks, "testbed")
