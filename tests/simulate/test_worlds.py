"""First apply against the queue, waitForPodsReady's eviction and backoff, and reproducibility."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from gpufleet.demo import example_text
from gpufleet.errors import InputError
from gpufleet.policy import parse_policy, resolve
from gpufleet.simulate.config import Mode, PodsReady, ServingCurve, SimulationConfig
from gpufleet.simulate.run import compare, results_document, simulate, write_outputs
from gpufleet.trace.job import Job, JobKind
from tests.simulate.fleets import MIG_SPREAD, SERVING_AT_RISK, TWO_MODELS, fleet, job

NIGHT_THEN_DAY = ServingCurve(hourly=(0.25,) + (1.0,) * 23)


@pytest.mark.parametrize(
    ("mode", "training_on_serving", "starved"),
    [(Mode.FIRST_APPLY, True, 122.0), (Mode.QUEUE, False, 0.0)],
    ids=["first-apply", "queue"],
)
def test_training_lands_on_serving_nodes_only_without_the_queue(
    mode: Mode, training_on_serving: bool, starved: float
) -> None:
    jobs = [job("t1", "a", 0, 7200, gpus=2), job("t2", "a", 60, 7200, gpus=2)]
    result = simulate(fleet(SERVING_AT_RISK), jobs, SimulationConfig(mode=mode, serving=NIGHT_THEN_DAY))
    nodes = {node for row in result.rows for node in row["nodes"].split()}
    assert ("s1" in nodes) is training_on_serving
    assert result.summary["serving"]["starvedReplicaMinutes"] == starved


def test_the_queue_makes_the_second_job_wait_for_quota() -> None:
    """Team a's quota is the two training cards: t2, parked, waits until t1 finishes: its pods end at
    7200, Kueue finishes its Workload a finish delay later (during second 7201) and the requeue batch
    wakes t2 one second after that, within second 7202."""
    jobs = [job("t1", "a", 0, 7200, gpus=2), job("t2", "a", 60, 7200, gpus=2)]
    result = simulate(fleet(SERVING_AT_RISK), jobs, SimulationConfig(mode=Mode.QUEUE, serving=NIGHT_THEN_DAY))
    assert [row["wait_s"] for row in result.rows] == [0, 7142]
    assert result.outcome.runs[1].attempts[0].reason == "WaitingForQuota"


@pytest.mark.parametrize(
    ("requeues", "seconds"),
    [(1, 60), (2, 120), (3, 240), (6, 1920), (7, 3600), (30, 3600)],
    ids=["first", "second", "third", "sixth", "capped", "far"],
)
def test_backoff_doubles_from_the_base_up_to_the_maximum(requeues: int, seconds: int) -> None:
    assert PodsReady().backoff(requeues) == seconds


def test_pods_ready_eviction_on_fragmented_mig_instances_requeues_with_backoff() -> None:
    """MIG_SPREAD's 3g.40gb instances are one per node; a pod wanting two never binds. Without a
    requeue limit it cycles: admitted at 0, evicted at 1800, back after 60 s (1860), evicted at
    3660, back after 120 s (3780), evicted at 5580, back after 240 s (5820)…"""
    config = SimulationConfig(until_s=6000)
    result = simulate(fleet(MIG_SPREAD), [job("c", "a", 0, 600, gpus=2, mig="3g.40gb")], config)
    run = result.outcome.runs[0]
    reserved = [a.reserved for a in run.attempts if a.reserved is not None]
    assert reserved == [0, 1860, 3780, 5820]
    assert {a.end_detail for a in run.attempts if a.ended is not None} == {"PodsReadyTimeout"}
    assert run.attempts[1].message == "requeued after 60 s of backoff"


def test_a_job_that_fits_one_node_is_not_evicted() -> None:
    """The same fleet, one instance per pod: two pods spread over the nodes and run."""
    result = simulate(fleet(MIG_SPREAD), [job("c", "a", 0, 600, pods=2, mig="3g.40gb")], SimulationConfig())
    assert result.summary["fleet"]["podsReadyEvictions"] == 0
    assert result.rows[0]["nodes"] == "m1 m2"
    # Two 3g instances of seven slices each: 2 × 3/7 GPU × 600 s.
    assert result.summary["fleet"]["gpuHours"] == pytest.approx(round(2 * 3 / 7 * 600 / 3600, 3))


def test_a_namespace_without_a_local_queue_is_an_input_error() -> None:
    stray = Job("x", "ghosts", "ghosts", 0, 60, JobKind.DEV, gpus=1, priority_class="batch")
    with pytest.raises(InputError, match="namespace 'ghosts'"):
        simulate(fleet(SERVING_AT_RISK), [stray], SimulationConfig())


def seeded_jobs(seed: int, count: int) -> list[Job]:
    """A mixed workload on the bundled example's teams, drawn from one seeded generator."""
    rng = random.Random(seed)
    teams = [("research", "research"), ("nlp", "nlp"), ("nlp", "nlp-eval"), ("vision", "vision")]
    jobs = []
    for i in range(count):
        team, ns = rng.choice(teams)
        shape = rng.choice(["full", "mig", "slice"])
        common = {"job_id": f"j{i:04d}", "team": team, "namespace": ns, "submit_s": rng.randrange(0, 86400)}
        duration = rng.randrange(300, 4 * 3600)
        if shape == "full":
            jobs.append(
                Job(
                    **common,
                    duration_s=duration,
                    kind=JobKind.TRAINING,
                    pods=rng.choice([1, 1, 2]),
                    gpus=rng.choice([1, 2, 4, 8]),
                    priority_class="batch",
                )
            )
        elif shape == "mig":
            profile = rng.choice(["1g.10gb", "2g.20gb", "3g.40gb"])
            jobs.append(
                Job(
                    **common,
                    duration_s=duration,
                    kind=JobKind.BATCH_EVAL,
                    gpus=1,
                    mig_profile=profile,
                    priority_class="batch",
                )
            )
        else:
            jobs.append(Job(**common, duration_s=duration, kind=JobKind.DEV, gpu_milli=250, priority_class="dev"))
    return jobs


