"""The fleet policy: one file a platform engineer writes for the whole fleet.

These pydantic models are the file's schema (``gpufleet schema`` prints it as JSON Schema). They check
each field on its own; the checks that look across fields (a quota on a pool that does not exist, a MIG
layout the card cannot hold) live in ``gpufleet.policy.checks``, because they need the GPU catalogue.
Field names are the YAML's camelCase names, so error paths read like the file.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import Annotated, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveInt,
    ValidationInfo,
    field_validator,
    model_validator,
)

from gpufleet.policy.clusters import MultiKueueSettings, Region, WorkerCluster
from gpufleet.policy.images import PUBLISHED, image_problem

UNLIMITED: Literal["unlimited"] = "unlimited"
Limit = NonNegativeInt | Literal["unlimited"]
"""A borrowing or lending limit: a count, or the explicit word ``unlimited`` (Kueue's nil)."""

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
Name = Annotated[str, Field(pattern=DNS_LABEL, max_length=63)]
LabelKey = Annotated[str, Field(pattern=r"^([a-z0-9.-]+/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")]
KubeMinor = Annotated[str, Field(pattern=r"^1\.\d{2}$", description='Kubernetes minor, e.g. "1.34"')]


class Spec(BaseModel):
    """Base of every policy model: immutable, and unknown keys are errors (typos must not pass)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Provider(StrEnum):
    AKS = "aks"
    ONPREM = "onprem"
    EKS = "eks"
    GKE = "gke"


class DraMode(StrEnum):
    AUTO = "auto"  # on when the target Kubernetes serves resource.k8s.io/v1 (1.34+)
    ON = "on"
    OFF = "off"


class Role(StrEnum):
    TRAINING = "training"
    BATCH = "batch"
    DEV = "dev"
    SERVING = "serving"


class WorkloadClass(StrEnum):
    """What a pool is declared to run; the slicing decision table reads these."""

    TRAINING = "training"
    LARGE_CONTEXT = "large-context"
    BATCH_EVAL = "batch-eval"
    DEV = "dev"
    SMALL_INFERENCE = "small-inference"
    INFERENCE = "inference"


class Labels(Spec):
    """Names of the labels every batch workload must carry."""

    team: LabelKey = "gpufleet.io/team"
    model: LabelKey = "gpufleet.io/model"
    dataClass: LabelKey = "gpufleet.io/data-class"


class Cluster(Spec):
    provider: Provider = Provider.ONPREM
    kubernetes: KubeMinor = "1.34"
    kueue: Annotated[str, Field(pattern=r"^0\.\d+$")] = "0.19"
    dra: DraMode = DraMode.AUTO
    labels: Labels = Labels()
    checkpointAnnotation: LabelKey = "gpufleet.io/checkpoint"
    image: str | None = Field(
        default=None,
        description="The gpufleet image the admission webhook and the recorder run (`make image` builds it; push it "
        "to a registry the cluster pulls from). Unset: " + PUBLISHED + ":<version>, not published until a release is",
    )

    @field_validator("image")
    @classmethod
    def _image_reference(cls, value: str | None) -> str | None:
        problem = None if value is None else image_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("dra", mode="before")
    @classmethod
    def _yaml_booleans(cls, value: object) -> object:
        """YAML 1.1 reads a bare ``on``/``off`` as a boolean; take it as the word the user wrote."""
        return {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value


class FullSlicing(Spec):
    mode: Literal["full"]


class MigSlicing(Spec):
    mode: Literal["mig"]
    layout: str | dict[str, PositiveInt] = Field(
        description='A GPU Operator layout name ("all-balanced", "all-1g.10gb") or {profile: count} per card'
    )


class TimesliceSlicing(Spec):
    mode: Literal["timeslice"]
    replicas: Annotated[int, Field(ge=2, le=64)] | None = Field(
        default=None, description="Replicas per card; sized from the pool's jobMemoryGiB when omitted"
    )
    renameByDefault: bool = Field(
        default=True,
        description="Advertise nvidia.com/gpu.shared so shared cards are never mistaken for full ones",
    )


Slicing = Annotated[FullSlicing | MigSlicing | TimesliceSlicing, Field(discriminator="mode")]


class Taint(Spec):
    key: LabelKey
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"


class Pool(Spec):
    name: Name
    gpu: str = Field(description="A GPU model from the catalogue (gpufleet plan lists them)")
    nodes: PositiveInt | list[Name] = Field(description="A node count, or the node names")
    gpusPerNode: Annotated[int, Field(ge=1, le=16)]
    nodeLabels: dict[LabelKey, str] = Field(
        default_factory=dict,
        description="Labels that select the pool's nodes (e.g. kubernetes.azure.com/agentpool); "
        "default gpufleet.io/pool=<name>",
    )
    role: Role
    region: str | None = None
    cluster: Name | None = Field(default=None, description="The worker cluster that holds the pool (with clusters:)")
    slicing: Slicing | None = Field(default=None, description="Omit to let the decision table choose")
    workloads: list[WorkloadClass] = Field(default_factory=list)
    isolateTeams: bool = False
    jobMemoryGiB: PositiveInt | None = Field(
        default=None, description="Declared GPU memory per job; sizes time-slicing replicas"
    )
    teams: list[Name] | None = Field(default=None, description="Teams that may use the pool; default all")
    taints: list[Taint] = Field(default_factory=list)

    @property
    def node_count(self) -> int:
        return self.nodes if isinstance(self.nodes, int) else len(self.nodes)

    @property
    def node_names(self) -> tuple[str, ...]:
        return () if isinstance(self.nodes, int) else tuple(self.nodes)

    @property
    def gpu_count(self) -> int:
        return self.node_count * self.gpusPerNode

    @property
    def selector(self) -> dict[str, str]:
        return dict(self.nodeLabels) if self.nodeLabels else {"gpufleet.io/pool": self.name}


class PoolQuota(Spec):
    """A team's guaranteed share of one pool, and how much it may borrow or lend there."""

    gpus: NonNegativeInt | None = Field(default=None, description="Full cards, or replicas on a time-sliced pool")
    mig: dict[str, NonNegativeInt] = Field(default_factory=dict, description="MIG profile -> instances")
    borrowingLimit: Limit = Field(default=UNLIMITED, description="Per resource of the pool")
    lendingLimit: Limit = Field(default=UNLIMITED, description="Per resource of the pool")


class QueueingStrategy(StrEnum):
    BEST_EFFORT_FIFO = "BestEffortFIFO"
    STRICT_FIFO = "StrictFIFO"


WithinClusterQueue = Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"]
ReclaimWithinCohort = Literal["Never", "LowerPriority", "Any"]
Int32 = Annotated[int, Field(ge=-(2**31), le=2**31 - 1)]


class BorrowWithinCohort(Spec):
    """Kueue's ClusterQueue ``spec.preemption.borrowWithinCohort``: whether a workload that must borrow
    may preempt lower-priority workloads of other ClusterQueues in the cohort. Kueue reads it only
    with classical preemption (``fairSharing: false``); under fair sharing it has no effect."""

    policy: Literal["Never", "LowerPriority"] = Field(
        default="Never", description="Never (Kueue's default) or LowerPriority: preempt lower priority while borrowing"
    )
    maxPriorityThreshold: Int32 | None = Field(
        default=None,
        description="With LowerPriority: only workloads of at most this priority may be preempted by a borrower",
    )

    @field_validator("maxPriorityThreshold")
    @classmethod
    def _needs_a_policy(cls, value: int | None, info: ValidationInfo) -> int | None:
        """Kueue ignores the threshold under Never; a threshold there is a mistake, not a setting."""
        if value is not None and info.data.get("policy") == "Never":
            raise ValueError("maxPriorityThreshold applies only with policy LowerPriority")
        return value


GO_DURATION_MAX_S = (2**63 - 1) // 10**9  # Kueue's timeout is a Go time.Duration (int64 nanoseconds)


class WaitForPodsReady(Spec):
    """Kueue's Configuration ``waitForPodsReady``: an admitted workload whose pods are not all ready
    within the timeout is evicted and requeued (v1beta2: always on, 30 minutes by default)."""

    timeoutSeconds: Annotated[int, Field(ge=1, le=GO_DURATION_MAX_S)] | None = Field(
        default=None,
        description="Kueue's waitForPodsReady.timeout in seconds (unset: Kueue's 30 minutes, not rendered); "
        "recoveryTimeout follows it, as in Kueue",
    )


class TeamPreemption(Spec):
    """One team's ClusterQueue ``spec.preemption``: each field set overrides the fleet's ``queueing``
    value for this team's ClusterQueue only; a field left out follows the fleet."""

    withinClusterQueue: WithinClusterQueue | None = None
    reclaimWithinCohort: ReclaimWithinCohort | None = None
    borrowWithinCohort: BorrowWithinCohort | None = None


@dataclass(frozen=True)
class Preemption:
    """A ClusterQueue's preemption as rendered: the team's overrides over the fleet's values."""

    withinClusterQueue: WithinClusterQueue
    reclaimWithinCohort: ReclaimWithinCohort
    borrowWithinCohort: BorrowWithinCohort


class Team(Spec):
    name: Name
    namespaces: Annotated[list[Name], Field(min_length=1)]
    weight: Annotated[Decimal, Field(ge=0, max_digits=6, decimal_places=3)] = Decimal(1)
    quota: dict[Name, PoolQuota] = Field(default_factory=dict)
    priorityClasses: list[Name] = Field(default_factory=list)
    dataClasses: list[Name] = Field(default_factory=list)
    queueingStrategy: QueueingStrategy | None = None
    preemption: TeamPreemption | None = Field(
        default=None,
        description="This team's ClusterQueue preemption (withinClusterQueue, reclaimWithinCohort, "
        "borrowWithinCohort), each field overriding queueing's for this team only",
    )


class PriorityClass(Spec):
    name: Name
    value: Annotated[int, Field(ge=-2147483648, le=1000000000)]
    description: str = ""


class DataClass(Spec):
    name: Name
    checkpointLocations: list[Annotated[str, Field(pattern=r"^[a-z0-9]+://.+")]] = Field(
        default_factory=list, description='Allowed location prefixes, e.g. "s3://eu-central-1/"'
    )
    clusters: list[Name] = Field(
        default_factory=list, description="Worker clusters its work may run on (with clusters:)"
    )
    regions: list[Region] = Field(default_factory=list, description="Regions whose clusters its work may run on")
    zone: Name | None = Field(
        default=None, description="The residency zone it shares with other data classes; default: its own name"
    )


class Deployment(Spec):
    name: Name
    model: str = Field(description='The model vLLM serves, e.g. "meta-llama/Llama-3.1-8B-Instruct"')
    replicas: NonNegativeInt = 1
    gpusPerReplica: PositiveInt | None = None
    migProfile: str | None = None
    maxModelLen: PositiveInt | None = None
    dataClass: Name | None = None


class Serving(Spec):
    pool: Name
    namespace: Name = "serving"
    priorityClass: Name = "gpufleet-serving"
    priority: Annotated[int, Field(ge=0, le=1000000000)] = 1000000
    latencyGoalMs: PositiveInt | None = None
    image: str = "vllm/vllm-openai:v0.11.0"
    deployments: list[Deployment] = Field(default_factory=list)


FairSharingStrategy = Literal["LessThanOrEqualToFinalShare", "LessThanInitialShare"]
KUEUE_FAIR_SHARING_STRATEGIES: tuple[FairSharingStrategy, ...] = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")


class Queueing(Spec):
    """Fleet-wide Kueue behaviour; teams inherit it."""

    cohort: Name = "gpufleet"
    fairSharing: bool = True
    preemptionStrategies: list[FairSharingStrategy] = Field(
        default_factory=lambda: list(KUEUE_FAIR_SHARING_STRATEGIES),
        description="Kueue's fairSharing.preemptionStrategies (its default: both). LessThanOrEqualToFinalShare "
        "alone stops a borrower from preempting another queue below its own share, which can end a "
        "reclaim/preempt-back loop; `gpufleet simulate` shows the loop as the most preempted jobs",
    )
    prioritizePreemptorWorkloads: bool = Field(
        default=False,
        description="Kueue's alpha PrioritizePreemptorWorkloads feature gate (off by default in 0.19): a "
        "workload waiting for its victims to go is ordered first in every scheduling cycle and holds "
        "the quota it is owed, so a borrower cannot take what its victims free (the cohort-reclaim "
        "thrash of kueue#13662). Rendered into the Configuration's featureGates, which Kueue refuses "
        "together with the manager's --feature-gates flag",
    )
    queueingStrategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO
    waitForPodsReady: WaitForPodsReady = Field(
        default_factory=WaitForPodsReady,
        description="Kueue's waitForPodsReady in the manager Configuration; `gpufleet simulate` and `tune` use it",
    )
    withinClusterQueue: WithinClusterQueue = "LowerPriority"
    reclaimWithinCohort: ReclaimWithinCohort = "Any"
    borrowWithinCohort: BorrowWithinCohort = Field(
        default_factory=BorrowWithinCohort,
        description="Kueue's spec.preemption.borrowWithinCohort of every ClusterQueue (default: policy Never, "
        "Kueue's own, not rendered). Kueue refuses LowerPriority together with reclaimWithinCohort: Never",
    )

    @field_validator("preemptionStrategies")
    @classmethod
    def _kueue_orders(cls, value: list[FairSharingStrategy]) -> list[FairSharingStrategy]:
        """Kueue accepts one strategy, or LessThanOrEqualToFinalShare followed by LessThanInitialShare."""
        if len(value) == 1 or tuple(value) == KUEUE_FAIR_SHARING_STRATEGIES:
            return value
        raise ValueError(
            "expected [LessThanOrEqualToFinalShare], [LessThanInitialShare] or "
            "[LessThanOrEqualToFinalShare, LessThanInitialShare]"
        )


NodeScoring = Literal["LeastAllocated", "MostAllocated"]


class Scheduling(Spec):
    """How kube-scheduler scores the nodes a pod fits (NodeResourcesFit's ``scoringStrategy.type``)."""

    nodeScoring: NodeScoring = Field(
        default="LeastAllocated",
        description="kube-scheduler's NodeResourcesFit scoring strategy for the GPU pods: LeastAllocated "
        "(kube-scheduler's default: spread, nothing rendered) or MostAllocated (pack nodes so gangs find whole "
        "ones; render writes kube-scheduler-configuration.yaml for the scheduler's --config). "
        "`gpufleet simulate` and `tune` use it",
    )


class Recorder(Spec):
    """Where the recorder keeps the ledger: a SQLite file on a volume, or PostgreSQL (its URL in a Secret)."""

    ledger: Literal["sqlite", "postgresql"] = "sqlite"


Weekday = Literal["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
WEEKDAYS: tuple[Weekday, ...] = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
ClockTime = Annotated[str, Field(pattern=r"^([01]\d|2[0-3]):[0-5]\d$|^24:00$", description='"HH:MM", 24-hour')]


class ServiceHours(Spec):
    """When someone answers a ticket: what only delays batch work waits for the start of these hours."""

    days: Annotated[list[Weekday], Field(min_length=1)] = Field(
        default_factory=lambda: list(WEEKDAYS[:5]), description="Weekdays in lower case; default Monday to Friday"
    )
    start: ClockTime = "08:00"
    end: ClockTime = "18:00"
    timezone: str = Field(default="Europe/Berlin", description="An IANA time zone, e.g. Europe/Berlin")

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        """Alertmanager loads the zone by name; an unknown one must fail here, not in Alertmanager."""
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {value!r}; expected an IANA name such as Europe/Berlin") from None
        return value

    @field_validator("days")
    @classmethod
    def _distinct(cls, value: list[Weekday]) -> list[Weekday]:
        if len(set(value)) != len(value):
            raise ValueError("each weekday may be listed once")
        return value

    @model_validator(mode="after")
    def _start_before_end(self) -> ServiceHours:
        if _minutes(self.start) >= _minutes(self.end):
            raise ValueError(f"start {self.start} must be before end {self.end} (hours do not span midnight)")
        return self


def _minutes(clock: str) -> int:
    hours, minutes = clock.split(":")
    return int(hours) * 60 + int(minutes)


class Monitoring(Spec):
    """The ``monitoring/`` folder of the render: alerts, recording rules, dashboards, routing.

    Thresholds are the policy's promises, so they live here and the rendered alerts quote them.
    """

    enabled: bool = True
    serviceHours: ServiceHours = ServiceHours()
    maxWaitMinutes: PositiveInt = Field(
        default=120, description="A team's workloads pending longer than this, with none admitted, alert"
    )
    idleWhileQueuedMinutes: PositiveInt = Field(
        default=15, description="A pool idle this long while its teams have pending workloads alerts"
    )
    recorderLagSeconds: PositiveInt = Field(default=300, description="The recorder's lag behind the API server")
    checkpointMaxAgeMinutes: PositiveInt = Field(
        default=90, description="The newest ledger checkpoint may be this old before it alerts"
    )
    webhookP99Seconds: Annotated[Decimal, Field(gt=0, le=30, max_digits=5, decimal_places=3)] = Field(
        default=Decimal("0.25"), description="The webhook's 99th percentile answer time"
    )
    ruleLabels: dict[LabelKey, str] = Field(
        default_factory=lambda: {"release": "kube-prometheus-stack"},
        description="Labels on PrometheusRules and PodMonitors, for the Prometheus' rule and monitor selectors",
    )
    dashboardNamespace: Name = Field(default="monitoring", description="Where Grafana's sidecar looks for dashboards")


class FleetPolicy(Spec):
    apiVersion: Literal["gpufleet.io/v1alpha1"]
    kind: Literal["FleetPolicy"]
    cluster: Cluster = Cluster()
    pools: Annotated[list[Pool], Field(min_length=1)]
    teams: list[Team] = Field(default_factory=list)
    priorityClasses: list[PriorityClass] = Field(default_factory=list)
    dataClasses: list[DataClass] = Field(default_factory=list)
    queueing: Queueing = Queueing()
    scheduling: Scheduling = Scheduling()
    serving: Serving | None = None
    recorder: Recorder = Recorder()
    monitoring: Monitoring = Monitoring()
    clusters: list[WorkerCluster] = Field(
        default_factory=list, description="Worker clusters MultiKueue dispatches to; empty: one cluster, as before"
    )
    multiKueue: MultiKueueSettings = MultiKueueSettings()

    def pool(self, name: str) -> Pool | None:
        return next((p for p in self.pools if p.name == name), None)

    def team(self, name: str) -> Team | None:
        return next((t for t in self.teams if t.name == name), None)

    def preemption_of(self, team: Team) -> Preemption:
        """The preemption ``team``'s ClusterQueue gets: its own fields, the fleet's for the rest."""
        q, own = self.queueing, team.preemption or TeamPreemption()
        return Preemption(
            withinClusterQueue=own.withinClusterQueue or q.withinClusterQueue,
            reclaimWithinCohort=own.reclaimWithinCohort or q.reclaimWithinCohort,
            borrowWithinCohort=own.borrowWithinCohort or q.borrowWithinCohort,
        )
