"""The webhook's metrics (Prometheus) and its structured logs (one JSON object per line)."""

from __future__ import annotations

import atexit
import json
import logging
import os
import queue
import select
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, TextIO

import msgspec
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest, values
from prometheus_client.multiprocess import MultiProcessCollector

LOGGER = "gpufleet.webhook"
_ENCODER = msgspec.json.Encoder(enc_hook=str)  # what JSON has no type for is written as its text
# admission latency lives well under the API server's timeout; buckets resolve the sub-millisecond range
MAX_BATCH = 1000  # records per write at most
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, message, and the record's ``fields``.

    The webhook writes one line per review, so the line is cheap to build: msgspec encodes it (the
    standard library only where msgspec cannot, e.g. a lone surrogate in a label) and the time's
    seconds are formatted once per second, not once per line.
    """

    def __init__(self, pid: bool = False) -> None:
        super().__init__()
        self._stamp: tuple[int, str] = (-1, "")
        self._pid = {"pid": os.getpid()} if pid else {}  # which of several worker processes wrote the line

    def _time(self, record: logging.LogRecord) -> str:
        second = int(record.created)
        stamp = self._stamp
        if stamp[0] != second:
            stamp = self._stamp = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
        return f"{stamp[1]}.{int(record.msecs):03d}Z"

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": self._time(record),
            "level": record.levelname.lower(),
            "msg": record.getMessage(),
            **self._pid,
        }
        entry.update(getattr(record, "fields", {}))
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        try:
            return _ENCODER.encode(entry).decode()
        except (TypeError, UnicodeEncodeError):
            return json.dumps(entry, separators=(",", ":"), default=str)


class LineWriter(logging.Handler):
    """Writes the log's lines from a thread of its own, in batches, off the request path.

    A write is a system call, during which Python lets another thread take the interpreter lock; on
    the one thread that answers every review, each review's own write cost a lock hand-over too. So
    the request path only queues the record; this thread formats whatever has queued and writes it
    with one call. Every record is written, in order, moments later. ``flush`` (and ``close``, which
    logging calls when it is reconfigured or shut down, and the exit of the process) returns once
    everything queued before it is written; the thread keeps writing after ``close``, as a
    StreamHandler does, because granian's start reconfigures logging and closes every handler. A
    ``kill -9`` can lose the lines of the last moments, which a direct write would have kept.
    """

    def __init__(self, stream: TextIO | None = None) -> None:
        super().__init__()
        self.stream = stream if stream is not None else sys.stderr
        self._queue: queue.SimpleQueue[logging.LogRecord | threading.Event | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._drain, name="gpufleet-webhook-log", daemon=True)
        self._thread.start()
        atexit.register(self.flush)

    def emit(self, record: logging.LogRecord) -> None:
        self._queue.put(record)

    def _drain(self) -> None:
        while True:
            batch = [self._queue.get()]
            while len(batch) < MAX_BATCH:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            lines = []
            for item in batch:
                if isinstance(item, logging.LogRecord):
                    try:
                        lines.append(self.format(item) + "\n")
                    except Exception:
                        self.handleError(item)
            try:
                for chunk in _chunks(lines):
                    self.stream.write(chunk)
                    self.stream.flush()
            except Exception:  # a closed or broken stream: nothing to write the failure to either
                pass
            for item in batch:
                if isinstance(item, threading.Event):
                    item.set()
            if None in batch:
                return

    def flush(self) -> None:
        """Return once every record queued so far is written (or after 10 s)."""
        if self._thread.is_alive():
            written = threading.Event()
            self._queue.put(written)
            written.wait(timeout=10)

    def close(self) -> None:
        self.flush()
        super().close()

    def stop(self) -> None:
        """Write what is queued and end the thread (a replaced writer)."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join(timeout=10)
        atexit.unregister(self.flush)
        self.close()


def _chunks(lines: list[str]) -> list[str]:
    """Whole lines joined into writes of at most PIPE_BUF bytes where they fit: a write that size to a
    pipe is atomic, so the lines of several worker processes sharing one stderr never interleave."""
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    for line in lines:
        n = len(line.encode())
        if current and size + n > select.PIPE_BUF:
            chunks.append("".join(current))
            size, current = 0, []
        current.append(line)
        size += n
    if current:
        chunks.append("".join(current))
    return chunks


def configure_logging(level: str = "info", stream: TextIO | None = None, *, pid: bool = False) -> None:
    """JSON lines on ``stream`` (stderr) for the webhook's logger and granian's, written by a LineWriter
    (``pid``: each line says which process wrote it, for several workers)."""
    handler = LineWriter(stream)
    handler.setFormatter(JsonFormatter(pid))
    previous = {h for name in (LOGGER, "_granian") for h in logging.getLogger(name).handlers}
    for name in (LOGGER, "_granian"):
        logger = logging.getLogger(name)
        logger.handlers = [handler]
        logger.setLevel(level.upper())
        logger.propagate = False
    for old in previous:
        if isinstance(old, LineWriter):
            old.stop()
    # granian warns that its embedded mode is experimental at every start; its errors still show
    logging.getLogger("_granian").setLevel(max(logging.ERROR, logging.getLogger(LOGGER).level))


@dataclass
class Metrics:
    """Per-app metrics on a registry of their own, so several apps (tests) never collide."""

    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    # a worker of several (``webhook.workers``): the values live in this directory's files, shared by all
    multiprocess_dir: str | None = None

    def __post_init__(self) -> None:
        if self.multiprocess_dir is not None and values.ValueClass is values.MutexValue:
            raise RuntimeError(
                "prometheus_client was imported before PROMETHEUS_MULTIPROC_DIR was set: counts would stay in this process"
            )
        self.reviews = Counter(
            "gpufleet_webhook_reviews", "AdmissionReviews answered", ["endpoint", "outcome"], registry=self.registry
        )
        self.denials = Counter(
            "gpufleet_webhook_denials", "Denials by machine reason", ["reason"], registry=self.registry
        )
        self.latency = Histogram(
            "gpufleet_webhook_review_seconds",
            "Time to answer a review",
            ["endpoint"],
            buckets=BUCKETS,
            registry=self.registry,
        )

    def exposition(self) -> bytes:
        """The text a scrape of ``/metrics`` gets: this app's metrics, or every worker's added up."""
        if self.multiprocess_dir is None:
            return generate_latest(self.registry)
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=self.multiprocess_dir)  # type: ignore[no-untyped-call]
        return generate_latest(registry)
