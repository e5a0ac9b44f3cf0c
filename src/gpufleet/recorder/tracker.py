"""The recorder's memory: what it has seen of Jobs, Pods and Nodes, and what the ledger holds per workload.

Events come from four independent watch streams, in no common order. The tracker joins them:
a Pod reaches its workload through the Job that owns both; labels missing on a Workload come
from its Job; a node's GPU model from its ``nvidia.com/gpu.product`` label. What the ledger
already holds for a workload is read from the ledger the first time that workload is touched,
so after a restart the tracker continues exactly where the committed records left off.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from gpufleet.ledger.records import Allocation, Record, WaitInterval, parse_time
from gpufleet.recorder import derive
from gpufleet.recorder.pods import GPU_PRODUCT_LABEL, with_pods
from gpufleet.recorder.waits import deleted_waits, wait_records

Loader = Callable[[str], tuple[list[Allocation], list[WaitInterval]]]


class Tracker:
    """Turns watch events into the ledger records they change."""

    def __init__(self, load: Loader, keys: derive.LabelKeys, clock: Callable[[], datetime]) -> None:
        self._load = load
        self._keys = keys
        self._clock = clock
        self.jobs: dict[str, dict[str, Any]] = {}
        self.job_of_workload: dict[str, str] = {}
        self.workload_of_job: dict[str, str] = {}
        self.workloads: dict[str, dict[str, Any]] = {}
        self.pods: dict[str, dict[str, dict[str, Any]]] = {}
        self.node_models: dict[str, str] = {}
        self._allocs: dict[str, list[Allocation]] = {}
        self._waits: dict[str, list[WaitInterval]] = {}

    def prime(self, plural: str, objects: list[dict[str, Any]]) -> None:
        """Learn the slow-changing joins (Job labels, Workload→Job, node models) from a listing.

        Nothing time-varying is taken from it: after a restart the watches replay what changed.
        """
        for obj in objects:
            if plural == "jobs":
                self._remember_job(obj)
            elif plural == "workloads":
                self._link(obj)
            elif plural == "nodes":
                self._remember_node(obj)

    def observe(self, plural: str, event_type: str, obj: dict[str, Any]) -> list[Record]:
        """The records this event adds (already counted as known: a failed write ends the process)."""
        if event_type == "BOOKMARK":
            return []
        handler = {
            "workloads": self._on_workload,
            "pods": self._on_pod,
            "jobs": self._on_job,
            "nodes": self._on_node,
        }[plural]
        records = handler(event_type, obj)
        for record in records:
            self._remember(record)
        return records

    def unknown(self, uids: Iterable[str]) -> set[str]:
        """Those of these workloads whose ledger records are not loaded yet."""
        return {uid for uid in uids if uid not in self._allocs}

    def preload(self, uids: Iterable[str], records: Mapping[str, list[Record]]) -> None:
        """What the ledger holds for these workloads, read for a whole batch at once (``records``
        by UID; a UID missing there has nothing in the ledger)."""
        for uid in uids:
            if uid not in self._allocs:
                found = records.get(uid, [])
                self._allocs[uid] = [r for r in found if isinstance(r, Allocation)]
                self._waits[uid] = [r for r in found if isinstance(r, WaitInterval)]

    def _known(self, uid: str) -> tuple[list[Allocation], list[WaitInterval]]:
        if uid not in self._allocs:
            self._allocs[uid], self._waits[uid] = self._load(uid)
        return self._allocs[uid], self._waits[uid]

    def _remember(self, record: Record) -> None:
        bucket: list[Any] = (self._allocs if isinstance(record, Allocation) else self._waits)[record.workload_uid]
        bucket[:] = [r for r in bucket if r.key != record.key] + [record]

    def _link(self, workload: dict[str, Any]) -> str | None:
        uid = workload["metadata"]["uid"]
        job_uid = derive.owner_uid(workload, "Job")
        if job_uid is not None:
            self.job_of_workload[uid] = job_uid
            self.workload_of_job[job_uid] = uid
        return job_uid

    def _remember_job(self, job: dict[str, Any]) -> None:
        meta = job.get("metadata", {})
        self.jobs[meta["uid"]] = {"metadata": {k: meta.get(k) for k in ("labels", "annotations")}}

    def _remember_node(self, node: dict[str, Any]) -> None:
        meta = node.get("metadata", {})
        self.node_models[meta["name"]] = (meta.get("labels") or {}).get(GPU_PRODUCT_LABEL, "")

    def _on_workload(self, event_type: str, workload: dict[str, Any]) -> list[Record]:
        uid = workload["metadata"]["uid"]
        job_uid = self._link(workload)
        allocs, waits = self._known(uid)
        job = self.jobs.get(job_uid) if job_uid else None
        pods = self.pods.get(job_uid, {}).values() if job_uid else ()
        now = self._clock()
        if event_type == "DELETED":
            # the last version may show what the recorder missed (an eviction, a readmission): take
            # it in first, then end what is still open
            self.workloads.pop(uid, None)
            when = workload["metadata"].get("deletionTimestamp")
            moment = parse_time(when) if when else now
            last = derive.allocation_records(workload, job, pods, self.node_models, allocs, keys=self._keys, now=now)
            ended = derive.deleted_allocation(derive.merged(allocs, last), moment)
            return [*last, *ended, *deleted_waits(waits, moment)]
        self.workloads[uid] = workload
        records: list[Record] = []
        records += wait_records(workload, job, waits, self._keys, now)
        changed = derive.allocation_records(workload, job, pods, self.node_models, allocs, keys=self._keys, now=now)
        records += changed
        if job is not None:  # attempts recorded before the Job was seen lack what only it carries
            fresh = {a.key for a in changed}
            records += derive.with_labels([a for a in allocs if a.key not in fresh], workload, job, keys=self._keys)
        return records

    def _on_pod(self, event_type: str, pod: dict[str, Any]) -> list[Record]:
        job_uid = derive.owner_uid(pod, "Job")
        if job_uid is None:
            return []
        # Deleted pods stay until their Job goes: the Workload stream may still be behind, and an
        # attempt's pods are picked by creation time, so a late admission event still finds them.
        self.pods.setdefault(job_uid, {})[pod["metadata"]["uid"]] = pod
        uid = self.workload_of_job.get(job_uid)
        if uid is None:
            return []  # the workload's events will pick the pod up
        allocs, _ = self._known(uid)
        records: list[Record] = []
        for allocation in allocs:
            updated = with_pods(allocation, [pod], self.node_models)
            if updated != allocation:
                records.append(updated)
        return records

    def _on_job(self, event_type: str, job: dict[str, Any]) -> list[Record]:
        job_uid = job["metadata"]["uid"]
        if event_type == "DELETED":
            self.jobs.pop(job_uid, None)
            self.pods.pop(job_uid, None)
            return []
        self._remember_job(job)
        uid = self.workload_of_job.get(job_uid)
        if uid is None or uid not in self.workloads:
            return []
        return self._on_workload("MODIFIED", self.workloads[uid])  # labels may live on the Job

    def _on_node(self, event_type: str, node: dict[str, Any]) -> list[Record]:
        if event_type == "DELETED":
            self.node_models.pop(node["metadata"]["name"], None)
        else:
            self._remember_node(node)
        return []
