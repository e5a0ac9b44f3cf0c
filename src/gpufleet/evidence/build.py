"""Assembling the evidence: both windows' figures, the changes between them, and the chart lines.

Pure: it takes what ``collect`` fetched (or what a twin run produced) and returns values.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from gpufleet.errors import InputError, Problem
from gpufleet.evidence import allocation
from gpufleet.evidence.change import Change, compare, per_hour
from gpufleet.evidence.collect import WindowInput
from gpufleet.evidence.figures import BUSY, UTILIZATION, Row, Settings, window_rows
from gpufleet.evidence.fleetmap import FleetMap, exporter_namespaces, from_series
from gpufleet.evidence.tracks import Floats, Tracks, build
from gpufleet.evidence.waits import LedgerView, Waits
from gpufleet.evidence.window import Window

CHART_POINTS = 240


@dataclass(frozen=True)
class ChartLine:
    pool: str
    hours: list[float]  # since the window's start
    utilization: list[float | None]  # % of the pool's cards; None where the points' slots lack coverage


@dataclass(frozen=True)
class WindowEvidence:
    window: Window
    rows: list[Row]
    lines: list[ChartLine]
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Evidence:
    source: str
    simulated: bool
    declared: bool  # pools and teams come from a policy
    min_coverage: float
    before: WindowEvidence
    after: WindowEvidence
    changes: list[Change]


def assemble(
    before: WindowInput,
    after: WindowInput,
    *,
    fmap: FleetMap | None,
    pools: list[str],
    ledger: LedgerView | None,
    settings: Settings,
    source: str,
    simulated: bool,
    exporters: frozenset[str] = frozenset(),
) -> Evidence:
    """Figures for both windows, restricted to ``pools`` when given (unknown names are an error).

    ``exporters`` are namespaces known to be the exporter's own; more are detected from the series.
    """
    labels = [s.labels for w in (before, after) for ss in w.metrics.values() for s in ss]
    exporters = exporters | exporter_namespaces(labels)
    fmap = from_series(labels, exporters) if fmap is None else replace(fmap, exporters=exporters)
    fmap = select_pools(fmap, pools)
    windows = [_window(w, fmap, ledger, settings) for w in (before, after)]
    changes: list[Change] = []
    for b, a in zip(windows[0].rows, windows[1].rows, strict=True):
        if b.team is None:
            changes.append(
                compare(
                    b.pool, None, figure=UTILIZATION, unit="pp", before=b.cells[UTILIZATION], after=a.cells[UTILIZATION]
                )
            )
        else:
            changes.append(
                compare(
                    b.pool,
                    b.team,
                    figure="busy GPUs (average)",
                    unit="GPUs",
                    before=per_hour(b.cells[BUSY], before.window.hours),
                    after=per_hour(a.cells[BUSY], after.window.hours),
                )
            )
    return Evidence(
        source=source,
        simulated=simulated or bool(ledger and ledger.simulated),
        declared=fmap.declared,
        min_coverage=settings.min_coverage,
        before=windows[0],
        after=windows[1],
        changes=changes,
    )


def select_pools(fmap: FleetMap, pools: list[str]) -> FleetMap:
    """Only the named pools; an unknown name is the user's mistake, reported with the known ones."""
    if not pools:
        return fmap
    known = [p.name for p in fmap.pools]
    unknown = [name for name in pools if name not in known]
    if unknown:
        where = "the policy" if fmap.declared else "the series seen (no --policy)"
        raise InputError(
            [
                Problem(
                    f"unknown pool {name!r}; pools in {where}: {', '.join(known) or 'none'}",
                    file="command line",
                    path="--pool",
                )
                for name in unknown
            ]
        )
    return replace(fmap, pools=tuple(p for p in fmap.pools if p.name in pools), _by_namespace={})


def _window(data: WindowInput, fmap: FleetMap, ledger: LedgerView | None, settings: Settings) -> WindowEvidence:
    tracks = build(data.window, fmap, data.metrics)
    if ledger is not None:
        alloc = allocation.from_ledger(data.window, fmap, ledger)
    else:
        alloc = allocation.from_ksm(data.window, fmap, tracks, data.requests, data.node_info)
    waits = Waits(ledger.waits) if ledger is not None else None
    rows = window_rows(tracks, fmap, alloc, waits, settings)
    notes = []
    if tracks.unplaced_hosts:
        notes.append(f"series from hosts in no pool were left out: {', '.join(sorted(tracks.unplaced_hosts))}")
    if tracks.hostless:
        notes.append(f"{tracks.hostless} series without a Hostname label could not be tied to a pool")
    return WindowEvidence(window=data.window, rows=rows, lines=_lines(tracks, fmap, settings), notes=notes)


def _lines(tracks: Tracks, fmap: FleetMap, settings: Settings) -> list[ChartLine]:
    """Per pool, utilization per chart point; a point whose slots lack coverage is a gap, not a guess."""
    window = tracks.window
    lines = []
    for pool in fmap.pools:
        ts = tracks.by_pool.get(pool.name, [])
        cards = pool.capacity_gpus if pool.capacity_gpus is not None else sum(t.weight for t in ts)
        if not ts or cards <= 0:
            continue
        busy: Floats = np.zeros(window.slots)
        seen: Floats = np.zeros(window.slots)
        for t in ts:
            busy += t.weight * np.nan_to_num(t.util)
            seen += t.weight * t.covered
        width = max(1, -(-window.slots // CHART_POINTS))
        hours, values = [], []
        for first in range(0, window.slots, width):
            part = slice(first, min(first + width, window.slots))
            covered = float(seen[part].sum()) / (cards * (part.stop - part.start))
            hours.append(first * window.slot_hours)
            ok = covered + 1e-12 >= settings.min_coverage
            values.append(float(busy[part].sum()) / (cards * (part.stop - part.start)) * 100 if ok else None)
        lines.append(ChartLine(pool=pool.name, hours=hours, utilization=values))
    return lines
