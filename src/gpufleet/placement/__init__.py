"""Placement below the quota: what the Kubernetes scheduler would do with a pod on a set of nodes."""

from gpufleet.placement.cluster import Cluster
from gpufleet.placement.decision import Placement, Unschedulable
from gpufleet.placement.fragmentation import FragmentMeter, Shape, ShapeMix
from gpufleet.placement.node import GPU, GPU_SHARED, MILLI, NodeSpec, Taint, TaintEffect, mig_resource
from gpufleet.placement.pod import Operator, PodSpec, Requirement, Toleration
from gpufleet.placement.scoring import FragmentationAware, LeastAllocated, MostAllocated, Policy
from gpufleet.placement.state import DeviceSlot, NodeState

__all__ = [
    "GPU",
    "GPU_SHARED",
    "MILLI",
    "Cluster",
    "DeviceSlot",
    "FragmentMeter",
    "FragmentationAware",
    "LeastAllocated",
    "MostAllocated",
    "NodeSpec",
    "NodeState",
    "Operator",
    "Placement",
    "PodSpec",
    "Policy",
    "Requirement",
    "Shape",
    "ShapeMix",
    "Taint",
    "TaintEffect",
    "Toleration",
    "Unschedulable",
    "mig_resource",
]
