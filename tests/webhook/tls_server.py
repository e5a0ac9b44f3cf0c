"""Run the real webhook (granian over TLS on 127.0.0.1, a trustme certificate) in a background thread."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trustme
from cryptography import x509

from gpufleet.check.facts import AdmissionFacts
from gpufleet.webhook.app import create_app
from gpufleet.webhook.server import WebhookServer
from gpufleet.webhook.tls import Listen

ROOT = Path(__file__).resolve().parents[2]
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
    server = WebhookServer(create_app(facts), Listen(cert, key, "127.0.0.1", port, reload_seconds))
    thread = serve_in_thread(server)
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return Running(server, f"https://127.0.0.1:{port}", thread, context)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def served_serial(port: int, context: ssl.SSLContext) -> int:
    """The serial number of the certificate a new TLS handshake gets."""
    with (
        socket.create_connection(("127.0.0.1", port)) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


@dataclass
class ServeCommand:
    """``gpufleet webhook serve`` on examples/fleet.yaml as a user runs it, healthy once entered; its
    JSON log lines (stderr) in ``lines`` once left (it is stopped with SIGTERM, as Kubernetes does)."""

    ca: trustme.CA
    folder: Path
    args: tuple[str, ...] = ()
    port: int = field(default_factory=free_port)
    lines: list[dict[str, Any]] = field(default_factory=list)
    returncode: int | None = None

    def __post_init__(self) -> None:
        self.cert, self.key = write_pair(self.ca, self.folder)
        self.context = ssl.create_default_context()
        self.ca.configure_trust(self.context)

    def client(self, **kwargs: Any) -> httpx2.Client:
        return httpx2.Client(base_url=f"https://127.0.0.1:{self.port}", verify=self.context, timeout=10, **kwargs)

    def _log_if_dead(self) -> str:
        return "" if self.alive() else self.log.read_text(errors="replace")

    def lines_so_far(self) -> list[dict[str, Any]]:
        """The JSON log lines written so far (a line being written is left for the next look)."""
        text = self.log.read_text(errors="replace")
        return [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines() if line.startswith("{")]

    def __enter__(self) -> ServeCommand:
        command = [sys.executable, "-m", "gpufleet", "webhook", "serve", str(ROOT / "examples" / "fleet.yaml")]
        command += ["--cert", str(self.cert), "--key", str(self.key), "--host", "127.0.0.1"]
        command += ["--port", str(self.port), *self.args]
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        self.log = self.folder / "serve.log"
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=out)
        with self.client() as c:

            def healthy() -> bool:
                try:
                    return c.get("/healthz").status_code == 200
                except httpx2.TransportError:
                    return False

            wait_until(
                healthy, "`gpufleet webhook serve` to answer /healthz", alive=self.alive, log=self._log_if_dead,
                poll_s=0.1,
            )  # fmt: skip
        return self

    def alive(self) -> bool:
        return self.process.poll() is None

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        try:
            self.returncode = self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.returncode = self.process.wait()
        self.lines = self.lines_so_far()
