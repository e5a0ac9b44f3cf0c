"""The webhook's HTTP routes: ``/validate``, ``/mutate``, ``/healthz`` and ``/metrics``.

A POST to ``/validate`` or ``/mutate`` (every call the API server makes) is answered by a bare ASGI
handler; everything else (probes, metrics, a wrong method or path) goes to a Starlette app. Starlette's
request, response, middleware and router cost about 110 µs of CPU per review, a third of what the rules
themselves take (profiled, docs/admission.md), for nothing the hot path needs. A malformed review
gets a plain 400 (or an answer with a message), never an error page the API server cannot read. Every
answer is logged as one JSON line and counted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from gpufleet.check.facts import AdmissionFacts
from gpufleet.check.mutation import patch
from gpufleet.check.rules import judge
from gpufleet.webhook import review
from gpufleet.webhook.telemetry import LOGGER, Metrics

log = logging.getLogger(LOGGER)
JSON, TEXT = b"application/json", b"text/plain; charset=utf-8"
Answer = Callable[[review.Request], tuple[dict[str, object], str, list[str]]]


class ClientGone(Exception):
    """The client disconnected before the whole body arrived."""


async def _body(receive: Receive) -> bytes:
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


async def _answer(send: Send, status: int, body: bytes, content_type: bytes) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _refuse(uid: str, reason: str, message: str) -> tuple[dict[str, object], str, list[str]]:
    return review.response(uid, denials=[(reason, f"{reason}: {message}")]), "denied", [reason]


def create_app(facts: AdmissionFacts, metrics: Metrics | None = None) -> ASGIApp:
    metrics = metrics or Metrics()

    def validate(req: review.Request) -> tuple[dict[str, object], str, list[str]]:
        if req.obj is None:  # DELETE, CONNECT: nothing to judge
            return review.response(req.uid), "allowed", []
        denials = judge(facts, req.obj, req.namespace)
        pairs = [(d.reason, d.message) for d in denials]
        for d in denials:
            metrics.denials.labels(d.reason).inc()
        return review.response(req.uid, denials=pairs), "denied" if denials else "allowed", [d.reason for d in denials]

    def mutate(req: review.Request) -> tuple[dict[str, object], str, list[str]]:
        ops = patch(facts, req.obj, req.namespace) if req.obj is not None and req.operation in ("CREATE", "") else []
        return review.response(req.uid, patch=ops), "patched" if ops else "unchanged", [op["path"] for op in ops]

    def endpoint(name: str, answer: Answer) -> ASGIApp:
        # each labelled child looked up once, not per review (a labels() call costs more than inc())
        latency = metrics.latency.labels(name)
        counted = {o: metrics.reviews.labels(name, o) for o in ("allowed", "denied", "patched", "unchanged")}

        async def handle(scope: Scope, receive: Receive, send: Send) -> None:
            started = time.perf_counter()
            try:
                req = review.parse(await _body(receive))
            except review.BadReview as exc:
                metrics.reviews.labels(name, "bad_request").inc()
                log.warning("bad review", extra={"fields": {"endpoint": name, "error": str(exc)}})
                await _answer(send, 400, f"bad AdmissionReview: {exc}\n".encode(), TEXT)
                return
            except ClientGone:
                return  # nobody is left to answer
            try:
                body, outcome, details = answer(req)
            except RecursionError:  # an object nested beyond reason: refuse it, with a message
                body, outcome, details = _refuse(req.uid, "ObjectTooDeep", "the object is nested too deeply to check")
            except Exception:  # a bug must refuse with a message, not answer 500 and leave the user guessing
                log.exception("rule failure", extra={"fields": {"endpoint": name, "uid": req.uid}})
                body, outcome, details = _refuse(
                    req.uid, "InternalError", "the gpufleet webhook failed on this object; see its log"
                )
            elapsed = time.perf_counter() - started
            (counted.get(outcome) or metrics.reviews.labels(name, outcome)).inc()
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
                log.info("review", extra={"fields": fields})
            await _answer(send, 200, review.encode(body), JSON)

        return handle

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok", "teams": len(facts.teams)})

    async def metrics_route(request: Request) -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    async def post_only(request: Request) -> Response:
        return PlainTextResponse("Method Not Allowed", status_code=405, headers={"Allow": "POST"})

    rest = Starlette(
        routes=[
            Route("/validate", post_only, methods=["GET", "PUT", "PATCH", "DELETE"]),
            Route("/mutate", post_only, methods=["GET", "PUT", "PATCH", "DELETE"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/metrics", metrics_route, methods=["GET"]),
        ]
    )
    reviews = {"/validate": endpoint("validate", validate), "/mutate": endpoint("mutate", mutate)}

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        handler = reviews.get(scope["path"]) if scope["type"] == "http" and scope["method"] == "POST" else None
        await (handler or rest)(scope, receive, send)

    return app
