"""The webhook's HTTP routes: ``/validate``, ``/mutate``, ``/healthz`` and ``/metrics``.

Starlette rather than a framework with body models: a malformed review must get a plain 400 (or an
answer with a message), never a validation error page the API server cannot read. Every answer is
logged as one JSON line and counted.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from gpufleet.check.facts import AdmissionFacts
from gpufleet.check.mutation import patch
from gpufleet.check.rules import judge
from gpufleet.webhook import review
from gpufleet.webhook.telemetry import LOGGER, Metrics

log = logging.getLogger(LOGGER)
Answer = Callable[[review.Request], tuple[dict[str, object], str, list[str]]]


async def _body(request: Request) -> bytes:
    """The request body, refusing to buffer more than a review can be."""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > review.MAX_BODY:
            raise review.BadReview(f"body exceeds {review.MAX_BODY} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _refuse(uid: str, reason: str, message: str) -> tuple[dict[str, object], str, list[str]]:
    return review.response(uid, denials=[(reason, f"{reason}: {message}")]), "denied", [reason]


def create_app(facts: AdmissionFacts, metrics: Metrics | None = None) -> Starlette:
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

    def endpoint(name: str, answer: Answer) -> Callable[[Request], object]:
        async def handle(request: Request) -> Response:
            started = time.perf_counter()
            try:
                req = review.parse(await _body(request))
            except review.BadReview as exc:
                metrics.reviews.labels(name, "bad_request").inc()
                log.warning("bad review", extra={"fields": {"endpoint": name, "error": str(exc)}})
                return PlainTextResponse(f"bad AdmissionReview: {exc}\n", status_code=400)
            except ClientDisconnect:
                return PlainTextResponse("client went away\n", status_code=400)
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
            metrics.reviews.labels(name, outcome).inc()
            metrics.latency.labels(name).observe(elapsed)
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
            return Response(json.dumps(body, separators=(",", ":")), media_type="application/json")

        return handle

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok", "teams": len(facts.teams)})

    async def metrics_route(request: Request) -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    return Starlette(
        routes=[
            Route("/validate", endpoint("validate", validate), methods=["POST"]),
            Route("/mutate", endpoint("mutate", mutate), methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/metrics", metrics_route, methods=["GET"]),
        ]
    )
