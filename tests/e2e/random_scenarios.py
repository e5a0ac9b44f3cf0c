"""Seeded random scenarios for the differential test against the real Kueue: seed -> scenario value.

Pure and reproducible: ``generate(seed)`` always returns the same :class:`Scenario`, and a scenario
prints as YAML (``to_yaml``) and reads back (``from_dict``), so a disagreement's bug report carries the
exact case. The space follows issue 18: 1-3 cohorts (hierarchical ones included), 2-6 ClusterQueues,
1-3 flavors, nominal, borrowing and lending limits, every preemption policy, fair sharing on and off
with weights (0 included) and each fair-sharing preemption strategy alone and both, GPUs plus cpu
and memory so the dominant resource varies, priorities, BestEffortFIFO and StrictFIFO, and backlogs
of equivalent Jobs (same shape and priority). ``manifests`` turns a scenario into Kueue and batch
objects under a name prefix, so any number of scenarios share one testbed without colliding.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, replace
from typing import Any

import yaml

from tests.e2e.batch_jobs import batch_job

KUEUE_API = "kueue.x-k8s.io/v1beta2"
GPU = "nvidia.com/gpu"
RESOURCES = (GPU, "cpu", "memory")  # memory in GiB, cpu in cores, GPUs in devices
FLAVORS = ("rnd-f0", "rnd-f1", "rnd-f2")  # quota only: no node labels, shared by every scenario
PRIORITIES = {"rnd-low": 10, "rnd-mid": 100, "rnd-high": 1000}
LTE_FINAL = "LessThanOrEqualToFinalShare"
LT_INITIAL = "LessThanInitialShare"
STRATEGIES = ((LTE_FINAL,), (LT_INITIAL,), (LTE_FINAL, LT_INITIAL))
SCENARIO_LABEL = "twin-random.gpufleet.io/scenario"
RELEASED_LABEL = "twin-random.gpufleet.io/released"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
MAX_JOBS = 10
# DRA (issue 35): some Jobs get their GPUs from ResourceClaims made from one template, one device each,
# which Kueue counts as nvidia.com/gpu through the Configuration's deviceClassMappings.
CLAIM_TEMPLATE = "rnd-gpu"
DEVICE_CLASS = "rnd-gpu-class"  # never created: Kueue counts a template's class without reading it
DRA_MAPPINGS = [{"name": GPU, "deviceClassNames": [DEVICE_CLASS]}]
CLAIMS_SHARE = 0.4


@dataclass(frozen=True)
class KueueConfig:
    """The part of Kueue's manager Configuration a scenario varies; scenarios are grouped by it."""

    fair_sharing: bool
    strategies: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return "fair:" + "+".join(self.strategies) if self.fair_sharing else "classical"

    def manager_fields(self) -> dict[str, Any]:
        return {"fairSharing": {"preemptionStrategies": list(self.strategies)}} if self.fair_sharing else {}


@dataclass(frozen=True)
class Quota:
    resource: str
    nominal: int
    borrowing: int | None = None
    lending: int | None = None


@dataclass(frozen=True)
class FlavorQuota:
    flavor: str
    quotas: tuple[Quota, ...]


@dataclass(frozen=True)
class CohortSpec:
    name: str
    parent: str | None = None
    weight: str | None = None


@dataclass(frozen=True)
class QueueSpec:
    name: str
    cohort: str | None
    strategy: str  # BestEffortFIFO or StrictFIFO
    within: str  # withinClusterQueue
    reclaim: str  # reclaimWithinCohort
    borrow_within: str  # borrowWithinCohort.policy
    threshold: int | None  # borrowWithinCohort.maxPriorityThreshold
    weight: str | None
    flavors: tuple[FlavorQuota, ...]


