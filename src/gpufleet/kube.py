"""The one adapter to the Kubernetes API (lightkube): list, watch, a Lease for leader election, and the
read-only listing behind ``gpufleet scan``.

No business logic lives here: callers get plain dicts and resourceVersions, and decide what they
mean. Two lightkube gaps are filled here so no other module needs lightkube's internals:
the watch request asks for BOOKMARK events (``allowWatchBookmarks``), which lightkube's public
``watch`` does not expose, and a 410 Gone or a dropped connection is raised to the caller instead of
being retried silently, because the caller must relist (410) or back off (dropped) itself.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2
from lightkube import ApiError, AsyncClient, Client, ConfigError, KubeConfig
from lightkube.core.generic_client import ALL_NS
from lightkube.generic_resource import create_global_resource, create_namespaced_resource
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.batch_v1 import Job
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Namespace, Node, Pod
from lightkube.types import on_error_raise

from gpufleet.errors import InputError

Workload = create_namespaced_resource("kueue.x-k8s.io", "v1beta2", "Workload", "workloads")

#: The kinds the recorder reads, by plural name. All are generic (plain dicts inside): lightkube's
#: typed models refuse the API server's BOOKMARK objects, which are a kind's empty object with its
#: required lists as null (a Job's ``spec.template.spec.containers``: found on the testbed), and the
#: recorder turns every object back into a dict anyway.
RESOURCES: dict[str, Any] = {
    "workloads": Workload,
    "jobs": create_namespaced_resource("batch", "v1", "Job", "jobs"),
    "pods": create_namespaced_resource("", "v1", "Pod", "pods"),
    "nodes": create_global_resource("", "v1", "Node", "nodes"),
}
NAMESPACED = frozenset({"workloads", "jobs", "pods"})


class Gone(Exception):
    """410 Gone: the resourceVersion is older than the server keeps; relist."""


class ConnectionLost(Exception):
    """The watch stream broke (network, server restart); reconnect after a backoff."""


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED or BOOKMARK
    object: dict[str, Any]
    resource_version: str


def client(kubeconfig: str | None = None, *, in_cluster: bool = False) -> AsyncClient:
    """An async client from a kubeconfig file, the in-cluster service account, or the environment."""
    if in_cluster:
        config = KubeConfig.from_service_account()
    elif kubeconfig:
        config = KubeConfig.from_file(kubeconfig)
    else:
        config = KubeConfig.from_env()
    return AsyncClient(config, timeout=httpx2.Timeout(30.0), field_manager="gpufleet-recorder")


def _status_code(exc: httpx2.HTTPStatusError) -> int:
    """The HTTP status of a failed call (lightkube wraps it in ApiError only for exact JSON replies)."""
    if isinstance(exc, ApiError) and exc.status is not None and exc.status.code:
        return int(exc.status.code)
    return int(exc.response.status_code)


def _as_dict(obj: Any) -> dict[str, Any]:
    data: dict[str, Any] = obj.to_dict()
    return data


async def list_objects(api: AsyncClient, plural: str) -> tuple[list[dict[str, Any]], str]:
    """Every object of a kind (all namespaces) and the list's resourceVersion."""
    res = RESOURCES[plural]
    try:
        if plural in NAMESPACED:
            listing = api.list(res, namespace=ALL_NS, chunk_size=500)
        else:
            listing = api.list(res, chunk_size=500)
        items = [_as_dict(obj) async for obj in listing]
        return items, listing.resourceVersion
    except (httpx2.TransportError, httpx2.StreamError, httpx2.HTTPStatusError) as exc:
        raise ConnectionLost(f"list {plural}: {exc}") from exc


async def watch_objects(
    api: AsyncClient, plural: str, resource_version: str, *, server_timeout: int = 300
) -> AsyncIterator[WatchEvent]:
    """Events after ``resource_version``, bookmarks included; raises ``Gone`` or ``ConnectionLost``."""
    res = RESOURCES[plural]
    generic = api._client  # lightkube's request builder: the public watch() cannot ask for bookmarks
    request = generic.prepare_request(
        "list",
        res=res,
        namespace=ALL_NS if plural in NAMESPACED else None,
        watch=True,
        params={
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": server_timeout,
        },
    )
    try:
        async for event_type, obj in generic.watch(request, on_error=on_error_raise):
            data = _as_dict(obj)
            yield WatchEvent(event_type, data, str(data.get("metadata", {}).get("resourceVersion", "")))
    except httpx2.HTTPStatusError as exc:
        if _status_code(exc) == 410:
            raise Gone(str(exc)) from exc
        raise ConnectionLost(f"watch {plural}: {exc}") from exc
    except (httpx2.TransportError, httpx2.StreamError) as exc:
        raise ConnectionLost(f"watch {plural}: {exc!r}") from exc


