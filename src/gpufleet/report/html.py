"""report.html: one self-contained page (charts inlined as base64) that puts the runs side by side."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import jinja2

from gpufleet.durations import human

LABELS = {
    "first-apply": "Before: first apply (no queue)",
    "queue": "After: Kueue in front of the cards",
    "input": "Kueue, the policy as written",  # the worlds of `gpufleet tune` and the demo
    "tuned": "Kueue, the tuned policy",
}
# the same worlds inside the headline's sentence
SAID = {
    "first-apply": "first apply (no queue)",
    "queue": "Kueue",
    "input": "Kueue with the policy as written",
    "tuned": "Kueue with the tuned policy",
}


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
        ("Jain's index (GPU-h / fair share)", "–" if f["jainIndex"] is None else f"{f['jainIndex']:.3f}"),
        ("jobs finished", f"{f['finished']} of {f['jobs']}"),
        ("preemptions (GPU-h lost)", f"{f['preemptions']} ({num(f['workLostGpuHours'])})"),
        ("jobs preempted", str(f["jobsPreempted"])),
        ("most preempted job", preempted(f["mostPreempted"][0] if f["mostPreempted"] else None)),
        ("waitForPodsReady evictions", str(f["podsReadyEvictions"])),
        ("admitted-but-unplaced hours", num(unplaced)),
        ("serving starved replica-minutes", num(s["starvedReplicaMinutes"])),
    ]


MEASURE_ROWS: list[tuple[str, str]] = [
    ("goodput GPU-h (runs that completed)", "goodputGpuHours"),
    ("held idle GPU-h (bound to jobs not running)", "heldIdleGpuHours"),
    ("lost GPU-h (preempted work)", "lostGpuHours"),
    ("usable idle GPU-h (free while a waiting job fit)", "usableIdleGpuHoursTotal"),
    ("serving GPU-h", "servingGpuHours"),
    ("capacity GPU-h", "capacityGpuHours"),
]


def measure_rows(measures: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, list[str]]]:
    """The measures table of the report: one row per measure, one cell per world."""
    ms = list(measures.values())

    def share(m: Mapping[str, Any], key: str) -> str:
        cap = m["capacityGpuHours"]
        return num(m[key]) + (f" ({m[key] / cap:.0%})" if cap and key != "capacityGpuHours" else "")

    rows = [(label, [share(m, key) for m in ms]) for label, key in MEASURE_ROWS]
    pools = sorted({p for m in ms for p, h in m["usableIdleGpuHours"].items() if h})
    rows += [(f"usable idle on {p}", [num(m["usableIdleGpuHours"].get(p)) for m in ms]) for p in pools]
    rows += [
        ("makespan", [dur(m["makespanSeconds"]) for m in ms]),
        (
            "jobs finished",
            [
                f"{m['finished']} of {m['jobs']}"
                + (f" ({m['neverAdmissible']} never admissible)" if m["neverAdmissible"] else "")
                for m in ms
            ],
        ),
        ("Jain's index (goodput / fair share)", ["–" if m["jain"] is None else f"{m['jain']:.3f}" for m in ms]),
        ("serving starved replica-minutes", [num(m["servingStarvedReplicaMinutes"]) for m in ms]),
        (
            "preemptions per job: max / p95",
            [f"{m['preemptionsPerJob']['max']} / {m['preemptionsPerJob']['p95']}" for m in ms],
        ),
    ]
    return rows


def headline(document: Mapping[str, Any]) -> str:
    """One sentence on what the last world changes against the first, with the numbers (the report's
    first line); empty with a single world."""
    measures: Mapping[str, Mapping[str, Any]] = document.get("measures", {})
    if len(measures) < 2:
        return ""
    (before_name, before), *_, (after_name, after) = measures.items()
    gain = after["goodputGpuHours"] - before["goodputGpuHours"]
    ratio = f" ({gain / before['goodputGpuHours']:+.0%})" if before["goodputGpuHours"] else ""
    shorter = [
        team
        for team, t in after["teams"].items()
        if (b := before["teams"].get(team)) is not None
        and t["waitSeconds"]["p95"] is not None
        and b["waitSeconds"]["p95"] is not None
        and t["waitSeconds"]["p95"] < b["waitSeconds"]["p95"]
    ]
    teams = len([t for t in after["teams"].values() if t["jobs"]])
    findings = len(document.get("findings", {}).get(after_name, []))
    window = document["window"]
    after_label, before_label = (SAID.get(n, n) for n in (after_name, before_name))
    return (
        f"Simulated: over the first {dur(window['endSeconds'] - window['startSeconds'])}, {after_label} finishes "
        f"{num(after['goodputGpuHours'])} GPU-h of work against {num(before['goodputGpuHours'])}{ratio} under {before_label}, "
        f"holds {num(after['heldIdleGpuHours'])} GPU-h idle (against {num(before['heldIdleGpuHours'])}), loses "
        f"{num(after['lostGpuHours'])} GPU-h to preemption, shortens the p95 wait of {len(shorter)} of {teams} teams, "
        f"starves serving {num(after['servingStarvedReplicaMinutes'])} replica-minutes (against "
        f"{num(before['servingStarvedReplicaMinutes'])}), and shows {findings} patholog{'y' if findings == 1 else 'ies'}."
    )


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
        title="Before and after the queue (simulated)" if len(runs) > 1 else f"Simulated run: {next(iter(runs))}",
        subtitle=f"{trace['jobs']} jobs from {trace['source']}; fleet of "
        f"{sum(document['fleet']['pools'].values())} GPUs in {len(document['fleet']['pools'])} pools",
        runs=runs,
        first=first,
        labels={name: LABELS.get(name, name) for name in runs},
        kpis={name: kpis(run) for name, run in runs.items()},
        headline=headline(document),
        window=document.get("window"),
        measures=document.get("measures", {}),
        measure_rows=measure_rows(document.get("measures", {})) if document.get("measures") else [],
        findings=document.get("findings", {}),
        teams=teams,
        kinds=kinds,
        charts=[{"title": title, "data": base64.b64encode(png).decode("ascii")} for title, png in charts],
        dur=dur,
        pct=pct,
        num=num,
    )
