"""The report's charts as PNG bytes (matplotlib, Agg backend: no display, same bytes every run).

Each chart puts the runs of one results document side by side, "before" (first-apply) first.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # the backend is chosen above, before pyplot loads
from matplotlib.figure import Figure

HOUR = 3600
PALETTE = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C", "#CCB974")
SERVING_COLOR = "#B0B0B0"
RUN_COLORS = {"first-apply": "#C44E52", "queue": "#4C72B0"}
DPI = 100


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    plt.close(fig)
    return buffer.getvalue()


def _run_color(name: str, i: int) -> str:
    return RUN_COLORS.get(name, PALETTE[i % len(PALETTE)])


def waits_per_team(runs: Mapping[str, Any], teams: list[str]) -> bytes:
    """p50 and p95 wait per team (hours), one bar pair per run."""
    fig, ax = plt.subplots(figsize=(9, 4.2))
    width = 0.8 / max(len(runs), 1)
    for i, (name, run) in enumerate(runs.items()):
        xs = [t + (i - (len(runs) - 1) / 2) * width for t in range(len(teams))]
        p95 = [(run["teams"][t]["waitSeconds"]["p95"] or 0) / HOUR for t in teams]
        p50 = [(run["teams"][t]["waitSeconds"]["p50"] or 0) / HOUR for t in teams]
        color = _run_color(name, i)
        ax.bar(xs, p95, width * 0.95, color=color, alpha=0.35, label=f"{name} p95")
        ax.bar(xs, p50, width * 0.95, color=color, label=f"{name} p50")
    ax.set_xticks(range(len(teams)), teams)
    ax.set_ylabel("wait (hours)")
    ax.set_title("Wait per team")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return _png(fig)


def utilization_over_time(runs: Mapping[str, Any], teams: list[str], capacity: float) -> bytes:
    """GPUs held over time, stacked by team (serving on top), one panel per run."""
    fig, axes = plt.subplots(len(runs), 1, figsize=(10, 2.6 * max(len(runs), 1) + 0.6), sharex=True, squeeze=False)
    for ax, (name, run) in zip(axes[:, 0], runs.items(), strict=True):
        series = run["series"]
        hours = [s / HOUR for s in series["start"]]
        stacks = [series["allocatedGpus"].get(t, [0.0] * len(hours)) for t in teams]
        stacks.append(series["allocatedGpus"].get("serving", [0.0] * len(hours)))
        colors = [PALETTE[i % len(PALETTE)] for i in range(len(teams))] + [SERVING_COLOR]
        if hours:
            ax.stackplot(hours, stacks, labels=[*teams, "serving"], colors=colors, step="post")
        ax.axhline(capacity, color="black", linewidth=0.8, linestyle="--", label="capacity")
        util = run["fleet"]["utilization"]
        ax.set_title(f"{name}: utilization {util:.0%}", fontsize=10)
        ax.set_ylabel("GPUs")
        ax.set_ylim(0, capacity * 1.08 if capacity else 1)
        ax.grid(axis="y", alpha=0.3)
    axes[0, 0].legend(fontsize=7, ncol=min(len(teams) + 2, 6), loc="upper right")
    axes[-1, 0].set_xlabel("hours since the trace began")
    fig.tight_layout()
    return _png(fig)


def queue_length(runs: Mapping[str, Any]) -> bytes:
    """Jobs waiting (for quota, for nodes, or in backoff) over time, one line per run."""
    fig, ax = plt.subplots(figsize=(10, 3.6))
    for i, (name, run) in enumerate(runs.items()):
        series = run["series"]
        hours = [s / HOUR for s in series["start"]]
        ax.step(hours, series["queueLength"], where="post", color=_run_color(name, i), label=name)
    ax.set_xlabel("hours since the trace began")
    ax.set_ylabel("jobs waiting (hourly mean)")
    ax.set_title("Queue length")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return _png(fig)


def share_vs_weight(runs: Mapping[str, Any], teams: list[str]) -> bytes:
    """Each team's share of the GPU-hours beside its share of the weights."""
    fig, ax = plt.subplots(figsize=(9, 4.2))
    groups = len(runs) + 1
    width = 0.8 / groups
    first = next(iter(runs.values()), None)
    weights = [first["teams"][t]["weightShare"] if first else 0 for t in teams]
    xs = [t - 0.4 + width / 2 for t in range(len(teams))]
    ax.bar(xs, weights, width * 0.95, color="#333333", label="weight share")
    for i, (name, run) in enumerate(runs.items(), start=1):
        shares = [run["teams"][t]["share"] for t in teams]
        ax.bar([x + i * width for x in xs], shares, width * 0.95, color=_run_color(name, i), label=f"{name} share")
    ax.set_xticks(range(len(teams)), teams)
    ax.set_ylabel("share of batch GPU-hours")
    ax.set_title("Share of the fleet against weight")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return _png(fig)