async def hold_lease(
    api: AsyncClient,
    namespace: str,
    name: str,
    identity: str,
    duration_s: int,
    *,
    now: datetime | None = None,
) -> bool:
    """Take or renew the Lease; True while ``identity`` holds it.

    A Lease may be taken when it has no holder or its holder missed its renewal deadline. Writes
    carry the resourceVersion read, so of two candidates racing for an expired Lease only one wins
    (the other gets 409 Conflict and stays a follower).
    """
    moment = now or datetime.now(UTC)
    try:
        lease = await api.get(Lease, name, namespace=namespace)
    except httpx2.TransportError as exc:
        raise ConnectionLost(f"get lease: {exc!r}") from exc
    except httpx2.HTTPStatusError as exc:
        if _status_code(exc) != 404:
            raise ConnectionLost(f"get lease: {exc}") from exc
        fresh = Lease(
            metadata=ObjectMeta(name=name, namespace=namespace),
            spec=LeaseSpec(
                holderIdentity=identity,
                leaseDurationSeconds=duration_s,
                acquireTime=moment,
                renewTime=moment,
                leaseTransitions=0,
            ),
        )
        return await _write_lease(api, fresh, create=True)
    spec = lease.spec or LeaseSpec()
    renewed = spec.renewTime
    expired = renewed is None or renewed + timedelta(seconds=spec.leaseDurationSeconds or duration_s) < moment
    if spec.holderIdentity not in (None, "", identity) and not expired:
        return False
    if spec.holderIdentity != identity:
        spec.acquireTime = moment
        spec.leaseTransitions = (spec.leaseTransitions or 0) + 1
    spec.holderIdentity, spec.renewTime, spec.leaseDurationSeconds = identity, moment, duration_s
    lease.spec = spec
    return await _write_lease(api, lease, create=False)


async def _write_lease(api: AsyncClient, lease: Any, *, create: bool) -> bool:
    try:
        if create:
            await api.create(lease)
        else:
            await api.replace(lease)
    except httpx2.HTTPStatusError as exc:
        if _status_code(exc) == 409:
            return False
        raise ConnectionLost(f"write lease: {exc}") from exc
    except httpx2.TransportError as exc:
        raise ConnectionLost(f"write lease: {exc!r}") from exc
    return True


# --- the read-only listing behind `gpufleet scan` ---------------------------------------------------

KUEUE_KINDS = {
    "ResourceFlavor": ("resourceflavors", False),
    "Cohort": ("cohorts", False),
    "ClusterQueue": ("clusterqueues", False),
    "WorkloadPriorityClass": ("workloadpriorityclasses", False),
    "LocalQueue": ("localqueues", True),
    "Workload": ("workloads", True),
}
HTTP_NOT_FOUND = 404


@dataclass(frozen=True)
class ClusterListing:
    """What a scan reads, as plain dicts; ``kueue_installed`` is False where the API is not served."""

    nodes: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    jobs: list[dict[str, Any]]
    namespaces: list[dict[str, Any]]
    kueue_installed: bool
    kueue: dict[str, list[dict[str, Any]]]


def sync_client(kubeconfig: Path | None) -> Client:
    """A client from ``kubeconfig``, else from $KUBECONFIG / ~/.kube/config / the in-cluster account."""
    try:
        config = KubeConfig.from_file(kubeconfig) if kubeconfig else KubeConfig.from_env()
    except (ConfigError, OSError) as exc:
        raise InputError.one(f"cannot load a kubeconfig: {exc}", file=str(kubeconfig or "")) from None
    return Client(config=config, field_manager="gpufleet")


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
        )
    except ApiError as exc:
        raise InputError.one(f"the API server refused the listing: {exc.status.message}") from None
    except httpx2.HTTPError as exc:
        raise InputError.one(f"cannot reach the API server: {exc}") from None
