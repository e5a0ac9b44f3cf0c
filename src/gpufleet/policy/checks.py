"""Checks that look across the policy's fields, run after each field passed on its own.

Each check yields ``(path, message)``; the loader turns the path into a line and column. Checks that
need a resolved pool (its card, its slicing) only run for pools that resolved, so one mistake does not
bury the others under follow-on errors.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator

from gpufleet.gpus import lookup, names
from gpufleet.policy import dra
from gpufleet.policy.capacity import PoolCapacity, nominal, pool_capacity
from gpufleet.policy.fleet import facts_for
from gpufleet.policy.model import UNLIMITED, FleetPolicy, MigSlicing, Role
from gpufleet.policy.residency import residency_check
from gpufleet.policy.slicing import decide

Loc = tuple[str | int, ...]
Finding = tuple[Loc, str]


def _duplicates(section: str, values: Iterable[str], key: str = "name") -> Iterator[Finding]:
    seen: Counter[str] = Counter()
    for index, value in enumerate(values):
        seen[value] += 1
        if seen[value] == 2:
            yield (section, index, key), f"duplicate {key} {value!r}: each must be unique"


def _pools(policy: FleetPolicy, capacity: dict[str, PoolCapacity]) -> Iterator[Finding]:
    """Check each pool's card and slicing; record the pools that resolve in ``capacity``."""
    team_names = {t.name for t in policy.teams}
    for i, pool in enumerate(policy.pools):
        gpu = lookup(pool.gpu)
        if gpu is None:
            yield (
                ("pools", i, "gpu"),
                f"unknown GPU model {pool.gpu!r}; expected one of: {', '.join(names())}",
            )
            continue
        if isinstance(pool.slicing, MigSlicing) and gpu.mig is None:
            yield (
                ("pools", i, "slicing", "mode"),
                f"{gpu.name} has no MIG; use mode full or timeslice (MIG cards: A30, A100, H100, H200, GH200, B200)",
            )
            continue
        for team in pool.teams or []:
            if team not in team_names:
                yield (("pools", i, "teams"), f"unknown team {team!r}")
        try:
            decision = decide(facts_for(policy, pool))
        except ValueError as exc:
            yield (("pools", i, "slicing", "layout"), f"invalid MIG layout for {gpu.name}: {exc}")
            continue
        if decision.mode == "mig" and not decision.layout:
            yield (
                ("pools", i, "slicing", "layout"),
                "the layout creates no MIG instances: name one that does, or use full",
            )
            continue
        capacity[pool.name] = pool_capacity(pool, gpu, decision)


def _teams(policy: FleetPolicy, capacity: dict[str, PoolCapacity]) -> Iterator[Finding]:
    priority_names = {p.name for p in policy.priorityClasses}
    data_names = {d.name for d in policy.dataClasses}
    owner: dict[str, str] = {}
    serving = policy.serving.pool if policy.serving else None
    for t, team in enumerate(policy.teams):
        for n, namespace in enumerate(team.namespaces):
            if namespace in owner:
                yield (
                    ("teams", t, "namespaces", n),
                    f"namespace {namespace!r} already belongs to team {owner[namespace]!r}",
                )
            owner[namespace] = team.name
        for p, name in enumerate(team.priorityClasses):
            if name not in priority_names:
                yield (
                    ("teams", t, "priorityClasses", p),
                    f"unknown priority class {name!r}; define it under priorityClasses",
                )
        for d, name in enumerate(team.dataClasses):
            if name not in data_names:
                yield (
                    ("teams", t, "dataClasses", d),
                    f"unknown data class {name!r}; define it under dataClasses",
                )
        for pool_name, quota in team.quota.items():
            loc: Loc = ("teams", t, "quota", pool_name)
            pool = policy.pool(pool_name)
            if pool is None:
                yield loc, f"unknown pool {pool_name!r}; pools are: {', '.join(p.name for p in policy.pools)}"
                continue
            if pool_name == serving or pool.role is Role.SERVING:
                yield loc, f"pool {pool_name!r} is reserved for serving: teams cannot hold quota there"
                continue
            if pool.teams is not None and team.name not in pool.teams:
                yield (
                    loc,
                    f"pool {pool_name!r} is limited to teams {pool.teams}: {team.name!r} cannot reach it",
                )
                continue
            cap = capacity.get(pool_name)
            if cap is None:
                continue
            if cap.decision.mode == "mig":
                if quota.gpus is not None:
                    yield (
                        (*loc, "gpus"),
                        f"pool {pool_name!r} is MIG-sliced: give quota as mig: {{profile: count}}",
                    )
                offered = {r.removeprefix("nvidia.com/mig-") for r in cap.units}
                for profile in quota.mig:
                    if profile not in offered:
                        yield (
                            (*loc, "mig", profile),
                            (
                                f"profile {profile!r} is not in pool {pool_name!r}'s layout; it offers: {', '.join(sorted(offered))}"
                            ),
                        )
            elif quota.mig:
                yield (
                    (*loc, "mig"),
                    f"pool {pool_name!r} is not MIG-sliced ({cap.decision.mode}): give quota as gpus",
                )
            if quota.lendingLimit != UNLIMITED:
                guaranteed = max(nominal(quota, cap).values(), default=0)
                if int(quota.lendingLimit) > guaranteed:
                    yield (
                        (*loc, "lendingLimit"),
                        f"lendingLimit {quota.lendingLimit} exceeds the quota it lends from ({guaranteed})",
                    )


