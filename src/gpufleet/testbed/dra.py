"""The testbed's DRA mode: a stand-in for NVIDIA's DRA driver, and what the control plane adds for DRA.

On a cluster whose policy says ``dra: on`` (Kubernetes 1.34+), the cards of the pools ``gpufleet render``
hands out through DRA (``render.dra.dra_pools``) reach pods as ResourceClaims, not as the device plugin's
extended resources. A real node would run NVIDIA's DRA kubelet plugin (github.com/NVIDIA/k8s-dra-driver-gpu,
``cmd/gpu-kubelet-plugin``), which publishes one ResourceSlice per node. kwok runs no kubelet plugin, so
this module writes the slice that plugin would publish, through ``gpufleet.kube``, and the nodes of those
pools carry no ``nvidia.com/gpu`` or ``nvidia.com/mig-*`` capacity (a card published both ways would
be counted twice by kube-scheduler).

What is published follows the driver's source (paths in that repository, read at commit 22407113):

- driver name ``gpu.nvidia.com`` (``cmd/gpu-kubelet-plugin/main.go``, ``DriverName``);
- one pool per node, named after the node, one slice holding every device, when the DynamicMIG feature
  gate is off (``driver.go``, ``publishResources``): static MIG, the GPU Operator's MIG Manager cuts;
- a whole card: name ``gpu-<minor>`` (``deviceinfo.go``, ``GpuInfo.CanonicalName``); attributes ``type``
  = ``gpu`` (``types.go``, ``GpuDeviceType``), ``uuid``, ``productName`` (NVML's device name),
  ``architecture`` (go-nvlib's ``GetArchitectureAsString``: ``Ampere``, ``Hopper``...) and the standard
  ``resource.kubernetes.io/pciBusID`` (``deviceinfo.go``, ``GpuInfo.Attributes``); capacity ``memory`` in
  bytes (``partitions.go``, ``fullGpuCapacity``);
- a MIG instance: name ``gpu-<minor>-mig-<profile without dots>-<GI profile id>-<start>`` (``mig.go``,
  ``ToCanonicalName``); attributes ``type`` = ``mig``, ``parentUUID``, ``profile``, ``productName``,
  ``architecture`` (``mig.go``, ``CommonAttributesMig``) and ``uuid`` (``deviceinfo.go``,
  ``MigDeviceInfo.GetDevice``); capacity ``memory`` in bytes (``mig.go``, ``CommonCapacitiesMig``) and
  ``memorySlice<i>`` = 1 per memory slice held; a card cut into MIG instances is not announced whole.

Left out, because nothing gpufleet renders or Kueue counts reads them and NVML is needed to know them:
``brand``, the driver and CUDA versions, ``pcieRoot``, and the MIG engine counts (``multiprocessors``,
``copyEngines``, ``decoders``, ``encoders``, ``jpegEngines``, ``ofaEngines``). Partitionable devices
(DynamicMIG, shared counters) are not published yet.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

from gpufleet import kube
from gpufleet.gpus import place
from gpufleet.gpus.catalogue import GpuModel
from gpufleet.policy.capacity import PoolCapacity
from gpufleet.policy.fleet import Fleet
from gpufleet.render import dra
from gpufleet.render.common import POOL_LABEL, Obj
from gpufleet.testbed.nodes import node_names

#: kube-controller-manager's controller that creates a pod's claims from its ResourceClaimTemplates
#: (k8s.io/kubernetes v1.36.5 ``cmd/kube-controller-manager/names/controller_names.go``).
CONTROLLERS = ("resourceclaim-controller",)
FIELD_MANAGER = "gpufleet-testbed-dra-driver"
GIB = 1 << 30
MIB = 1 << 20

#: NVML's device name for the catalogue's products whose GPU Feature Discovery label turned spaces into
#: dashes (GFD writes the NVML name with spaces as dashes); a product absent here has no space in it.
NVML_NAMES = {
    "NVIDIA-A100-80GB-PCIe": "NVIDIA A100 80GB PCIe",
    "NVIDIA-H100-80GB-HBM3": "NVIDIA H100 80GB HBM3",
    "NVIDIA-H100-PCIe": "NVIDIA H100 PCIe",
    "NVIDIA-H100-NVL": "NVIDIA H100 NVL",
    "NVIDIA-H200": "NVIDIA H200",
    "NVIDIA-H200-NVL": "NVIDIA H200 NVL",
    "NVIDIA-GH200-480GB": "NVIDIA GH200 480GB",
    "NVIDIA-GH200-144G-HBM3e": "NVIDIA GH200 144G HBM3e",
    "NVIDIA-A100-SXM4-40GB": "NVIDIA A100-SXM4-40GB",
    "NVIDIA-A100-PCIE-40GB": "NVIDIA A100-PCIE-40GB",
    "NVIDIA-A100-SXM4-80GB": "NVIDIA A100-SXM4-80GB",
    "NVIDIA-A30": "NVIDIA A30",
    "NVIDIA-B200": "NVIDIA B200",
    "NVIDIA-L4": "NVIDIA L4",
    "NVIDIA-L40S": "NVIDIA L40S",
    "NVIDIA-L40": "NVIDIA L40",
    "NVIDIA-A10": "NVIDIA A10",
    "NVIDIA-A10G": "NVIDIA A10G",
    "Tesla-T4": "Tesla T4",
    "Tesla-V100-SXM2-16GB": "Tesla V100-SXM2-16GB",
    "Tesla-V100-SXM2-32GB": "Tesla V100-SXM2-32GB",
}
#: go-nvlib's architecture strings, by the catalogue's lower-case architecture.
ARCHITECTURES = {
    "volta": "Volta",
    "turing": "Turing",
    "ampere": "Ampere",
    "ada": "Ada Lovelace",
    "hopper": "Hopper",
    "blackwell": "Blackwell",
}
#: NVML's GPU-instance profile ids (``nvidia-smi mig -lgip``), by (memory slices of the card, compute
#: slices, memory slices of the profile, media extension): the same on every 8-slice card.
GI_PROFILE_IDS = {
    (8, 1, 1, False): 19,
    (8, 1, 1, True): 20,
    (8, 1, 2, False): 15,
    (8, 2, 2, False): 14,
    (8, 3, 4, False): 9,
    (8, 4, 4, False): 5,
    (8, 7, 8, False): 0,
    (4, 1, 1, False): 14,
    (4, 1, 1, True): 21,
    (4, 2, 2, False): 5,
    (4, 2, 2, True): 6,
    (4, 4, 4, False): 0,
}


def product_name(gpu: GpuModel) -> str:
    """NVML's name of the card, as the driver publishes it in ``productName``."""
    return NVML_NAMES.get(gpu.product, gpu.product)


