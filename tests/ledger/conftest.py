"""Fixtures for ledger tests: a ledger on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufleet.ledger.store import Ledger
from tests.ledger import ledger_backends

_names = itertools.count()


postgres_url = ledger_backends.postgres_url


@pytest.fixture
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty ledger URL on the backend named by the ``backend`` parameter."""
    n = next(_names)
    return ledger_backends.backend_url(request, tmp_path, sqlite=f"ledger-{n}.db", database=f"ledger_{n}")


@pytest.fixture
def ledger(ledger_url: str) -> Iterator[Ledger]:
    with Ledger.open(ledger_url) as opened:
        yield opened
