"""Kueue objects for hand-worked twin tests: one flavor ``gpu``, one namespace ``team``, and
ClusterQueues of GPUs, each with a LocalQueue of its own name, as a stream of real YAML documents.

Written as YAML on purpose: these tests go through ``parse_cluster`` as the CLI's input does.
(``trees.py`` builds specs directly, for tests about the arithmetic of cohort trees.)
"""

from __future__ import annotations

from gpufleet.twin import Twin, parse_cluster
from gpufleet.twin.apis.specs import PodSetSpec, WorkloadSpec

GPU = "nvidia.com/gpu"

BASE = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: gpu}
---
apiVersion: v1
kind: Namespace
metadata: {name: team}
"""

FAIR_SHARING = """
---
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
fairSharing: {}
"""


def queue(
    name: str,
    nominal: int,
    *,
    cohort: str | None = None,
    preemption: str = "{withinClusterQueue: Never}",
    strategy: str | None = None,
) -> str:
    """A ClusterQueue of ``nominal`` GPUs (``preemption`` as YAML flow text) and its LocalQueue."""
    extra = (f"  cohortName: {cohort}\n" if cohort else "") + (f"  queueingStrategy: {strategy}\n" if strategy else "")
    return f"""
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: {name}}}
spec:
{extra}  namespaceSelector: {{}}
  preemption: {preemption}
  resourceGroups:
  - coveredResources: [{GPU}]
    flavors:
    - name: gpu
      resources:
      - {{name: {GPU}, nominalQuota: '{nominal}'}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{namespace: team, name: {name}}}
spec: {{clusterQueue: {name}}}
"""


def cluster(*queues: str, fair_sharing: bool = False) -> str:
    """The whole stream: the flavor, the namespace, optionally fair sharing, then ``queues``."""
    return BASE + (FAIR_SHARING if fair_sharing else "") + "".join(queues)


def twin(*queues: str, fair_sharing: bool = False, **options: bool) -> Twin:
    """A twin over ``cluster(*queues)``; ``options`` are ``Twin``'s keyword switches."""
    return Twin(parse_cluster([("cluster.yaml", cluster(*queues, fair_sharing=fair_sharing))]), **options)


def workload(
    name: str,
    queue: str,
    gpus: int,
    created: int,
    *,
    priority: int = 0,
    pods: int = 1,
    uid: str | None = None,
) -> WorkloadSpec:
    """``pods`` pods of ``gpus`` GPUs each in namespace ``team``; the UID is the name unless given."""
    pod_sets = (PodSetSpec("main", pods, ((GPU, gpus),)),)
    return WorkloadSpec("team", name, queue, pod_sets, priority=priority, created=created, uid=uid or name)
