"""The webhook's HTTP routes: ``/validate``, ``/mutate``, ``/healthz`` and ``/metrics``.

One app, two doors: granian calls ``__rsgi__`` (its native interface: the body arrives as one bytes
object and the answer leaves in one call, with no ASGI messages, scope dicts or awaits per part), and
any ASGI server calls ``__call__`` (the bench's candidates, uvicorn and hypercorn, serve that). Both
read the body and hand it to the same synchronous ``review``, so the verdicts, log lines and metrics
cannot differ by server. The routes are four, so a dictionary routes them: a framework's request,
response and router cost about 110 µs of CPU per review (profiled, docs/admission.md), for nothing
the hot path needs. A malformed review gets a plain 400 (or an answer with a message), never an error
page the API server cannot read. Every answer is logged as one JSON line and counted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any, Protocol

from granian._granian import RSGIProtocolClosed, RSGIProtocolError
from prometheus_client import CONTENT_TYPE_LATEST, Counter

from gpufleet.check.facts import AdmissionFacts
from gpufleet.check.mutation import patch
from gpufleet.check.rules import judge
from gpufleet.webhook import review
from gpufleet.webhook.telemetry import LOGGER, Metrics

log = logging.getLogger(LOGGER)
JSON, TEXT = "application/json", "text/plain; charset=utf-8"
Verdict = tuple[dict[str, object], str, list[str]]  # the answer, its outcome, the reasons or patched paths
Answer = Callable[[review.Request], Verdict]
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class ClientGone(Exception):
    """The client disconnected before the whole body arrived."""


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    content_type: str
    allow: str | None = None  # the Allow header of a 405


NOT_FOUND = Reply(404, b"Not Found", TEXT)


class RSGIProtocol(Protocol):
    """What the app uses of granian's RSGI HTTP protocol object."""

    def __call__(self) -> Awaitable[bytes]: ...
    def __aiter__(self) -> Any: ...
    def response_bytes(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None: ...


def _refuse(uid: str, reason: str, message: str) -> Verdict:
    return review.response(uid, denials=[(reason, f"{reason}: {message}")]), "denied", [reason]


class WebhookApp:
    """The routes over the policy's facts; one instance per served policy."""

    def __init__(self, facts: AdmissionFacts, metrics: Metrics | None = None) -> None:
        self.facts, self.metrics = facts, metrics or Metrics()
        self.denied: dict[str, Counter] = {}
        self.reviews = {
            "/validate": self._endpoint("validate", self._validate),
            "/mutate": self._endpoint("mutate", self._mutate),
        }
        self.healthz = Reply(200, review.encode({"status": "ok", "teams": len(facts.teams)}), JSON)
        self.not_allowed = Reply(405, b"Method Not Allowed", TEXT, allow="POST")
        self.get_only = Reply(405, b"Method Not Allowed", TEXT, allow="GET, HEAD")

    def _validate(self, req: review.Request) -> Verdict:
        if req.obj is None:  # DELETE, CONNECT: nothing to judge
            return review.response(req.uid), "allowed", []
        denials = judge(self.facts, req.obj, req.namespace)
        for d in denials:
            counter = self.denied.get(d.reason)
            if counter is None:  # the reasons are few: each labelled child is looked up once
                counter = self.denied[d.reason] = self.metrics.denials.labels(d.reason)
            counter.inc()
        pairs = [(d.reason, d.message) for d in denials]
        return review.response(req.uid, denials=pairs), "denied" if denials else "allowed", [d.reason for d in denials]

    def _mutate(self, req: review.Request) -> Verdict:
        creating = req.obj is not None and req.operation in ("CREATE", "")
        ops = patch(self.facts, req.obj, req.namespace) if creating and req.obj is not None else []
        return review.response(req.uid, patch=ops), "patched" if ops else "unchanged", [op["path"] for op in ops]

    def _endpoint(self, name: str, answer: Answer) -> Callable[[bytes, float], Reply]:
        # each labelled child looked up once, not per review (a labels() call costs more than inc())
        latency = self.metrics.latency.labels(name)
        counted = {o: self.metrics.reviews.labels(name, o) for o in ("allowed", "denied", "patched", "unchanged")}
        reviews = self.metrics.reviews

        def handle(body: bytes, started: float) -> Reply:
            try:
                req = review.parse(body)
            except review.BadReview as exc:
                return self.bad(name, exc)
            try:
                verdict, outcome, details = answer(req)
            except RecursionError:  # an object nested beyond reason: refuse it, with a message
                verdict, outcome, details = _refuse(
                    req.uid, "ObjectTooDeep", "the object is nested too deeply to check"
                )
            except Exception:  # a bug must refuse with a message, not answer 500 and leave the user guessing
                log.exception("rule failure", extra={"fields": {"endpoint": name, "uid": req.uid}})
                verdict, outcome, details = _refuse(
                    req.uid, "InternalError", "the gpufleet webhook failed on this object; see its log"
                )
            elapsed = time.perf_counter() - started
            (counted.get(outcome) or reviews.labels(name, outcome)).inc()
            latency.observe(elapsed)
            if log.isEnabledFor(logging.INFO):
                fields = {
                    "endpoint": name,
                    "uid": req.uid,
                    "operation": req.operation,
                    "kind": req.kind,
                    "namespace": req.namespace,
                    "name": req.name,
                    "outcome": outcome,
                    "details": details,
                    "ms": round(elapsed * 1000, 3),
                }
                # what log.info does, less its search of the stack for the caller (no line prints it)
                log.handle(
                    log.makeRecord(LOGGER, logging.INFO, __file__, 0, "review", (), None, extra={"fields": fields})
                )
            return Reply(200, review.encode(verdict), JSON)

        return handle

    def bad(self, name: str, exc: review.BadReview) -> Reply:
        self.metrics.reviews.labels(name, "bad_request").inc()
        log.warning("bad review", extra={"fields": {"endpoint": name, "error": str(exc)}})
        return Reply(400, f"bad AdmissionReview: {exc}\n".encode(), TEXT)

    def route(self, method: str, path: str) -> Reply:
        """The answer to everything but a review (probes, metrics, a wrong method or path)."""
        if path in self.reviews:
            return self.not_allowed  # every method but POST
        if path not in ("/healthz", "/metrics"):
            return NOT_FOUND
        if method not in ("GET", "HEAD"):
            return self.get_only
        if path == "/healthz":
            return self.healthz
        return Reply(200, self.metrics.exposition(), CONTENT_TYPE_LATEST)

    # granian's RSGI
    async def __rsgi__(self, scope: Any, proto: RSGIProtocol) -> None:
        handle = self.reviews.get(scope.path) if scope.method == "POST" else None
        if handle is None:
            reply = self.route(scope.method, scope.path)
        else:
            started = time.perf_counter()
            try:
                reply = handle(await _rsgi_body(scope, proto), started)
            except review.BadReview as exc:
                reply = self.bad(scope.path.lstrip("/"), exc)
            except ClientGone:
                return  # nobody is left to answer
        headers = [("content-type", reply.content_type)]
        if reply.allow:
            headers.append(("allow", reply.allow))
        proto.response_bytes(reply.status, headers, reply.body)

    # ASGI
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        handle = self.reviews.get(scope["path"]) if scope["method"] == "POST" else None
        if handle is None:
            reply = self.route(scope["method"], scope["path"])
        else:
            started = time.perf_counter()
            try:
                reply = handle(await _asgi_body(receive), started)
            except review.BadReview as exc:
                reply = self.bad(scope["path"].lstrip("/"), exc)
            except ClientGone:
                return
        headers = [(b"content-type", reply.content_type.encode()), (b"content-length", str(len(reply.body)).encode())]
        if reply.allow:
            headers.append((b"allow", reply.allow.encode()))
        await send({"type": "http.response.start", "status": reply.status, "headers": headers})
        await send({"type": "http.response.body", "body": reply.body})


def create_app(facts: AdmissionFacts, metrics: Metrics | None = None) -> WebhookApp:
    return WebhookApp(facts, metrics)


async def _rsgi_body(scope: Any, proto: RSGIProtocol) -> bytes:
    """The body in one piece when its declared length is within bounds, else streamed and capped."""
    declared = scope.headers.get("content-length")
    try:
        if declared is not None and declared.isdigit() and int(declared) <= review.MAX_BODY:
            return await proto()
        chunks, size = [], 0
        async for chunk in proto:
            size += len(chunk)
            if size > review.MAX_BODY:
                raise review.BadReview(f"body exceeds {review.MAX_BODY} bytes")
            chunks.append(chunk)
        return b"".join(chunks)
    except (RSGIProtocolClosed, RSGIProtocolError) as exc:
        raise ClientGone from exc


async def _asgi_body(receive: Receive) -> bytes:
    """The request body, refusing to buffer more than a review can be."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > review.MAX_BODY:
            raise review.BadReview(f"body exceeds {review.MAX_BODY} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _lifespan(receive: Receive, send: Send) -> None:
    """Nothing to start or stop: acknowledge both, for ASGI servers that send lifespan events."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
