"""List what a scan needs from a live cluster into a ``Snapshot`` (read-only: list calls only).

This is the scan's only Kubernetes client code. It belongs in the ``gpufleet.kube`` adapter, which
is the one module meant to import lightkube; it lives here until that adapter lands and will move
there unchanged. Kueue's objects are listed as generic resources at ``kueue.x-k8s.io/v1beta2``; a
cluster that does not serve that API has no Kueue (``Snapshot.kueue_installed`` is False).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
from lightkube import ApiError, Client, ConfigError, KubeConfig
from lightkube.generic_resource import create_global_resource, create_namespaced_resource
from lightkube.resources.batch_v1 import Job
from lightkube.resources.core_v1 import Namespace, Node, Pod

from gpufleet.errors import InputError
from gpufleet.scan.snapshot import Obj, Snapshot

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"
_GLOBAL = {
    "ResourceFlavor": "resourceflavors",
    "Cohort": "cohorts",
    "ClusterQueue": "clusterqueues",
    "WorkloadPriorityClass": "workloadpriorityclasses",
}
_NAMESPACED = {"LocalQueue": "localqueues", "Workload": "workloads"}
HTTP_NOT_FOUND = 404


def _kueue_resources() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind, plural in _GLOBAL.items():
        out[kind] = create_global_resource(KUEUE_GROUP, KUEUE_VERSION, kind, plural)
    for kind, plural in _NAMESPACED.items():
        out[kind] = create_namespaced_resource(KUEUE_GROUP, KUEUE_VERSION, kind, plural)
    return out


def client_for(kubeconfig: Path | None) -> Client:
    """A client from ``kubeconfig``, else from $KUBECONFIG / ~/.kube/config / the in-cluster account."""
    try:
        config = KubeConfig.from_file(kubeconfig) if kubeconfig else KubeConfig.from_env()
    except (ConfigError, OSError) as exc:
        raise InputError.one(f"cannot load a kubeconfig: {exc}", file=str(kubeconfig or "")) from None
    return Client(config=config, field_manager="gpufleet")


def _dicts(items: Any) -> list[Obj]:
    return [item.to_dict() for item in items]


def fetch(kubeconfig: Path | None = None) -> Snapshot:
    """List nodes, pods, jobs, namespaces and Kueue's objects; a connection failure is a user error."""
    client = client_for(kubeconfig)
    try:
        nodes = _dicts(client.list(Node))
        pods = _dicts(client.list(Pod, namespace="*"))
        jobs = _dicts(client.list(Job, namespace="*"))
        namespaces = _dicts(client.list(Namespace))
        kueue: dict[str, list[Obj]] = {}
        installed = True
        for kind, resource in _kueue_resources().items():
            try:
                listed = client.list(resource, namespace="*") if kind in _NAMESPACED else client.list(resource)
                kueue[kind] = _dicts(listed)
            except ApiError as exc:
                if exc.status.code != HTTP_NOT_FOUND:
                    raise
                if kind == "ClusterQueue":
                    installed = False
                kueue[kind] = []
    except ApiError as exc:
        raise InputError.one(f"the API server refused the listing: {exc.status.message}") from None
    except httpx2.HTTPError as exc:
        raise InputError.one(f"cannot reach the API server: {exc}") from None
    return Snapshot(nodes=nodes, pods=pods, jobs=jobs, namespaces=namespaces, kueue_installed=installed, kueue=kueue)
