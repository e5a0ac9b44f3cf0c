"""Reading Kueue objects: v1beta1 spellings map onto v1beta2, flavors match pod sets like Kueue's."""

from __future__ import annotations

import pytest

from gpufleet.errors import InputError
from gpufleet.twin.apis.objects import parse_cluster
from gpufleet.twin.apis.specs import (
    MAY_STOP_SEARCH,
    PodSetSpec,
    Requirement,
    ResourceFlavorSpec,
    Taint,
    Toleration,
    WorkloadSpec,
)
from gpufleet.twin.scheduler.flavorassigner import matches

CQ_V1BETA1 = """
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq}
spec:
  cohort: team
  flavorFungibility: {whenCanBorrow: Borrow, whenCanPreempt: Preempt}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: "1.5"}]}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata: {name: prod}
value: 1000
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: q, namespace: ns}
spec: {clusterQueue: cq}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {name: w, namespace: ns, annotations: {kueue.x-k8s.io/priority-boost: "5"}}
spec:
  queueName: q
  priorityClassName: prod
  priorityClassSource: kueue.x-k8s.io/workloadpriorityclass
  podSets:
  - name: main
    count: 2
    template:
      spec:
        initContainers: [{name: i, resources: {requests: {cpu: "3"}}}]
        containers:
        - {name: a, resources: {requests: {cpu: 500m, memory: 1Gi}}}
        - {name: b, resources: {limits: {cpu: "1", nvidia.com/gpu: "1"}}}
---
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
fairSharing: {enable: true, preemptionStrategies: [LessThanInitialShare]}
"""


def test_v1beta1_spellings_are_read_as_v1beta2() -> None:
    spec = parse_cluster([("in.yaml", CQ_V1BETA1)])
    cq = spec.cluster_queues["cq"]
    assert cq.cohort == "team"
    assert cq.flavor_fungibility.when_can_borrow == MAY_STOP_SEARCH
    assert cq.flavor_fungibility.when_can_preempt == MAY_STOP_SEARCH
    assert cq.resource_groups[0].flavors[0].resources[0].nominal == 1500
    (wl,) = spec.workloads
    assert wl.priority == 1005  # class value plus the priority boost
    # Per pod: max(sum of containers, largest init container); limits stand in for requests.
    assert dict(wl.pod_sets[0].requests) == {"cpu": 3000, "memory": 2**30, "nvidia.com/gpu": 1}
    assert spec.config.fair_sharing
    assert spec.config.preemption_strategies == ("LessThanInitialShare",)


GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")
H100 = ResourceFlavorSpec("h100", (("gpu", "h100"),), (GPU_TAINT,))

MATCH_CASES = {
    "untolerated taint": (
        PodSetSpec("main", 1, ()),
        H100,
        "untolerated taint {nvidia.com/gpu present NoSchedule} in flavor h100",
    ),
    "tolerated by Exists": (
        PodSetSpec("main", 1, (), tolerations=(Toleration("nvidia.com/gpu", operator="Exists"),)),
        H100,
        "",
    ),
    "tolerated by the flavor itself": (
        PodSetSpec("main", 1, ()),
        ResourceFlavorSpec(
            "h100", (), (GPU_TAINT,), (Toleration("nvidia.com/gpu", operator="Exists", effect="NoSchedule"),)
        ),
        "",
    ),
    "PreferNoSchedule is ignored": (
        PodSetSpec("main", 1, ()),
        ResourceFlavorSpec("a100", (), (Taint("x", "y", "PreferNoSchedule"),)),
        "",
    ),
    "node selector contradicts a flavor label": (
        PodSetSpec("main", 1, (), node_selector=(("gpu", "a100"),), tolerations=(Toleration(operator="Exists"),)),
        H100,
        "flavor h100 doesn't match node affinity",
    ),
    "node selector on a key the flavor does not set": (
        PodSetSpec("main", 1, (), node_selector=(("zone", "a"),), tolerations=(Toleration(operator="Exists"),)),
        H100,
        "",
    ),
    "required affinity: one term matches": (
        PodSetSpec(
            "main",
            1,
            (),
            tolerations=(Toleration(operator="Exists"),),
            affinity_terms=((Requirement("gpu", "In", ("a100",)),), (Requirement("gpu", "In", ("h100",)),)),
        ),
        H100,
        "",
    ),
    "required affinity: NotIn excludes the flavor": (
        PodSetSpec(
            "main",
            1,
            (),
            tolerations=(Toleration(operator="Exists"),),
            affinity_terms=((Requirement("gpu", "NotIn", ("h100",)),),),
        ),
        H100,
        "flavor h100 doesn't match node affinity",
    ),
}


