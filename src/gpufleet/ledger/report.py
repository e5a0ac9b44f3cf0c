"""``audit report``: per team and flavor GPU-hours, share against weight, waits, preemptions, labels.

Simulated and recorded allocations are never mixed in one row: ``simulated`` is part of the
row's key, so a twin run shows up as its own rows, marked as such. Nor are clusters: a record's
cluster (its own, signed, else the name its ledger was given) is part of the key too, and a share is
of its own cluster's GPU-hours, so a federation's report (``ledger.fleet.report``, one ledger per
worker) puts rows side by side without ever adding one chain's hours to another's.

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
    cluster: str | None = None  # the worker cluster of a federation; None: one cluster, not named


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

    @property
    def clustered(self) -> bool:
        """Whether any row names a cluster: then every output shows the cluster column."""
        return any(r.cluster is not None for r in self.rows)


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
    *,
    cluster: str | None = None,
) -> Report:
    """The report over records already filtered to the window; ``cluster`` labels the records that
    name none. Rows ordered by (cluster, simulated, team, flavor), a row without a cluster first."""
    groups: dict[tuple[str, bool, str, str], list[Allocation]] = {}
    for a in allocations:
        flavor = dict(a.flavors).get(a.gpu_resource, "") or "(none)"
        groups.setdefault((_cluster(a, cluster), a.simulated, a.team or UNLABELLED, flavor), []).append(a)
    totals: dict[tuple[str, bool], float] = {}
    hours = {key: sum(_hours(a, start, end) for a in group) for key, group in groups.items()}
    for (where, simulated, _, _), h in hours.items():
        totals[where, simulated] = totals.get((where, simulated), 0.0) + h
    waited: dict[tuple[str, bool, str], dict[str, float]] = {}
    for w in waits:
        if w.end is None:
            continue
        per_workload = waited.setdefault((_cluster(w, cluster), w.simulated, w.team or UNLABELLED), {})
        per_workload[w.workload_uid] = per_workload.get(w.workload_uid, 0.0) + (w.end - w.start).total_seconds()
    weight_total = sum((weights or {}).values())
    rows: list[ReportRow] = []
    for key in sorted(groups):
        where, simulated, team, flavor = key
        group = groups[key]
        team_waits = list(waited.get((where, simulated, team), {}).values())
        total = totals[where, simulated]
        rows.append(
            ReportRow(
                team=team,
                flavor=flavor,
                simulated=simulated,
                gpu_hours=round(hours[key], 3),
                share=round(hours[key] / total, 4) if total else 0.0,
                weight_share=round(weights[team] / weight_total, 4) if weights and team in weights else None,
                wait_p50_s=_percentile(team_waits, 50),
                wait_p95_s=_percentile(team_waits, 95),
                preemptions=sum(1 for a in group if _preempted_within(a, start, end)),
                models=tuple(sorted({a.model for a in group if a.model})),
                data_classes=tuple(sorted({a.data_class for a in group if a.data_class})),
                cluster=where or None,
            )
        )
    incomplete = sorted({_named(a, cluster) for a in allocations if not (a.team and a.model and a.data_class)})
    untimed = sorted(
        {_named(a, cluster) for a in allocations if a.end_reason == EndReason.PREEMPTED and a.finished is None}
    )
    return Report(start, end, tuple(rows), tuple(incomplete), tuple(untimed))


def _cluster(record: Allocation | WaitInterval, default: str | None) -> str:
    """The record's cluster (signed), else its ledger's name, else "" (sorts first, shown as none)."""
    return record.cluster or default or ""


def _named(a: Allocation, default: str | None) -> str:
    """A workload as the report lists it: NS/NAME, and its cluster where it has one."""
    where = _cluster(a, default)
    return f"{a.namespace}/{a.name}" + (f" (cluster {where})" if where else "")


def _preempted_within(a: Allocation, start: datetime, end: datetime) -> bool:
    return a.end_reason == EndReason.PREEMPTED and a.finished is not None and start <= a.finished < end


def report(
    ledger: Ledger,
    start: datetime,
    end: datetime,
    weights: Mapping[str, float] | None = None,
    *,
    cluster: str | None = None,
) -> Report:
    return build(
        ledger.allocations(overlapping=(start, end)),
        ledger.waits(overlapping=(start, end)),
        start,
        end,
        weights,
        cluster=cluster,
    )


def combined(reports: list[Report]) -> Report:
    """Several clusters' reports (one per ledger, over one window) as one: rows side by side, ordered
    as ``build`` orders them; nothing added across reports (each row's share is of its own cluster)."""
    first = reports[0]
    return Report(
        first.start,
        first.end,
        tuple(sorted((row for r in reports for row in r.rows), key=_row_order)),
        tuple(sorted({w for r in reports for w in r.incomplete})),
        tuple(sorted({w for r in reports for w in r.untimed_preemptions})),
    )


def _row_order(row: ReportRow) -> tuple[str, bool, str, str]:
    return (row.cluster or "", row.simulated, row.team, row.flavor)


def _plain_row(row: ReportRow) -> dict[str, Any]:
    data = asdict(row)
    data["models"] = " ".join(row.models)
    data["data_classes"] = " ".join(row.data_classes)
    return data


def _fields(r: Report) -> list[str]:
    """The CSV columns: the cluster first where a row names one; a one-cluster report keeps its columns."""
    fields = [f for f in ReportRow.__dataclass_fields__ if f != "cluster"]
    return ["cluster", *fields] if r.clustered else fields


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
    writer = csv.DictWriter(out, fieldnames=_fields(r), lineterminator="\n", extrasaction="ignore")
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
<table><tr>{% if clustered %}<th>cluster</th>{% endif %}
<th>team</th><th>flavor</th><th>source</th><th>GPU-hours</th><th>share</th><th>weight share</th>
<th>wait p50 (s)</th><th>wait p95 (s)</th><th>preemptions</th><th>models</th><th>data classes</th></tr>
{% for r in rows %}<tr{% if r.simulated %} class="sim"{% endif %}>{% if clustered %}<td>{{ r.cluster or "–" }}</td>
{% endif %}<td>{{ r.team }}</td><td>{{ r.flavor }}</td>
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
        clustered=r.clustered,
        rows=r.rows,
        incomplete=r.incomplete,
        untimed=r.untimed_preemptions,
    )
