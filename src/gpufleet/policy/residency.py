"""Residency zones: which worker clusters each data class's work may run on, and every contradiction.

A data class names the clusters (or the regions) where its work may run; data classes that share a
``zone`` name must agree on them. Each zone becomes one MultiKueueConfig listing exactly its clusters,
so a Job of the class can only ever be dispatched there. A policy without ``clusters:`` has no zones
and is checked as before, except that naming a cluster in it is a mistake.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from gpufleet.policy.fleet import Fleet
from gpufleet.policy.model import DataClass, FleetPolicy

Loc = tuple[str | int, ...]
Finding = tuple[Loc, str]
# Kueue's MultiKueueConfig.spec.clusters: MinItems=1, MaxItems=20 (apis/kueue/v1beta2/multikueue_types.go).
MAX_CLUSTERS_PER_CONFIG = 20
# The zone queue's name is a label value on every Job (kueue.x-k8s.io/queue-name): 63 characters at most.
MAX_QUEUE_NAME = 63


@dataclass(frozen=True)
class Zone:
    """One residency zone: the clusters its data classes' work may run on, in the policy's cluster order
    (the order the Incremental dispatcher nominates them in)."""

    name: str
    clusters: tuple[str, ...]
    data_classes: tuple[str, ...]


def allowed_clusters(policy: FleetPolicy, data_class: DataClass) -> tuple[str, ...]:
    """The declared clusters ``data_class`` may run on, by name or by region, in policy order."""
    named, regions = set(data_class.clusters), set(data_class.regions)
    return tuple(c.name for c in policy.clusters if c.name in named or c.region in regions)


def zone_name(data_class: DataClass) -> str:
    return data_class.zone or data_class.name


def zones(policy: FleetPolicy) -> list[Zone]:
    """The policy's residency zones, in the order their first data class is listed (none without clusters)."""
    if not policy.clusters:
        return []
    found: dict[str, Zone] = {}
    for dc in policy.dataClasses:
        name = zone_name(dc)
        if name in found:
            zone = found[name]
            found[name] = Zone(name, zone.clusters, (*zone.data_classes, dc.name))
        else:
            found[name] = Zone(name, allowed_clusters(policy, dc), (dc.name,))
    return list(found.values())


def zone_of(policy: FleetPolicy, data_class: str) -> Zone | None:
    return next((z for z in zones(policy) if data_class in z.data_classes), None)


def team_zones(policy: FleetPolicy, team: str) -> list[Zone]:
    """The zones a team's data classes fall in: one ClusterQueue and LocalQueue each on the manager."""
    own = policy.team(team)
    classes = set(own.dataClasses) if own else set()
    return [z for z in zones(policy) if classes & set(z.data_classes)]


def queue_name(team: str, zone: str) -> str:
    """The LocalQueue (and the manager's ClusterQueue) a team's Jobs of ``zone`` go to."""
    return f"{team}-{zone}"


def cluster_of(policy: FleetPolicy, pool: str) -> str | None:
    found = policy.pool(pool)
    return found.cluster if found else None


def _single_cluster(policy: FleetPolicy) -> Iterator[Finding]:
    """Without ``clusters:`` nothing may name a cluster: it would silently be ignored."""
    for i, pool in enumerate(policy.pools):
        if pool.cluster is not None:
            yield (
                ("pools", i, "cluster"),
                f"pool {pool.name!r} names cluster {pool.cluster!r} but the policy declares no clusters",
            )
    for d, dc in enumerate(policy.dataClasses):
        for field in ("clusters", "regions", "zone"):
            if getattr(dc, field):
                yield (
                    ("dataClasses", d, field),
                    f"data class {dc.name!r} sets {field} but the policy declares no clusters",
                )


