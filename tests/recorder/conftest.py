"""Fixtures for recorder tests: the API test double, a kubeconfig pointing at it, and ledgers.

The API server here is kmock's emulator extended by ``emulator.RVEmulator``: an HTTP-level test
double, because the real control plane (a later issue) is not built yet.
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

_LEDGER_TESTS = Path(__file__).resolve().parents[1] / "ledger"


def _load(name: str) -> object:
    spec = importlib.util.spec_from_file_location(name, _LEDGER_TESTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


pgserver = _load("ledger_pgserver")
_names = itertools.count()


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    if pgserver.find_bin_dir() is None:  # type: ignore[attr-defined]
        pytest.skip(
            "PostgreSQL server binaries not found: run .ci/setup.d/postgres.sh (apt package postgresql)"
        )
    with pgserver.postgres_server() as url:  # type: ignore[attr-defined]
        yield url


@pytest.fixture
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    backend: str = request.param if hasattr(request, "param") else "sqlite"
    if backend == "sqlite":
        return str(tmp_path / "ledger.db")
    base: str = request.getfixturevalue("postgres_url")
    return str(pgserver.create_database(base, f"recorder_{next(_names)}"))  # type: ignore[attr-defined]