@dataclass(frozen=True)
class JobSpec:
    """``pods`` pods each requesting ``requests`` (resource, amount); ``before``: admitted before the export."""

    name: str
    queue: str
    pods: int
    requests: tuple[tuple[str, int], ...]
    priority: str | None
    before: bool
    claims: bool = False  # the GPUs come as ResourceClaims from CLAIM_TEMPLATE, not as nvidia.com/gpu


@dataclass(frozen=True)
class Scenario:
    seed: int
    config: KueueConfig
    resources: tuple[str, ...]
    cohorts: tuple[CohortSpec, ...]
    queues: tuple[QueueSpec, ...]
    jobs: tuple[JobSpec, ...]  # in creation order: each is created a second after the one before

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Scenario:
        def flavor(d: dict[str, Any]) -> FlavorQuota:
            return FlavorQuota(d["flavor"], tuple(Quota(**q) for q in d["quotas"]))

        return cls(
            seed=data["seed"],
            config=KueueConfig(data["config"]["fair_sharing"], tuple(data["config"]["strategies"])),
            resources=tuple(data["resources"]),
            cohorts=tuple(CohortSpec(**c) for c in data["cohorts"]),
            queues=tuple(QueueSpec(**{**q, "flavors": tuple(flavor(f) for f in q["flavors"])}) for q in data["queues"]),
            jobs=tuple(JobSpec(**{**j, "requests": tuple(map(tuple, j["requests"]))}) for j in data["jobs"]),
        )


def _config(rng: random.Random) -> KueueConfig:
    if rng.random() < 0.4:
        return KueueConfig(fair_sharing=False)
    return KueueConfig(fair_sharing=True, strategies=rng.choice(STRATEGIES))


def _cohorts(rng: random.Random, fair: bool) -> tuple[CohortSpec, ...]:
    out: list[CohortSpec] = []
    for i in range(rng.randint(1, 3)):
        parent = rng.choice(out).name if out and rng.random() < 0.5 else None  # earlier only: never a cycle
        weight = rng.choice([None, None, "0", "1", "2"]) if fair else None
        out.append(CohortSpec(f"c{i}", parent, weight))
    return tuple(out)


NOMINAL = {GPU: (0, 2, 4, 4, 6, 8), "cpu": (0, 4, 8, 8, 16), "memory": (0, 8, 16, 32)}
REQUEST = {GPU: (0, 1, 1, 2, 2, 4), "cpu": (1, 1, 2, 4, 8), "memory": (1, 2, 4, 8, 16)}


