"""report.html: one self-contained page (charts inlined as base64) that puts the runs side by side."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import jinja2

from gpufleet.durations import human

LABELS = {"first-apply": "Before: first apply (no queue)", "queue": "After: Kueue in front of the cards"}


def dur(seconds: float | None) -> str:
    """A wait for people, as everywhere gpufleet prints one (``gpufleet.durations``)."""
    return human(seconds)


def pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def num(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f}"


def preempted(entry: Mapping[str, Any] | None) -> str:
    """One most-preempted job for people: ``ns/job: 372× by nlp 186, vision 186 (InCohortReclamation 372)``."""
    if entry is None:
        return "–"
    by_team = ", ".join(f"{team} {n}" for team, n in entry["byTeam"].items())
    by_reason = ", ".join(f"{reason} {n}" for reason, n in entry["byReason"].items())
    return f"{entry['job']}: {entry['preemptions']}× by {by_team} ({by_reason})"


def kpis(run: Mapping[str, Any]) -> list[tuple[str, str]]:
    f, s = run["fleet"], run["serving"]
    unplaced = f["admittedUnplacedHours"]
    return [
        ("utilization", pct(f["utilization"])),
        ("GPU-hours allocated", num(f["allocatedGpuHours"])),
        ("idle GPU-hours while work waited", num(f["idleGpuHoursWhileWaiting"])),
        ("wait p50 / p95", f"{dur(f['waitSeconds']['p50'])} / {dur(f['waitSeconds']['p95'])}"),
        ("longest wait", dur(f["waitSeconds"]["max"])),
        ("Jain's index (share / weight)", "–" if f["jainIndex"] is None else f"{f['jainIndex']:.3f}"),
        ("jobs finished", f"{f['finished']} of {f['jobs']}"),
        ("preemptions (GPU-h lost)", f"{f['preemptions']} ({num(f['workLostGpuHours'])})"),
        ("jobs preempted", str(f["jobsPreempted"])),
        ("most preempted job", preempted(f["mostPreempted"][0] if f["mostPreempted"] else None)),
        ("waitForPodsReady evictions", str(f["podsReadyEvictions"])),
        ("admitted-but-unplaced hours", num(unplaced)),
        ("serving starved replica-minutes", num(s["starvedReplicaMinutes"])),
    ]


def render_html(document: Mapping[str, Any], charts: list[tuple[str, bytes]]) -> str:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("gpufleet.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    runs: Mapping[str, Any] = document["runs"]
    first = next(iter(runs.values()))
    teams = list(first["teams"])
    kinds = sorted({k for run in runs.values() for k in run["kinds"]})
    trace = document["trace"]
    return env.get_template("report.html.j2").render(
        title="Before and after the queue" if len(runs) > 1 else f"Simulated run: {next(iter(runs))}",
        subtitle=f"{trace['jobs']} jobs from {trace['source']}; fleet of "
        f"{sum(document['fleet']['pools'].values())} GPUs in {len(document['fleet']['pools'])} pools",
        runs=runs,
        first=first,
        labels={name: LABELS.get(name, name) for name in runs},
        kpis={name: kpis(run) for name, run in runs.items()},
        teams=teams,
        kinds=kinds,
        charts=[{"title": title, "data": base64.b64encode(png).decode("ascii")} for title, png in charts],
        dur=dur,
        pct=pct,
        num=num,
    )
