"""An HTTP-level Kubernetes API test double for the recorder: kmock's emulator plus what watches need.

This is a test double, used because the real control plane (etcd + kube-apiserver + Kueue, a
later issue) is not built yet. kmock serves the API over real HTTP, so the recorder's lightkube
code runs unchanged; kmock 0.8 lacks the parts of the watch protocol the recorder depends on, which
this subclass adds:

- a cluster-wide ``resourceVersion`` counter, ``uid`` and ``creationTimestamp`` on every write;
- an event history, so a watch from a resourceVersion replays what happened after it;
- ``compact(rv)``: watches from older versions get a 410 Gone ERROR event, as from etcd compaction;
- BOOKMARK events on idle watches that asked for them, shaped as the real API server's;
- ``drop_every``: break every watch stream after that many events (a dropped connection);
- direct routing of resource requests (kmock's router scans every request it ever served to
  match each new one, which is quadratic over a test of thousands of writes).
- optimistic concurrency on PUT (409 when the resourceVersion is stale), which Leases rely on.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import aiohttp.web
import attrs
from kmock._internal import apps, enums, k8s, rendering

RESOURCES = {
    "kueue.x-k8s.io/v1beta2/workloads": ("Workload", True),
    "batch/v1/jobs": ("Job", True),
    "v1/pods": ("Pod", True),
    "v1/nodes": ("Node", False),
    "coordination.k8s.io/v1/leases": ("Lease", True),
}


class DirectRouting(apps.RawHandler):
    """Serve list/get/create/patch/delete/watch of resources without kmock's request-log scan.

    Sits after ``KubernetesEmulator`` in the MRO, so the emulator's state handling runs first and
    its ``super()._handle`` lands here instead of in kmock's router.
    """

    __slots__ = ()

    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        emulator: Any = self
        routes = {
            enums.action.LIST: emulator._serve_list,
            enums.action.FETCH: emulator._serve_fetch,
            enums.action.CREATE: emulator._serve_create,
            enums.action.UPDATE: emulator._serve_update,
            enums.action.DELETE: emulator._serve_delete,
        }
        if request.resource is None or request.action not in (*routes, enums.action.WATCH):
            return await super()._handle(request)
        if request.action != enums.action.WATCH:
            return aiohttp.web.json_response(await routes[request.action](request))
        raw = request._raw_request
        response = aiohttp.web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(raw)
        try:
            async for item in emulator._serve_watch(request):
                if raw.transport is None or raw.transport.is_closing():
                    return response  # the client went away
                if item != b"":
                    await response.write(json.dumps(item).encode() + b"\n")
        except ConnectionResetError:
            raw.transport.close()  # a real drop: the client sees the stream cut mid-response
            return response
        await response.write_eof()
        return response


@attrs.define(kw_only=True)
class RVEmulator(k8s.KubernetesEmulator, DirectRouting):
    bookmark_interval: float = 0.3
    drop_every: int | None = None
    compacted: int = 0
    watches: int = 0
    gone: int = 0
    _rv: Any = attrs.field(factory=lambda: itertools.count(1), init=False)
    _last_rv: int = attrs.field(default=0, init=False)
    _history: list[tuple[int, Any, dict[str, Any]]] = attrs.field(factory=list, init=False)
    _changed: asyncio.Condition = attrs.field(factory=asyncio.Condition, init=False)
    _write_lock: asyncio.Lock = attrs.field(factory=asyncio.Lock, init=False)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        for key, (kind, namespaced) in RESOURCES.items():
            self.resources[key].kind = kind
            self.resources[key].namespaced = namespaced
            self.resources[key].verbs = {"get", "list", "watch", "create", "update", "patch", "delete"}

    def _next_rv(self) -> int:
        self._last_rv = next(self._rv)
        return self._last_rv

    def compact(self) -> None:
        """Forget history up to now: every watch from an older resourceVersion gets 410 Gone."""
        self.compacted = self._last_rv

    async def _handle(self, request: rendering.Request) -> Any:
        writes = (enums.action.CREATE, enums.action.UPDATE, enums.action.DELETE)
        if request.resource is not None and request.method == enums.method.PUT and request.name:
            return await self._replace(request)
        if request.resource is None or request.action not in writes:
            return await super()._handle(request)
        async with self._write_lock:
            data = request.data if isinstance(request.data, dict) else {}
            md = data.setdefault("metadata", {}) if request.action != enums.action.DELETE else {}
            namespace = request.namespace or md.get("namespace")
            name = request.name or md.get("name")
            key = (request.resource, namespace, name)
            if request.action == enums.action.CREATE:
                md.setdefault("uid", str(uuid.uuid4()))
                md.setdefault("creationTimestamp", datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
            if request.action != enums.action.DELETE:
                md["resourceVersion"] = str(self._next_rv())
            response = await super()._handle(request)
            obj = self.objects[key]
            if request.action == enums.action.DELETE:
                raw = dict(obj.last.raw)
                raw["metadata"] = {**raw.get("metadata", {}), "resourceVersion": str(self._next_rv())}
                event = {"type": "DELETED", "object": raw}
            else:
                event_type = "ADDED" if request.action == enums.action.CREATE else "MODIFIED"
                event = {"type": event_type, "object": obj.raw}
            await self._record(request.resource, event)
            return response

    async def _record(self, resource: Any, event: dict[str, Any]) -> None:
        async with self._changed:
            self._history.append((self._last_rv, resource, event))
            self._changed.notify_all()

    async def _replace(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        """PUT (kmock 0.8 serves only PATCH): replace, or 409 when the resourceVersion is stale."""
        async with self._write_lock:
            key = (request.resource, request.namespace, request.name)
            if key not in self.objects or self.objects[key].deleted:
                return await self._render_error(k8s.KubernetesObjectNotFoundError())
            data = request.data if isinstance(request.data, dict) else {}
            md = data.setdefault("metadata", {})
            stored = self.objects[key].raw.get("metadata", {}).get("resourceVersion")
            if md.get("resourceVersion") not in (None, stored):
                conflict = k8s.KubernetesError(status=409, reason="Conflict", message="the object has been modified")
                return await self._render_error(conflict)
            md["resourceVersion"] = str(self._next_rv())
            self.objects[key].patch(data)
            raw = self.objects[key].raw
            await self._record(request.resource, {"type": "MODIFIED", "object": raw})
            return aiohttp.web.json_response(raw)

    async def _serve_list(self, request: rendering.Request) -> rendering.Payload:
        payload: dict[str, Any] = await super()._serve_list(request)  # type: ignore[assignment]
        payload["metadata"] = {"resourceVersion": str(self._last_rv)}
        return payload

    async def _serve_watch(self, request: rendering.Request) -> AsyncIterator[rendering.Payload]:
        yield b""
        self.watches += 1
        since = request.params.get("resourceVersion")
        bookmarks = request.params.get("allowWatchBookmarks") == "true"
        if since not in (None, "", "0") and int(since) < self.compacted:
            self.gone += 1
            yield {"type": "ERROR", "object": _status(410, "Expired", f"too old resource version: {since}")}
            return
        if since in (None, "", "0"):
            listing = await self._serve_list(request)
            for item in listing["items"]:  # type: ignore[index]
                yield {"type": "ADDED", "object": item}
            since = str(self._last_rv)
        cursor = next((i for i, (rv, _, _) in enumerate(self._history) if rv > int(since)), len(self._history))
        sent = 0
        while True:
            async with self._changed:
                if cursor >= len(self._history):
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._changed.wait(), self.bookmark_interval)
                pending = self._history[cursor:]
                cursor = len(self._history)
                head = self._last_rv
            if not pending and bookmarks:
                yield {"type": "BOOKMARK", "object": bookmark(request.resource.plural or "", str(head))}
            for _, resource, event in pending:
                namespace = event["object"].get("metadata", {}).get("namespace")
                if resource != request.resource or request.namespace not in (None, namespace):
                    continue
                yield event
                sent += 1
                if self.drop_every is not None and sent >= self.drop_every:
                    raise ConnectionResetError("the test double dropped the watch connection")


def bookmark(resource: str, rv: str) -> dict[str, Any]:
    """A BOOKMARK's object as kube-apiserver sends it: the kind's empty object, serialized with its
    required lists as ``null`` (seen on the testbed: a Job's ``spec.template.spec.containers``)."""
    obj: dict[str, Any] = {"metadata": {"resourceVersion": rv}}
    if resource.endswith("jobs"):
        obj.update(kind="Job", apiVersion="batch/v1")
        obj["spec"] = {"template": {"metadata": {"creationTimestamp": None}, "spec": {"containers": None}}}
        obj["status"] = {}
    elif resource.endswith("pods"):
        obj.update(kind="Pod", apiVersion="v1", spec={"containers": None}, status={})
    return obj


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Status",
        "metadata": {},
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
    }