def _guarantees(policy: FleetPolicy, capacity: dict[str, PoolCapacity]) -> Iterator[Finding]:
    for pool_name, cap in capacity.items():
        totals = dict.fromkeys(cap.units, 0)
        for team in policy.teams:
            quota = team.quota.get(pool_name)
            if quota is None:
                continue
            if cap.decision.mode == "mig" and quota.gpus is not None:
                continue  # reported by _teams
            for resource, count in nominal(quota, cap).items():
                totals[resource] = totals.get(resource, 0) + count
        index = next(i for i, p in enumerate(policy.pools) if p.name == pool_name)
        for resource, total in totals.items():
            if total > cap.units.get(resource, 0):
                yield (
                    ("pools", index, "name"),
                    (
                        f"teams are guaranteed {total} {resource} in pool {pool_name!r} but it yields only "
                        f"{cap.units.get(resource, 0)}: lower the quotas or add nodes"
                    ),
                )


def _serving(policy: FleetPolicy, capacity: dict[str, PoolCapacity]) -> Iterator[Finding]:
    serving = policy.serving
    if serving is None:
        return
    pool = policy.pool(serving.pool)
    if pool is None:
        yield ("serving", "pool"), f"unknown pool {serving.pool!r}"
        return
    if pool.role is not Role.SERVING:
        yield (
            ("serving", "pool"),
            (
                f"pool {serving.pool!r} has role {pool.role.value}: the serving pool must be reserved (role: serving) so "
                "training cannot land on it"
            ),
        )
    data_names = {d.name for d in policy.dataClasses}
    cap = capacity.get(serving.pool)
    demand: Counter[str] = Counter()
    for d, dep in enumerate(serving.deployments):
        loc: Loc = ("serving", "deployments", d)
        if (dep.gpusPerReplica is None) == (dep.migProfile is None):
            yield loc, "give exactly one of gpusPerReplica or migProfile"
            continue
        if dep.dataClass is not None and dep.dataClass not in data_names:
            yield (*loc, "dataClass"), f"unknown data class {dep.dataClass!r}"
        if cap is None:
            continue
        if dep.migProfile is not None:
            resource = f"nvidia.com/mig-{dep.migProfile}"
            if resource not in cap.units:
                yield (*loc, "migProfile"), f"pool {serving.pool!r} offers no {dep.migProfile!r} instances"
                continue
            demand[resource] += dep.replicas
        else:
            if cap.decision.mode != "full":
                yield (
                    (*loc, "gpusPerReplica"),
                    f"pool {serving.pool!r} is {cap.decision.mode}-sliced: use migProfile",
                )
                continue
            per_node = pool.gpusPerNode
            if dep.gpusPerReplica is not None and dep.gpusPerReplica > per_node:
                yield (
                    (*loc, "gpusPerReplica"),
                    f"{dep.gpusPerReplica} GPUs per replica exceed a node's {per_node}",
                )
            demand["nvidia.com/gpu"] += dep.replicas * (dep.gpusPerReplica or 0)
    if cap is not None:
        for resource, wanted in demand.items():
            if wanted > cap.units.get(resource, 0):
                yield (
                    ("serving", "deployments"),
                    (
                        f"the deployments need {wanted} {resource} but pool {serving.pool!r} yields {cap.units.get(resource, 0)}"
                    ),
                )


def _preemption(policy: FleetPolicy) -> Iterator[Finding]:
    """Kueue's ClusterQueue rule (CEL and webhook): a queue that never reclaims may not preempt while
    borrowing either (``reclaimWithinCohort: Never`` with ``borrowWithinCohort.policy`` not Never).
    Checked on what each ClusterQueue gets; named where the pair is written (the team's override, or
    ``queueing`` once for every team that inherits both)."""
    q = policy.queueing
    if q.reclaimWithinCohort == "Never" and q.borrowWithinCohort.policy != "Never":
        yield ("queueing", "borrowWithinCohort", "policy"), _pair(q.borrowWithinCohort.policy, "")
    for i, team in enumerate(policy.teams):
        own = team.preemption
        if own is None or (own.reclaimWithinCohort is None and own.borrowWithinCohort is None):
            continue  # follows the fleet: reported above
        got = policy.preemption_of(team)
        if got.reclaimWithinCohort == "Never" and got.borrowWithinCohort.policy != "Never":
            field = ("borrowWithinCohort", "policy") if own.borrowWithinCohort is not None else ("reclaimWithinCohort",)
            yield ("teams", i, "preemption", *field), _pair(got.borrowWithinCohort.policy, f" in team {team.name!r}")


def _pair(borrow: str, where: str) -> str:
    return (
        f"borrowWithinCohort.policy {borrow} needs reclaimWithinCohort other than Never{where} (Kueue refuses "
        "the pair); set reclaimWithinCohort to LowerPriority or Any, or borrowWithinCohort.policy to Never"
    )


def cross_check(policy: FleetPolicy) -> list[Finding]:
    """Every problem that needs more than one field (or the catalogue) to see."""
    findings: list[Finding] = []
    findings += _duplicates("pools", (p.name for p in policy.pools))
    findings += _duplicates("teams", (t.name for t in policy.teams))
    findings += _duplicates("priorityClasses", (p.name for p in policy.priorityClasses))
    findings += _duplicates("dataClasses", (d.name for d in policy.dataClasses))
    capacity: dict[str, PoolCapacity] = {}
    findings += _pools(policy, capacity)
    findings += _teams(policy, capacity)
    findings += _guarantees(policy, capacity)
    findings += _serving(policy, capacity)
    findings += _preemption(policy)
    findings += dra.findings(policy, capacity)
    findings += residency_check(policy)
    return findings
