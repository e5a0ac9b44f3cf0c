"""A waiting Workload's place in the replay's queue is Kueue's (``live.queue_order``): v0.19.2's
``Ordering.GetQueueOrderTimestamp`` with the default requeuing timestamp, Eviction.

On the testbed a preempted Workload, requeued after a younger one was created, was admitted before
it by the real Kueue; the replay, ordering by the ``Requeued`` condition, admitted the younger first.
The cluster is why-fleet.yaml's, its Workloads built as in ``test_live``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from gpufleet.forecast.live import live_state, queue_order
from gpufleet.policy import Fleet, load_policy, resolve
from tests.forecast.test_live import BIG, NOW, POLICY, stamp, workload

CREATED = 30  # minutes before NOW


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    return resolve(load_policy(POLICY))


def evicted(reason: str | None, status: str = "True", job: str = "old") -> dict[str, Any]:
    """wf-alpha's Workload created 30 min ago, evicted 20 min ago for ``reason`` and requeued 19 min ago
    (None: never evicted)."""
    wl = workload("wf-alpha", job, pods=1, gpus=4, created=CREATED)
    if reason is not None:
        wl["status"]["conditions"] += [
            {"type": "Evicted", "status": status, "reason": reason, "lastTransitionTime": stamp(20)},
            {"type": "Requeued", "status": "True", "reason": reason, "lastTransitionTime": stamp(19)},
        ]
    return wl


@pytest.mark.parametrize(
    ("reason", "status", "minutes_ago"),
    [
        (None, "True", CREATED),  # never evicted: its creation
        ("Preempted", "True", CREATED),  # preempted: it keeps its creation's place
        ("PodsReadyTimeout", "True", 20),  # its pods not ready in time: from the eviction
        ("AdmissionCheck", "True", 20),  # an admission check evicted it: from the eviction
        ("PodsReadyTimeout", "False", CREATED),  # no longer evicted: its creation
    ],
)
def test_the_queue_order_is_kueues(reason: str | None, status: str, minutes_ago: int) -> None:
    assert queue_order(evicted(reason, status), NOW - timedelta(minutes=CREATED)) == NOW - timedelta(
        minutes=minutes_ago
    )


@pytest.mark.parametrize(("reason", "first"), [("Preempted", "wf-alpha/old"), ("PodsReadyTimeout", "wf-alpha/young")])
def test_a_preempted_workload_waits_ahead_of_a_younger_one(fleet: Fleet, reason: str, first: str) -> None:
    """Both wait behind big; young was created 25 min ago, between old's creation and its eviction."""
    young = workload("wf-alpha", "young", pods=1, gpus=4, created=25)
    state = live_state([BIG, evicted(reason), young], fleet, NOW)
    waiting = sorted((w for w in state.workloads if not w.holding), key=lambda w: w.order_s)
    assert waiting[0].key == first
    old = next(w for w in waiting if w.key == "wf-alpha/old")
    assert old.since == NOW - timedelta(minutes=19)  # its wait is still counted from its requeue
