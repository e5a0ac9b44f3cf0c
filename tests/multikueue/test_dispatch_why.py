"""``gpufleet why`` on a MultiKueue manager: where the Workload's dispatch stands, read from its status
as Kueue v0.19.2 writes it (the e2e test reads it from the real manager)."""

from __future__ import annotations

from typing import Any

import pytest

from gpufleet.explain.dispatch import dispatch_of


def _workload(status: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "w"}, "status": status}


def _check(state: str, message: str) -> dict[str, Any]:
    return {"name": "multikueue-eu", "state": state, "message": message}


CASES = [
    (
        {"clusterName": "west", "admissionChecks": [_check("Ready", 'The workload was admitted on "west"')]},
        "DispatchedToWorker",
        "held by worker cluster west",
    ),
    (
        {"nominatedClusterNames": ["west", "east"], "admissionChecks": [_check("Pending", "")]},
        "AwaitingWorker",
        "copies wait on west, east",
    ),
    ({"admissionChecks": [_check("Retry", "Admitting remote lost")]}, "DispatchRetrying", "Admitting remote lost"),
    ({"admissionChecks": [_check("Pending", "")]}, "NotDispatched", "no worker holds it"),
]


@pytest.mark.parametrize(("status", "reason", "text"), CASES, ids=[c[1] for c in CASES])
def test_the_dispatch_is_read_from_the_workload(status: dict[str, Any], reason: str, text: str) -> None:
    found = dispatch_of(_workload(status))
    assert found is not None and found.reason == reason and text in found.text


def test_a_workload_without_multikueue_has_no_dispatch() -> None:
    assert dispatch_of(_workload({"admissionChecks": [{"name": "prov-req", "state": "Ready"}]})) is None
    assert dispatch_of(_workload({})) is None
