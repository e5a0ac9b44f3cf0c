"""Where a workload's runtime comes from, in order: what its owner declared, the ledger's history
of runs like it, the fleet's history as a whole; and nothing where there is too little.

The history is empirical: the runtimes of attempts that finished (``end_reason`` Finished) before the
moment of the forecast, grouped from the finest key to the coarsest (``LEVELS``): team, kind, model,
GPU resource and size; the same without the model; kind and size; kind alone (a job's kind says more
of its runtime than its size: a 16-card training job with few like it finished is drawn from the
training runs, not the fleet's, which are mostly short evaluations); resource and size; that size or
larger; the whole fleet. A level answers
when it holds at least ``MIN_RUNS`` runtimes and, for a running workload, at least ``MIN_TAIL`` longer
than the time it has already run (the distribution *conditioned* on that time: a job 3 h in is not
a fresh draw). The ledger records no job kind, so the resource and size stand for it (a MIG slice,
a time-slice replica, 8 full cards). Each draw names its level, so an answer says what it rests on.

A declared runtime (``gpufleet.io/expected-runtime``) is taken as it is while the workload has not
run past it; ``activeDeadlineSeconds`` bounds a draw from history (the Job is killed there).
"""

from __future__ import annotations

import math
import random
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from itertools import islice

from gpufleet.ledger.records import FINISH_LATENCY_S, Allocation, EndReason, Record

MIN_RUNS = 10  # runtimes a level needs before it answers
MIN_TAIL = 5  # of which longer than a running workload's elapsed time
LEVELS = ("team/kind/model/size", "team/kind/size", "kind/size", "kind", "size", "size or larger", "fleet")
SIZE, LARGER, KIND = "size", "larger", "kind"
DECLARED, DEADLINE, BEYOND = "declared", "history ≤ deadline", "beyond history"

Key = tuple[str, str, str, int]  # team, model, GPU resource, GPUs


@dataclass(frozen=True)
class Shape:
    """What a workload's runtime is looked up by: its team, kind (training, batch-eval...; empty where
    the source does not say), model, GPU resource and size."""

    team: str
    model: str
    resource: str
    gpus: int
    kind: str = ""

    def lookups(self) -> tuple[tuple[object, ...], ...]:
        """The lookup key at every level, finest first (``LEVELS``); each starts with its level's tag."""
        return (
            ("tkms", self.team, self.kind, self.model, self.resource, self.gpus),
            ("tks", self.team, self.kind, self.resource, self.gpus),
            ("ks", self.kind, self.resource, self.gpus),
            (KIND, self.kind),
            (SIZE, self.resource, self.gpus),
            (LARGER, self.resource, self.gpus),
            ("fleet",),
        )

    def label(self, level: int) -> str:
        size = f"{self.gpus}×{short(self.resource)}"
        kind = f"{self.kind} · " if self.kind else ""
        parts = [
            f"{self.team} · {kind}{self.model or '-'} · {size}",
            f"{self.team} · {kind}{size}",
            f"{kind}{size}",
            f"{self.kind} · any size",
            size,
            f"≥{size}",
            "fleet-wide",
        ]
        return parts[level]


def short(resource: str) -> str:
    return resource.removeprefix("nvidia.com/")


@dataclass(frozen=True)
class Declared:
    """What the workload's owner said: an expected runtime, and the earliest deadline declared (a bound)."""

    expected_s: int | None = None
    deadline_s: int | None = None


@dataclass(frozen=True)
class Draw:
    """One sampled runtime (seconds, from the workload's start) and the source it came from."""

    runtime_s: int
    source: str


