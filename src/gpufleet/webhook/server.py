"""Serve the webhook over TLS with granian, and pick up a renewed certificate without a restart.

granian was chosen by measurement (``bench/webhook_bench.py``, docs/admission.md): its HTTP and TLS
run in Rust threads beside the Python thread that runs the rules, so at 16 concurrent clients on two
cores it answered with a third of uvicorn's median latency and less server CPU per review. It runs
embedded in this process's event loop, one worker, so the app and its metrics are this process's,
and it calls the app through RSGI, its native interface, which costs the one Python thread that
every review passes through less than ASGI's messages do (measured side by side in the bench).

cert-manager (or ``gpufleet webhook certs --renew``) renews the certificate in place (a Secret volume
swaps its files), so a watcher polls the files' modification times. A new pair is first loaded into
a throwaway SSLContext: only a pair that loads makes granian respawn its worker, which reads the files
again; new handshakes get the new certificate, and a half-written pair is retried on the next tick
while the old certificate keeps serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import ssl
from pathlib import Path

import uvloop
from granian.constants import HTTPModes, Interfaces
from granian.server.embed import Server

from gpufleet.webhook.app import WebhookApp
from gpufleet.webhook.telemetry import LOGGER

log = logging.getLogger(LOGGER)
RELOAD_SECONDS = 10.0


def file_stamp(*paths: Path) -> tuple[tuple[int, int], ...]:
    """What tells a renewed file: its modification time and size ((-1, -1) while it is missing)."""
    out = []
    for path in paths:
        try:
            st = path.stat()
            out.append((st.st_mtime_ns, st.st_size))
        except OSError:
            out.append((-1, -1))
    return tuple(out)


def loads(cert: Path, key: Path) -> str | None:
    """Why the pair does not load as a TLS server's certificate, or None when it does."""
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(str(cert), str(key))
    except (OSError, ssl.SSLError) as exc:
        return str(exc)
    return None


class WebhookServer:
    """granian over TLS, embedded in the running event loop, plus its certificate watcher."""

    def __init__(
        self,
        app: WebhookApp,
        *,
        cert: Path,
        key: Path,
        host: str = "127.0.0.1",
        port: int = 8443,
        reload_seconds: float = RELOAD_SECONDS,
    ) -> None:
        self.cert, self.key, self.reload_seconds = cert, key, reload_seconds
        self.server = Server(
            app,
            address=host,
            port=port,
            interface=Interfaces.RSGI,  # granian calls the app's __rsgi__
            http=HTTPModes.auto,
            websockets=False,
            log_enabled=False,
            ssl_cert=cert,
            ssl_key=key,
        )
        self.server.on_startup(self._listening)
        self.reloads = 0
        self.started = False
        self._loop: asyncio.AbstractEventLoop | None = None

    def _listening(self) -> None:
        self.started = True  # the socket is bound and listening; the worker starts right after

    def stop(self) -> None:
        """Stop serving; safe to call from another thread."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self.server.stop)

    def reload_certificate(self) -> bool:
        """Serve the current files; False (old pair kept) when they do not load."""
        error = loads(self.cert, self.key)
        if error is not None:
            log.warning("certificate not reloaded", extra={"fields": {"cert": str(self.cert), "error": error}})
            return False
        self.server.reload()  # type: ignore[no-untyped-call]  # granian leaves it unannotated
        self.reloads += 1
        log.info("certificate reloaded", extra={"fields": {"cert": str(self.cert), "reloads": self.reloads}})
        return True

    async def _watch(self) -> None:
        seen = file_stamp(self.cert, self.key)
        while True:
            await asyncio.sleep(self.reload_seconds)
            now = file_stamp(self.cert, self.key)
            if now != seen and self.reload_certificate():
                seen = now

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
