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
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import httpx2
import yaml
from lightkube import ApiError, AsyncClient, Client, ConfigError, KubeConfig
from lightkube.core.generic_client import ALL_NS
from lightkube.generic_resource import create_global_resource, create_namespaced_resource
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.batch_v1 import Job
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import ConfigMap, Namespace, Node, Pod
from lightkube.types import PatchType, on_error_raise

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


def _config(kubeconfig: str | None, *, in_cluster: bool) -> KubeConfig:
    """A kubeconfig file, the in-cluster service account, or the environment, in that order."""
    if in_cluster:
        return KubeConfig.from_service_account()
    if kubeconfig:
        return KubeConfig.from_file(kubeconfig)
    return KubeConfig.from_env()


def client(kubeconfig: str | None = None, *, in_cluster: bool = False) -> AsyncClient:
    """An async client from a kubeconfig file, the in-cluster service account, or the environment."""
    config = _config(kubeconfig, in_cluster=in_cluster)
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
    resource_slices: list[dict[str, Any]] = field(default_factory=list)  # DRA; empty where not served


def sync_client(kubeconfig: Path | None) -> Client:
    """A client from ``kubeconfig``, else from $KUBECONFIG / ~/.kube/config / the in-cluster account."""
    try:
        config = KubeConfig.from_file(kubeconfig) if kubeconfig else KubeConfig.from_env()
    except (ConfigError, OSError) as exc:
        raise InputError.one(f"cannot load a kubeconfig: {exc}", file=str(kubeconfig or "")) from None
    except (yaml.YAMLError, KeyError, TypeError, ValueError, AttributeError) as exc:
        # lightkube lets a file that is not YAML, or YAML that is not a kubeconfig, raise as it parses.
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError.one(
            f"cannot load a kubeconfig: not a kubeconfig ({detail})", file=str(kubeconfig or "")
        ) from None
    return Client(config=config, field_manager="gpufleet")


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


# --- reading Kueue's live state for `gpufleet why` and `gpufleet what-if`, and the dry-run apply -----

#: What the twin reads of a live cluster: (group/version, kind, plural, namespaced).
LIVE_KINDS: tuple[tuple[str, str, str, bool], ...] = (
    ("kueue.x-k8s.io/v1beta2", "ResourceFlavor", "resourceflavors", False),
    ("kueue.x-k8s.io/v1beta2", "Cohort", "cohorts", False),
    ("kueue.x-k8s.io/v1beta2", "ClusterQueue", "clusterqueues", False),
    ("kueue.x-k8s.io/v1beta2", "WorkloadPriorityClass", "workloadpriorityclasses", False),
    ("kueue.x-k8s.io/v1beta2", "LocalQueue", "localqueues", True),
    ("kueue.x-k8s.io/v1beta2", "Workload", "workloads", True),
    ("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", False),
    ("v1", "Namespace", "namespaces", False),
    # what Kueue counts a pod's claims from (DRA, Kubernetes 1.34+; absent elsewhere, which the listing tolerates)
    ("resource.k8s.io/v1", "ResourceClaimTemplate", "resourceclaimtemplates", True),
)
#: Where a Kueue installed from its manifests or chart keeps its manager Configuration.
KUEUE_CONFIG = ("kueue-system", "kueue-manager-config", "controller_manager_config.yaml")
HTTP_FORBIDDEN = 403


@dataclass(frozen=True)
class KueueState:
    """The live objects as plain dicts (each with apiVersion and kind), and Kueue's Configuration
    as YAML text where the ConfigMap could be read (``configuration_note`` says why not)."""

    objects: list[dict[str, Any]]
    configuration: str | None
    configuration_note: str


@dataclass(frozen=True)
class DryRun:
    """One object of a server-side dry-run apply: the live object (None: it would be created), the
    object as the API server would store it, or the server's refusal."""

    kind: str
    name: str
    namespace: str | None
    live: dict[str, Any] | None
    applied: dict[str, Any] | None
    error: str | None = None


def _resource(api_version: str, kind: str, plural: str, namespaced: bool) -> Any:
    group, _, version = api_version.rpartition("/")
    if not group:
        return Namespace
    make = create_namespaced_resource if namespaced else create_global_resource
    return make(group, version, kind, plural)


def _typed(api_version: str, kind: str, obj: Any) -> dict[str, Any]:
    data = _as_dict(obj)
    data.setdefault("apiVersion", api_version)
    data.setdefault("kind", kind)
    return data


