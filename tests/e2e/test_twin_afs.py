"""Differential test: the real Kueue orders an AdmissionFairSharing ClusterQueue as the twin predicts.

Kueue's usage ledger lives in its memory and is seeded from each LocalQueue's
``status.fairSharing.admissionFairSharingStatus`` when Kueue starts (``initializeAfsIfNeeded``). The
test gives two LocalQueues of one usage-based ClusterQueue different histories that way: it writes
their status (8 GPUs consumed by ``lq-a``, 2 by ``lq-b``) and restarts Kueue, on a testbed of its own
whose Kueue has ``admissionFairSharing`` (half-life and sampling interval of an hour, so nothing decays
noticeably during the test and each entry penalty is half the request).

Four 4-GPU Jobs go into a namespace the ClusterQueue does not select yet, ``lq-a``'s two first: Kueue
creates their Workloads and parks them. The export (``kubectl get -o yaml`` and the manager
Configuration) goes to ``gpufleet twin step`` with the namespace labelled as selected; then the label
is set in the cluster and Kueue admits. The classic order (oldest first) would admit ``lq-a``'s two;
AdmissionFairSharing admits ``lq-b``'s first Job (usage 2 < 8), charges ``lq-b`` half of 4 GPUs, and
admits ``lq-b``'s second too (4 < 8). Twin and Kueue must agree, and both must do the latter.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from gpufleet.cli import app
from tests.e2e.batch_jobs import batch_job
from tests.e2e.conftest import Cluster, own_testbed
from tests.e2e.twin_differential import EXPORTED, KUEUE_API, RESOURCE, settled, twin_verdicts

NAMESPACE = "twin-afs"
CQ = "twin-afs"
FLAVOR = "twin-afs"
RELEASED = "twin-afs-released"
AFS = {"usageHalfLifeTime": "1h", "usageSamplingInterval": "1h"}
CONSUMED = {"lq-a": "8", "lq-b": "2"}
JOBS = (("a1", "lq-a"), ("a2", "lq-a"), ("b1", "lq-b"), ("b2", "lq-b"))  # created in this order, a second apart


@pytest.fixture(scope="module")
def afs_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A testbed of this module's own whose Kueue has AdmissionFairSharing configured."""
    folder = tmp_path_factory.mktemp("afs-testbed")
    with own_testbed(folder, "the AdmissionFairSharing testbed", {"admissionFairSharing": AFS}) as own:
        yield own


def objects() -> list[dict[str, Any]]:
    quota = {"name": RESOURCE, "nominalQuota": 8}
    cq_spec = {
        "namespaceSelector": {"matchLabels": {RELEASED: "true"}},
        "admissionScope": {"admissionMode": "UsageBasedAdmissionFairSharing"},
        "resourceGroups": [{"coveredResources": [RESOURCE], "flavors": [{"name": FLAVOR, "resources": [quota]}]}],
    }
    return [
        {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}, "spec": {}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": CQ}, "spec": cq_spec},
        *(
            {
                "apiVersion": KUEUE_API,
                "kind": "LocalQueue",
                "metadata": {"name": lq, "namespace": NAMESPACE},
                "spec": {"clusterQueue": CQ},
            }
            for lq in CONSUMED
        ),
    ]


def afs_status(cluster: Cluster, lq: str) -> dict[str, Any]:
    status = cluster.get("localqueues.kueue.x-k8s.io", lq, f"--namespace={NAMESPACE}").get("status", {})
    return dict(status.get("fairSharing", {}).get("admissionFairSharingStatus") or {})


def seed_usage(cluster: Cluster) -> None:
    """Write each LocalQueue's consumed GPUs into its status and restart Kueue, which seeds its ledger
    from the status; wait until Kueue has written the status again after the restart."""
    for lq in CONSUMED:
        cluster.eventually(lambda lq=lq: afs_status(cluster, lq), f"Kueue to initialise {lq}'s fair-sharing status")
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    for lq, used in CONSUMED.items():
        patch = {"consumedResources": {RESOURCE: used}, "lastUpdate": stamp}
        cluster.kubectl(
            "patch", "localqueues.kueue.x-k8s.io", lq, f"--namespace={NAMESPACE}", "--subresource=status",
            "--type=merge", "--patch=" + json.dumps({"status": {"fairSharing": {"weightedShare": 0, "admissionFairSharingStatus": patch}}}),
        )  # fmt: skip
    time.sleep(1.1)  # Kueue's rewrite after the restart carries a later lastUpdate second
    cluster.bed.restart("kueue")
    for lq in CONSUMED:
        cluster.eventually(
            lambda lq=lq: afs_status(cluster, lq).get("lastUpdate", stamp) > stamp,
            f"Kueue to sample {lq} again after its restart",
        )


def test_kueue_admits_the_less_used_local_queue_first_as_the_twin_predicts(
    afs_cluster: Cluster, tmp_path: Path
) -> None:
    cluster = afs_cluster
    cluster.apply(objects())
    cluster.eventually(
        lambda: any(
            c["type"] == "Active" and c["status"] == "True"
            for c in cluster.get("clusterqueues.kueue.x-k8s.io", CQ).get("status", {}).get("conditions", [])
        ),
        "the ClusterQueue to be active",
    )
    seed_usage(cluster)
    for name, lq in JOBS:
        gpus = {RESOURCE: "4"}
        labels = {"kueue.x-k8s.io/queue-name": lq}
        cluster.apply([batch_job(name, NAMESPACE, labels, pods=1, limits=gpus, requests=gpus, scheduled=False)])
        time.sleep(1.1)  # a creation second of its own: queue order never falls to the UID
    before = settled(cluster, NAMESPACE)
    assert not before.admitted and set(before.pending) == {name for name, _ in JOBS}

    listing = tmp_path / "cluster.yaml"
    listing.write_text(
        cluster.kubectl("get", f"{EXPORTED},priorityclasses,namespaces", "--all-namespaces", "--output=yaml").stdout,
        encoding="utf-8",
    )
    config = tmp_path / "kueue-config.yaml"
    config.write_text((cluster.bed.config / "kueue.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    exported = yaml.safe_load(listing.read_text(encoding="utf-8"))
    for obj in exported["items"]:
        if obj["kind"] == "Namespace" and obj["metadata"]["name"] == NAMESPACE:
            obj["metadata"].setdefault("labels", {})[RELEASED] = "true"
    released = tmp_path / "released.yaml"
    released.write_text(yaml.safe_dump(exported), encoding="utf-8")
    result = CliRunner().invoke(app, ["twin", "step", str(released), str(config), "--until-stable", "--json"])
    assert result.exit_code == 0, result.output
    report = yaml.safe_load(result.output)
    predicted = twin_verdicts(report, listing, NAMESPACE)

    cluster.kubectl("label", "namespace", NAMESPACE, f"{RELEASED}=true")
    real = settled(cluster, NAMESPACE)
    print(
        f"\n  real: {real.describe()}\n  twin: {predicted.describe()}\n  twin usage: {report.get('localQueues')}"
        f"\n  Kueue's status: { {lq: afs_status(cluster, lq) for lq in CONSUMED} }"
    )
    assert real.admitted == predicted.admitted
    assert set(real.pending) == set(predicted.pending)
    assert set(real.admitted) == {"b1", "b2"}  # the classic order would have admitted a1 and a2
