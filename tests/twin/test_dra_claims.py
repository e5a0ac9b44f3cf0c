"""The twin counts a pod's ResourceClaims as Kueue v0.19.2 does, and refuses what Kueue refuses, in its words.

Kueue's rules (``pkg/dra/claims.go``, ``workload_controller.go``): a claim from a template adds its
``ExactCount`` devices per DeviceClass, mapped by ``deviceClassMappings`` to a quota resource, to each
pod's requests (so the pod count multiplies it); FirstAvailable, AdminAccess, AllocationMode All, an
unmapped class and a pod naming a ResourceClaim make the workload inadmissible with a field error.
The exact messages are held to the real Kueue in ``tests/e2e/test_dra_on_testbed.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.twin.apis.claims import NAMED_CLAIMS

CLASS = "gpufleet-h100-sxm5-80gb-gpu"
OTHER = "gpufleet-a100-gpu"  # mapped to the same resource: several classes share one budget


def base(nominal: int = 4) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "resources": {"deviceClassMappings": [{"name": "nvidia.com/gpu", "deviceClassNames": [CLASS, OTHER]}]},
        },
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "train"}},
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "alpha"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["nvidia.com/gpu"],
                        "flavors": [
                            {"name": "train", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": nominal}]}
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "alpha", "namespace": "alpha"},
            "spec": {"clusterQueue": "alpha"},
        },
    ]


def template(name: str, request: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "alpha"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", **request}]}}},
    }


def exactly(klass: str = CLASS, count: int = 1, **more: Any) -> dict[str, Any]:
    return {"exactly": {"deviceClassName": klass, "allocationMode": "ExactCount", "count": count, **more}}


def workload(
    name: str, claims: list[dict[str, Any]], pods: int = 1, created: str = "2026-01-01T00:00:00Z"
) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "alpha", "creationTimestamp": created},
        "spec": {
            "queueName": "alpha",
            "podSets": [
                {
                    "name": "main",
                    "count": pods,
                    "template": {
                        "spec": {
                            "resourceClaims": claims,
                            "containers": [
                                {"name": "c", "resources": {"claims": [{"name": c["name"]} for c in claims]}}
                            ],
                        }
                    },
                }
            ],
        },
    }


def step(tmp_path: Path, objects: list[dict[str, Any]]) -> dict[str, Any]:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(objects), encoding="utf-8")
    result = CliRunner().invoke(app, ["twin", "step", str(path), "--cycles", "1", "--json", "--no-clocks"])
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.output))


def from_template(name: str) -> list[dict[str, Any]]:
    return [{"name": "gpu", "resourceClaimTemplateName": name}]


@pytest.mark.parametrize(
    ("request_", "pods", "usage"),
    [
        (exactly(), 1, 1),
        (exactly(count=2), 2, 4),  # the count times the pod count
        (exactly(OTHER), 3, 3),  # another class of the same mapping draws on the same budget
    ],
)
def test_a_claim_is_counted_per_class_times_the_pod_count(
    tmp_path: Path, request_: dict[str, Any], pods: int, usage: int
) -> None:
    report = step(tmp_path, [*base(), template("t", request_), workload("w", from_template("t"), pods)])
    (admitted,) = report["cycles"][0]["admitted"]
    assert admitted["flavors"] == {"main": {"nvidia.com/gpu": "train"}}
    assert report["clusterQueues"]["alpha"]["usage"]["train/nvidia.com/gpu"] == usage


def test_claims_over_the_quota_wait_with_kueues_quota_message(tmp_path: Path) -> None:
    report = step(tmp_path, [*base(), template("t", exactly()), workload("w", from_template("t"), pods=5)])
    (pending,) = report["cycles"][0]["pending"]
    print(pending)
    assert "insufficient quota for nvidia.com/gpu in flavor train" in pending["message"]


CLAIM0 = "spec.podSets[0].template.spec.resourceClaims[0]"


@pytest.mark.parametrize(
    ("request_", "claims", "message"),
    [
        (
            {"firstAvailable": [{"name": "a", "deviceClassName": CLASS}]},
            from_template("t"),
            f"{CLAIM0}.devices.requests[0]: Invalid value: null: ResourceClaimTemplate t: "
            "FirstAvailable device selection is not supported",
        ),
        (
            exactly(adminAccess=True),
            from_template("t"),
            f"{CLAIM0}.devices.requests[0].exactly.adminAccess: Invalid value: null: ResourceClaimTemplate t: "
            "AdminAccess is not supported",
        ),
        (
            {"exactly": {"deviceClassName": CLASS, "allocationMode": "All"}},
            from_template("t"),
            f'{CLAIM0}.devices.requests[0].exactly.allocationMode: Invalid value: "All": ResourceClaimTemplate t: '
            "AllocationMode 'All' is not supported",
        ),
        (
            exactly("unmapped-gpu"),
            from_template("t"),
            f'{CLAIM0}.resourceClaimTemplateName: Not found: "DeviceClass unmapped-gpu is not mapped in DRA '
            'configuration for podset main"',
        ),
        (exactly(), [{"name": "gpu", "resourceClaimName": "mine"}], NAMED_CLAIMS),
        (
            exactly(),
            from_template("absent"),
            f"{CLAIM0}: Internal error: failed to get claim spec for ResourceClaimTemplate absent in podset main: "
            'resourceclaimtemplates.resource.k8s.io "absent" not found',
        ),
    ],
    ids=["first-available", "admin-access", "allocation-all", "unmapped-class", "named-claim", "no-template"],
)
def test_kueues_refusals_in_its_words(
    tmp_path: Path, request_: dict[str, Any], claims: list[dict[str, Any]], message: str
) -> None:
    report = step(tmp_path, [*base(), template("t", request_), workload("w", claims)])
    assert report["cycles"][0]["admitted"] == []
    (pending,) = report["cycles"][0]["pending"]
    # the granular reason; Kueue's default writes its legacy form, Inadmissible (reasons.written_reason)
    assert (pending["workload"], pending["reason"], pending["message"]) == ("alpha/w", "Misconfigured", message)
    assert report["clusterQueues"]["alpha"]["usage"].get("train/nvidia.com/gpu", 0) == 0


def test_a_refused_workload_does_not_block_the_next(tmp_path: Path) -> None:
    objects = [*base(), template("t", exactly()), template("bad", exactly(adminAccess=True))]
    objects += [
        workload("bad", from_template("bad")),
        workload("good", from_template("t"), created="2026-01-01T00:01:00Z"),
    ]
    report = step(tmp_path, objects)
    assert [a["workload"] for a in report["cycles"][0]["admitted"]] == ["alpha/good"]


@pytest.mark.parametrize(
    ("mappings", "expected"),
    [
        (
            [{"name": "nvidia.com/gpu", "deviceClassNames": [f"c{i}" for i in range(9)]}],
            "Too many: 9: must have at most 8",
        ),
        (
            [{"name": "a", "deviceClassNames": ["c"]}, {"name": "b", "deviceClassNames": ["c"]}],
            "device class already mapped to resource a",
        ),
        ([{"name": "a", "deviceClassNames": []}], "Required value"),
    ],
)
def test_kueues_mapping_validation_is_a_located_error(tmp_path: Path, mappings: list[Any], expected: str) -> None:
    objects = base()
    objects[0]["resources"]["deviceClassMappings"] = mappings
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(objects), encoding="utf-8")
    result = CliRunner().invoke(app, ["twin", "step", str(path), "--cycles", "1", "--json"])
    assert result.exit_code == 2, result.output
    assert expected in result.output and "deviceClassMappings" in result.output
    assert "Traceback" not in result.output
