"""The recorder's reads: list, watch with bookmarks, and the Lease for leader election. A 410 Gone
or a dropped connection is raised to the caller, which must relist (410) or back off (dropped)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx2
from lightkube import AsyncClient
from lightkube.core.generic_client import ALL_NS
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease
from lightkube.types import on_error_raise

from gpufleet.kube.connection import (
    NAMESPACED,
    RESOURCES,
    ConnectionLost,
    Gone,
    _as_dict,
    _status_code,
)


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED or BOOKMARK
    object: dict[str, Any]
    resource_version: str


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
