"""Kueue v0.19.2: ``pkg/cache/scheduler/snapshot.go``.

The cycle's view of quota (Kueue's cache snapshot): the live tree plus an undo journal.

Kueue deep-copies its cache at the start of a cycle and adds the usage of preemptors and of
reservations for stuck preemptors to the copy. The twin adds that usage to the live quota tree
instead and journals it, so nothing is copied; ``rollback`` at the end of the cycle removes it
in reverse order. Admissions go to the tree directly and are not journalled: they stay.
"""

from __future__ import annotations

from gpufleet.twin.cache.resource_node import QuotaNode, add_usage, remove_usage


class Snapshot:
    """Transient usage added to the live quota tree for one cycle, undone by ``rollback``."""

    __slots__ = ("_journal",)

    def __init__(self) -> None:
        self._journal: list[tuple[QuotaNode, dict[int, int]]] = []

    def add_transient(self, node: QuotaNode, usage: dict[int, int]) -> None:
        for fr, q in usage.items():
            add_usage(node, fr, q)
        self._journal.append((node, usage))

    def rollback(self) -> None:
        for node, usage in reversed(self._journal):
            for fr, q in usage.items():
                remove_usage(node, fr, q)
        self._journal.clear()
