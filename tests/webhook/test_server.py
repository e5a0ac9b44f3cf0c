"""The webhook over real TLS: health, metrics, mutation, logs, and a certificate swapped under it."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trustme

from gpufleet.check.facts import AdmissionFacts
from gpufleet.webhook.telemetry import LOGGER, JsonFormatter
from tests.webhook.tls_server import ServeCommand, served_serial, start, wait_until, write_pair


def review(obj: dict[str, Any] | None, namespace: str = "research", operation: str = "CREATE") -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u-1", "namespace": namespace, "operation": operation, "object": obj},
    }


def job(labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "labels": labels},
        "spec": {
            "template": {"spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
        },
    }


LABELS = {"gpufleet.io/team": "research", "gpufleet.io/model": "m", "gpufleet.io/data-class": "internal"}


def test_healthz_answers_over_tls(client: httpx2.Client) -> None:
    answer = client.get("/healthz")
    assert answer.status_code == 200
    assert answer.json() == {"status": "ok", "teams": 3}


@pytest.mark.parametrize(
    ("method", "path", "status", "allow", "body"),
    [
        ("GET", "/healthz", 200, None, b'{"status":"ok","teams":3}'),
        ("HEAD", "/healthz", 200, None, b""),
        ("POST", "/healthz", 405, "GET, HEAD", b"Method Not Allowed"),
        ("GET", "/validate", 405, "POST", b"Method Not Allowed"),
        ("DELETE", "/mutate", 405, "POST", b"Method Not Allowed"),
        ("OPTIONS", "/validate", 405, "POST", b"Method Not Allowed"),
        ("GET", "/nowhere", 404, None, b"Not Found"),
        ("POST", "/nowhere", 404, None, b"Not Found"),
    ],
)
def test_everything_but_a_review_gets_a_plain_answer(
    client: httpx2.Client, method: str, path: str, status: int, allow: str | None, body: bytes
) -> None:
    answer = client.request(method, path)
    assert (answer.status_code, answer.headers.get("allow"), answer.content) == (status, allow, body)


def test_a_streamed_body_without_a_length_is_read_and_capped(client: httpx2.Client) -> None:
    def review_in_parts() -> Iterator[bytes]:
        text = json.dumps(review(None, operation="DELETE")).encode()
        yield from (text[:40], text[40:])

    assert client.post("/validate", content=review_in_parts()).json()["response"] == {"uid": "u-1", "allowed": True}
    too_big = client.post("/validate", content=(b"x" * (1 << 20) for _ in range(5)))
    assert too_big.status_code == 400
    assert "body exceeds" in too_big.text


def test_a_denial_carries_uid_reason_and_message(client: httpx2.Client) -> None:
    response = client.post("/validate", json=review(job({}))).json()["response"]
    assert response["uid"] == "u-1"
    assert response["allowed"] is False
    assert response["status"]["code"] == 403
    assert [c["reason"] for c in response["status"]["details"]["causes"]] == ["MissingLabel"] * 3 + ["MissingQueueName"]
    assert "label gpufleet.io/model is required on Jobs in namespace research" in response["status"]["message"]


def test_delete_has_no_object_and_is_allowed(client: httpx2.Client) -> None:
    response = client.post("/validate", json=review(None, operation="DELETE")).json()["response"]
    assert response == {"uid": "u-1", "allowed": True}


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        (
            LABELS,
            [
                ("/metadata/labels/kueue.x-k8s.io~1queue-name", "research"),
                ("/metadata/labels/kueue.x-k8s.io~1priority-class", "dev"),
            ],
        ),
        ({**LABELS, "kueue.x-k8s.io/queue-name": "research", "kueue.x-k8s.io/priority-class": "batch"}, []),
        (
            {**LABELS, "kueue.x-k8s.io/queue-name": "wrong"},
            [("/metadata/labels/kueue.x-k8s.io~1priority-class", "dev")],
        ),
    ],
    ids=["fills-queue-and-priority", "leaves-complete-job", "never-corrects-a-wrong-queue"],
)
def test_mutate_fills_only_what_is_missing(
    client: httpx2.Client, labels: dict[str, str], expected: list[tuple[str, str]]
) -> None:
    response = client.post("/mutate", json=review(job(labels))).json()["response"]
    assert response["allowed"] is True
    patch = json.loads(base64.b64decode(response["patch"])) if "patch" in response else []
    assert [(op["path"], op["value"]) for op in patch] == expected
    assert all(op["op"] == "add" for op in patch)


def test_metrics_count_reviews_and_reasons(client: httpx2.Client) -> None:
    client.post("/validate", json=review(job({})))
    text = client.get("/metrics").text
    assert 'gpufleet_webhook_reviews_total{endpoint="validate",outcome="denied"}' in text
    assert 'gpufleet_webhook_denials_total{reason="MissingQueueName"}' in text
    assert "gpufleet_webhook_review_seconds_bucket" in text


def test_each_review_is_one_json_log_line(client: httpx2.Client, caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger(LOGGER)
    logger.addHandler(caplog.handler)
    try:
        with caplog.at_level(logging.INFO, logger=LOGGER):
            client.post("/validate", json=review(job({})))
    finally:
        logger.removeHandler(caplog.handler)
    record = next(r for r in caplog.records if r.getMessage() == "review")
    line = json.loads(JsonFormatter().format(record))
    assert line["endpoint"] == "validate"
    assert line["outcome"] == "denied"
    assert line["namespace"] == "research"
    assert line["details"][-1] == "MissingQueueName"


def test_a_renewed_certificate_is_served_without_restart(facts: AdmissionFacts, ca: trustme.CA, tmp_path: Path) -> None:
    running = start(facts, ca, tmp_path, reload_seconds=0.05)
    try:
        port = int(running.url.rsplit(":", 1)[1])
        before = served_serial(port, running.client_context)
        write_pair(ca, tmp_path)  # a new certificate from the same CA, as cert-manager renews it
        # granian respawns its worker on a reload: new handshakes get the new certificate once it is up
        wait_until(
            lambda: served_serial(port, running.client_context) != before,
            "the renewed certificate to be served",
            alive=running.thread.is_alive,
            poll_s=0.1,
        )
        assert running.server.reloads >= 1
        with running.client() as c:
            assert c.get("/healthz").status_code == 200
    finally:
        running.server.stop()
        running.thread.join(timeout=10)


def test_a_broken_renewal_keeps_the_old_certificate(facts: AdmissionFacts, ca: trustme.CA, tmp_path: Path) -> None:
    running = start(facts, ca, tmp_path, reload_seconds=0.05)
    try:
        (tmp_path / "tls.crt").write_text("not a certificate")
        assert running.server.reload_certificate() is False
        with running.client() as c:
            assert c.get("/healthz").status_code == 200
    finally:
        running.server.stop()
        running.thread.join(timeout=10)


def test_the_serve_command_answers_over_tls(ca: trustme.CA, tmp_path: Path) -> None:
    with ServeCommand(ca, tmp_path) as served, served.client() as c:
        c.post("/validate", json=review(job({})))
    assert any(line.get("msg") == "review" and line.get("outcome") == "denied" for line in served.lines)


def test_a_lone_surrogate_in_a_label_is_answered_not_failed(client: httpx2.Client) -> None:
    """JSON escapes allow a lone surrogate that UTF-8 cannot carry; the denial quoting it must still encode."""
    body = json.dumps(review(job({**LABELS, "gpufleet.io/team": "\ud800"}))).encode()
    answer = client.post("/validate", content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 200
    response = json.loads(answer.content)["response"]
    assert response["allowed"] is False
    assert "WrongTeam" in [c["reason"] for c in response["status"]["details"]["causes"]]
