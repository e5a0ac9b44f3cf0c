"""DRA end to end: a rendered ResourceClaimTemplate, Kueue's quota, kube-scheduler's allocation, kwok's pod.

One testbed for the module, started from the e2e fleet with ``dra: on``: kube-controller-manager runs
the ``resourceclaim-controller`` and the testbed's stand-in for NVIDIA's DRA driver publishes a
ResourceSlice per node of the train (H100, whole cards) and mig (A100, all-balanced) pools, which carry
no ``nvidia.com/*`` extended resources. The serving pool keeps the device plugin.

The rendered DeviceClasses (``render/dra.py``) and the stand-in (``testbed/dra.py``) both follow NVIDIA's
driver (github.com/NVIDIA/k8s-dra-driver-gpu), never each other. Where each name the selectors read comes
from in that repository:

- driver ``gpu.nvidia.com``: ``cmd/gpu-kubelet-plugin/main.go`` (``DriverName``);
- ``productName`` (NVML's device name), ``type`` = ``gpu``, ``uuid``: ``cmd/gpu-kubelet-plugin/deviceinfo.go``
  (``GpuInfo.Attributes``), the value ``gpu`` from ``cmd/gpu-kubelet-plugin/types.go`` (``GpuDeviceType``);
- ``type`` = ``mig``, ``profile``, ``parentUUID``: ``cmd/gpu-kubelet-plugin/mig.go`` (``CommonAttributesMig``);
- capacity ``memory`` in bytes: ``partitions.go`` (``fullGpuCapacity``) and ``mig.go`` (``CommonCapacitiesMig``);
- device names ``gpu-<minor>`` and ``gpu-<minor>-mig-<profile>-<id>-<start>``: ``deviceinfo.go``, ``mig.go``;
- one pool per node, named after the node: ``driver.go`` (``publishResources``).

The product comparison turns the driver's spaces into dashes because GPU Feature Discovery's
``nvidia.com/gpu.product`` label (gpufleet's catalogue) is NVML's name with spaces as dashes.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from gpufleet.check.facts import admission_facts
from gpufleet.check.rules import judge
from gpufleet.cli import app
from gpufleet.policy import load_policy, resolve
from gpufleet.render import dra as render_dra
from gpufleet.testbed.kwok import RUN_FOR_ANNOTATION
from gpufleet.testbed.nodes import node_names
from gpufleet.twin.apis.claims import NAMED_CLAIMS
from gpufleet.twin.apis.reasons import written_reason
from gpufleet.twin.step import step as twin_step
from tests.check.claim_cases import CASES as CLAIM_CASES
from tests.e2e.batch_jobs import batch_job
from tests.e2e.conftest import POLICY, Cluster, own_testbed
from tests.e2e.test_queueing import QUEUE_LABEL, admitted, condition, workload_of

H100_TEMPLATE = "h100-sxm5-80gb-gpu"  # rendered: gpufleet-<gpu>-<unit> without its prefix
MIG_TEMPLATE = "a100-sxm4-80gb-1g-10gb"
TRAIN_NODES = {"e2e-h100-0", "e2e-h100-1"}
ME_LAYOUT = "layout: {1g.10gb+me: 1, 1g.10gb: 1, 2g.20gb: 1, 3g.40gb: 1}"


@pytest.fixture(scope="module")
def dra_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The e2e fleet with ``dra: on``, its bundle applied (DeviceClasses, claim templates, Kueue objects)."""
    folder = tmp_path_factory.mktemp("dra")
    text = POLICY.read_text(encoding="utf-8")
    assert "dra: off" in text, "the e2e fleet no longer says dra: off; update this fixture"
    policy = folder / "fleet-dra.yaml"
    assert "layout: all-balanced" in text, "the e2e fleet's MIG layout changed; update this fixture"
    # all-balanced with one 1g.10gb as 1g.10gb+me per card: the same units, and the driver's "+me" profile
    dra_text = text.replace("dra: off", "dra: on").replace("layout: all-balanced", ME_LAYOUT)
    policy.write_text(dra_text, encoding="utf-8")
    with own_testbed(folder / "testbed", "the DRA testbed", policy=policy) as cluster:
        bundle = cluster.render(policy, folder / "manifests")
        cluster.prepare_namespaces(bundle)
        cluster.kubectl("apply", "--server-side", f"--kustomize={bundle}")
        for team in ("alpha", "beta"):

            def active(team: str = team) -> bool:
                return (condition(cluster.get("clusterqueue", team), "Active") or {}).get("status") == "True"

            cluster.eventually(active, f"ClusterQueue {team} to be Active")
        yield cluster


