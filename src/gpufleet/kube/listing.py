"""The read-only listing behind ``gpufleet scan``: list calls only; failures are user errors."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
from lightkube import ApiError, Client
from lightkube.generic_resource import create_global_resource, create_namespaced_resource
from lightkube.resources.batch_v1 import Job
from lightkube.resources.core_v1 import Namespace, Node, Pod

from gpufleet.errors import InputError
from gpufleet.kube.connection import (
    HTTP_FORBIDDEN,
    HTTP_NOT_FOUND,
    _as_dict,
    sync_client,
)

KUEUE_KINDS = {
    "ResourceFlavor": ("resourceflavors", False),
    "Cohort": ("cohorts", False),
    "ClusterQueue": ("clusterqueues", False),
    "WorkloadPriorityClass": ("workloadpriorityclasses", False),
    "LocalQueue": ("localqueues", True),
    "Workload": ("workloads", True),
}


@dataclass(frozen=True)
class ClusterListing:
    """What a scan reads, as plain dicts; ``kueue_installed`` is False where the API is not served."""

    nodes: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    jobs: list[dict[str, Any]]
    namespaces: list[dict[str, Any]]
    kueue_installed: bool
    kueue: dict[str, list[dict[str, Any]]]
    resource_slices: list[dict[str, Any]] = field(default_factory=list)  # DRA; empty where not served


def _resource_slices(api: Client) -> list[dict[str, Any]]:
    """The cluster's ResourceSlices (DRA drivers' devices); none where resource.k8s.io/v1 is not served."""
    try:
        res = create_global_resource("resource.k8s.io", "v1", "ResourceSlice", "resourceslices")
        return [_as_dict(o) for o in api.list(res)]
    except ApiError as exc:
        if exc.status.code in (HTTP_NOT_FOUND, HTTP_FORBIDDEN):
            return []
        raise


def list_cluster(kubeconfig: Path | None = None) -> ClusterListing:
    """List nodes, pods, jobs, namespaces and Kueue's objects (list calls only); failures are user errors."""
    api = sync_client(kubeconfig)
    try:
        kueue: dict[str, list[dict[str, Any]]] = {}
        installed = True
        for kind, (plural, namespaced) in KUEUE_KINDS.items():
            try:
                if namespaced:
                    listed: Any = api.list(
                        create_namespaced_resource("kueue.x-k8s.io", "v1beta2", kind, plural), namespace="*"
                    )
                else:
                    listed = api.list(create_global_resource("kueue.x-k8s.io", "v1beta2", kind, plural))
                kueue[kind] = [_as_dict(o) for o in listed]
            except ApiError as exc:
                if exc.status.code != HTTP_NOT_FOUND:
                    raise
                installed = installed and kind != "ClusterQueue"
                kueue[kind] = []
        return ClusterListing(
            nodes=[_as_dict(o) for o in api.list(Node)],
            pods=[_as_dict(o) for o in api.list(Pod, namespace="*")],
            jobs=[_as_dict(o) for o in api.list(Job, namespace="*")],
            namespaces=[_as_dict(o) for o in api.list(Namespace)],
            kueue_installed=installed,
            kueue=kueue,
            resource_slices=_resource_slices(api),
        )
    except ApiError as exc:
        raise InputError.one(f"the API server refused the listing: {exc.status.message}") from None
    except httpx2.HTTPError as exc:
        raise InputError.one(f"cannot reach the API server: {exc}") from None
