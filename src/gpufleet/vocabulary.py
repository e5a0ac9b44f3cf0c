"""Kubernetes' scheduling vocabulary, one copy for the twin (Kueue's flavor matching) and placement
(kube-scheduler's filters): taints and tolerations, node-selector requirements and label
selectors, the GPU resource names the NVIDIA device plugin advertises, and the kinds that own
Kueue's Workloads (``JOB_OWNERS``: the forecast reads them, the exporter's role lists them).

The rules are Kubernetes' own (``k8s.io/api/core/v1`` ``Toleration.ToleratesTaint``,
``NodeSelectorRequirement``, ``LabelSelectorRequirement``). Values are frozen; an operator or
effect given as text is turned into its enum, and an unknown one is a ``ValueError`` (readers of
user input check against the enums first and report the field).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

#: The owners Kueue v0.19.2's job integrations make Workloads for, as (API group, kind, plural): the
#: forecast reads what they declare of their runtimes, and the exporter's role may list them. Pods,
#: Deployments and StatefulSets are left out: their Workloads are owned by pods, not by a job.
JOB_OWNERS: tuple[tuple[str, str, str], ...] = (
    ("batch", "Job", "jobs"),
    ("jobset.x-k8s.io", "JobSet", "jobsets"),
    ("ray.io", "RayJob", "rayjobs"),
    ("ray.io", "RayCluster", "rayclusters"),
    ("trainer.kubeflow.org", "TrainJob", "trainjobs"),
    ("workload.codeflare.dev", "AppWrapper", "appwrappers"),
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet", "leaderworkersets"),
    ("sparkoperator.k8s.io", "SparkApplication", "sparkapplications"),
    *(
        ("kubeflow.org", kind, f"{kind.lower()}s")
        for kind in ("PyTorchJob", "TFJob", "MPIJob", "XGBoostJob", "PaddleJob", "JAXJob")
    ),
)

GPU = "nvidia.com/gpu"
GPU_SHARED = "nvidia.com/gpu.shared"  # time-sliced replicas, when the device plugin renames them
MIG_PREFIX = "nvidia.com/mig-"


def mig_resource(profile: str) -> str:
    """The extended resource the device plugin advertises for one MIG profile (mixed strategy)."""
    return f"{MIG_PREFIX}{profile}"


class TaintEffect(StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


class TolerationOperator(StrEnum):
    EQUAL = "Equal"
    EXISTS = "Exists"


class Operator(StrEnum):
    """Node-selector (and label-selector) operators; ``Gt``/``Lt`` compare integer label values."""

    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"
    GT = "Gt"
    LT = "Lt"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: TaintEffect = TaintEffect.NO_SCHEDULE

    def __post_init__(self) -> None:
        object.__setattr__(self, "effect", TaintEffect(self.effect))

    def __str__(self) -> str:
        """kube-scheduler prints a taint as ``{key: value}``."""
        return f"{{{self.key}: {self.value}}}"


@dataclass(frozen=True, slots=True)
class Toleration:
    """An empty key with ``Exists`` tolerates every taint; ``effect=None`` matches every effect."""

    key: str = ""
    value: str = ""
    operator: TolerationOperator = TolerationOperator.EQUAL
    effect: TaintEffect | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "operator", TolerationOperator(self.operator))
        if self.effect is not None:
            object.__setattr__(self, "effect", TaintEffect(self.effect))

    @property
    def exists(self) -> bool:
        return self.operator is TolerationOperator.EXISTS

    def tolerates(self, taint: Taint) -> bool:
        if self.effect is not None and self.effect != taint.effect:
            return False
        if not self.key:
            return self.exists
        if self.key != taint.key:
            return False
        return self.exists or self.value == taint.value


@dataclass(frozen=True, slots=True)
class Requirement:
    """One requirement on a label: ``In``, ``NotIn``, ``Exists``, ``DoesNotExist``, ``Gt``, ``Lt``."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "operator", Operator(self.operator))

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        op = self.operator
        if op is Operator.IN:
            return present and labels[self.key] in self.values
        if op is Operator.NOT_IN:
            return not present or labels[self.key] not in self.values
        if op is Operator.EXISTS:
            return present
        if op is Operator.DOES_NOT_EXIST:
            return not present
        return present and _compare(labels[self.key], self.values, greater=op is Operator.GT)


def _compare(label: str, values: tuple[str, ...], *, greater: bool) -> bool:
    """``Gt``/``Lt``: one integer value; a label that is not an integer does not match."""
    try:
        have, want = int(label), int(values[0])
    except (ValueError, IndexError):
        return False
    return have > want if greater else have < want


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """``matchLabels`` plus ``matchExpressions``; the empty selector matches everything."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)
