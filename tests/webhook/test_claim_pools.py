"""Two full-card DRA pools of different models: a claim must select its pool, judged alike by all three.

Kueue v0.19.2 counts a claim as its mapped quota resource (``nvidia.com/gpu`` for every full-card
DeviceClass) and its flavor assigner (``pkg/scheduler/flavorassigner``) matches a flavor by that resource
and the pod's node selector only, never by the DeviceClass: an A100 claim may be given the H100 pool's
flavor, whose node labels Kueue then injects, and kube-scheduler finds no A100 there. The rules refuse a
claim whose candidate pools include one without its device (``GPUClaimPoolNotSelected``) and name the
node selector to add. Table-driven over ``tests/check/claim_cases.py`` (TWO_MODEL_CASES); the e2e test
``tests/e2e/test_dra_on_testbed.py`` shows the real Kueue misplacing the unpinned claim.
"""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

from gpufleet.check.facts import AdmissionFacts, admission_facts
from gpufleet.check.manifests import validating_admission_policy
from gpufleet.check.offline import OfflinePolicy
from gpufleet.check.rules import judge
from gpufleet.policy import Fleet
from tests.check.claim_cases import A100, H100, TWO_MODEL_CASES, dra_fleet, two_model_policy_text
from tests.webhook.test_differential import webhook_messages


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    return dra_fleet(tmp_path_factory.mktemp("two-models"), two_model_policy_text())


@pytest.fixture(scope="module")
def facts(fleet: Fleet) -> AdmissionFacts:
    return admission_facts(fleet)


@pytest.fixture(scope="module")
def offline(fleet: Fleet) -> OfflinePolicy:
    return OfflinePolicy(validating_admission_policy(fleet)[0]["spec"])


def test_the_message_names_each_templates_pool_selector(facts: AdmissionFacts) -> None:
    alpha = facts.team_of("alpha")
    assert alpha is not None
    assert alpha.pins_text(facts.claim_quota) == (
        f"{A100} on pool mig (gpufleet.io/pool=mig); {H100} on pool train (gpufleet.io/pool=train)"
    )


@pytest.mark.parametrize(("obj", "reasons"), [c[1:] for c in TWO_MODEL_CASES], ids=[c[0] for c in TWO_MODEL_CASES])
def test_python_cel_and_webhook_refuse_an_unpinned_claim_alike(
    obj: dict[str, Any], reasons: list[str], facts: AdmissionFacts, offline: OfflinePolicy, client: httpx2.Client
) -> None:
    python = [d.message for d in judge(facts, obj, "alpha")]
    print(python)
    assert [m.split(":")[0] for m in python] == reasons
    assert offline.judge(obj, "alpha") == python
    assert webhook_messages(client, obj, "alpha") == python


def test_a_single_model_fleet_needs_no_pin(tmp_path_factory: pytest.TempPathFactory) -> None:
    """On the e2e DRA fleet (H100 whole cards, A100 MIG) no two pools share a quota resource: nothing to pin."""
    facts = admission_facts(dra_fleet(tmp_path_factory.mktemp("one-model")))
    alpha = facts.team_of("alpha")
    assert alpha is not None
    assert alpha.pins_text(facts.claim_quota) == "none"