def _clusters(policy: FleetPolicy) -> Iterator[Finding]:
    names: Counter[str] = Counter()
    secrets: dict[str, str] = {}
    used = {p.cluster for p in policy.pools}
    for i, cluster in enumerate(policy.clusters):
        names[cluster.name] += 1
        if names[cluster.name] == 2:
            yield ("clusters", i, "name"), f"duplicate name {cluster.name!r}: each must be unique"
        if cluster.kubeconfigSecret in secrets and secrets[cluster.kubeconfigSecret] != cluster.name:
            yield (
                ("clusters", i, "kubeconfigSecret"),
                f"Secret {cluster.kubeconfigSecret!r} is already cluster {secrets[cluster.kubeconfigSecret]!r}'s: "
                "each worker needs its own kubeconfig",
            )
        secrets.setdefault(cluster.kubeconfigSecret, cluster.name)
        if cluster.name not in used:
            yield ("clusters", i, "name"), f"cluster {cluster.name!r} holds no pool: give it a pool or remove it"


def _dispatch(policy: FleetPolicy) -> Iterator[Finding]:
    """Kueue reads ``incrementalDispatcherConfig`` only for the Incremental dispatcher: elsewhere it is ignored."""
    if policy.multiKueue.stepSize is not None and policy.multiKueue.dispatcher != "Incremental":
        yield (
            ("multiKueue", "stepSize"),
            f"stepSize applies to the Incremental dispatcher only; dispatcher is {policy.multiKueue.dispatcher}",
        )


def _pools(policy: FleetPolicy) -> Iterator[Finding]:
    declared = {c.name: c for c in policy.clusters}
    for i, pool in enumerate(policy.pools):
        if pool.cluster is None:
            yield (
                ("pools", i),
                f"pool {pool.name!r} names no cluster; with clusters: every pool is in one "
                f"(declared: {', '.join(declared)})",
            )
            continue
        cluster = declared.get(pool.cluster)
        if cluster is None:
            yield (
                ("pools", i, "cluster"),
                f"pool {pool.name!r} is in cluster {pool.cluster!r}, which the policy does not declare "
                f"(declared: {', '.join(declared)})",
            )
        elif pool.region is not None and pool.region != cluster.region:
            yield (
                ("pools", i, "region"),
                f"pool {pool.name!r} says region {pool.region!r} but its cluster {cluster.name!r} is in {cluster.region!r}",
            )


def _data_classes(policy: FleetPolicy) -> Iterator[Finding]:
    declared = {c.name for c in policy.clusters}
    regions = {c.region for c in policy.clusters}
    first: dict[str, tuple[str, tuple[str, ...]]] = {}
    for d, dc in enumerate(policy.dataClasses):
        for n, name in enumerate(dc.clusters):
            if name not in declared:
                yield (
                    ("dataClasses", d, "clusters", n),
                    f"unknown cluster {name!r}; declared: {', '.join(sorted(declared))}",
                )
        for n, region in enumerate(dc.regions):
            if region not in regions:
                yield (
                    ("dataClasses", d, "regions", n),
                    f"no declared cluster is in region {region!r}; regions: {', '.join(sorted(regions))}",
                )
        allowed = allowed_clusters(policy, dc)
        if not allowed:
            yield (
                ("dataClasses", d),
                f"data class {dc.name!r} has no cluster where its work may run: give clusters or regions",
            )
            continue
        if len(allowed) > MAX_CLUSTERS_PER_CONFIG:
            yield (
                ("dataClasses", d),
                f"data class {dc.name!r} allows {len(allowed)} clusters; a MultiKueueConfig lists at most "
                f"{MAX_CLUSTERS_PER_CONFIG}: split it into zones",
            )
        zone = zone_name(dc)
        if zone in first and first[zone][1] != allowed:
            other, theirs = first[zone]
            extra = sorted(set(allowed) ^ set(theirs))
            yield (
                ("dataClasses", d, "zone" if dc.zone else "name"),
                f"zone {zone!r} would list cluster(s) {', '.join(extra)} for one of data classes {other!r} and "
                f"{dc.name!r}, whose residency forbids them: data classes of one zone must allow the same clusters",
            )
        first.setdefault(zone, (dc.name, allowed))


