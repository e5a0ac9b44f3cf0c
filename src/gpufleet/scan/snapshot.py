"""What a scan reads from a cluster: plain API objects (dicts, as the API server serialises them).

The analysis works on this value only, so it runs the same on a live listing, on a saved
``kubectl get -o json`` and in tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]
KUEUE_KINDS = ("ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass", "Workload")


@dataclass(frozen=True)
class Snapshot:
    nodes: list[Obj]
    pods: list[Obj]
    jobs: list[Obj] = field(default_factory=list)
    namespaces: list[Obj] = field(default_factory=list)
    kueue_installed: bool = False
    kueue: dict[str, list[Obj]] = field(default_factory=dict)  # kind -> objects
    resource_slices: list[Obj] = field(default_factory=list)  # resource.k8s.io/v1 ResourceSlices (DRA)

    def kueue_objects(self, kind: str) -> list[Obj]:
        return self.kueue.get(kind, [])


def labels(o: Obj) -> dict[str, str]:
    return dict(o.get("metadata", {}).get("labels") or {})


def name(o: Obj) -> str:
    return str(o.get("metadata", {}).get("name", ""))


def namespace(o: Obj) -> str:
    return str(o.get("metadata", {}).get("namespace", ""))