def _uuid(prefix: str, *parts: object) -> str:
    """A stable fake UUID in NVML's form (``GPU-…``, ``MIG-…``), the same for the same node and card."""
    return f"{prefix}-{uuid.uuid5(uuid.NAMESPACE_URL, '/'.join(map(str, parts)))}"


def _string(value: str) -> dict[str, str]:
    return {"string": value}


def _rfc1123(name: str) -> str:
    """The driver's ``toRFC1123Compliant`` (``mig.go``): lower case, anything else than a-z0-9-. as a dash."""
    return re.sub(r"[^a-z0-9-.]", "-", name.lower()).strip("-").removesuffix(".")


def _card(cap: PoolCapacity, node: str, minor: int) -> tuple[str, dict[str, Obj]]:
    gpu_uuid = _uuid("GPU", node, minor)
    common = {
        "productName": _string(product_name(cap.gpu)),
        "architecture": _string(ARCHITECTURES.get(cap.gpu.architecture, cap.gpu.architecture.title())),
    }
    return gpu_uuid, common


def _mig_devices(cap: PoolCapacity, node: str, minor: int) -> list[Obj]:
    gpu, layout = cap.gpu, cap.decision.layout
    assert gpu.mig is not None and layout is not None  # a MIG pool's decision always has both
    placements = place(gpu, dict(layout)) or ()
    parent, common = _card(cap, node, minor)
    out: list[Obj] = []
    for p in placements:
        profile = gpu.mig.profile(p.profile)
        assert profile is not None
        key = (gpu.mig.memory_slices, profile.compute, profile.memory_slices, profile.is_media_extension)
        gi_id = GI_PROFILE_IDS.get(key, 0)
        name = f"gpu-{minor}-mig-{_rfc1123(p.profile.replace('.', ''))}-{gi_id}-{p.start}"
        capacity = {"memory": {"value": str(profile.memory_gb * 1024 * MIB)}}
        capacity |= {f"memorySlice{i}": {"value": "1"} for i in range(p.start, p.start + p.size)}
        attributes = {
            "type": _string("mig"),
            "uuid": _string(_uuid("MIG", node, minor, p.profile, p.start)),
            "parentUUID": _string(parent),
            "profile": _string(p.profile),
            **{k: dict(v) for k, v in common.items()},
        }
        out.append({"name": name, "attributes": attributes, "capacity": capacity})
    return out


