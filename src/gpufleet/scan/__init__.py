"""``gpufleet scan``: see the fleet and the jobs before changing anything.

``fetch`` lists a live cluster into a ``Snapshot``; everything else is pure analysis of that value.
"""

from gpufleet.scan.report import FleetReport, analyse
from gpufleet.scan.snapshot import Snapshot

__all__ = ["FleetReport", "Snapshot", "analyse"]
