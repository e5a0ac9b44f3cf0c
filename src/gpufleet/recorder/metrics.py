"""The recorder's Prometheus metrics and its ``/metrics`` + ``/healthz`` endpoint."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


@dataclass
class Metrics:
    """One registry per recorder, so tests can run several without clashing."""

    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    stale_after_s: float = 120.0

    def __post_init__(self) -> None:
        r = self.registry
        self.events = Counter("gpufleet_recorder_events", "Watch events seen", ["resource", "type"], registry=r)
        self.records = Counter("gpufleet_recorder_records_written", "Ledger records written", ["kind"], registry=r)
        self.lag = Gauge(
            "gpufleet_recorder_lag_seconds",
            "Newest condition change in the last write, seconds ago",
            registry=r,
        )
        self.restarts = Counter("gpufleet_recorder_watch_restarts", "Watch restarts", ["resource", "cause"], registry=r)
        self.leader = Gauge("gpufleet_recorder_leader", "1 while this replica holds the Lease", registry=r)
        self.last_checkpoint = Gauge(
            "gpufleet_recorder_last_checkpoint_timestamp_seconds",
            "Unix time of the last signed checkpoint this replica published (0: none yet)",
            registry=r,
        )
        self.checkpoint_size = Gauge(
            "gpufleet_recorder_last_checkpoint_size", "Tree size of the last published checkpoint", registry=r
        )
        self.last_progress = time.monotonic()
        self.is_leader = False

    def set_leader(self, leading: bool) -> None:
        self.is_leader = leading
        self.leader.set(1 if leading else 0)
        self.progressed()

    def progressed(self) -> None:
        self.last_progress = time.monotonic()

    def healthy(self) -> bool:
        """A follower is healthy while it waits; a leader while it keeps writing or watching."""
        return not self.is_leader or time.monotonic() - self.last_progress < self.stale_after_s

    def app(self) -> Starlette:
        async def metrics(_: Request) -> Response:
            return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)

        async def healthz(_: Request) -> Response:
            ok = self.healthy()
            idle = round(time.monotonic() - self.last_progress, 1)
            body = {"ok": ok, "leader": self.is_leader, "idleSeconds": idle}
            return JSONResponse(body, status_code=200 if ok else 503)

        return Starlette(routes=[Route("/metrics", metrics), Route("/healthz", healthz)])
