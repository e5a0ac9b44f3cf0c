"""Three enforcers, one truth: the Python rules, the rendered CEL and the webhook over HTTPS agree.

Each generated manifest is judged three ways: ``rules.judge`` in process, the ValidatingAdmissionPolicy's
CEL through cel-expr-python, and a real uvicorn webhook over TLS. The messages must be identical, in
order. The mutating side is held to the API server's order too: after the webhook's patch, the CEL and
the Python rules still agree, and a missing queue name is no longer a reason.
"""

from __future__ import annotations

import base64
import itertools
import json
from pathlib import Path
from typing import Any

import httpx2
import pytest
from hypothesis import HealthCheck, event, given, settings

from gpufleet.check.facts import AdmissionFacts, admission_facts
from gpufleet.check.mutation import apply
from gpufleet.check.offline import OfflinePolicy
from gpufleet.check.rules import judge
from gpufleet.policy import load_policy, resolve
from tests.webhook.manifest_strategies import manifests

# the strategy needs the facts when the module is imported, before fixtures exist
_FACTS = admission_facts(resolve(load_policy(Path(__file__).resolve().parents[2] / "examples" / "fleet.yaml")))
_UIDS = itertools.count()


def review(obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    group, _, version = obj["apiVersion"].rpartition("/")
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": f"uid-{next(_UIDS)}",
            "kind": {"group": group, "version": version, "kind": obj["kind"]},
            "namespace": namespace,
            "operation": "CREATE",
            "object": obj,
        },
    }


def webhook_messages(client: httpx2.Client, obj: dict[str, Any], namespace: str) -> list[str]:
    answer = client.post("/validate", json=review(obj, namespace))
    assert answer.status_code == 200
    response = answer.json()["response"]
    if response["allowed"]:
        return []
    return [cause["message"] for cause in response["status"]["details"]["causes"]]


def webhook_patch(client: httpx2.Client, obj: dict[str, Any], namespace: str) -> list[dict[str, Any]]:
    answer = client.post("/mutate", json=review(obj, namespace))
    assert answer.status_code == 200
    response = answer.json()["response"]
    assert response["allowed"] is True
    return json.loads(base64.b64decode(response["patch"])) if "patch" in response else []


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=manifests(_FACTS))
def test_python_cel_and_webhook_agree(
    case: tuple[dict[str, Any], str], facts: AdmissionFacts, offline: OfflinePolicy, client: httpx2.Client
) -> None:
    obj, namespace = case
    python = [d.message for d in judge(facts, obj, namespace)]
    event("denied" if python else "admitted")
    for message in python:
        event(message.split(":")[0])
    assert offline.judge(obj, namespace) == python
    assert webhook_messages(client, obj, namespace) == python

    mutated = apply(obj, webhook_patch(client, obj, namespace))
    after = [d.message for d in judge(facts, mutated, namespace)]
    assert offline.judge(mutated, namespace) == after
    assert not any(m.startswith("MissingQueueName") for m in after)
    assert webhook_patch(client, mutated, namespace) == []  # mutation is idempotent, as reinvocation needs
