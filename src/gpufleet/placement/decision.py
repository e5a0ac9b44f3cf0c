"""The scheduler's answer for one pod: where it was placed, or why no node would take it."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from gpufleet.placement.filters import unavailable_message
from gpufleet.placement.state import DeviceSlot


@dataclass(frozen=True, slots=True)
class Placement:
    """A bound pod: node and the devices it holds (the ledger records both)."""

    pod: str
    node: str
    devices: tuple[DeviceSlot, ...] = ()
    reason: str = "Scheduled"

    @property
    def message(self) -> str:
        return f"Successfully assigned {self.pod} to {self.node}"


@dataclass(frozen=True, slots=True)
class Unschedulable:
    """No node passed the filters; ``histogram`` counts nodes per kube-scheduler reason."""

    pod: str
    total_nodes: int
    histogram: tuple[tuple[str, int], ...]
    reason: str = "Unschedulable"

    @property
    def message(self) -> str:
        return _message(self.total_nodes, self.histogram)


@lru_cache(maxsize=4096)
def _message(total_nodes: int, histogram: tuple[tuple[str, int], ...]) -> str:
    """The FitError text, remembered (nothing but the two arguments decides it): a pod waiting
    round after round is told the same thing."""
    return unavailable_message(total_nodes, dict(histogram))
