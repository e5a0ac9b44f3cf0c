"""Run the real webhook (granian over TLS on 127.0.0.1, a trustme certificate) in a background thread."""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx2
import pytest
import trustme

from gpufleet.check.facts import AdmissionFacts
from gpufleet.webhook.app import create_app
from gpufleet.webhook.server import WebhookServer

HANG_GUARD_S = 120.0  # how long a wait may last before the test fails: a hang guard, not a speed claim


def wait_until(
    condition: Callable[[], bool],
    what: str,
    *,
    alive: Callable[[], bool] = lambda: True,
    log: Callable[[], str] = lambda: "",
    poll_s: float = 0.02,
) -> None:
    """Poll ``condition`` until it holds. It fails the test, saying what it waited for (and the
    server's log), as soon as the server has died, or after ``HANG_GUARD_S``. A slow machine
    only makes the test slower: no wall-clock figure is asserted."""
    deadline = time.monotonic() + HANG_GUARD_S
    while not condition():
        if not alive():
            pytest.fail(f"{what}: the server exited first\n{log()}")
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: still not after {HANG_GUARD_S:.0f} s (a hang)\n{log()}")
        time.sleep(poll_s)


def serve_in_thread(server: WebhookServer) -> threading.Thread:
    """Start ``server`` on a daemon thread and return once it accepts connections."""
    thread = threading.Thread(target=asyncio.run, args=(server.serve(),), daemon=True)
    thread.start()
    wait_until(lambda: server.started, "the webhook to start", alive=thread.is_alive)
    return thread


def write_pair(ca: trustme.CA, folder: Path) -> tuple[Path, Path]:
    issued = ca.issue_cert("127.0.0.1", "localhost")
    cert, key = folder / "tls.crt", folder / "tls.key"
    tmp_cert, tmp_key = folder / ".tls.crt", folder / ".tls.key"
    for blob, path in (
        (b"".join(p.bytes() for p in issued.cert_chain_pems), tmp_cert),
        (issued.private_key_pem.bytes(), tmp_key),
    ):
        path.write_bytes(blob)
    tmp_key.replace(key)
    tmp_cert.replace(cert)
    return cert, key


@dataclass
class Running:
    server: WebhookServer
    url: str
    thread: threading.Thread
    client_context: ssl.SSLContext

    def client(self) -> httpx2.Client:
        return httpx2.Client(base_url=self.url, verify=self.client_context, timeout=10)


def start(facts: AdmissionFacts, ca: trustme.CA, folder: Path, reload_seconds: float = 10.0) -> Running:
    cert, key = write_pair(ca, folder)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = WebhookServer(
        create_app(facts), cert=cert, key=key, host="127.0.0.1", port=port, reload_seconds=reload_seconds
    )
    thread = serve_in_thread(server)
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return Running(server, f"https://127.0.0.1:{port}", thread, context)
