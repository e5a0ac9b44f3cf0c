"""The recorder process: win the Lease, list and watch four kinds, and append what changed.

Shape of the loop:

- one task per kind (Workloads, Jobs, Pods, Nodes) lists once, then watches from the listed
  resourceVersion with bookmarks; on 410 Gone it relists, on a dropped connection it waits with
  capped exponential backoff and resumes from the last resourceVersion it saw;
- one consumer drains their events in batches, asks the tracker what changed, and appends the
  records together with every kind's resourceVersion in one transaction;
- after a restart each kind resumes from its stored resourceVersion, so the events missed while
  down are replayed and nothing committed is written twice (``Ledger.append`` is idempotent).

Only the Lease holder writes; it renews every third of the lease and exits if it cannot, so a
replica that lost the Lease never writes again (Kubernetes restarts it as a follower).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import socket
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import uvicorn

from gpufleet import kube
from gpufleet.errors import InputError
from gpufleet.ledger.records import Allocation, Record, WaitInterval
from gpufleet.ledger.store import Ledger
from gpufleet.recorder.derive import LabelKeys, conditions
from gpufleet.recorder.metrics import Metrics
from gpufleet.recorder.publish import CheckpointPolicy, Publisher
from gpufleet.recorder.tracker import Tracker

log = logging.getLogger("gpufleet.recorder")

KINDS = ("nodes", "jobs", "workloads", "pods")
FOREVER = datetime(9999, 1, 1, tzinfo=UTC)  # a window only still-open records overlap
BATCH = 500
GATHER_S = 0.05  # how long a lone event waits for others to share its transaction


def source(plural: str) -> str:
    return f"watch/{plural}"


class LostLeadership(Exception):
    """The Lease could not be renewed in time: stop writing at once."""


@dataclass(frozen=True)
class RecorderConfig:
    ledger: str
    kubeconfig: str | None = None
    in_cluster: bool = False
    namespace: str = "gpufleet-system"
    lease_name: str = "gpufleet-recorder"
    identity: str = field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")
    lease_seconds: int = 15
    metrics_host: str = "127.0.0.1"
    metrics_port: int = 9090  # 0: no endpoint
    keys: LabelKeys = field(default_factory=LabelKeys)
    backoff_max_s: float = 30.0
    checkpoints: CheckpointPolicy | None = None  # None: publish no checkpoints


@dataclass(frozen=True, slots=True)
class _Listed:
    plural: str
    objects: list[dict[str, Any]]
    resource_version: str


@dataclass(frozen=True, slots=True)
class _Event:
    plural: str
    event: kube.WatchEvent


class Backoff:
    """Capped exponential backoff with full jitter (so replicas do not reconnect in lockstep)."""

    def __init__(self, cap: float, base: float = 0.2) -> None:
        self.cap, self.base, self.failures = cap, base, 0

    def next(self) -> float:
        self.failures += 1
        return random.uniform(0, min(self.cap, self.base * 2**self.failures))

    def reset(self) -> None:
        self.failures = 0


class Recorder:
    def __init__(
        self, config: RecorderConfig, ledger: Ledger, api: Any, metrics: Metrics, publisher: Publisher | None = None
    ) -> None:
        self.config, self.ledger, self.api, self.metrics = config, ledger, api, metrics
        self.publisher = publisher
        self.tracker = Tracker(self._load, config.keys, lambda: datetime.now(UTC))
        self.queue: asyncio.Queue[_Listed | _Event] = asyncio.Queue(maxsize=10_000)
        self._counters: dict[tuple[str, str], Any] = {}

    def _load(self, uid: str) -> tuple[list[Allocation], list[WaitInterval]]:
        return self.ledger.allocations(workload_uid=uid), self.ledger.waits(workload_uid=uid)

    async def run(self) -> None:
        """Prime the joins from a first listing; a kind with no stored position records that same
        listing (not a second one) and watches from it.

        The first listings are queued pods before workloads, so a workload recorded from its listing
        finds its pods at once: one version of each attempt with its nodes, not one without and one
        with (streams have no common order, so any order is correct; this one writes half as much)."""
        stored = await asyncio.to_thread(self.ledger.positions)
        start: dict[str, str | None] = {plural: stored.get(source(plural)) for plural in KINDS}
        for plural in ("nodes", "jobs", "pods", "workloads"):
            if plural == "pods" and start[plural] is not None:
                continue  # nothing to prime from pods: they are replayed from the stored position
            objects, rv = await self._retrying(kube.list_objects, self.api, plural)
            self.tracker.prime(plural, objects)
            if start[plural] is None:
                await self.queue.put(_Listed(plural, objects, rv))
                start[plural] = rv
        async with asyncio.TaskGroup() as group:
            group.create_task(self._consume())
            if self.publisher is not None:
                group.create_task(self.publisher.run(self.ledger))
            for plural in KINDS:
                group.create_task(self._follow(plural, start[plural]))

    async def _retrying(self, call: Any, *args: Any) -> Any:
        backoff = Backoff(self.config.backoff_max_s)
        while True:
            try:
                return await call(*args)
            except kube.ConnectionLost as exc:
                log.warning("%s; retrying", exc)
                await asyncio.sleep(backoff.next())

    async def _follow(self, plural: str, resource_version: str | None) -> None:
        backoff = Backoff(self.config.backoff_max_s)
        rv = resource_version
        while True:
            try:
                if rv is None:
                    objects, rv = await kube.list_objects(self.api, plural)
                    await self.queue.put(_Listed(plural, objects, rv))
                async for event in kube.watch_objects(self.api, plural, rv):
                    await self.queue.put(_Event(plural, event))
                    rv = event.resource_version or rv
                    backoff.reset()
            except kube.Gone:
                self.metrics.restarts.labels(plural, "Gone").inc()
                log.info("watch %s: resourceVersion %s is gone; relisting", plural, rv)
                rv = None
            except kube.ConnectionLost as exc:
                self.metrics.restarts.labels(plural, "ConnectionLost").inc()
                delay = backoff.next()
                log.warning("%s; reconnecting in %.1fs", exc, delay)
                await asyncio.sleep(delay)

    async def _consume(self) -> None:
        while True:
            batch = [await self.queue.get()]
            if self.queue.empty():
                # Kueue, the Job controller and the kubelet touch a workload several times within
                # milliseconds: waiting this long for them makes one transaction of a burst instead of
                # one each (a transaction's fixed cost was most of the live path's CPU). Nothing is
                # less safe: events not committed yet are replayed from the stored resourceVersion.
                await asyncio.sleep(GATHER_S)
            while len(batch) < BATCH and not self.queue.empty():
                batch.append(self.queue.get_nowait())
            records: list[Record] = []
            positions: dict[str, str] = {}
            newest: datetime | None = None
            await self._preload(batch)
            for item in batch:
                if isinstance(item, _Listed):
                    still_open = await asyncio.to_thread(self._still_open) if item.plural == "workloads" else {}
                    records += self._relisted(item, still_open)
                    positions[source(item.plural)] = item.resource_version
                    continue
                event = item.event
                self._counter(item.plural, event.type).inc()
                records += self.tracker.observe(item.plural, event.type, event.object)
                if event.resource_version:
                    positions[source(item.plural)] = event.resource_version
                for cond in conditions(event.object).values():
                    if cond.time is not None and (newest is None or cond.time > newest):
                        newest = cond.time
            result = await asyncio.to_thread(self.ledger.append, records, positions=positions)
            if self.publisher is not None:
                await self.publisher.maybe_publish(self.ledger, result.head_seq)
            for record in records:
                self.metrics.records.labels(record.kind).inc()
            if newest is not None:
                self.metrics.lag.set(max(0.0, (datetime.now(UTC) - newest).total_seconds()))
            self.metrics.progressed()

    def _counter(self, plural: str, event_type: str) -> Any:
        """The events counter's child for this kind and type (``labels()`` is a lookup per call)."""
        found = self._counters.get((plural, event_type))
        if found is None:
            found = self._counters[(plural, event_type)] = self.metrics.events.labels(plural, event_type)
        return found

    async def _preload(self, batch: list[_Listed | _Event]) -> None:
        """Read what the ledger holds for every workload of the batch in one query, not one each."""
        uids: set[str] = set()
        for item in batch:
            if isinstance(item, _Listed):
                if item.plural == "workloads":
                    uids.update(o["metadata"]["uid"] for o in item.objects)
            elif item.plural == "workloads" and item.event.type != "BOOKMARK":
                uids.add(item.event.object["metadata"]["uid"])
        missing = self.tracker.unknown(uids)
        if missing:
            found = await asyncio.to_thread(self.ledger.current_of_workloads, missing)
            self.tracker.preload(missing, found)

    def _still_open(self) -> dict[str, dict[str, Any]]:
        """Workloads with an attempt or a wait the ledger holds open, as minimal objects by uid."""
        found: dict[str, dict[str, Any]] = {}
        for record in self.ledger.current_records(overlapping=(FOREVER, FOREVER)):
            if getattr(record, "end_reason", None) is None and getattr(record, "end", None) is None:
                meta = {"uid": record.workload_uid, "name": record.name, "namespace": record.namespace}
                found[record.workload_uid] = {"metadata": meta}
        return found

    def _relisted(self, listed: _Listed, still_open: dict[str, dict[str, Any]]) -> list[Record]:
        """A fresh listing: everything in it as ADDED, and anything we knew that is gone as DELETED.

        "Known" includes what the ledger holds open: a workload deleted while no recorder ran, whose
        DELETED event a 410 Gone then hid, is closed at the relist (at the time it was noticed).
        """
        self.tracker.prime(listed.plural, listed.objects)
        records: list[Record] = []
        if listed.plural == "workloads":
            present = {o["metadata"]["uid"] for o in listed.objects}
            for uid, gone in list({**still_open, **self.tracker.workloads}.items()):
                if uid not in present:
                    records += self.tracker.observe("workloads", "DELETED", gone)
        for obj in listed.objects:
            records += self.tracker.observe(listed.plural, "ADDED", obj)
        self.metrics.events.labels(listed.plural, "LISTED").inc(len(listed.objects))
        return records