def _kueue_configuration(api: Client) -> tuple[str | None, str]:
    namespace, name, key = KUEUE_CONFIG
    try:
        cm = api.get(ConfigMap, name, namespace=namespace)
    except ApiError as exc:
        return None, f"ConfigMap {namespace}/{name} not readable ({exc.status.code}: {exc.status.reason})"
    text = (cm.data or {}).get(key)
    if text is None:
        return None, f"ConfigMap {namespace}/{name} has no key {key}"
    return text, f"ConfigMap {namespace}/{name}"


def read_kueue_state(kubeconfig: Path | None = None) -> KueueState:
    """List every object the twin reads (list and get calls only; nothing is written)."""
    api = sync_client(kubeconfig)
    objects: list[dict[str, Any]] = []
    try:
        for api_version, kind, plural, namespaced in LIVE_KINDS:
            res = _resource(api_version, kind, plural, namespaced)
            try:
                listed: Any = api.list(res, namespace="*") if namespaced else api.list(res)
                objects += [_typed(api_version, kind, o) for o in listed]
            except ApiError as exc:
                if exc.status.code == HTTP_NOT_FOUND and kind == "ClusterQueue":
                    raise InputError.one(
                        "Kueue is not installed: the API server does not serve kueue.x-k8s.io/v1beta2"
                    ) from None
                if exc.status.code not in (HTTP_NOT_FOUND, HTTP_FORBIDDEN) or kind in ("Workload", "LocalQueue"):
                    raise
        config, note = _kueue_configuration(api)
    except ApiError as exc:
        raise InputError.one(f"the API server refused the listing: {exc.status.message}") from None
    except httpx2.HTTPError as exc:
        raise InputError.one(f"cannot reach the API server: {exc}") from None
    return KueueState(objects, config, note)


def _plural(kind: str) -> tuple[str, str, bool]:
    for api_version, k, plural, namespaced in LIVE_KINDS:
        if k == kind:
            return api_version, plural, namespaced
    raise InputError.one(f"gpufleet does not dry-run {kind} objects", path=kind)


def dry_run_apply(objects: list[dict[str, Any]], kubeconfig: Path | None = None) -> list[DryRun]:
    """Server-side apply each object with ``dryRun=All`` (field manager gpufleet, forced, as
    ``kubectl apply --server-side --force-conflicts --dry-run=server`` does): what would be stored,
    beside what is stored now. The API server persists nothing of a dry run."""
    api = sync_client(kubeconfig)
    out = []
    try:
        for obj in objects:
            kind, meta = str(obj["kind"]), obj.get("metadata") or {}
            name, namespace = str(meta["name"]), meta.get("namespace")
            api_version, plural, namespaced = _plural(kind)
            res = _resource(api_version, kind, plural, namespaced)
            scope = {"namespace": namespace} if namespaced else {}
            try:
                live: dict[str, Any] | None = _typed(api_version, kind, api.get(res, name, **scope))
            except ApiError as exc:
                if exc.status.code != HTTP_NOT_FOUND:
                    raise
                live = None
            try:
                applied = api.patch(
                    res, name, obj, patch_type=PatchType.APPLY, field_manager="gpufleet", force=True, dry_run=True,
                    **scope,
                )  # fmt: skip
            except ApiError as exc:
                out.append(DryRun(kind, name, namespace, live, None, str(exc.status.message)))
                continue
            out.append(DryRun(kind, name, namespace, live, _typed(api_version, kind, applied)))
    except ApiError as exc:
        raise InputError.one(f"the API server refused the dry run: {exc.status.message}") from None
    except httpx2.HTTPError as exc:
        raise InputError.one(f"cannot reach the API server: {exc}") from None
    return out


# --- the ConfigMap the recorder publishes its signed checkpoints to ---------------------------------


class WriteRefused(Exception):
    """The API server refused a write for good (403 Forbidden, 404, 422 Invalid): retrying will not help."""


def configmap_client(kubeconfig: str | None = None, *, in_cluster: bool = False) -> Client:
    """A synchronous client chosen as ``client`` chooses (the checkpoint publisher runs in a thread)."""
    config = _config(kubeconfig, in_cluster=in_cluster)
    return Client(config, timeout=httpx2.Timeout(30.0), field_manager="gpufleet-recorder")