def _teams(policy: FleetPolicy) -> Iterator[Finding]:
    allowed = {dc.name: set(allowed_clusters(policy, dc)) for dc in policy.dataClasses}
    for t, team in enumerate(policy.teams):
        if not team.dataClasses:
            yield (
                ("teams", t, "dataClasses"),
                f"team {team.name!r} has no data class, so no residency zone to dispatch its jobs to",
            )
            continue
        reach = set().union(*(allowed.get(dc, set()) for dc in team.dataClasses))
        for pool_name in team.quota:
            cluster = cluster_of(policy, pool_name)
            if cluster is not None and cluster not in reach:
                yield (
                    ("teams", t, "quota", pool_name),
                    f"pool {pool_name!r} is in cluster {cluster!r}, where none of team {team.name!r}'s data classes "
                    f"({', '.join(team.dataClasses)}) may run",
                )
        for zone in team_zones(policy, team.name):
            name = queue_name(team.name, zone.name)
            if len(name) > MAX_QUEUE_NAME:
                yield (
                    ("teams", t, "name"),
                    f"queue {name!r} (team-zone) is {len(name)} characters; a queue name is a label value "
                    f"of at most {MAX_QUEUE_NAME}: shorten the team or the zone name",
                )


def residency_check(policy: FleetPolicy) -> list[Finding]:
    """Every contradiction between clusters, pools, data classes and team quotas."""
    if not policy.clusters:
        return list(_single_cluster(policy))
    return [*_clusters(policy), *_dispatch(policy), *_pools(policy), *_data_classes(policy), *_teams(policy)]


@dataclass(frozen=True)
class ClusterPlan:
    """One worker as ``plan`` shows it: its pools, what they yield, and the zones that may use it."""

    name: str
    provider: str
    region: str
    kubeconfig_secret: str
    pools: list[str]
    units: dict[str, int]  # resource -> units over the cluster's pools (serving included)
    zones: list[str]


@dataclass(frozen=True)
class ZonePlan:
    """One residency zone: its clusters (one MultiKueueConfig) and the team queues that dispatch to it."""

    name: str
    clusters: list[str]
    data_classes: list[str]
    queues: list[str]  # team-zone LocalQueue names, in team order


def cluster_plans(fleet: Fleet) -> list[ClusterPlan]:
    policy = fleet.policy
    all_zones = zones(policy)
    out = []
    for c in policy.clusters:
        units: dict[str, int] = {}
        pools = [p for p in fleet.pools.values() if p.pool.cluster == c.name]
        for cap in pools:
            for resource, n in cap.units.items():
                units[resource] = units.get(resource, 0) + n
        in_zones = [z.name for z in all_zones if c.name in z.clusters]
        out.append(
            ClusterPlan(
                c.name, c.provider.value, c.region, c.kubeconfigSecret, [p.name for p in pools], units, in_zones
            )
        )
    return out


def zone_plans(fleet: Fleet) -> list[ZonePlan]:
    policy = fleet.policy
    return [
        ZonePlan(
            z.name,
            list(z.clusters),
            list(z.data_classes),
            [queue_name(t.name, z.name) for t in policy.teams if z in team_zones(policy, t.name)],
        )
        for z in zones(policy)
    ]


def project(policy: FleetPolicy, keep: set[str]) -> FleetPolicy:
    """The one-cluster policy of the clusters in ``keep``: their pools, the teams' quotas on them, the
    serving deployment if its pool is among them. The renderer and the testbed treat it as any policy
    without ``clusters:``, which is what a worker (or one zone's share of the manager) is."""
    pools = [p.model_copy(update={"cluster": None}) for p in policy.pools if p.cluster in keep]
    kept = {p.name for p in pools}
    teams = [t.model_copy(update={"quota": {k: v for k, v in t.quota.items() if k in kept}}) for t in policy.teams]
    classes = [dc.model_copy(update={"clusters": [], "regions": [], "zone": None}) for dc in policy.dataClasses]
    serving = policy.serving if policy.serving is not None and policy.serving.pool in kept else None
    return policy.model_copy(
        update={"pools": pools, "teams": teams, "dataClasses": classes, "serving": serving, "clusters": []}
    )