def test_same_inputs_give_identical_results_json(tmp_path: Path) -> None:
    example = resolve(parse_policy(example_text(), "fleet.yaml"))
    texts = []
    for attempt in ("one", "two"):
        jobs = seeded_jobs(7, 150)
        results = compare(example, jobs, SimulationConfig(), [Mode.QUEUE, Mode.FIRST_APPLY])
        written = write_outputs(tmp_path / attempt, results_document(example, "seeded", len(jobs), results), results)
        texts.append(written.results.read_text())
    assert texts[0] == texts[1]
    document = json.loads(texts[0])
    assert list(document["runs"]) == ["first-apply", "queue"]
    assert document["runs"]["queue"]["fleet"]["jobs"] == 150


def test_a_pod_another_model_cannot_place_does_not_hold_back_its_look_alike() -> None:
    """First apply: at 60 s the H100 is taken, so h-late cannot be placed; x-late asks the same
    resources but allows only the A100, which is free, and starts in the same round. (The round
    once remembered failed pods without their affinity and skipped x-late until 3600 s.)"""

    def on(model: str, job_id: str, submit: int) -> Job:
        return Job(
            job_id, "a", "a", submit, 3600, JobKind.TRAINING, gpus=1, gpu_models=(model,), priority_class="batch"
        )

    jobs = [on("H100-SXM5-80GB", "h-first", 0), on("H100-SXM5-80GB", "h-late", 60), on("A100-SXM4-80GB", "x-late", 60)]
    result = simulate(fleet(TWO_MODELS), jobs, SimulationConfig(mode=Mode.FIRST_APPLY, serving=NIGHT_THEN_DAY))
    waits = {row["job_id"]: row["wait_s"] for row in result.rows}
    assert waits == {"h-first": 0, "h-late": 3540, "x-late": 0}
