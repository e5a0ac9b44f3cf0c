"""Prometheus answers (``evidence`` reads them): fuzzed bodies served by a real HTTP server on 127.0.0.1.

The adapter is driven the whole way, as ``evidence`` drives it: httpx2 over a socket to a
``http.server`` that answers with the example's status, content type and body (a stand-in for
Prometheus, because a real one cannot be made to send malformed answers; tests/evidence runs the
client against a real Prometheus for the well-formed ones). Property: a query
returns series of float points, or an InputError that names the Prometheus URL and says what is
wrong. Never a traceback.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gpufleet.errors import InputError
from gpufleet.prom import Connection, PromClient
from tests.fuzz.strategies import JSON_LIKE, mutated
from tests.fuzz.tally import ran


class _Answer(BaseHTTPRequestHandler):
    """Serves whatever the current example set, to every GET."""

    status: ClassVar[int] = 200
    content_type: ClassVar[str] = "application/json"
    body: ClassVar[bytes] = b""

    def do_GET(self) -> None:
        self.send_response(self.status)
        self.send_header("Content-Type", self.content_type)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, format: str, *args: Any) -> None:  # quiet: a thousand requests
        return


@pytest.fixture(scope="module")
def prometheus() -> Iterator[str]:
    """A stand-in Prometheus serving one fixed answer: a real one never sends these malformed answers."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    thread.join(timeout=10)


SAMPLE_VALUES = st.one_of(
    st.sampled_from(["1", "0.25", "NaN", "+Inf", "-Inf", "1e308", "0"]),
    st.sampled_from(["1", "0.25", "NaN", "+Inf", "-Inf", "1e308", "abc", "", "1,5", " 2 ", "0x10"]),
    st.floats().map(str),
    st.integers().map(str),
)
TIMES = st.one_of(st.integers(0, 2**40), st.floats(allow_nan=False, allow_infinity=False, width=32), st.just("x"))


@st.composite
def answers(draw: st.DrawFn) -> dict[str, Any]:
    """A Prometheus API answer: a vector, matrix, scalar or string result, or an error."""
    kind = draw(st.sampled_from(["vector", "matrix", "scalar", "string", "error"]))
    if kind == "error":
        return {"status": "error", "errorType": "bad_data", "error": draw(st.text(max_size=20))}
    metric = draw(st.dictionaries(st.sampled_from(["__name__", "namespace", "pod", "gpu"]), st.text(max_size=6)))
    if kind in ("scalar", "string"):
        return {"status": "success", "data": {"resultType": kind, "result": [draw(TIMES), draw(SAMPLE_VALUES)]}}
    samples = []
    for _ in range(draw(st.integers(0, 3))):
        if kind == "vector":
            samples.append({"metric": metric, "value": [draw(TIMES), draw(SAMPLE_VALUES)]})
        else:
            points = draw(st.lists(st.tuples(TIMES, SAMPLE_VALUES).map(list), max_size=4))
            samples.append({"metric": metric, "values": points})
    return {"status": "success", "data": {"resultType": kind, "result": samples}}


BODIES = st.one_of(
    answers().map(lambda a: json.dumps(a).encode()),
    answers().map(lambda a: json.dumps(a).encode()),
    answers().flatmap(mutated).map(lambda a: json.dumps(a).encode()),
    JSON_LIKE.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=100),
    st.sampled_from([b"<html>Not Found</html>", b"[" * 50_000, b'{"status": "success"', b"\xff\xfe"]),
)
STATUSES = st.sampled_from([200, 200, 200, 200, 400, 401, 403, 404, 422, 500, 503])
CONTENT_TYPES = st.sampled_from(["application/json", "text/html", "application/json; charset=latin-1"])


@pytest.fixture(scope="module")
def client(prometheus: str) -> Iterator[tuple[asyncio.AbstractEventLoop, PromClient]]:
    """One event loop and one client for every example, as ``evidence`` keeps one for all its queries."""
    loop = asyncio.new_event_loop()
    prom = PromClient(Connection(prometheus, timeout_s=30))
    yield loop, prom
    loop.run_until_complete(prom.__aexit__())
    loop.close()


def assert_series_or_explained(url: str, loop: asyncio.AbstractEventLoop, prom: PromClient) -> str:
    try:
        series = loop.run_until_complete(prom.query("up", datetime(2026, 1, 1, tzinfo=UTC)))
    except InputError as exc:
        (problem,) = exc.problems
        assert problem.file == url, problem
        assert problem.message, problem
        return "refused"
    for one in series:
        assert all(isinstance(t, float) and isinstance(v, float) for t, v in one.points)
    return "series"


@settings(settings.get_profile("gpufleet-fuzz"))
@given(body=BODIES, status=STATUSES, content_type=CONTENT_TYPES)
@example(body=b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"abc"]}]}}',
         status=200, content_type="application/json")  # fmt: skip
@example(body=b"[" * 50_000, status=200, content_type="application/json")
@example(body=b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"a":1}}]}}',
         status=200, content_type="application/json")  # fmt: skip
def test_a_prometheus_answer_is_parsed_or_explained(
    prometheus: str, client: tuple[asyncio.AbstractEventLoop, PromClient], body: bytes, status: int, content_type: str
) -> None:
    _Answer.status, _Answer.content_type, _Answer.body = status, content_type, body
    ran("Prometheus answers", assert_series_or_explained(prometheus, *client))
