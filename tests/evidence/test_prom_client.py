"""The Prometheus adapter against a real server, plus the one thing a real Debian Prometheus cannot do.

Prometheus itself has no bearer-token auth (production puts it behind a proxy that checks the token),
so the header is checked with httpx2's MockTransport: a test double, because nothing real here reads it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import httpx2
import pytest
from evidence_scenario import LivePrometheus

from gpufleet.errors import InputError
from gpufleet.prom import Connection, PromClient, Series

T = TypeVar("T")

pytestmark = pytest.mark.xdist_group("prometheus")


def _run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def test_a_range_selector_returns_raw_samples(prometheus: LivePrometheus) -> None:
    end = prometheus.windows.before_start + timedelta(hours=2)

    async def go() -> list[Series]:
        async with PromClient(Connection(prometheus.url)) as prom:
            return await prom.query('DCGM_FI_PROF_GR_ENGINE_ACTIVE{Hostname="node-c"}[7200s]', end)

    (series,) = _run(go())
    assert series.labels["namespace"] == "research"
    assert len(series.points) == 240  # the sample at the range's left edge is before_start itself
    assert {v for _, v in series.points} == {0.25}


def test_a_range_query_evaluates_on_the_grid(prometheus: LivePrometheus) -> None:
    start = prometheus.windows.before_start + timedelta(seconds=15)

    async def go() -> list[Series]:
        async with PromClient(Connection(prometheus.url)) as prom:
            return await prom.query_range(
                'sum(kube_pod_container_resource_requests{node="node-a"})', start, start + timedelta(minutes=5), 30
            )

    (series,) = _run(go())
    assert [t for t, _ in series.points] == [start.timestamp() + 30 * k for k in range(11)]
    assert {v for _, v in series.points} == {2.0}  # train-1 and old-job both request one GPU


def test_a_query_prometheus_rejects_is_a_clear_error(prometheus: LivePrometheus) -> None:
    async def go() -> None:
        async with PromClient(Connection(prometheus.url)) as prom:
            await prom.query("sum(", datetime.now(UTC))

    with pytest.raises(InputError, match=r"rejected the query 'sum\(': bad_data"):
        _run(go())


@pytest.mark.parametrize(("token", "header"), [("s3cret", "Bearer s3cret"), (None, None)], ids=["token", "none"])
def test_the_token_is_sent_as_a_bearer_header(token: str | None, header: str | None) -> None:
    seen: list[str | None] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request.headers.get("Authorization"))
        return httpx2.Response(200, json={"status": "success", "data": {"resultType": "vector", "result": []}})

    async def go() -> None:
        conn = Connection("http://prometheus.invalid", token=token)
        async with PromClient(conn, transport=httpx2.MockTransport(handler)) as prom:
            assert await prom.query("up", datetime.now(UTC)) == []

    _run(go())
    assert seen == [header]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"status": "success", "data": {"resultType": "scalar", "result": [1.0, "1"]}}, "no vector or matrix"),
        ({"hello": "world"}, "not a Prometheus API answer"),
    ],
    ids=["scalar", "not-prometheus"],
)
def test_answers_that_are_not_series_are_clear_errors(body: object, message: str) -> None:
    async def go() -> None:
        transport = httpx2.MockTransport(lambda _: httpx2.Response(200, json=body))
        async with PromClient(Connection("http://prometheus.invalid"), transport=transport) as prom:
            await prom.query("1", datetime.now(UTC))

    with pytest.raises(InputError, match=message):
        _run(go())
