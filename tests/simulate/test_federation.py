"""The simulator across clusters: one Kueue world per worker, MultiKueue's dispatch in front of them.

Each scenario is small enough to work out by hand from Kueue v0.19.2's rules (the first worker to
admit a copy wins, the others' copies are removed; a data class reaches only its zone's workers)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.errors import InputError
from gpufleet.policy import load_policy, parse_policy, resolve
from gpufleet.policy.fleet import Fleet
from gpufleet.simulate.config import SimulationConfig
from gpufleet.simulate.federation import ROUND_S, simulate_federation
from gpufleet.simulate.federation_summary import summary
from gpufleet.trace.job import Job, JobKind

ROOT = Path(__file__).resolve().parents[2]
FED = ROOT / "tests" / "e2e" / "federation-fleet.yaml"  # west (restricted, open) and east (open), 4 GPUs each
FLEET: Fleet = resolve(load_policy(FED))


# The times below are worked out by hand: a finish frees the quota at the instant its run ends
# (the default's 1 s control-plane finish delay, docs/simulate.md, would add a second per finish).
HAND = SimulationConfig(finish_delay_s=0)


def job(i: int, data_class: str, submit: int, duration: int = 600, gpus: int = 4) -> Job:
    return Job(f"j{i}", "alpha", "alpha", submit, duration, JobKind.TRAINING, gpus=gpus, data_class=data_class,
               priority_class="normal")  # fmt: skip


def _landing(jobs: list[Job], fleet: Fleet = FLEET) -> dict[str, tuple[str | None, int | None]]:
    result = simulate_federation(fleet, jobs, HAND)
    return {d.key.split("/")[1]: (d.cluster, d.started) for d in result.dispatches}


# (name, jobs, where each lands and when it starts)
SCENARIOS = [
    ("a restricted job runs on west only", [job(0, "restricted", 0)], {"j0": ("west", 0)}),
    (
        "an open job takes whichever worker is free",
        [job(0, "restricted", 0), job(1, "open", 10)],
        {"j0": ("west", 0), "j1": ("east", 10)},
    ),
    (
        # both workers admit j0 at 0 s: the zone's first cluster keeps it, east's copy is removed at 0 s
        # and j1 is admitted into the freed quota at the next instant plus Kueue's 1 s requeue batch
        "both admit at one second: the zone's first cluster wins",
        [job(0, "open", 0), job(1, "open", 0)],
        {"j0": ("west", 0), "j1": ("east", 2)},
    ),
    (
        "restricted work waits for west even while east is idle",
        [job(0, "restricted", 0), job(1, "restricted", 5)],
        {"j0": ("west", 0), "j1": ("west", 601)},  # a parked job wakes 1 s after quota frees
    ),
    (
        "an open job queued on both workers runs where quota frees first",
        [job(0, "restricted", 0, duration=1000), job(1, "open", 0, duration=300), job(2, "open", 10)],
        {"j0": ("west", 0), "j1": ("east", 0), "j2": ("east", 301)},
    ),
    (
        # j1 (open) holds the manager's train-west quota while it runs on east, so j2 (restricted) waits
        # on the manager until j0 finishes, while j3's copy already waits on west and is admitted first
        # (the federation testbed does the same: tests/e2e/test_federation.py's differential)
        "the manager's quota holds a restricted job back",
        [job(0, "restricted", 0, 30), job(1, "open", 1, 90), job(2, "restricted", 3, 5), job(3, "open", 4, 5)],
        {"j0": ("west", 0), "j1": ("east", 1), "j2": ("west", 37), "j3": ("west", 31)},
    ),
]


@pytest.mark.parametrize(("name", "jobs", "expected"), SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_where_each_job_lands(name: str, jobs: list[Job], expected: dict[str, tuple[str, int]]) -> None:
    assert _landing(jobs) == expected


def test_the_losing_copies_are_removed_and_hold_nothing() -> None:
    jobs = [job(0, "restricted", 0, duration=1000), job(1, "open", 0, duration=300), job(2, "open", 10)]
    result = simulate_federation(FLEET, jobs, HAND)
    j2 = next(d for d in result.dispatches if d.key == "alpha/j2")
    assert j2.copies == ("west", "east") and j2.cluster == "east"
    assert result.admission_order == {"west": ("alpha/j0",), "east": ("alpha/j1", "alpha/j2")}
    assert j2.gpu_seconds == 4 * 600  # only the winning copy ran


def test_a_copy_preempted_on_its_worker_is_dispatched_again_to_the_zone() -> None:
    """Kueue v0.19.2 (``multikueue/workload.go``, "Workload evicted on worker cluster"): when the winning
    copy is evicted on its worker while the check is Ready, the check turns Retry, the manager evicts its
    Workload, removes every copy and dispatches it again to the whole zone. Worked by hand: j0 holds west
    until 100, j1 east until 200; j2 (open) waits on both and wins west at 101 (a parked copy wakes a
    second after quota frees); the urgent j3 (restricted: west only) preempts j2's copy at 150 and is
    admitted at 151 (the preempted pods stop at once, grace 0; Kueue frees their quota a second later);
    j2 is dispatched again at 151 and wins east when j1's quota frees, at 201, not west after j3."""
    urgent = replace(job(3, "restricted", 150, 100), priority_class="urgent", termination_grace_s=0)
    jobs = [
        job(0, "restricted", 0, 100),
        job(1, "open", 0, 200),
        replace(job(2, "open", 10, 1000), termination_grace_s=0),
    ]
    result = simulate_federation(FLEET, [*jobs, urgent], HAND)
    landed = {d.key.split("/")[1]: (d.cluster, d.started) for d in result.dispatches}
    assert landed == {"j0": ("west", 0), "j1": ("east", 0), "j2": ("east", 201), "j3": ("west", 151)}
    j2 = next(d for d in result.dispatches if d.key == "alpha/j2")
    assert j2.copies == ("west", "east", "west", "east") and result.redispatches == 1  # twice to the whole zone
    assert j2.gpu_seconds == 4 * 1000  # the winning copy's run; the 49 s on west are lost work
    assert result.admission_order == {"west": ("alpha/j0", "alpha/j2", "alpha/j3"), "east": ("alpha/j1", "alpha/j2")}


