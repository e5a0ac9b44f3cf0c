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

    def __new__(cls, *_args: object, **_kwargs: object) -> Meter:
        # Bare, as pickle makes it before setting its attributes: compiled, a class without its
        # own __new__ would run __init__ with no arguments there (gpufleet.picklable)
        return super().__new__(cls)

    def __init__(self, bucket_s: int) -> None:
        self.bucket_s = bucket_s
        self.now = 0
        self.series: dict[str, Series] = defaultdict(Series)
        # The series whose rate is not zero, the only ones ``advance`` has anything to add to; a
        # rate changes only through ``add`` and ``set``, which keep this current.
        self._active: dict[str, Series] = {}
        self.steps: dict[str, list[tuple[int, float]]] = {}  # logged series: (since, rate) at each change

    def add(self, name: str, delta: float) -> None:
        s = self.series[name]
        s.rate += delta
        if s.rate:
            self._active[name] = s
        else:
            self._active.pop(name, None)
        if name in self.steps:
            self._step(name, s.rate)

    def set(self, name: str, rate: float) -> None:
        s = self.series[name]
        s.rate = rate
        if rate:
            self._active[name] = s
        else:
            self._active.pop(name, None)
        if name in self.steps:
            self._step(name, rate)

    def log(self, name: str) -> None:
        """Keep every change of ``name``'s rate, so that its integral over any window is exact."""
        self.steps.setdefault(name, [(0, self.rate(name))])

    def _step(self, name: str, rate: float) -> None:
        steps = self.steps[name]
        if steps[-1][1] == rate:
            return
        if steps[-1][0] == self.now:
            steps[-1] = (self.now, rate)
        else:
            steps.append((self.now, rate))

    def integral(self, name: str, start: int, end: int) -> float:
        """A logged series' rate · seconds over ``[start, end]``, clipped to what has been metered."""
        steps = self.steps.get(name)
        if not steps:
            return 0.0
        end = min(end, self.now)
        total = 0.0
        for i, (since, rate) in enumerate(steps):
            until = steps[i + 1][0] if i + 1 < len(steps) else end
            lo, hi = max(since, start), min(until, end)
            if hi > lo:
                total += rate * (hi - lo)
        return total

    def rate(self, name: str) -> float:
        return self.series[name].rate if name in self.series else 0.0

    def total(self, name: str) -> float:
        return self.series[name].total if name in self.series else 0.0

    def advance(self, t: int) -> None:
        if t <= self.now:
            return
        active = self._active.values()
        start = self.now
        width = self.bucket_s
        bucket = start // width
        if t <= (bucket + 1) * width:  # within one bucket, as most instants are
            span = t - start
            for s in active:
                area = s.rate * span
                s.total += area
                s.buckets[bucket] += area
            self.now = t
            return
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
