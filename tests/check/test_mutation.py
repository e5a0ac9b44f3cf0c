"""What the mutating webhook fills in, and that check replays it in the API server's order."""

from __future__ import annotations

from typing import Any

import pytest

from gpufleet.check.facts import AdmissionFacts
from gpufleet.check.mutation import apply, patch


def job(labels: dict[str, str] | None, priority_class_name: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if priority_class_name:
        spec["priorityClassName"] = priority_class_name
    metadata: dict[str, Any] = {"name": "j"}
    if labels is not None:
        metadata["labels"] = labels
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": {"template": {"spec": spec}}}


@pytest.mark.parametrize(
    ("obj", "namespace", "labels_after"),
    [
        (job(None), "research", {"kueue.x-k8s.io/queue-name": "research", "kueue.x-k8s.io/priority-class": "dev"}),
        (
            job({"a": "b"}),
            "vision",
            {"a": "b", "kueue.x-k8s.io/queue-name": "vision", "kueue.x-k8s.io/priority-class": "dev"},
        ),
        (
            job({"kueue.x-k8s.io/queue-name": ""}),
            "nlp",
            {"kueue.x-k8s.io/queue-name": "nlp", "kueue.x-k8s.io/priority-class": "dev"},
        ),
        (job({}, priority_class_name="batch"), "nlp", {"kueue.x-k8s.io/queue-name": "nlp"}),
        (
            job({"kueue.x-k8s.io/queue-name": "other"}),
            "nlp",
            {"kueue.x-k8s.io/queue-name": "other", "kueue.x-k8s.io/priority-class": "dev"},
        ),
        (job({}), "default", {}),
        (job({}), "serving", {}),
    ],
    ids=[
        "no-labels",
        "other-labels-kept",
        "empty-queue",
        "pod-priority-kept",
        "wrong-queue-kept",
        "not-a-team",
        "serving",
    ],
)
def test_patch_fills_missing_queue_and_priority(
    facts: AdmissionFacts, obj: dict[str, Any], namespace: str, labels_after: dict[str, str]
) -> None:
    mutated = apply(obj, patch(facts, obj, namespace))
    assert mutated["metadata"].get("labels", {}) == labels_after


def test_the_default_priority_is_the_teams_least_urgent(facts: AdmissionFacts) -> None:
    research = facts.team_of("research")
    assert research is not None
    assert research.priority_classes == ("train-high", "batch", "dev")
    assert research.default_priority == "dev"


def test_apply_leaves_the_original_alone(facts: AdmissionFacts) -> None:
    obj = job(None)
    apply(obj, patch(facts, obj, "research"))
    assert "labels" not in obj["metadata"]
