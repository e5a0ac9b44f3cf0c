"""Fixtures shared across the suite: the example fleet and its admission facts (rules, CEL, webhook tests)."""

from __future__ import annotations

import pytest

from gpufleet.check.facts import AdmissionFacts, admission_facts
from gpufleet.check.manifests import validating_admission_policy
from gpufleet.check.offline import OfflinePolicy
from gpufleet.policy import Fleet, load_policy, resolve
from tests.fuzz.tally import pytest_sessionfinish, pytest_terminal_summary, pytest_testnodedown
from tests.support import EXAMPLES

__all__ = ["pytest_sessionfinish", "pytest_terminal_summary", "pytest_testnodedown"]  # the fuzz tally's hooks


@pytest.fixture(scope="session")
def fleet() -> Fleet:
    return resolve(load_policy(EXAMPLES / "fleet.yaml"))


@pytest.fixture(scope="session")
def facts(fleet: Fleet) -> AdmissionFacts:
    return admission_facts(fleet)


@pytest.fixture(scope="session")
def offline(fleet: Fleet) -> OfflinePolicy:
    return OfflinePolicy(validating_admission_policy(fleet)[0]["spec"])
