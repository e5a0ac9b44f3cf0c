"""The world differential's judgement: two worlds' ledgers as measures, their distance, and a noise floor.

Both worlds are read from the same records: the ledger ``gpufleet record`` writes on the testbed and
the records ``gpufleet simulate`` writes for a simulated run (``simulate.records``) have one format,
so one function (``from_records``) measures both and nothing is derived twice. A run's measures:

- per team, the distribution of waits (seconds not running between the Workload's creation and the
  start of the attempt that finished) and of completions (creation to that attempt's finish);
- goodput (GPU-hours of attempts that finished), lost (of attempts preempted, up to the eviction),
  held idle (GPU-hours of quota held by an attempt not running yet: admitted, pods not all running)
  and hours admitted but unplaced (the same, in workload-hours), each clipped to one window;
- preemptions by Kueue's reason, waitForPodsReady evictions;
- the admission order: workloads by their first quota reservation (ties by name).

Distances (``distance``): Wasserstein-1 between two empirical distributions, in their own seconds;
the absolute difference of two totals; for the admission order, how many admissions follow the first
position where two orders differ. The noise floor of a measure is the largest distance between two
real runs of the same trace; the simulator *agrees* on a measure when the median of its distances to
the real runs (over every simulated run of the seeded ensemble, ``ensemble``) stays within that floor,
or within the measure's resolution (``resolution``: Kubernetes writes its times to the second).
The spread of the ensemble itself (the largest distance between two simulated runs) is printed beside.
"""

from __future__ import annotations

import itertools
import random
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from gpufleet.ledger.records import Allocation, EndReason, Record
from gpufleet.simulate.config import SimulationConfig
from gpufleet.trace.job import Job

HOUR = 3600.0
PODS_READY = "PodsReadyTimeout"  # Kueue's eviction reason for waitForPodsReady (the Evicted condition)
KUEUE_WORKLOAD_NAME = re.compile(r"job-(.+)-[0-9a-f]{5}")
RESOLUTION_S = 1.0  # a time distance this small is below what the ledger can tell apart


@dataclass(frozen=True)
class WorldMeasures:
    """One run's measures, every time in seconds from the run's origin (trace second 0)."""

    teams: tuple[str, ...]
    waits: dict[str, tuple[float, ...]]  # team -> waits of its finished jobs, seconds
    completions: dict[str, tuple[float, ...]]  # team -> creation to finish, seconds
    goodput_gpu_h: float
    lost_gpu_h: float
    held_idle_gpu_h: float
    admitted_unplaced_h: float
    preemptions: dict[str, int]  # Kueue's reason -> count
    pods_ready_evictions: int
    admission_order: tuple[str, ...]
    jobs: int
    finished: int
    attempts: int = 0  # attempts that held quota
    attempt_gpus: int = 0  # their GPUs, summed: how far whole-second times can move the GPU-hours


def job_name(allocation: Allocation) -> str:
    """``namespace/name`` of the Job behind an attempt. The simulator names its workloads after the
    job; Kueue names a batch Job's Workload ``job-<name>-<5 hex digits>`` (its
    ``GetWorkloadNameForOwnerWithGVK``), which the recorder keeps, and a trace converted from such a
    ledger carries it as the job id: all read back as the Job's name."""
    name = allocation.name
    if found := KUEUE_WORKLOAD_NAME.fullmatch(name):
        name = found.group(1)
    return f"{allocation.namespace}/{name}"


def _s(t: datetime | None, origin: datetime) -> float | None:
    return None if t is None else (t - origin).total_seconds()


def _clipped(a: float | None, b: float | None, window: tuple[float, float]) -> float:
    if a is None or b is None:
        return 0.0
    return max(0.0, min(b, window[1]) - max(a, window[0]))


