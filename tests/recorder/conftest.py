"""Fixtures for recorder tests: the API test double, a kubeconfig pointing at it, and ledgers.

The API server here is kmock's emulator extended by ``emulator.RVEmulator``: an HTTP-level test
double, because the real control plane (a later issue) is not built yet.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ledger import ledger_backends
from tests.recorder import recorder_children

_names = itertools.count()
postgres_url = ledger_backends.postgres_url


@pytest.fixture
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    database = f"recorder_{next(_names)}"
    return ledger_backends.backend_url(request, tmp_path, sqlite="ledger.db", database=database)


@pytest.fixture(autouse=True)
def _no_recorder_left() -> Iterator[None]:
    """However a test ends (passed, failed, interrupted), no ``gpufleet record`` child it started runs on."""
    yield
    recorder_children.stop_all()