def read_configmap(api: Client, namespace: str, name: str) -> dict[str, Any] | None:
    """The ConfigMap as a plain dict (with its resourceVersion), or None when there is none."""
    try:
        return _as_dict(api.get(ConfigMap, name, namespace=namespace))
    except httpx2.HTTPStatusError as exc:
        code = _status_code(exc)
        if code == HTTP_NOT_FOUND:
            return None
        if code == HTTP_FORBIDDEN:
            raise WriteRefused(f"get configmap {namespace}/{name}: {code} {exc}") from exc
        raise ConnectionLost(f"get configmap {namespace}/{name}: {exc}") from exc
    except httpx2.TransportError as exc:
        raise ConnectionLost(f"get configmap {namespace}/{name}: {exc!r}") from exc


def write_configmap(api: Client, obj: dict[str, Any]) -> bool:
    """Create ``obj`` when it carries no resourceVersion, else replace it carrying the one it was read
    at, so a concurrent writer is never overwritten unseen: False when someone wrote first (409)."""
    meta = obj.get("metadata", {})
    where = f"configmap {meta.get('namespace')}/{meta.get('name')}"
    configmap = cast(ConfigMap, ConfigMap.from_dict(obj))
    try:
        if meta.get("resourceVersion"):
            api.replace(configmap)
        else:
            api.create(configmap)
    except httpx2.HTTPStatusError as exc:
        code = _status_code(exc)
        if code == HTTP_CONFLICT:
            return False
        if code in (HTTP_FORBIDDEN, HTTP_NOT_FOUND, HTTP_INVALID):
            raise WriteRefused(f"write {where}: {code} {exc}") from exc
        raise ConnectionLost(f"write {where}: {exc}") from exc
    except httpx2.TransportError as exc:
        raise ConnectionLost(f"write {where}: {exc!r}") from exc
    return True


HTTP_FORBIDDEN = 403
HTTP_CONFLICT = 409
HTTP_INVALID = 422


# --- Jobs the world differential creates on the testbed ----------------------------------------------


def create_job(api: Client, obj: dict[str, Any]) -> None:
    """Create one batch/v1 Job from a plain dict (a user's ``kubectl create``); refusals raise ``WriteRefused``."""
    meta = obj.get("metadata", {})
    try:
        api.create(RESOURCES["jobs"].from_dict(obj), namespace=meta.get("namespace"))
    except ApiError as exc:
        raise WriteRefused(f"create job {meta.get('namespace')}/{meta.get('name')}: {exc.status.message}") from exc


def job_outcomes(api: Client, label_selector: str) -> dict[str, tuple[int, int]]:
    """``namespace/name`` -> (succeeded, failed) pods of every Job carrying ``label_selector``."""
    out: dict[str, tuple[int, int]] = {}
    for job in api.list(RESOURCES["jobs"], namespace=ALL_NS, labels=_selector(label_selector)):
        data = _as_dict(job)
        meta, status = data.get("metadata", {}), data.get("status") or {}
        out[f"{meta.get('namespace')}/{meta.get('name')}"] = (
            int(status.get("succeeded", 0)),
            int(status.get("failed", 0)),
        )
    return out


def _selector(text: str) -> dict[str, Any]:
    """``a=b,c=d`` as lightkube's label filter."""
    return {key: value for key, _, value in (part.partition("=") for part in text.split(",") if part)}


# --- server-side apply of whole objects (the testbed's stand-in DRA driver publishes ResourceSlices) ---


def rest_plural(kind: str) -> str:
    """The REST plural of the kinds applied here (regular English plurals of CamelCase kinds)."""
    lower = kind.lower()
    return f"{lower[:-1]}ies" if lower.endswith("y") else f"{lower}es" if lower.endswith("s") else f"{lower}s"


def apply_objects(objects: list[dict[str, Any]], kubeconfig: Path | None, *, field_manager: str) -> None:
    """Server-side apply each object (forced, under ``field_manager``), as a controller owning them does.

    Cluster-scoped and namespaced kinds alike; the API server's refusal is raised as an InputError
    naming the object.
    """
    api = sync_client(kubeconfig)
    for obj in objects:
        group, _, version = str(obj["apiVersion"]).rpartition("/")
        kind, meta = str(obj["kind"]), obj.get("metadata") or {}
        namespace = meta.get("namespace")
        make = create_namespaced_resource if namespace else create_global_resource
        res = make(group, version, kind, rest_plural(kind))
        scope = {"namespace": namespace} if namespace else {}
        try:
            api.patch(
                res, meta["name"], obj, patch_type=PatchType.APPLY, field_manager=field_manager, force=True, **scope
            )
        except ApiError as exc:
            raise InputError.one(f"the API server refused {kind} {meta['name']}: {exc.status.message}") from None
        except httpx2.HTTPError as exc:
            raise InputError.one(f"cannot reach the API server: {exc}") from None
