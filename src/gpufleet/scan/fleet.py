"""From listed nodes and pods to the fleet as an engagement starts from it: GPU pools and GPU pods.

Nodes group into pools by the first node-pool label they carry (gpufleet's own, then the clouds'),
else by GPU product and MIG configuration. A pool is described by what GPU Feature Discovery, the
MIG Manager and the device plugin wrote on its nodes. A GPU pod is any pod asking for an
``nvidia.com/`` resource; its team is its own team label, else its namespace's; it is queued when
it or its owning Job names a Kueue LocalQueue; it is serving when a container runs vLLM.
Pools are ordered by name, pods by namespace then name: one sort key each.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

from gpufleet.gpus import GpuModel, models
from gpufleet.policy.slicing import SlicingMode
from gpufleet.scan.quantity import count
from gpufleet.scan.slices import NodeDevices, node_devices
from gpufleet.scan.snapshot import Obj, Snapshot, labels, name, namespace

GPU_PREFIX = "nvidia.com/"
POOL_LABELS = (
    "gpufleet.io/pool",
    "kubernetes.azure.com/agentpool",
    "eks.amazonaws.com/nodegroup",
    "cloud.google.com/gke-nodepool",
    "karpenter.sh/nodepool",
)
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
SERVING_ROLE_LABEL = "gpufleet.io/role"
FINISHED = ("Succeeded", "Failed")
_NOT_DNS = re.compile(r"[^a-z0-9-]+")


@dataclass(frozen=True)
class NodePool:
    name: str
    selector: tuple[str, str] | None  # the node-pool label and value that select it, if any
    product: str | None
    model: str | None  # the catalogue's name for the product
    nodes: tuple[str, ...]
    gpus_per_node: int  # physical cards
    sharing: SlicingMode
    mig_config: str | None
    mig_state: str | None
    replicas: int | None  # time-slicing replicas per card
    units: dict[str, int]  # allocatable GPU units across the pool, per resource
    taints: tuple[str, ...]  # key=value:Effect, sorted
    dra: bool = False  # its GPUs are announced as DRA devices (ResourceSlices), not extended resources


@dataclass(frozen=True)
class GpuPod:
    namespace: str
    name: str
    team: str | None
    node: str | None
    pool: str | None
    phase: str
    requests: dict[str, int]
    queue: str | None
    serving: bool


def slug(text: str) -> str:
    return _NOT_DNS.sub("-", text.lower()).strip("-")[:63].strip("-") or "pool"


def gpu_units(resources: dict[str, object]) -> dict[str, int]:
    return {k: count(v) for k, v in sorted(resources.items()) if k.startswith(GPU_PREFIX) and count(v) > 0}


def model_for(product: str | None) -> GpuModel | None:
    """The catalogue model whose GFD product name is ``product`` (ignoring -SHARED and -MIG-… suffixes)."""
    if not product:
        return None
    base = product.removesuffix("-SHARED").split("-MIG-", 1)[0]
    return next((m for m in models() if m.product.casefold() == base.casefold()), None)


def _pool_key(node: Obj) -> tuple[str, tuple[str, str] | None]:
    lab = labels(node)
    for key in POOL_LABELS:
        if lab.get(key):
            return slug(lab[key]), (key, lab[key])
    product = lab.get("nvidia.com/gpu.product", "gpu")
    config = lab.get("nvidia.com/mig.config")
    suffix = f"-{config}" if config and config != "all-disabled" else ""
    return slug(product.removeprefix("NVIDIA-") + suffix), None


def is_gpu_node(node: Obj) -> bool:
    allocatable = node.get("status", {}).get("allocatable") or {}
    return bool(gpu_units(allocatable)) or labels(node).get("nvidia.com/gpu.present") == "true"


def _taint(t: Obj) -> str:
    value = f"={t['value']}" if t.get("value") else ""
    return f"{t['key']}{value}:{t.get('effect', '')}"


def _pool(
    pool_name: str, selector: tuple[str, str] | None, members: list[Obj], dra: dict[str, NodeDevices]
) -> NodePool:
    first = labels(members[0])
    product = first.get("nvidia.com/gpu.product")
    units: dict[str, int] = defaultdict(int)
    for node in members:
        for resource, n in gpu_units(node.get("status", {}).get("allocatable") or {}).items():
            units[resource] += n
        for resource, n in dra.get(name(node), NodeDevices()).units.items():
            units[resource] += n
    physical = count(first.get("nvidia.com/gpu.count", "0")) or len(dra.get(name(members[0]), NodeDevices()).cards)
    mig_resources = [r for r in units if r.startswith(f"{GPU_PREFIX}mig-")]
    replicas_label = count(first.get("nvidia.com/gpu.replicas", "0"))
    if mig_resources or first.get("nvidia.com/mig.strategy"):
        sharing, replicas = SlicingMode.MIG, None
    elif first.get("nvidia.com/gpu.sharing-strategy") == "time-slicing" and physical:
        sharing, replicas = SlicingMode.TIMESLICE, replicas_label // physical
    else:
        sharing, replicas = SlicingMode.FULL, None
    if not physical:
        physical = units.get(f"{GPU_PREFIX}gpu", 0) // len(members)
    model = model_for(product)
    taints = sorted({_taint(t) for node in members for t in node.get("spec", {}).get("taints") or []})
    return NodePool(
        name=pool_name,
        selector=selector,
        product=product,
        model=model.name if model else None,
        nodes=tuple(sorted(name(n) for n in members)),
        gpus_per_node=physical,
        sharing=sharing,
        mig_config=first.get("nvidia.com/mig.config"),
        mig_state=first.get("nvidia.com/mig.config.state"),
        replicas=replicas,
        units=dict(sorted(units.items())),
        taints=tuple(taints),
        dra=any(name(n) in dra for n in members),
    )


def node_pools(snapshot: Snapshot) -> list[NodePool]:
    groups: dict[tuple[str, tuple[str, str] | None], list[Obj]] = defaultdict(list)
    dra = node_devices(snapshot.resource_slices)
    for node in snapshot.nodes:
        if is_gpu_node(node) or name(node) in dra:
            groups[_pool_key(node)].append(node)
    pools = (_pool(key, sel, members, dra) for (key, sel), members in groups.items())
    return sorted(pools, key=lambda p: p.name)


def pool_of_node(pools: list[NodePool]) -> dict[str, str]:
    return {node: p.name for p in pools for node in p.nodes}


def _requests(pod: Obj) -> dict[str, int]:
    total: dict[str, int] = defaultdict(int)
    spec = pod.get("spec", {})
    for container in spec.get("containers") or []:
        res = container.get("resources") or {}
        # a device resource's request must equal its limit; either one alone is also how it is asked for
        asked = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        for resource, n in gpu_units(asked).items():
            total[resource] += n
    init: dict[str, int] = defaultdict(int)
    for container in spec.get("initContainers") or []:
        res = container.get("resources") or {}
        for resource, n in gpu_units({**(res.get("limits") or {}), **(res.get("requests") or {})}).items():
            init[resource] = max(init[resource], n)
    return {r: max(total.get(r, 0), init.get(r, 0)) for r in sorted({*total, *init})}


def is_serving(pod: Obj, namespace_labels: dict[str, str]) -> bool:
    if labels(pod).get(SERVING_ROLE_LABEL) == "serving" or namespace_labels.get(SERVING_ROLE_LABEL) == "serving":
        return True
    for container in pod.get("spec", {}).get("containers") or []:
        words = [
            str(container.get("image", "")),
            *map(str, container.get("command") or []),
            *map(str, container.get("args") or []),
        ]
        if any("vllm" in w.lower() for w in words):
            return True
    return False


def gpu_pods(snapshot: Snapshot, pools: list[NodePool], team_label: str) -> list[GpuPod]:
    """Active (not finished) pods that ask for GPUs, in namespace then name order."""
    ns_labels = {name(ns): labels(ns) for ns in snapshot.namespaces}
    job_queue = {(namespace(j), name(j)): labels(j).get(QUEUE_LABEL) for j in snapshot.jobs}
    node_pool = pool_of_node(pools)
    out: list[GpuPod] = []
    for pod in snapshot.pods:
        requests = _requests(pod)
        phase = str(pod.get("status", {}).get("phase", "Pending"))
        if not requests or phase in FINISHED:
            continue
        ns = namespace(pod)
        queue = labels(pod).get(QUEUE_LABEL)
        for owner in pod.get("metadata", {}).get("ownerReferences") or []:
            if owner.get("kind") == "Job" and not queue:
                queue = job_queue.get((ns, owner.get("name", "")))
        node = pod.get("spec", {}).get("nodeName")
        out.append(
            GpuPod(
                namespace=ns,
                name=name(pod),
                team=labels(pod).get(team_label) or ns_labels.get(ns, {}).get(team_label),
                node=node,
                pool=node_pool.get(node) if node else None,
                phase=phase,
                requests=requests,
                queue=queue,
                serving=is_serving(pod, ns_labels.get(ns, {})),
            )
        )
    return sorted(out, key=lambda p: (p.namespace, p.name))
