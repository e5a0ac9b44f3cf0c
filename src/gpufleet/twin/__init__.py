"""The twin: a pure, deterministic model of Kueue ``v1beta2`` admission.

``Twin`` (in ``scheduler``) is the library entry point; ``parse_cluster`` (in ``objects``) turns
Kueue YAML into the frozen specs it takes. See docs/twin.md.
"""

from gpufleet.twin.apis.objects import parse_cluster
from gpufleet.twin.clocks import ClockSettings
from gpufleet.twin.kueue import Twin
from gpufleet.twin.results import Admitted, ClusterQueueStatus, CycleResult, Pending, Preempted

__all__ = [
    "Admitted", "ClockSettings", "ClusterQueueStatus", "CycleResult", "Pending", "Preempted", "Twin", "parse_cluster",
]  # fmt: skip
