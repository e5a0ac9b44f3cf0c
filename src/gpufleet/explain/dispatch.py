"""Where MultiKueue put a Workload: the worker cluster that holds it, and what the manager knows of the rest.

On a MultiKueue manager a Workload carries its dispatch in its own status: ``clusterName`` (the worker
whose copy was admitted; the manager then removes the other copies), ``nominatedClusterNames`` (the
workers holding a copy while none has admitted it; mutually exclusive with ``clusterName``) and the
MultiKueue admission check's state and message (Kueue's words: "The workload was admitted on ...",
"Admitting remote lost", ...). Read from the Workload alone, so ``gpufleet why`` answers on the
manager without reaching the workers.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpufleet.explain.live import Obj

PREFIX = "multikueue"  # gpufleet names the zone's check multikueue-<zone> (render.multikueue)


@dataclass(frozen=True)
class Dispatch:
    check: str
    state: str  # Pending, Ready, Retry, Rejected (Kueue's CheckState)
    message: str
    cluster: str | None  # the worker that holds it
    nominated: tuple[str, ...]  # the workers holding a copy while none has admitted it

    @property
    def reason(self) -> str:
        """A PascalCase summary: where the Workload stands in the dispatch."""
        if self.cluster:
            return "DispatchedToWorker"
        if self.state == "Retry":
            return "DispatchRetrying"
        return "AwaitingWorker" if self.nominated else "NotDispatched"

    @property
    def text(self) -> str:
        where = (
            f"held by worker cluster {self.cluster}; the other clusters' copies are removed once one admits"
            if self.cluster
            else (
                f"copies wait on {', '.join(self.nominated)}; none has admitted it yet"
                if self.nominated
                else "no worker holds it"
            )
        )
        return f"{where} (admission check {self.check} {self.state}: {self.message or 'no message'})"


def dispatch_of(workload: Obj) -> Dispatch | None:
    """The MultiKueue dispatch of ``workload``, or None where no MultiKueue check applies to it."""
    status = workload.get("status") or {}
    checks = [c for c in status.get("admissionChecks") or [] if str(c.get("name", "")).startswith(PREFIX)]
    cluster = status.get("clusterName")
    nominated = tuple(str(n) for n in status.get("nominatedClusterNames") or [])
    if not checks and not cluster and not nominated:
        return None
    check = checks[0] if checks else {}
    return Dispatch(
        check=str(check.get("name", "")),
        state=str(check.get("state", "")),
        message=str(check.get("message", "")),
        cluster=str(cluster) if cluster else None,
        nominated=nominated,
    )