def _gpu_device(cap: PoolCapacity, node: str, minor: int) -> Obj:
    gpu_uuid, common = _card(cap, node, minor)
    attributes = {
        "type": _string("gpu"),
        "uuid": _string(gpu_uuid),
        "resource.kubernetes.io/pciBusID": _string(f"0000:{0x18 + minor:02x}:00.0"),
        **common,
    }
    return {
        "name": f"gpu-{minor}",
        "attributes": attributes,
        "capacity": {"memory": {"value": str(cap.gpu.memory_gib * GIB)}},
    }


def devices(cap: PoolCapacity, node: str) -> list[Obj]:
    """The devices one node of the pool announces, sorted by name as the driver sorts them."""
    out: list[Obj] = []
    for minor in range(cap.pool.gpusPerNode):
        if cap.decision.mode == "mig":
            out += _mig_devices(cap, node, minor)
        else:
            out.append(_gpu_device(cap, node, minor))
    return sorted(out, key=lambda d: str(d["name"]))


def resource_slice(cap: PoolCapacity, node: str) -> Obj:
    """The one ResourceSlice the driver publishes for ``node`` (pool named after the node)."""
    return {
        "apiVersion": dra.API,
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{dra.DRIVER}", "labels": {POOL_LABEL: cap.pool.name}},
        "spec": {
            "driver": dra.DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices(cap, node),
        },
    }


def dra_pools(fleet: Fleet) -> list[PoolCapacity]:
    """The pools whose nodes publish slices: those ``gpufleet render`` hands out through DRA, if DRA is on."""
    return dra.dra_pools(fleet) if dra.enabled(fleet) else []


def resource_slices(fleet: Fleet) -> list[Obj]:
    """Every slice of the fleet: one per node of each DRA pool, in policy order."""
    return [resource_slice(cap, node) for cap in dra_pools(fleet) for node in node_names(cap)]


def controllers(fleet: Fleet) -> tuple[str, ...]:
    """The controllers kube-controller-manager runs in addition for DRA (none when DRA is off)."""
    return CONTROLLERS if dra.enabled(fleet) else ()


def without_device_plugin(node: Obj, fleet: Fleet) -> Obj:
    """``node`` without the device plugin's GPU resources when its pool is a DRA pool (no card twice)."""
    pools = {cap.pool.name for cap in dra_pools(fleet)}
    if node["metadata"]["labels"].get(POOL_LABEL) not in pools:
        return node
    status = node["status"]
    kept = {k: v for k, v in status["capacity"].items() if not k.startswith("nvidia.com/")}
    return {**node, "status": {**status, "capacity": kept, "allocatable": dict(kept)}}


def publish(slices: list[Obj], kubeconfig: Path) -> None:
    """Write the slices as the driver's kubelet plugin would, by server-side apply."""
    kube.apply_objects(slices, kubeconfig, field_manager=FIELD_MANAGER)
