"""Differential test: `gpufleet twin step` on the cluster's exported objects predicts what the real Kueue does.

Method. Each scenario lives in its own namespace and ClusterQueues (its own cohort), so the e2e fleet's
queues are not disturbed. Work that must already hold quota is submitted first, through an active
LocalQueue, and waited on. The work under test is submitted through a second LocalQueue of the same
ClusterQueue whose ``stopPolicy`` is ``Hold``: Kueue creates its Workloads but never hands them to the
ClusterQueue. A LocalQueue is held rather than the ClusterQueue because an inactive ClusterQueue drops out
of Kueue's cohort snapshot (its quota would stop lending while held), and because one patch then releases
everything under test at once. Then, in this order:

1. export with kubectl exactly what a user would (`kubectl get ... -A -o yaml`: Kueue objects, priority
   classes, Namespaces, Workloads) plus the testbed's Kueue Configuration;
2. lift the hold in the *copy* and run ``gpufleet twin step --until-stable --json`` on it;
3. lift the hold in the cluster and wait until Kueue settles (the verdicts stay unchanged for a while
   and no eviction is in flight);
4. compare, per Workload of the scenario: admitted (ClusterQueue and flavor per pod set and resource),
   preempted (Kueue's ``Preempted`` condition reason), pending (and Kueue's message); and the
   ClusterQueues' reserved and borrowed quota.

Pods request ``nvidia.com/gpu`` with a node selector no node carries: they stay unscheduled, so the test
observes Kueue's quota decisions only, and no kwok node of the e2e fleet is occupied.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.policy import load_policy, resolve
from gpufleet.testbed import Testbed, TestbedError, ensure
from tests.e2e.batch_jobs import batch_job
from tests.e2e.conftest import POLICY, REPO, Cluster
from tests.e2e.twin_differential import (
    EXPORTED,
    KUEUE_API,
    RESOURCE,
    Verdicts,
    real_usage,
    real_verdicts,
    settled,
    twin_usage,
    twin_verdicts,
)

FLAVOR = "twin-diff"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
PRIORITIES = {"twin-diff-low": 10, "twin-diff-high": 1000}


@dataclass(frozen=True)
class Submit:
    """One Job: ``pods`` pods of ``gpus`` GPUs each, on ClusterQueue ``queue``'s LocalQueue."""

    name: str
    queue: str
    pods: int
    gpus: int
    priority: str | None = None


@dataclass(frozen=True)
class Scenario:
    id: str
    queues: dict[str, dict[str, Any]]  # ClusterQueue suffix -> quota and preemption knobs
    before: tuple[Submit, ...]  # admitted (in this order) before the export
    held: tuple[Submit, ...]  # submitted through the held LocalQueue of ``held_queue``
    held_queue: str
    expect: dict[str, Any] = field(default_factory=dict)  # what Kueue is documented to do, asserted too
    fair: bool = False  # run on the second testbed, whose Kueue has fair sharing on

    @property
    def namespace(self) -> str:
        return f"twin-{self.id}"

    def cq(self, suffix: str) -> str:
        return f"twin-{self.id}-{suffix}"


