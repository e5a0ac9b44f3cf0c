"""Fetching one window's series from Prometheus: the only part of evidence that does I/O.

DCGM metrics and ``kube_node_info`` come as raw samples (a range selector at the window's end, one
scrape interval wider so that a sample on the left edge is kept by Prometheus 2 and 3 alike; the grid
drops what falls outside). GPU requests of running pods are a join, so they are evaluated with
``query_range`` at the middle of each slot.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta

from gpufleet.evidence.allocation import NODE_INFO, REQUESTS_RUNNING
from gpufleet.evidence.tracks import ENGINE, FB_FREE, FB_USED, GPU_UTIL
from gpufleet.evidence.window import Window
from gpufleet.prom import PromClient, Series

DCGM_METRICS = (ENGINE, GPU_UTIL, FB_USED, FB_FREE)


@dataclass(frozen=True)
class WindowInput:
    """Everything one window's figures are computed from."""

    window: Window
    metrics: dict[str, list[Series]]
    node_info: list[Series] = field(default_factory=list)
    requests: list[Series] = field(default_factory=list)


Progress = Callable[[str], None]


async def collect(prom: PromClient, window: Window, progress: Progress) -> WindowInput:
    """The window's six queries, run at once (Prometheus answers them in parallel)."""
    span = f"{window.seconds + window.step_s}s"
    half = timedelta(seconds=window.step_s / 2)

    async def one(what: str, query: Awaitable[list[Series]]) -> list[Series]:
        result = await query
        progress(f"{window.name}: {what}")
        return result

    answers = await asyncio.gather(
        *(one(m, prom.query(f"{m}[{span}]", window.end)) for m in DCGM_METRICS),
        one(NODE_INFO, prom.query(f"{NODE_INFO}[{span}]", window.end)),
        one(
            "GPU requests of running pods",
            prom.query_range(REQUESTS_RUNNING, window.start + half, window.end - half, window.step_s),
        ),
        return_exceptions=True,  # every query settles before the first error is raised: none is left orphaned
    )
    failed = next((a for a in answers if isinstance(a, BaseException)), None)
    if failed is not None:
        raise failed
    *dcgm, node_info, requests = [a for a in answers if not isinstance(a, BaseException)]
    metrics = dict(zip(DCGM_METRICS, dcgm, strict=True))
    return WindowInput(window=window, metrics=metrics, node_info=node_info, requests=requests)
