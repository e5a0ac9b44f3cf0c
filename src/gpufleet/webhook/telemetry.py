"""The webhook's metrics (Prometheus) and its structured logs (one JSON object per line)."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import msgspec
from prometheus_client import CollectorRegistry, Counter, Histogram

LOGGER = "gpufleet.webhook"
_ENCODER = msgspec.json.Encoder(enc_hook=str)  # what JSON has no type for is written as its text
# admission latency lives well under the API server's timeout; buckets resolve the sub-millisecond range
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, message, and the record's ``fields``.

    The webhook writes one line per review, so the line is cheap to build: msgspec encodes it (the
    standard library only where msgspec cannot, e.g. a lone surrogate in a label) and the time's
    seconds are formatted once per second, not once per line.
    """

    def __init__(self) -> None:
        super().__init__()
        self._stamp: tuple[int, str] = (-1, "")

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
        }
        entry.update(getattr(record, "fields", {}))
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        try:
            return _ENCODER.encode(entry).decode()
        except (TypeError, UnicodeEncodeError):
            return json.dumps(entry, separators=(",", ":"), default=str)


def configure_logging(level: str = "info") -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    for name in (LOGGER, "_granian"):
        logger = logging.getLogger(name)
        logger.handlers = [handler]
        logger.setLevel(level.upper())
        logger.propagate = False
    # granian warns that its embedded mode is experimental at every start; its errors still show
    logging.getLogger("_granian").setLevel(max(logging.ERROR, logging.getLogger(LOGGER).level))


@dataclass
class Metrics:
    """Per-app metrics on a registry of their own, so several apps (tests) never collide."""

    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
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