SCENARIOS = [
    Scenario(
        id="admit",
        queues={"a": {"nominal": 4}},
        before=(),
        held=(Submit("two", "a", 1, 2), Submit("pair", "a", 2, 1)),
        held_queue="a",
        expect={"admitted": {"two", "pair"}},
    ),
    Scenario(
        id="borrow",
        queues={"a": {"nominal": 4}, "b": {"nominal": 4}},
        before=(),
        held=(Submit("six", "a", 3, 2),),
        held_queue="a",
        expect={"admitted": {"six"}},
    ),
    Scenario(
        id="wait",
        queues={"a": {"nominal": 4, "borrowingLimit": 0}, "b": {"nominal": 4}},
        before=(),
        held=(Submit("small-early", "a", 1, 2, "twin-diff-low"), Submit("big-late", "a", 1, 4, "twin-diff-high")),
        held_queue="a",
        expect={"admitted": {"big-late"}, "pending": {"small-early"}},
    ),
    Scenario(
        id="preempt",
        queues={"a": {"nominal": 4, "withinClusterQueue": "LowerPriority"}},
        before=(Submit("low", "a", 2, 2, "twin-diff-low"),),
        held=(Submit("high", "a", 1, 2, "twin-diff-high"),),
        held_queue="a",
        expect={"admitted": {"high"}, "preempted": {"low"}, "pending": {"low"}},
    ),
    Scenario(
        id="reclaim",
        queues={"a": {"nominal": 4, "reclaimWithinCohort": "Any"}, "b": {"nominal": 4}},
        before=(Submit("b-first", "b", 1, 4, "twin-diff-high"), Submit("b-borrower", "b", 1, 2, "twin-diff-low")),
        held=(Submit("a-own", "a", 1, 4),),
        held_queue="a",
        expect={"admitted": {"a-own", "b-first"}, "preempted": {"b-borrower"}, "pending": {"b-borrower"}},
    ),
    # Fair sharing (DRS): b borrows 4 of the cohort's 12 GPUs (share 4/12); a asks for 6 and would borrow 2.
    # Preempting one of b's 2-GPU Jobs leaves b at share 2/12, equal to a's after admission: allowed by
    # LessThanOrEqualToFinalShare, and a preemptor that borrows preempts for InCohortFairSharing. Classical
    # preemption would never let a borrowing preemptor reclaim (without borrowWithinCohort).
    Scenario(
        id="fair",
        queues={
            "a": {"nominal": 4, "reclaimWithinCohort": "Any"},
            "b": {"nominal": 4, "reclaimWithinCohort": "Any"},
            "c": {"nominal": 4},
        },
        # Kueue tries victims of equal priority newest admission first, then by UID; admissions within the same
        # second would make the victim random, so the one to go is marked by priority
        before=(
            *(Submit(f"b-{i}", "b", 1, 2, "twin-diff-high") for i in range(3)),
            Submit("b-3", "b", 1, 2, "twin-diff-low"),
        ),
        held=(Submit("a-six", "a", 1, 6),),
        held_queue="a",
        expect={"admitted": {"a-six", "b-0", "b-1", "b-2"}, "preempted": {"b-3"}, "pending": {"b-3"}},
        fair=True,
    ),
]


