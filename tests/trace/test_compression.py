"""Compressing a trace for the testbed, and refusing one the testbed cannot run at that pace."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpufleet.errors import InputError
from gpufleet.policy import Fleet, parse_policy, resolve
from gpufleet.trace.compression import Limits, busiest_minute, check_runnable, compress, refusals
from gpufleet.trace.job import Job, JobKind
from tests.simulate.fleets import HEADER

POLICY = (
    HEADER
    + """
pools:
  - {name: train, gpu: H100-SXM5-80GB, nodes: [n1], gpusPerNode: 4, role: training, slicing: {mode: full}}
teams:
  - {name: a, namespaces: [a], quota: {train: {gpus: 4}}, priorityClasses: [batch], dataClasses: [internal]}
"""
)


def job(name: str, submit: int, duration: int, models: tuple[str, ...] = ()) -> Job:
    return Job(name, "a", "a", submit, duration, JobKind.BATCH_EVAL, gpus=1, gpu_models=models)


def fleet() -> Fleet:
    return resolve(parse_policy(POLICY))


@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**5)), max_size=30), st.integers(2, 60))
def test_compression_divides_times_and_keeps_arrival_order(times: list[tuple[int, int]], factor: int) -> None:
    jobs = [job(f"j{i}", s, d) for i, (s, d) in enumerate(times)]
    out = compress(jobs, factor)
    assert sorted(j.job_id for j in out) == sorted(j.job_id for j in jobs)
    by_id = {j.job_id: j for j in jobs}
    for j in out:
        assert abs(j.submit_s - by_id[j.job_id].submit_s / factor) <= 0.5
        assert j.duration_s >= 1 and abs(j.duration_s - max(1, by_id[j.job_id].duration_s / factor)) <= 0.5
    assert [(j.submit_s, j.job_id) for j in out] == sorted((j.submit_s, j.job_id) for j in out)


def test_factor_one_changes_nothing() -> None:
    jobs = [job("b", 5, 30), job("a", 1, 40)]
    assert compress(jobs, 1) == [jobs[1], jobs[0]]


def test_busiest_minute_counts_a_sliding_sixty_seconds() -> None:
    jobs = [job("a", 0, 20), job("b", 59, 20), job("c", 60, 20), job("d", 61, 20)]
    count, at = busiest_minute(jobs)
    assert (count, at.job_id if at else None) == (3, "d")  # 59, 60, 61 (0 is 61 s before d)


@pytest.mark.parametrize(
    ("jobs", "expected"),
    [
        ([job("ok", 0, 30)], []),
        ([job("short", 0, 4)], ["job short: runs 4 s, shorter than the 10 s"]),
        ([job("far", 0, 30, ("B200",))], ["job far: asks for GPU model B200, which no node of the policy has"]),
        ([job(f"j{i}", i, 30) for i in range(31)], ["job j30: 31 jobs arrive in the minute up to second 30"]),
    ],
)
def test_refusals_name_the_job_and_the_limit(jobs: list[Job], expected: list[str]) -> None:
    found = [p.message for p in refusals(jobs, fleet(), Limits(), source="t.csv")]
    assert len(found) == len(expected)
    for message, start in zip(found, expected, strict=True):
        assert message.startswith(start)


def test_a_model_some_node_has_is_runnable() -> None:
    assert refusals([job("here", 0, 30, ("H100-SXM5-80GB", "B200"))], fleet()) == []


def test_check_runnable_raises_every_problem_located() -> None:
    with pytest.raises(InputError) as raised:
        check_runnable([job("short", 0, 2), job("far", 5, 1)], fleet(), source="trace.csv")
    problems = raised.value.problems
    assert [p.path for p in problems] == ["duration_s", "duration_s"]
    assert all(p.file == "trace.csv" for p in problems)


def test_the_grace_period_compresses_only_when_asked() -> None:
    jobs = [replace(job("a", 100, 300), termination_grace_s=30)]
    assert compress(jobs, 10)[0].termination_grace_s == 30  # a pod-spec clock, like Kueue's, by default
    assert compress(jobs, 10, grace=True)[0].termination_grace_s == 3