def _quota(rng: random.Random, resource: str, in_cohort: bool) -> Quota:
    nominal = rng.choice(NOMINAL[resource])
    borrowing = rng.choice([0, nominal // 2, nominal]) if in_cohort and rng.random() < 0.3 else None
    lending = rng.randint(0, nominal) if in_cohort and rng.random() < 0.3 else None
    return Quota(resource, nominal, borrowing, lending)


def _queue(
    rng: random.Random,
    i: int,
    cohorts: tuple[CohortSpec, ...],
    flavors: tuple[str, ...],
    resources: tuple[str, ...],
    fair: bool,
) -> QueueSpec:
    cohort = rng.choice(cohorts).name if rng.random() < 0.9 else None
    reclaim = rng.choice(["Never", "LowerPriority", "Any"])
    borrow_within = "LowerPriority" if reclaim != "Never" and rng.random() < 0.3 else "Never"
    chosen = rng.sample(flavors, rng.randint(1, min(2, len(flavors))))
    return QueueSpec(
        name=f"q{i}",
        cohort=cohort,
        strategy=rng.choice(["BestEffortFIFO", "BestEffortFIFO", "StrictFIFO"]),
        within=rng.choice(["Never", "LowerPriority", "LowerOrNewerEqualPriority"]),
        reclaim=reclaim,
        borrow_within=borrow_within,
        threshold=rng.choice([None, PRIORITIES["rnd-mid"]]) if borrow_within != "Never" else None,
        weight=rng.choice([None, "0", "1", "1", "2"]) if fair else None,
        flavors=tuple(FlavorQuota(f, tuple(_quota(rng, r, cohort is not None) for r in resources)) for f in chosen),
    )


def _jobs(rng: random.Random, queues: tuple[QueueSpec, ...], resources: tuple[str, ...]) -> tuple[JobSpec, ...]:
    shapes: list[tuple[bool, int]] = [(True, 1)] * rng.randint(0, 4)  # (before, how many equivalents)
    shapes += [(False, rng.choice([1, 1, 1, 2, 3, 5])) for _ in range(rng.randint(1, 4))]
    out: list[JobSpec] = []
    for before, copies in shapes:
        requests = tuple((r, rng.choice(REQUEST[r])) for r in resources)
        if not any(amount for _, amount in requests):
            requests = ((resources[0], 1), *requests[1:])
        queue, pods, priority = rng.choice(queues).name, rng.choice([1, 1, 2, 3]), rng.choice([None, *PRIORITIES])
        for _ in range(min(copies, MAX_JOBS - len(out))):
            out.append(JobSpec(f"j{len(out):02d}", queue, pods, requests, priority, before))
    return tuple(out)


def _with_claims(seed: int, jobs: tuple[JobSpec, ...]) -> tuple[JobSpec, ...]:
    """Turn some GPU Jobs into claim Jobs, per shape (all equivalents alike, so Kueue's scheduling hash and
    the twin's group them the same), from a generator of its own: the rest of the seed's scenario is the
    one it always was."""
    rng = random.Random(f"dra-{seed}")
    flags: dict[tuple[Any, ...], bool] = {}
    out = []
    for j in jobs:
        key = (j.queue, j.pods, j.requests, j.priority, j.before)
        if key not in flags:
            flags[key] = dict(j.requests).get(GPU, 0) > 0 and rng.random() < CLAIMS_SHARE
        out.append(replace(j, claims=flags[key]))
    return tuple(out)


def generate(seed: int) -> Scenario:
    """The scenario of ``seed``; the same seed gives the same scenario on every machine and Python."""
    rng = random.Random(seed)
    config = _config(rng)
    extra = rng.choice([(), ("cpu",), ("memory",), ("cpu", "memory")])
    resources = (GPU, *extra)
    cohorts = _cohorts(rng, config.fair_sharing)
    flavors = FLAVORS[: rng.randint(1, 3)]
    queues = tuple(_queue(rng, i, cohorts, flavors, resources, config.fair_sharing) for i in range(rng.randint(2, 6)))
    return Scenario(seed, config, resources, cohorts, queues, _with_claims(seed, _jobs(rng, queues, resources)))


# -- manifests ---------------------------------------------------------------------------------


def _amount(resource: str, value: int) -> str:
    return f"{value}Gi" if resource == "memory" else str(value)


@dataclass(frozen=True)
class Names:
    """Every name a scenario puts on the cluster, under one prefix (``<prefix>-…``)."""

    prefix: str

    @property
    def running(self) -> str:  # selected from the start: the Jobs admitted before the export
        return f"{self.prefix}-run"

    @property
    def held(self) -> str:  # selected only once relabelled: the Jobs under test
        return f"{self.prefix}-new"

    def of(self, local: str) -> str:
        return f"{self.prefix}-{local}"


def shared_objects() -> list[dict[str, Any]]:
    """The flavors and priority classes every scenario uses (cluster-scoped, created once)."""
    objects: list[dict[str, Any]] = [
        {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": f}, "spec": {}} for f in FLAVORS
    ]
    objects += [
        {"apiVersion": KUEUE_API, "kind": "WorkloadPriorityClass", "metadata": {"name": p}, "value": v}
        for p, v in PRIORITIES.items()
    ]
    return objects


def _cluster_queue(scn: Scenario, q: QueueSpec, names: Names) -> dict[str, Any]:
    def quota(qt: Quota) -> dict[str, Any]:
        out: dict[str, Any] = {"name": qt.resource, "nominalQuota": _amount(qt.resource, qt.nominal)}
        if qt.borrowing is not None:
            out["borrowingLimit"] = _amount(qt.resource, qt.borrowing)
        if qt.lending is not None:
            out["lendingLimit"] = _amount(qt.resource, qt.lending)
        return out

    preemption: dict[str, Any] = {"withinClusterQueue": q.within, "reclaimWithinCohort": q.reclaim}
    if q.borrow_within != "Never":
        preemption["borrowWithinCohort"] = {"policy": q.borrow_within}
        if q.threshold is not None:
            preemption["borrowWithinCohort"]["maxPriorityThreshold"] = q.threshold
    spec: dict[str, Any] = {
        "namespaceSelector": {"matchLabels": {SCENARIO_LABEL: names.prefix, RELEASED_LABEL: "true"}},
        "queueingStrategy": q.strategy,
        "preemption": preemption,
        "resourceGroups": [
            {
                "coveredResources": list(scn.resources),
                "flavors": [{"name": f.flavor, "resources": [quota(x) for x in f.quotas]} for f in q.flavors],
            }
        ],
    }
    if q.cohort is not None:
        spec["cohortName"] = names.of(q.cohort)
    if q.weight is not None:
        spec["fairSharing"] = {"weight": q.weight}
    return {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": names.of(q.name)}, "spec": spec}


def _cohort(c: CohortSpec, names: Names) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if c.parent is not None:
        spec["parentName"] = names.of(c.parent)
    if c.weight is not None:
        spec["fairSharing"] = {"weight": c.weight}
    return {"apiVersion": KUEUE_API, "kind": "Cohort", "metadata": {"name": names.of(c.name)}, "spec": spec}


def queue_objects(scn: Scenario, names: Names) -> list[dict[str, Any]]:
    """Namespaces, Cohorts, ClusterQueues and a LocalQueue per ClusterQueue in each namespace."""
    labels = {SCENARIO_LABEL: names.prefix}
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": names.running, "labels": {**labels, RELEASED_LABEL: "true"}},
        },
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": names.held, "labels": labels}},
    ]
    objects += [_cohort(c, names) for c in scn.cohorts]
    objects += [_cluster_queue(scn, q, names) for q in scn.queues]
    objects += [
        {
            "apiVersion": KUEUE_API,
            "kind": "LocalQueue",
            "metadata": {"name": q.name, "namespace": ns},
            "spec": {"clusterQueue": names.of(q.name)},
        }
        for ns in (names.running, names.held)
        for q in scn.queues
    ]
    request = {"name": "gpu", "exactly": {"deviceClassName": DEVICE_CLASS, "allocationMode": "ExactCount", "count": 1}}
    objects += [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": CLAIM_TEMPLATE, "namespace": ns},
            "spec": {"spec": {"devices": {"requests": [request]}}},
        }
        for ns in (names.running, names.held)
    ]
    return objects


def job_object(job: JobSpec, names: Names) -> dict[str, Any]:
    labels = {QUEUE_LABEL: job.queue}
    if job.priority:
        labels[PRIORITY_LABEL] = job.priority
    requests = {r: _amount(r, v) for r, v in job.requests if v}
    limits = {r: v for r, v in requests.items() if r == GPU}
    namespace = names.running if job.before else names.held
    if not job.claims:
        return batch_job(job.name, namespace, labels, pods=job.pods, limits=limits, requests=requests, scheduled=False)
    gpus = int(requests.pop(GPU))
    out = batch_job(job.name, namespace, labels, pods=job.pods, limits={}, requests=requests, scheduled=False)
    pod = out["spec"]["template"]["spec"]
    pod["resourceClaims"] = [{"name": f"gpu{i}", "resourceClaimTemplateName": CLAIM_TEMPLATE} for i in range(gpus)]
    pod["containers"][0]["resources"]["claims"] = [{"name": c["name"]} for c in pod["resourceClaims"]]
    return out