async def _lead(config: RecorderConfig, api: Any, metrics: Metrics) -> None:
    """Wait for the Lease, then keep renewing it; raise LostLeadership when a renewal fails."""
    interval = config.lease_seconds / 3
    if not await _try_lease(config, api):
        log.info(
            "%s follows: lease %s/%s is held by another replica; trying every %.1fs",
            config.identity, config.namespace, config.lease_name, interval,
        )  # fmt: skip
        while not await _try_lease(config, api):
            await asyncio.sleep(interval)
    metrics.set_leader(True)
    log.info("%s holds lease %s/%s", config.identity, config.namespace, config.lease_name)


async def _renew(config: RecorderConfig, api: Any, metrics: Metrics) -> None:
    interval = config.lease_seconds / 3
    deadline = asyncio.get_running_loop().time() + config.lease_seconds
    while True:
        await asyncio.sleep(interval)
        if await _try_lease(config, api):
            deadline = asyncio.get_running_loop().time() + config.lease_seconds
        elif asyncio.get_running_loop().time() + interval >= deadline:
            metrics.set_leader(False)
            raise LostLeadership(f"{config.identity} could not renew lease {config.lease_name}")


async def _try_lease(config: RecorderConfig, api: Any) -> bool:
    try:
        return await kube.hold_lease(api, config.namespace, config.lease_name, config.identity, config.lease_seconds)
    except kube.ConnectionLost as exc:
        log.warning("lease: %s", exc)
        return False


