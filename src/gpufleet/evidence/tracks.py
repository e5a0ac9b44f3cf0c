"""Raw DCGM samples laid on the window's slot grid, one track per device.

A device is a card (host, ``gpu`` index) or a MIG instance (host, ``gpu``, ``GPU_I_ID``). Its series
change identity whenever a pod comes or goes (the pod labels change), so a track gathers every series
of one device: per slot the utilization (a 0–1 ratio; several samples in a slot are averaged), who
held it (the namespace, "nobody" or "several"), and the framebuffer used and free.

``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` is the utilization signal; a full card without it falls back to
``DCGM_FI_DEV_GPU_UTIL`` (÷ 100). MIG instances have no fallback: ``GPU_UTIL`` is not reported for them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from gpufleet.evidence.fleetmap import HOST_LABELS, MIG_INSTANCE, FleetMap, first_label, holder
from gpufleet.evidence.window import Window
from gpufleet.prom import Series

NOBODY = -1
SEVERAL = -2
ENGINE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
FB_USED = "DCGM_FI_DEV_FB_USED"
FB_FREE = "DCGM_FI_DEV_FB_FREE"

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
DeviceKey = tuple[str, str, str]  # host, gpu index, MIG instance id ("" for a card)


@dataclass
class _Signal:
    """Sums and counts per slot for one metric of one device, and who held the device per slot."""

    slots: int
    total: Floats = field(init=False)
    count: Floats = field(init=False)
    owner: Ints = field(init=False)
    labelled: bool = False

    def __post_init__(self) -> None:
        self.total = np.zeros(self.slots)
        self.count = np.zeros(self.slots)
        self.owner = np.full(self.slots, NOBODY, dtype=np.int64)

    def add(self, ks: Ints, values: Floats, owner: int | None) -> None:
        np.add.at(self.total, ks, values)
        np.add.at(self.count, ks, 1.0)
        if owner is not None:
            self.labelled = True
            current = self.owner[ks]
            self.owner[ks] = np.where((current == NOBODY) | (current == owner), owner, SEVERAL)

    def mean(self) -> Floats:
        out = np.full(self.slots, np.nan)
        seen = self.count > 0
        out[seen] = self.total[seen] / self.count[seen]
        return out

    @property
    def empty(self) -> bool:
        return not bool(self.count.any())


@dataclass(frozen=True)
class Track:
    """One device over one window, on the slot grid (NaN: no sample in that slot)."""

    pool: str
    device: DeviceKey
    weight: float  # share of a card
    signal: str  # the metric the utilization came from
    util: Floats
    owner: Ints  # index into ``Tracks.namespaces``; NOBODY or SEVERAL
    labelled: bool  # some series of this device carried a namespace label
    fb_used: Floats
    fb_free: Floats

    @property
    def covered(self) -> Floats:
        return ~np.isnan(self.util)


@dataclass(frozen=True)
class Tracks:
    window: Window
    by_pool: dict[str, list[Track]]
    namespaces: list[str]
    unplaced_hosts: frozenset[str]  # hosts with series that no pool claims
    hostless: int  # series without a host label (cannot be tied to a pool)


def build(window: Window, fmap: FleetMap, metrics: Mapping[str, list[Series]]) -> Tracks:
    """Lay every sample of the four DCGM metrics on ``window``'s grid, device by device."""
    namespaces: dict[str, int] = {}
    signals: dict[tuple[str, DeviceKey], _Signal] = {}
    weights: dict[DeviceKey, tuple[str, float]] = {}
    unplaced: set[str] = set()
    hostless = 0
    for metric in (ENGINE, GPU_UTIL, FB_USED, FB_FREE):
        for series in metrics.get(metric, []):
            host = first_label(series.labels, HOST_LABELS)
            if host is None:
                hostless += 1
                continue
            if metric == GPU_UTIL and series.labels.get(MIG_INSTANCE):
                continue
            pool = fmap.pool_of(series.labels)
            weight = pool.device_weight(series.labels) if pool else None
            if pool is None or weight is None:
                if pool is None:
                    unplaced.add(host)
                continue
            key = (host, series.labels.get("gpu", ""), series.labels.get(MIG_INSTANCE, ""))
            weights[key] = (pool.name, weight)
            ks, values = _on_grid(window, series.points)
            if metric == GPU_UTIL:
                values = values / 100.0
            namespace = holder(series.labels, fmap.exporters)
            owner = namespaces.setdefault(namespace, len(namespaces)) if namespace else None
            signals.setdefault((metric, key), _Signal(window.slots)).add(ks, values, owner)
    by_pool: dict[str, list[Track]] = {p.name: [] for p in fmap.pools}
    blank = _Signal(window.slots)
    for key in sorted(weights):
        pool_name, weight = weights[key]
        engine, fallback = signals.get((ENGINE, key), blank), signals.get((GPU_UTIL, key), blank)
        chosen, name = (fallback, GPU_UTIL) if engine.empty and not fallback.empty else (engine, ENGINE)
        by_pool[pool_name].append(
            Track(
                pool=pool_name,
                device=key,
                weight=weight,
                signal=name,
                util=chosen.mean(),
                owner=chosen.owner,
                labelled=chosen.labelled,
                fb_used=signals.get((FB_USED, key), blank).mean(),
                fb_free=signals.get((FB_FREE, key), blank).mean(),
            )
        )
    return Tracks(
        window=window,
        by_pool=by_pool,
        namespaces=list(namespaces),
        unplaced_hosts=frozenset(unplaced),
        hostless=hostless,
    )


def _on_grid(window: Window, points: Iterable[tuple[float, float]]) -> tuple[Ints, Floats]:
    """Slot index and value of each finite sample inside the window."""
    data = np.array(list(points), dtype=np.float64).reshape(-1, 2)
    ks = window.slot_index(data[:, 0])
    keep = (ks >= 0) & np.isfinite(data[:, 1])
    return ks[keep], data[keep, 1]


def heartbeat(window: Window, series: Iterable[Series], label: str) -> dict[str, Floats]:
    """Per value of ``label`` (a node), which slots had a sample: kube-state-metrics' sign of life."""
    seen: dict[str, Floats] = {}
    for one in series:
        name = one.labels.get(label)
        if not name:
            continue
        ks, _ = _on_grid(window, one.points)
        slots = seen.setdefault(name, np.zeros(window.slots))
        slots[ks] = 1.0
    return seen
