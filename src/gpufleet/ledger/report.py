"""``audit report``: per team and flavor GPU-hours, share against weight, waits, preemptions, labels.

Simulated and recorded allocations are never mixed in one row: ``simulated`` is part of the
row's key, so a twin run shows up as its own rows, marked as such.

A preemption counts in the window its attempt ended in. One the recorder only inferred from
Kueue's eviction count has no time, so it counts in no window (its row spans the workload's whole
life, and would otherwise count again in every window after it was created); the report names
those workloads instead.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from jinja2 import Environment

from gpufleet.ledger.records import Allocation, EndReason, WaitInterval, format_time
from gpufleet.ledger.store import Ledger

UNLABELLED = "(unlabelled)"


@dataclass(frozen=True, slots=True)
class ReportRow:
    team: str
    flavor: str
    simulated: bool
    gpu_hours: float
    share: float  # of all GPU-hours in the window (recorded or simulated side alike)
    weight_share: float | None  # the team's weight over all weights, when weights are given
    wait_p50_s: float | None
    wait_p95_s: float | None
    preemptions: int  # attempts preempted within the window (by when they ended)
    models: tuple[str, ...]
    data_classes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Report:
    start: datetime
    end: datetime
    rows: tuple[ReportRow, ...]
    incomplete: tuple[str, ...]  # workloads missing team, model or data class labels
    untimed_preemptions: tuple[str, ...] = ()  # workloads with a preemption at a time never observed

    @property
    def simulated(self) -> bool:
        return any(r.simulated for r in self.rows)


def _percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (no interpolation: every figure is one of the measured waits)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))  # ceil
    return ordered[int(rank) - 1]


def _hours(a: Allocation, start: datetime, end: datetime) -> float:
    begin = a.quota_reserved or a.admitted
    if begin is None:
        return 0.0
    lo, hi = max(begin, start), min(a.finished or end, end)
    return max(0.0, (hi - lo).total_seconds()) / 3600 * a.gpu_count


def build(
    allocations: list[Allocation],
    waits: list[WaitInterval],
    start: datetime,
    end: datetime,
    weights: Mapping[str, float] | None = None,
) -> Report:
    """The report over records already filtered to the window. Rows ordered by (simulated, team, flavor)."""
    groups: dict[tuple[bool, str, str], list[Allocation]] = {}
    for a in allocations:
        flavor = dict(a.flavors).get(a.gpu_resource, "") or "(none)"
        groups.setdefault((a.simulated, a.team or UNLABELLED, flavor), []).append(a)
    totals: dict[bool, float] = {}
    hours = {key: sum(_hours(a, start, end) for a in group) for key, group in groups.items()}
    for (simulated, _, _), h in hours.items():
        totals[simulated] = totals.get(simulated, 0.0) + h
    waited: dict[tuple[bool, str], dict[str, float]] = {}
    for w in waits:
        if w.end is None:
            continue
        per_workload = waited.setdefault((w.simulated, w.team or UNLABELLED), {})
        per_workload[w.workload_uid] = per_workload.get(w.workload_uid, 0.0) + (w.end - w.start).total_seconds()
    weight_total = sum((weights or {}).values())
    rows: list[ReportRow] = []
    for key in sorted(groups):
        simulated, team, flavor = key
        group = groups[key]
        team_waits = list(waited.get((simulated, team), {}).values())
        rows.append(
            ReportRow(
                team=team,
                flavor=flavor,
                simulated=simulated,
                gpu_hours=round(hours[key], 3),
                share=round(hours[key] / totals[simulated], 4) if totals[simulated] else 0.0,
                weight_share=round(weights[team] / weight_total, 4) if weights and team in weights else None,
                wait_p50_s=_percentile(team_waits, 50),
                wait_p95_s=_percentile(team_waits, 95),
                preemptions=sum(1 for a in group if _preempted_within(a, start, end)),
                models=tuple(sorted({a.model for a in group if a.model})),
                data_classes=tuple(sorted({a.data_class for a in group if a.data_class})),
            )
        )
    incomplete = sorted({f"{a.namespace}/{a.name}" for a in allocations if not (a.team and a.model and a.data_class)})
    untimed = sorted(
        {f"{a.namespace}/{a.name}" for a in allocations if a.end_reason == EndReason.PREEMPTED and a.finished is None}
    )
    return Report(start, end, tuple(rows), tuple(incomplete), tuple(untimed))


def _preempted_within(a: Allocation, start: datetime, end: datetime) -> bool:
    return a.end_reason == EndReason.PREEMPTED and a.finished is not None and start <= a.finished < end


def report(ledger: Ledger, start: datetime, end: datetime, weights: Mapping[str, float] | None = None) -> Report:
    return build(
        ledger.allocations(overlapping=(start, end)),
        ledger.waits(overlapping=(start, end)),
        start,
        end,
        weights,
    )


def _plain_row(row: ReportRow) -> dict[str, Any]:
    data = asdict(row)
    data["models"] = " ".join(row.models)
    data["data_classes"] = " ".join(row.data_classes)
    return data


def to_json(r: Report) -> str:
    return json.dumps(
        {
            "from": format_time(r.start),
            "to": format_time(r.end),
            "simulated": r.simulated,
            "rows": [
                {**asdict(row), "models": list(row.models), "data_classes": list(row.data_classes)} for row in r.rows
            ],
            "incompleteLabels": list(r.incomplete),
            "untimedPreemptions": list(r.untimed_preemptions),
        },
        indent=2,
    )


def to_csv(r: Report) -> str:
    out = io.StringIO()
    fields = list(ReportRow.__dataclass_fields__)
    writer = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for row in r.rows:
        writer.writerow(_plain_row(row))
    return out.getvalue()


_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>gpufleet audit report</title>
<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;
padding:4px 8px;text-align:left}.sim{background:#fff4d6}</style></head><body>
<h1>GPU allocations {{ start }} – {{ end }}</h1>
{% if simulated %}<p class="sim"><strong>Rows marked “simulated” come from a twin run, not a cluster.</strong>
</p>{% endif %}
<table><tr><th>team</th><th>flavor</th><th>source</th><th>GPU-hours</th><th>share</th><th>weight share</th>
<th>wait p50 (s)</th><th>wait p95 (s)</th><th>preemptions</th><th>models</th><th>data classes</th></tr>
{% for r in rows %}<tr{% if r.simulated %} class="sim"{% endif %}><td>{{ r.team }}</td><td>{{ r.flavor }}</td>
<td>{{ "simulated" if r.simulated else "recorded" }}</td><td>{{ r.gpu_hours }}</td><td>{{ r.share }}</td>
<td>{{ r.weight_share if r.weight_share is not none else "–" }}</td>
<td>{{ r.wait_p50_s if r.wait_p50_s is not none else "–" }}</td>
<td>{{ r.wait_p95_s if r.wait_p95_s is not none else "–" }}</td><td>{{ r.preemptions }}</td>
<td>{{ r.models|join(", ") }}</td><td>{{ r.data_classes|join(", ") }}</td></tr>
{% endfor %}</table>
<h2>Workloads without complete labels</h2>
{% if incomplete %}<ul>{% for w in incomplete %}<li>{{ w }}</li>{% endfor %}</ul>
{% else %}<p>None.</p>{% endif %}
{% if untimed %}<h2>Preemptions at times never observed</h2>
<p>Proven by Kueue's eviction count only; counted in no window (<code>gpufleet audit why</code> shows them):</p>
<ul>{% for w in untimed %}<li>{{ w }}</li>{% endfor %}</ul>{% endif %}
</body></html>
"""


def to_html(r: Report) -> str:
    template = Environment(autoescape=True).from_string(_HTML)
    return template.render(
        start=format_time(r.start),
        end=format_time(r.end),
        simulated=r.simulated,
        rows=r.rows,
        incomplete=r.incomplete,
        untimed=r.untimed_preemptions,
    )
