"""The figures of one window: per pool, and per team inside each pool.

Every figure is in GPU-hours of whole cards (a MIG instance weighs its compute slices, see
``fleetmap``) or a percentage. Definitions, each summed over the window's slots:

- capacity: the cards the policy declares × window hours (without a policy: the devices seen);
- allocated: the card share held by running pods' GPU requests (kube-state-metrics or the ledger);
- busy: utilization × device weight × slot length, over slots with a sample;
- utilization: busy / capacity for a pool, busy / allocated for a team;
- idle while allocated: (1 − utilization) over device-slots a pod held (DCGM's namespace label);
- idle while work waited: unheld device time while a workload waited (needs the ledger);
- memory headroom: framebuffer free / (used + free) over device-slots with both samples.

Coverage is the device-time with samples over the device-time expected; a team figure rests on
its pool's coverage, since the team's share of the missing time is unknown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gpufleet.evidence.allocation import Allocated
from gpufleet.evidence.coverage import Cell, Reason, declared, judge, not_measured, ratio
from gpufleet.evidence.fleetmap import FleetMap, PoolView
from gpufleet.evidence.tracks import NOBODY, SEVERAL, Track, Tracks
from gpufleet.evidence.waits import Waits, idle_while_waited

GPU_H = "GPU-h"
PCT = "%"
CAPACITY = "capacity"
ALLOCATED = "allocated"
BUSY = "busy"
UTILIZATION = "utilization"
IDLE_ALLOCATED = "idle_while_allocated"
IDLE_WAITED = "idle_while_work_waited"
MEMORY_HEADROOM = "memory_headroom"
FIGURES = (CAPACITY, ALLOCATED, BUSY, UTILIZATION, IDLE_ALLOCATED, IDLE_WAITED, MEMORY_HEADROOM)


@dataclass(frozen=True)
class Row:
    pool: str
    team: str | None  # None: the pool as a whole
    cells: dict[str, Cell]


@dataclass(frozen=True)
class Settings:
    min_coverage: float


def window_rows(
    tracks: Tracks, fmap: FleetMap, allocated: Allocated, waits: Waits | None, settings: Settings
) -> list[Row]:
    """Pool rows in policy order, each followed by its teams in policy order."""
    rows: list[Row] = []
    for pool in fmap.pools:
        ctx = _PoolContext(
            pool,
            tracks=tracks.by_pool.get(pool.name, []),
            all_tracks=tracks,
            allocated=allocated,
            waits=waits,
            settings=settings,
        )
        rows.append(Row(pool=pool.name, team=None, cells=ctx.pool_cells()))
        rows.extend(Row(pool=pool.name, team=team, cells=ctx.team_cells(team, nss)) for team, nss in fmap.teams.items())
    return rows


class _PoolContext:
    """One pool in one window: its tracks, expected device-time, coverage, and the missing time's bound."""

    def __init__(
        self,
        pool: PoolView,
        *,
        tracks: list[Track],
        all_tracks: Tracks,
        allocated: Allocated,
        waits: Waits | None,
        settings: Settings,
    ) -> None:
        self.pool, self.tracks, self.allocated, self.waits, self.settings = pool, tracks, allocated, waits, settings
        self.window = all_tracks.window
        self.namespaces = all_tracks.namespaces
        self.h = self.window.slot_hours
        slots = self.window.slots
        cards = pool.capacity_gpus if pool.capacity_gpus is not None else sum(t.weight for t in tracks)
        self.capacity_h = cards * self.window.hours
        self.expected = cards * slots
        self.covered = float(sum(t.weight * t.covered.sum() for t in tracks))
        self.coverage = self.covered / self.expected if self.expected else 0.0
        self.missing_h = max(self.expected - self.covered, 0.0) * self.h
        self.labelled = any(t.labelled for t in tracks)
        self.shared = any(bool((t.owner == SEVERAL).any()) for t in tracks)
        self.source = "dcgm"

    # -- why a DCGM figure cannot be given at all (before the coverage rule is even asked)
    def _blocked(self, unit: str) -> Cell | None:
        pool = self.pool
        if pool.unmapped:
            return not_measured(unit, Reason.NO_NODE_NAMES, pool.unmapped)
        if not self.tracks:
            where = f"nodes {', '.join(sorted(pool.nodes))}" if pool.nodes else f"model {pool.model_label}"
            return not_measured(unit, Reason.NO_SERIES, f"no DCGM series from {where} in the window")
        if self.coverage > 1.0 + 1e-9:
            return not_measured(
                unit,
                Reason.POLICY_MISMATCH,
                f"devices worth {self.covered / self.window.slots:.2f} cards report from the pool's nodes; "
                f"the policy declares {pool.capacity_gpus:g}",
            )
        return None

    def _team_blocked(self, unit: str, owned: np.ndarray | None, team_namespaces: Sequence[str]) -> Cell | None:
        blocked = self._blocked(unit)
        if blocked is not None:
            return blocked
        if self.pool.mode == "timeslice" or self.shared:
            return not_measured(
                unit,
                Reason.TIME_SLICED,
                "the cards are time-sliced: DCGM reports the whole card and cannot say which container used it",
            )
        if not self.labelled:
            return not_measured(
                unit,
                Reason.MISSING_LABELS,
                "DCGM series carry no namespace label: run dcgm-exporter with its Kubernetes mapping (-k)",
            )
        if owned is None:
            return not_measured(
                unit, Reason.NO_SERIES, f"no DCGM series carry the team's namespaces ({', '.join(team_namespaces)})"
            )
        return None

    def _judge(self, value: float, what: str) -> Cell:
        """The coverage rule on a GPU-hours figure of this pool's DCGM series; bounds from the missing time."""
        return judge(
            GPU_H,
            value,
            coverage=self.coverage,
            min_coverage=self.settings.min_coverage,
            missing=self.missing_h,
            what=what,
            source=self.source,
        )

    # -- sums over device-slots, optionally restricted to the slots a set of namespaces held
    def _masks(self, owners: np.ndarray | None) -> list[np.ndarray]:
        if owners is None:
            return [np.ones(self.window.slots, dtype=bool) for _ in self.tracks]
        return [np.isin(t.owner, owners) for t in self.tracks]

    def _busy(self, masks: list[np.ndarray]) -> float:
        return float(sum(t.weight * np.nansum(t.util[m]) for t, m in zip(self.tracks, masks, strict=True))) * self.h

    def _idle_held(self, masks: list[np.ndarray]) -> float:
        total = 0.0
        for t, m in zip(self.tracks, masks, strict=True):
            held = m & (t.owner != NOBODY)
            total += t.weight * float(np.nansum(1.0 - t.util[held]))
        return total * self.h

    def _memory(self, masks: list[np.ndarray], expected: float) -> Cell:
        """Headroom over the device-slots in ``masks``; coverage is against ``expected`` device-slots."""
        used = free = 0.0
        sampled = 0.0
        for t, m in zip(self.tracks, masks, strict=True):
            both = m & ~np.isnan(t.fb_used) & ~np.isnan(t.fb_free)
            used += float(t.fb_used[both].sum())
            free += float(t.fb_free[both].sum())
            sampled += t.weight * float(both.sum())
        if sampled == 0 or used + free <= 0:
            return not_measured(PCT, Reason.NO_SERIES, "no DCGM_FI_DEV_FB_USED and DCGM_FI_DEV_FB_FREE samples")
        memory = judge(
            PCT,
            free / (used + free) * 100,
            coverage=sampled / expected if expected else 0.0,
            min_coverage=self.settings.min_coverage,
            missing=0.0,
            what="framebuffer series",
            source=self.source,
        )
        # headroom is a share of sampled memory: the missing device-time bounds nothing we can state
        return memory if not memory.measured else Cell(PCT, memory.value, coverage=memory.coverage, source="dcgm")

    def _allocated(self, namespaces: Sequence[str] | None) -> Cell:
        alloc = self.allocated
        if alloc.absent:
            return not_measured(GPU_H, Reason.NO_SERIES, alloc.absent)
        if self.pool.unmapped:
            return not_measured(GPU_H, Reason.NO_NODE_NAMES, self.pool.unmapped)
        held = alloc.by_pool.get(self.pool.name, {})
        chosen = held if namespaces is None else {ns: held[ns] for ns in namespaces if ns in held}
        if namespaces is not None and not chosen:
            return not_measured(
                GPU_H, Reason.NO_SERIES, f"no GPU requests from the team's namespaces ({', '.join(namespaces)})"
            )
        alive = alloc.alive.get(self.pool.name, 0.0)
        value = float(sum(a.sum() for a in chosen.values())) * self.h
        return judge(
            GPU_H,
            value,
            coverage=alive,
            min_coverage=self.settings.min_coverage,
            missing=(1.0 - alive) * self.capacity_h,
            what=f"{alloc.source} series",
            source=alloc.source,
        )

    def _waited(self, namespaces: Sequence[str] | None) -> Cell:
        """Unheld device time while the team's (or, for the pool, anyone's) work waited.

        A team needs no series of its own for this: the cards it waited for were held by nobody.
        """
        if self.waits is None:
            return not_measured(GPU_H, Reason.NO_LEDGER, "needs the ledger's wait intervals (--ledger)")
        blocked = self._blocked(GPU_H)
        if blocked is not None:
            return blocked
        if not self.labelled:
            return not_measured(
                GPU_H, Reason.MISSING_LABELS, "DCGM series carry no namespace label, so unheld cards are unknown"
            )
        waited = self.waits.waiting(namespaces, self.window)
        value = idle_while_waited(self.tracks, waited) * self.h
        return self._judge(value, "DCGM utilization series")

    def pool_cells(self) -> dict[str, Cell]:
        pool = self.pool
        capacity = declared(GPU_H, self.capacity_h, "declared" if pool.capacity_gpus is not None else "devices seen")
        allocated = self._allocated(None)
        blocked = self._blocked(GPU_H)
        masks = self._masks(None)
        if blocked is not None:
            pct = Cell(PCT, reason=blocked.reason, message=blocked.message)
            return {
                CAPACITY: capacity,
                ALLOCATED: allocated,
                BUSY: blocked,
                UTILIZATION: pct,
                IDLE_ALLOCATED: blocked,
                IDLE_WAITED: self._waited(None),
                MEMORY_HEADROOM: pct,
            }
        busy = self._judge(self._busy(masks), "DCGM utilization series")
        if self.labelled:
            idle = self._judge(self._idle_held(masks), "DCGM utilization series")
        else:
            idle = not_measured(
                GPU_H,
                Reason.MISSING_LABELS,
                "DCGM series carry no namespace label: run dcgm-exporter with its Kubernetes mapping (-k)",
            )
        return {
            CAPACITY: capacity,
            ALLOCATED: allocated,
            BUSY: busy,
            UTILIZATION: ratio(PCT, busy, capacity),
            IDLE_ALLOCATED: idle,
            IDLE_WAITED: self._waited(None),
            MEMORY_HEADROOM: self._memory(masks, self.expected),
        }

    def team_cells(self, team: str, namespaces: Sequence[str]) -> dict[str, Cell]:
        indices = [i for i, ns in enumerate(self.namespaces) if ns in namespaces]
        owned = np.array(indices, dtype=np.int64) if indices else None
        if owned is not None and not any(bool(np.isin(t.owner, owned).any()) for t in self.tracks):
            owned = None
        allocated = self._allocated(namespaces)
        blocked = self._team_blocked(GPU_H, owned, namespaces)
        if blocked is not None:
            pct = Cell(PCT, reason=blocked.reason, message=blocked.message)
            return {
                ALLOCATED: allocated,
                BUSY: blocked,
                UTILIZATION: pct,
                IDLE_ALLOCATED: blocked,
                IDLE_WAITED: self._waited(namespaces),
                MEMORY_HEADROOM: pct,
            }
        masks = self._masks(owned)
        busy = self._judge(self._busy(masks), "DCGM utilization series")
        return {
            ALLOCATED: allocated,
            BUSY: busy,
            UTILIZATION: ratio(PCT, busy, allocated),
            IDLE_ALLOCATED: self._judge(self._idle_held(masks), "DCGM utilization series"),
            IDLE_WAITED: self._waited(namespaces),
            MEMORY_HEADROOM: self._memory(masks, self._held(masks)),
        }

    def _held(self, masks: list[np.ndarray]) -> float:
        """Device-slots (card-weighted) in ``masks`` that had a utilization sample: a team's sampled holding."""
        return float(sum(t.weight * (t.covered & m).sum() for t, m in zip(self.tracks, masks, strict=True)))
