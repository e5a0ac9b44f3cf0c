"""Exact time integrals of the fleet's state, in total and per time bucket.

The event loop changes rates only at events (a pod bound, a job queued, a replica started); the
meter integrates each rate as a step function between them, so GPU-hours are exact rather than
sampled. Each series is also kept per bucket (``bucket_s`` wide) as the bucket's mean, for charts.
"""

from __future__ import annotations

from collections import defaultdict


class Series:
    """One step-function rate: its integral in total and per bucket."""

    __slots__ = ("buckets", "rate", "total")

    def __init__(self) -> None:
        self.rate = 0.0
        self.total = 0.0  # rate · seconds
        self.buckets: dict[int, float] = defaultdict(float)


class Meter:
    """Named series advanced together; ``advance(t)`` integrates every rate up to ``t``."""

    def __init__(self, bucket_s: int) -> None:
        self.bucket_s = bucket_s
        self.now = 0
        self.series: dict[str, Series] = defaultdict(Series)

    def add(self, name: str, delta: float) -> None:
        self.series[name].rate += delta

    def set(self, name: str, rate: float) -> None:
        self.series[name].rate = rate

    def rate(self, name: str) -> float:
        return self.series[name].rate if name in self.series else 0.0

    def total(self, name: str) -> float:
        return self.series[name].total if name in self.series else 0.0

    def advance(self, t: int) -> None:
        if t <= self.now:
            return
        active = [s for s in self.series.values() if s.rate]
        start = self.now
        width = self.bucket_s
        while start < t:
            bucket = start // width
            end = min(t, (bucket + 1) * width)
            span = end - start
            for s in active:
                area = s.rate * span
                s.total += area
                s.buckets[bucket] += area
            start = end
        self.now = t

    def means(self, name: str, buckets: int) -> list[float]:
        """The series' mean rate in each of the first ``buckets`` buckets."""
        s = self.series.get(name)
        if s is None:
            return [0.0] * buckets
        return [s.buckets.get(b, 0.0) / self.bucket_s for b in range(buckets)]
