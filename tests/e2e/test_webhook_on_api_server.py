"""gpufleet's webhook in the real API server's path: certificates from ``gpufleet webhook certs``.

The session's bundle is applied (``applied``: the ValidatingAdmissionPolicy included). Then, as a user
without cert-manager does: ``gpufleet webhook certs --configuration admission-webhook.yaml`` makes the
CA, the serving pair and the configured webhook objects; ``gpufleet webhook serve`` runs as a local
process, and the two webhook configurations are applied pointed at it by URL (the only change from
the rendered ones: a Service cannot reach a process on loopback). The API server then calls it over
TLS, trusting the CA through ``caBundle``, for every Job in a team namespace.
"""

from __future__ import annotations

import base64
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from gpufleet.check.manifests import NAMESPACE as WEBHOOK_NAMESPACE
from gpufleet.cli import app
from gpufleet.testbed.webhook import local_configurations
from tests.e2e.conftest import POLICY, REPO, eventually

QUEUE = "kueue.x-k8s.io/queue-name"
PRIORITY = "kueue.x-k8s.io/priority-class"
LABELS = {"gpufleet.io/team": "alpha", "gpufleet.io/model": "tiny", "gpufleet.io/data-class": "internal"}


def job(name: str, labels: dict[str, str], *, namespace: str = "alpha", gpus: int = 1, **extra: Any) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels, **extra},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "trainer:e2e", "resources": {"limits": limits}}],
                }
            },
        },
    }


def deployment(name: str, namespace: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    app_label = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {
            "selector": {"matchLabels": app_label},
            "template": {
                "metadata": {"labels": app_label},
                "spec": {"containers": [{"name": "c", "image": "server:e2e"}]},
            },
        },
    }


@dataclass
class Webhook:
    """``gpufleet webhook serve`` as a local process the API server calls, and its configurations."""

    certs: Path
    port: int
    log: Path
    configurations: list[dict[str, Any]] = field(default_factory=list)
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        command = [sys.executable, "-m", "gpufleet", "webhook", "serve", str(POLICY)]
        command += ["--cert", str(self.certs / "tls.crt"), "--key", str(self.certs / "tls.key")]
        command += ["--host", "127.0.0.1", "--port", str(self.port)]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"gpufleet webhook serve did not start; see {self.log}")
                time.sleep(0.1)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=20)
        self.process = None

    def reviews(self) -> list[dict[str, Any]]:
        """The review lines the webhook logged: proof the API server called it."""
        lines = self.log.read_text(encoding="utf-8", errors="replace").splitlines()
        return [entry for entry in map(_json, lines) if entry.get("msg") == "review"]