def from_records(
    records: Iterable[Record], origin: datetime, window: tuple[float, float] | None = None
) -> WorldMeasures:
    """The measures of one run's ledger records; ``window`` (seconds from ``origin``) clips the hours."""
    attempts: dict[str, list[Allocation]] = defaultdict(list)
    for r in records:
        if isinstance(r, Allocation):
            attempts[r.workload_uid].append(r)
    span = window or (float("-inf"), float("inf"))
    waits: dict[str, list[float]] = defaultdict(list)
    completions: dict[str, list[float]] = defaultdict(list)
    good = lost = held = unplaced = 0.0
    preemptions: Counter[str] = Counter()
    evictions = finished = held_attempts = held_gpus = 0
    first_admission: list[tuple[float, str]] = []
    for _uid, tries in attempts.items():
        tries.sort(key=lambda a: a.attempt)
        created = min(_s(a.created, origin) or 0.0 for a in tries)
        team = tries[0].team or tries[0].namespace
        name = job_name(tries[0])
        ran_before = 0.0
        last_run: tuple[float, float] | None = None  # the latest attempt that ran, (start, end)
        for a in tries:
            admitted = _s(a.quota_reserved or a.admitted, origin)
            started, ended = _s(a.started, origin), _s(a.finished, origin)
            if admitted is not None:
                held_attempts, held_gpus = held_attempts + 1, held_gpus + a.gpu_count
            if admitted is not None and a.attempt == min(t.attempt for t in tries if t.quota_reserved or t.admitted):
                first_admission.append((admitted, name))
            not_running_until = started if started is not None else ended
            held += a.gpu_count * _clipped(admitted, not_running_until, span)
            unplaced += _clipped(admitted, not_running_until, span)
            if a.end_reason is EndReason.FINISHED and started is not None and ended is not None:
                good += a.gpu_count * _clipped(started, ended, span)
                finished += 1
                waits[team].append(started - created - ran_before)
                completions[team].append(ended - created)
                last_run = None
            elif a.end_reason is EndReason.FINISHED and ended is not None and last_run is not None:
                # Kueue preempted a Job whose pods were just succeeding: the Job completes with the
                # next attempt's quota and no pod of its own; its run was the previous attempt's.
                finished += 1
                waits[team].append(last_run[0] - created - (ran_before - (last_run[1] - last_run[0])))
                completions[team].append(ended - created)
            elif a.end_reason is EndReason.PREEMPTED:
                preemptions[a.end_detail or "Preempted"] += 1
                lost += a.gpu_count * _clipped(started, ended, span)
            elif a.end_reason is EndReason.EVICTED and a.end_detail == PODS_READY:
                evictions += 1
            if started is not None and ended is not None:
                ran_before += ended - started
                last_run = (started, ended)
    teams = tuple(sorted({(a[0].team or a[0].namespace) for a in attempts.values()}))
    return WorldMeasures(
        teams=teams,
        waits={t: tuple(sorted(waits.get(t, ()))) for t in teams},
        completions={t: tuple(sorted(completions.get(t, ()))) for t in teams},
        goodput_gpu_h=good / HOUR,
        lost_gpu_h=lost / HOUR,
        held_idle_gpu_h=held / HOUR,
        admitted_unplaced_h=unplaced / HOUR,
        preemptions=dict(sorted(preemptions.items())),
        pods_ready_evictions=evictions,
        admission_order=tuple(name for _, name in sorted(first_admission)),
        jobs=len(attempts),
        finished=finished,
        attempts=held_attempts,
        attempt_gpus=held_gpus,
    )


def scaled(m: WorldMeasures, factor: float) -> WorldMeasures:
    """``m`` with every duration (and GPU-hour) multiplied by ``factor``: a compressed run's measures
    put on the original trace's time scale, to say what compression itself changed."""
    return replace(
        m,
        waits={t: tuple(v * factor for v in vs) for t, vs in m.waits.items()},
        completions={t: tuple(v * factor for v in vs) for t, vs in m.completions.items()},
        goodput_gpu_h=m.goodput_gpu_h * factor,
        lost_gpu_h=m.lost_gpu_h * factor,
        held_idle_gpu_h=m.held_idle_gpu_h * factor,
        admitted_unplaced_h=m.admitted_unplaced_h * factor,
    )


def wasserstein(a: Sequence[float], b: Sequence[float]) -> float:
    """Wasserstein-1 distance of two empirical distributions: the area between their step CDFs, in
    the values' unit. Two empty samples are 0 apart; an empty and a non-empty one, infinitely."""
    if not a and not b:
        return 0.0
    if not a or not b:
        return float("inf")
    xs, ys = sorted(a), sorted(b)
    points = sorted(set(xs) | set(ys))
    total, i, j = 0.0, 0, 0
    for lo, hi in itertools.pairwise(points):
        while i < len(xs) and xs[i] <= lo:
            i += 1
        while j < len(ys) and ys[j] <= lo:
            j += 1
        total += abs(i / len(xs) - j / len(ys)) * (hi - lo)
    return total


