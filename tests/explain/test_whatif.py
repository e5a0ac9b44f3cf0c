"""``what_if`` on hand-worked clusters: the live objects, the policy's replacements, and what changes."""

from __future__ import annotations

from typing import Any

import pytest

from gpufleet.explain.whatif import merged_configuration, merged_objects, what_if
from tests.explain.objects import cluster_queue, short, team_setup, workload

CONFIG_API = "config.kueue.x-k8s.io/v1beta2"


def live() -> list[dict[str, Any]]:
    """beta borrows 2 of alpha's GPUs; alpha's 4- and 3-GPU Workloads wait (2 free); nobody preempts."""
    return [
        *team_setup(cluster_queue("alpha", 4, borrowing_limit=0), cluster_queue("beta", 4, borrowing_limit=4)),
        workload("beta", "big", pods=3, gpus=2, admitted_to="beta", created="2026-12-01T09:00:00Z"),
        workload("alpha", "wait", pods=1, gpus=4, message=short(2)),
        workload("alpha", "small", pods=1, gpus=3, message=short(1), created="2026-12-01T11:00:00Z"),
    ]


CASES = [
    # alpha may now reclaim: beta's borrower goes, alpha's 4-GPU Workload gets in; the 3-GPU one would
    # take alpha past its nominal 4 (no borrowing) and beta's 6 find only 4 free: both wait
    (
        "reclaim",
        [cluster_queue("alpha", 4, borrowing_limit=0, reclaim="Any")],
        {
            "admitted": ["alpha/wait"],
            "preempted": [("beta/big", "InCohortReclamation")],
            "inadmissible": [],
            "pending": 2,
        },
    ),
    # alpha's quota cut to 3 with no borrowing: the 4-GPU Workload can never fit; the 3-GPU one finds 1 free
    (
        "quota-cut",
        [cluster_queue("alpha", 3, borrowing_limit=0)],
        {"admitted": [], "preempted": [], "inadmissible": [("alpha/wait", "ExceedsMaxQuota")], "pending": 1},
    ),
    # more quota for alpha: 10 GPUs in the cohort, 4 free after beta's 6, enough for the 4-GPU one only
    (
        "quota-raised",
        [cluster_queue("alpha", 6, borrowing_limit=0)],
        {"admitted": ["alpha/wait"], "preempted": [], "inadmissible": [], "pending": 1},
    ),
    # the policy names the same objects as they are: nothing changes, and nothing is admitted
    (
        "same",
        [cluster_queue("alpha", 4, borrowing_limit=0)],
        {"admitted": [], "preempted": [], "inadmissible": [], "pending": 2},
    ),
]


@pytest.mark.parametrize(("case", "replacements", "expected"), CASES, ids=[c[0] for c in CASES])
def test_what_if_on_hand_worked_changes(
    case: str, replacements: list[dict[str, Any]], expected: dict[str, Any]
) -> None:
    result = what_if(live(), None, replacements, None)
    assert [c.workload for c in result.admitted] == expected["admitted"]
    assert [(c.workload, c.reason) for c in result.preempted] == expected["preempted"]
    assert [(c.workload, c.reason) for c in result.inadmissible] == expected["inadmissible"]
    assert result.still_pending == expected["pending"]
    assert not any(c.before for c in (*result.admitted, *result.preempted, *result.inadmissible))


def test_merged_objects_replace_by_kind_and_name_and_keep_the_rest() -> None:
    objects = live()
    new_cq = cluster_queue("alpha", 2)
    new_flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "other"}}
    merged = merged_objects(objects, [new_cq, new_flavor])
    assert len(merged) == len(objects) + 1
    alpha = [o for o in merged if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == "alpha"]
    assert alpha == [new_cq]
    assert merged[-1] == new_flavor
    assert [o for o in merged if o["kind"] == "Workload"] == [o for o in objects if o["kind"] == "Workload"]


@pytest.mark.parametrize(
    ("live_config", "rendered", "expected"),
    [
        (None, None, None),
        (
            {"kind": "Configuration", "namespace": "kueue-system"},
            None,
            {"kind": "Configuration", "namespace": "kueue-system"},
        ),
        (
            {"kind": "Configuration", "namespace": "kueue-system", "fairSharing": {}},
            {"apiVersion": CONFIG_API, "kind": "Configuration", "resources": {"excludeResourcePrefixes": ["cpu"]}},
            {"kind": "Configuration", "namespace": "kueue-system", "resources": {"excludeResourcePrefixes": ["cpu"]}},
        ),
        (
            None,
            {"apiVersion": CONFIG_API, "kind": "Configuration", "fairSharing": {"preemptionStrategies": []}},
            {"apiVersion": CONFIG_API, "kind": "Configuration", "fairSharing": {"preemptionStrategies": []}},
        ),
    ],
    ids=["none", "live-only", "policy-fields-replace", "policy-only"],
)
def test_the_policy_configuration_fields_are_merged_into_kueues(
    live_config: dict[str, Any] | None, rendered: dict[str, Any] | None, expected: dict[str, Any] | None
) -> None:
    assert merged_configuration(live_config, rendered) == expected


def test_what_kueue_would_do_anyway_is_marked() -> None:
    """2 GPUs are free now: beta's 2-GPU Workload, not admitted yet, gets in with or without the policy
    (with it, once alpha's reclamation has evicted beta's borrower)."""
    objects = [*live(), workload("beta", "two", pods=1, gpus=2, created="2026-12-01T12:00:00Z")]
    result = what_if(objects, None, [cluster_queue("alpha", 4, borrowing_limit=0, reclaim="Any")], None)
    marks = {c.workload: c.before for c in result.admitted}
    assert marks == {"alpha/wait": False, "beta/two": True}
