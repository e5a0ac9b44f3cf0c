"""The bundled example fleet, its admission facts and its ValidatingAdmissionPolicy run offline."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet.check.facts import AdmissionFacts, admission_facts
from gpufleet.check.manifests import validating_admission_policy
from gpufleet.check.offline import OfflinePolicy
from gpufleet.policy import Fleet, load_policy, resolve

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="session")
def fleet() -> Fleet:
    return resolve(load_policy(EXAMPLES / "fleet.yaml"))


@pytest.fixture(scope="session")
def facts(fleet: Fleet) -> AdmissionFacts:
    return admission_facts(fleet)


@pytest.fixture(scope="session")
def offline(fleet: Fleet) -> OfflinePolicy:
    return OfflinePolicy(validating_admission_policy(fleet)[0]["spec"])
