"""The twin: a pure, deterministic model of Kueue ``v1beta2`` admission, laid out as Kueue
v0.19.2's ``pkg/``: ``apis/`` (objects and Configuration), ``cache/`` (the quota tree),
``queue/`` (the queue manager), ``scheduler/`` (the cycle, ``flavorassigner``, ``preemption/``),
``controller/`` (status writes), ``clocks.py``; ``fastpath/`` holds the twin's own shortcuts,
all off with ``Twin(spec, fast=False)``.

``Twin`` (in ``kueue``) is the library entry point; ``parse_cluster`` (in ``apis/objects``) turns
Kueue YAML into the frozen specs it takes. See docs/twin.md.
"""

from gpufleet.twin.apis.objects import parse_cluster
from gpufleet.twin.clocks import ClockSettings
from gpufleet.twin.kueue import Twin
from gpufleet.twin.results import Admitted, ClusterQueueStatus, CycleResult, Pending, Preempted

__all__ = [
    "Admitted", "ClockSettings", "ClusterQueueStatus", "CycleResult", "Pending", "Preempted", "Twin", "parse_cluster",
]  # fmt: skip
