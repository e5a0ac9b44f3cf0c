"""Several review processes behind one port (``gpufleet webhook serve --workers N``).

In the single-process server (``server.py``) one Python thread answers every review, and at 16
concurrent clients on two cores that thread is what the clients wait for (docs/admission.md). With
N workers, granian's main process holds the listening socket and N worker processes accept from it,
each running the same app in its own interpreter.

- The workers are spawned, not forked: each imports prometheus_client afresh with
  ``PROMETHEUS_MULTIPROC_DIR`` set, so its counters live in that directory's files and any
  worker's ``/metrics`` adds up all of them (prometheus_client's multiprocess mode). The main
  process makes the directory empty at start and removes it at exit; counts survive a respawn.
- Each worker builds the policy's facts from the file itself (passed in the environment), as the
  command checked it before starting any.
- A renewed certificate: the main process watches the files and, once a new pair loads, asks
  granian to respawn its workers one after another (what its SIGHUP does); each new worker reads
  the files again.
"""

from __future__ import annotations

import gc
import logging
import multiprocessing
import os
import tempfile
import threading
from pathlib import Path

from granian.constants import HTTPModes, Interfaces, Loops
from granian.server.mp import MPServer

from gpufleet.webhook.app import WebhookApp
from gpufleet.webhook.server import RELOAD_SECONDS, file_stamp, loads
from gpufleet.webhook.telemetry import LOGGER

log = logging.getLogger(LOGGER)
ENV_POLICY = "GPUFLEET_WEBHOOK_POLICY"
ENV_LOG_LEVEL = "GPUFLEET_WEBHOOK_LOG_LEVEL"
ENV_METRICS = "PROMETHEUS_MULTIPROC_DIR"  # prometheus_client's own name for it


def worker_app() -> WebhookApp:
    """The app of one worker process (granian calls this factory in each)."""
    from gpufleet.check.facts import admission_facts
    from gpufleet.policy import load_policy, resolve
    from gpufleet.webhook.app import create_app
    from gpufleet.webhook.telemetry import Metrics, configure_logging

    configure_logging(os.environ.get(ENV_LOG_LEVEL, "info"), pid=True)
    app = create_app(
        admission_facts(resolve(load_policy(Path(os.environ[ENV_POLICY])))),
        Metrics(multiprocess_dir=os.environ[ENV_METRICS]),
    )
    gc.collect()
    gc.freeze()  # as the single-process server does: a full collection over start-up's objects stalls reviews
    return app


class WorkerPool:
    """granian's main process over ``workers`` RSGI worker processes, plus the certificate watcher."""

    def __init__(
        self,
        policy: Path,
        *,
        cert: Path,
        key: Path,
        workers: int,
        host: str = "127.0.0.1",
        port: int = 8443,
        reload_seconds: float = RELOAD_SECONDS,
        log_level: str = "info",
    ) -> None:
        self.policy, self.cert, self.key, self.workers = policy.resolve(), cert, key, workers
        self.host, self.port, self.reload_seconds, self.log_level = host, port, reload_seconds, log_level
        self.reloads = 0
        self._stopped = threading.Event()

    def _watch(self, server: MPServer) -> None:
        seen = file_stamp(self.cert, self.key)
        while not self._stopped.wait(self.reload_seconds):
            now = file_stamp(self.cert, self.key)
            if now == seen:
                continue
            error = loads(self.cert, self.key)
            if error is not None:  # half-written: the old pair keeps serving, the next tick tries again
                log.warning("certificate not reloaded", extra={"fields": {"cert": str(self.cert), "error": error}})
                continue
            seen = now
            self.reloads += 1
            log.info("certificate reloaded", extra={"fields": {"cert": str(self.cert), "reloads": self.reloads}})
            server.signal_handler_reload()  # type: ignore[no-untyped-call]  # as granian's SIGHUP: respawn the workers

    def run(self) -> None:
        """Serve until SIGTERM or SIGINT (granian's main process handles both)."""
        multiprocessing.set_start_method("spawn", force=True)  # see the module's docstring
        with tempfile.TemporaryDirectory(prefix="gpufleet-webhook-metrics-") as metrics:
            os.environ.update({ENV_POLICY: str(self.policy), ENV_LOG_LEVEL: self.log_level, ENV_METRICS: metrics})
            server = MPServer(
                f"{__name__}:worker_app",
                address=self.host,
                port=self.port,
                interface=Interfaces.RSGI,
                factory=True,
                workers=self.workers,
                loop=Loops.uvloop,
                http=HTTPModes.auto,
                websockets=False,
                log_enabled=False,
                ssl_cert=self.cert,
                ssl_key=self.key,
            )
            watcher = threading.Thread(target=self._watch, args=(server,), name="gpufleet-webhook-certs", daemon=True)
            watcher.start()
            try:
                server.serve()
            finally:
                self._stopped.set()
                watcher.join(timeout=self.reload_seconds + 1)
