"""The serving side, outside the queue: a PriorityClass, and a vLLM Deployment + Service per model.

Serving pods tolerate the reserved pool's taint and select its nodes; they carry no
``kueue.x-k8s.io/queue-name`` label, so Kueue never holds them back.
"""

from __future__ import annotations

from gpufleet.policy.fleet import Fleet
from gpufleet.policy.model import Deployment, Serving
from gpufleet.render.common import Obj, meta, obj, tolerations_for

PORT = 8000


def priority_class(serving: Serving) -> Obj:
    return obj(
        "scheduling.k8s.io/v1",
        "PriorityClass",
        meta(serving.priorityClass),
        value=serving.priority,
        globalDefault=False,
        description="gpufleet: vLLM serving on the reserved pool",
    )


def _resources(dep: Deployment) -> dict[str, str]:
    if dep.migProfile is not None:
        return {f"nvidia.com/mig-{dep.migProfile}": "1"}
    return {"nvidia.com/gpu": str(dep.gpusPerReplica)}


def deployment(fleet: Fleet, serving: Serving, dep: Deployment) -> Obj:
    cap = fleet.pools[serving.pool]
    labels = {"app.kubernetes.io/name": "vllm", "app.kubernetes.io/instance": dep.name}
    model_label = fleet.policy.cluster.labels.model
    pod_labels = {**labels, model_label: dep.model.replace("/", "_")[:63]}
    if dep.dataClass:
        pod_labels[fleet.policy.cluster.labels.dataClass] = dep.dataClass
    args = ["--model", dep.model, "--port", str(PORT)]
    if dep.gpusPerReplica and dep.gpusPerReplica > 1:
        args += ["--tensor-parallel-size", str(dep.gpusPerReplica)]
    if dep.maxModelLen:
        args += ["--max-model-len", str(dep.maxModelLen)]
    container = {
        "name": "vllm",
        "image": serving.image,
        "args": args,
        "ports": [{"name": "http", "containerPort": PORT}],
        "resources": {"limits": _resources(dep), "requests": _resources(dep)},
        "readinessProbe": {
            "httpGet": {"path": "/health", "port": PORT},
            "periodSeconds": 10,
            "failureThreshold": 3,
        },
        "startupProbe": {
            "httpGet": {"path": "/health", "port": PORT},
            "periodSeconds": 10,
            "failureThreshold": 90,
        },
    }
    return obj(
        "apps/v1",
        "Deployment",
        meta(dep.name, serving.namespace, labels),
        spec={
            "replicas": dep.replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": pod_labels},
                "spec": {
                    "priorityClassName": serving.priorityClass,
                    "nodeSelector": cap.pool.selector,
                    "tolerations": tolerations_for(cap.pool),
                    "containers": [container],
                },
            },
        },
    )


def service(serving: Serving, dep: Deployment) -> Obj:
    selector = {"app.kubernetes.io/name": "vllm", "app.kubernetes.io/instance": dep.name}
    return obj(
        "v1",
        "Service",
        meta(dep.name, serving.namespace, selector),
        spec={"selector": selector, "ports": [{"name": "http", "port": PORT, "targetPort": "http"}]},
    )


def serving_objects(fleet: Fleet) -> list[Obj]:
    serving = fleet.policy.serving
    if serving is None:
        return []
    out = [priority_class(serving)]
    for dep in serving.deployments:
        out += [deployment(fleet, serving, dep), service(serving, dep)]
    return out