@pytest.mark.parametrize(("pod_set", "flavor", "want"), MATCH_CASES.values(), ids=MATCH_CASES.keys())
def test_flavor_matching(pod_set: PodSetSpec, flavor: ResourceFlavorSpec, want: str) -> None:
    assert matches(pod_set, flavor) == want


REFERENCE_CASES = {
    # found by tests/fuzz/test_twin_objects.py: a list reached the Cohort's spec and raised TypeError
    "a cohort's parent as a list": (
        "kind: Cohort\nmetadata: {name: c}\nspec: {parentName: [null]}",
        "spec.parentName",
        "Cohort c: expected a name (a string), got a list",
    ),
    # every Kueue version names it spec.parentName; the twin read spec.parent too, a parent the cluster never has
    "a cohort's parent under a field Kueue does not have": (
        "kind: Cohort\nmetadata: {name: c}\nspec: {parent: root}",
        "spec.parent",
        'Cohort c: unknown field "spec.parent": a Cohort names its parent in spec.parentName',
    ),
    "a ClusterQueue's cohort as a mapping": (
        "kind: ClusterQueue\nmetadata: {name: q}\nspec: {cohortName: {a: b}}",
        "spec.cohortName",
        "ClusterQueue q: expected a name (a string), got a mapping",
    ),
}


@pytest.mark.parametrize(("text", "path", "message"), REFERENCE_CASES.values(), ids=REFERENCE_CASES.keys())
def test_a_reference_that_is_not_a_name_is_a_located_problem(text: str, path: str, message: str) -> None:
    with pytest.raises(InputError) as raised:
        parse_cluster([("cluster.yaml", f"apiVersion: kueue.x-k8s.io/v1beta2\n{text}\n")])
    assert [(p.file, p.path, p.line, p.message) for p in raised.value.problems] == [("cluster.yaml", path, 1, message)]


def test_a_v1beta1_cohort_that_is_not_a_name_is_reported_at_the_field_it_was_read_from() -> None:
    text = "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: q}\nspec: {cohort: [a]}\n"
    with pytest.raises(InputError) as raised:
        parse_cluster([("cluster.yaml", text)])
    assert [(p.path, p.message) for p in raised.value.problems] == [
        ("spec.cohort", "ClusterQueue q: expected a name (a string), got a list")
    ]


def test_a_reference_by_name_is_read_as_the_name() -> None:
    spec = parse_cluster(
        [
            (
                "cluster.yaml",
                "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {name: c}\nspec: {parentName: root}\n"
                "---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: q}\n"
                "spec: {cohortName: c}\n",
            )
        ]
    )
    assert (spec.cohorts["c"].parent, spec.cluster_queues["q"].cohort) == ("root", "c")


def _asking(*requests: tuple[str, int]) -> WorkloadSpec:
    return WorkloadSpec("ns", "w", "q", (PodSetSpec("main", 2, requests), PodSetSpec("side", 1, (("cpu", 500),))))


@pytest.mark.parametrize(
    ("spec", "excluded", "want"),
    [
        (_asking(("nvidia.com/gpu", 4), ("memory", 1 << 30)), "cpu", (("nvidia.com/gpu", 4), ("memory", 1 << 30))),
        (_asking(("nvidia.com/gpu", 4), ("memory", 1 << 30)), "memory", (("nvidia.com/gpu", 4),)),
        (_asking(("nvidia.com/gpu", 4)), "example.com/", (("nvidia.com/gpu", 4),)),
    ],
)
def test_quota_counts_only_the_requests_kueue_does_not_exclude(spec: WorkloadSpec, excluded: str, want: object) -> None:
    counted = spec.counted(lambda resource: not resource.startswith(excluded))
    assert counted.pod_sets[0].requests == want
    assert counted.pod_sets[1].requests == ((), (("cpu", 500),))[excluded != "cpu"]
    # nothing excluded: the spec itself, no copy
    assert (counted is spec) == all(not r.startswith(excluded) for ps in spec.pod_sets for r, _ in ps.requests)
