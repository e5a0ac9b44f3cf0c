"""Two full-card DRA pools of different models on the real Kueue: why a claim must select its pool.

The e2e fleet with ``dra: on`` and its mig pool cut whole (tests/check/claim_cases.py,
``two_model_policy_text``): train holds H100s, mig A100s, and both DeviceClasses map to ``nvidia.com/gpu``
(Kueue's deviceClassMappings), so alpha's ClusterQueue has one resource group with the flavors train, mig.
Kueue v0.19.2's flavor assigner (``pkg/scheduler/flavorassigner/flavorassigner.go``) matches a flavor by
the resource and the pod's node selector, never by the claim's DeviceClass: an unpinned A100 claim gets
train's flavor (first with room), Kueue injects train's node labels, and kube-scheduler finds no A100.
The twin, which follows Kueue, assigns the same flavor. The rendered admission policy refuses the
unpinned claim (GPUClaimPoolNotSelected); a claim pinned to its pool is admitted there and runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from gpufleet.check.manifests import NAME as ADMISSION
from gpufleet.twin.step import step as twin_step
from tests.check.claim_cases import A100, A100_POOL, TWO_MODEL_CASES, two_model_policy_text
from tests.e2e.conftest import Cluster, own_testbed
from tests.e2e.test_dra_on_testbed import (
    _dry_run,
    _mappings,
    api_server_judges_as_the_rules_do,
    claim_job,
    clear_alpha,
    from_template,
    wait_for_admission_policy,
)
from tests.e2e.test_queueing import admitted, condition, workload_of

GPU = "nvidia.com/gpu"


@pytest.fixture(scope="module")
def two_models(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    folder = tmp_path_factory.mktemp("dra-two-models")
    policy = folder / "fleet-two-models.yaml"
    policy.write_text(two_model_policy_text(), encoding="utf-8")
    with own_testbed(folder / "testbed", "the two-model DRA testbed", policy=policy) as cluster:
        bundle = cluster.render(policy, folder / "manifests")
        cluster.prepare_namespaces(bundle)
        cluster.kubectl("apply", "--server-side", f"--kustomize={bundle}")
        cluster.eventually(
            lambda: (condition(cluster.get("clusterqueue", "alpha"), "Active") or {}).get("status") == "True",
            "ClusterQueue alpha to be Active",
        )
        yield cluster


@pytest.fixture
def c(two_models: Cluster) -> Iterator[Cluster]:
    yield two_models
    clear_alpha(two_models)


def _twin_flavors(c: Cluster, name: str) -> dict[str, dict[str, str]]:
    """The flavors the twin assigns Workload ``name`` in one cycle, from the cluster's own Kueue objects and
    Configuration, alpha's templates and the Workload as Kueue created it (status dropped)."""
    # the Configuration the testbed's Kueue runs with: its deviceClassMappings and excluded resources (cpu)
    objects: list[dict[str, Any]] = [yaml.safe_load((c.bed.config / "kueue.yaml").read_text(encoding="utf-8"))]
    for kind in ("resourceflavors", "clusterqueues"):
        objects += c.get(kind)["items"]
    objects += c.get("localqueues", "--namespace=alpha")["items"]
    objects += [
        {
            "apiVersion": t["apiVersion"],
            "kind": t["kind"],
            "metadata": {k: t["metadata"][k] for k in ("name", "namespace")},
            "spec": t["spec"],
        }
        for t in c.get("resourceclaimtemplates", "--namespace=alpha")["items"]
    ]
    wl = workload_of(c, "alpha", name)
    assert wl is not None
    objects.append({k: v for k, v in wl.items() if k != "status"})
    report = twin_step([("cluster.yaml", yaml.safe_dump_all(objects))], cycles=1, clocks=None)
    key = f"alpha/{wl['metadata']['name']}"
    rows = [a for a in report["cycles"][0]["admitted"] if a["workload"] == key]
    assert rows, [p for p in report["cycles"][0]["pending"] if p["workload"] == key]
    (row,) = rows
    flavors: dict[str, dict[str, str]] = row["flavors"]  # per pod set
    return flavors