@pytest.fixture
def dra(dra_cluster: Cluster) -> Iterator[Cluster]:
    yield dra_cluster
    clear_alpha(dra_cluster)


def clear_alpha(c: Cluster) -> None:
    """Delete alpha's Jobs and claims and wait for their Workloads to go: the next test starts with free quota."""
    c.kubectl("delete", "jobs", "--all", "--namespace=alpha", "--cascade=foreground", "--timeout=60s")
    c.kubectl("delete", "resourceclaims", "--all", "--namespace=alpha", "--timeout=60s")
    c.eventually(lambda: not c.get("workloads", "--namespace=alpha")["items"], "no workloads")


def claim_job(name: str, claims: list[dict[str, Any]], *, pods: int = 1, run_for: str = "3s") -> dict[str, Any]:
    """A Job of alpha's whose pods get their GPU from ``claims`` (pod resourceClaims), no extended resource."""
    labels = {QUEUE_LABEL: "alpha", "gpufleet.io/team": "alpha", "gpufleet.io/model": "tiny"}
    labels["gpufleet.io/data-class"] = "internal"
    pod = {"labels": labels, "annotations": {RUN_FOR_ANNOTATION: run_for}}
    job = batch_job(name, "alpha", labels, pods=pods, limits={"cpu": "1"}, pod_metadata=pod)
    spec = job["spec"]["template"]["spec"]
    spec["resourceClaims"] = claims
    spec["containers"][0]["resources"]["claims"] = [{"name": c["name"]} for c in claims]
    return job


def from_template(template: str) -> list[dict[str, Any]]:
    return [{"name": "gpu", "resourceClaimTemplateName": template}]


def test_dra_nodes_publish_the_drivers_slice_and_no_extended_resource(dra_cluster: Cluster) -> None:
    slices = {s["spec"]["nodeName"]: s["spec"] for s in dra_cluster.get("resourceslices")["items"]}
    print({node: [d["name"] for d in s["devices"]] for node, s in sorted(slices.items())})
    assert set(slices) == {*TRAIN_NODES, "e2e-a100-0"}
    for node, spec in slices.items():
        assert spec["driver"] == "gpu.nvidia.com" and spec["pool"]["name"] == node
    h100 = slices["e2e-h100-0"]["devices"]
    assert [d["name"] for d in h100] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    assert {d["attributes"]["productName"]["string"] for d in h100} == {"NVIDIA H100 80GB HBM3"}
    assert {d["attributes"]["type"]["string"] for d in h100} == {"gpu"}
    assert h100[0]["capacity"]["memory"]["value"] == str(80 << 30)
    mig = slices["e2e-a100-0"]["devices"]
    assert {d["attributes"]["type"]["string"] for d in mig} == {"mig"}
    profiles = Counter(d["attributes"]["profile"]["string"] for d in mig)
    assert profiles == {"1g.10gb": 2, "1g.10gb+me": 2, "2g.20gb": 2, "3g.40gb": 2}
    nodes = {n["metadata"]["name"]: n["status"]["allocatable"] for n in dra_cluster.get("nodes")["items"]}
    for node in slices:
        assert not [r for r in nodes[node] if r.startswith("nvidia.com/")], nodes[node]
    assert nodes["e2e-l4-0"]["nvidia.com/gpu"] == "2"  # the serving pool keeps the device plugin


