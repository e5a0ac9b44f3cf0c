"""The example fleet, its offline policy, and a real webhook over TLS shared by a test module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
import trustme

from gpufleet.check.facts import AdmissionFacts
from tests.webhook.tls_server import Running, start

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="session")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def webhook(facts: AdmissionFacts, ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    running = start(facts, ca, tmp_path_factory.mktemp("tls"))
    yield running
    running.server.stop()
    running.thread.join(timeout=10)


@pytest.fixture(scope="module")
def client(webhook: Running) -> Iterator[httpx2.Client]:
    with webhook.client() as c:
        yield c
