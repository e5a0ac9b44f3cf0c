"""The two database backends every storage test runs on (PostgreSQL tests share one xdist worker),
and the fixtures' bodies that the ledger, recorder and e2e suites share: a real PostgreSQL server
for the session, and a fresh ledger on the backend a test is parametrized with."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ledger.ledger_pgserver import create_database, find_bin_dir, postgres_server

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgresql", marks=pytest.mark.xdist_group("postgres")),
]


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A real PostgreSQL server's base URL (tests/ledger/ledger_pgserver.py), or the test skipped."""
    if find_bin_dir() is None:
        pytest.skip("PostgreSQL server binaries not found: run .ci/setup.d/postgres.sh (apt package postgresql)")
    with postgres_server() as url:
        yield url


def backend_url(request: pytest.FixtureRequest, tmp_path: Path, *, sqlite: str, database: str) -> str:
    """A fresh, empty ledger URL on the backend named by the test's ``ledger_url`` parameter (SQLite
    when it has none): the file ``sqlite`` in ``tmp_path``, or a new database ``database`` on the
    session's server (``postgres_url``, only started when a test asks for PostgreSQL)."""
    backend: str = request.param if hasattr(request, "param") else "sqlite"
    if backend == "sqlite":
        return str(tmp_path / sqlite)
    base: str = request.getfixturevalue("postgres_url")
    return create_database(base, database)
