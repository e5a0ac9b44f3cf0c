"""A trace compressed in time, and whether a testbed on one machine can run it at that pace.

A world differential replays a trace on the testbed in real seconds. A week does not fit, so arrivals
and durations are divided by a factor. Kueue's and kube-scheduler's own clocks (the 1 s requeue batch,
the victims' release, pod backoff) do not compress, so the compressed trace is a different workload:
both worlds run the *same* compressed trace, and what compression itself changes is reported apart
(the simulator on the original against the simulator on the compressed trace).

``refusals`` names every job the testbed cannot run faithfully, before anything starts:

- more job lifecycles in a minute than the control plane sustains on a small machine (``Limits``:
  about 30 a minute on 2 cores keeps the pipeline's latency small against the jobs);
- a job shorter than the pipeline's latency allows (create, admit, bind, run, finish take seconds;
  a job of 3 s would be mostly latency);
- a job pinned to GPU models no node of the policy carries (it could never run anywhere).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from gpufleet.errors import InputError, Problem
from gpufleet.policy import Fleet
from gpufleet.trace.job import Job

MINUTE = 60


@dataclass(frozen=True)
class Limits:
    """What the testbed sustains on a 2-core machine (docs/simulate.md, "World differential")."""

    lifecycles_per_minute: int = 30
    shortest_s: int = 10  # a job's compressed duration, against a pipeline latency of 1-3 s


def compress(jobs: Sequence[Job], factor: float, *, grace: bool = False) -> list[Job]:
    """Every arrival and duration divided by ``factor`` (rounded to whole seconds; a duration stays
    at least 1 s), in arrival order; with ``grace``, each job's termination grace period too (how long
    its process takes to stop is the job's own time, like its duration). A factor of 1 returns the
    jobs unchanged."""
    if factor <= 0:
        raise ValueError("a compression factor is positive")

    def shrunk(j: Job) -> Job:
        out = replace(j, submit_s=round(j.submit_s / factor), duration_s=max(1, round(j.duration_s / factor)))
        return replace(out, termination_grace_s=round(j.termination_grace_s / factor)) if grace else out

    out = [shrunk(j) if factor != 1 else j for j in jobs]
    return sorted(out, key=lambda j: (j.submit_s, j.job_id))


def busiest_minute(jobs: Sequence[Job]) -> tuple[int, Job | None]:
    """The most arrivals in any 60-second span, and the job that completes that count."""
    times = sorted(jobs, key=lambda j: (j.submit_s, j.job_id))
    best, at, first = 0, None, 0
    for i, job in enumerate(times):
        while times[first].submit_s <= job.submit_s - MINUTE:
            first += 1
        if i - first + 1 > best:
            best, at = i - first + 1, job
    return best, at


def refusals(jobs: Sequence[Job], fleet: Fleet, limits: Limits = Limits(), *, source: str = "") -> list[Problem]:
    """Every reason the testbed cannot run ``jobs`` (already compressed) at their pace, each naming a job."""
    problems: list[Problem] = []
    count, at = busiest_minute(jobs)
    if at is not None and count > limits.lifecycles_per_minute:
        problems.append(
            Problem(
                f"job {at.job_id}: {count} jobs arrive in the minute up to second {at.submit_s}; the testbed "
                f"sustains {limits.lifecycles_per_minute} job lifecycles a minute: compress less",
                file=source,
                path="submit_s",
            )
        )
    models = {cap.gpu.name for cap in fleet.pools.values()}
    for job in jobs:
        if job.duration_s < limits.shortest_s:
            problems.append(
                Problem(
                    f"job {job.job_id}: runs {job.duration_s} s, shorter than the {limits.shortest_s} s the "
                    "testbed's pipeline latency allows: compress less",
                    file=source,
                    path="duration_s",
                )
            )
        if job.gpu_models and not set(job.gpu_models) & models:
            problems.append(
                Problem(
                    f"job {job.job_id}: asks for GPU model {', '.join(job.gpu_models)}, which no node of the "
                    f"policy has ({', '.join(sorted(models))})",
                    file=source,
                    path="gpu_models",
                )
            )
    return problems


def check_runnable(jobs: Sequence[Job], fleet: Fleet, limits: Limits = Limits(), *, source: str = "") -> None:
    """Raise an ``InputError`` with every refusal (the CLI and the bench exit 2 with it)."""
    problems = refusals(jobs, fleet, limits, source=source)
    if problems:
        raise InputError(problems)
