"""The recorder's Kubernetes objects, for ``gpufleet render``: pure values, no client.

Least privilege: cluster-wide it may only get/list/watch what it reads (Kueue Workloads, Jobs,
Pods, Nodes); in its own namespace it may also write Leases, for leader election. With no
``ledger_url`` it writes a SQLite file on a PersistentVolumeClaim, which is why it runs one
replica with the Recreate strategy (SQLite on a ReadWriteOnce volume has one writer); with a
PostgreSQL URL, read from a Secret, two replicas may run and the Lease picks the writer.

The recorder signs a checkpoint of the ledger every 1,000 entries or 5 minutes and publishes it to
its log and to the ConfigMap ``gpufleet-ledger-checkpoint`` (key ``checkpoint``), outside the
database. The bundle creates that ConfigMap empty, so the recorder needs no right to create
ConfigMaps: a Role lets it get and update that one ConfigMap by name and nothing else. It signs
with the key of the Secret ``gpufleet-ledger-key`` (key ``key``, made by ``gpufleet audit
keygen``), which the operator creates: without it the pod does not start,
since a recorder that publishes no checkpoint leaves a rewritten ledger undetectable.
"""

from __future__ import annotations

import copy
from typing import Any

NAME = "gpufleet-recorder"
LABELS = {
    "app.kubernetes.io/name": NAME,
    "app.kubernetes.io/part-of": "gpufleet",
    "app.kubernetes.io/managed-by": "gpufleet",
}
METRICS_PORT = 9090
SQLITE_PATH = "/var/lib/gpufleet/ledger.db"
LEDGER_SECRET = "gpufleet-ledger"  # key "url": a PostgreSQL URL
KEY_SECRET = "gpufleet-ledger-key"  # key "key": the private key of `gpufleet audit keygen`
KEY_DIR = "/etc/gpufleet/ledger-key"
CHECKPOINT_CONFIGMAP = "gpufleet-ledger-checkpoint"  # key "checkpoint": the latest signed checkpoint


RESTRICTED = {  # a container's securityContext: the restricted Pod Security profile's
    "runAsNonRoot": True,
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}


def meta_of(name: str, labels: dict[str, str], namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": dict(labels)}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def _meta(name: str, namespace: str | None = None) -> dict[str, Any]:
    return meta_of(name, LABELS, namespace)


def _rules() -> list[dict[str, Any]]:
    read = ["get", "list", "watch"]
    return [
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": read},
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": read},
        {"apiGroups": [""], "resources": ["pods", "nodes"], "verbs": read},
    ]


def _container(image: str, ledger_url: str | None, namespace: str, cluster: str | None) -> dict[str, Any]:
    env: list[dict[str, Any]] = [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
    ]
    if ledger_url is None:
        ledger_arg = SQLITE_PATH
    else:
        env.append({"name": "LEDGER_URL", "valueFrom": {"secretKeyRef": {"name": LEDGER_SECRET, "key": "url"}}})
        ledger_arg = "$(LEDGER_URL)"
    probe = {"httpGet": {"path": "/healthz", "port": "metrics"}, "periodSeconds": 10}
    container: dict[str, Any] = {
        "name": "recorder",
        "image": image,
        "args": [
            "record",
            "--in-cluster",
            "--ledger",
            ledger_arg,
            "--metrics-host",
            "0.0.0.0",
            "--metrics-port",
            str(METRICS_PORT),
            "--checkpoint-key",
            f"{KEY_DIR}/key",
            "--checkpoint-to",
            "log",
            "--checkpoint-to",
            f"configmap:{namespace}/{CHECKPOINT_CONFIGMAP}",
            *(() if cluster is None else ("--cluster", cluster)),
        ],
        "env": env,
        "ports": [{"name": "metrics", "containerPort": METRICS_PORT}],
        "livenessProbe": {**probe, "failureThreshold": 6},
        "readinessProbe": probe,
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
        "securityContext": copy.deepcopy(RESTRICTED),
    }
    container["volumeMounts"] = [{"name": "ledger-key", "mountPath": KEY_DIR, "readOnly": True}]
    if ledger_url is None:
        container["volumeMounts"].append({"name": "ledger", "mountPath": SQLITE_PATH.rsplit("/", 1)[0]})
    return container


def _checkpoint_configmap(namespace: str) -> list[dict[str, Any]]:
    """The ConfigMap the recorder publishes checkpoints to (created empty here: the recorder only
    fills its ``checkpoint`` key), and the Role that lets it read and update exactly that one."""
    role = f"{NAME}-checkpoint"
    return [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(CHECKPOINT_CONFIGMAP, namespace)},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": _meta(role, namespace),
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["configmaps"],
                    "resourceNames": [CHECKPOINT_CONFIGMAP],
                    "verbs": ["get", "update"],
                }
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": _meta(role, namespace),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}],
        },
    ]


def cluster_reader(
    name: str, namespace: str, labels: dict[str, str], rules: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """A ServiceAccount and the ClusterRole (``rules``) bound to it, all named ``name``: what a
    component that reads the cluster runs as (the recorder, the forecast exporter)."""

    def meta(namespaced: bool) -> dict[str, Any]:
        return meta_of(name, labels, namespace if namespaced else None)

    rbac = "rbac.authorization.k8s.io/v1"
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(True)},
        {"apiVersion": rbac, "kind": "ClusterRole", "metadata": meta(False), "rules": rules},
        {
            "apiVersion": rbac,
            "kind": "ClusterRoleBinding",
            "metadata": meta(False),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        },
    ]


def recorder_objects(
    namespace: str, image: str, ledger_url: str | None, cluster: str | None = None
) -> list[dict[str, Any]]:
    """ServiceAccount, ClusterRole + binding, Lease Role + binding, the checkpoint ConfigMap and its
    Role + binding, Deployment, and a PVC for SQLite.

    ``cluster`` (a federation's worker) is passed as ``record --cluster``: every record names it.

    ``ledger_url`` is not embedded (it may hold a password): a PostgreSQL ledger is read from the
    Secret ``gpufleet-ledger`` (key ``url``), which the operator creates.
    """
    sqlite = ledger_url is None
    pod_spec: dict[str, Any] = {
        "serviceAccountName": NAME,
        "securityContext": {"runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 65532},
        "containers": [_container(image, ledger_url, namespace, cluster)],
    }
    # group-readable: the pod's fsGroup owns the projected file, the key stays unreadable to others
    pod_spec["volumes"] = [{"name": "ledger-key", "secret": {"secretName": KEY_SECRET, "defaultMode": 0o440}}]
    if sqlite:
        pod_spec["volumes"].append({"name": "ledger", "persistentVolumeClaim": {"claimName": NAME}})
    objects: list[dict[str, Any]] = [
        *cluster_reader(NAME, namespace, LABELS, _rules()),
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": _meta(f"{NAME}-leases", namespace),
            "rules": [
                {
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "verbs": ["get", "create", "update"],
                }
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": _meta(f"{NAME}-leases", namespace),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": f"{NAME}-leases"},
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}],
        },
        *_checkpoint_configmap(namespace),
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": _meta(NAME, namespace),
            "spec": {
                "replicas": 1 if sqlite else 2,
                "strategy": {"type": "Recreate"} if sqlite else {"type": "RollingUpdate"},
                "selector": {"matchLabels": {"app.kubernetes.io/name": NAME}},
                "template": {"metadata": {"labels": dict(LABELS)}, "spec": pod_spec},
            },
        },
    ]
    if sqlite:
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": _meta(NAME, namespace),
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "5Gi"}}},
            }
        )
    return objects
