"""The forecast exporter's Kubernetes objects (``gpufleet forecast --serve``), for ``gpufleet render``:
pure values, no client.

Rendered only for a PostgreSQL ledger: the forecast's runtimes come from the ledger, and a SQLite
ledger lives on the recorder's ReadWriteOnce volume, which no second pod can mount (without a
ledger every forecast would say "too little history", a Deployment that exports nothing but
declines). It reads the same Secret the recorder does (``gpufleet-ledger``, key ``url``).

It runs the policy the cluster was rendered from, so the bundle carries that policy in a ConfigMap
(key ``fleet.yaml``), and may only get and list what ``gpufleet forecast`` lists (Kueue's objects,
priority classes, namespaces, resource claim templates, the Workloads' owners): nothing is written.
One replica: every replica would compute the same figures, and two would double the series.
"""

from __future__ import annotations

import copy
from typing import Any

from gpufleet.recorder.manifests import RESTRICTED, cluster_reader, meta_of
from gpufleet.vocabulary import JOB_OWNERS

NAME = "gpufleet-forecast"
LABELS = {
    "app.kubernetes.io/name": NAME,
    "app.kubernetes.io/part-of": "gpufleet",
    "app.kubernetes.io/managed-by": "gpufleet",
}
METRICS_PORT = 9091
EVERY_S = 60
POLICY_DIR = "/etc/gpufleet/policy"
POLICY_KEY = "fleet.yaml"
LEDGER_SECRET = "gpufleet-ledger"  # the recorder's: key "url", a PostgreSQL URL


def _meta(name: str, namespace: str | None = None) -> dict[str, Any]:
    return meta_of(name, LABELS, namespace)


def _rules() -> list[dict[str, Any]]:
    read = ["get", "list"]
    kueue = ["resourceflavors", "cohorts", "clusterqueues", "workloadpriorityclasses", "localqueues", "workloads"]
    return [
        {"apiGroups": ["kueue.x-k8s.io"], "resources": kueue, "verbs": read},
        {"apiGroups": ["scheduling.k8s.io"], "resources": ["priorityclasses"], "verbs": read},
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": read},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaimtemplates"], "verbs": read},
        # the Workloads' owners, for what they declare of their runtimes (a CRD not installed grants nothing)
        *(
            {"apiGroups": [group], "resources": sorted(p for g, _, p in JOB_OWNERS if g == group), "verbs": read}
            for group in sorted({g for g, _, _ in JOB_OWNERS})
        ),
    ]


def _container(image: str) -> dict[str, Any]:
    return {
        "name": "forecast",
        "image": image,
        "args": [
            "forecast",
            "--policy",
            f"{POLICY_DIR}/{POLICY_KEY}",
            "--ledger",
            "$(LEDGER_URL)",
            "--serve",
            f"0.0.0.0:{METRICS_PORT}",
            "--every",
            str(EVERY_S),
        ],
        "env": [{"name": "LEDGER_URL", "valueFrom": {"secretKeyRef": {"name": LEDGER_SECRET, "key": "url"}}}],
        "ports": [{"name": "metrics", "containerPort": METRICS_PORT}],
        "readinessProbe": {"httpGet": {"path": "/metrics", "port": "metrics"}, "periodSeconds": 10},
        # a round of a busy cluster is tens of CPU-seconds (bench/forecast_speed.py): a core of its own
        "resources": {"requests": {"cpu": "1", "memory": "512Mi"}, "limits": {"memory": "2Gi"}},
        "securityContext": copy.deepcopy(RESTRICTED),
        "volumeMounts": [{"name": "policy", "mountPath": POLICY_DIR, "readOnly": True}],
    }


def forecast_objects(namespace: str, image: str, policy_yaml: str) -> list[dict[str, Any]]:
    """ServiceAccount, ClusterRole + binding (read only), the policy's ConfigMap, and the Deployment."""
    pod_spec: dict[str, Any] = {
        "serviceAccountName": NAME,
        "securityContext": {"runAsUser": 65532, "runAsGroup": 65532},
        "containers": [_container(image)],
        "volumes": [{"name": "policy", "configMap": {"name": f"{NAME}-policy"}}],
    }
    return [
        *cluster_reader(NAME, namespace, LABELS, _rules()),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _meta(f"{NAME}-policy", namespace),
            "data": {POLICY_KEY: policy_yaml},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": _meta(NAME, namespace),
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app.kubernetes.io/name": NAME}},
                "template": {"metadata": {"labels": dict(LABELS)}, "spec": pod_spec},
            },
        },
    ]
