"""The clusters of a fleet that outgrows one: where each worker runs and how the manager reaches it.

A fleet with ``clusters:`` is dispatched by Kueue's MultiKueue: a manager cluster queues every Job
and hands it to one of the worker clusters listed here. The policy names, per worker, the Secret in
the manager's ``kueue-system`` namespace that holds its kubeconfig, never the kubeconfig itself: a
policy file is shared and reviewed, credentials are not. These models import nothing from
``policy.model`` so the model can import them without a cycle.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
# A Secret's name is a DNS subdomain (RFC 1123): dot-separated labels, 253 characters at most.
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
ClusterName = Annotated[str, Field(pattern=DNS_LABEL, max_length=63)]
Region = Annotated[str, Field(pattern=DNS_LABEL, max_length=63, description='e.g. "westeurope", "eu-central"')]
SecretName = Annotated[
    str,
    Field(
        pattern=DNS_SUBDOMAIN,
        max_length=253,
        description="A Secret name (lower-case DNS subdomain) in the manager's kueue-system namespace; "
        "its `kubeconfig` key holds the worker's kubeconfig",
    ),
]


class _Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class WorkerProvider(StrEnum):
    AKS = "aks"
    ONPREM = "onprem"


class WorkerCluster(_Spec):
    """One worker cluster: a region of a cloud, or a machine room."""

    name: ClusterName
    provider: WorkerProvider
    region: Region
    kubeconfigSecret: SecretName


Dispatcher = Literal["AllAtOnce", "Incremental"]
# Kueue's Configuration.multiKueue.dispatcherName values (apis/config/v1beta2, MultiKueueDispatcherMode*).
DISPATCHER_NAMES: dict[str, str] = {
    "AllAtOnce": "kueue.x-k8s.io/multikueue-dispatcher-all-at-once",
    "Incremental": "kueue.x-k8s.io/multikueue-dispatcher-incremental",
}


class MultiKueueSettings(_Spec):
    """How the manager's Kueue dispatches (the ``multiKueue`` section of its Configuration)."""

    dispatcher: Dispatcher = Field(
        default="AllAtOnce",
        description="AllAtOnce (Kueue's default): every allowed worker gets a copy and the first to admit "
        "wins; Incremental: workers are nominated a few at a time, in the zone's cluster order",
    )
    stepSize: Annotated[int, Field(ge=1, le=20)] | None = Field(
        default=None,
        description="Incremental only: how many workers each nomination round adds (Kueue's "
        "incrementalDispatcherConfig.stepSize; unset: its 3)",
    )
    workerLostTimeoutSeconds: Annotated[int, Field(ge=1, le=7 * 24 * 3600)] | None = Field(
        default=None,
        description="How long a Job stays admitted on a worker the manager lost contact with "
        "(Kueue's workerLostTimeout; unset: its 15 minutes)",
    )
