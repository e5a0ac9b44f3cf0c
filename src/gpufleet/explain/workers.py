"""Why no worker admitted a MultiKueue Workload: each worker's copy, as that worker's Kueue sees it.

The manager's Workload says where copies were sent (``explain.dispatch``), not why a worker keeps its
copy waiting: that decision is the worker's own Kueue, on the worker's own quota. MultiKueue creates
each copy under the manager's namespace and name (Kueue v0.19.2 ``cloneForCreate``), so ``gpufleet
why`` on the manager, given the workers' live objects, explains each copy by that name with the same
one-cluster code (``explain.why``). Pure: the CLI lists each worker (``gpufleet.kube``) and hands the
objects in. The workers come from the command line, or from the manager itself, read as Kueue reads
them (``worker_sources``, below).
"""

from __future__ import annotations

import base64
import binascii
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


# Where a MultiKueue manager's Kueue finds its workers (Kueue v0.19.2): each MultiKueueCluster's
# ``spec.clusterSource.kubeConfig`` names a Secret (``locationType: Secret``, the default) in Kueue's
# own namespace (its Configuration's ``namespace``, default kueue-system), whose key ``kubeconfig``
# holds the worker's kubeconfig; ``locationType: Path`` is a file on Kueue's pod, and
# ``clusterProfileRef`` a ClusterProfile, neither of which gpufleet can read from outside.
KUEUE_NAMESPACE = "kueue-system"
SECRET_KEY = "kubeconfig"  # Kueue's MultiKueueConfigSecretKey


@dataclass(frozen=True)
class WorkerSource:
    """One worker as the manager declares it: the Secret holding its kubeconfig, or ``problem`` (why
    it cannot be read from here), and ``active``, what the manager's Kueue says of the connection."""

    cluster: str
    secret: str | None
    problem: str
    active: str


def kueue_namespace(configuration: Obj | None) -> str:
    """The namespace Kueue reads its MultiKueue Secrets from: its Configuration's ``namespace``."""
    found = (configuration or {}).get("namespace")
    return found if isinstance(found, str) and found else KUEUE_NAMESPACE


def _active(cluster: Obj) -> str:
    conditions = (cluster.get("status") or {}).get("conditions") or []
    active = next((c for c in conditions if c.get("type") == "Active"), None)
    if active is None:
        return "the manager's Kueue has not reported whether it is Active"
    if active.get("status") == "True":
        return "the manager's Kueue reports it Active"
    return f"the manager's Kueue reports it not Active ({active.get('reason', '')}: {active.get('message', '')})"


def worker_sources(clusters: Sequence[Obj]) -> list[WorkerSource]:
    """Each MultiKueueCluster's kubeconfig Secret (or why it has none), ordered by cluster name."""
    out = []
    for cluster in clusters:
        name = str((cluster.get("metadata") or {}).get("name", ""))
        source = (cluster.get("spec") or {}).get("clusterSource") or {}
        kubeconfig = source.get("kubeConfig") or {}
        secret, problem = None, ""
        if kubeconfig and kubeconfig.get("locationType", "Secret") == "Secret" and kubeconfig.get("location"):
            secret = str(kubeconfig["location"])
        elif kubeconfig:
            problem = (
                f"its kubeconfig is the file {kubeconfig.get('location')!r} on the manager's Kueue pod"
                f" (locationType {kubeconfig.get('locationType')}), which gpufleet cannot read: give --worker {name}=FILE"
            )
        elif source.get("clusterProfileRef"):
            ref = source["clusterProfileRef"].get("name")
            problem = (
                f"it is reached through ClusterProfile {ref}, which gpufleet does not read: give --worker {name}=FILE"
            )
        else:
            problem = "its MultiKueueCluster names no kubeconfig"
        out.append(WorkerSource(name, secret, problem, _active(cluster)))
    return sorted(out, key=lambda s: s.cluster)


def kubeconfig_text(secret: Obj | None, namespace: str, name: str) -> tuple[str | None, str]:
    """The kubeconfig a worker's Secret holds (Kueue's key), or None and what is wrong, in Kueue's terms."""
    if secret is None:
        return None, f"no Secret {namespace}/{name}, which its MultiKueueCluster names"
    encoded = (secret.get("data") or {}).get(SECRET_KEY)
    if not encoded:
        return None, f"key {SECRET_KEY!r} not found in Secret {namespace}/{name} (Kueue reads that key)"
    try:
        return base64.b64decode(encoded, validate=True).decode("utf-8"), ""
    except (binascii.Error, UnicodeDecodeError):
        return None, f"key {SECRET_KEY!r} of Secret {namespace}/{name} is not base64 of UTF-8 text"
