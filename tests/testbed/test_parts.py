"""The testbed's pure parts and its process handling, without the control plane."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

from gpufleet.policy import load_policy, resolve
from gpufleet.render import kueue as render_kueue
from gpufleet.render import render
from gpufleet.testbed import kueue, nodes
from gpufleet.testbed.processes import TestbedError, alive, start, stop, wait_until

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
POLICIES = sorted(EXAMPLES.glob("*.yaml"))


@pytest.mark.parametrize("path", POLICIES, ids=[p.stem for p in POLICIES])
def test_fake_nodes_offer_exactly_the_pool_units_with_the_rendered_labels_and_taints(path: Path) -> None:
    fleet = resolve(load_policy(path))
    fake = nodes.fake_nodes(fleet)
    offered: Counter[tuple[str, str]] = Counter()
    for node in fake:
        pool = node["metadata"]["labels"]["gpufleet.io/pool"]
        for resource, n in node["status"]["allocatable"].items():
            if resource.startswith("nvidia.com/"):
                offered[(pool, resource)] += int(n)
    assert offered == Counter({(p, r): n for p, cap in fleet.pools.items() for r, n in cap.units.items()})
    rendered = {o["metadata"]["name"]: o for o in render(fleet).objects() if o["kind"] == "Node"}
    for node in fake:
        patch = rendered.get(node["metadata"]["name"])
        if patch is not None:  # pools with node names get node patches; theirs must already hold
            assert patch["spec"]["taints"] == node["spec"]["taints"]
            assert (
                patch["metadata"]["labels"].items() - {("app.kubernetes.io/managed-by", "gpufleet")}
                <= node["metadata"]["labels"].items()
            )
        assert node["metadata"]["annotations"] == {nodes.KWOK_ANNOTATION: nodes.KWOK_VALUE}


def _webhook_manifests() -> list[dict[str, object]]:
    def hook(name: str, path: str) -> dict[str, object]:
        return {
            "name": name,
            "clientConfig": {"service": {"name": "webhook-service", "namespace": "system", "path": path}},
        }

    return [
        {
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "mutating-webhook-configuration"},
            "webhooks": [
                hook("mjob.kb.io", "/mutate-batch-v1-job"),
                hook("mpod.kb.io", "/mutate--v1-pod"),
                hook("mclusterqueue.kb.io", "/mutate-kueue-x-k8s-io-v1beta2-clusterqueue"),
            ],
        },
        {
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "validating-webhook-configuration"},
            "webhooks": [hook("vdeployment.kb.io", "/validate-apps-v1-deployment")],
        },
        {"kind": "Service", "metadata": {"name": "webhook-service"}},
    ]


def test_kueue_webhooks_point_at_the_local_process_and_keep_only_running_integrations() -> None:
    hooks = kueue.local_webhooks(_webhook_manifests(), port=9443, ca_pem=b"PEM")
    assert [h["metadata"]["name"] for h in hooks] == ["kueue-mutating-webhook-configuration"]
    urls = {w["name"]: w["clientConfig"] for w in hooks[0]["webhooks"]}
    assert urls == {
        "mjob.kb.io": {"url": "https://127.0.0.1:9443/mutate-batch-v1-job", "caBundle": "UEVN"},
        "mclusterqueue.kb.io": {
            "url": "https://127.0.0.1:9443/mutate-kueue-x-k8s-io-v1beta2-clusterqueue",
            "caBundle": "UEVN",
        },
    }
    job = next(w for w in hooks[0]["webhooks"] if w["name"] == "mjob.kb.io")
    assert job["namespaceSelector"]["matchExpressions"][0]["values"] == list(kueue.SYSTEM_NAMESPACES)


def test_kueue_config_carries_the_rendered_fields() -> None:
    fleet = resolve(load_policy(EXAMPLES / "fleet.yaml"))
    rendered = render_kueue.configuration(fleet, [])
    config = kueue.manager_config(webhook_port=1, health_port=2, cert_dir="/c", rendered=rendered)
    assert config["resources"] == rendered["resources"]
    assert config["fairSharing"] == rendered["fairSharing"]
    assert config["webhook"] == {"host": "127.0.0.1", "port": 1, "certDir": "/c"}


def test_stop_ends_a_started_process_and_only_that_one(tmp_path: Path) -> None:
    proc = start("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"], tmp_path / "sleeper.log")
    other = start("other", [sys.executable, "-c", "import time; time.sleep(60)"], tmp_path / "other.log")
    try:
        assert alive(proc)
        stop(proc)
        assert not alive(proc)
        assert alive(other)
    finally:
        stop(other)


def test_a_process_that_dies_fails_the_wait_at_once_with_its_log(tmp_path: Path) -> None:
    proc = start("crasher", [sys.executable, "-c", "print('bad flag'); raise SystemExit(3)"], tmp_path / "crasher.log")
    with pytest.raises(TestbedError, match="bad flag"):
        wait_until(proc, lambda: False, "health", timeout_s=30)
