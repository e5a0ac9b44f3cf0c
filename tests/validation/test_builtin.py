"""Built-in kinds against the target Kubernetes version's strict schema (kubernetes-validate)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpufleet.errors import InputError
from gpufleet.validation import validate


def deployment() -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": "chat", "app.kubernetes.io/managed-by": "gpufleet"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "chat", "namespace": "serving", "labels": labels},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app.kubernetes.io/name": "chat"}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "priorityClassName": "serving",
                    "nodeSelector": {"gpufleet.io/pool": "h100-serve"},
                    "tolerations": [
                        {
                            "key": "gpufleet.io/pool",
                            "operator": "Equal",
                            "value": "h100-serve",
                            "effect": "NoSchedule",
                        }
                    ],
                    "containers": [
                        {
                            "name": "vllm",
                            "image": "vllm/vllm-openai:v0.11.0",
                            "args": [
                                "--model",
                                "meta-llama/Llama-3.1-70B-Instruct",
                                "--tensor-parallel-size",
                                "4",
                            ],
                            "ports": [{"containerPort": 8000, "name": "http"}],
                            "resources": {"limits": {"nvidia.com/gpu": 4}},
                            "readinessProbe": {"httpGet": {"path": "/health", "port": "http"}},
                        }
                    ],
                },
            },
        },
    }


def vap() -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "gpufleet-required-labels"},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": ["batch"],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["jobs"],
                    }
                ]
            },
            "validations": [
                {
                    "expression": "has(object.metadata.labels) && 'gpufleet.io/team' in object.metadata.labels",
                    "message": "jobs need a gpufleet.io/team label",
                    "reason": "Invalid",
                }
            ],
        },
    }


def vap_binding() -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "gpufleet-required-labels"},
        "spec": {"policyName": "gpufleet-required-labels", "validationActions": ["Deny"]},
    }


def node_patch() -> dict[str, Any]:
    """A Node holding only the fields gpufleet owns, for server-side apply."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "gpu-node-1", "labels": {"nvidia.com/mig.config": "all-balanced"}},
        "spec": {"taints": [{"key": "gpufleet.io/pool", "value": "h100-serve", "effect": "NoSchedule"}]},
    }


def device_class() -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "h100"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]},
    }


def simple(api_version: str, kind: str, name: str, namespace: str | None = None, **fields: Any) -> dict[str, Any]:
    metadata = {"name": name} | ({"namespace": namespace} if namespace else {})
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, **fields}


