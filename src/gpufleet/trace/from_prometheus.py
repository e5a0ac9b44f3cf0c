"""A cluster's history before any queue, from its Prometheus: kube-state-metrics pods as a trace.

kube-state-metrics keeps, per pod: its GPU requests (``kube_pod_container_resource_requests`` with a
``nvidia_com_*`` resource), when it was created, started and completed (``kube_pod_created``,
``kube_pod_start_time``, ``kube_pod_completion_time``, unix seconds), who owns it (``kube_pod_owner``)
and its priority class (``kube_pod_info``). Each is read once over the window (``last_over_time``
at its end). The pods of one Job (or other owner) are one gang job: submitted when its first pod was
created, running from its first start to its last completion. Teams come from the policy's
namespaces; pods of a namespace no team owns (the serving namespace, system pods) are not jobs. A
job none of whose pods completed in the window has no known duration and is left out (counted), as
the ledger conversion does; the job's kind is guessed the same way (``from_ledger``).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from gpufleet.policy import FleetPolicy, node_shape, resolve
from gpufleet.prom import Connection, PromClient, Series
from gpufleet.trace.from_ledger import guess_kind
from gpufleet.trace.job import Job

REQUESTS = 'kube_pod_container_resource_requests{resource=~"nvidia_com_.*"}'
_GANG_OWNERS = ("Job", "JobSet", "PyTorchJob", "MPIJob", "RayCluster", "LeaderWorkerSet")


@dataclass(frozen=True)
class FromPrometheus:
    jobs: list[Job]
    pods: int  # pods with GPU requests in the window
    unfinished: int  # jobs left out: no pod completed within the window
    other_namespaces: int  # pods left out: their namespace belongs to no team


def queries(seconds: int) -> dict[str, str]:
    """The PromQL per fact, over a window of ``seconds`` ending at the query time."""
    w = f"[{seconds}s]"
    return {
        "requests": f"sum by (namespace, pod, resource, node) (last_over_time({REQUESTS}{w}))",
        "created": f"max by (namespace, pod) (last_over_time(kube_pod_created{w}))",
        "started": f"max by (namespace, pod) (last_over_time(kube_pod_start_time{w}))",
        "completed": f"max by (namespace, pod) (last_over_time(kube_pod_completion_time{w}))",
        "owner": f"max by (namespace, pod, owner_kind, owner_name) (last_over_time(kube_pod_owner{w}))",
        "info": f"max by (namespace, pod, priority_class) (last_over_time(kube_pod_info{w}))",
    }


async def fetch(conn: Connection, start: datetime, end: datetime) -> dict[str, list[Series]]:
    seconds = max(int((end - start).total_seconds()), 1)
    async with PromClient(conn) as prom:
        answers = await asyncio.gather(*(prom.query(q, end) for q in queries(seconds).values()))
    return dict(zip(queries(seconds), answers, strict=True))


def _by_pod(series: list[Series]) -> dict[tuple[str, str], float]:
    out = {}
    for s in series:
        if s.points:
            out[(s.labels.get("namespace", ""), s.labels.get("pod", ""))] = s.points[-1][1]
    return out


def mig_profile(resource: str) -> str:
    """``nvidia_com_mig_3g_40gb`` → ``3g.40gb``; ``…_1g_10gb_me`` → ``1g.10gb+me``."""
    parts = resource.removeprefix("nvidia_com_mig_").split("_")
    return f"{parts[0]}.{parts[1]}" + (f"+{parts[2]}" if len(parts) > 2 else "") if len(parts) >= 2 else ""


def _node_models(policy: FleetPolicy) -> dict[str, str]:
    fleet = resolve(policy)
    # node_shape's names: a pool given as a count has its nodes named as the testbed and simulator name them
    return {node: cap.gpu.name for cap in fleet.pools.values() for node in node_shape.node_names(cap)}


@dataclass
class _Pod:
    namespace: str
    pod: str
    resource: str
    count: int
    node: str


def to_jobs(answers: dict[str, list[Series]], start: datetime, policy: FleetPolicy) -> FromPrometheus:
    """Pods with GPU requests, grouped by owner, as jobs with times from ``start``."""
    teams = {ns: t.name for t in policy.teams for ns in t.namespaces}
    classes = {pc.name for pc in policy.priorityClasses}
    models = _node_models(policy)
    created, started, completed = (_by_pod(answers[k]) for k in ("created", "started", "completed"))
    owners = {
        (s.labels.get("namespace", ""), s.labels.get("pod", "")): (
            s.labels.get("owner_kind", ""),
            s.labels.get("owner_name", ""),
        )
        for s in answers["owner"]
    }
    priority = {
        (s.labels.get("namespace", ""), s.labels.get("pod", "")): s.labels.get("priority_class", "")
        for s in answers["info"]
    }
    pods: list[_Pod] = []
    for s in answers["requests"]:
        if not s.points or s.points[-1][1] <= 0:
            continue
        labels = s.labels
        pods.append(
            _Pod(
                labels.get("namespace", ""),
                labels.get("pod", ""),
                labels.get("resource", ""),
                int(s.points[-1][1]),
                labels.get("node", ""),
            )
        )
    other = sum(1 for p in pods if p.namespace not in teams)
    groups: dict[tuple[str, str], list[_Pod]] = defaultdict(list)
    for p in pods:
        if p.namespace not in teams:
            continue
        kind, name = owners.get((p.namespace, p.pod), ("", ""))
        key = (p.namespace, name if kind in _GANG_OWNERS and name else p.pod)
        groups[key].append(p)
    origin = start.timestamp()
    jobs: list[Job] = []
    unfinished = 0
    for (namespace, name), members in sorted(groups.items()):
        keys = [(namespace, m.pod) for m in members]
        ends = [completed[k] for k in keys if k in completed]
        begins = [started[k] for k in keys if k in started]
        if len(ends) < len(members) or not begins:
            unfinished += 1
            continue
        first = members[0]
        submit = min(created.get(k, min(begins)) for k in keys)
        mig = mig_profile(first.resource) if first.resource.startswith("nvidia_com_mig_") else ""
        model = models.get(first.node, "")
        pc = priority.get(keys[0], "")
        jobs.append(
            Job(
                job_id=name,
                team=teams[namespace],
                namespace=namespace,
                submit_s=max(int(submit - origin), 0),
                duration_s=max(int(max(ends) - min(begins)), 0),
                kind=guess_kind(
                    len(members), first.count * len(members), bool(mig) or first.resource.endswith("_shared")
                ),
                pods=len(members),
                gpus=first.count,
                mig_profile=mig,
                gpu_models=(model,) if model else (),
                priority_class=pc if pc in classes else "",
            )
        )
    jobs.sort(key=lambda j: (j.submit_s, j.job_id))
    return FromPrometheus(jobs, len(pods), unfinished, other)


def read_prometheus(conn: Connection, start: datetime, end: datetime, policy: FleetPolicy) -> FromPrometheus:
    return to_jobs(asyncio.run(fetch(conn, start, end)), start, policy)
