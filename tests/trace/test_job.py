"""``Job.lasting``: the copy a forecast makes of every job it gives a sampled runtime."""

from __future__ import annotations

from dataclasses import fields, replace

import pytest

from gpufleet.trace.job import Job, JobKind

JOBS = [
    Job("w1", "alpha", "alpha", 10, 100, JobKind.TRAINING, pods=2, gpus=4, priority_class="batch"),
    Job(
        "w2", "beta", "beta-ns", 0, 5, JobKind.DEV, gpu_milli=250, gpu_models=("L4",), cpu_milli=500, memory=1 << 30,
        model="llama", data_class="internal", checkpoint="s3://b/", termination_grace_s=0,
    ),
    Job("w3", "gamma", "gamma", 7, 1, JobKind.BATCH_EVAL, gpus=1, mig_profile="1g.10gb"),
]  # fmt: skip


@pytest.mark.parametrize("job", JOBS)
def test_lasting_changes_the_duration_and_nothing_else(job: Job) -> None:
    longer = job.lasting(3600)
    assert longer == replace(job, duration_s=3600)
    assert [getattr(longer, f.name) for f in fields(Job) if f.name != "duration_s"] == [
        getattr(job, f.name) for f in fields(Job) if f.name != "duration_s"
    ]
    assert job.duration_s != 3600  # the original is left as it was


def test_a_negative_duration_is_refused_as_any_job_would_be() -> None:
    with pytest.raises(ValueError, match="duration_s must be >= 0"):
        JOBS[0].lasting(-1)
