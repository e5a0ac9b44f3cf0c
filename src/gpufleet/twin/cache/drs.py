"""Kueue v0.19.2: ``pkg/cache/scheduler/fair_sharing.go`` (``DRS``, ``CompareDRS``, ``WeightedShare``).

A node's dominant resource share as a value.

Apart from the computation (``fair_sharing.py``) because the quota node keeps its latest share
(``QuotaNode.share``) and the computation reads quota nodes: the value sits below both.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

INFINITE_SHARE = 9223372036854775807  # what Kueue's status shows for a zero-weight borrower


class DRS:
    """A node's dominant resource share; ``key`` sorts lower-is-fairer like Kueue's ``CompareDRS``."""

    __slots__ = ("_key", "borrowed", "ratio", "resource", "weight")

    def __init__(self, ratio: float, weight: float, borrowed: tuple[int, ...], resource: str) -> None:
        self.ratio = ratio
        self.weight = weight
        self.borrowed = borrowed  # flavor-resources on which the node is borrowing
        self.resource = resource
        # the comparison key, made once: searches compare one share many times
        if weight == 0 and borrowed:
            self._key = (1, ratio)
        else:
            self._key = (0, ratio / weight if ratio else 0.0)

    @property
    def borrowing(self) -> bool:
        return bool(self.borrowed)

    def key(self) -> tuple[int, float]:
        return self._key

    def weighted_share(self) -> int:
        """The integer ``status.fairSharing.weightedShare`` Kueue publishes (rounded up)."""
        if self.weight == 0 and self.borrowed:
            return INFINITE_SHARE
        return math.ceil(self.ratio / self.weight) if self.ratio else 0

    def borrowing_on(self, frs: Sequence[int]) -> bool:
        return any(fr in self.borrowed for fr in frs)
