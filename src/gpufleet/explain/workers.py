"""Why no worker admitted a MultiKueue Workload: each worker's copy, as that worker's Kueue sees it.

The manager's Workload says where copies were sent (``explain.dispatch``), not why a worker keeps its
copy waiting: that decision is the worker's own Kueue, on the worker's own quota. MultiKueue creates
each copy under the manager's namespace and name (Kueue v0.19.2 ``cloneForCreate``), so ``gpufleet
why`` on the manager, given the workers' live objects, explains each copy by that name with the same
one-cluster code (``explain.why``). Pure: the CLI lists each worker (``gpufleet.kube``) and hands the
objects in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpufleet.errors import InputError
from gpufleet.explain.live import Obj, find_workload
from gpufleet.explain.why import explain


@dataclass(frozen=True)
class WorkerCopy:
    """One worker's account of its copy. ``state`` is the copy's (Pending, Admitted, ...), or
    ``NoCopy`` (none there: never sent, or removed once another worker admitted it) or
    ``Unreachable`` (the worker could not be listed; ``message`` says why)."""

    cluster: str
    state: str
    kueue_reason: str
    kueue_message: str
    reason: str  # gpufleet's verdict on the copy (PascalCase), as ``why`` gives on that worker
    message: str

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "state": self.state,
            "kueue": {"reason": self.kueue_reason or None, "message": self.kueue_message or None},
            "verdict": {"reason": self.reason, "message": self.message},
        }


def unreachable(cluster: str, message: str) -> WorkerCopy:
    return WorkerCopy(cluster, "Unreachable", "", "", "Unreachable", message)


def worker_copy(
    cluster: str, objects: Sequence[Obj], namespace: str, name: str, configuration: Obj | None
) -> WorkerCopy:
    """Worker ``cluster``'s copy of Workload ``namespace/name`` explained from its live ``objects``."""
    try:
        find_workload(objects, namespace, name)
    except InputError:
        message = (
            f"no copy of {namespace}/{name} on {cluster}: never sent there, or removed once another worker admitted it"
        )
        return WorkerCopy(cluster, "NoCopy", "", "", "NoCopy", message)
    why = explain(objects, namespace, name, configuration)
    return WorkerCopy(cluster, why.state, why.kueue_reason, why.kueue_message, why.reason, why.message)


def worth_asking(dispatch_reason: str | None) -> bool:
    """Whether the workers' copies say more than the manager: only while no worker holds the Workload
    (a dispatched one is held where ``clusterName`` says, and Kueue has removed the other copies)."""
    return dispatch_reason is not None and dispatch_reason != "DispatchedToWorker"