def test_kueue_gives_an_unpinned_a100_claim_the_h100_flavor_and_the_twin_agrees(c: Cluster) -> None:
    """The hazard GPUClaimPoolNotSelected guards against, on the real Kueue (the admission policy unbound
    for this test only, so the Job reaches Kueue)."""
    binding = c.get("validatingadmissionpolicybinding", ADMISSION)
    unpinned = claim_job("a100-free", from_template(A100), run_for="1h")
    c.kubectl("delete", "validatingadmissionpolicybinding", ADMISSION)
    try:
        # the API server stops enforcing once its informer drops the binding: wait for that state
        c.eventually(lambda: _dry_run(c, unpinned).returncode == 0 or None, "the admission policy to be unbound")
        c.apply([unpinned])
        wl = c.eventually(lambda: admitted(c, "alpha", "a100-free"), "Kueue to admit the unpinned claim")
        flavors = wl["status"]["admission"]["podSetAssignments"][0]["flavors"]
        print("Kueue:", flavors)
        assert flavors[GPU] == "train"  # the H100 pool's flavor: first in alpha's group, with room
        assert _twin_flavors(c, "a100-free") == {"main": flavors}

        def unschedulable() -> dict[str, Any] | None:
            pods = c.get("pods", "--namespace=alpha", "--selector=job-name=a100-free")["items"]
            cond = condition(pods[0], "PodScheduled") if pods else None
            return cond if cond and cond.get("reason") == "Unschedulable" else None

        cond = c.eventually(unschedulable, "kube-scheduler to find no node for the A100 claim")
        print("kube-scheduler:", cond.get("message"))
        pod = c.get("pods", "--namespace=alpha", "--selector=job-name=a100-free")["items"][0]
        assert pod["spec"]["nodeSelector"].get("gpufleet.io/pool") == "train"  # injected by Kueue
        assert not pod["spec"].get("nodeName")
    finally:
        meta = binding["metadata"]
        c.apply(
            [
                {
                    "apiVersion": binding["apiVersion"],
                    "kind": binding["kind"],
                    "metadata": {"name": meta["name"]},
                    "spec": binding["spec"],
                }
            ]
        )


@pytest.mark.parametrize(("obj", "reasons"), [c[1:] for c in TWO_MODEL_CASES], ids=[c[0] for c in TWO_MODEL_CASES])
def test_the_api_server_refuses_an_unpinned_claim_as_the_rules_do(
    two_models: Cluster, obj: dict[str, Any], reasons: list[str]
) -> None:
    api_server_judges_as_the_rules_do(two_models, obj, reasons)


def test_a_pinned_a100_claim_is_admitted_on_its_pool_and_runs(c: Cluster) -> None:
    job = claim_job("a100-pinned", from_template(A100))
    job["spec"]["template"]["spec"]["nodeSelector"] = dict(A100_POOL)
    wait_for_admission_policy(c)  # the hazard test re-binds it: the pinned Job must pass the enforced policy
    c.apply([job])
    wl = c.eventually(lambda: admitted(c, "alpha", "a100-pinned"), "Kueue to admit the pinned claim")
    flavors = wl["status"]["admission"]["podSetAssignments"][0]["flavors"]
    print("Kueue:", flavors)
    assert flavors[GPU] == "mig"
    assert _twin_flavors(c, "a100-pinned") == {"main": flavors}

    def allocated() -> dict[str, Any] | None:
        claims = c.get("resourceclaims", "--namespace=alpha")["items"]
        return next((x for x in claims if x.get("status", {}).get("allocation")), None)

    result = c.eventually(allocated, "kube-scheduler to allocate the claim")["status"]["allocation"]["devices"][
        "results"
    ][0]
    print("allocated:", result)
    assert result["pool"] == "e2e-a100-0" and result["device"].startswith("gpu-")
    c.eventually(
        lambda: any(
            x["type"] == "Complete"
            for x in c.get("job", "a100-pinned", "--namespace=alpha")["status"].get("conditions", [])
        ),
        "the Job to complete",
    )


def test_both_full_card_classes_map_to_one_quota_resource(two_models: Cluster) -> None:
    """Both full-card pools are DRA pools mapped to one quota resource: the premise of this module."""
    mappings = {m["name"]: m["deviceClassNames"] for m in _mappings(two_models)}
    assert mappings == {GPU: ["gpufleet-a100-sxm4-80gb-gpu", "gpufleet-h100-sxm5-80gb-gpu"]}
