"""The tune workers as a Kubernetes Job on the user's own cluster, all sharing one study in PostgreSQL.

One trial of a real fleet's week is minutes of CPU, so a search of hundreds of trials wants more
cores than one machine. Optuna's RDB storage already lets processes anywhere join one study; this
renders the processes: an Indexed Job (``completions = parallelism = workers``), each pod running
``gpufleet tune --worker INDEX`` in gpufleet's image (``image/build.sh``) against the study named by
``--study``. A worker only searches (no simplification, no held-out weeks, nothing written): it
stops when the study holds its total, and ``gpufleet tune`` with the same ``--storage`` and
``--study`` then writes the recommendation from the shared trials (docs/tune.md, "Cluster workers").

The policy and the trace travel in a ConfigMap, which Kubernetes caps at 1 MiB of data
(``CONFIGMAP_LIMIT``); a larger trace is read from a PersistentVolumeClaim the user names. The
database URL carries a password, so the manifest never holds it: the pods read it from a Secret the
operator creates (key ``url``), as the ``GPUFLEET_STUDY_STORAGE`` variable ``tune --storage`` reads.
The pods run as the image's user, non-root, on a read-only root filesystem with a scratch ``/tmp``,
like the webhook's and the recorder's Deployments.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

from gpufleet.render.common import Obj, meta, obj

CONFIGMAP_LIMIT = 1024 * 1024  # bytes of data and binaryData together: Kubernetes' ConfigMap limit
STORAGE_ENV = "GPUFLEET_STUDY_STORAGE"  # the variable ``tune --storage`` falls back to
SECRET_KEY = "url"
INPUTS_DIR = "/inputs"
TRACE_DIR = "/trace"
USER_ID = 65532  # the image's user (image/build.sh)
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"


@dataclass(frozen=True)
class TuneJob:
    """What the Job runs; ``trace_claim`` names a PVC holding ``trace_name`` instead of the ConfigMap."""

    name: str
    namespace: str
    image: str
    workers: int
    trials: int  # the study's total, the input policy included
    study: str
    secret: str  # the Secret holding the PostgreSQL URL under ``url``
    trace_name: str  # the trace's file name (its suffix tells CSV from Parquet)
    cpu: str = "1"
    memory: str = "2Gi"
    backoff_per_index: int = 2
    trace_claim: str | None = None
    seed: int = 0


def inputs_size(policy: bytes, trace: bytes | None) -> int:
    """The bytes the ConfigMap would hold (the trace only when it travels in it)."""
    return len(policy) + (len(trace) if trace is not None else 0)


def _configmap(job: TuneJob, policy: str, trace: bytes | None) -> Obj:
    body: Obj = {"data": {"policy.yaml": policy}}
    if trace is not None:
        try:
            body["data"][job.trace_name] = trace.decode("utf-8")
        except UnicodeDecodeError:  # Parquet: binary, stored base64 by the API (its raw size counts)
            body["binaryData"] = {job.trace_name: base64.b64encode(trace).decode("ascii")}
    return obj("v1", "ConfigMap", meta(f"{job.name}-inputs", job.namespace, _labels(job)), **body)


def _labels(job: TuneJob) -> dict[str, str]:
    return {"app.kubernetes.io/name": "gpufleet-tune", "app.kubernetes.io/instance": job.name}


def _container(job: TuneJob) -> Obj:
    trace_dir = INPUTS_DIR if job.trace_claim is None else TRACE_DIR
    mounts: list[Obj] = [
        {"name": "inputs", "mountPath": INPUTS_DIR, "readOnly": True},
        {"name": "tmp", "mountPath": "/tmp"},
    ]
    if job.trace_claim is not None:
        mounts.append({"name": "trace", "mountPath": TRACE_DIR, "readOnly": True})
    return {
        "name": "tune",
        "image": job.image,
        "args": [
            "tune",
            f"{INPUTS_DIR}/policy.yaml",
            "--trace",
            f"{trace_dir}/{job.trace_name}",
            "--study",
            job.study,
            "--trials",
            str(job.trials),
            "--jobs",
            "1",
            "--seed",
            str(job.seed),
            "--worker",
            "$(GPUFLEET_WORKER)",
        ],
        "env": [
            {"name": STORAGE_ENV, "valueFrom": {"secretKeyRef": {"name": job.secret, "key": SECRET_KEY}}},
            {"name": "GPUFLEET_WORKER", "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{INDEX_ANNOTATION}']"}}},
            {"name": "HOME", "value": "/tmp"},
        ],
        "resources": {"requests": {"cpu": job.cpu, "memory": job.memory}, "limits": {"memory": job.memory}},
        "securityContext": {
            "runAsNonRoot": True,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": mounts,
    }  # fmt: skip


def _job(job: TuneJob) -> Obj:
    volumes: list[Obj] = [
        {"name": "inputs", "configMap": {"name": f"{job.name}-inputs"}},
        {"name": "tmp", "emptyDir": {}},
    ]
    if job.trace_claim is not None:
        volumes.append({"name": "trace", "persistentVolumeClaim": {"claimName": job.trace_claim, "readOnly": True}})
    pod: Obj = {
        "restartPolicy": "Never",  # a failed worker is a new pod, counted against its index's backoff
        "securityContext": {
            "runAsUser": USER_ID,
            "runAsGroup": USER_ID,
            "fsGroup": USER_ID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [_container(job)],
        "volumes": volumes,
    }
    spec: Obj = {
        "completionMode": "Indexed",
        "completions": job.workers,
        "parallelism": job.workers,
        # a worker that fails (an evicted node, a dropped connection) is retried on its own index; the
        # study keeps its finished trials, so a retry only adds the trials still missing
        "backoffLimitPerIndex": job.backoff_per_index,
        "template": {"metadata": {"labels": _labels(job)}, "spec": pod},
    }
    return obj("batch/v1", "Job", meta(job.name, job.namespace, _labels(job)), spec=spec)


def tune_job(job: TuneJob, policy: str, trace: bytes | None) -> list[Obj]:
    """The ConfigMap of the inputs and the Job; ``trace`` is None when it comes from ``trace_claim``."""
    return [_configmap(job, policy, trace), _job(job)]
