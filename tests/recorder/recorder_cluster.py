"""Plays Kueue, the Job controller and the scheduler against the API test double, over HTTP.

Each method is one API write with the shape the real controllers produce (Kueue ``v1beta2``
Workload conditions, Pods owned by the Job, nodes labelled with their GPU product), and the
driver remembers which admissions it made, so a test can compare the ledger with the truth.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx2

WL = "/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads"
JOBS = "/apis/batch/v1/namespaces/{ns}/jobs"
PODS = "/api/v1/namespaces/{ns}/pods"
NODES = "/api/v1/nodes"
MERGE = {"Content-Type": "application/merge-patch+json"}
PENDING = [
    (
        "WaitingForQuota",
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu"
        " in flavor h100-train, {n} more needed",
    ),
    (
        "ExceedsMaxQuota",
        "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in"
        " flavor h100-train, previously considered podsets requests (0) + current podset request ({n}) >"
        " maximum capacity (16)",
    ),
    ("WaitingForPreemptedWorkloads", "Pending the preemption of 1 workload(s)"),
]


def stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Workload:
    ns: str
    name: str
    team: str
    gpus: int
    uid: str = ""
    job_uid: str = ""
    conditions: dict[str, dict[str, Any]] = field(default_factory=dict)
    attempts: int = 0
    pods: list[str] = field(default_factory=list)
    done: bool = False


class FakeKueue:
    """The cluster side of a test: every call is one transition seen by the recorder's watches."""

    def __init__(self, http: httpx2.AsyncClient, seed: int = 7) -> None:
        self.http = http
        self.rng = random.Random(seed)
        self.clock = datetime(2026, 11, 2, 8, 0, tzinfo=UTC)
        self.transitions = 0
        self.expected: dict[tuple[str, int], str] = {}  # (workload uid, attempt) -> how it ended
        self.nodes = [f"h100-train-{i}" for i in range(4)]
        self.live: list[Workload] = []
        self.count = 0

    def tick(self) -> datetime:
        self.clock += timedelta(seconds=self.rng.randint(1, 90))
        return self.clock

    async def _send(self, method: str, url: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        headers = MERGE if method == "PATCH" else None
        response = await self.http.request(method, url, json=body, headers=headers)
        response.raise_for_status()
        self.transitions += 1
        data: dict[str, Any] = response.json()
        return data

    async def add_nodes(self) -> None:
        for node in self.nodes:
            labels = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
            await self._send(
                "POST",
                NODES,
                {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "labels": labels}},
            )

    async def submit(self, wl: Workload) -> None:
        labels = {
            "gpufleet.io/team": wl.team,
            "gpufleet.io/model": "llama-3.1-8b",
            "gpufleet.io/data-class": "internal",
            "kueue.x-k8s.io/queue-name": "training",
        }
        job = await self._send(
            "POST",
            JOBS.format(ns=wl.ns),
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": wl.name,
                    "namespace": wl.ns,
                    "labels": labels,
                    "creationTimestamp": stamp(self.tick()),
                    "annotations": {"gpufleet.io/checkpoint": f"s3://eu-central-1/{wl.name}"},
                },
                "spec": {
                    "suspend": True,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "c",
                                    "image": "trainer",
                                    "resources": {"limits": {"nvidia.com/gpu": str(wl.gpus)}},
                                }
                            ],
                        }
                    },
                },
            },
        )
        wl.job_uid = job["metadata"]["uid"]
        created = await self._send(
            "POST",
            WL.format(ns=wl.ns),
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "Workload",
                "metadata": {
                    "name": f"job-{wl.name}",
                    "namespace": wl.ns,
                    "creationTimestamp": stamp(self.clock),
                    "ownerReferences": [
                        {
                            "apiVersion": "batch/v1",
                            "kind": "Job",
                            "name": wl.name,
                            "uid": wl.job_uid,
                            "controller": True,
                        }
                    ],
                },
                "spec": {
                    "queueName": "training",
                    "priority": 100,
                    "podSets": [
                        {
                            "name": "main",
                            "count": 1,
                            "template": {
                                "spec": {
                                    "containers": [
                                        {
                                            "name": "c",
                                            "resources": {"requests": {"nvidia.com/gpu": str(wl.gpus)}},
                                        }
                                    ]
                                }
                            },
                        }
                    ],
                },
            },
        )
        wl.uid = created["metadata"]["uid"]

    async def _conditions(self, wl: Workload, extra: dict[str, Any] | None = None) -> None:
        status: dict[str, Any] = {"conditions": list(wl.conditions.values())}
        status.update(extra or {})
        await self._send("PATCH", f"{WL.format(ns=wl.ns)}/job-{wl.name}", {"status": status})

    def _set(self, wl: Workload, kind: str, status: bool, reason: str, message: str = "") -> None:
        old = wl.conditions.get(kind)
        text = "True" if status else "False"
        moved = old is None or old["status"] != text
        when = stamp(self.tick()) if moved else old["lastTransitionTime"]  # type: ignore[index]
        wl.conditions[kind] = {
            "type": kind,
            "status": text,
            "reason": reason,
            "message": message,
            "lastTransitionTime": when,
        }

    async def pend(self, wl: Workload) -> None:
        reason, message = self.rng.choice(PENDING)
        self._set(wl, "QuotaReserved", False, reason, message.format(n=wl.gpus))
        await self._conditions(wl)

    async def admit(self, wl: Workload) -> None:
        self._set(wl, "QuotaReserved", True, "QuotaReserved", "Quota reserved in ClusterQueue research")
        self._set(wl, "Admitted", True, "Admitted", "The workload is admitted")
        wl.conditions.pop("Evicted", None)
        wl.conditions.pop("Preempted", None)
        wl.attempts += 1
        self.expected[(wl.uid, wl.attempts)] = "open"
        admission = {
            "clusterQueue": wl.team,
            "podSetAssignments": [
                {
                    "name": "main",
                    "count": 1,
                    "flavors": {"nvidia.com/gpu": "h100-train"},
                    "resourceUsage": {"nvidia.com/gpu": str(wl.gpus)},
                }
            ],
        }
        await self._conditions(wl, {"admission": admission})

    async def run_pod(self, wl: Workload) -> None:
        name = f"{wl.name}-{wl.attempts}"
        node = self.rng.choice(self.nodes)
        await self._send(
            "POST",
            PODS.format(ns=wl.ns),
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": name,
                    "namespace": wl.ns,
                    "creationTimestamp": stamp(self.tick()),
                    "ownerReferences": [
                        {
                            "apiVersion": "batch/v1",
                            "kind": "Job",
                            "name": wl.name,
                            "uid": wl.job_uid,
                            "controller": True,
                        }
                    ],
                },
                "spec": {
                    "nodeName": node,
                    "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": str(wl.gpus)}}}],
                },
                "status": {"phase": "Running", "startTime": stamp(self.tick())},
            },
        )
        wl.pods.append(name)

    async def preempt(self, wl: Workload) -> None:
        self._set(
            wl,
            "Evicted",
            True,
            "Preempted",
            "Preempted to accommodate a workload (UID: x) due to reclamation within the cohort",
        )
        self._set(wl, "Preempted", True, "InCohortReclamation", "reclaimed")
        self._set(wl, "QuotaReserved", False, "Pending", "Preempted")
        wl.conditions["Admitted"] = {**wl.conditions["Admitted"], "status": "False"}
        self.expected[(wl.uid, wl.attempts)] = "Preempted"
        evictions = [{"reason": "Preempted", "underlyingCause": "InCohortReclamation", "count": wl.attempts}]
        await self._conditions(wl, {"admission": None, "schedulingStats": {"evictions": evictions}})
        for pod in wl.pods:
            await self._send("DELETE", f"{PODS.format(ns=wl.ns)}/{pod}")
        wl.pods.clear()

    async def finish(self, wl: Workload, failed: bool) -> None:
        self._set(wl, "Finished", True, "Failed" if failed else "Succeeded", "Job finished")
        self.expected[(wl.uid, wl.attempts)] = "Failed" if failed else "Finished"
        wl.done = True
        await self._conditions(wl)

    async def scenario(self, transitions: int) -> None:
        """Random lifecycles (pending, admitted, preempted and readmitted, finished) up to ``transitions``."""
        if not self.transitions:
            await self.add_nodes()
        live = self.live
        while self.transitions < transitions:
            if len(live) < 12 and (not live or self.rng.random() < 0.3):
                self.count += 1
                n = self.count
                wl = Workload(f"team-{n % 3}", f"train-{n}", f"team-{n % 3}", self.rng.choice([1, 2, 4, 8]))
                await self.submit(wl)
                await self.pend(wl)
                live.append(wl)
                continue
            wl = self.rng.choice(live)
            reserved = wl.conditions.get("QuotaReserved", {}).get("status") == "True"
            roll = self.rng.random()
            if not reserved:
                await (self.pend(wl) if roll < 0.3 else self.admit(wl))
            elif not wl.pods:
                await self.run_pod(wl)
            elif roll < 0.25:
                await self.preempt(wl)
            else:
                await self.finish(wl, failed=roll > 0.9)
                live.remove(wl)
