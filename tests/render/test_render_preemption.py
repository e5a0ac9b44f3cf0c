"""The policy's preemption settings in each ClusterQueue's ``spec.preemption``, checked against Kueue's CRD."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from gpufleet.policy import parse_policy, resolve
from gpufleet.render import Bundle, render
from gpufleet.render.check import check_bundle
from gpufleet.render.kueue import go_duration
from tests.support import EXAMPLES, kueue_crds

Obj = dict[str, Any]


def fleet_with(queueing: str, research: str = "", *, fair: bool = True) -> Bundle:
    """The example with lines added to its queueing section and a preemption block for team research.
    borrowWithinCohort is classical preemption's, so the cases that set it turn fair sharing off."""
    text = (EXAMPLES / "fleet.yaml").read_text()
    assert "queueing:\n  cohort: gpufleet\n  fairSharing: true\n" in text, "the example has a queueing section"
    if not fair:
        text = text.replace("  fairSharing: true\n", "  fairSharing: false\n", 1)
    if research:
        anchor = "    namespaces: [research]\n"
        assert anchor in text
        text = text.replace(anchor, f"{anchor}    preemption: {research}\n", 1)
    return render(resolve(parse_policy(text.replace("queueing:\n", f"queueing:\n{queueing}", 1), "fleet.yaml")))


def cluster_queues(bundle: Bundle) -> dict[str, Obj]:
    return {o["metadata"]["name"]: o for o in bundle.objects() if o["kind"] == "ClusterQueue"}


# (id, lines added to the example's queueing section, every ClusterQueue's spec.preemption)
CASES = [
    ("default", "", {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
    (
        "never-is-kueues-default",
        "  borrowWithinCohort: {policy: Never}\n",
        {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
    ),
    (
        "lower",
        "  borrowWithinCohort: {policy: LowerPriority}\n",
        {
            "withinClusterQueue": "LowerPriority",
            "reclaimWithinCohort": "Any",
            "borrowWithinCohort": {"policy": "LowerPriority"},
        },
    ),
    (
        "threshold",
        "  reclaimWithinCohort: LowerPriority\n"
        "  borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 100}\n",
        {
            "withinClusterQueue": "LowerPriority",
            "reclaimWithinCohort": "LowerPriority",
            "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100},
        },
    ),
]


@pytest.mark.parametrize(("queueing", "preemption"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_every_cluster_queue_carries_the_fleets_preemption(queueing: str, preemption: Obj) -> None:
    bundle = fleet_with(queueing, fair="policy: LowerPriority" not in queueing)
    queues = cluster_queues(bundle)
    assert sorted(queues) == ["nlp", "research", "vision"]
    assert {name: q["spec"]["preemption"] for name, q in queues.items()} == dict.fromkeys(queues, preemption)
    report = check_bundle(bundle, kubernetes="1.34", crds=kueue_crds())
    assert report.checked > 0 and report.findings == []


def test_the_pair_the_policy_refuses_is_the_pair_kueues_crd_refuses() -> None:
    """``reclaimWithinCohort: Never`` with ``borrowWithinCohort: LowerPriority`` is refused by the policy
    check; the same pair written into a rendered ClusterQueue fails Kueue's own CEL rule."""
    bundle = fleet_with("  borrowWithinCohort: {policy: LowerPriority}\n", fair=False)
    queue = cluster_queues(bundle)["nlp"]
    queue["spec"]["preemption"]["reclaimWithinCohort"] = "Never"
    report = check_bundle(bundle, kubernetes="1.34", crds=kueue_crds())
    assert [f for f in report.findings if "reclaimWithinCohort=Never and borrowWithinCohort" in str(f)], report.findings


FLEETS = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}

# (id, team research's preemption block, the fleet's queueing lines, research's spec.preemption)
TEAM_CASES = [
    ("within", "{withinClusterQueue: Never}", "", {**FLEETS, "withinClusterQueue": "Never"}),
    ("reclaim", "{reclaimWithinCohort: LowerPriority}", "", {**FLEETS, "reclaimWithinCohort": "LowerPriority"}),
    (
        "borrow",
        "{borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 100}}",
        "",
        {**FLEETS, "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100}},
    ),
    (
        "all-three",
        "{withinClusterQueue: LowerOrNewerEqualPriority, reclaimWithinCohort: Never, borrowWithinCohort: {policy: Never}}",
        "  borrowWithinCohort: {policy: LowerPriority}\n",
        {"withinClusterQueue": "LowerOrNewerEqualPriority", "reclaimWithinCohort": "Never"},
    ),
]


@pytest.mark.parametrize(
    ("research", "queueing", "preemption"), [c[1:] for c in TEAM_CASES], ids=[c[0] for c in TEAM_CASES]
)
def test_a_teams_preemption_changes_its_cluster_queue_only(research: str, queueing: str, preemption: Obj) -> None:
    fleets = dict(FLEETS)
    if "borrowWithinCohort: {policy: LowerPriority}" in queueing:
        fleets["borrowWithinCohort"] = {"policy": "LowerPriority"}
    fair = "policy: LowerPriority" not in queueing + research
    plain = cluster_queues(fleet_with(queueing, fair=fair))
    bundle = fleet_with(queueing, research, fair=fair)
    queues = cluster_queues(bundle)
    assert queues["research"]["spec"]["preemption"] == preemption
    for other in ("nlp", "vision"):
        assert queues[other] == plain[other]  # byte for byte what the fleet alone renders
        assert queues[other]["spec"]["preemption"] == fleets
    report = check_bundle(bundle, kubernetes="1.34", crds=kueue_crds())
    assert report.checked > 0 and report.findings == []


@pytest.mark.parametrize(
    ("queueing", "expected"),
    [
        ("", None),  # Kueue's own 30 minutes: the Configuration is what it always was
        ("  waitForPodsReady: {timeoutSeconds: 600}\n", {"timeout": "10m"}),
        ("  waitForPodsReady: {timeoutSeconds: 5430}\n", {"timeout": "1h30m30s"}),
        ("  waitForPodsReady: {timeoutSeconds: 45}\n", {"timeout": "45s"}),
    ],
    ids=["unset", "ten-minutes", "mixed-units", "seconds"],
)
def test_the_pods_ready_timeout_is_rendered_into_kueues_configuration(queueing: str, expected: Obj | None) -> None:
    config = yaml.safe_load(fleet_with(queueing).contents()["kueue-configuration.yaml"])
    assert config.get("waitForPodsReady") == expected
    assert config["apiVersion"] == "config.kueue.x-k8s.io/v1beta2" and config["kind"] == "Configuration"


@pytest.mark.parametrize(
    ("seconds", "text"), [(1, "1s"), (60, "1m"), (61, "1m1s"), (3600, "1h"), (90000, "25h")], ids=str
)
def test_go_duration_text(seconds: int, text: str) -> None:
    assert go_duration(seconds) == text
