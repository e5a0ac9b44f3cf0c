"""Fixtures shared across the suite: the example fleet and its admission facts (rules, CEL, webhook tests)."""

from __future__ import annotations

import pytest

from gpufleet.check.facts import AdmissionFacts, admission_facts
from gpufleet.check.manifests import validating_admission_policy
from gpufleet.check.offline import OfflinePolicy
from gpufleet.compiled import running
from gpufleet.policy import Fleet, load_policy, resolve
from tests.fuzz.tally import pytest_sessionfinish, pytest_terminal_summary, pytest_testnodedown
from tests.support import EXAMPLES

__all__ = ["pytest_sessionfinish", "pytest_terminal_summary", "pytest_testnodedown"]  # the fuzz tally's hooks


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """``pure`` tests reach inside compiled modules (the twin, the simulator, placement), which the
    compiled build hides from Python (a spy on a method, a patched global, a subclass): on it they
    are skipped, and ``make test`` runs them again from source (``GPUFLEET_PURE=1 pytest -m pure``)."""
    if not running():
        return
    skip = pytest.mark.skip(reason="reaches inside compiled code: `make test` runs it from source")
    for item in items:
        if item.get_closest_marker("pure"):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def fleet() -> Fleet:
    return resolve(load_policy(EXAMPLES / "fleet.yaml"))


@pytest.fixture(scope="session")
def facts(fleet: Fleet) -> AdmissionFacts:
    return admission_facts(fleet)


@pytest.fixture(scope="session")
def offline(fleet: Fleet) -> OfflinePolicy:
    return OfflinePolicy(validating_admission_policy(fleet)[0]["spec"])