def test_a_job_without_a_zone_is_a_located_error() -> None:
    with pytest.raises(InputError) as caught:
        simulate_federation(FLEET, [job(0, "", 0), job(1, "secret", 0)], HAND)
    assert [p.path for p in caught.value.problems] == ["data_class", "data_class"]
    assert "has no residency zone" in str(caught.value)


INCREMENTAL = (
    """
apiVersion: gpufleet.io/v1alpha1
kind: FleetPolicy
cluster: {provider: onprem, kubernetes: "1.36", dra: off}
clusters:
"""
    + "".join(
        f"  - {{name: w{i}, provider: onprem, region: r{i}, kubeconfigSecret: w{i}-kubeconfig}}\n" for i in range(4)
    )
    + """multiKueue: {dispatcher: Incremental}
pools:
"""
    + "".join(
        f"  - {{name: p{i}, cluster: w{i}, gpu: H100-SXM5-80GB, nodes: [n{i}], gpusPerNode: 4, role: training,"
        " workloads: [training], slicing: {mode: full}}\n"
        for i in range(4)
    )
    + """teams:
  - name: alpha
    namespaces: [alpha]
    quota: {p0: {gpus: 4}, p1: {gpus: 4}, p2: {gpus: 4}, p3: {gpus: 4}}
    priorityClasses: [normal]
    dataClasses: [open]
priorityClasses: [{name: normal, value: 100}]
dataClasses:
  - {name: open, regions: [r0, r1, r2, r3]}
queueing: {cohort: fed, fairSharing: false}
monitoring: {enabled: false}
"""
)


def test_incremental_adds_the_fourth_worker_after_one_round() -> None:
    fleet = resolve(parse_policy(INCREMENTAL, "incremental.yaml"))
    long = [job(i, "open", 10 * i, duration=10_000) for i in range(3)]  # w0..w2 busy from 0, 10, 20 s
    landing = _landing([*long, job(3, "open", 30)], fleet)
    assert [landing[f"j{i}"] for i in range(3)] == [("w0", 0), ("w1", 10), ("w2", 20)]
    assert landing["j3"] == ("w3", 30 + ROUND_S)  # nominated in the second round, 5 minutes after the first
    all_at_once = resolve(parse_policy(INCREMENTAL.replace("Incremental", "AllAtOnce"), "all.yaml"))
    assert _landing([*long, job(3, "open", 30)], all_at_once)["j3"] == ("w3", 30)


STEP_ONE = resolve(
    parse_policy(
        FED.read_text(encoding="utf-8").replace("dispatcher: AllAtOnce", "dispatcher: Incremental, stepSize: 1"),
        "s.yaml",
    )
)


