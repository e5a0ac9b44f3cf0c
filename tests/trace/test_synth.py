"""The synthetic generator: reproducible, diurnal, heavy-tailed, with a flooding team."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from itertools import pairwise

import pytest

from gpufleet.trace import JobKind, PoolSpec, Slicing, SynthSpec, TeamSpec, synthesize
from gpufleet.trace.synth import DAY, HOUR, MAX_TRAINING_S, diurnal_rate

SPEC = SynthSpec(
    teams=(
        TeamSpec(
            "research",
            "research",
            2,
            ("train-high", "batch"),
            ("internal", "confidential"),
            ("llama-8b",),
            ("s3://eu-central-1/research/",),
        ),
        TeamSpec("product", "product", 1, ("batch",), ("internal",), ("mistral-7b",)),
        TeamSpec("interns", "sandbox", 1, ("dev",), ("public",), ("gpt2",), flood=True),
    ),
    pools=(
        PoolSpec("h100", "H100-SXM5-80GB", 16),
        PoolSpec("a100-mig", "A100-SXM4-80GB", 8, Slicing.MIG, ("3g.40gb", "1g.10gb")),
        PoolSpec("l40s", "L40S", 8, Slicing.TIMESLICE, replicas=4),
    ),
    days=7,
    load=0.8,
    flood_share=0.4,
)


@pytest.fixture(scope="module")
def week() -> list:
    return synthesize(SPEC, seed=7)


def test_same_seed_same_jobs_and_another_seed_differs(week: list) -> None:
    assert synthesize(SPEC, seed=7) == week
    assert synthesize(SPEC, seed=8) != week


def test_jobs_are_sorted_inside_the_horizon_with_unique_ids(week: list) -> None:
    assert week == sorted(week, key=lambda j: (j.submit_s, j.job_id))
    assert all(0 <= j.submit_s < 7 * DAY for j in week)
    assert len({j.job_id for j in week}) == len(week)


def test_teams_get_their_weights_and_the_flood_team_its_share(week: list) -> None:
    counts = Counter(j.team for j in week)
    flood = counts["interns"] / len(week)
    assert 0.3 < flood < 0.5  # asked 0.4; bursts make it lumpy
    assert 1.6 < counts["research"] / counts["product"] < 2.5  # weights 2 : 1


def test_flood_team_submits_in_bursts(week: list) -> None:
    """Its jobs come in sweeps a few seconds apart: most of them follow another of its own within 3 s."""
    submits = [j.submit_s for j in week if j.team == "interns"]
    close = sum(1 for a, b in pairwise(submits) if b - a <= 3)
    assert close / len(submits) > 0.8
    assert {j.kind for j in week if j.team == "interns"} == {JobKind.BATCH_EVAL}


def test_arrivals_follow_the_working_day(week: list) -> None:
    steady = [j for j in week if j.team != "interns" and j.submit_s < 5 * DAY]
    afternoon = sum(1 for j in steady if 12 <= (j.submit_s % DAY) // HOUR < 16)
    night = sum(1 for j in steady if 0 <= (j.submit_s % DAY) // HOUR < 4)
    # the rate's mean over 12-16h is about 8x its mean over 0-4h
    assert afternoon > 4 * night
    weekday = sum(1 for j in week if j.team != "interns" and j.submit_s < 2 * DAY)
    weekend = sum(1 for j in week if j.team != "interns" and j.submit_s >= 5 * DAY)
    assert weekday > 1.4 * weekend  # weekend days run at half rate


def test_diurnal_rate_by_hand() -> None:
    assert diurnal_rate(14 * HOUR) == pytest.approx(1.8)
    assert diurnal_rate(2 * HOUR) == pytest.approx(0.2)
    assert diurnal_rate(5 * DAY + 14 * HOUR) == pytest.approx(0.9)


def test_sizes_range_from_slices_to_multi_node_training(week: list) -> None:
    by_kind = {k: [j for j in week if j.kind is k] for k in JobKind}
    assert all(by_kind[k] for k in JobKind)
    dev = by_kind[JobKind.DEV]
    assert {j.mig_profile for j in dev} >= {"3g.40gb", "1g.10gb", ""}
    assert all(j.gpu_models in (("A100-SXM4-80GB",), ("L40S",)) for j in dev)
    assert all(j.mig_profile == "" for j in dev if j.gpu_models == ("L40S",))
    training = by_kind[JobKind.TRAINING]
    assert any(j.pods >= 2 and j.gpus == 8 for j in training)
    assert max(j.pods * j.gpus for j in training) <= 16  # no job larger than the biggest full pool
    assert max(j.duration_s for j in training) <= MAX_TRAINING_S


def test_durations_are_heavy_tailed(week: list) -> None:
    durations = sorted(j.duration_s for j in week if j.kind is JobKind.TRAINING)
    median = durations[len(durations) // 2]
    p99 = durations[int(len(durations) * 0.99)]
    assert p99 > 10 * median


def test_offered_load_tracks_the_load_factor() -> None:
    def offered(load: float) -> float:
        jobs = synthesize(replace(SPEC, load=load), seed=3)
        return sum(j.pods * j.gpus * j.duration_s for j in jobs if not j.mig_profile)

    assert 1.6 < offered(0.8) / offered(0.4) < 2.4


def test_labels_come_from_the_team(week: list) -> None:
    research = [j for j in week if j.team == "research"]
    assert {j.priority_class for j in research} == {"train-high", "batch"}
    assert all(j.checkpoint.startswith("s3://eu-central-1/research/research-") for j in research)
    assert {j.namespace for j in week if j.team == "interns"} == {"sandbox"}


def test_spec_rules() -> None:
    with pytest.raises(ValueError, match="at most one team"):
        SynthSpec(teams=(TeamSpec("a", "a", flood=True), TeamSpec("b", "b", flood=True)), pools=SPEC.pools)