def _cluster(config: RecorderConfig) -> Any:
    """The API client, before anything is created: no kubeconfig is a user mistake, not a traceback."""
    try:
        return kube.client(config.kubeconfig, in_cluster=config.in_cluster)
    except Exception as exc:  # lightkube's ConfigError, a missing or malformed file: all the user's to fix
        where = "--in-cluster" if config.in_cluster else "--kubeconfig"
        source = config.kubeconfig or (
            "the pod's service account" if config.in_cluster else "KUBECONFIG / ~/.kube/config"
        )
        raise InputError.one(f"no usable cluster configuration in {source}: {exc}", path=where) from None


def _publisher(config: RecorderConfig, metrics: Metrics) -> Publisher | None:
    if config.checkpoints is None:
        return None
    from gpufleet.ledger import note

    key = config.checkpoints.key
    try:
        signer = note.parse_signer(key.read_text(encoding="utf-8"), str(key))
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError.one(f"cannot read the key: {exc}", file=str(key), path="--checkpoint-key") from None
    publisher = Publisher(
        config.checkpoints, signer, metrics, kubeconfig=config.kubeconfig, in_cluster=config.in_cluster
    )
    publisher.resume()
    return publisher


async def run(config: RecorderConfig) -> None:
    """Run until killed (or until leadership is lost, which raises)."""
    metrics = Metrics()
    api = _cluster(config)  # checked before the ledger or the endpoint exists
    publisher = _publisher(config, metrics)
    server: uvicorn.Server | None = None
    serving: asyncio.Task[None] | None = None
    if config.metrics_port:
        server = uvicorn.Server(
            uvicorn.Config(metrics.app(), host=config.metrics_host, port=config.metrics_port, log_level="warning")
        )
        serving = asyncio.create_task(server.serve())
    ledger = Ledger.open(config.ledger)
    try:
        await _lead(config, api, metrics)
        recorder = Recorder(config, ledger, api, metrics, publisher)
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(_renew(config, api, metrics))
                group.create_task(recorder.run())
        except* LostLeadership as lost:  # the one expected way out: say it plainly, not as a task group
            raise lost.exceptions[0] from None
    finally:
        ledger.close()
        if server is not None and serving is not None:
            server.should_exit = True
            with contextlib.suppress(Exception):
                await serving
