"""Bad input never takes the webhook down: a 400 or an answer with a message, never a 5xx.

Bodies are fuzzed with hypothesis (random bytes, truncated reviews, wrong API versions, arbitrary JSON
where the object should be, objects too large or too deep) and sent over real TLS; afterwards the
webhook still answers its health check.
"""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpufleet.webhook.review import MAX_BODY

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=30,
)
GOOD_JOB: dict[str, Any] = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "j", "labels": {"gpufleet.io/team": "research"}},
    "spec": {"template": {"spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}},
}
PATHS = [
    (),
    ("metadata",),
    ("metadata", "labels"),
    ("spec",),
    ("spec", "template"),
    ("spec", "template", "spec"),
    ("kind",),
    ("apiVersion",),
]


def envelope(obj: Any, api_version: str = "admission.k8s.io/v1", uid: Any = "fuzz") -> bytes:
    request = {"uid": uid, "namespace": "research", "operation": "CREATE", "object": obj}
    return json.dumps({"apiVersion": api_version, "kind": "AdmissionReview", "request": request}).encode()


def corrupted(path: tuple[str, ...], value: Any) -> Any:
    if not path:
        return value
    obj = json.loads(json.dumps(GOOD_JOB))
    node = obj
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return obj


BODIES = st.one_of(
    st.binary(max_size=300),
    st.builds(lambda cut: envelope(GOOD_JOB)[:cut], st.integers(0, len(envelope(GOOD_JOB)) - 1)),
    st.builds(
        envelope, st.just(GOOD_JOB), st.sampled_from(["admission.k8s.io/v1beta1", "v1", "", "admission.k8s.io/v2"])
    ),
    st.builds(envelope, st.just(GOOD_JOB), uid=st.one_of(st.none(), st.integers(), st.just(""))),
    st.builds(lambda path, value: envelope(corrupted(path, value)), st.sampled_from(PATHS), JSON),
    st.builds(lambda v: json.dumps(v).encode(), JSON),
    st.builds(lambda b: b"\xff\xfe" + b, st.binary(max_size=50)),
)


def assert_well_answered(answer: httpx2.Response) -> None:
    assert answer.status_code in (200, 400), answer.text
    if answer.status_code == 200:
        response = answer.json()["response"]
        assert isinstance(response["allowed"], bool)
        if not response["allowed"]:
            assert response["status"]["message"]
            assert "InternalError" not in response["status"]["message"]


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=BODIES, path=st.sampled_from(["/validate", "/mutate"]))
def test_fuzzed_reviews_get_a_400_or_an_answer(client: httpx2.Client, body: bytes, path: str) -> None:
    assert_well_answered(client.post(path, content=body, headers={"content-type": "application/json"}))
    assert client.get("/healthz").status_code == 200


@pytest.mark.parametrize(
    ("body", "status"),
    [
        (b"x" * (MAX_BODY + 1), 400),
        (envelope({**GOOD_JOB, "metadata": {"name": "j", "labels": {f"k{i}": "v" * 60 for i in range(20000)}}}), 200),
        (envelope(corrupted(("spec", "template", "spec"), {"containers": [{"name": "c"}] * 20000})), 200),
        (b'{"request": ' * 100000 + b"1" + b"}" * 100000, 400),
        (envelope("a" * 1000), 200),
    ],
    ids=["beyond-the-size-limit", "huge-labels", "twenty-thousand-containers", "deeply-nested", "object-is-a-string"],
)
def test_oversized_and_odd_bodies(client: httpx2.Client, body: bytes, status: int) -> None:
    answer = client.post("/validate", content=body)
    assert answer.status_code == status
    assert_well_answered(answer)
    assert client.get("/healthz").status_code == 200
