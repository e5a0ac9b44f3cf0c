"""Serve the webhook over TLS with uvicorn, and pick up a renewed certificate without a restart.

uvicorn reads the certificate once. cert-manager renews it in place (a Secret volume swaps its files),
so a watcher polls the files' modification times and loads the new pair into the server's own
SSLContext: new handshakes get the new certificate, open connections keep theirs. A half-written pair
fails to load and is retried on the next tick, while the old certificate keeps serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from pathlib import Path

import uvicorn
import uvloop
from starlette.types import ASGIApp

from gpufleet.webhook.telemetry import LOGGER

log = logging.getLogger(LOGGER)
RELOAD_SECONDS = 10.0


def _stamp(*paths: Path) -> tuple[tuple[int, int], ...]:
    out = []
    for path in paths:
        try:
            st = path.stat()
            out.append((st.st_mtime_ns, st.st_size))
        except OSError:
            out.append((-1, -1))
    return tuple(out)


class WebhookServer:
    """A uvicorn server over TLS plus its certificate watcher."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        cert: Path,
        key: Path,
        host: str = "127.0.0.1",
        port: int = 8443,
        reload_seconds: float = RELOAD_SECONDS,
    ) -> None:
        self.cert, self.key, self.reload_seconds = cert, key, reload_seconds
        self.config = uvicorn.Config(
            app,
            host=host,
            port=port,
            ssl_certfile=str(cert),
            ssl_keyfile=str(key),
            log_config=None,
            access_log=False,
            lifespan="off",
            timeout_keep_alive=30,
        )
        self.server = uvicorn.Server(self.config)
        self.reloads = 0

    @property
    def started(self) -> bool:
        return self.server.started

    def stop(self) -> None:
        self.server.should_exit = True

    def reload_certificate(self) -> bool:
        """Load the current files into the live SSLContext; False (old pair kept) when they do not load."""
        context: ssl.SSLContext | None = self.config.ssl
        if context is None:
            return False
        try:
            context.load_cert_chain(str(self.cert), str(self.key))
        except (OSError, ssl.SSLError) as exc:
            log.warning("certificate not reloaded", extra={"fields": {"cert": str(self.cert), "error": str(exc)}})
            return False
        self.reloads += 1
        log.info("certificate reloaded", extra={"fields": {"cert": str(self.cert), "reloads": self.reloads}})
        return True

    async def _watch(self) -> None:
        seen = _stamp(self.cert, self.key)
        while True:
            await asyncio.sleep(self.reload_seconds)
            now = _stamp(self.cert, self.key)
            if now != seen and self.reload_certificate():
                seen = now

    def run(self) -> None:
        """Serve until stopped, on uvloop (what uvicorn itself picks; it comes with uvicorn[standard])."""
        uvloop.run(self.serve())

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        watcher = asyncio.create_task(self._watch())
        try:
            await self.server.serve(sockets=sockets)
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