PROBE = "dra-probe"


def _probe(name: str, klass: str, count: int, node: str) -> list[dict[str, Any]]:
    """A claim template for ``count`` devices of ``klass`` and a pod outside Kueue using it on ``node``."""
    request = {"name": "all", "exactly": {"deviceClassName": klass, "allocationMode": "ExactCount", "count": count}}
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": PROBE},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": PROBE},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "tolerations": [{"operator": "Exists"}],
            "resourceClaims": [{"name": "all", "resourceClaimTemplateName": name}],
            "containers": [{"name": "main", "image": "probe", "resources": {"claims": [{"name": "all"}]}}],
        },
    }
    return [template, pod]


def test_every_unit_the_quota_counts_is_allocatable_through_its_device_class(dra_cluster: Cluster) -> None:
    """Per DRA resource, a pod outside Kueue claims all of one node's units through the mapped class:
    kube-scheduler must allocate every one (the ``+me`` instances included), so quota and devices agree."""
    c = dra_cluster
    c.kubectl("create", "namespace", PROBE)
    mappings = {m["name"]: m["deviceClassNames"] for m in _mappings(c)}
    wanted: dict[str, tuple[str, int]] = {}
    for cap in render_dra.dra_pools(c.fleet):
        node = node_names(cap)[0]
        for resource in cap.units:
            (klass,) = mappings[resource]
            name = klass.removeprefix("gpufleet-")
            wanted[name] = (node, cap.units_per_node(resource))
            c.apply(_probe(name, klass, cap.units_per_node(resource), node))
    try:

        def placed() -> bool:
            pods = c.get("pods", f"--namespace={PROBE}")["items"]
            on = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods}
            return all(on.get(name) == node for name, (node, _) in wanted.items())

        c.eventually(placed, "every probe pod to be scheduled with all of its node's units")
        claims = c.get("resourceclaims", f"--namespace={PROBE}")["items"]
        got = {
            cl["metadata"]["ownerReferences"][0]["name"]: sorted(
                r["device"] for r in cl["status"]["allocation"]["devices"]["results"]
            )
            for cl in claims
        }
        print("allocated:", got)
        assert {name: len(devices) for name, devices in got.items()} == {n: k for n, (_, k) in wanted.items()}
    finally:
        c.kubectl("delete", "namespace", PROBE, "--wait=true", "--timeout=60s")


def _mappings(c: Cluster) -> list[dict[str, Any]]:
    """The deviceClassMappings the testbed's Kueue runs with (the rendered ones)."""
    config = yaml.safe_load((c.bed.config / "kueue.yaml").read_text(encoding="utf-8"))
    return list(config["resources"]["deviceClassMappings"])