VALID = [
    pytest.param(deployment(), "1.34", id="Deployment"),
    pytest.param(
        simple("v1", "Service", "chat", "serving", spec={"selector": {"a": "b"}, "ports": [{"port": 80}]}),
        "1.34",
        id="Service",
    ),
    pytest.param(simple("v1", "Namespace", "research"), "1.34", id="Namespace"),
    pytest.param(
        simple("v1", "ConfigMap", "mig-config", "gpu-operator", data={"config.yaml": "x"}),
        "1.34",
        id="ConfigMap",
    ),
    pytest.param(simple("v1", "ServiceAccount", "recorder", "gpufleet"), "1.34", id="ServiceAccount"),
    pytest.param(node_patch(), "1.34", id="Node-partial-for-server-side-apply"),
    pytest.param(simple("scheduling.k8s.io/v1", "PriorityClass", "serving", value=100000), "1.34", id="PriorityClass"),
    pytest.param(
        simple(
            "rbac.authorization.k8s.io/v1",
            "ClusterRole",
            "system:gpufleet-recorder",
            rules=[
                {
                    "apiGroups": ["kueue.x-k8s.io"],
                    "resources": ["workloads"],
                    "verbs": ["get", "list", "watch"],
                }
            ],
        ),
        "1.34",
        id="ClusterRole-with-colon-name",
    ),
    pytest.param(vap(), "1.30", id="ValidatingAdmissionPolicy-v1-1.30"),
    pytest.param(vap(), "1.34", id="ValidatingAdmissionPolicy-v1-1.34"),
    pytest.param(vap_binding(), "1.30", id="ValidatingAdmissionPolicyBinding-v1-1.30"),
    pytest.param(device_class(), "1.34", id="DeviceClass-1.34"),
    pytest.param(
        simple(
            "resource.k8s.io/v1",
            "ResourceClaimTemplate",
            "one-h100",
            "research",
            spec={"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "h100"}}]}}},
        ),
        "1.34",
        id="ResourceClaimTemplate-1.34",
    ),
    pytest.param(
        {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": ["kueue.yaml"],
        },
        "1.34",
        id="Kustomization-is-skipped",
    ),
]


@pytest.mark.parametrize(("obj", "kubernetes"), VALID)
def test_valid_builtin_objects_pass(obj: dict[str, Any], kubernetes: str) -> None:
    assert validate([obj], kubernetes=kubernetes, crds=None) == []


def replicas_three() -> dict[str, Any]:
    obj = deployment()
    obj["spec"]["replicas"] = "three"
    return obj


def unknown_container_field() -> dict[str, Any]:
    obj = deployment()
    obj["spec"]["template"]["spec"]["containers"][0]["gpus"] = 4
    return obj


def bad_label() -> dict[str, Any]:
    obj = copy.deepcopy(node_patch())
    obj["metadata"]["labels"]["gpufleet.io/pool!"] = "x"
    return obj


FAILURES = [
    pytest.param(
        replicas_three(),
        "1.34",
        "Deployment/serving/chat",
        "spec.replicas",
        "schema",
        "'three' is not of type 'integer'",
        id="replicas-three",
    ),
    pytest.param(
        unknown_container_field(),
        "1.34",
        "Deployment/serving/chat",
        "spec.template.spec.containers[0].gpus",
        "structural",
        'unknown field "gpus"',
        id="unknown-container-field",
    ),
    pytest.param(
        vap(),
        "1.29",
        "ValidatingAdmissionPolicy/gpufleet-required-labels",
        "apiVersion",
        "schema",
        "no schema for ValidatingAdmissionPolicy in admissionregistration.k8s.io/v1: "
        "not a built-in kind of Kubernetes 1.29",
        id="vap-v1-before-1.30",
    ),
    pytest.param(
        device_class(),
        "1.33",
        "DeviceClass/h100",
        "apiVersion",
        "schema",
        "no schema for DeviceClass in resource.k8s.io/v1",
        id="dra-v1-before-1.34",
    ),
    pytest.param(
        simple("kueue.x-k8s.io/v1beta2", "ClusterQueue", "team-a"),
        "1.34",
        "ClusterQueue/team-a",
        "apiVersion",
        "schema",
        "no schema for ClusterQueue in kueue.x-k8s.io/v1beta2: "
        "not a built-in kind of Kubernetes 1.34 and not defined by any CRD",
        id="custom-kind-without-crds",
    ),
    pytest.param(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "x"}},
        "1.34",
        "ConfigMap/x/<unnamed>",
        "metadata.name",
        "schema",
        "Required value: name or generateName is required",
        id="missing-name",
    ),
    pytest.param(
        bad_label(),
        "1.34",
        "Node/gpu-node-1",
        "metadata.labels[gpufleet.io/pool!]",
        "schema",
        "invalid key: name part 'pool!'",
        id="bad-label-key",
    ),
    pytest.param(
        {"kind": "ConfigMap", "metadata": {"name": "x"}},
        "1.34",
        "ConfigMap/x",
        "apiVersion",
        "schema",
        "Required value",
        id="missing-apiVersion",
    ),
]


@pytest.mark.parametrize(("obj", "kubernetes", "ref", "path", "source", "message"), FAILURES)
def test_builtin_failures_name_object_and_field(
    obj: dict[str, Any], kubernetes: str, ref: str, path: str, source: str, message: str
) -> None:
    findings = validate([obj], kubernetes=kubernetes, crds=None)
    assert len(findings) == 1, findings
    (found,) = findings
    assert (found.object, found.path, found.source) == (ref, path, source)
    assert found.message.startswith(message), found.message


def test_only_the_first_error_of_a_builtin_object_is_reported() -> None:
    obj = replicas_three()
    obj["spec"]["minReadySeconds"] = "soon"
    assert len(validate([obj], kubernetes="1.34", crds=None)) == 1


def test_non_mapping_object_is_a_finding() -> None:
    (found,) = validate(["not an object"], kubernetes="1.34", crds=None)  # type: ignore[list-item]
    assert (found.object, found.source) == ("object[0]", "schema")


@pytest.mark.parametrize("kubernetes", ["1.24", "1.99", "latest", "2.0"])
def test_unsupported_kubernetes_version_is_an_input_error(kubernetes: str) -> None:
    with pytest.raises(InputError, match=r"1\.25 to 1\.37"):
        validate([deployment()], kubernetes=kubernetes, crds=None)


@pytest.mark.parametrize("kubernetes", ["1.34", "v1.34", "1.34.2"])
def test_kubernetes_version_spellings(kubernetes: str) -> None:
    assert validate([vap()], kubernetes=kubernetes, crds=None) == []
