"""The differential test's two readers: Kueue's verdicts from the live Workloads, the twin's from its report.

Both are reduced to the same :class:`Verdicts`, keyed by the owning Job's name (Kueue names a Job's
Workload ``job-<name>-<hash>``), so a disagreement reads as "Job x: real … / twin …".
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufleet.twin.resources import parse_quantity

KUEUE_API = "kueue.x-k8s.io/v1beta2"
RESOURCE = "nvidia.com/gpu"
EXPORTED = ",".join(
    f"{kind}.kueue.x-k8s.io"
    for kind in ("resourceflavors", "cohorts", "clusterqueues", "localqueues", "workloadpriorityclasses", "workloads")
)
QUIET_S = 4.0  # Kueue has settled when nothing changed for this long and no eviction is in flight
SETTLE_TIMEOUT_S = 120.0

Placement = tuple[str, tuple[tuple[str, str, str], ...]]  # ClusterQueue, sorted (pod set, resource, flavor)


@dataclass
class Verdicts:
    admitted: dict[str, Placement] = field(default_factory=dict)
    preempted: dict[str, str] = field(default_factory=dict)  # Job -> Kueue's Preempted reason
    pending: dict[str, str] = field(default_factory=dict)  # Job -> Kueue's QuotaReserved message
    reasons: dict[str, str] = field(default_factory=dict)  # Job -> the pending reason Kueue writes (twin: kueueReason)
    known: set[str] = field(default_factory=set)
    busy: list[str] = field(default_factory=list)  # why Kueue is still moving
    own: set[str] = field(default_factory=set)  # pending Jobs whose message the twin marks its own (kueueWrites false)
    written: dict[str, str] = field(default_factory=dict)  # own-marked Jobs -> the message Kueue's condition keeps

    def key(self) -> tuple[Any, ...]:
        return (sorted(self.admitted.items()), sorted(self.preempted.items()), sorted(self.pending.items()))

    def describe(self) -> str:
        admitted = ", ".join(
            f"{j}→{cq}/{'+'.join(sorted({f for _, _, f in fl}))}" for j, (cq, fl) in sorted(self.admitted.items())
        )
        preempted = ", ".join(f"{j} ({r})" for j, r in sorted(self.preempted.items()))
        pending = "; ".join(f"{j} [{self.reasons.get(j, '')}] {m}" for j, m in sorted(self.pending.items()))
        return f"admitted {{{admitted}}} preempted {{{preempted}}} pending {{{pending}}}"


def job_of(workload: dict[str, Any]) -> str:
    owners = [o["name"] for o in workload["metadata"].get("ownerReferences", []) if o.get("kind") == "Job"]
    return owners[0] if owners else str(workload["metadata"]["name"])


def placement(admission: dict[str, Any]) -> Placement:
    flavors = tuple(
        sorted(
            (str(ps["name"]), str(resource), str(flavor))
            for ps in admission.get("podSetAssignments", [])
            for resource, flavor in (ps.get("flavors") or {}).items()
        )
    )
    return str(admission["clusterQueue"]), flavors


def _conditions(workload: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in workload.get("status", {}).get("conditions", [])}


def real_verdicts(cluster: Any, namespace: str) -> Verdicts:
    return verdicts_of(cluster.get("workloads.kueue.x-k8s.io", f"--namespace={namespace}")["items"])


def verdicts_of(workloads: list[dict[str, Any]], *, unjudged_busy: bool = True) -> Verdicts:
    """Kueue's verdicts read from live Workload objects (their conditions and ``status.admission``).

    ``unjudged_busy=False``: a Workload without a QuotaReserved condition is not a sign of motion, for
    a Workload behind a StrictFIFO head that never fits is never judged at all (the quiet window
    still covers one that is merely new).
    """
    out = Verdicts()
    for wl in workloads:
        job, conds = job_of(wl), _conditions(wl)
        out.known.add(job)
        reserved, evicted, preempted = conds.get("QuotaReserved"), conds.get("Evicted"), conds.get("Preempted")
        if preempted is not None and preempted["status"] == "True":
            out.preempted[job] = str(preempted["reason"])
        admission = wl.get("status", {}).get("admission")
        if reserved is not None and reserved["status"] == "True" and admission:
            out.admitted[job] = placement(admission)
            if evicted is not None and evicted["status"] == "True":
                out.busy.append(f"{job} evicted but still holds quota")
        else:
            message = str((reserved or {}).get("message", ""))
            out.pending[job] = message
            out.reasons[job] = str((reserved or {}).get("reason", ""))
            if (reserved is None and unjudged_busy) or message.startswith("Pending the preemption"):
                out.busy.append(f"{job} not yet judged or waiting for its victims")
    return out


def settled(cluster: Any, namespace: str) -> Verdicts:
    """Poll until Kueue's verdicts stay the same for QUIET_S seconds with nothing in flight."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    last: Verdicts | None = None
    since = time.monotonic()
    while time.monotonic() < deadline:
        now = real_verdicts(cluster, namespace)
        if last is None or now.key() != last.key() or now.busy:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= QUIET_S:
            return now
        time.sleep(0.5)
    pytest.fail(f"Kueue did not settle within {SETTLE_TIMEOUT_S:.0f}s; last: {last.describe() if last else None}")


