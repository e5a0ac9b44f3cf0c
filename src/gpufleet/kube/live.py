"""Kueue's live state for ``gpufleet why`` and ``what-if`` (list and get only), and the server-side
dry-run apply behind ``what-if``."""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import httpx2
from lightkube import ApiError, Client
from lightkube.generic_resource import create_global_resource, create_namespaced_resource
from lightkube.resources.core_v1 import ConfigMap, Namespace
from lightkube.types import PatchType

from gpufleet.errors import InputError
from gpufleet.kube.connection import (
    HTTP_FORBIDDEN,
    HTTP_NOT_FOUND,
    InlineKubeconfig,
    _as_dict,
    sync_client,
)
from gpufleet.vocabulary import JOB_OWNERS

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
#: The plural of each owner of a Workload the forecast reads (``with_owners``), by (API group, kind).
OWNER_PLURALS: dict[tuple[str, str], str] = {(group, kind): plural for group, kind, plural in JOB_OWNERS}
#: Where a Kueue installed from its manifests or chart keeps its manager Configuration.
KUEUE_CONFIG = ("kueue-system", "kueue-manager-config", "controller_manager_config.yaml")


@dataclass(frozen=True)
class KueueState:
    """The live objects as plain dicts (each with apiVersion and kind), and Kueue's Configuration
    as YAML text where the ConfigMap could be read (``configuration_note`` says why not)."""

    objects: list[dict[str, Any]]
    configuration: str | None
    configuration_note: str
    owners: list[dict[str, Any]] = field(default_factory=list)  # the Workloads' owners, where asked (``with_owners``)
    server_time: datetime | None = None  # the API server's clock: its last reply's Date header


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


def _server_clock(api: Client) -> list[datetime]:
    """The Date header of every reply ``api`` gets from now on (the server's clock, to the second).
    lightkube returns objects, not replies, so a response hook on its HTTP client reads the header:
    this adapter is the one place that knows lightkube's inside (``Client._client._client``)."""
    seen: list[datetime] = []

    def hook(response: Any) -> None:
        # no Date, or not an HTTP date: the caller falls back to its own clock, and says so
        with suppress(KeyError, TypeError, ValueError):
            seen.append(parsedate_to_datetime(response.headers["date"]).astimezone(UTC))

    http = getattr(getattr(api, "_client", None), "_client", None)
    if http is not None and hasattr(http, "event_hooks"):
        http.event_hooks = {**http.event_hooks, "response": [*http.event_hooks.get("response", []), hook]}
    return seen


def _owner_kinds(objects: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The (apiVersion, kind) of each known owner of the listed Workloads (``OWNER_PLURALS``), sorted."""
    found = {
        (str(ref.get("apiVersion")), str(ref.get("kind")))
        for wl in objects
        if wl.get("kind") == "Workload"
        for ref in (wl.get("metadata") or {}).get("ownerReferences") or []
    }
    return sorted(k for k in found if (k[0].rpartition("/")[0], k[1]) in OWNER_PLURALS)


def _owners(api: Client, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every object of each kind that owns a listed Workload, at the version its reference names. A kind
    the API server does not serve (its CRD removed since) or will not list to us is passed over: the
    Workloads' own say (their pod templates and annotations) is then what the forecast reads."""
    out: list[dict[str, Any]] = []
    for api_version, kind in _owner_kinds(objects):
        plural = OWNER_PLURALS[(api_version.rpartition("/")[0], kind)]
        try:
            listed: Any = api.list(_resource(api_version, kind, plural, True), namespace="*")
        except ApiError as exc:
            if exc.status.code not in (HTTP_NOT_FOUND, HTTP_FORBIDDEN):
                raise
            continue
        out += [_typed(api_version, kind, o) for o in listed]
    return out


def read_kueue_state(kubeconfig: Path | InlineKubeconfig | None = None, *, with_owners: bool = False) -> KueueState:
    """List every object the twin reads (list and get calls only; nothing is written), and where
    ``with_owners`` the Workloads' owners: Jobs, JobSets... (what they declared of their runtimes:
    ``forecast.declared``)."""
    api = sync_client(kubeconfig)
    server = _server_clock(api)
    objects: list[dict[str, Any]] = []
    owners: list[dict[str, Any]] = []
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
        if with_owners:
            owners = _owners(api, objects)
        config, note = _kueue_configuration(api)
    except ApiError as exc:
        raise InputError.one(f"the API server refused the listing: {exc.status.message}") from None
    except httpx2.HTTPError as exc:
        raise InputError.one(f"cannot reach the API server: {exc}") from None
    return KueueState(objects, config, note, owners, server[-1] if server else None)


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
