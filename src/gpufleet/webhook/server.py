"""Serve the webhook over TLS with granian, and pick up a renewed certificate without a restart.

granian was chosen by measurement (``bench/webhook_bench.py``, docs/admission.md): its HTTP and TLS
run in Rust threads beside the Python thread that runs the rules, so at 16 concurrent clients on two
cores it answered with a third of uvicorn's median latency and less server CPU per review. It runs
embedded in this process's event loop, one worker, so the app and its metrics are this process's,
and it calls the app through RSGI, its native interface, which costs the one Python thread that
every review passes through less than ASGI's messages do (measured side by side in the bench).

A renewed certificate (``tls.Renewal``) makes granian respawn its worker, which reads the files
again; new handshakes get the new certificate. Several review processes: ``workers``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal

import uvloop
from granian.constants import HTTPModes, Interfaces
from granian.server.embed import Server

from gpufleet.webhook.app import WebhookApp
from gpufleet.webhook.telemetry import LOGGER
from gpufleet.webhook.tls import Listen, Renewal

log = logging.getLogger(LOGGER)


class WebhookServer:
    """granian over TLS, embedded in the running event loop, plus its certificate watcher."""

    def __init__(self, app: WebhookApp, listen: Listen) -> None:
        self.listen = listen
        self.renewal = Renewal(listen.cert, listen.key)
        self.server = Server(
            app,
            address=listen.host,
            port=listen.port,
            interface=Interfaces.RSGI,  # granian calls the app's __rsgi__
            http=HTTPModes.auto,
            websockets=False,
            log_enabled=False,
            ssl_cert=listen.cert,
            ssl_key=listen.key,
        )
        self.server.on_startup(self._listening)
        self.started = False
        self._loop: asyncio.AbstractEventLoop | None = None

    def _listening(self) -> None:
        self.started = True  # the socket is bound and listening; the worker starts right after

    def stop(self) -> None:
        """Stop serving; safe to call from another thread."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self.server.stop)

    @property
    def reloads(self) -> int:
        return self.renewal.reloads

    def reload_certificate(self) -> bool:
        """Serve the current files; False (old pair kept) when they do not load."""
        if not self.renewal.loadable():
            return False
        self._reload()
        return True

    def _reload(self) -> None:
        self.server.reload()  # type: ignore[no-untyped-call]  # granian leaves it unannotated
        self.renewal.reloaded()

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.listen.reload_seconds)
            if self.renewal.renewed():
                self._reload()

    def run(self) -> None:
        """Serve until stopped (SIGTERM or SIGINT), on uvloop.

        Everything the process made to start (the policy, the imported modules: about 180,000 objects
        the garbage collector tracks) lives until it exits, so it is collected once and frozen out of
        the collector's view: a full collection over it stalled the one thread that answers reviews
        for over 100 ms (measured under load), enough to show in the p99.
        """
        gc.collect()
        gc.freeze()

        async def main() -> None:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self.server.stop)
            await self.serve()

        uvloop.run(main())

    async def serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        watcher = asyncio.create_task(self._watch())
        try:
            await self.server.serve()
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
