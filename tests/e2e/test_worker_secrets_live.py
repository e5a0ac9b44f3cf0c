"""``gpufleet why --workers-from-manager`` finds each worker as Kueue does, on the real API server.

The testbed plays a MultiKueue manager whose workers are MultiKueueClusters created here: ``self``
(a Secret with a kubeconfig of this very testbed, so the worker's side is real too), ``gone`` (its
Secret does not exist), ``exec`` (its kubeconfig runs a command, which Kueue refuses) and ``file`` (a
path on Kueue's pod). Kueue v0.19.2 judges the same objects: it turns ``self`` Active and keeps the
others inactive, and gpufleet must reach exactly ``self`` with the Secret's credentials and say for
every other why not, without running the exec plugin. The federation e2e (``test_federation.py``)
asks the same of a manager with two real workers.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufleet import kube
from gpufleet.cli.why import configuration, copies_from_manager
from gpufleet.render.worker_secret import worker_secret
from gpufleet.testbed.federation import inline_kubeconfig
from tests.e2e.conftest import Cluster, eventually

PREFIX = "gpufleet-e2e-"


def _mkc(name: str, kubeconfig: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "MultiKueueCluster",
        "metadata": {"name": name},
        "spec": {"clusterSource": {"kubeConfig": kubeconfig}},
    }


def _active(cluster: Cluster, name: str) -> str | None:
    """The Active condition's status Kueue wrote on MultiKueueCluster ``name`` (None: none yet)."""
    found = cluster.get("multikueueclusters.kueue.x-k8s.io", name)
    conditions = found.get("status", {}).get("conditions", [])
    return next((c["status"] for c in conditions if c["type"] == "Active"), None)


@pytest.fixture
def workers(cluster: Cluster, tmp_path: Path) -> Iterator[Path]:
    """The four MultiKueueClusters and the Secrets they name; deleted afterwards. Yields the file the
    exec plugin would create, were it ever run."""
    server = yaml.safe_load(Path(cluster.kubeconfig).read_text(encoding="utf-8"))["clusters"][0]["cluster"]["server"]
    pki = cluster.bed.pki
    own = inline_kubeconfig(server, pki / "ca.crt", pki / "admin.crt", pki / "admin.key", "self")
    ran = tmp_path / "exec-ran"
    exec_config = {**own, "users": [{"name": "self", "user": {"exec": {
        "apiVersion": "client.authentication.k8s.io/v1", "command": "touch", "args": [str(ran)],
    }}}]}  # fmt: skip
    exec_secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": f"{PREFIX}exec", "namespace": "kueue-system"},
        "data": {"kubeconfig": base64.b64encode(yaml.safe_dump(exec_config).encode()).decode()},
    }  # written by hand: gpufleet's own worker-secret refuses to write it
    objects = [
        worker_secret(f"{PREFIX}self", yaml.safe_dump(own), "self.kubeconfig"),
        exec_secret,
        _mkc(f"{PREFIX}self", {"location": f"{PREFIX}self", "locationType": "Secret"}),
        _mkc(f"{PREFIX}gone", {"location": f"{PREFIX}missing"}),
        _mkc(f"{PREFIX}exec", {"location": f"{PREFIX}exec", "locationType": "Secret"}),
        _mkc(f"{PREFIX}file", {"location": "/etc/multikueue/kubeconfigs/file", "locationType": "Path"}),
    ]
    cluster.kubectl("create", "namespace", "kueue-system", check=False)
    cluster.apply(objects)
    try:
        yield ran
    finally:
        for obj in objects:
            scope = [f"--namespace={obj['metadata']['namespace']}"] if "namespace" in obj["metadata"] else []
            kind = "secret" if obj["kind"] == "Secret" else "multikueueclusters.kueue.x-k8s.io"
            cluster.kubectl("delete", kind, obj["metadata"]["name"], *scope, "--ignore-not-found", check=False)


def test_why_reaches_the_workers_kueue_reaches_through_their_secrets(cluster: Cluster, workers: Path) -> None:
    # Kueue's verdict on the same objects, first: the oracle for which worker can be reached.
    eventually(lambda: _active(cluster, f"{PREFIX}self") == "True", "Kueue to connect to worker self")
    for name in ("gone", "exec"):
        eventually(lambda n=name: _active(cluster, f"{PREFIX}{n}") == "False", f"Kueue to refuse worker {name}")
    path = Path(cluster.kubeconfig)
    config, _ = configuration(kube.read_kueue_state(path), None)
    report = {"workload": "nobody/nothing", "dispatch": {"reason": "AwaitingWorker"}}
    copies = copies_from_manager(report, path, config, None)
    ours = {c["cluster"]: c for c in copies if c["cluster"].startswith(PREFIX)}
    print({n: (c["state"], c["verdict"]["message"]) for n, c in ours.items()})
    assert sorted(ours) == [f"{PREFIX}{n}" for n in ("exec", "file", "gone", "self")]
    # self: reached with the Secret's credentials, and its Kueue listed: no copy of a workload it lacks
    assert ours[f"{PREFIX}self"]["state"] == "NoCopy", ours[f"{PREFIX}self"]
    gone, exec_, file = (ours[f"{PREFIX}{n}"] for n in ("gone", "exec", "file"))
    assert gone["state"] == "Unreachable" and f"no Secret kueue-system/{PREFIX}missing" in gone["verdict"]["message"]
    assert "reports it not Active" in gone["verdict"]["message"]
    assert exec_["state"] == "Unreachable" and "exec plugins are not allowed" in exec_["verdict"]["message"]
    assert not workers.exists(), "the exec plugin a Secret names was run"
    assert file["state"] == "Unreachable" and "/etc/multikueue/kubeconfigs/file" in file["verdict"]["message"]
    # the Secret's credentials read the same cluster as the testbed's own kubeconfig
    secret = kube.read_secret(path, "kueue-system", f"{PREFIX}self")
    text = base64.b64decode((secret or {})["data"]["kubeconfig"]).decode()
    inline = kube.read_kueue_state(kube.InlineKubeconfig(text, "Secret"))
    queues = sorted(o["metadata"]["name"] for o in inline.objects if o["kind"] == "ClusterQueue")
    assert queues == sorted(
        o["metadata"]["name"] for o in kube.read_kueue_state(path).objects if o["kind"] == "ClusterQueue"
    )
