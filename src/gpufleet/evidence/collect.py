"""Fetching one window's series from Prometheus: the only part of evidence that does I/O.

DCGM metrics and ``kube_node_info`` come as raw samples (a range selector at the window's end, one
scrape interval wider so that a sample on the left edge is kept by Prometheus 2 and 3 alike; the grid
drops what falls outside). GPU requests of running pods are a join, so they are evaluated with
``query_range`` at the middle of each slot.
"""

from __future__ import annotations

from collections.abc import Callable
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
    span = f"{window.seconds + window.step_s}s"
    metrics: dict[str, list[Series]] = {}
    for metric in DCGM_METRICS:
        progress(f"{window.name}: {metric}")
        metrics[metric] = await prom.query(f"{metric}[{span}]", window.end)
    progress(f"{window.name}: {NODE_INFO}")
    node_info = await prom.query(f"{NODE_INFO}[{span}]", window.end)
    progress(f"{window.name}: GPU requests of running pods")
    half = timedelta(seconds=window.step_s / 2)
    requests = await prom.query_range(REQUESTS_RUNNING, window.start + half, window.end - half, window.step_s)
    return WindowInput(window=window, metrics=metrics, node_info=node_info, requests=requests)
