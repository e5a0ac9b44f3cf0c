"""Which objects the rules govern, where their pod templates are, and what GPUs a pod asks for.

Each kind names the paths to its pod specs in a tiny path language (a field name, ``[]`` for every
item of a list, ``{}`` for every value of a map). The Python rules walk these paths and the CEL compiler
turns the same paths into expressions, so both look at exactly the same pod specs.

GPU arithmetic follows Kubernetes: a container's count is its request, or its limit when it sets no
request; a pod needs the sum over its containers or the largest init container, whichever is more.
Counts must be whole numbers of at most nine digits (so the CEL side can never overflow).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gpufleet.check.facts import CLAIM_PREFIX, GPU_PREFIX

Path = tuple[str, ...]
MAX_DIGITS = 9
_WHOLE = re.compile(rf"^[0-9]{{1,{MAX_DIGITS}}}$")


@dataclass(frozen=True)
class WorkloadKind:
    group: str
    kind: str
    plural: str  # the API resource, for the admission match rules
    templates: tuple[Path, ...]  # paths to pod specs
    batch: bool  # batch work Kueue manages (all rules) or a pod owner the serving rules watch

    @property
    def key(self) -> str:
        return f"{self.group}/{self.kind}"


def _kubeflow(kind: str, replica_specs: str) -> WorkloadKind:
    return WorkloadKind(
        "kubeflow.org", kind, kind.lower() + "s", (("spec", replica_specs, "{}", "template", "spec"),), True
    )


_RAY_CLUSTER: tuple[Path, ...] = (
    ("headGroupSpec", "template", "spec"),
    ("workerGroupSpecs", "[]", "template", "spec"),
)

KINDS: tuple[WorkloadKind, ...] = (
    WorkloadKind("batch", "Job", "jobs", (("spec", "template", "spec"),), True),
    WorkloadKind(
        "jobset.x-k8s.io",
        "JobSet",
        "jobsets",
        (("spec", "replicatedJobs", "[]", "template", "spec", "template", "spec"),),
        True,
    ),
    _kubeflow("PyTorchJob", "pytorchReplicaSpecs"),
    _kubeflow("TFJob", "tfReplicaSpecs"),
    _kubeflow("MPIJob", "mpiReplicaSpecs"),
    _kubeflow("XGBoostJob", "xgbReplicaSpecs"),
    _kubeflow("PaddleJob", "paddleReplicaSpecs"),
    _kubeflow("JAXJob", "jaxReplicaSpecs"),
    WorkloadKind("ray.io", "RayJob", "rayjobs", tuple(("spec", "rayClusterSpec", *p) for p in _RAY_CLUSTER), True),
    WorkloadKind("ray.io", "RayCluster", "rayclusters", tuple(("spec", *p) for p in _RAY_CLUSTER), True),
    # a Pod is batch work only when it requests GPUs and no controller owns it (see rules.is_batch)
    WorkloadKind("", "Pod", "pods", (("spec",),), True),
    WorkloadKind("apps", "Deployment", "deployments", (("spec", "template", "spec"),), False),
    WorkloadKind("apps", "StatefulSet", "statefulsets", (("spec", "template", "spec"),), False),
    # multi-host serving (a vLLM leader and its workers): a pod owner as a Deployment is, judged when
    # applied rather than only when its controller makes the StatefulSets
    WorkloadKind(
        "leaderworkerset.x-k8s.io",
        "LeaderWorkerSet",
        "leaderworkersets",
        tuple(("spec", "leaderWorkerTemplate", t, "spec") for t in ("leaderTemplate", "workerTemplate")),
        False,
    ),
)
_BY_KEY = {k.key: k for k in KINDS}


def group_of(api_version: str) -> str:
    return api_version.split("/", maxsplit=1)[0] if "/" in api_version else ""


def kind_of(obj: dict[str, Any]) -> WorkloadKind | None:
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return None
    return _BY_KEY.get(f"{group_of(api_version)}/{kind}")


def _walk(node: Any, path: Path) -> list[dict[str, Any]]:
    """The pod specs at ``path`` under ``node``; a missing or mistyped step yields none."""
    if not path:
        return [node] if isinstance(node, dict) else []
    step, rest = path[0], path[1:]
    if step == "[]":
        return [spec for item in node for spec in _walk(item, rest)] if isinstance(node, list) else []
    if step == "{}":
        return [spec for item in node.values() for spec in _walk(item, rest)] if isinstance(node, dict) else []
    return _walk(node[step], rest) if isinstance(node, dict) and step in node else []


def pod_specs(obj: dict[str, Any], kind: WorkloadKind) -> list[dict[str, Any]]:
    return [spec for path in kind.templates for spec in _walk(obj, path)]


def mapping(node: Any, key: str) -> dict[str, Any]:
    value = node.get(key) if isinstance(node, dict) else None
    return value if isinstance(value, dict) else {}


def sequence(node: Any, key: str) -> list[Any]:
    value = node.get(key) if isinstance(node, dict) else None
    return value if isinstance(value, list) else []


def text(node: Any, key: str) -> str | None:
    value = node.get(key) if isinstance(node, dict) else None
    return value if isinstance(value, str) else None


def is_controlled(obj: dict[str, Any]) -> bool:
    """Owned by a controller (a Job's pods, a JobSet's Jobs): the owner was checked, not the child."""
    return any(
        isinstance(ref, dict) and ref.get("controller") is True
        for ref in sequence(obj.get("metadata"), "ownerReferences")
    )


def whole(raw: Any) -> int | None:
    """A GPU count as written: an int, or a string of digits; anything else is not a count."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw if 0 <= raw < 10**MAX_DIGITS else None
    if isinstance(raw, str) and _WHOLE.match(raw):
        return int(raw)
    return None