@pytest.mark.parametrize(
    ("template", "resource", "flavor", "node_names", "device_prefix"),
    [
        (H100_TEMPLATE, "nvidia.com/gpu", "train", TRAIN_NODES, "gpu-"),
        (MIG_TEMPLATE, "nvidia.com/mig-1g.10gb", "mig", {"e2e-a100-0"}, "gpu-0-mig-1g10gb-"),
    ],
)
def test_a_claim_job_is_counted_allocated_on_its_pool_runs_and_releases_the_claim(
    dra: Cluster, template: str, resource: str, flavor: str, node_names: set[str], device_prefix: str
) -> None:
    dra.apply([claim_job("claimed", from_template(template))])
    wl = dra.eventually(lambda: admitted(dra, "alpha", "claimed"), "the claim Job to be admitted")
    assignment = wl["status"]["admission"]["podSetAssignments"][0]
    print("admitted:", assignment["flavors"], assignment["resourceUsage"])
    assert assignment["flavors"][resource] == flavor
    assert assignment["resourceUsage"][resource] == "1"  # the claim, mapped by deviceClassMappings

    def allocated() -> dict[str, Any] | None:
        claims = dra.get("resourceclaims", "--namespace=alpha")["items"]
        return next((c for c in claims if c.get("status", {}).get("allocation")), None)

    claim = dra.eventually(allocated, "kube-scheduler to allocate the claim")
    result = claim["status"]["allocation"]["devices"]["results"][0]
    print("allocated:", claim["metadata"]["name"], result)
    assert result["driver"] == "gpu.nvidia.com" and result["pool"] in node_names
    assert result["device"].startswith(device_prefix)
    pod = dra.get("pods", "--namespace=alpha", "--selector=job-name=claimed")["items"][0]
    assert pod["spec"]["nodeName"] == result["pool"]
    dra.eventually(
        lambda: any(c["type"] == "Complete" for c in dra.get("job", "claimed", "--namespace=alpha")["status"].get(
            "conditions", []
        )),
        "the Job to complete",
    )  # fmt: skip
    # the resourceclaim-controller deletes a template's claim once its pod is done; Kueue frees the quota
    dra.eventually(lambda: not dra.get("resourceclaims", "--namespace=alpha")["items"], "the claim to be deleted")

    def used() -> int:
        usage = dra.get("clusterqueue", "alpha")["status"]["flavorsUsage"]
        return sum(
            int(r["total"]) for f in usage if f["name"] == flavor for r in f["resources"] if r["name"] == resource
        )

    dra.eventually(lambda: used() == 0, f"alpha's {resource} usage on {flavor} back to 0")


def test_a_claim_job_over_the_quota_waits_with_kueues_message(dra: Cluster) -> None:
    dra.apply([claim_job("greedy", from_template(H100_TEMPLATE), pods=5, run_for="1h")])

    def pending() -> dict[str, Any] | None:
        c = condition(workload_of(dra, "alpha", "greedy"), "QuotaReserved")
        return c if c and c["status"] == "False" and c.get("message") else None

    reserved = dra.eventually(pending, "Kueue to hold the Job back")
    print("pending:", reserved["reason"], reserved["message"])
    assert reserved["reason"] == "Pending"
    assert "insufficient quota for nvidia.com/gpu in flavor train" in reserved["message"]
    assert not dra.get("resourceclaims", "--namespace=alpha")["items"]  # no pod, so no claim


UNMAPPED_CLASS = "e2e-unmapped-gpu"
H100_CLASS = f"gpufleet-{H100_TEMPLATE}"
CLAIM0 = "spec.podSets[0].template.spec.resourceClaims[0]"
ADMIN_ACCESS = "resource.kubernetes.io/admin-access"


def _twin_message(c: Cluster, name: str, extra: list[dict[str, Any]]) -> tuple[str, str]:
    """What the twin says of Workload ``name``: the cluster's Kueue objects, its mappings, ``extra`` (the
    templates), and the Workload as Kueue created it (its status dropped), one cycle."""
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "resources": {"deviceClassMappings": _mappings(c)},
        }
    ]
    for kind in ("resourceflavors", "clusterqueues"):
        objects += c.get(kind)["items"]
    objects += c.get("localqueues", "--namespace=alpha")["items"]
    wl = workload_of(c, "alpha", name)
    assert wl is not None
    objects += [*extra, {k: v for k, v in wl.items() if k != "status"}]
    report = twin_step([("cluster.yaml", yaml.safe_dump_all(objects))], cycles=1, clocks=None)
    (pending,) = [p for p in report["cycles"][0]["pending"] if p["workload"] == f"alpha/{wl['metadata']['name']}"]
    return pending["reason"], pending["message"]


