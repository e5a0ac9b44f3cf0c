"""AdmissionReviews for the webhook: fuzzed bodies sent through its ASGI door, in-process.

granian calls the app's RSGI door and ASGI servers its ASGI door; both hand the body to the same
review handler, which is what this fuzzes. The TLS server around the app (granian, RSGI) is fuzzed
in tests/webhook/test_fuzz.py; here the app is called in-process (one
event loop for every example) so a thousand reviews stay cheap. Property: every body gets a 400 or
a well-formed AdmissionReview answer for its uid; a refusal carries a message and is never the
app's own failure (``InternalError``); a patch is a base64 JSON Patch list.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st
from starlette.types import ASGIApp, Message

from gpufleet.check.facts import admission_facts
from gpufleet.policy import load_policy, resolve
from gpufleet.webhook.app import create_app
from gpufleet.webhook.review import MAX_BODY
from gpufleet.webhook.telemetry import Metrics
from tests.fuzz.strategies import JSON_LIKE, mutated
from tests.fuzz.tally import ran
from tests.support import EXAMPLES
from tests.webhook.manifest_strategies import manifests

FACTS = admission_facts(resolve(load_policy(EXAMPLES / "fleet.yaml")))
APP = create_app(FACTS, Metrics())
LOOP = asyncio.new_event_loop()
OBJECTS = manifests(FACTS).map(lambda pair: pair[0])


async def _post(app: ASGIApp, path: str, body: bytes) -> tuple[int, bytes]:
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "https",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8443),
    }
    chunks = [body[i : i + 65536] for i in range(0, len(body), 65536)] or [b""]
    sent: list[Message] = []

    async def receive() -> Message:
        if chunks:
            chunk = chunks.pop(0)
            return {"type": "http.request", "body": chunk, "more_body": bool(chunks)}
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    return status, b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


def review(obj: Any, *, uid: Any = "fuzz-uid", operation: Any = "CREATE", namespace: Any = "research") -> bytes:
    request = {"uid": uid, "namespace": namespace, "operation": operation, "object": obj}
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}).encode()


BODIES = st.one_of(
    st.builds(review, OBJECTS),
    st.builds(review, OBJECTS.flatmap(mutated)),
    st.builds(
        review,
        OBJECTS,
        uid=st.one_of(st.just("u"), st.none(), st.integers(), st.just("")),
        operation=st.sampled_from(["CREATE", "UPDATE", "DELETE", "CONNECT", "", None, 7]),
        namespace=st.one_of(st.sampled_from(["research", "", "kube-system", "serving"]), JSON_LIKE),
    ),
    st.builds(review, JSON_LIKE),
    JSON_LIKE.map(lambda v: json.dumps(v).encode()),
    st.builds(lambda body, cut: body[:cut], st.builds(review, OBJECTS), st.integers(0, 400)),
    st.binary(max_size=200),
)


def assert_answered(path: str, body: bytes) -> str:
    status, answer = LOOP.run_until_complete(_post(APP, path, body))
    assert status in (200, 400), (status, answer)
    if status == 400:
        assert answer.startswith(b"bad AdmissionReview: "), answer
        return "400 bad review"
    response = json.loads(answer)["response"]
    sent = json.loads(body)["request"]["uid"]
    assert response["uid"] == sent
    assert isinstance(response["allowed"], bool)
    if not response["allowed"]:
        assert response["status"]["message"]
        assert "InternalError" not in response["status"]["message"], response
        return "denied"
    if "patch" in response:
        assert isinstance(json.loads(base64.b64decode(response["patch"])), list)
        return "patched"
    return "allowed"


@settings(settings.get_profile("gpufleet-fuzz"))
@given(path=st.sampled_from(["/validate", "/mutate"]), body=BODIES)
@example(path="/validate", body=b"x" * (MAX_BODY + 1))
@example(path="/mutate", body=b"[" * 100_000)
@example(path="/validate", body=review({"kind": "Pod", "metadata": []}))
@example(path="/mutate", body=review({"kind": "Job", "spec": {"template": {"spec": {"containers": "c"}}}}))
def test_every_review_gets_a_400_or_an_answer(path: str, body: bytes) -> None:
    ran("AdmissionReviews (webhook)", assert_answered(path, body))