def containers(spec: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    app = [c for c in sequence(spec, "containers") if isinstance(c, dict)]
    init = [c for c in sequence(spec, "initContainers") if isinstance(c, dict)]
    return app, init


def gpu_entries(container: dict[str, Any]) -> dict[str, Any]:
    """The container's GPU quantities as written: its requests, falling back to its limits."""
    resources = mapping(container, "resources")
    merged = {**mapping(resources, "limits"), **mapping(resources, "requests")}
    return {k: v for k, v in merged.items() if isinstance(k, str) and k.startswith(GPU_PREFIX)}


@dataclass(frozen=True)
class GpuAsk:
    """What one pod spec asks of GPUs, read in one pass over its containers (the webhook's hot path)."""

    invalid: bool  # some GPU quantity is not a whole count (in requests or limits)
    needs: dict[str, int]  # what the pod needs of each known resource it needs, in the known order
    unknown: bool  # some container asks for a GPU resource no pool of the fleet yields at all


def gpu_ask(spec: dict[str, Any], known: tuple[str, ...]) -> GpuAsk:
    invalid = unknown = False
    app_sum: dict[str, int] = {}
    init_max: dict[str, int] = {}
    for counts, key in ((app_sum, "containers"), (init_max, "initContainers")):
        for c in sequence(spec, key):
            if not isinstance(c, dict):
                continue
            resources = mapping(c, "resources")
            entries: dict[str, Any] = {}  # requests, falling back to limits (gpu_entries)
            for part in (mapping(resources, "limits"), mapping(resources, "requests")):
                for k, v in part.items():
                    if isinstance(k, str) and k.startswith(GPU_PREFIX):
                        entries[k] = v
                        invalid = invalid or whole(v) is None
            for r, v in entries.items():
                n = whole(v) or 0
                if r not in known:
                    unknown = unknown or n > 0
                elif counts is app_sum:
                    app_sum[r] = app_sum.get(r, 0) + n
                else:
                    init_max[r] = max(init_max.get(r, 0), n)
    needs = {}
    for r in known:
        total = max(app_sum.get(r, 0), init_max.get(r, 0))
        if total > 0:
            needs[r] = total
    return GpuAsk(invalid, needs, unknown)


def has_invalid_count(spec: dict[str, Any]) -> bool:
    return gpu_ask(spec, ()).invalid


def pod_gpus(spec: dict[str, Any], resources: tuple[str, ...]) -> dict[str, int]:
    """What the pod needs of each resource in ``resources`` (only those it needs, in the given order).

    A container's count is its request, or its limit when it sets no request; a pod needs the sum
    over its containers or the largest init container, whichever is more."""
    return gpu_ask(spec, resources).needs


def unknown_gpus(spec: dict[str, Any], known: tuple[str, ...]) -> bool:
    """Whether some container asks for a GPU resource no pool of the fleet yields at all."""
    return gpu_ask(spec, known).unknown


def pod_claims(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod's ``resourceClaims`` entries (a claim made from a template, or a ResourceClaim by name)."""
    return [c for c in sequence(spec, "resourceClaims") if isinstance(c, dict)]


def claim_needs(spec: dict[str, Any], known: tuple[str, ...]) -> dict[str, int]:
    """Devices the pod claims through gpufleet's templates, as ``CLAIM_PREFIX + template`` -> count.

    Kueue counts one claim per pod entry naming a template, whichever containers use it, and each of
    gpufleet's templates asks for one device; templates gpufleet did not render are not GPUs it knows."""
    needs: dict[str, int] = {}
    for entry in pod_claims(spec):
        name = text(entry, "resourceClaimTemplateName")
        if name is not None and CLAIM_PREFIX + name in known:
            needs[CLAIM_PREFIX + name] = needs.get(CLAIM_PREFIX + name, 0) + 1
    return {k: needs[k] for k in known if k in needs}
