"""Kueue v0.19.2 objects against the real CRDs: valid ones pass, each kind of failure is caught.

The CEL cases violate rules that really exist in the CRDs (``rule:`` entries of
``shared/schemas/kueue-v0.19.2``), and expect the CRD's own message.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from gpufleet.validation import CrdIndex, cel, validate
from gpufleet.validation.rules import is_transition_rule

KUEUE = "kueue.x-k8s.io/v1beta2"
GPU = "nvidia.com/gpu"
QUANTITY_PATTERN = "does not match '^(\\\\+|-)?"  # the start of jsonschema's pattern message


def resource_flavor() -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "ResourceFlavor",
        "metadata": {"name": "h100-train", "labels": {"app.kubernetes.io/managed-by": "gpufleet"}},
        "spec": {
            "nodeLabels": {
                "kubernetes.azure.com/agentpool": "h100train",
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
            },
            "nodeTaints": [{"key": "gpufleet.io/pool", "value": "h100-train", "effect": "NoSchedule"}],
            "tolerations": [
                {
                    "key": "gpufleet.io/pool",
                    "operator": "Equal",
                    "value": "h100-train",
                    "effect": "NoSchedule",
                },
                {
                    "key": "nvidia.com/gpu",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 30,
                },
            ],
        },
    }


def cohort() -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "Cohort",
        "metadata": {"name": "fleet"},
        "spec": {
            "fairSharing": {"weight": 1},
            "resourceGroups": [
                {
                    "coveredResources": [GPU],
                    "flavors": [{"name": "h100-train", "resources": [{"name": GPU, "nominalQuota": 0}]}],
                }
            ],
        },
    }


def cluster_queue() -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": "team-a", "labels": {"gpufleet.io/team": "team-a"}},
        "spec": {
            "cohortName": "fleet",
            "namespaceSelector": {
                "matchLabels": {"gpufleet.io/team": "team-a"},
                "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["research"]}],
            },
            "queueingStrategy": "BestEffortFIFO",
            "fairSharing": {"weight": "2"},
            "preemption": {
                "reclaimWithinCohort": "Any",
                "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100},
                "withinClusterQueue": "LowerPriority",
            },
            "flavorFungibility": {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"},
            "resourceGroups": [
                {
                    "coveredResources": [GPU, "cpu"],
                    "flavors": [
                        {
                            "name": "h100-train",
                            "resources": [
                                {"name": GPU, "nominalQuota": 8, "borrowingLimit": 8, "lendingLimit": 4},
                                {"name": "cpu", "nominalQuota": "256"},
                            ],
                        },
                        {
                            "name": "a100-mig",
                            "resources": [
                                {"name": GPU, "nominalQuota": 2, "lendingLimit": 0},
                                {"name": "cpu", "nominalQuota": "64500m"},
                            ],
                        },
                    ],
                },
                {
                    "coveredResources": ["nvidia.com/mig-1g.10gb"],
                    "flavors": [
                        {
                            "name": "a100-mig-1g",
                            "resources": [{"name": "nvidia.com/mig-1g.10gb", "nominalQuota": 4}],
                        }
                    ],
                },
            ],
        },
    }


def local_queue() -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": {"name": "team-a", "namespace": "research"},
        "spec": {"clusterQueue": "team-a"},
    }


def workload_priority_class() -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": "train-high"},
        "value": 1000,
        "description": "training that may preempt batch evaluation",
    }


def topology() -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "Topology",
        "metadata": {"name": "default"},
        "spec": {"levels": [{"nodeLabel": "topology.kubernetes.io/zone"}, {"nodeLabel": "kubernetes.io/hostname"}]},
    }


def workload() -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {"name": "job-train-1", "namespace": "research"},
        "spec": {
            "queueName": "team-a",
            "podSets": [
                {
                    "name": "main",
                    "count": 2,
                    "template": {"spec": {"containers": [{"name": "trainer", "image": "trainer:1"}]}},
                }
            ],
        },
    }


def changed(build: Callable[[], dict[str, Any]], change: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    obj = copy.deepcopy(build())
    change(obj)
    return obj


@pytest.mark.parametrize(
    "build",
    [resource_flavor, cohort, cluster_queue, local_queue, workload_priority_class, topology, workload],
    ids=lambda build: build.__name__,
)
def test_valid_kueue_objects_pass(kueue_crds: CrdIndex, build: Callable[[], dict[str, Any]]) -> None:
    assert validate([build()], kubernetes="1.34", crds=kueue_crds) == []


def cq_spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = obj["spec"]
    return spec


def gpu_resource(obj: dict[str, Any]) -> dict[str, Any]:
    resource: dict[str, Any] = obj["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    return resource


NOT_CHECKED = (
    "some validation rules were not checked because the object was invalid; "
    "correct the existing errors to complete validation"
)
RESOURCE_PATH = "spec.resourceGroups[0].flavors[0].resources[0]"

FAILURES = [
    # --- OpenAPI schema ---
    pytest.param(
        changed(
            cluster_queue,
            lambda o: cq_spec(o)["preemption"]["borrowWithinCohort"].update(maxPriorityThreshold="high"),
        ),
        "ClusterQueue/team-a",
        [
            (
                "spec.preemption.borrowWithinCohort.maxPriorityThreshold",
                "schema",
                "'high' is not of type 'integer'",
            ),
            ("", "cel", NOT_CHECKED),
        ],
        id="schema-type-error-blocks-cel",
    ),
    pytest.param(
        changed(cluster_queue, lambda o: gpu_resource(o).update(nominalQuota=True)),
        "ClusterQueue/team-a",
        [
            (
                f"{RESOURCE_PATH}.nominalQuota",
                "schema",
                "must be an integer or a string (x-kubernetes-int-or-string), got boolean",
            ),
            ("", "cel", NOT_CHECKED),
        ],
        id="int-or-string-type-error",
    ),
    pytest.param(
        changed(cluster_queue, lambda o: gpu_resource(o).update(nominalQuota="eight")),
        "ClusterQueue/team-a",
        [(f"{RESOURCE_PATH}.nominalQuota", "schema", "'eight' " + QUANTITY_PATTERN)],
        id="quantity-pattern",
    ),
    pytest.param(
        changed(cluster_queue, lambda o: gpu_resource(o).pop("nominalQuota")),
        "ClusterQueue/team-a",
        [(f"{RESOURCE_PATH}.nominalQuota", "schema", "Required value"), ("", "cel", NOT_CHECKED)],
        id="missing-required-field",
    ),
    pytest.param(
        changed(cluster_queue, lambda o: cq_spec(o)["preemption"].update(reclaimWithinCohort="Sometimes")),
        "ClusterQueue/team-a",
        [
            (
                "spec.preemption.reclaimWithinCohort",
                "schema",
                "'Sometimes' is not one of ['Never', 'LowerPriority', 'Any']",
            ),
            ("", "cel", NOT_CHECKED),
        ],
        id="enum",
    ),
    pytest.param(
        changed(workload_priority_class, lambda o: o.pop("value")),
        "WorkloadPriorityClass/train-high",
        [("value", "schema", "Required value"), ("", "cel", NOT_CHECKED)],
        id="missing-root-field",
    ),
    pytest.param(
        changed(local_queue, lambda o: o["spec"].update(clusterQueue="Team_A")),
        "LocalQueue/research/team-a",
        [("spec.clusterQueue", "schema", "'Team_A' does not match")],
        id="name-pattern",
    ),
    # --- structural: unknown fields, list-type map uniqueness, ObjectMeta ---
    pytest.param(
        changed(cluster_queue, lambda o: o["spec"]["resourceGroups"][0]["flavors"][0].update(quota=8)),
        "ClusterQueue/team-a",
        [("spec.resourceGroups[0].flavors[0].quota", "structural", 'unknown field "quota"')],
        id="unknown-field",
    ),
    pytest.param(
        changed(local_queue, lambda o: o.update(specs={})),
        "LocalQueue/research/team-a",
        [("specs", "structural", 'unknown field "specs"')],
        id="unknown-root-field",
    ),
    pytest.param(
        changed(
            cluster_queue,
            lambda o: o["spec"]["resourceGroups"][0]["flavors"][1].update(name="h100-train"),
        ),
        "ClusterQueue/team-a",
        [
            (
                "spec.resourceGroups[0].flavors[1]",
                "structural",
                'Duplicate value: {"name":"h100-train"} (x-kubernetes-list-type=map keyed by name); first at index 0',
            )
        ],
        id="duplicate-in-list-type-map",
    ),
    pytest.param(
        changed(
            cluster_queue,
            lambda o: o["spec"]["resourceGroups"][0]["flavors"][0]["resources"][1].update(name=GPU),
        ),
        "ClusterQueue/team-a",
        [
            (
                "spec.resourceGroups[0].flavors[0].resources[1]",
                "structural",
                'Duplicate value: {"name":"nvidia.com/gpu"} '
                "(x-kubernetes-list-type=map keyed by name); first at index 0",
            )
        ],
        id="duplicate-resource-name",
    ),
    pytest.param(
        changed(resource_flavor, lambda o: o["metadata"].update(name="H100_train", label={})),
        "ResourceFlavor/H100_train",
        [
            ("metadata.name", "schema", "'H100_train' must be a DNS subdomain"),
            ("metadata.label", "structural", 'unknown field "label"'),
        ],
        id="object-meta",
    ),
    pytest.param(
        changed(resource_flavor, lambda o: o["metadata"]["labels"].update({"gpufleet.io/team": "team a"})),
        "ResourceFlavor/h100-train",
        [("metadata.labels[gpufleet.io/team]", "schema", "label value 'team a' must be")],
        id="label-value",
    ),
    # --- CEL rules of the CRDs, with their own messages ---
    pytest.param(
        changed(cluster_queue, lambda o: o["spec"]["resourceGroups"][0]["flavors"][1]["resources"].pop()),
        "ClusterQueue/team-a",
        [
            (
                "spec.resourceGroups[0]",
                "cel",
                "flavors must have the same number of resources as the coveredResources",
            )
        ],
        id="cel-flavors-cover-resources",
    ),
    pytest.param(
        changed(cluster_queue, lambda o: o["spec"].pop("cohortName")),
        "ClusterQueue/team-a",
        [("spec", "cel", "borrowingLimit must be nil when cohort is empty")],
        id="cel-borrowing-limit-without-cohort",
    ),
    pytest.param(
        changed(cluster_queue, lambda o: o["spec"]["preemption"].update(reclaimWithinCohort="Never")),
        "ClusterQueue/team-a",
        [("spec.preemption", "cel", "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never")],
        id="cel-preemption-borrow-within-cohort",
    ),
    pytest.param(
        changed(
            cluster_queue,
            lambda o: o["spec"].update(flavorFungibility={"preference": "BorrowingOverPreemption"}),
        ),
        "ClusterQueue/team-a",
        [
            (
                "spec.flavorFungibility",
                "cel",
                "preference can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor",
            )
        ],
        id="cel-fungibility-preference-after-defaulting",
    ),
    pytest.param(
        changed(cohort, lambda o: o["spec"]["resourceGroups"][0]["coveredResources"].append("cpu")),
        "Cohort/fleet",
        [
            (
                "spec.resourceGroups[0]",
                "cel",
                "flavors must have the same number of resources as the coveredResources",
            )
        ],
        id="cel-cohort-flavors-cover-resources",
    ),
    pytest.param(
        changed(resource_flavor, lambda o: o["spec"]["nodeTaints"][0].update(effect="NoAdmit")),
        "ResourceFlavor/h100-train",
        [
            (
                "spec.nodeTaints",
                "cel",
                "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'",
            )
        ],
        id="cel-taint-effect",
    ),
    pytest.param(
        changed(resource_flavor, lambda o: o["spec"]["tolerations"][0].update(operator="In")),
        "ResourceFlavor/h100-train",
        [("spec.tolerations", "cel", "supported toleration values: 'Equal'(default), 'Exists'")],
        id="cel-toleration-operator",
    ),
    pytest.param(
        changed(resource_flavor, lambda o: o["spec"]["tolerations"][1].update(effect="NoSchedule")),
        "ResourceFlavor/h100-train",
        [("spec.tolerations", "cel", "effect must be 'NoExecute' when 'tolerationSeconds' is set")],
        id="cel-toleration-seconds",
    ),
    pytest.param(
        changed(resource_flavor, lambda o: o["spec"]["tolerations"][1].update(value="x")),
        "ResourceFlavor/h100-train",
        [("spec.tolerations", "cel", "a value must be empty when 'operator' is 'Exists'")],
        id="cel-toleration-exists-value",
    ),
    pytest.param(
        changed(resource_flavor, lambda o: o["spec"]["tolerations"][0].pop("key")),
        "ResourceFlavor/h100-train",
        [
            (
                "spec.tolerations",
                "cel",
                "operator must be Exists when 'key' is empty, which means 'match all values and all keys'",
            )
        ],
        id="cel-toleration-without-key",
    ),
    pytest.param(
        changed(resource_flavor, lambda o: (o["spec"].pop("nodeLabels"), o["spec"].update(topologyName="default"))),
        "ResourceFlavor/h100-train",
        [
            (
                "spec",
                "cel",
                'Key not found in map : "nodeLabels" (evaluating rule '
                "'!has(self.topologyName) || self.nodeLabels.size() >= 1')",
            )
        ],
        id="cel-topology-without-node-labels-is-a-runtime-error",
    ),
    pytest.param(
        changed(resource_flavor, lambda o: o["spec"].update(topologyName="default", nodeLabels={})),
        "ResourceFlavor/h100-train",
        [("spec", "cel", "at least one nodeLabel is required when topology is set")],
        id="cel-topology-needs-node-labels",
    ),
    pytest.param(
        changed(topology, lambda o: o["spec"]["levels"].append({"nodeLabel": "topology.kubernetes.io/zone"})),
        "Topology/default",
        [
            ("spec.levels", "cel", "must be unique"),
            (
                "spec.levels",
                "cel",
                "the kubernetes.io/hostname label can only be used at the lowest level of topology",
            ),
        ],
        id="cel-topology-levels",
    ),
    pytest.param(
        changed(workload, lambda o: o["spec"]["podSets"][0].update(minCount=3)),
        "Workload/research/job-train-1",
        [("spec.podSets[0]", "cel", "minCount should be positive and less or equal to count")],
        id="cel-workload-min-count",
    ),
    pytest.param(
        changed(
            workload,
            lambda o: o["spec"].update(
                priority=10,
                priorityClassRef={"group": "scheduling.k8s.io", "kind": "WorkloadPriorityClass", "name": "x"},
            ),
        ),
        "Workload/research/job-train-1",
        [
            (
                "spec.priorityClassRef",
                "cel",
                "only the PriorityClass kind is allowed for the scheduling.k8s.io group",
            )
        ],
        id="cel-workload-priority-class-ref",
    ),
    pytest.param(
        changed(
            workload,
            lambda o: o["spec"].update(
                priorityClassRef={"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "x"}
            ),
        ),
        "Workload/research/job-train-1",
        [("spec", "cel", "priority should not be nil when priorityClassRef is set")],
        id="cel-workload-priority-required",
    ),
    # --- resolution ---
    pytest.param(
        changed(cluster_queue, lambda o: o.update(apiVersion="kueue.x-k8s.io/v1")),
        "ClusterQueue/team-a",
        [
            (
                "apiVersion",
                "schema",
                "kueue.x-k8s.io/v1 is not a served version of ClusterQueue (served: v1beta1, v1beta2)",
            )
        ],
        id="version-not-served",
    ),
]


@pytest.mark.parametrize(("obj", "ref", "expected"), FAILURES)
def test_each_kind_of_failure_is_caught(
    kueue_crds: CrdIndex, obj: dict[str, Any], ref: str, expected: list[tuple[str, str, str]]
) -> None:
    findings = validate([obj], kubernetes="1.34", crds=kueue_crds)
    assert {f.object for f in findings} == {ref}
    got = sorted((f.path, f.source, f.message) for f in findings)
    assert len(got) == len(expected), got
    for (path, source, message), (want_path, want_source, want_message) in zip(got, sorted(expected), strict=True):
        assert (path, source) == (want_path, want_source), got
        assert message.startswith(want_message), got


def test_transition_rules_do_not_run_on_create(kueue_crds: CrdIndex) -> None:
    # LocalQueue.spec.clusterQueue and Topology.spec.levels carry `self == oldSelf` (immutability).
    assert validate([local_queue(), topology()], kubernetes="1.34", crds=kueue_crds) == []


def test_findings_follow_input_order_then_source_then_path(kueue_crds: CrdIndex) -> None:
    bad_flavor = changed(
        resource_flavor, lambda o: (o["spec"].update(extra=1), o["spec"]["nodeTaints"][0].update(effect="x"))
    )
    bad_queue = changed(local_queue, lambda o: o["spec"].update(clusterQueue="Bad_Name", other=1))
    findings = validate([bad_queue, bad_flavor], kubernetes="1.34", crds=kueue_crds)
    assert [(f.object, f.source, f.path) for f in findings] == [
        ("LocalQueue/research/team-a", "schema", "spec.clusterQueue"),
        ("LocalQueue/research/team-a", "structural", "spec.other"),
        ("ResourceFlavor/h100-train", "structural", "spec.extra"),
        ("ResourceFlavor/h100-train", "cel", "spec.nodeTaints"),
    ]


def test_input_objects_are_not_modified(kueue_crds: CrdIndex) -> None:
    obj = cluster_queue()
    del obj["spec"]["flavorFungibility"]
    before = copy.deepcopy(obj)
    validate([obj], kubernetes="1.34", crds=kueue_crds)
    assert obj == before


def every_rule(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, dict):
        found = list(node.get("x-kubernetes-validations") or [])
        return found + [r for value in node.values() for r in every_rule(value)]
    if isinstance(node, list):
        return [r for value in node for r in every_rule(value)]
    return []


def test_every_kueue_rule_compiles_or_is_a_transition_rule(kueue_crds: CrdIndex) -> None:
    """No rule of the real CRDs is left unevaluated on create: each compiles or runs on update only."""
    rules = [r["rule"] for version in kueue_crds.versions.values() for r in every_rule(dict(version.schema))]
    assert len(rules) > 50  # both served versions of eight kinds carry rules
    for expression in rules:
        if "oldSelf" in expression:  # no Kueue rule mentions oldSelf inside a string literal
            assert is_transition_rule(expression)
        else:
            cel.compile(expression)  # raises CelCompileError if the offline environment lacks something


def test_status_is_dropped_on_create_like_the_api_server(kueue_crds: CrdIndex) -> None:
    obj = workload()
    obj["status"] = {"clusterName": "a", "nominatedClusterNames": ["b"], "bogus": 1}
    assert validate([obj], kubernetes="1.34", crds=kueue_crds) == []
