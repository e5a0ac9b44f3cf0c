"""Small GPU clusters written as Kueue objects, for the clock tests (test_clocks.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CQ:
    name: str
    nominal: int
    reclaim: str = "Never"
    within: str = "Never"
    borrowing: int | None = None
    cohort: str | None = "all"


@dataclass(frozen=True)
class WL:
    name: str
    queue: str
    gpus: int
    created: int  # seconds after 2025-01-01T00:00:00Z
    admitted: bool = False
    priority: int = 0


def _time(seconds: int) -> str:
    return f"2025-01-01T00:{seconds // 60:02}:{seconds % 60:02}Z"


def cluster(queues: list[CQ], workloads: list[WL], *, fair: bool = True, parents: dict[str, str] | None = None) -> str:
    """The YAML stream ``gpufleet twin step`` reads: one flavor, one namespace, GPU quota only;
    ``parents`` names the Cohort objects of a tree (child to parent)."""
    docs = [
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: gpu}",
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: ns}",
    ]
    for child, parent in (parents or {}).items():
        docs.append(
            f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {{name: {child}}}\nspec: {{parentName: {parent}}}"
        )
    if fair:
        docs.append("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nfairSharing: {}")
    for q in queues:
        limit = "" if q.borrowing is None else f", borrowingLimit: '{q.borrowing}'"
        cohort = f"  cohortName: {q.cohort}\n" if q.cohort else ""
        docs.append(
            f"""apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: {q.name}}}
spec:
{cohort}  namespaceSelector: {{}}
  preemption: {{withinClusterQueue: {q.within}, reclaimWithinCohort: {q.reclaim}}}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: gpu
      resources:
      - {{name: nvidia.com/gpu, nominalQuota: '{q.nominal}'{limit}}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{namespace: ns, name: {q.name}}}
spec: {{clusterQueue: {q.name}}}"""
        )
    for w in workloads:
        status = ""
        if w.admitted:
            status = f"""
status:
  admission:
    clusterQueue: {w.queue}
    podSetAssignments:
    - {{name: main, count: 1, flavors: {{nvidia.com/gpu: gpu}}}}
  conditions:
  - {{type: QuotaReserved, status: 'True', reason: QuotaReserved, lastTransitionTime: '{_time(w.created)}'}}"""
        docs.append(
            f"""apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {{namespace: ns, name: {w.name}, uid: uid-{w.name}, creationTimestamp: '{_time(w.created)}'}}
spec:
  queueName: {w.queue}
  priority: {w.priority}
  podSets:
  - name: main
    count: 1
    template:
      spec:
        containers:
        - name: c
          resources:
            requests: {{nvidia.com/gpu: '{w.gpus}'}}{status}"""
        )
    return "\n---\n".join(docs)