@pytest.mark.parametrize(
    ("pin_s", "expected"),
    [
        (30, ("west", 31)),  # west frees within the round: the parked copy wakes a second after
        (1000, ("east", 1 + ROUND_S)),  # west still full when the round ends: east is nominated then
    ],
)
def test_incremental_with_step_size_one_tries_west_first(pin_s: int, expected: tuple[str, int]) -> None:
    """stepSize 1: the open Job's first round nominates only the zone's first cluster (west), though east
    is idle (the e2e Incremental differential shows the real Kueue doing the same)."""
    landing = _landing([job(0, "restricted", 0, pin_s), job(1, "open", 1, 5)], STEP_ONE)
    assert landing == {"j0": ("west", 0), "j1": expected}


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["restricted", "open"]),
            st.integers(0, 900),
            st.integers(1, 900),
            st.sampled_from(["normal", "urgent"]),
        ),
        max_size=8,
    )
)
def test_every_job_runs_once_in_its_zone(specs: list[tuple[str, int, int, str]]) -> None:
    jobs = [
        replace(job(i, dc, submit, duration), priority_class=pc) for i, (dc, submit, duration, pc) in enumerate(specs)
    ]
    result = simulate_federation(FLEET, jobs, HAND)
    for d in result.dispatches:
        assert d.cluster in ({"west"} if d.data_class == "restricted" else {"west", "east"})
        # its last worker runs it whole; a copy preempted there and dispatched back adds its lost seconds
        assert d.finished is not None and d.gpu_seconds >= 4 * next(j.duration_s for j in jobs if j.job_id in d.key)
    landed = [k for keys in result.admission_order.values() for k in keys]
    assert sorted(set(landed)) == sorted(d.key for d in result.dispatches)  # a preempted one may win twice
    assert len(landed) == len(result.dispatches) + result.redispatches


def test_summary_marks_every_figure_simulated() -> None:
    jobs = [job(0, "restricted", 0), job(1, "restricted", 5), job(2, "open", 5)]
    document = summary(simulate_federation(FLEET, jobs, HAND))
    sections = [document["fleet"], *document["clusters"].values(), *document["zones"].values(), *document["jobs"]]
    assert all(s["basis"] == "simulated" for s in sections)
    assert document["zones"]["restricted"]["landed"] == {"west": 2}
    assert document["zones"]["restricted"]["maxWaitSeconds"] == 596  # residency's cost: east was idle
    assert document["clusters"]["east"]["jobs"] == 1


def test_simulate_cli_on_a_federated_policy(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    rows = ["job_id,team,namespace,submit_s,duration_s,kind,gpus,data_class,priority_class"]
    rows += [
        f"j{i},alpha,alpha,{i * 5},600,training,4,{dc},normal"
        for i, dc in enumerate(["restricted", "open", "restricted"])
    ]
    trace.write_text("\n".join(rows) + "\n")
    out = tmp_path / "sim"
    result = CliRunner().invoke(app, ["simulate", str(FED), "--trace", str(trace), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "Per worker cluster (simulated, AllAtOnce)" in result.output
    document = json.loads((out / "federation.json").read_text())
    assert document["clusters"]["west"]["admissionOrder"] == ["alpha/j0", "alpha/j2"]
    refused = CliRunner().invoke(
        app, ["simulate", str(FED), "--trace", str(trace), "-o", str(tmp_path / "x"), "--compare", "first-apply"]
    )
    assert refused.exit_code == 2


def test_a_copy_removed_in_its_waitforpodsready_backoff_is_not_requeued_later() -> None:
    """Regression: ``examples/federation.yaml`` on its synthesized day (seed 7) crashed the simulator.

    Jobs pinned to a GPU model their flavor's quota does not carry get quota, find no node and are
    evicted by waitForPodsReady: the winning copy in backoff makes the manager dispatch again, a copy
    in backoff is removed when another worker wins, and is created again by a later dispatch. The
    backoff's requeue of a removed copy used to queue it a second time beside its new copy (a
    Workload "defined twice"; before the re-dispatch, an assertion in the quota release). Kueue
    deletes an evicted copy with its backoff, so that requeue is void."""
    from gpufleet.trace.synth import fleet_spec, synthesize

    fleet = resolve(load_policy(ROOT / "examples" / "federation.yaml"))
    jobs = synthesize(fleet_spec(fleet, days=1), 7)
    result = simulate_federation(fleet, jobs, SimulationConfig())
    requeued = sum(1 for d in result.dispatches if d.cluster is not None) + result.redispatches
    assert result.redispatches > 0  # the path the crash took: a winning copy evicted on its worker
    zones = {z.name: set(z.clusters) for z in result.zones}
    for d in result.dispatches:
        assert d.cluster is None or d.cluster in zones[d.zone], d
    landed = [k for keys in result.admission_order.values() for k in keys]
    assert len(landed) == requeued  # each win once, and once more per re-dispatch
