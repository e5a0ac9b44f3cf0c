"""Fixtures for ledger tests: a ledger on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from ledger_pgserver import create_database, find_bin_dir, postgres_server

from gpufleet.ledger.store import Ledger

_names = itertools.count()


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    if find_bin_dir() is None:
        pytest.skip(
            "PostgreSQL server binaries not found: run .ci/setup.d/postgres.sh (apt package postgresql)"
        )
    with postgres_server() as url:
        yield url


@pytest.fixture
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty ledger URL on the backend named by the ``backend`` parameter."""
    backend: str = request.param if hasattr(request, "param") else "sqlite"
    if backend == "sqlite":
        return str(tmp_path / f"ledger-{next(_names)}.db")
    base: str = request.getfixturevalue("postgres_url")
    return create_database(base, f"ledger_{next(_names)}")


@pytest.fixture
def ledger(ledger_url: str) -> Iterator[Ledger]:
    with Ledger.open(ledger_url) as opened:
        yield opened
