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


# Each worker's copy (``explain.workers``): the worker's own objects, explained by the one-cluster code.
# Built with the explain tests' object factories; the e2e test asks the real workers of the federation.


def _worker(holder_gpus: int, copy: bool = True) -> list[dict[str, Any]]:
    from tests.explain import objects as o

    held = o.workload("alpha", "holder", pods=1, gpus=holder_gpus, queue="alpha", admitted_to="alpha")
    objs = [o.flavor(), o.cluster_queue("alpha", 4, reserved=holder_gpus), o.namespace("alpha"), held]
    objs.append(o.local_queue("alpha", "alpha"))
    if copy:
        short = holder_gpus  # 4 GPUs asked of 4, holder_gpus of them held
        objs.append(o.workload("alpha", "job-x", pods=1, gpus=4, queue="alpha", message=o.short(short)))
    return objs


@pytest.mark.parametrize(
    ("objects", "state", "reason", "text"),
    [
        (_worker(1), "Pending", "WaitsForQuota", "1 more"),
        (_worker(4), "Pending", "WaitsForQuota", "4 more"),
        (_worker(1, copy=False), "NoCopy", "NoCopy", "no copy of alpha/job-x on west"),
    ],
    ids=["one-short", "full", "no-copy"],
)
def test_each_workers_copy_is_explained_by_that_workers_state(
    objects: list[dict[str, Any]], state: str, reason: str, text: str
) -> None:
    from gpufleet.explain.workers import worker_copy

    found = worker_copy("west", objects, "alpha", "job-x", None).to_json()
    assert (found["cluster"], found["state"], found["verdict"]["reason"]) == ("west", state, reason)
    assert text in (found["kueue"]["message"] or "") + found["verdict"]["message"]


@pytest.mark.parametrize(
    ("reason", "ask"),
    [("DispatchedToWorker", False), ("AwaitingWorker", True), ("DispatchRetrying", True), (None, False)],
)
def test_the_workers_are_asked_only_while_none_holds_the_workload(reason: str | None, ask: bool) -> None:
    from gpufleet.explain.workers import worth_asking

    assert worth_asking(reason) is ask


@pytest.mark.parametrize(
    ("value", "message"), [("west", "expected CLUSTER=KUBECONFIG"), ("=x", "expected CLUSTER=KUBECONFIG")]
)
def test_a_malformed_worker_is_a_located_error(value: str, message: str) -> None:
    from typer.testing import CliRunner

    from gpufleet.cli import app

    result = CliRunner().invoke(app, ["why", "alpha/x", "--worker", value])
    assert result.exit_code == 2 and message in result.output and "--worker" in result.output, result.output