def _json(line: str) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def dry_run(cluster: Any, obj: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return cluster.kubectl(  # type: ignore[no-any-return]
        "create", "--dry-run=server", "--output=json", "--filename=-", stdin=yaml.safe_dump(obj), check=False
    )


@pytest.fixture(scope="module")
def webhook(cluster: Any, applied: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Webhook]:
    folder = tmp_path_factory.mktemp("webhook")
    certs = folder / "certs"
    rendered = applied / "admission-webhook.yaml"
    result = CliRunner().invoke(
        app, ["webhook", "certs", "-o", str(certs), "--ip", "127.0.0.1", "--configuration", str(rendered)]
    )
    assert result.exit_code == 0, result.output
    served = Webhook(certs, _free_port(), folder / "webhook.log")
    served.start()
    configured = list(yaml.safe_load_all((certs / "admission-webhook.yaml").read_text(encoding="utf-8")))
    served.configurations = local_configurations(configured, host="127.0.0.1", port=served.port)
    try:
        cluster.apply(served.configurations)
        # the API server picks up new webhook configurations asynchronously (its informer)
        eventually(
            lambda: (
                QUEUE
                in json.loads(dry_run(cluster, job("probe", LABELS)).stdout or "{}")
                .get("metadata", {})
                .get("labels", {})
            ),
            "the API server to call the gpufleet webhook",
        )
        yield served
    finally:
        for config in served.configurations:
            cluster.kubectl("delete", config["kind"], config["metadata"]["name"], "--ignore-not-found", check=False)
        served.stop()


def test_the_webhook_configurations_trust_the_generated_ca_and_keep_the_rendered_scoping(
    webhook: Webhook, applied: Path
) -> None:
    ca = (webhook.certs / "ca.crt").read_bytes()
    rendered = [
        o
        for o in yaml.safe_load_all((applied / "admission-webhook.yaml").read_text(encoding="utf-8"))
        if o["kind"].endswith("WebhookConfiguration")
    ]
    assert [c["kind"] for c in webhook.configurations] == [r["kind"] for r in rendered]
    for config, original in zip(webhook.configurations, rendered, strict=True):
        for hook, was in zip(config["webhooks"], original["webhooks"], strict=True):
            assert base64.b64decode(hook["clientConfig"]["caBundle"]) == ca
            assert hook["clientConfig"]["url"].endswith(was["clientConfig"]["service"]["path"])
            assert {k: v for k, v in hook.items() if k != "clientConfig"} == {
                k: v for k, v in was.items() if k != "clientConfig"
            }


def test_the_mutation_fills_queue_and_priority_and_kueue_admits_the_job(cluster: Any, webhook: Webhook) -> None:
    name = "webhook-filled"
    created = cluster.kubectl("create", "--output=json", "--filename=-", stdin=yaml.safe_dump(job(name, LABELS)))
    try:
        labels = json.loads(created.stdout)["metadata"]["labels"]
        assert labels[QUEUE] == "alpha"
        assert labels[PRIORITY] == "normal"  # alpha's only (so lowest) priority class
        assert any(
            r["endpoint"] == "mutate" and r["name"] == name and r["outcome"] == "patched" for r in webhook.reviews()
        )

        def admitted() -> dict[str, Any] | None:
            for wl in cluster.get("workloads", "--namespace=alpha")["items"]:
                owners = wl["metadata"].get("ownerReferences", [])
                conditions = wl.get("status", {}).get("conditions", [])
                if any(o.get("name") == name for o in owners) and any(
                    c["type"] == "Admitted" and c["status"] == "True" for c in conditions
                ):
                    return wl  # type: ignore[no-any-return]
            return None

        workload = eventually(admitted, f"Kueue to admit {name}")
        assert workload["spec"]["queueName"] == "alpha"
        # Kueue read the priority class the webhook filled in (v1beta2 names it by reference)
        assert workload["spec"]["priorityClassRef"] == {
            "group": "kueue.x-k8s.io",
            "kind": "WorkloadPriorityClass",
            "name": "normal",
        }
        assert workload["spec"]["priority"] == 100
        eventually(lambda: cluster.get("job", name, "--namespace=alpha")["spec"].get("suspend") is False, "unsuspended")
    finally:
        cluster.kubectl(
            "delete", "job", name, "--namespace=alpha", "--cascade=foreground", "--wait=true", "--timeout=60s",
            check=False,
        )  # fmt: skip


def _offline(obj: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / f"{obj['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(obj), encoding="utf-8")
    result = CliRunner().invoke(app, ["check", str(POLICY), str(path), "--json"])
    assert result.exit_code in (0, 1), result.output
    (verdict,) = json.loads(result.stdout)["objects"]
    return verdict  # type: ignore[no-any-return]


TABLE = [
    ("complete", job("complete", {**LABELS, QUEUE: "alpha", PRIORITY: "normal"})),
    ("queue-and-priority-missing", job("fill", LABELS)),
    ("priority-missing", job("fill-priority", {**LABELS, QUEUE: "alpha"})),
    ("no-gpu", job("cpu-only", LABELS, gpus=0)),
    ("model-missing", job("nomodel", {k: v for k, v in LABELS.items() if k != "gpufleet.io/model"})),
    ("no-labels-at-all", job("bare", {})),
    ("other-team", job("otherteam", {**LABELS, "gpufleet.io/team": "beta"})),
    ("wrong-queue-never-corrected", job("wrongq", {**LABELS, QUEUE: "beta"})),
    ("priority-not-allowed", job("prio", {**LABELS, PRIORITY: "urgent"})),
    ("data-class-not-allowed", job("secret", {**LABELS, "gpufleet.io/data-class": "secret"})),
    ("too-many-gpus-for-a-node", job("huge", LABELS, gpus=8)),
    (
        "checkpoint-elsewhere",
        job("ckpt", LABELS, annotations={"gpufleet.io/checkpoint": "s3://us-east-1/x"}),
    ),
    ("beta-complete", job("beta-ok", {**LABELS, "gpufleet.io/team": "beta"}, namespace="beta")),
    ("serving-with-a-queue-label", deployment("chat-queued", "serving", {QUEUE: "alpha"})),
    ("serving-plain", deployment("chat-plain", "serving")),
]


@pytest.mark.parametrize("obj", [c[1] for c in TABLE], ids=[c[0] for c in TABLE])
def test_the_policy_and_the_webhook_together_give_gpufleet_checks_verdict(
    cluster: Any, webhook: Webhook, tmp_path: Path, obj: dict[str, Any]
) -> None:
    verdict = _offline(obj, tmp_path)
    result = dry_run(cluster, obj)
    if verdict["denials"]:
        assert result.returncode != 0, f"the API server admitted what gpufleet check denies: {verdict['denials']}"
        assert "denied" in result.stderr
        # the policy and the webhook word each rule the same; whichever refuses first, the message is check's
        assert any(d["message"] in result.stderr for d in verdict["denials"]), (verdict["denials"], result.stderr)
        return
    assert result.returncode == 0, result.stderr
    labels = json.loads(result.stdout)["metadata"].get("labels") or {}
    expected = {**(obj["metadata"].get("labels") or {}), **{f["label"]: f["value"] for f in verdict["filled"]}}
    assert labels == expected  # exactly what check says the webhook fills in, and nothing else


def test_with_the_webhook_down_team_namespaces_are_refused_and_the_rest_is_not(cluster: Any, webhook: Webhook) -> None:
    webhook.stop()
    try:
        serving = cluster.fleet.policy.serving.namespace
        team = dry_run(cluster, job("while-down", {**LABELS, QUEUE: "alpha"}))
        assert team.returncode != 0, "a Job in a team namespace was admitted with the webhook down"
        assert 'failed calling webhook "mutate.gpufleet.io"' in team.stderr, team.stderr
        assert f"127.0.0.1:{webhook.port}" in team.stderr and "connection refused" in team.stderr, team.stderr
        beta = dry_run(cluster, job("while-down", {**LABELS, "gpufleet.io/team": "beta"}, namespace="beta"))
        assert beta.returncode != 0 and "mutate.gpufleet.io" in beta.stderr
        spared = [
            job("system-job", {}, namespace="kube-system", gpus=0),
            job("kueue-job", {}, namespace="kueue-system", gpus=0),
            deployment("gpufleet-webhook-next", WEBHOOK_NAMESPACE),
            job("own-job", {}, namespace=WEBHOOK_NAMESPACE, gpus=0),
            deployment("chat-next", serving),
        ]
        for obj in spared:
            result = dry_run(cluster, obj)
            where = f"{obj['kind']} {obj['metadata']['namespace']}/{obj['metadata']['name']}"
            assert result.returncode == 0, f"{where} was blocked by the webhook outage: {result.stderr}"
    finally:
        webhook.start()
    eventually(lambda: dry_run(cluster, job("after", {**LABELS, QUEUE: "alpha"})).returncode == 0, "the webhook back")
