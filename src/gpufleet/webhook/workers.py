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
import multiprocessing
import os
import tempfile
import threading
from pathlib import Path

from granian.constants import HTTPModes, Interfaces, Loops
from granian.server.mp import MPServer

from gpufleet.webhook.app import WebhookApp
from gpufleet.webhook.tls import Listen, Renewal

ENV_POLICY = "GPUFLEET_WEBHOOK_POLICY"
ENV_CLUSTER = "GPUFLEET_WEBHOOK_CLUSTER"  # a federated policy's worker cluster; unset: the manager
ENV_LOG_LEVEL = "GPUFLEET_WEBHOOK_LOG_LEVEL"
ENV_METRICS = "PROMETHEUS_MULTIPROC_DIR"  # prometheus_client's own name for it


def worker_app() -> WebhookApp:
    """The app of one worker process (granian calls this factory in each)."""
    from gpufleet.check.residency import cluster_facts
    from gpufleet.policy import load_policy, resolve
    from gpufleet.webhook.app import create_app
    from gpufleet.webhook.telemetry import Metrics, configure_logging

    configure_logging(os.environ.get(ENV_LOG_LEVEL, "info"), pid=True)
    app = create_app(
        cluster_facts(resolve(load_policy(Path(os.environ[ENV_POLICY]))), os.environ.get(ENV_CLUSTER) or None),
        Metrics(multiprocess_dir=os.environ[ENV_METRICS]),
    )
    gc.collect()
    gc.freeze()  # as the single-process server does: a full collection over start-up's objects stalls reviews
    return app


class WorkerPool:
    """granian's main process over ``workers`` RSGI worker processes, plus the certificate watcher."""

    def __init__(
        self, policy: Path, listen: Listen, *, workers: int, log_level: str = "info", cluster: str | None = None
    ) -> None:
        self.policy, self.listen, self.workers, self.log_level = policy.resolve(), listen, workers, log_level
        self.cluster = cluster
        self.renewal = Renewal(listen.cert, listen.key)
        self._stopped = threading.Event()

    def _watch(self, server: MPServer) -> None:
        while not self._stopped.wait(self.listen.reload_seconds):
            if self.renewal.renewed():
                server.signal_handler_reload()  # type: ignore[no-untyped-call]  # as granian's SIGHUP: respawn the workers
                self.renewal.reloaded()

    def run(self) -> None:
        """Serve until SIGTERM or SIGINT (granian's main process handles both)."""
        multiprocessing.set_start_method("spawn", force=True)  # see the module's docstring
        with tempfile.TemporaryDirectory(prefix="gpufleet-webhook-metrics-") as metrics:
            os.environ.update({ENV_POLICY: str(self.policy), ENV_LOG_LEVEL: self.log_level, ENV_METRICS: metrics})
            os.environ[ENV_CLUSTER] = self.cluster or ""
            server = MPServer(
                f"{__name__}:worker_app",
                address=self.listen.host,
                port=self.listen.port,
                interface=Interfaces.RSGI,
                factory=True,
                workers=self.workers,
                loop=Loops.uvloop,
                http=HTTPModes.auto,
                websockets=False,
                log_enabled=False,
                ssl_cert=self.listen.cert,
                ssl_key=self.listen.key,
            )
            watcher = threading.Thread(target=self._watch, args=(server,), name="gpufleet-webhook-certs", daemon=True)
            watcher.start()
            try:
                server.serve()
            finally:
                self._stopped.set()
                watcher.join(timeout=self.listen.reload_seconds + 1)
