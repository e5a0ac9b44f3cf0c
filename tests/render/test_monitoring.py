"""The monitoring folder in the bundle: its own kustomization, in every example, off when the policy says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gpufleet.errors import InputError
from gpufleet.policy import load_policy, parse_policy, resolve
from gpufleet.render import render, write_bundle
from tests.render.monitoring_support import MONITORING_FLEET, monitoring_documents
from tests.support import EXAMPLES

FOLDER = [
    "alertmanager-routing.yaml",
    "grafana-dashboards.yaml",
    "kustomization.yaml",
    "pod-monitors.yaml",
    "prometheus-rules.yaml",
]


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_writes_the_monitoring_folder(example: Path, tmp_path: Path) -> None:
    out = tmp_path / "manifests"
    write_bundle(render(resolve(load_policy(example))), out)
    assert sorted(p.name for p in (out / "monitoring").iterdir()) == FOLDER
    own = yaml.safe_load((out / "monitoring" / "kustomization.yaml").read_text(encoding="utf-8"))
    assert own["resources"] == ["prometheus-rules.yaml", "pod-monitors.yaml", "grafana-dashboards.yaml"]
    top = yaml.safe_load((out / "kustomization.yaml").read_text(encoding="utf-8"))
    assert not any(r.startswith("monitoring") for r in top["resources"]), "kubectl apply -k DIR must not need the CRDs"


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_the_top_level_applies_no_prometheus_operator_kind(example: Path) -> None:
    bundle = render(resolve(load_policy(example)))
    assert not [o for o in bundle.objects() if o["apiVersion"].startswith("monitoring.coreos.com/")]
    assert {o["kind"] for o in bundle.api_objects() if o["apiVersion"].startswith("monitoring.coreos.com/")} == {
        "PrometheusRule",
        "PodMonitor",
    }


def test_monitoring_can_be_turned_off() -> None:
    text = MONITORING_FLEET.read_text(encoding="utf-8").replace("monitoring:\n", "monitoring:\n  enabled: false\n")
    contents = render(resolve(parse_policy(text, "fleet.yaml"))).contents()
    assert not [name for name in contents if name.startswith("monitoring/")]
    assert "metrics" not in yaml.safe_load(contents["kueue-configuration.yaml"])


def test_kueue_exports_quota_metrics_for_the_quota_panel_when_monitoring_is_on() -> None:
    contents = render(resolve(load_policy(MONITORING_FLEET))).contents()
    config = yaml.safe_load(contents["kueue-configuration.yaml"])
    assert config["metrics"] == {"enableClusterQueueResources": True}


def test_rules_and_monitors_carry_the_selector_labels_and_dashboards_the_sidecars() -> None:
    fleet = resolve(load_policy(MONITORING_FLEET))
    for name in ("prometheus-rules.yaml", "pod-monitors.yaml"):
        for o in monitoring_documents(fleet, name):
            assert o["metadata"]["labels"]["release"] == "kube-prometheus-stack"
            assert o["metadata"]["namespace"] == "gpufleet-system"
    for cm in monitoring_documents(fleet, "grafana-dashboards.yaml"):
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert cm["metadata"]["namespace"] == "monitoring"
        (board,) = (json.loads(v) for v in cm["data"].values())
        assert board["uid"] == cm["metadata"]["name"]
        assert all(p["targets"][0]["expr"] for p in board["panels"])


def test_the_thresholds_in_the_policy_reach_the_alerts() -> None:
    text = MONITORING_FLEET.read_text(encoding="utf-8").replace("maxWaitMinutes: 60", "maxWaitMinutes: 240")
    (alerts,) = [
        r
        for r in monitoring_documents(resolve(parse_policy(text, "f.yaml")), "prometheus-rules.yaml")
        if r["metadata"]["name"] == "gpufleet-alerts"
    ]
    wait = [r for g in alerts["spec"]["groups"] for r in g["rules"] if r["alert"] == "GpufleetTeamWaitTooLong"]
    assert wait and all("[240m:1m]" in r["expr"] and "over 240 min" in r["annotations"]["summary"] for r in wait)


def test_routing_uses_the_policys_service_hours() -> None:
    text = MONITORING_FLEET.read_text(encoding="utf-8").replace(
        "monitoring:\n",
        "monitoring:\n  serviceHours: {days: [monday, tuesday], start: '07:30', end: '16:00', timezone: Europe/Vienna}\n",
    )
    (config,) = monitoring_documents(resolve(parse_policy(text, "f.yaml")), "alertmanager-routing.yaml")
    (interval,) = config["time_intervals"][0]["time_intervals"]
    assert interval == {
        "weekdays": ["monday:tuesday"],
        "times": [{"start_time": "07:30", "end_time": "16:00"}],
        "location": "Europe/Vienna",
    }


# (id, monitoring block, field path, fragment of the message)
BAD = [
    ("zone", "{serviceHours: {timezone: Mars/Olympus}}", "monitoring.serviceHours.timezone", "unknown time zone"),
    ("day", "{serviceHours: {days: [monday, funday]}}", "monitoring.serviceHours.days[1]", "'monday'"),
    ("clock", "{serviceHours: {start: '8am'}}", "monitoring.serviceHours.start", "pattern"),
    ("backwards", "{serviceHours: {start: '18:00', end: '08:00'}}", "monitoring.serviceHours", "must be before"),
    ("twice", "{serviceHours: {days: [monday, monday]}}", "monitoring.serviceHours.days", "once"),
    ("wait", "{maxWaitMinutes: 0}", "monitoring.maxWaitMinutes", "greater than 0"),
    ("typo", "{maxWaitMinute: 5}", "monitoring.maxWaitMinute", "unknown field"),
]


@pytest.mark.parametrize(("block", "path", "fragment"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_monitoring_mistakes_are_located(block: str, path: str, fragment: str) -> None:
    base = MONITORING_FLEET.read_text(encoding="utf-8")
    text = base[: base.index("monitoring:\n")] + f"monitoring: {block}\n"
    line = text.count("\n")
    with pytest.raises(InputError) as caught:
        parse_policy(text, "fleet.yaml")
    problem = next((p for p in caught.value.problems if p.path == path), None)
    assert problem is not None, [str(p) for p in caught.value.problems]
    assert problem.file == "fleet.yaml" and problem.line == line
    assert fragment in problem.message