def cluster_queue(scn: Scenario, suffix: str, knobs: dict[str, Any]) -> dict[str, Any]:
    quota: dict[str, Any] = {"name": RESOURCE, "nominalQuota": knobs["nominal"]}
    if "borrowingLimit" in knobs:
        quota["borrowingLimit"] = knobs["borrowingLimit"]
    spec: dict[str, Any] = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": scn.namespace}},
        "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": [{"coveredResources": [RESOURCE], "flavors": [{"name": FLAVOR, "resources": [quota]}]}],
        "preemption": {
            "withinClusterQueue": knobs.get("withinClusterQueue", "Never"),
            "reclaimWithinCohort": knobs.get("reclaimWithinCohort", "Never"),
        },
    }
    if len(scn.queues) > 1:
        spec["cohortName"] = f"twin-{scn.id}"
    return {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": scn.cq(suffix)}, "spec": spec}


def local_queue(scn: Scenario, suffix: str, *, held: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {"clusterQueue": scn.cq(suffix)}
    if held:
        spec["stopPolicy"] = "Hold"
    name = f"{suffix}-held" if held else suffix
    return {
        "apiVersion": KUEUE_API,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": scn.namespace},
        "spec": spec,
    }


def job(scn: Scenario, sub: Submit, *, held: bool) -> dict[str, Any]:
    labels = {QUEUE_LABEL: f"{sub.queue}-held" if held else sub.queue}
    if sub.priority:
        labels[PRIORITY_LABEL] = sub.priority
    gpus = {RESOURCE: str(sub.gpus)}
    return batch_job(sub.name, scn.namespace, labels, pods=sub.pods, limits=gpus, requests=gpus, scheduled=False)


@pytest.fixture(scope="module")
def fair_cluster(cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A second testbed for this module only: the e2e policy with fair sharing on in Kueue's Configuration.

    Kueue reads fair sharing from its manager Configuration at start, so the session's testbed cannot
    switch it without disturbing the other tests; this one starts in ~15 s and is stopped afterwards.
    """
    policy = yaml.safe_load(POLICY.read_text(encoding="utf-8"))
    policy["queueing"]["fairSharing"] = True
    path = tmp_path_factory.mktemp("fair-policy") / "fleet.yaml"
    path.write_text(yaml.safe_dump(policy), encoding="utf-8")
    fleet = resolve(load_policy(path))
    try:  # ``cluster`` (requested above) has already built the binaries, or skipped where it cannot
        bed = Testbed(tmp_path_factory.mktemp("fair-testbed"), ensure(REPO))
        state = bed.up(fleet)
    except TestbedError as exc:
        pytest.fail(f"the fair-sharing testbed did not start: {exc}")
    try:
        yield Cluster(bed=bed, fleet=fleet, kubeconfig=state.kubeconfig, policy=path)
    finally:
        bed.down()


def shared() -> list[dict[str, Any]]:
    """The flavor (no node labels: quota only) and the priority classes every scenario uses."""
    objects: list[dict[str, Any]] = [
        {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}, "spec": {}}
    ]
    objects += [
        {"apiVersion": KUEUE_API, "kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value}
        for name, value in PRIORITIES.items()
    ]
    return objects


@pytest.fixture(scope="module")
def shared_objects(cluster: Any) -> Iterator[Any]:
    cluster.apply(shared())
    yield cluster
    cluster.kubectl("delete", "workloadpriorityclasses.kueue.x-k8s.io", *PRIORITIES, "--ignore-not-found")
    cluster.kubectl("delete", "resourceflavors.kueue.x-k8s.io", FLAVOR, "--ignore-not-found", "--timeout=60s")


@pytest.fixture
def scenario(request: pytest.FixtureRequest) -> Iterator[tuple[Any, Scenario]]:
    scn: Scenario = request.param
    if scn.fair:
        cluster = request.getfixturevalue("fair_cluster")
        cluster.apply(shared())  # the fair testbed is stopped after the module: nothing to delete
    else:
        cluster = request.getfixturevalue("shared_objects")
    cluster.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": scn.namespace}}])
    cluster.apply([cluster_queue(scn, suffix, knobs) for suffix, knobs in scn.queues.items()])
    queues = [local_queue(scn, suffix, held=False) for suffix in scn.queues]
    cluster.apply([*queues, local_queue(scn, scn.held_queue, held=True)])
    for suffix in scn.queues:
        cluster.eventually(
            lambda suffix=suffix: any(
                c["type"] == "Active" and c["status"] == "True"
                for c in cluster.get("clusterqueues.kueue.x-k8s.io", scn.cq(suffix))
                .get("status", {})
                .get("conditions", [])
            ),
            f"ClusterQueue {scn.cq(suffix)} to be active",
        )
    yield cluster, scn
    ns = f"--namespace={scn.namespace}"
    cluster.kubectl("delete", "jobs", "--all", ns, "--cascade=foreground", "--wait=true", "--timeout=60s")
    cluster.eventually(lambda: not cluster.get("workloads.kueue.x-k8s.io", ns)["items"], "the workloads to go")
    cluster.kubectl("delete", "localqueues.kueue.x-k8s.io", "--all", ns, "--timeout=60s")
    cluster.kubectl("delete", "clusterqueues.kueue.x-k8s.io", *(scn.cq(s) for s in scn.queues), "--timeout=60s")
    cluster.kubectl("delete", "namespace", scn.namespace, "--wait=false")


def export(cluster: Any, out: Path) -> list[Path]:
    """What a user would hand the twin: kubectl's own YAML, plus the Kueue manager's Configuration."""
    listing = out / "cluster.yaml"
    text = cluster.kubectl("get", f"{EXPORTED},priorityclasses,namespaces", "--all-namespaces", "--output=yaml").stdout
    listing.write_text(text, encoding="utf-8")
    config = out / "kueue-config.yaml"
    config.write_text((cluster.bed.config / "kueue.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    return [listing, config]


def released_copy(listing: Path, scn: Scenario) -> Path:
    """The export with the scenario's hold lifted, as if the patch had already happened."""
    doc = yaml.safe_load(listing.read_text(encoding="utf-8"))
    items = copy.deepcopy(doc["items"])
    for obj in items:
        meta = obj["metadata"]
        if obj["kind"] == "LocalQueue" and meta.get("namespace") == scn.namespace and meta["name"].endswith("-held"):
            obj["spec"].pop("stopPolicy", None)
    path = listing.with_name("released.yaml")
    path.write_text(yaml.safe_dump({**doc, "items": items}), encoding="utf-8")
    return path


def submit(cluster: Any, scn: Scenario) -> None:
    for sub in scn.before:
        cluster.apply([job(scn, sub, held=False)])
        cluster.eventually(
            lambda sub=sub: sub.name in real_verdicts(cluster, scn.namespace).admitted,
            f"{sub.name} to be admitted before the export",
        )
    cluster.apply([job(scn, sub, held=True) for sub in scn.held])
    cluster.eventually(
        lambda: {s.name for s in scn.held} <= real_verdicts(cluster, scn.namespace).known,
        "Kueue to create the held Jobs' Workloads",
    )


def run(cluster: Any, scn: Scenario, tmp_path: Path) -> tuple[Verdicts, Verdicts, dict[str, Any]]:
    """Submit, export, predict, release, settle: (what Kueue did, what the twin said, the twin's report)."""
    submit(cluster, scn)
    started = time.monotonic()
    listing, config = export(cluster, tmp_path)
    exported = time.monotonic()
    result = CliRunner().invoke(
        app, ["twin", "step", str(released_copy(listing, scn)), str(config), "--until-stable", "--json"]
    )
    assert result.exit_code == 0, result.output
    report = yaml.safe_load(result.output)
    predicted = twin_verdicts(report, listing, scn.namespace)
    simulated = time.monotonic()

    cluster.kubectl(
        "patch", "localqueues.kueue.x-k8s.io", f"{scn.held_queue}-held", f"--namespace={scn.namespace}",
        "--type=merge", '--patch={"spec":{"stopPolicy":"None"}}',
    )  # fmt: skip
    released = time.monotonic()
    real = settled(cluster, scn.namespace)
    print(
        f"\n[{scn.id}] export {exported - started:.2f}s, twin {simulated - exported:.2f}s "
        f"({len(report['cycles'])} cycles), Kueue settled {time.monotonic() - released:.2f}s after release\n"
        f"  real: {real.describe()}\n  twin: {predicted.describe()}"
    )
    return real, predicted, report


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.id for s in SCENARIOS], indirect=True)
def test_twin_predicts_what_kueue_does(scenario: tuple[Any, Scenario], tmp_path: Path) -> None:
    cluster, scn = scenario
    real, predicted, report = run(cluster, scn, tmp_path)

    assert report["fairSharing"] is scn.fair  # read from the exported Kueue Configuration
    assert real.admitted == predicted.admitted
    assert real.preempted == predicted.preempted
    assert real.pending == predicted.pending  # Kueue's message, word for word
    assert real.reasons == predicted.reasons  # the reason Kueue writes under its gates, word for word
    cqs = [scn.cq(s) for s in scn.queues]
    assert real_usage(cluster, cqs) == twin_usage(report, cqs)
    # and both did what Kueue's documentation says they should
    assert set(real.admitted) == scn.expect.get("admitted", set())
    assert set(real.preempted) == scn.expect.get("preempted", set())
    assert set(real.pending) == scn.expect.get("pending", set())
