"""A synthetic week of GPU jobs for a set of teams and pools, seeded and reproducible.

Shape of the workload (each a documented choice, not a measurement):

- Arrivals are a non-homogeneous Poisson process (drawn by thinning): the hourly rate follows a
  working day, ``1 + 0.8·cos(2π(h − 14)/24)`` (peak at 14:00, trough at 02:00), halved on days 6
  and 7 of each week. The rate is set so the offered GPU-hours are ``load`` × the fleet's capacity.
- Kinds and sizes: ``dev`` (one MIG instance of an offered profile or one time-slice replica;
  lognormal, median 45 min), ``batch-eval`` (1–2 full cards; lognormal, median 40 min),
  ``inference`` (1 full card or a MIG instance; lognormal, median 2 h) and ``training`` (1, 2, 4 or
  8 cards on one node, or 2–4 nodes of 8 cards; Pareto, α = 1.3, from 30 min, capped at 3 days):
  the heavy tails of real GPU clusters.
- Teams draw jobs in proportion to their weight; the team marked ``flood`` submits
  ``flood_share`` of all jobs, in bursts (sweeps of 20–60 batch-eval jobs a few seconds apart).
- CPU and memory follow the GPUs: 8 CPUs and 64 GiB per card, 2 CPUs and 8 GiB per slice.

Same spec and seed give the same jobs: one ``random.Random(seed)`` drives everything, and the jobs
are sorted by (submit time, job id).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import TypeVar

from gpufleet.policy import Fleet
from gpufleet.policy.slicing import SlicingMode
from gpufleet.trace.job import Job, JobKind

T = TypeVar("T")

DAY = 86_400
HOUR = 3_600
GIB = 1 << 30
MAX_TRAINING_S = 3 * DAY
KIND_MIX = (
    (JobKind.DEV, 0.35),
    (JobKind.BATCH_EVAL, 0.30),
    (JobKind.TRAINING, 0.25),
    (JobKind.INFERENCE, 0.10),
)
TRAINING_SIZES = (
    (1, 1, 0.35),
    (1, 2, 0.2),
    (1, 4, 0.15),
    (1, 8, 0.15),
    (2, 8, 0.08),
    (3, 8, 0.04),
    (4, 8, 0.03),
)


Slicing = SlicingMode  # the policy's own enum: one spelling of a pool's slicing everywhere


@dataclass(frozen=True)
class TeamSpec:
    name: str
    namespace: str
    weight: float = 1.0
    priority_classes: tuple[str, ...] = ()
    data_classes: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    checkpoints: tuple[str, ...] = ()  # checkpoint location prefixes, e.g. s3://eu-central-1/research/
    flood: bool = False


@dataclass(frozen=True)
class PoolSpec:
    name: str
    gpu_model: str
    gpus: int
    slicing: Slicing = Slicing.FULL
    mig_profiles: tuple[str, ...] = ()
    replicas: int = 1


@dataclass(frozen=True)
class SynthSpec:
    teams: tuple[TeamSpec, ...]
    pools: tuple[PoolSpec, ...]
    days: int = 7
    load: float = 0.8  # offered GPU-hours over the fleet's GPU-hours
    flood_share: float = 0.4

    def __post_init__(self) -> None:
        if not self.teams or not self.pools:
            raise ValueError("a spec needs at least one team and one pool")
        if sum(1 for t in self.teams if t.flood) > 1:
            raise ValueError("at most one team floods the queue")
        if self.days < 1 or self.load <= 0 or not 0 <= self.flood_share < 1:
            raise ValueError("days >= 1, load > 0 and 0 <= flood_share < 1")


def diurnal_rate(t: float) -> float:
    """Relative arrival rate at second ``t`` (max 1.8 on weekdays at 14:00)."""
    hour = (t % DAY) / HOUR
    weekday = int(t // DAY) % 7 < 5
    return (1 + 0.8 * math.cos(2 * math.pi * (hour - 14) / 24)) * (1.0 if weekday else 0.5)


def _pick(rng: random.Random, weighted: tuple[tuple[T, float], ...]) -> T:
    return rng.choices([v for v, _ in weighted], [w for _, w in weighted])[0]


@dataclass(frozen=True)
class _Shape:
    kind: JobKind
    pool: PoolSpec
    pods: int
    gpus: int
    mig_profile: str
    duration_s: int


class _Sampler:
    """Draws job shapes for the spec's pools."""

    def __init__(self, spec: SynthSpec, rng: random.Random) -> None:
        self.rng = rng
        self.full = [p for p in spec.pools if p.slicing is Slicing.FULL]
        self.mig = [p for p in spec.pools if p.slicing is Slicing.MIG and p.mig_profiles]
        self.shared = [p for p in spec.pools if p.slicing is Slicing.TIMESLICE]
        self.biggest = max((p.gpus for p in self.full), default=0)

    def shape(self, kind: JobKind) -> _Shape:
        rng = self.rng
        if kind is JobKind.DEV and (self.mig or self.shared):
            pool = rng.choice(self.mig + self.shared)
            profile = rng.choice(pool.mig_profiles) if pool.slicing is Slicing.MIG else ""
            return _Shape(kind, pool, 1, 1, profile, self._lognormal(45 * 60, 1.0, DAY))
        if kind is JobKind.INFERENCE and self.mig and rng.random() < 0.5:
            pool = rng.choice(self.mig)
            return _Shape(kind, pool, 1, 1, pool.mig_profiles[-1], self._lognormal(2 * HOUR, 0.8, DAY))
        if not self.full:  # only sliced pools: every job is a slice
            return self.shape(JobKind.DEV) if kind is not JobKind.DEV else self._slice_fallback(kind)
        pool = rng.choice(self.full)
        if kind is JobKind.TRAINING:
            pods, gpus = self._training_size()
            while pods * gpus > self.biggest and (pods > 1 or gpus > 1):
                pods, gpus = (pods - 1, gpus) if pods > 1 else (1, gpus // 2)
            seconds = min(MAX_TRAINING_S, int(30 * 60 * rng.paretovariate(1.3)))
            return _Shape(kind, pool, pods, gpus, "", seconds)
        if kind is JobKind.BATCH_EVAL:
            return _Shape(kind, pool, 1, rng.choice((1, 1, 1, 2)), "", self._lognormal(40 * 60, 1.0, DAY))
        return _Shape(kind, pool, 1, 1, "", self._lognormal(2 * HOUR, 0.8, DAY))

    def _slice_fallback(self, kind: JobKind) -> _Shape:
        raise ValueError(f"no pool can run {kind} jobs")

    def _training_size(self) -> tuple[int, int]:
        return _pick(self.rng, tuple(((pods, gpus), w) for pods, gpus, w in TRAINING_SIZES))

    def _lognormal(self, median_s: float, sigma: float, cap_s: int) -> int:
        return max(60, min(cap_s, int(self.rng.lognormvariate(math.log(median_s), sigma))))


def _gpu_seconds(shape: _Shape) -> float:
    if shape.mig_profile or shape.pool.slicing is Slicing.TIMESLICE:
        slices = 7 if shape.mig_profile else max(1, shape.pool.replicas)
        per = int(shape.mig_profile.split("g", 1)[0]) / slices if shape.mig_profile else 1 / slices
        return per * shape.duration_s
    return shape.pods * shape.gpus * shape.duration_s


def synthesize(spec: SynthSpec, seed: int) -> list[Job]:
    """A realistic, reproducible workload over ``spec.days`` days (see the module docstring)."""
    rng = random.Random(seed)
    sampler = _Sampler(spec, rng)
    horizon = spec.days * DAY
    capacity = sum(p.gpus for p in spec.pools) * horizon
    kinds = tuple((k, w) for k, w in KIND_MIX)
    # Mean GPU-seconds per job, from a calibration draw of the same mix (same RNG: reproducible).
    calibration = [_gpu_seconds(sampler.shape(_pick(rng, kinds))) for _ in range(4000)]
    mean_load = sum(calibration) / len(calibration)
    jobs_wanted = spec.load * capacity / mean_load
    mean_rate = sum(diurnal_rate(h * HOUR + HOUR / 2) for h in range(spec.days * 24)) / (spec.days * 24)
    peak = 1.8 / mean_rate * jobs_wanted / horizon  # arrivals per second at the diurnal peak
    flood = next((t for t in spec.teams if t.flood), None)
    others = tuple((t, t.weight) for t in spec.teams if not t.flood)
    flood_share = spec.flood_share if flood is not None and others else 0.0
    burst_mean = 40
    jobs: list[Job] = []
    counters: dict[str, int] = {}
    t = 0.0
    while True:
        t += rng.expovariate(peak)
        if t >= horizon:
            break
        if rng.random() * 1.8 > diurnal_rate(t):
            continue
        if flood is not None and (not others or rng.random() < flood_share / burst_mean):
            for i in range(rng.randint(20, 60)):
                at = int(t) + 3 * i
                if at < horizon:
                    jobs.append(_job(flood, sampler.shape(JobKind.BATCH_EVAL), at, rng, counters))
            continue
        if rng.random() < flood_share:
            continue  # the flood team's share is spent in its bursts
        team = _pick(rng, others)
        kind = _pick(rng, kinds)
        jobs.append(_job(team, sampler.shape(kind), int(t), rng, counters))
    jobs.sort(key=lambda j: (j.submit_s, j.job_id))
    return jobs


def _job(team: TeamSpec, shape: _Shape, at: int, rng: random.Random, counters: dict[str, int]) -> Job:
    counters[team.name] = counters.get(team.name, 0) + 1
    job_id = f"{team.name}-{counters[team.name]:06d}"
    sliced = bool(shape.mig_profile) or shape.pool.slicing is Slicing.TIMESLICE
    location = rng.choice(team.checkpoints) if team.checkpoints else f"s3://{team.namespace}/checkpoints/"
    return Job(
        job_id=job_id,
        team=team.name,
        namespace=team.namespace,
        submit_s=at,
        duration_s=shape.duration_s,
        kind=shape.kind,
        pods=shape.pods,
        gpus=shape.gpus,
        mig_profile=shape.mig_profile,
        gpu_models=(shape.pool.gpu_model,),
        cpu_milli=(2000 if sliced else 8000 * shape.gpus),
        memory=(8 if sliced else 64 * shape.gpus) * GIB,
        priority_class=rng.choice(team.priority_classes) if team.priority_classes else "",
        model=rng.choice(team.models) if team.models else "",
        data_class=rng.choice(team.data_classes) if team.data_classes else "",
        checkpoint=f"{location.rstrip('/')}/{job_id}",
    )


def flood_team(fleet: Fleet) -> str:
    """The team that floods the queue: the lightest weight, the first in the policy on a tie."""
    teams = fleet.policy.teams
    return min(teams, key=lambda t: (t.weight, teams.index(t))).name


def fleet_spec(fleet: Fleet, *, days: int = 7, load: float = 0.8) -> SynthSpec:
    """A workload for a fleet policy's own teams on its queued pools (the serving pool runs vLLM).

    Each team submits from its first namespace with its priority and data classes; checkpoints go
    to the first location of each of its data classes; the lightest team floods the queue.
    """
    policy = fleet.policy
    if not policy.teams:
        raise ValueError("the policy has no teams to synthesize work for")
    locations = {d.name: d.checkpointLocations for d in policy.dataClasses}
    flood = flood_team(fleet)
    teams = tuple(
        TeamSpec(
            name=t.name,
            namespace=t.namespaces[0],
            weight=float(t.weight),
            priority_classes=tuple(t.priorityClasses),
            data_classes=tuple(t.dataClasses),
            models=(f"{t.name}/model",),
            checkpoints=tuple(
                f"{loc.rstrip('/')}/{t.name}/" for d in t.dataClasses for loc in locations.get(d, [])[:1]
            ),
            flood=t.name == flood,
        )
        for t in policy.teams
    )
    pools = []
    for cap in fleet.queued_pools():
        mode = cap.decision.mode
        pools.append(
            PoolSpec(
                name=cap.name,
                gpu_model=cap.gpu.name,
                gpus=cap.pool.gpu_count,
                slicing=Slicing(mode),
                mig_profiles=tuple(p for p, _ in cap.decision.layout or ()) if mode == "mig" else (),
                replicas=cap.decision.replicas or 1,
            )
        )
    return SynthSpec(teams=teams, pools=tuple(pools), days=days, load=load)
