"""Field-level changes between a live object and its dry-run result."""

from __future__ import annotations

from typing import Any

import pytest

from gpufleet.explain.diff import FieldChange, changes, object_change


def cq(reclaim: str = "Never", nominal: Any = "4", **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "alpha", **meta},
        "spec": {
            "preemption": {"reclaimWithinCohort": reclaim},
            "resourceGroups": [
                {"flavors": [{"name": "train", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": nominal}]}]}
            ],
        },
        "status": {"pendingWorkloads": 1},
    }


GPU_QUOTA = "spec.resourceGroups[0].flavors[train].resources[nvidia.com/gpu].nominalQuota"

CASES = [
    ("one-field", cq(), cq("Any"), [FieldChange("spec.preemption.reclaimWithinCohort", "Never", "Any")]),
    ("quantity-written-two-ways", cq(nominal="4"), cq(nominal=4), []),
    ("quantity-changed", cq(nominal="4"), cq(nominal=2), [FieldChange(GPU_QUOTA, "4", 2)]),
    (
        "bookkeeping-ignored",
        cq(resourceVersion="1", managedFields=[{"manager": "kubectl"}], generation=1),
        cq(resourceVersion="2", managedFields=[{"manager": "gpufleet"}], generation=2,
           annotations={"kubectl.kubernetes.io/last-applied-configuration": "{}"}),
        [],
    ),
    ("label-added", cq(), cq(labels={"gpufleet.io/team": "alpha"}), [FieldChange("metadata.labels", None, {"gpufleet.io/team": "alpha"})]),
]  # fmt: skip


@pytest.mark.parametrize(("case", "live", "applied", "expected"), CASES, ids=[c[0] for c in CASES])
def test_changes(case: str, live: dict[str, Any], applied: dict[str, Any], expected: list[FieldChange]) -> None:
    assert changes(live, applied) == expected


def test_a_named_list_item_added_reads_as_that_item() -> None:
    before = cq()
    after = cq()
    flavors = after["spec"]["resourceGroups"][0]["flavors"]
    flavors.insert(0, {"name": "spare", "resources": []})
    assert changes(before, after) == [
        FieldChange("spec.resourceGroups[0].flavors[spare]", None, {"name": "spare", "resources": []})
    ]


@pytest.mark.parametrize(
    ("live", "applied", "error", "action", "count"),
    [
        (None, cq(), None, "Create", 1),
        (cq(), cq("Any"), None, "Update", 1),
        (cq(), cq(), None, "Unchanged", 0),
        (cq(), None, "namespace wf is being terminated", "Refused", 0),
    ],
    ids=["create", "update", "unchanged", "refused"],
)
def test_object_change_actions(
    live: dict[str, Any] | None, applied: dict[str, Any] | None, error: str | None, action: str, count: int
) -> None:
    change = object_change("ClusterQueue", "alpha", None, live=live, applied=applied, error=error)
    assert (change.action, len(change.fields)) == (action, count)
    assert change.subject == "ClusterQueue alpha"
    if error:
        assert change.error == error
