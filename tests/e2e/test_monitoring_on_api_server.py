"""The ``monitoring/`` folder against the real API server, with the prometheus-operator CRDs installed.

The CRDs come from the prometheus-operator Go module (tests/e2e/prometheus_operator.py). Before they
are installed, the folder is refused (its kinds do not exist) while the top-level bundle still
applies: that is why monitoring is a kustomization of its own. Once they are installed, every
example's PrometheusRules, PodMonitors and dashboard ConfigMaps pass a server-side dry run, and
the CRDs' own validation is seen to bite on a broken rule.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.prometheus_operator import ModuleUnavailable, crd_files

HERE = Path(__file__).resolve().parent
POLICIES = [*sorted((HERE.parents[1] / "src" / "gpufleet" / "examples").glob("*.yaml")), HERE / "fleet.yaml"]
CRDS = ("prometheusrules.monitoring.coreos.com", "podmonitors.monitoring.coreos.com")


def _installed(cluster: Any) -> bool:
    return all(cluster.kubectl("get", "crd", name, check=False).returncode == 0 for name in CRDS)


def _prepare(cluster: Any, bundle: Path) -> None:
    cluster.prepare_namespaces(bundle)  # gpufleet-system, where the rules and monitors live
    for doc in yaml.safe_load_all((bundle / "monitoring" / "grafana-dashboards.yaml").read_text(encoding="utf-8")):
        cluster.kubectl("create", "namespace", doc["metadata"]["namespace"], check=False)  # Grafana's own


@pytest.fixture(scope="module")
def operator_crds(cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Install the CRDs (after checking the folder is refused without them, if they are not there yet)."""
    try:
        files = crd_files()
    except ModuleUnavailable as exc:
        pytest.fail(f"cannot fetch the prometheus-operator CRDs: {exc}")
    if not _installed(cluster):
        bundle = cluster.render(HERE / "fleet.yaml", tmp_path_factory.mktemp("before-crds") / "manifests")
        _prepare(cluster, bundle)
        top = cluster.kubectl("apply", "--server-side", "--dry-run=server", f"--kustomize={bundle}", check=False)
        assert top.returncode == 0, f"the top-level bundle must not need prometheus-operator: {top.stderr}"
        refused = cluster.kubectl(
            "apply", "--server-side", "--dry-run=server", f"--kustomize={bundle / 'monitoring'}", check=False
        )
        assert refused.returncode != 0
        assert "PrometheusRule" in refused.stderr
    for crd in files:
        cluster.kubectl("apply", "--server-side", f"--filename={crd}")
    for name in CRDS:
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{name}")
    return list(CRDS)


@pytest.mark.parametrize("policy", POLICIES, ids=[f"{p.parent.name}/{p.stem}" for p in POLICIES])
def test_the_monitoring_folder_passes_a_server_side_dry_run(
    cluster: Any, operator_crds: list[str], policy: Path, tmp_path: Path
) -> None:
    bundle = cluster.render(policy, tmp_path / "manifests")
    if (bundle / "workers").is_dir():  # a federated policy: each worker has its own monitoring folder
        bundle = sorted((bundle / "workers").iterdir())[0]
    _prepare(cluster, bundle)
    result = cluster.kubectl(
        "apply", "--server-side", "--dry-run=server", f"--kustomize={bundle / 'monitoring'}", check=False
    )
    assert result.returncode == 0, result.stderr
    applied = [line for line in result.stdout.splitlines() if "(server dry run)" in line]
    kinds = {line.split("/", 1)[0] for line in applied}
    assert kinds == {"prometheusrule.monitoring.coreos.com", "podmonitor.monitoring.coreos.com", "configmap"}
    assert len(applied) == 2 + 2 + 3  # recording + alerts, recorder + webhook monitors, three dashboards


def test_the_crd_validation_refuses_a_broken_rule(cluster: Any, operator_crds: list[str], tmp_path: Path) -> None:
    bundle = cluster.render(HERE / "fleet.yaml", tmp_path / "manifests")
    _prepare(cluster, bundle)
    rules = list(yaml.safe_load_all((bundle / "monitoring" / "prometheus-rules.yaml").read_text(encoding="utf-8")))
    alerts = next(r for r in rules if r["metadata"]["name"] == "gpufleet-alerts")
    alerts["spec"]["groups"][0]["rules"][0]["for"] = "five minutes"
    result = cluster.kubectl(
        "apply", "--server-side", "--dry-run=server", "--filename=-", stdin=yaml.safe_dump(alerts), check=False
    )
    assert result.returncode != 0
    assert "for" in result.stderr