@dataclass
class RuntimeHistory:
    """Runtimes per lookup key at every level (``Shape.lookups``): those that finished, and those
    still running at the moment (*censored*: they will run at least that long). Leaving the running
    ones out would bias every draw short, since the long runs are the ones not finished yet; with
    them, a draw is from the Kaplan–Meier estimate, and the mass it cannot place (the longest runs
    are still running) is a draw "beyond history" (``_beyond``)."""

    by_key: dict[tuple[object, ...], list[int]] = field(default_factory=lambda: defaultdict(list))
    censored: dict[tuple[object, ...], list[int]] = field(default_factory=lambda: defaultdict(list))
    runs: int = 0
    _km: dict[tuple[tuple[object, ...], int], tuple[list[int], list[float]]] = field(default_factory=dict)
    _events: dict[tuple[object, ...], list[tuple[int, int]]] = field(default_factory=dict)  # ``_timeline``

    @classmethod
    def of(cls, samples: Iterable[tuple[Shape, int]], running: Iterable[tuple[Shape, int]] = ()) -> RuntimeHistory:
        """From finished runtimes and the elapsed times of runs still going."""
        out = cls()
        for shape, runtime in samples:
            out.runs += 1
            for key in shape.lookups():
                out.by_key[key].append(runtime)
        for shape, elapsed in running:
            for key in shape.lookups():
                out.censored[key].append(elapsed)
        for table in (out.by_key, out.censored):
            for values in table.values():
                values.sort()
        return out

    @classmethod
    def from_records(
        cls,
        records: Iterable[Record],
        before: datetime,
        running: Iterable[tuple[Shape, int]] = (),
        kinds: dict[tuple[str, str], str] | None = None,
    ) -> RuntimeHistory:
        """The runtimes of attempts the ledger saw finish before ``before`` (the latest version of
        each attempt as of then: later versions are not yet written), and the runs still going. The
        ledger records no job kind: ``kinds`` gives it by (namespace, name) where the source knows it
        (a trace, a Job label). A runtime is ``started`` → ``finished`` less ``FINISH_LATENCY_S``, as
        ``trace convert --from-ledger`` takes it: ``finished`` is Kueue's finish, a second after the
        pods' end, and the forecast's simulation adds that second again (the testbed's forecasts,
        whose waits are tens of seconds, came out late by it: docs/forecast-notebook.md, "On the testbed, as it was measured")."""
        return cls.of(
            (
                (
                    Shape(
                        r.team or "",
                        r.model or "",
                        r.gpu_resource,
                        r.gpu_count,
                        (kinds or {}).get((r.namespace, r.name), ""),
                    ),
                    max(int((r.finished - r.started).total_seconds()) - FINISH_LATENCY_S, 1),
                )
                for r in records
                if isinstance(r, Allocation)
                and r.end_reason is EndReason.FINISHED
                and r.started is not None
                and r.finished is not None
                and r.finished < before
            ),
            running,
        )

    def bootstrap(self, rng: random.Random) -> RuntimeHistory:
        """The same history resampled with replacement, key by key: one per sampled future, so the
        forecast carries the uncertainty of the distribution itself, not only of each draw from it.
        Without it a deep queue's wait, a sum of many runtimes, would come out far too certain: its
        spread shrinks with the queue's depth while an error in the mean runtime does not."""
        out = RuntimeHistory(runs=self.runs)
        for source, target in ((self.by_key, out.by_key), (self.censored, out.censored)):
            for key, values in source.items():
                if key[0] != LARGER:  # "size or larger" is gathered again from the resampled sizes
                    target[key] = sorted(_resampled(values, rng))
        return out

    def runtimes(self, key: tuple[object, ...], table: dict[tuple[object, ...], list[int]] | None = None) -> list[int]:
        """The sorted runtimes at one lookup key; "size or larger" is gathered at its first use."""
        table = self.by_key if table is None else table
        values = table.get(key)
        if values is None and key[0] == LARGER:
            _, resource, gpus = key
            values = sorted(
                v
                for k, vs in list(table.items())
                if k[0] == SIZE and k[1] == resource and k[2] >= gpus  # type: ignore[operator]
                for v in vs
            )
            table[key] = values
        return values or []

    def level(self, shape: Shape, elapsed: int = 0) -> tuple[int, list[int], int] | None:
        """The finest level with ``MIN_RUNS`` finished runs for ``shape``: (level, its sorted finished
        runtimes, the index of the first longer than ``elapsed``); None: no level has them. Its runs
        are not traded for a coarser level's when few ran longer than ``elapsed``: other shapes' long
        runs say little about this one's, and the draw goes beyond history instead (``_beyond``)."""
        for i, key in enumerate(shape.lookups()):
            if key == (KIND, ""):  # the ledger says no kind: this level would be the fleet's
                continue
            values = self.runtimes(key)
            if len(values) >= MIN_RUNS:
                return i, values, bisect_right(values, elapsed)
        return None

    def kaplan_meier(self, key: tuple[object, ...], elapsed: int) -> tuple[list[int], list[float]]:
        """The finished runtimes longer than ``elapsed`` and the cumulative probability up to each,
        censored runs counted at risk; 1 − the last cumulative is the mass beyond them."""
        cached = self._km.get((key, elapsed))
        if cached is not None:
            return cached
        events = self._timeline(key)
        first = bisect_right(events, (elapsed, 1))  # the first finish or censoring after ``elapsed``
        at_risk, survival, cumulative = len(events) - first, 1.0, 0.0
        times: list[int] = []
        cum: list[float] = []
        for t, censored in islice(events, first, None):
            if not censored:
                mass = survival / at_risk
                survival -= mass
                cumulative += mass
                times.append(t)
                cum.append(cumulative)
            at_risk -= 1
        self._km[(key, elapsed)] = (times, cum)
        return times, cum

    def _timeline(self, key: tuple[object, ...]) -> list[tuple[int, int]]:
        """Every finish (0) and censoring (1) at one lookup key, in time order; at a tie a finish
        counts before a censoring, as Kaplan–Meier does. Sorted once per key: each running run asks
        from its own elapsed time, and sorting per ask cost a seventh of a sample's draws (19.8 →
        17.1 ms on the speed bench)."""
        events = self._events.get(key)
        if events is None:
            events = sorted([(t, 0) for t in self.runtimes(key)] + [(t, 1) for t in self.runtimes(key, self.censored)])
            self._events[key] = events
        return events

    def draw(self, shape: Shape, elapsed: int, rng: random.Random, declared: Declared | None = None) -> Draw | None:
        """A runtime for ``shape`` longer than ``elapsed``; None: too little history to say. A deadline
        not yet passed bounds every draw, the declared one and one beyond history too: the Job is
        ended there whatever its owner expected."""
        deadline = declared.deadline_s if declared is not None else None
        if deadline is not None and deadline <= elapsed:
            deadline = None  # passed (a retried run's clock, a bound read late): history says more
        if declared is not None and declared.expected_s is not None and declared.expected_s > elapsed:
            return Draw(min(declared.expected_s, deadline or declared.expected_s), DECLARED)
        found = self.level(shape, elapsed)
        if found is None:
            return None
        i, values, first = found
        if len(values) - first < MIN_TAIL:
            drawn = _beyond(elapsed, rng)
        else:
            times, cum = self.kaplan_meier(shape.lookups()[i], elapsed)
            j = bisect_right(cum, rng.random())
            # j past the end: the mass of runs longer than any that finished (they are still running)
            drawn = _beyond(max(elapsed, times[-1]), rng) if j >= len(times) else Draw(times[j], shape.label(i))
        if deadline is not None:
            return Draw(min(drawn.runtime_s, deadline), DEADLINE)
        return drawn

    def describe(self, shape: Shape, elapsed: int = 0) -> str:
        """The level a draw for ``shape`` rests on, with its count, or why there is none."""
        found = self.level(shape, elapsed)
        if found is None:
            return f"too little history ({self.runs} finished runs, {MIN_RUNS} needed per level)"
        i, values, first = found
        if len(values) - first < MIN_TAIL:
            return f"{BEYOND} (it has run longer than {first} of {shape.label(i)}'s {len(values)} runs)"
        return f"{shape.label(i)} (n={len(values) - first})"


