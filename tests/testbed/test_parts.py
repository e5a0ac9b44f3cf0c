"""The testbed's pure parts and its process handling, without the control plane."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from gpufleet.policy import FleetPolicy, load_policy, resolve
from gpufleet.policy.load import parse_policy
from gpufleet.render import dra, render
from gpufleet.render import kueue as render_kueue
from gpufleet.render import scheduler as render_scheduler
from gpufleet.testbed import kueue, nodes, scheduler
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


def _leaves(obj: object, prefix: str = "") -> dict[str, object]:
    if isinstance(obj, dict) and obj:
        out: dict[str, object] = {}
        for key, value in obj.items():
            out.update(_leaves(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: obj}


def _variant(path: Path, **queueing: object) -> FleetPolicy:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data.setdefault("queueing", {}).update(queueing)
    data["monitoring"] = {**data.get("monitoring", {}), "enabled": True}
    return parse_policy(yaml.safe_dump(data), str(path))


RICH = {"fairSharing": True, "prioritizePreemptorWorkloads": True, "waitForPodsReady": {"timeoutSeconds": 90}}


@pytest.mark.parametrize(
    "policy",
    [load_policy(p) for p in POLICIES] + [_variant(p, **RICH) for p in POLICIES],
    ids=[p.stem for p in POLICIES] + [f"{p.stem}-rich" for p in POLICIES],
)
def test_every_rendered_kueue_field_reaches_the_testbed_config(policy: FleetPolicy) -> None:
    fleet = resolve(policy)
    mappings = dra.device_class_mappings(fleet) if dra.enabled(fleet) else []
    rendered = render_kueue.configuration(fleet, mappings)
    config = kueue.manager_config(webhook_port=1, health_port=2, cert_dir="/c", rendered=rendered)
    got = _leaves(config)
    local = tuple(kueue.LOCAL_KEYS)
    wanted = {k: v for k, v in _leaves(rendered).items() if not any(k == p or k.startswith(p + ".") for p in local)}
    assert {k: got.get(k) for k in wanted} == wanted
    assert config["webhook"] == {"host": "127.0.0.1", "port": 1, "certDir": "/c"}
    assert config["metrics"]["bindAddress"] == "0"


def test_the_rich_variant_renders_what_the_testbed_must_carry() -> None:
    """Guards the table above: the variant really renders waitForPodsReady, fair sharing and the rest."""
    fleet = resolve(_variant(EXAMPLES / "fleet.yaml", **RICH))
    rendered = render_kueue.configuration(fleet, [])
    assert rendered["waitForPodsReady"] == {"timeout": "1m30s"}
    assert {"fairSharing", "featureGates", "metrics", "resources"} <= rendered.keys()
    config = kueue.manager_config(webhook_port=1, health_port=2, cert_dir="/c", rendered=rendered)
    assert config["featureGates"] == {"VisibilityOnDemand": False, "PrioritizePreemptorWorkloads": True}
    assert config["metrics"] == {"bindAddress": "0", "enableClusterQueueResources": True}


def test_a_rendered_local_field_never_moves_the_testbed_process() -> None:
    rendered = {"webhook": {"port": 9443}, "metrics": {"bindAddress": ":8443"}, "waitForPodsReady": {"timeout": "5s"}}
    config = kueue.manager_config(webhook_port=1, health_port=2, cert_dir="/c", rendered=rendered)
    assert config["webhook"]["port"] == 1
    assert config["metrics"]["bindAddress"] == "0"
    assert config["waitForPodsReady"] == {"timeout": "5s"}


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


@pytest.mark.parametrize(("scoring", "stock"), [("LeastAllocated", True), ("MostAllocated", False)])
def test_kube_scheduler_runs_stock_or_with_the_rendered_profile(scoring: str, stock: bool) -> None:
    data = yaml.safe_load((EXAMPLES / "tiny.yaml").read_text(encoding="utf-8"))
    data["scheduling"] = {"nodeScoring": scoring}
    fleet = resolve(parse_policy(yaml.safe_dump(data)))
    rendered = render_scheduler.scheduler_configuration(fleet)
    config = scheduler.configuration(rendered, Path("/run/kubeconfig"))
    argv = scheduler.argv(["kube-scheduler", "--config=/old.yaml", "--v=1"], None if stock else Path("/s.yaml"))
    if stock:
        assert config is None and argv == ["kube-scheduler", "--v=1"]
        return
    assert config is not None and argv == ["kube-scheduler", "--v=1", "--config=/s.yaml"]
    assert config["profiles"] == rendered[0]["profiles"]
    assert config["clientConnection"] == {"kubeconfig": "/run/kubeconfig"}
    assert config["leaderElection"] == {"leaderElect": False}
