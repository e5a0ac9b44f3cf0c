"""Placement below the quota: what the Kubernetes scheduler would do with a pod on a set of nodes."""

from gpufleet.placement.cluster import Cluster
from gpufleet.placement.decision import Placement, Unschedulable
from gpufleet.placement.fragmentation import FragmentMeter, Shape, ShapeMix
from gpufleet.placement.node import MILLI, NodeSpec
from gpufleet.placement.pod import PodSpec
from gpufleet.placement.scoring import FragmentationAware, LeastAllocated, MostAllocated, Policy
from gpufleet.placement.state import DeviceSlot, NodeState
from gpufleet.vocabulary import (
    GPU,
    GPU_SHARED,
    Operator,
    Requirement,
    Taint,
    TaintEffect,
    Toleration,
    TolerationOperator,
    mig_resource,
)

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
    "TolerationOperator",
    "Unschedulable",
    "mig_resource",
]
