"""AdmissionReview v1 in and out: strict about the envelope, lenient about the object inside.

A request the API server could not have sent (not JSON, not UTF-8, another API version, no uid) is
answered 400. A well-formed review with a strange object gets an answer with a message, so the user
sees why, instead of a webhook failure.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

import msgspec

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"
MAX_BODY = 4 * 1024 * 1024  # above the API server's 3 MiB request limit: anything larger is not from it


class BadReview(Exception):
    """The body is no AdmissionReview v1 request; the text says what is wrong (sent back with a 400)."""


@dataclass(frozen=True)
class Request:
    uid: str
    namespace: str
    operation: str
    obj: dict[str, Any] | None

    @property
    def kind(self) -> str:
        return str(self.obj.get("kind", "")) if self.obj else ""

    @property
    def name(self) -> str:
        meta = self.obj.get("metadata") if self.obj else None
        return str(meta.get("name") or meta.get("generateName") or "") if isinstance(meta, dict) else ""


_DECODER = msgspec.json.Decoder()


def _strictly(body: bytes) -> Any:
    """The body decoded by the standard library: slower than msgspec, but its errors say where."""
    try:
        return json.loads(body.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise BadReview(f"body is not UTF-8: {exc.reason} at byte {exc.start}") from None
    except json.JSONDecodeError as exc:
        raise BadReview(f"body is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise BadReview("body is nested too deeply") from None


def parse(body: bytes) -> Request:
    if len(body) > MAX_BODY:
        raise BadReview(f"body of {len(body)} bytes exceeds {MAX_BODY}")
    try:
        review = _DECODER.decode(body)
    except (msgspec.DecodeError, RecursionError):  # a valid review decodes; the rest goes the slow way, for the message
        review = _strictly(body)
    if not isinstance(review, dict):
        raise BadReview("expected a JSON object")
    if review.get("apiVersion") != API_VERSION or review.get("kind") != KIND:
        raise BadReview(
            f"expected apiVersion {API_VERSION} kind {KIND}, got {review.get('apiVersion')!r} {review.get('kind')!r}"
        )
    request = review.get("request")
    if not isinstance(request, dict) or not isinstance(request.get("uid"), str) or not request["uid"]:
        raise BadReview("request.uid is missing")
    obj = request.get("object")
    namespace = request.get("namespace")
    if not isinstance(namespace, str) or not namespace:
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        namespace = meta.get("namespace") if isinstance(meta, dict) else ""
    operation = request.get("operation")
    return Request(
        uid=request["uid"],
        namespace=namespace if isinstance(namespace, str) else "",
        operation=operation if isinstance(operation, str) else "",
        obj=obj if isinstance(obj, dict) else None,
    )


def encode(answer: dict[str, Any]) -> bytes:
    """The answer as JSON: msgspec, or the standard library where a message quotes a lone surrogate
    (which JSON escapes allow in the request and UTF-8 cannot carry)."""
    try:
        return msgspec.json.encode(answer)
    except UnicodeEncodeError:
        return json.dumps(answer, separators=(",", ":")).encode()


def response(
    uid: str, *, denials: list[tuple[str, str]] | None = None, patch: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """An AdmissionReview response: allowed unless there are denials (reason, message)."""
    body: dict[str, Any] = {"uid": uid, "allowed": not denials}
    if denials:
        body["status"] = {
            "code": 403,
            "reason": "Forbidden",
            "message": "; ".join(message for _, message in denials),
            "details": {"causes": [{"reason": reason, "message": message} for reason, message in denials]},
        }
    if patch:
        body["patchType"] = "JSONPatch"
        body["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    return {"apiVersion": API_VERSION, "kind": KIND, "response": body}
