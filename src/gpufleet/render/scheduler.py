"""kube-scheduler's node scoring (``kubescheduler.config.k8s.io/v1``): the policy's
``scheduling.nodeScoring`` as a KubeSchedulerConfiguration profile.

kube-scheduler's NodeResourcesFit plugin scores a node by how much of it a pod would leave in use:
LeastAllocated (its default) spreads pods, so a gang of whole-node pods can find every node part
full; MostAllocated packs them, so whole nodes stay free. LeastAllocated renders nothing: the
cluster runs kube-scheduler's defaults, which score cpu and memory only (``defaultResourceSpec``)
and add NodeResourcesBalancedAllocation, and that is what the simulator models for it
(``placement.scoring``). MostAllocated renders a profile for the scheduler's ``--config`` file, not an
API object, so kustomize never applies it and ``render --check`` does not validate it; the profile
sets only NodeResourcesFit's arguments, so BalancedAllocation stays on beside it, as the simulator
models too. The testbed starts its kube-scheduler with exactly this file (``testbed.scheduler``).
"""

from __future__ import annotations

from gpufleet.policy.fleet import Fleet
from gpufleet.render.common import Obj

API = "kubescheduler.config.k8s.io/v1"
DEFAULT_SCHEDULER = "default-scheduler"
# Weight 1 each, the GPU resources and cpu and memory: the scoring the simulator models
# (gpufleet.placement.scoring), so the cluster packs as the simulated runs did. kube-scheduler takes
# a resource the node lacks, or an extended one the pod does not ask for, out of the mean, so a MIG
# profile scores only for the pods asking for it, on the nodes that offer it.
WEIGHT = 1

HEADER = """kube-scheduler's node scoring the policy asks for (scheduling.nodeScoring: MostAllocated). This is not
an API object and not in kustomization.yaml: it is the file kube-scheduler reads with --config (merge the
profile into the one your scheduler runs, or run a second scheduler with it and schedulerName changed).
See docs/policy.md."""


def gpu_resources(fleet: Fleet) -> list[str]:
    """Every extended resource the fleet's pools yield (full cards, MIG profiles, shared cards), sorted."""
    return sorted({r for p in fleet.pools.values() for r in p.units})


def scheduler_configuration(fleet: Fleet) -> list[Obj]:
    """The profile that packs nodes, or nothing when the policy keeps kube-scheduler's default."""
    scoring = fleet.policy.scheduling.nodeScoring
    if scoring == "LeastAllocated":
        return []
    resources = [{"name": r, "weight": WEIGHT} for r in [*gpu_resources(fleet), "cpu", "memory"]]
    fit = {"scoringStrategy": {"type": scoring, "resources": resources}}
    return [
        {
            "apiVersion": API,
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {"schedulerName": DEFAULT_SCHEDULER, "pluginConfig": [{"name": "NodeResourcesFit", "args": fit}]}
            ],
        }
    ]
