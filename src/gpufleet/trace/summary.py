"""A trace at a glance: jobs, GPU-hours and peak demand per team and kind (for ``trace show``)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from gpufleet.trace.job import Job


@dataclass(frozen=True, slots=True)
class Row:
    team: str
    kind: str
    jobs: int
    pods: int
    gpu_hours: float


def summarize(jobs: list[Job]) -> list[Row]:
    """One row per (team, kind), sorted by team then kind."""
    acc: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0, 0.0])
    for j in jobs:
        row = acc[(j.team, str(j.kind))]
        row[0] += 1
        row[1] += j.pods
        row[2] += j.gpu_seconds / 3600
    return [Row(t, k, int(v[0]), int(v[1]), v[2]) for (t, k), v in sorted(acc.items())]


def peak_gpus(jobs: list[Job]) -> float:
    """The most GPUs (cards, a slice counting as one) running at once if every job started on submit."""
    events = sorted(
        [(j.submit_s, j.pods * j.gpu_milli_per_pod) for j in jobs]
        + [(j.submit_s + j.duration_s, -j.pods * j.gpu_milli_per_pod) for j in jobs]
    )
    level = peak = 0
    for _, delta in events:
        level += delta
        peak = max(peak, level)
    return peak / 1000
