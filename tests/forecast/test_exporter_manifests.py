"""The forecast exporter in the rendered bundle: beside the recorder for a PostgreSQL ledger, absent
for SQLite (no second pod can read the recorder's volume), scraped by its own PodMonitor."""

from __future__ import annotations

from typing import Any

import yaml
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.policy import parse_policy, resolve
from gpufleet.render import render
from gpufleet.render.forecast_exporter import NAME, POLICY_KEY
from tests.render.monitoring_support import MONITORING_FLEET

SQLITE = MONITORING_FLEET.read_text(encoding="utf-8")
POSTGRES = SQLITE + "\nrecorder: {ledger: postgresql}\n"


def rendered(text: str) -> dict[str, list[dict[str, Any]]]:
    contents = render(resolve(parse_policy(text, "fleet.yaml"))).contents()
    return {name: [d for d in yaml.safe_load_all(body) if d] for name, body in contents.items()}


def test_a_postgresql_ledger_renders_the_exporter_beside_the_recorder(tmp_path: Any) -> None:
    files = rendered(POSTGRES)
    by_kind = {o["kind"]: o for o in files["forecast-exporter.yaml"]}
    assert set(by_kind) == {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "Deployment"}
    assert {v for rule in by_kind["ClusterRole"]["rules"] for v in rule["verbs"]} == {"get", "list"}
    # the ConfigMap carries the policy itself: parsed back, it is the policy rendered
    policy = by_kind["ConfigMap"]["data"][POLICY_KEY]
    assert parse_policy(policy, POLICY_KEY) == parse_policy(POSTGRES, "fleet.yaml")
    (container,) = by_kind["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert container["args"][0] == "forecast" and "--serve" in container["args"]
    assert container["env"][0]["valueFrom"]["secretKeyRef"]["name"] == "gpufleet-ledger"
    (monitor,) = [m for m in files["monitoring/pod-monitors.yaml"] if m["metadata"]["name"] == NAME]
    assert monitor["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"] == NAME
    # the rendered arguments are ones the CLI takes: with this policy and no database it stops at the ledger
    (tmp_path / POLICY_KEY).write_text(policy, encoding="utf-8")
    args = [a.replace("$(LEDGER_URL)", str(tmp_path / "none.db")) for a in container["args"]]
    args[args.index("--policy") + 1] = str(tmp_path / POLICY_KEY)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "none.db" in result.output, result.output


def test_a_sqlite_ledger_renders_no_exporter() -> None:
    files = rendered(SQLITE)
    assert "forecast-exporter.yaml" not in files
    assert not [m for m in files["monitoring/pod-monitors.yaml"] if m["metadata"]["name"] == NAME]
