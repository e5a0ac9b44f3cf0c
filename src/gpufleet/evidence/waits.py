"""What evidence needs from the ledger, as plain values: who held GPUs where, and who waited when.

The ledger's records (``gpufleet.ledger``) are richer; ``LedgerView`` is the small slice the figures
read, so the join stays in one place and a twin run or a test can hand the same shape over.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from gpufleet.evidence.tracks import NOBODY, Floats, Track
from gpufleet.evidence.window import Window


@dataclass(frozen=True, slots=True)
class HeldSpan:
    """GPUs one workload held on one node, from ``start`` until ``end`` (None: still held)."""

    namespace: str
    node: str
    resource: str  # a Kubernetes resource name, e.g. nvidia.com/gpu or nvidia.com/mig-3g.40gb
    count: int
    start: datetime
    end: datetime | None


@dataclass(frozen=True, slots=True)
class WaitSpan:
    """A workload of ``namespace`` pending from ``start`` until ``end`` (None: still pending)."""

    namespace: str
    start: datetime
    end: datetime | None


@dataclass(frozen=True)
class LedgerView:
    held: tuple[HeldSpan, ...]
    waits: tuple[WaitSpan, ...]
    simulated: bool  # some records came from a twin run


def span_slots(window: Window, start: datetime, end: datetime | None) -> Floats:
    """Share of each slot that ``[start, end)`` overlaps (0–1)."""
    edges = window.start.timestamp() + np.arange(window.slots + 1) * window.step_s
    lo = start.timestamp()
    hi = window.end.timestamp() if end is None else end.timestamp()
    overlap = np.clip(np.minimum(edges[1:], hi) - np.maximum(edges[:-1], lo), 0, None)
    return np.asarray(overlap / window.step_s, dtype=np.float64)


@dataclass(frozen=True)
class Waits:
    spans: tuple[WaitSpan, ...]

    def waiting(self, namespaces: Sequence[str] | None, window: Window) -> np.ndarray:
        """Slots in which a workload of ``namespaces`` (any, for a pool row) was waiting.

        Wait intervals do not name a pool (a workload waits for quota, not for a node), so a pool row
        counts any workload's wait; a team row counts its own.
        """
        mask = np.zeros(window.slots, dtype=bool)
        for span in self.spans:
            if namespaces is None or span.namespace in namespaces:
                mask |= span_slots(window, span.start, span.end) > 0
        return mask


def idle_while_waited(tracks: Sequence[Track], waited: np.ndarray) -> float:
    """Card share × slots that no pod held (and that had a sample) while some workload waited."""
    total = 0.0
    for track in tracks:
        unheld = waited & track.covered & (track.owner == NOBODY)
        total += track.weight * float(unheld.sum())
    return total
