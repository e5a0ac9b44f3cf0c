"""The ``monitoring/`` folder: PrometheusRules, PodMonitors, Grafana dashboards, Alertmanager routing.

It is its own kustomization (``kubectl apply -k DIR/monitoring``), never a resource of the top-level
one: PrometheusRule and PodMonitor are prometheus-operator CRDs that not every cluster has, and
``kubectl apply -k DIR`` must keep working without them. The objects follow kube-prometheus-stack's
conventions: rules and monitors carry the policy's ``monitoring.ruleLabels`` (default
``release: kube-prometheus-stack``, what its selectors match), dashboards the sidecar's label.
"""

from __future__ import annotations

from typing import Any

from gpufleet.check.manifests import NAMESPACE, WEBHOOK
from gpufleet.policy.fleet import Fleet
from gpufleet.recorder.manifests import NAME as RECORDER
from gpufleet.render import alertmanager, alerts, recording
from gpufleet.render.bundle import RenderedFile
from gpufleet.render.common import Obj, meta, obj
from gpufleet.render.dashboards import dashboard_configmaps
from gpufleet.render.forecast_exporter import NAME as FORECAST

API = "monitoring.coreos.com/v1"
FOLDER = "monitoring"


def alert_groups(fleet: Fleet) -> list[dict[str, Any]]:
    m = fleet.policy.monitoring
    groups = [
        ("gpufleet.recorder", alerts.recorder_alerts(m)),
        ("gpufleet.admission", alerts.admission_alerts(m)),
        ("gpufleet.queue", alerts.queue_alerts(fleet)),
        ("gpufleet.serving", alerts.serving_alerts(fleet)),
        ("gpufleet.nodes", alerts.node_alerts(fleet)),
    ]
    return [{"name": name, "rules": rules} for name, rules in groups if rules]


def prometheus_rules(fleet: Fleet) -> list[Obj]:
    labels = dict(fleet.policy.monitoring.ruleLabels)
    return [
        obj(
            API,
            "PrometheusRule",
            meta("gpufleet-recording", NAMESPACE, labels),
            spec={"groups": recording.recording_groups(fleet)},
        ),
        obj(API, "PrometheusRule", meta("gpufleet-alerts", NAMESPACE, labels), spec={"groups": alert_groups(fleet)}),
    ]


def pod_monitors(fleet: Fleet) -> list[Obj]:
    """Scrape the recorder (plain HTTP), the webhook (HTTPS, verified against its own certificate) and,
    where it is rendered (a PostgreSQL ledger), the forecast exporter (plain HTTP, every 60 s: its rounds').

    ``jobLabel`` takes the job from the pods' ``app.kubernetes.io/name``, so ``job`` is the component's
    name whatever the monitor's namespace; the alerts select on it.
    """
    labels = dict(fleet.policy.monitoring.ruleLabels)
    name_label = "app.kubernetes.io/name"

    def monitor(name: str, endpoint: Obj) -> Obj:
        return obj(
            API,
            "PodMonitor",
            meta(name, NAMESPACE, labels),
            spec={
                "jobLabel": name_label,
                "selector": {"matchLabels": {name_label: name}},
                "podMetricsEndpoints": [{"path": "/metrics", "interval": "30s", **endpoint}],
            },
        )

    forecast = [monitor(FORECAST, {"port": "metrics", "interval": "60s"})]
    return [
        monitor(RECORDER, {"port": "metrics"}),
        monitor(
            WEBHOOK,
            {
                "port": "https",
                "scheme": "https",
                # the self-signed certificate cert-manager issued; its Secret carries ca.crt
                "tlsConfig": {
                    "serverName": f"{WEBHOOK}.{NAMESPACE}.svc",
                    "ca": {"secret": {"name": f"{WEBHOOK}-tls", "key": "ca.crt"}},
                },
            },
        ),
        *(forecast if fleet.policy.recorder.ledger == "postgresql" else []),
    ]


def monitoring_files(fleet: Fleet) -> list[RenderedFile]:
    """The folder's files; none when the policy turns monitoring off."""
    if not fleet.policy.monitoring.enabled:
        return []
    routing = alertmanager.routing(fleet.policy.monitoring.serviceHours)
    return [
        RenderedFile(f"{FOLDER}/prometheus-rules.yaml", prometheus_rules(fleet)),
        RenderedFile(f"{FOLDER}/pod-monitors.yaml", pod_monitors(fleet)),
        RenderedFile(f"{FOLDER}/grafana-dashboards.yaml", dashboard_configmaps(fleet)),
        RenderedFile(
            f"{FOLDER}/alertmanager-routing.yaml",
            [routing],
            resource=False,
            header=alertmanager.HEADER,
            api=False,
            plain=True,
        ),
    ]
