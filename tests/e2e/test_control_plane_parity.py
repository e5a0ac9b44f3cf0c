"""The simulator and the testbed run the same world: issue 32's four known disagreements, settled on
the real control plane (Kueue v0.19.2, kube-scheduler v1.36.5, kwok v0.8).

One testbed of ``parity-fleet.yaml`` (three 4-card H100 nodes, waitForPodsReady 5 s, MostAllocated):

- the policy's waitForPodsReady timeout is the one the real Kueue runs with: an admitted Job whose pods
  find no node is evicted with ``PodsReadyTimeout`` after 5 s (Kueue's own default would be 30 min);
  Kueue admits it again at its ``requeueAt``, where the live forecast's replay enters it (issue 34);
- kube-scheduler places pods where the placement model says, for the rendered MostAllocated profile
  and for a stock kube-scheduler, ties counted as ties (kube-scheduler breaks them at random);
- the nodes the API server holds are the simulator's nodes (allocatable and labels);
- a deleted pod holds its GPUs for its ``terminationGracePeriodSeconds``: the pod that wants its
  node is bound only once the grace period is over.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufleet.forecast.estimate import Settings
from gpufleet.forecast.live import forecast_live, live_state
from gpufleet.ledger.records import EndReason
from gpufleet.placement import Cluster as PlacementModel
from gpufleet.placement import LeastAllocated, MostAllocated, Placement, PodSpec, Policy
from gpufleet.render import scheduler as render_scheduler
from gpufleet.simulate.config import SimulationConfig
from gpufleet.simulate.nodes import fleet_nodes
from gpufleet.twin.resources import parse_quantity
from tests.e2e.batch_jobs import batch_job
from tests.e2e.conftest import Cluster, own_testbed
from tests.ledger.ledger_factories import allocation

POLICY = Path(__file__).resolve().parent / "parity-fleet.yaml"
POOL = "train"
SPREAD_NS = "placement"
GI = 1 << 30
# Every label gpufleet's admission policy asks for: the policy is in the rendered bundle, and whether
# the API server enforces it at the first apply is a race (CI lost it).
LABELS = {
    "kueue.x-k8s.io/queue-name": "alpha",
    "gpufleet.io/team": "alpha",
    "gpufleet.io/model": "tiny",
    "gpufleet.io/data-class": "internal",
}
# (cpu milli, memory GiB, GPUs): a mix where cpu, memory and the GPU pull different ways; 0 leaves the
# request out (kube-scheduler then counts 100m / 200 MiB). 8 GPUs in all on 12, so every pod fits.
SHAPES = [
    (8000, 32, 1), (0, 0, 1), (16000, 8, 2), (4000, 128, 0), (2000, 0, 1),
    (0, 64, 1), (24000, 16, 0), (1000, 1, 1), (12000, 200, 0), (6000, 48, 2),
]  # fmt: skip


@pytest.fixture(scope="module")
def parity(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with own_testbed(tmp_path_factory.mktemp("parity"), "the parity testbed", policy=POLICY) as cluster:
        bundle = cluster.render(POLICY, tmp_path_factory.mktemp("bundle") / "manifests")
        cluster.prepare_namespaces(bundle)
        cluster.kubectl("apply", "--server-side", f"--kustomize={bundle}")
        cluster.eventually(
            lambda: cluster.get("clusterqueue", "alpha").get("status", {}).get("conditions"), "alpha's ClusterQueue"
        )
        cluster.kubectl("create", "namespace", SPREAD_NS)
        yield cluster


def _time(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == kind), None)


def _workload(cluster: Cluster, job: str) -> dict[str, Any] | None:
    for wl in cluster.get("workloads", "--namespace=alpha")["items"]:
        if any(o.get("name") == job for o in wl["metadata"].get("ownerReferences", [])):
            return wl  # type: ignore[no-any-return]
    return None


def test_an_admitted_job_without_a_node_is_evicted_after_the_policys_pods_ready_timeout(parity: Cluster) -> None:
    job = batch_job("no-node", "alpha", LABELS, pods=2, limits={"nvidia.com/gpu": "1"}, scheduled=False)
    parity.apply([job])

    def evicted() -> dict[str, Any] | None:
        wl = _workload(parity, "no-node")
        c = _condition(wl, "Evicted") if wl else None
        return wl if c and c["status"] == "True" else None

    wl = parity.eventually(evicted, "Kueue to evict the unplaceable Job", timeout_s=60)
    eviction = _condition(wl, "Evicted")
    assert eviction is not None and eviction["reason"] == "PodsReadyTimeout", eviction
    # Measured from the Workload's creation: on eviction Kueue turns Admitted and QuotaReserved false
    # in the same second, so their transition times are the eviction's (CI read 0 s from Admitted).
    # The Job is admitted within a second or two of its creation on this empty cluster.
    waited = (_time(eviction["lastTransitionTime"]) - _time(wl["metadata"]["creationTimestamp"])).total_seconds()
    assert 4 <= waited <= 20, waited  # 5 s, to Kueue's whole seconds and its recheck; never 30 min
    parity.kubectl("delete", "job", "no-node", "--namespace=alpha", "--wait=true", "--timeout=60s")


def test_a_workload_in_its_requeue_backoff_is_admitted_when_the_forecast_says(parity: Cluster) -> None:
    # Evicted for its pods' readiness, a Workload waits out Kueue's requeue backoff (60 s by default)
    # out of the queue. The live forecast's replay entered it at now, admitted it at once (the quota is
    # free) and declined: "the replay differs". It now enters at its requeueAt, as Kueue requeues it.
    parity.apply([batch_job("backoff", "alpha", LABELS, pods=1, limits={"nvidia.com/gpu": "2"}, scheduled=False)])

    def backing_off() -> dict[str, Any] | None:
        wl = _workload(parity, "backoff")
        requeued = _condition(wl, "Requeued") if wl else None
        due = (wl or {}).get("status", {}).get("requeueState", {}).get("requeueAt")
        return wl if requeued and requeued["status"] == "False" and due else None

    wl = parity.eventually(backing_off, "Kueue to evict the unplaceable Job into its requeue backoff", timeout_s=60)
    now = datetime.now(UTC)
    requeue_at = _time(wl["status"]["requeueState"]["requeueAt"])
    assert _condition(wl, "Requeued")["reason"] == "PodsReadyTimeout"  # type: ignore[index]
    state = live_state([wl], parity.fleet, now)  # the earlier test's Workload may not be collected yet
    (live,) = state.workloads
    assert live.requeue_at == requeue_at and not live.holding
    assert live.requeues == 1  # Kueue's count of its evictions for pods' readiness, carried into the replay
    finished = [
        allocation(workload_uid=f"old-{i}", namespace="alpha", name=f"old-{i}", team="alpha", model="tiny",
                   cluster_queue="alpha", local_queue="alpha", gpu_count=2, created=now - timedelta(hours=i + 1),
                   started=now - timedelta(hours=i + 1), finished=now - timedelta(hours=i, minutes=30),
                   end_reason=EndReason.FINISHED)
        for i in range(12)
    ]  # fmt: skip
    settings = Settings(samples=10, arrivals=False)
    (f,) = forecast_live(state, parity.fleet, finished, settings, SimulationConfig()).forecasts
    assert not f.declined and f.quantiles["p50"] is not None, f

    def readmitted() -> datetime | None:
        reserved = _condition(_workload(parity, "backoff") or {}, "QuotaReserved")
        at = _time(reserved["lastTransitionTime"]) if reserved and reserved["status"] == "True" else None
        return at if at is not None and at >= requeue_at - timedelta(seconds=1) else None

    # its pods still find no node, so Kueue evicts it again 5 s after: poll within that
    real = parity.eventually(readmitted, "Kueue to admit it again after its backoff", timeout_s=240, poll_s=0.25)
    waited = (real - now).total_seconds()
    print(f"requeue backoff: requeueAt {(requeue_at - now).total_seconds():.1f} s after now, admitted again at "
          f"{waited:.1f} s, forecast p10/p50/p90 {f.quantiles}")  # fmt: skip
    assert f.quantiles["p10"] - 2 <= waited <= f.quantiles["p90"] + 2  # type: ignore[operator]

    # evicted again, its backoff is the one the replay takes from the count Kueue wrote (``requeue_count``)
    def again() -> dict[str, Any] | None:
        wl = _workload(parity, "backoff")
        requeue = (wl or {}).get("status", {}).get("requeueState") or {}
        return wl if requeue.get("count") == 2 and requeue.get("requeueAt") else None

    wl = parity.eventually(again, "Kueue to evict it a second time", timeout_s=60)
    backoff = _time(wl["status"]["requeueState"]["requeueAt"]) - _time(_condition(wl, "Evicted")["lastTransitionTime"])  # type: ignore[index]
    (live,) = live_state([wl], parity.fleet, datetime.now(UTC)).workloads
    print(f"second backoff: {backoff.total_seconds():.1f} s after count {live.requeues}")
    expected = SimulationConfig().pods_ready.backoff(live.requeues)  # 60 s · 2^(2-1)
    assert live.requeues == 2 and expected == 120
    assert expected - 1 <= backoff.total_seconds() <= expected + 2  # Kueue's whole seconds and its small jitter
    parity.kubectl("delete", "job", "backoff", "--namespace=alpha", "--wait=true", "--timeout=60s")


def test_the_testbeds_nodes_are_the_simulators_nodes(parity: Cluster) -> None:
    real = {n["metadata"]["name"]: n for n in parity.get("nodes", "--selector=type=kwok")["items"]}
    simulated = {n.name: n for pool in fleet_nodes(parity.fleet, tainted=True).values() for n in pool.nodes}
    assert sorted(real) == sorted(simulated)
    for name, node in real.items():
        allocatable = {r: parse_quantity(q, r) for r, q in node["status"]["allocatable"].items()}
        assert allocatable.pop("pods") == 110
        assert allocatable == simulated[name].allocatable()
        labels = {
            k: v for k, v in node["metadata"]["labels"].items() if k not in ("type", "kubernetes.io/metadata.name")
        }
        assert labels == simulated[name].label_map()


def _pod(name: str, cpu: int, memory_gib: int, gpus: int, tolerations: list[dict[str, Any]]) -> dict[str, Any]:
    requests: dict[str, str] = {}
    if cpu:
        requests["cpu"] = f"{cpu}m"
    if memory_gib:
        requests["memory"] = f"{memory_gib}Gi"
    limits = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    resources = {"requests": {**requests, **limits}, "limits": limits} if limits else {"requests": requests}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": SPREAD_NS},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "nodeSelector": {"gpufleet.io/pool": POOL},
            "tolerations": tolerations,
            "containers": [{"name": "main", "image": "trainer:e2e", "resources": resources}],
        },
    }


def _bound_node(cluster: Cluster, name: str) -> str:
    def bound() -> str:
        pod = cluster.get("pod", name, f"--namespace={SPREAD_NS}")
        return str(pod["spec"].get("nodeName", ""))

    return str(cluster.eventually(bound, f"kube-scheduler to bind {name}", timeout_s=60))


@pytest.mark.parametrize(
    ("rendered", "policy"),
    [(True, MostAllocated()), (False, LeastAllocated())],
    ids=["rendered-most-allocated", "stock-kube-scheduler"],
)
def test_kube_scheduler_places_each_pod_where_the_placement_model_does(
    parity: Cluster, rendered: bool, policy: Policy
) -> None:
    """Pods created one at a time, each bound before the next: kube-scheduler's node must be one the
    model scores best (a tie counts as agreement: kube-scheduler picks among equals at random)."""
    profile = render_scheduler.scheduler_configuration(parity.fleet) if rendered else []
    assert bool(profile) is rendered
    parity.bed.reconfigure_scheduler(profile)
    nodes = fleet_nodes(parity.fleet, tainted=True)[POOL].nodes
    taints = [{"key": t.key, "operator": "Equal", "value": t.value, "effect": t.effect.value} for t in nodes[0].taints]
    model = PlacementModel(nodes, policy)
    unique = ties = 0
    try:
        for i, (cpu, memory, gpus) in enumerate(SHAPES):
            name = f"p{i}"
            spec = PodSpec(name, cpu, memory * GI, gpus=gpus)
            keys = {n.spec.name: policy.key(n, spec) for n in model.nodes if not n.insufficient(spec)}
            best = min(keys.values())
            equal = sorted(n for n, k in keys.items() if k == best)
            parity.apply([_pod(name, cpu, memory, gpus, taints)])
            chosen = _bound_node(parity, name)
            assert chosen in equal, f"{name} {SHAPES[i]}: kube-scheduler chose {chosen}, the model {equal} ({keys})"
            unique += len(equal) == 1
            ties += len(equal) > 1
            model.bind(spec, Placement(name, chosen, model.node(chosen).devices_for(spec)))
    finally:
        parity.kubectl("delete", "pods", "--all", f"--namespace={SPREAD_NS}", "--wait=true", "--timeout=60s")
    print(f"{policy.name}: {unique} decisions with one best node, {ties} ties, all agreeing")
    assert unique >= 4  # the comparison is not carried by ties alone


def test_a_deleted_pod_holds_its_gpus_for_its_grace_period(parity: Cluster) -> None:
    """The first pod takes all four cards of one node and is deleted with a 6 s grace period; a pod
    pinned to the same node is bound only once the first is gone, at its deletionTimestamp."""
    nodes = fleet_nodes(parity.fleet, tainted=True)[POOL].nodes
    node = nodes[0].name
    taints = [{"key": t.key, "operator": "Equal", "value": t.value, "effect": t.effect.value} for t in nodes[0].taints]
    first, second = _pod("holder", 0, 0, 4, taints), _pod("waiter", 0, 0, 4, taints)
    for pod in (first, second):
        pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    first["spec"]["terminationGracePeriodSeconds"] = 6
    try:
        parity.apply([first])
        parity.eventually(
            lambda: parity.get("pod", "holder", f"--namespace={SPREAD_NS}")["status"].get("phase") == "Running",
            "the holder to run",
        )
        parity.kubectl("delete", "pod", "holder", f"--namespace={SPREAD_NS}", "--wait=false")
        parity.apply([second])
        held = parity.get("pod", "holder", f"--namespace={SPREAD_NS}")
        deadline = _time(held["metadata"]["deletionTimestamp"])
        time.sleep(3)
        still = parity.kubectl("get", "pod", "holder", f"--namespace={SPREAD_NS}", "--output=json", check=False)
        assert still.returncode == 0 and json.loads(still.stdout)["metadata"].get("deletionTimestamp")
        assert not parity.get("pod", "waiter", f"--namespace={SPREAD_NS}")["spec"].get("nodeName")
        assert _bound_node(parity, "waiter") == node
        waiter = parity.get("pod", "waiter", f"--namespace={SPREAD_NS}")
        scheduled = _condition(waiter, "PodScheduled")
        assert scheduled is not None
        assert (_time(scheduled["lastTransitionTime"]) - deadline).total_seconds() >= -1  # whole seconds
    finally:
        parity.kubectl("delete", "pods", "--all", f"--namespace={SPREAD_NS}", "--grace-period=0", "--wait=true")


def test_the_rendered_kueue_configuration_is_the_one_in_force(parity: Cluster) -> None:
    config = yaml.safe_load((parity.bed.config / "kueue.yaml").read_text(encoding="utf-8"))
    assert config["waitForPodsReady"] == {"timeout": "5s"}
    assert config["metrics"]["enableClusterQueueResources"] is True