def _resampled(values: list[int], rng: random.Random) -> list[int]:
    """``len(values)`` picks with replacement: ``values[rng.randrange(n)]`` each, drawn as CPython's
    ``randrange`` draws them (``_randbelow_with_getrandbits``: ``n.bit_length()`` bits, again while
    not below ``n``), so the picks and the generator's state after them are the same. Every sample
    resamples some 25,000 runtimes; ``randrange``'s two calls per pick were two thirds of that
    (9.1 → 3.3 ms on the speed bench's history, ``tests/forecast/test_runtimes.py`` holds the sameness)."""
    n = len(values)
    width = n.bit_length()
    bits = rng.getrandbits
    out = []
    for _ in range(n):
        r = bits(width)
        while r >= n:
            r = bits(width)
        out.append(values[r])
    return out


def _beyond(base: int, rng: random.Random) -> Draw:
    """A run already longer than (nearly) every finished one like it: seen at a uniformly random point
    of its life, the share of it already run is uniform, so its runtime is ``base / u`` (u uniform in
    (0, 1]): as likely to end within as long again as not, with the heavy tail long GPU jobs have
    (Gott's and Lindy's argument). Named "beyond history" in the answer."""
    u = 1.0 - rng.random()  # (0, 1]
    return Draw(max(base + 1, math.ceil(base / u)), BEYOND)
