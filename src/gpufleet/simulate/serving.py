"""Serving as the simulator runs it: the policy's vLLM Deployments on their reserved pool, each a pod
template the demand curve scales (``Simulation.scale``). Apart from the loop because the serving pool
is the policy's, read once, while the loop only counts replicas."""

from __future__ import annotations

from dataclasses import dataclass

from gpufleet.placement import PodSpec, Toleration
from gpufleet.policy import Fleet
from gpufleet.render.common import tolerations_for

SERVING = "serving"  # the team name serving replicas are counted under


@dataclass(frozen=True)
class Deployment:
    name: str
    replicas: int  # the policy's count: the peak of the day
    template: PodSpec


def deployments(fleet: Fleet) -> list[Deployment]:
    """Each Deployment's replica template, pinned to the serving pool's nodes and tolerating its taints,
    as the rendered Deployment's pods are."""
    serving = fleet.policy.serving
    if serving is None:
        return []
    pool = fleet.pools[serving.pool].pool
    tolerations = tuple(Toleration(t["key"], t["value"]) for t in tolerations_for(pool))
    out = []
    for dep in serving.deployments:
        template = PodSpec(
            name="",
            gpus=1 if dep.migProfile else dep.gpusPerReplica or 1,
            mig_profile=dep.migProfile or "",
            node_selector=tuple(sorted(pool.selector.items())),
            tolerations=tolerations,
        )
        out.append(Deployment(dep.name, dep.replicas, template))
    return out