@pytest.mark.parametrize(
    ("case", "request_", "message"),
    [
        # pkg/dra/claims.go, GetResourceRequestsForResourceClaimTemplates
        (
            "unmapped",
            {"exactly": {"deviceClassName": UNMAPPED_CLASS, "count": 1}},
            f'{CLAIM0}.resourceClaimTemplateName: Not found: "DeviceClass {UNMAPPED_CLASS} is not mapped in DRA '
            'configuration for podset main"',
        ),
        # pkg/controller/core/workload_controller.go, a pod claim naming a ResourceClaim
        ("named", {"exactly": {"deviceClassName": UNMAPPED_CLASS, "count": 1}}, NAMED_CLAIMS),
        # pkg/dra/claims.go, countDevicesPerClass
        (
            "first-available",
            {"firstAvailable": [{"name": "any", "deviceClassName": H100_CLASS}]},
            f"{CLAIM0}.devices.requests[0]: Invalid value: null: ResourceClaimTemplate first-available: "
            "FirstAvailable device selection is not supported",
        ),
        (
            "admin-access",
            {"exactly": {"deviceClassName": H100_CLASS, "count": 1, "adminAccess": True}},
            f"{CLAIM0}.devices.requests[0].exactly.adminAccess: Invalid value: null: ResourceClaimTemplate "
            "admin-access: AdminAccess is not supported",
        ),
        (
            "allocation-all",
            {"exactly": {"deviceClassName": H100_CLASS, "allocationMode": "All"}},
            f'{CLAIM0}.devices.requests[0].exactly.allocationMode: Invalid value: "All": ResourceClaimTemplate '
            "allocation-all: AllocationMode 'All' is not supported",
        ),
    ],
)
def test_kueue_refuses_claims_it_cannot_count_and_the_twin_says_the_same(
    dra: Cluster, case: str, request_: dict[str, Any], message: str
) -> None:
    gpu_class = dra.get("deviceclass", H100_CLASS)
    klass = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": UNMAPPED_CLASS},
        "spec": {"selectors": gpu_class["spec"]["selectors"]},
    }
    spec = {"devices": {"requests": [{"name": "gpu", **request_}]}}
    templates: list[dict[str, Any]] = []
    if case == "named":
        claim = {"metadata": {"name": "named", "namespace": "alpha"}, "spec": spec}
        dra.apply([klass, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", **claim}])
        claims = [{"name": "gpu", "resourceClaimName": "named"}]
    else:
        if case == "admin-access":  # the API server allows adminAccess only in a namespace labelled so
            dra.kubectl("label", "namespace", "alpha", f"{ADMIN_ACCESS}=true", "--overwrite")
        meta = {"name": case, "namespace": "alpha"}
        templates = [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": meta}]
        templates[0]["spec"] = {"spec": spec}
        dra.apply([klass, *templates])
        claims = from_template(case)
    dra.apply([claim_job(case, claims)])

    def refused() -> dict[str, Any] | None:
        c = condition(workload_of(dra, "alpha", case), "QuotaReserved")
        return c if c and c.get("status") == "False" and c.get("message") else None

    reserved = dra.eventually(refused, f"Kueue's refusal of the {case} claim")
    twin = _twin_message(dra, case, templates)
    print(f"{case}: kueue", reserved["reason"], reserved["message"], "| twin", twin)
    assert reserved["message"] == message
    # the twin reports the granular reason; Kueue's default (UnadmittedWorkloadsObservability off) writes its legacy form
    assert (written_reason(twin[0], observability=False), twin[1]) == (reserved["reason"], reserved["message"])
    assert admitted(dra, "alpha", case) is None
    # `gpufleet why` reads the live objects (the templates included) and runs the twin on them
    config = str(dra.bed.config / "kueue.yaml")
    why = CliRunner().invoke(
        app, ["why", f"alpha/{case}", "--json", "--kubeconfig", str(dra.kubeconfig), "--kueue-config", config]
    )
    assert why.exit_code == 0, why.output
    answer = json.loads(why.stdout)
    print("why:", answer["twin"], answer["disagreements"])
    assert answer["twin"]["message"] == message and answer["disagreements"] == []
    dra.kubectl("delete", "deviceclass", UNMAPPED_CLASS, "--ignore-not-found")
    if templates:
        dra.kubectl("delete", "resourceclaimtemplate", case, "--namespace=alpha")
    if case == "admin-access":
        dra.kubectl("label", "namespace", "alpha", f"{ADMIN_ACCESS}-")


def _dry_run(c: Cluster, obj: dict[str, Any]) -> Any:
    return c.kubectl("create", "--dry-run=server", "--filename=-", stdin=yaml.safe_dump(obj), check=False)


@pytest.mark.parametrize(("obj", "reasons"), [c[1:3] for c in CLAIM_CASES], ids=[c[0] for c in CLAIM_CASES])
def test_the_api_server_judges_claims_as_the_rules_do(
    dra_cluster: Cluster, obj: dict[str, Any], reasons: list[str]
) -> None:
    """The rendered ValidatingAdmissionPolicy on the real API server refuses each claim case with exactly the
    messages the Python rules (and so the webhook and ``gpufleet check``) give (tests/check/claim_cases.py)."""
    api_server_judges_as_the_rules_do(dra_cluster, obj, reasons)


def wait_for_admission_policy(c: Cluster) -> None:
    """The API server enforces a freshly applied (or re-bound) policy once its informer has it: wait until a
    claim Job with no label at all is refused by gpufleet's policy before judging (a case must not race it)."""
    probe = CLAIM_CASES[2][1]
    c.eventually(
        lambda: "gpufleet-admission" in _dry_run(c, probe).stderr or None, "gpufleet's admission policy to take effect"
    )


def api_server_judges_as_the_rules_do(c: Cluster, obj: dict[str, Any], reasons: list[str]) -> None:
    messages = [d.message for d in judge(admission_facts(c.fleet), obj, "alpha")]
    assert [m.split(":")[0] for m in messages] == reasons
    wait_for_admission_policy(c)
    result = _dry_run(c, obj)
    print(obj["metadata"]["name"], result.returncode, result.stderr.strip()[:600])
    if not reasons:
        assert result.returncode == 0, result.stderr
        return
    assert result.returncode != 0 and "gpufleet-admission" in result.stderr
    # the API server reports the first refusing validation, which is the catalogue's first reason
    assert messages[0] in result.stderr, (messages[0], result.stderr)


def test_scan_reads_the_slices_and_init_from_cluster_writes_dra_on(dra_cluster: Cluster, tmp_path: Path) -> None:
    """`gpufleet scan` on the DRA testbed finds the DRA pools through their ResourceSlices (their nodes
    advertise no nvidia.com/* resource) and `init --from-cluster` writes a policy with `dra: on` whose
    pools yield what the fleet's do."""
    c = dra_cluster
    result = CliRunner().invoke(app, ["scan", "--kubeconfig", str(c.kubeconfig), "--json"])
    assert result.exit_code == 0, result.output
    pools = {p["name"]: p for p in json.loads(result.stdout)["pools"]}
    print({n: (p["units"], p["dra"]) for n, p in pools.items()})
    assert {n for n, p in pools.items() if p["dra"]} == {cap.name for cap in render_dra.dra_pools(c.fleet)}
    assert {n: p["units"] for n, p in pools.items()} == {n: cap.units for n, cap in c.fleet.pools.items()}
    policy = tmp_path / "fleet.yaml"
    written = CliRunner().invoke(app, ["init", str(policy), "--from-cluster", "--kubeconfig", str(c.kubeconfig)])
    assert written.exit_code == 0, written.output
    starter = resolve(load_policy(policy))
    assert starter.policy.cluster.dra.value == "on"
    assert {n: cap.units for n, cap in starter.pools.items()} == {n: cap.units for n, cap in c.fleet.pools.items()}
