"""An Alertmanager routing example for the policy's service hours.

What hurts the chat service (``gpufleet_impact="serving"``) pages at once, day and night. What only
delays batch work or gpufleet's own bookkeeping goes to the platform team's ticket queue, and only
inside the service hours (``active_time_intervals``): an alert that fires at 02:00 and still fires
at 08:00 is delivered at 08:00, when somebody is there to act; one that resolved by itself in the
night is never sent. The receivers carry no integration: fill in the pager and the ticket system.
"""

from __future__ import annotations

from typing import Any

from gpufleet.policy.model import ServiceHours

SERVICE_HOURS = "service-hours"
PAGER = "serving-pager"
TICKETS = "platform-tickets"
HEADER = """Alertmanager routing for gpufleet's alerts: not a Kubernetes object. Merge `route.routes`,
`time_intervals` and the receivers into your Alertmanager configuration (kube-prometheus-stack:
the `alertmanager.config` value), then give the receivers their pager and ticket integrations.
Serving alerts page at once; batch and platform alerts wait for the service hours."""


def _weekdays(days: list[str]) -> list[str]:
    """Consecutive days as Alertmanager ranges: [monday..friday] → ["monday:friday"].

    Alertmanager's week starts on Sunday and a range may not wrap past Saturday, so Sunday leads.
    """
    order = ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"]
    picked = sorted({order.index(d) for d in days})
    ranges: list[list[int]] = []
    for k in picked:
        if ranges and ranges[-1][1] == k - 1:
            ranges[-1][1] = k
        else:
            ranges.append([k, k])
    return [order[a] if a == b else f"{order[a]}:{order[b]}" for a, b in ranges]


def routing(hours: ServiceHours) -> dict[str, Any]:
    interval = {
        "weekdays": _weekdays(list(hours.days)),
        "times": [{"start_time": hours.start, "end_time": hours.end}],
        "location": hours.timezone,
    }
    return {
        "route": {
            "receiver": TICKETS,
            "group_by": ["alertname", "team", "pool"],
            "group_wait": "30s",
            "group_interval": "5m",
            "repeat_interval": "4h",
            "routes": [
                {
                    "receiver": PAGER,
                    "matchers": ['gpufleet_impact="serving"'],
                    "group_wait": "10s",
                    "repeat_interval": "1h",
                },
                {
                    "receiver": TICKETS,
                    "matchers": ['gpufleet_impact=~"batch|platform"'],
                    "active_time_intervals": [SERVICE_HOURS],
                },
            ],
        },
        "time_intervals": [{"name": SERVICE_HOURS, "time_intervals": [interval]}],
        "receivers": [{"name": PAGER}, {"name": TICKETS}],
    }
