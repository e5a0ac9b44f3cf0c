"""Allocated GPUs per pool, namespace and slot — from kube-state-metrics requests, or from the ledger.

Both sources end in the same shape, so the figures do not care which one spoke: for each pool and
namespace, the share of cards held in each slot, and for each pool the share of the window the
source was alive for it. kube-state-metrics is alive for a pool while it reports ``kube_node_info``
for the pool's nodes; the ledger is an append-only record and counts as alive for the whole window.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from gpufleet.evidence.fleetmap import FleetMap
from gpufleet.evidence.tracks import Floats, Tracks, heartbeat
from gpufleet.evidence.waits import LedgerView, span_slots
from gpufleet.evidence.window import Window
from gpufleet.prom import Series

KSM = "kube-state-metrics"
REQUESTS = "kube_pod_container_resource_requests"
NODE_INFO = "kube_node_info"
# Requests count only while the pod runs: kube-state-metrics keeps finished pods' requests around.
REQUESTS_RUNNING = (
    f'sum by (namespace, pod, node, resource) ({REQUESTS}{{resource=~"nvidia_com_.*"}})'
    " * on (namespace, pod) group_left () "
    'max by (namespace, pod) (kube_pod_status_phase{phase="Running"})'
)


@dataclass(frozen=True)
class Allocated:
    source: str
    by_pool: dict[str, dict[str, Floats]]  # pool -> namespace -> card share held per slot
    alive: dict[str, float]  # pool -> share of the window the source reported on
    absent: str = ""  # why there is no allocation source at all ("" when there is one)
    simulated: bool = False


def absent(reason: str) -> Allocated:
    return Allocated(source="", by_pool={}, alive={}, absent=reason)


def from_ksm(
    window: Window, fmap: FleetMap, tracks: Tracks, requests: Iterable[Series], node_info: Iterable[Series]
) -> Allocated:
    """Requests of running pods on the grid (``requests`` was evaluated at each slot's middle)."""
    alive_nodes = heartbeat(window, node_info, "node")
    if not alive_nodes:
        return absent(f"no {NODE_INFO} series in the window: kube-state-metrics is not scraped by this Prometheus")
    by_pool: dict[str, dict[str, Floats]] = {p.name: {} for p in fmap.pools}
    for series in requests:
        node, namespace = series.labels.get("node", ""), series.labels.get("namespace", "")
        pool = fmap.pool_of({"Hostname": node}) if fmap.declared else fmap.pool(_pool_by_tracks(tracks, node))
        weight = pool.request_weight(series.labels.get("resource", "")) if pool else None
        if pool is None or weight is None or not namespace:
            continue
        data = np.array(series.points, dtype=np.float64).reshape(-1, 2)
        ks = window.slot_index(data[:, 0])
        keep = (ks >= 0) & np.isfinite(data[:, 1])
        held = by_pool[pool.name].setdefault(namespace, np.zeros(window.slots))
        np.add.at(held, ks[keep], data[keep, 1] * weight)
    alive = {p.name: _alive(alive_nodes, _nodes(p.name, fmap, tracks), window.slots) for p in fmap.pools}
    return Allocated(source=KSM, by_pool=by_pool, alive=alive)


def _nodes(pool: str, fmap: FleetMap, tracks: Tracks) -> frozenset[str]:
    view = fmap.pool(pool)
    if view is not None and view.nodes:
        return view.nodes
    return frozenset(t.device[0] for t in tracks.by_pool.get(pool, []))


def _pool_by_tracks(tracks: Tracks, node: str) -> str:
    return next((pool for pool, ts in tracks.by_pool.items() if any(t.device[0] == node for t in ts)), "")


def _alive(seen: Mapping[str, Floats], nodes: frozenset[str], slots: int) -> float:
    if not nodes:
        return 0.0
    return float(sum(seen[n].sum() if n in seen else 0.0 for n in nodes)) / (len(nodes) * slots)


def from_ledger(window: Window, fmap: FleetMap, view: LedgerView) -> Allocated:
    """The ledger's held spans on the grid: each span's GPUs × the share of each slot it overlaps."""
    by_pool: dict[str, dict[str, Floats]] = {p.name: {} for p in fmap.pools}
    for span in view.held:
        pool = fmap.pool_of({"Hostname": span.node})
        weight = pool.request_weight(_ksm_resource(span.resource)) if pool else None
        if pool is None or weight is None:
            continue
        held = by_pool[pool.name].setdefault(span.namespace, np.zeros(window.slots))
        held += span_slots(window, span.start, span.end) * span.count * weight
    return Allocated(
        source="ledger", by_pool=by_pool, alive={p.name: 1.0 for p in fmap.pools}, simulated=view.simulated
    )


def _ksm_resource(resource: str) -> str:
    """The ledger keeps Kubernetes' spelling; kube-state-metrics' is what ``request_weight`` reads."""
    return resource.replace(".", "_").replace("/", "_").replace("-", "_")