def twin_verdicts(report: dict[str, Any], listing: Path, namespace: str | frozenset[str]) -> Verdicts:
    """The twin's final state: the export's admissions, then every cycle's admissions and preemptions.

    ``namespace`` may be a set: a random scenario keeps its Jobs in two namespaces with distinct names.
    """
    namespaces = frozenset({namespace}) if isinstance(namespace, str) else namespace
    items = yaml.safe_load(listing.read_text(encoding="utf-8"))["items"]
    workloads = {
        f"{wl['metadata']['namespace']}/{wl['metadata']['name']}": wl
        for wl in items
        if wl["kind"] == "Workload" and wl["metadata"].get("namespace") in namespaces
    }
    jobs = {key: job_of(wl) for key, wl in workloads.items()}
    out = Verdicts(known=set(jobs.values()))
    for key, wl in workloads.items():
        if wl.get("status", {}).get("admission"):
            out.admitted[jobs[key]] = placement(wl["status"]["admission"])
        preempted = _conditions(wl).get("Preempted")
        if preempted is not None and preempted["status"] == "True":  # evicted before the export, still so
            out.preempted[jobs[key]] = str(preempted["reason"])
    for cycle in report["cycles"]:
        for row in cycle["preempted"]:
            if row["workload"] in jobs:
                out.admitted.pop(jobs[row["workload"]], None)
                out.preempted[jobs[row["workload"]]] = row["reason"]
        for row in cycle["admitted"]:
            if row["workload"] in jobs:
                flavors = tuple(
                    sorted(
                        (ps, res, fl) for ps, by_resource in row["flavors"].items() for res, fl in by_resource.items()
                    )
                )
                out.admitted[jobs[row["workload"]]] = (row["clusterQueue"], flavors)
                out.preempted.pop(jobs[row["workload"]], None)  # Kueue resets Preempted on a new reservation
    for row in report["cycles"][-1]["pending"] if report["cycles"] else []:
        if row["workload"] in jobs:
            out.pending[jobs[row["workload"]]] = row["message"]
            out.reasons[jobs[row["workload"]]] = row.get("kueueReason", row["reason"])  # what Kueue writes
            if not row.get("kueueWrites", True):
                out.own.add(jobs[row["workload"]])
                if "kueueStatus" in row:
                    out.written[jobs[row["workload"]]] = row["kueueStatus"]["message"]
    return out


def _nonzero(table: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in table.items() if v}


def real_usage(cluster: Any, cluster_queues: list[str]) -> dict[str, dict[str, dict[str, int]]]:
    """Each ClusterQueue's reserved and borrowed quota, from its status, as ``flavor/resource`` → integer."""
    return usage_of({name: cluster.get("clusterqueues.kueue.x-k8s.io", name) for name in cluster_queues})


def usage_of(cluster_queues: dict[str, dict[str, Any]]) -> dict[str, dict[str, dict[str, int]]]:
    """``real_usage`` from ClusterQueue objects already read, by name. Quantities in Kueue's units."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for name, obj in cluster_queues.items():
        status = obj.get("status", {})
        usage: dict[str, int] = {}
        borrowed: dict[str, int] = {}
        for flavor in status.get("flavorsReservation", []):
            for res in flavor["resources"]:
                usage[f"{flavor['name']}/{res['name']}"] = parse_quantity(res.get("total", 0), res["name"])
                borrowed[f"{flavor['name']}/{res['name']}"] = parse_quantity(res.get("borrowed", 0), res["name"])
        out[name] = {"usage": _nonzero(usage), "borrowed": _nonzero(borrowed)}
    return out


def twin_usage(report: dict[str, Any], cluster_queues: list[str]) -> dict[str, dict[str, dict[str, int]]]:
    cqs = report["clusterQueues"]
    return {
        name: {"usage": _nonzero(cqs[name]["usage"]), "borrowed": _nonzero(cqs[name]["borrowed"])}
        for name in cluster_queues
    }
