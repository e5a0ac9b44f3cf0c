"""The one module that talks to Prometheus: a thin async client for its HTTP query API.

Two endpoints are enough for gpufleet: ``/api/v1/query`` (an instant query; a range selector such as
``METRIC[3600s]`` returns every raw sample, which is what coverage is judged on) and
``/api/v1/query_range`` (an expression evaluated on a grid, for joins such as requests × running).
Responses are parsed into pydantic models, and every way the server can fail a user (unreachable,
credentials refused, not a Prometheus, a query it rejects) becomes an ``InputError`` that names the
URL, because each of those is fixed by changing an option, not the code.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import httpx2
from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError

from gpufleet.errors import InputError

DEFAULT_TIMEOUT_S = 60.0


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


def _number(text: str) -> str:
    """Prometheus writes sample values as strings ("0.25", "NaN", "+Inf"); refuse one that is no number."""
    try:
        float(text)
    except ValueError:
        raise ValueError(f"sample value {text[:40]!r} is not a number") from None
    return text


SampleValue = Annotated[str, AfterValidator(_number)]


class _Sample(_Strict):
    metric: dict[str, str]
    value: tuple[float, SampleValue] | None = None
    values: list[tuple[float, SampleValue]] = []


class _Data(_Strict):
    resultType: Literal["matrix", "vector", "scalar", "string"]
    result: list[_Sample] | tuple[float, str]


class _Response(_Strict):
    status: Literal["success", "error"]
    data: _Data | None = None
    errorType: str = ""
    error: str = ""


@dataclass(frozen=True, slots=True)
class Series:
    """One time series as Prometheus returned it: its labels and its (unix seconds, value) points.

    Values are floats; Prometheus' ``NaN`` and ``±Inf`` spellings parse as such and callers drop them.
    """

    labels: Mapping[str, str]
    points: tuple[tuple[float, float], ...]

    @property
    def name(self) -> str:
        return self.labels.get("__name__", "")


@dataclass(frozen=True)
class Connection:
    """Where Prometheus is and how to authenticate to it (bearer token, private CA)."""

    url: str
    token: str | None = None
    ca_file: Path | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S


class PromClient:
    """Async client for one Prometheus; use as ``async with PromClient(conn) as prom``."""

    def __init__(self, conn: Connection, *, transport: httpx2.AsyncBaseTransport | None = None) -> None:
        self.conn = conn
        headers = {"Accept": "application/json"}
        if conn.token:
            headers["Authorization"] = f"Bearer {conn.token}"
        self._client = httpx2.AsyncClient(
            base_url=conn.url.rstrip("/"),
            headers=headers,
            verify=_verify(conn),
            timeout=conn.timeout_s,
            transport=transport,
            trust_env=False,
        )

    async def __aenter__(self) -> PromClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._client.aclose()

    async def query(self, expr: str, at: datetime) -> list[Series]:
        """Evaluate ``expr`` at one instant; a range selector returns raw samples (a matrix)."""
        return await self._get("/api/v1/query", {"query": expr, "time": _unix(at)})

    async def query_range(self, expr: str, start: datetime, end: datetime, step_s: int) -> list[Series]:
        """Evaluate ``expr`` at ``start``, ``start + step``, … up to ``end`` (Prometheus' 5 min lookback applies)."""
        params = {"query": expr, "start": _unix(start), "end": _unix(end), "step": f"{step_s}s"}
        return await self._get("/api/v1/query_range", params)

    async def _get(self, path: str, params: dict[str, str]) -> list[Series]:
        where = self.conn.url
        try:
            response = await self._client.get(path, params=params)
        except httpx2.TimeoutException as exc:
            raise _error(where, f"Prometheus did not answer within {self.conn.timeout_s:g} s ({exc})") from None
        except httpx2.ConnectError as exc:
            raise _error(where, f"cannot reach Prometheus: {exc or type(exc).__name__}") from None
        except httpx2.HTTPError as exc:
            raise _error(where, f"request to Prometheus failed: {exc or type(exc).__name__}") from None
        if response.status_code in (401, 403):
            hint = "check --token" if self.conn.token else "this Prometheus needs credentials: pass --token"
            raise _error(where, f"Prometheus refused the request (HTTP {response.status_code}); {hint}")
        body = _parse(where, response)
        if body.status == "error":
            raise _error(where, f"Prometheus rejected the query {params['query']!r}: {body.errorType}: {body.error}")
        if body.data is None or isinstance(body.data.result, tuple):
            raise _error(where, f"unexpected answer to {params['query']!r}: no vector or matrix result")
        return [_series(sample) for sample in body.data.result]


def _parse(where: str, response: httpx2.Response) -> _Response:
    try:
        payload: Any = response.json()
    except RecursionError:
        raise _error(
            where, f"HTTP {response.status_code} with a JSON body nested too deeply to be a Prometheus answer"
        ) from None
    except ValueError:
        raise _error(
            where,
            f"HTTP {response.status_code} with a body that is not JSON: is this the Prometheus base URL "
            "(e.g. http://prometheus:9090, without /api/v1)?",
        ) from None
    try:
        return _Response.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise _error(
            where, f"HTTP {response.status_code}: not a Prometheus API answer ({loc}: {first['msg']})"
        ) from None


def _series(sample: _Sample) -> Series:
    raw = sample.values if sample.value is None else [sample.value]
    return Series(labels=dict(sample.metric), points=tuple((float(t), float(v)) for t, v in raw))


def _verify(conn: Connection) -> ssl.SSLContext | bool:
    if conn.ca_file is None:
        return True
    try:
        return ssl.create_default_context(cafile=str(conn.ca_file))
    except (OSError, ssl.SSLError) as exc:
        raise InputError.one(f"cannot load the CA bundle: {exc}", file=str(conn.ca_file)) from None


def _unix(at: datetime) -> str:
    if at.tzinfo is None:
        raise ValueError(f"naive datetime {at!r}: Prometheus times must carry a timezone")
    return f"{at.timestamp():.3f}"


def _error(where: str, message: str) -> InputError:
    return InputError.one(message, file=where)
