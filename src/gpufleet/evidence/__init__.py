"""Before/after utilization from the cluster's own metrics — measured, or "not measured" and why."""

from gpufleet.evidence.build import Evidence, assemble, select_pools
from gpufleet.evidence.collect import WindowInput, collect
from gpufleet.evidence.coverage import DEFAULT_MIN_COVERAGE, Cell, Reason
from gpufleet.evidence.figures import FIGURES, Settings
from gpufleet.evidence.fleetmap import FleetMap, from_policy
from gpufleet.evidence.output import cell_text, write
from gpufleet.evidence.waits import HeldSpan, LedgerView, WaitSpan
from gpufleet.evidence.window import Window, check_order, parse_window

__all__ = [
    "DEFAULT_MIN_COVERAGE",
    "FIGURES",
    "Cell",
    "Evidence",
    "FleetMap",
    "HeldSpan",
    "LedgerView",
    "Reason",
    "Settings",
    "WaitSpan",
    "Window",
    "WindowInput",
    "assemble",
    "cell_text",
    "check_order",
    "collect",
    "from_policy",
    "parse_window",
    "select_pools",
    "write",
]
