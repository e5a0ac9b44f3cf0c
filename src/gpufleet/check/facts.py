"""What the admission rules need to know about a fleet, resolved once from the policy.

The Python rules, the CEL compiled into the ValidatingAdmissionPolicy and the webhook all read these
facts, so the three enforcers cannot drift apart: a change to the policy changes all of them at once.
The texts that messages quote (allowed values, what each pool offers) are built here too, because the
CEL ``messageExpression`` embeds them as literals and the Python rules must print the same words.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpufleet.policy.capacity import PoolCapacity
from gpufleet.policy.dra import ClaimUnit, claim_units, team_units
from gpufleet.policy.fleet import Fleet

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
GPU_PREFIX = "nvidia.com/"
#: A claim made from gpufleet's ResourceClaimTemplate T counts against a pool's ``CLAIM_PREFIX + T`` units:
#: the template names the GPU model and unit, which the quota resource alone does not (render.dra).
CLAIM_PREFIX = "ResourceClaimTemplate/"
# Kubernetes' own system namespaces and Kueue's, never governed (the webhook must not lock them out).
SYSTEM_NAMESPACES = ("kube-system", "kueue-system")


@dataclass(frozen=True)
class PoolOffer:
    """A queued pool as one team sees it: the node labels that select it and its units per node."""

    name: str
    selector: dict[str, str]
    per_node: dict[str, int]  # resource name -> units on one node


@dataclass(frozen=True)
class TeamFacts:
    name: str
    namespaces: tuple[str, ...]
    data_classes: tuple[str, ...]
    priority_classes: tuple[str, ...]
    pools: tuple[PoolOffer, ...]  # the queued pools the team can reach, in policy order
    default_priority: str | None  # the lowest-valued class the team may use: what the webhook fills in

    @property
    def offers_text(self) -> str:
        """Each resource the team can get, with the most one node offers (for GPU messages)."""
        best: dict[str, int] = {}
        for pool in self.pools:
            for resource, n in pool.per_node.items():
                best[resource] = max(best.get(resource, 0), n)
        return ", ".join(f"{r} (up to {n} per node)" for r, n in sorted(best.items())) or "none"


@dataclass(frozen=True)
class ServingFacts:
    namespace: str
    pool: str
    priority_class: str
    taints: tuple[tuple[str, str, str], ...]  # (key, value, effect) of the serving pool's taints
    selector: dict[str, str]
    nodes: tuple[str, ...]

    @property
    def taint_text(self) -> str:
        key, value, effect = self.taints[0]
        return f"{key}={value}:{effect}"

    @property
    def selector_text(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in sorted(self.selector.items()))


@dataclass(frozen=True)
class AdmissionFacts:
    team_label: str
    model_label: str
    data_class_label: str
    checkpoint_annotation: str
    teams: tuple[TeamFacts, ...]
    checkpoint_locations: dict[str, tuple[str, ...]]  # data class -> allowed location prefixes
    serving: ServingFacts | None
    gpu_resources: tuple[str, ...]  # every GPU resource any pool yields, sorted
    # every CLAIM_PREFIX + template gpufleet renders (DRA pools), sorted; empty when DRA is off
    claim_resources: tuple[str, ...] = ()

    def team_of(self, namespace: str) -> TeamFacts | None:
        return next((t for t in self.teams if namespace in t.namespaces), None)

    @property
    def team_namespaces(self) -> tuple[str, ...]:
        return tuple(ns for t in self.teams for ns in t.namespaces)


def join_or_none(values: tuple[str, ...] | list[str]) -> str:
    return ", ".join(values) if values else "none"


def _offer(cap: PoolCapacity, claims: list[ClaimUnit]) -> PoolOffer:
    """The pool's units per node: its extended resources, and on a DRA pool each claim template's units."""
    per_node = {r: cap.units_per_node(r) for r in sorted(cap.units)}
    per_node |= {CLAIM_PREFIX + u.template: u.per_node for u in claims if u.pool == cap.name}
    return PoolOffer(name=cap.name, selector=dict(cap.pool.selector), per_node=per_node)


def _default_priority(names: list[str], values: dict[str, int]) -> str | None:
    """The least urgent class a team may use (ties by name), so a forgotten label never jumps the queue."""
    known = [n for n in names if n in values]
    return min(known, key=lambda n: (values[n], n)) if known else None


def admission_facts(fleet: Fleet) -> AdmissionFacts:
    """Resolve the policy into the facts every enforcer shares."""
    policy = fleet.policy
    values = {pc.name: pc.value for pc in policy.priorityClasses}
    labels = policy.cluster.labels
    claims = claim_units(fleet)
    teams = tuple(
        TeamFacts(
            name=t.name,
            namespaces=tuple(t.namespaces),
            data_classes=tuple(t.dataClasses),
            priority_classes=tuple(t.priorityClasses),
            pools=tuple(
                _offer(c, team_units(fleet, t)) for c in fleet.queued_pools() if fleet.reachable(t.name, c.pool)
            ),
            default_priority=_default_priority(t.priorityClasses, values),
        )
        for t in policy.teams
    )
    serving = None
    if policy.serving is not None:
        cap = fleet.pools[policy.serving.pool]
        # the same taints the renderer puts on the pool's nodes (render.common.pool_taints)
        taints = (("gpufleet.io/pool", cap.name, "NoSchedule"), *((t.key, t.value, t.effect) for t in cap.pool.taints))
        serving = ServingFacts(
            namespace=policy.serving.namespace,
            pool=cap.name,
            priority_class=policy.serving.priorityClass,
            taints=taints,
            selector=dict(cap.pool.selector),
            nodes=cap.pool.node_names,
        )
    return AdmissionFacts(
        team_label=labels.team,
        model_label=labels.model,
        data_class_label=labels.dataClass,
        checkpoint_annotation=policy.cluster.checkpointAnnotation,
        teams=teams,
        checkpoint_locations={d.name: tuple(d.checkpointLocations) for d in policy.dataClasses},
        serving=serving,
        gpu_resources=tuple(sorted({r for c in fleet.pools.values() for r in c.units})),
        claim_resources=tuple(sorted({CLAIM_PREFIX + u.template for u in claims})),
    )
