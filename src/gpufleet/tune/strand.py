"""Which jobs a policy strands, and which no policy in the search space can save.

A job is *stranded* by a policy when it is larger than anything its team can ever reach there
(``NeverAdmissible``, ``gpufleet.simulate.reach``): it waits forever. The worst-p95 objective does not
see a few stranded jobs among a thousand (their wait is not a wait, it is a loss), so ``tune`` holds
stranding as a hard constraint: a job that first apply runs, or that the input policy admits, may not
be stranded by a recommendation, **where some policy in the space can admit it**.

Reach is static (quota, limits, layouts), so whether a job can be saved is decided without a
simulation: the space's *open* policies lift every borrowing and lending limit it searches, once for
each slicing choice (a MIG layout or time-slice replica count changes which resources exist). A job
that none of them admits is beyond every knob; it is not counted against a trial but reported, with
the capacity that would admit it (``Beyond``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from gpufleet.policy import Fleet
from gpufleet.policy.model import UNLIMITED
from gpufleet.simulate.federation_run import ZoneReach
from gpufleet.simulate.reach import Reach, Reaches
from gpufleet.simulate.requests import Catalog
from gpufleet.simulate.result import RunResult
from gpufleet.trace.job import Job
from gpufleet.tune.space import Space, SpaceError


def key_of(job: Job) -> str:
    """A job's key, as ``JobRun.key`` names it."""
    return f"{job.namespace}/{job.job_id}"


def in_window(jobs: Iterable[Job], window: tuple[int, int]) -> list[Job]:
    return [j for j in jobs if window[0] <= j.submit_s < window[1]]


def never_keys(fleet: Fleet, jobs: Iterable[Job]) -> set[str]:
    """The jobs ``fleet`` strands: the queue world's own test (``Reaches.never_admissible``)."""
    reaches, catalog = Reaches(fleet), Catalog.of(fleet)
    out = set()
    for job in jobs:
        ask = catalog.ask_of(job)
        if ask is not None and reaches.never_admissible(job, ask):
            out.add(key_of(job))
    return out


def ran_keys(result: RunResult) -> set[str]:
    """The jobs that got every pod running at least once in a run (first apply: ran at all)."""
    return {r.key for r in result.outcome.runs if any(a.started is not None for a in r.attempts)}


def stranded_in(result: RunResult, protected: frozenset[str]) -> int:
    """How many protected jobs this queue run marked never-admissible."""
    return sum(1 for r in result.outcome.runs if r.never and r.key in protected)


def open_fleets(space: Space) -> list[Fleet]:
    """The space's most permissive policies: every searched limit lifted, once per slicing choice."""
    base = space.base_params()
    lifted: dict[str, str] = {
        k.path: UNLIMITED
        for k in space.knobs
        if k.path.endswith(("borrowingLimit", "lendingLimit")) and UNLIMITED in k.choices
    }
    variants = [lifted]
    for knob in space.knobs:
        if ".slicing." in knob.path:
            variants += [{**lifted, knob.path: c} for c in knob.choices if c != base[knob.path]]
    fleets = []
    for params in variants:
        try:
            fleets.append(space.fleet(params))
        except SpaceError:  # a layout that needs other choices too: the others still count
            continue
    return fleets


@dataclass(frozen=True)
class Beyond:
    """Jobs of one team and resource that no policy in the space can admit, and what would."""

    team: str
    resource: str
    jobs: tuple[str, ...]  # their keys
    largest: int  # units the largest asks for, on one pool
    pool: str | None  # the pool that comes closest (None: the team may use no pool offering it)
    reach: int  # the most the team can hold there under any policy in the space
    capacity: int  # that pool's units

    @property
    def needed(self) -> str:
        """The capacity that would admit the largest of them."""
        if self.pool is None:
            return f"quota for {self.team} on a pool offering {self.resource} with at least {self.largest} units"
        if self.capacity < self.largest:
            return (
                f"{self.largest - self.capacity} more {self.resource} units in {self.pool} "
                f"({self.capacity} → {self.largest}), with {self.team}'s reach raised to {self.largest}"
            )
        return f"{self.largest - self.reach} more nominal {self.resource} quota for {self.team} on {self.pool}"

    def message(self) -> str:
        where = (
            f"no pool {self.team} may use offers {self.resource}"
            if self.pool is None
            else f"no policy in the search space lets {self.team} hold more than {self.reach} on {self.pool} "
            f"(pool {self.capacity})"
        )
        return (
            f"{len(self.jobs)} {self.team} job(s) ask up to {self.largest} {self.resource} on one pool but {where}: "
            f"no knob can admit them; {self.needed} would."
        )


@dataclass(frozen=True)
class Stranding:
    """Which jobs of one trace a trial may not strand (``protected``), and which no knob can save."""

    protected: frozenset[str]
    beyond: tuple[Beyond, ...]


def _best(options: Sequence[Reach]) -> Reach | None:
    return max(options, key=lambda r: (r.reach, r.capacity, r.pool), default=None)


def _views(fleet: Fleet) -> Callable[[Job], list[tuple[Reaches, Catalog]]]:
    """Where a job may be admitted: the one cluster, or each worker of its residency zone (a federation)."""
    if not fleet.policy.clusters:
        one = [(Reaches(fleet), Catalog.of(fleet))]
        return lambda _job: one
    zoned = ZoneReach(fleet)
    return lambda job: [(reaches, catalog) for _, reaches, catalog in zoned.views(job)]


def stranding(space: Space, jobs: Sequence[Job], first_ran: set[str], input_never: set[str]) -> Stranding:
    """Protected: ran under first apply or admitted by the input, and admitted by some open policy."""
    fleets = open_fleets(space) or [space.fleet(space.base_params())]
    saved: set[str] = set()
    closest: dict[str, tuple[Reach | None, int, str]] = {}
    for fleet in fleets:
        views = _views(fleet)
        for job in jobs:
            key = key_of(job)
            for reaches, catalog in views(job):
                ask = catalog.ask_of(job)
                if ask is None:
                    continue
                if not reaches.never_admissible(job, ask):
                    saved.add(key)
                    break
                best = _best(reaches.options(job, ask))
                known = closest.get(key)
                if known is None or (best is not None and (known[0] is None or best.reach > known[0].reach)):
                    closest[key] = (best, job.pods * ask.count, ask.resource)
    wanted = {key_of(j) for j in jobs} & (first_ran | ({key_of(j) for j in jobs} - input_never))
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    lost = {key_of(j): j for j in jobs if key_of(j) in closest and key_of(j) not in saved}
    for key, job in lost.items():
        groups[(job.team, closest[key][2])].append(key)
    beyond = []
    for (team, resource), keys in sorted(groups.items()):
        largest = max(closest[k][1] for k in keys)
        reach = max((r for k in keys if (r := closest[k][0]) is not None), key=lambda r: r.reach, default=None)
        beyond.append(
            Beyond(
                team,
                resource,
                tuple(sorted(keys)),
                largest,
                None if reach is None else reach.pool,
                0 if reach is None else reach.reach,
                0 if reach is None else reach.capacity,
            )
        )
    return Stranding(frozenset(wanted & saved), tuple(beyond))
