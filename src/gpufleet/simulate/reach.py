"""What a team can ever hold of each pool's resources, and which jobs no quota will ever admit.

A team's *reach* on one (pool, resource) is ``gpufleet plan``'s: its nominal quota plus what it may
borrow (the cohort's unassigned units and the other teams' lendable quota, capped by its own
borrowing limit). Kueue gives a pod set one flavor per resource, so a job is admissible when one
pool offering its resource (and GPU model) has reach for all its pods at once; a job larger than
every such reach waits forever, whatever else happens in the fleet (``NeverAdmissible``).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpufleet.plan import make_plan
from gpufleet.policy import Fleet
from gpufleet.simulate.requests import Ask
from gpufleet.trace.job import Job


@dataclass(frozen=True)
class Reach:
    """One team's standing on one (pool, resource), in the resource's units."""

    team: str
    pool: str
    resource: str
    gpu_model: str
    capacity: int  # units in the pool
    per_node: int  # units on one node
    nominal: int
    borrowing_limit: int | None  # None: unlimited
    reach: int  # nominal + what it may borrow, with the policy's limits
    limited: bool  # a borrowing limit of its own or a lending limit of another team lowers ``reach``


class Reaches:
    """Every team's reach on every pool resource it may use (the queue world's quota)."""

    def __new__(cls, *_args: object, **_kwargs: object) -> Reaches:
        # Bare, as pickle makes it before setting its attributes: compiled, a class without its
        # own __new__ would run __init__ with no arguments there (gpufleet.picklable)
        return super().__new__(cls)

    def __init__(self, fleet: Fleet) -> None:
        self.by_team: dict[str, list[Reach]] = {}
        for q in make_plan(fleet).quotas:
            cap = fleet.pools[q.pool]
            for t in q.teams:
                reach = Reach(
                    team=t.team,
                    pool=q.pool,
                    resource=q.resource,
                    gpu_model=cap.gpu.name,
                    capacity=q.capacity,
                    per_node=cap.units_per_node(q.resource),
                    nominal=t.nominal,
                    borrowing_limit=t.borrowing_limit,
                    reach=t.reach,
                    limited=t.reach < q.capacity,
                )
                self.by_team.setdefault(t.team, []).append(reach)

    def options(self, job: Job, ask: Ask) -> list[Reach]:
        """The (pool, resource) entries the job's team could be admitted on, by resource and GPU model."""
        return [
            r
            for r in self.by_team.get(job.team, [])
            if r.resource == ask.resource and (not job.gpu_models or r.gpu_model in job.gpu_models)
        ]

    def best(self, job: Job, ask: Ask) -> int:
        """The most units of the job's resource its team can ever hold on one pool (0: none)."""
        return max((r.reach for r in self.options(job, ask)), default=0)

    def never_admissible(self, job: Job, ask: Ask) -> bool:
        return job.pods * ask.count > self.best(job, ask)