def order_divergence(a: Sequence[str], b: Sequence[str]) -> int:
    """Admissions from the first position where the two orders differ to the end of the longer one."""
    same = next((k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    return max(len(a), len(b)) - same


@dataclass(frozen=True)
class Measure:
    """One compared quantity: its name, its unit and the resolution below which a distance is noise."""

    name: str
    unit: str
    resolution: float = 0.0


def resolution(measure: Measure, runs: Sequence[WorldMeasures]) -> float:
    """The distance whole-second times alone can make: Kubernetes writes condition and status times to
    the second, so each attempt's span is known to within a second; over a run's attempts that is one
    second per attempt (its GPUs' worth, for GPU-hours). Time distributions: one second."""
    if measure.unit == "GPU-h":
        return max((r.attempt_gpus for r in runs), default=0) / HOUR
    if measure.unit == "h":
        return max((r.attempts for r in runs), default=0) / HOUR
    return measure.resolution


def measures_of(runs: Sequence[WorldMeasures]) -> list[Measure]:
    """Every measure the runs have, in a stable order (teams and reasons sorted by name)."""
    teams = sorted({t for r in runs for t in r.teams})
    reasons = sorted({k for r in runs for k in r.preemptions})
    out = [Measure(f"wait {t}", "s W1", RESOLUTION_S) for t in teams]
    out += [Measure(f"completion {t}", "s W1", RESOLUTION_S) for t in teams]
    out += [Measure("goodput", "GPU-h"), Measure("lost", "GPU-h"), Measure("held idle", "GPU-h")]
    out += [Measure("admitted unplaced", "h")]
    out += [Measure(f"preemptions {r}", "count") for r in reasons]
    out += [Measure("podsReady evictions", "count"), Measure("admission order", "jobs after divergence")]
    return out


SCALARS = {  # measure -> the WorldMeasures field it compares
    "goodput": "goodput_gpu_h",
    "lost": "lost_gpu_h",
    "held idle": "held_idle_gpu_h",
    "admitted unplaced": "admitted_unplaced_h",
    "podsReady evictions": "pods_ready_evictions",
}


def distance(measure: Measure, a: WorldMeasures, b: WorldMeasures) -> float:
    kind, _, subject = measure.name.partition(" ")
    if kind == "wait":
        return wasserstein(a.waits.get(subject, ()), b.waits.get(subject, ()))
    if kind == "completion":
        return wasserstein(a.completions.get(subject, ()), b.completions.get(subject, ()))
    if kind == "preemptions":
        return float(abs(a.preemptions.get(subject, 0) - b.preemptions.get(subject, 0)))
    field = SCALARS.get(measure.name)
    if field is not None:
        return abs(float(getattr(a, field)) - float(getattr(b, field)))
    if measure.name == "admission order":
        return float(order_divergence(a.admission_order, b.admission_order))
    raise ValueError(f"unknown measure {measure.name!r}")


@dataclass(frozen=True)
class Verdict:
    measure: Measure
    sim_to_real: float  # median distance over every (simulated, real) pair
    real_floor: float  # largest distance between two real runs (0 with one real run)
    sim_spread: float  # largest distance between two simulated runs of the ensemble
    resolution: float = 0.0  # what whole-second times alone can make (``resolution``)

    @property
    def floor(self) -> float:
        return max(self.real_floor, self.resolution)

    @property
    def agrees(self) -> bool:
        return self.sim_to_real <= self.floor + 1e-9


def _pairs(measure: Measure, runs: Sequence[WorldMeasures]) -> list[float]:
    return [distance(measure, a, b) for a, b in itertools.combinations(runs, 2)]


def judge(real: Sequence[WorldMeasures], simulated: Sequence[WorldMeasures]) -> list[Verdict]:
    """Each measure's sim-to-real distance against the real-vs-real floor (``agrees``)."""
    if not real or not simulated:
        raise ValueError("judging needs at least one real and one simulated run")
    out = []
    for m in measures_of([*real, *simulated]):
        across = [distance(m, s, r) for s in simulated for r in real]
        out.append(
            Verdict(
                m,
                statistics.median(across),
                max(_pairs(m, real), default=0.0),
                max(_pairs(m, simulated), default=0.0),
                resolution(m, real),
            )
        )
    return out


def ensemble_config(seed: int) -> SimulationConfig:
    """The simulation settings of the ensemble's run ``seed``: seed 0 runs deterministic (node ties by
    name, every control-plane delay as configured); seed *k* draws kube-scheduler's pick among nodes of
    equal score at every bind (mostly the first by name: ``placement.cluster.TIE_RACE``), and each delay
    a second longer now and then (``SimulationConfig.jitter_seed``), as a real run would."""
    return SimulationConfig(jitter_seed=seed or None)


def ensemble(jobs: Sequence[Job], seed: int) -> list[Job]:
    """The trace as one run of the real system may order it (seed 0: unchanged). Kueue orders workloads
    by their creation second, then by UID, which is random in a cluster; the simulator breaks the tie by
    job id, always the same way. So each job that shares its arrival second with another of its
    namespace (one LocalQueue, one ClusterQueue's heap, where the UID decides) is delayed by one second
    with probability 1/2 (drawn from ``seed``): a tie goes either way. Jobs of other queues are left
    where they are: a second's delay would move them past Kueue's requeue batch of that second, which
    no real run showed (the ``fair`` trace's w012 and w020, alpha and beta at second 179: w012 was
    admitted at its arrival in 3 of 3 real runs, before the batch woke alpha's older w021). Jobs a second
    or more apart keep their order, as on the testbed, where the API server's latency (well under a
    second) does not reorder them. Node tie-breaks and the control plane's delays are drawn by the
    run's settings (``ensemble_config``)."""
    if seed == 0:
        return list(jobs)
    rng = random.Random(seed)
    seconds = Counter((j.submit_s, j.namespace) for j in jobs)
    return [
        replace(j, submit_s=j.submit_s + 1) if seconds[j.submit_s, j.namespace] > 1 and rng.random() < 0.5 else j
        for j in jobs
    ]
