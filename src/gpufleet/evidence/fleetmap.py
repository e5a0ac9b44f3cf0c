"""How a DCGM or kube-state-metrics series is tied to a pool, a team and a share of a card.

With a policy, a series belongs to the pool whose named nodes include its host, and to the team
whose namespaces include its namespace. Without one, pools are the GPU models seen (the
``modelName`` label) and every namespace is its own team; capacity is then the devices seen, which
the report says.

Every figure is in GPU-hours of whole cards: a MIG instance counts as its compute slices over the
card's (a ``3g.40gb`` on an A100 is 3/7 of a card), a time-sliced replica as one over the replica count.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gpufleet.gpus import GpuModel, lookup, models
from gpufleet.policy import Fleet

HOST_LABELS = ("Hostname", "hostname")  # dcgm-exporter spells it both ways across releases
NAMESPACE_LABELS = ("namespace", "pod_namespace")  # the second with dcgm-exporter's -o (old names)
# When Prometheus does not honor the exporter's labels (the GPU Operator's ServiceMonitor default), the
# workload's namespace moves to ``exported_namespace`` and ``namespace`` names the exporter's own.
EXPORTED_NAMESPACE = "exported_namespace"
POD_LABELS = ("pod", "pod_name")
MIG_PROFILE = "GPU_I_PROFILE"
MIG_INSTANCE = "GPU_I_ID"
MODEL = "modelName"
_COMPUTE = re.compile(r"^(\d+)g\.")
_KSM_MIG = re.compile(r"^nvidia_com_mig_(\d+)g_")


def first_label(labels: Mapping[str, str], names: Iterable[str]) -> str | None:
    for name in names:
        value = labels.get(name)
        if value:
            return value
    return None


def exporter_namespaces(label_sets: Iterable[Mapping[str, str]]) -> frozenset[str]:
    """Namespaces Prometheus attached as the scrape target's: those seen beside an ``exported_namespace``."""
    return frozenset(
        labels["namespace"] for labels in label_sets if labels.get(EXPORTED_NAMESPACE) and labels.get("namespace")
    )


def holder(labels: Mapping[str, str], exporters: frozenset[str]) -> str | None:
    """The namespace of the pod that held the device, or None when the series names no workload.

    An idle device's series carries only the exporter's own namespace (added by Prometheus), which must
    not read as a workload holding the card.
    """
    exported = labels.get(EXPORTED_NAMESPACE)
    if exported:
        return exported
    namespace = first_label(labels, NAMESPACE_LABELS)
    return None if namespace in exporters else namespace


@dataclass(frozen=True)
class PoolView:
    """One pool as evidence sees it: where its series come from and what a device is worth."""

    name: str
    mode: str  # full | mig | timeslice
    nodes: frozenset[str]
    model_label: str | None  # without a policy: the modelName this pool groups
    capacity_gpus: float | None  # declared by the policy; None: the devices seen are the capacity
    compute_slices: int | None  # the card's MIG compute slices, when it has MIG
    replicas: int = 1  # time-slice replicas per card
    unmapped: str = ""  # why no series can be tied to this pool (e.g. the policy names no nodes)

    def owns(self, labels: Mapping[str, str]) -> bool:
        if self.model_label is not None:
            return labels.get(MODEL) == self.model_label
        return first_label(labels, HOST_LABELS) in self.nodes

    def device_weight(self, labels: Mapping[str, str]) -> float | None:
        """A device series' share of a card, or None when the series does not count in this pool.

        On a MIG pool only instance series count (the whole-card series beside them would count the
        card twice); on other pools only whole-card series do.
        """
        profile = labels.get(MIG_PROFILE)
        if self.mode == "mig":
            if not profile or not labels.get(MIG_INSTANCE) or self.compute_slices is None:
                return None
            match = _COMPUTE.match(profile)
            return int(match.group(1)) / self.compute_slices if match else None
        return None if profile else 1.0

    def request_weight(self, resource: str) -> float | None:
        """A kube-state-metrics ``resource`` unit's share of a card (``nvidia_com_mig_3g_40gb`` → 3/7)."""
        if self.mode == "mig":
            match = _KSM_MIG.match(resource)
            if match is None or self.compute_slices is None:
                return None
            return int(match.group(1)) / self.compute_slices
        if resource == "nvidia_com_gpu_shared" or (resource == "nvidia_com_gpu" and self.mode == "timeslice"):
            return 1.0 / self.replicas
        return 1.0 if resource == "nvidia_com_gpu" else None


@dataclass(frozen=True)
class FleetMap:
    pools: tuple[PoolView, ...]
    teams: dict[str, tuple[str, ...]]  # team -> namespaces, in policy order
    declared: bool  # True: from a policy; False: from the series seen
    exporters: frozenset[str] = frozenset()  # the exporter's namespaces: never a workload's
    _by_namespace: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for team, namespaces in self.teams.items():
            for namespace in namespaces:
                self._by_namespace.setdefault(namespace, team)

    def team_of(self, namespace: str | None) -> str | None:
        if namespace is None:
            return None
        return self._by_namespace.get(namespace, None if self.declared else namespace)

    def pool_of(self, labels: Mapping[str, str]) -> PoolView | None:
        return next((p for p in self.pools if not p.unmapped and p.owns(labels)), None)

    def pool(self, name: str) -> PoolView | None:
        return next((p for p in self.pools if p.name == name), None)


def from_policy(fleet: Fleet) -> FleetMap:
    pools = []
    for cap in fleet.pools.values():
        pool = cap.pool
        unmapped = (
            ""
            if pool.node_names
            else f"the policy gives pool {pool.name} a node count ({pool.node_count}), not node names, "
            "so no series can be tied to it"
        )
        pools.append(
            PoolView(
                name=pool.name,
                mode=cap.decision.mode,
                nodes=frozenset(pool.node_names),
                model_label=None,
                capacity_gpus=float(pool.gpu_count),
                compute_slices=cap.gpu.mig.compute_slices if cap.gpu.mig else None,
                replicas=cap.decision.replicas or 1,
                unmapped=unmapped,
            )
        )
    teams = {team.name: tuple(team.namespaces) for team in fleet.policy.teams}
    serving = fleet.policy.serving
    if serving is not None and serving.namespace not in {ns for nss in teams.values() for ns in nss}:
        teams.setdefault("serving", (serving.namespace,))
    return FleetMap(pools=tuple(pools), teams=teams, declared=True)


def gpu_model(model_name: str) -> GpuModel | None:
    """The catalogue entry for a DCGM ``modelName`` ("NVIDIA A100-SXM4-80GB" → GFD product spelling)."""
    product = model_name.strip().replace(" ", "-").casefold()
    found = next((m for m in models() if m.product.casefold() == product), None)
    return found or lookup(model_name.removeprefix("NVIDIA ").strip())


def from_series(label_sets: Iterable[Mapping[str, str]], exporters: frozenset[str]) -> FleetMap:
    """Without a policy: one pool per GPU model seen, one team per namespace seen."""
    model_names: dict[str, bool] = {}
    namespaces: set[str] = set()
    for labels in label_sets:
        name = labels.get(MODEL)
        if name:
            model_names[name] = model_names.get(name, False) or bool(labels.get(MIG_INSTANCE))
        namespace = holder(labels, exporters)
        if namespace:
            namespaces.add(namespace)
    pools = []
    for name, has_mig in sorted(model_names.items()):
        gpu = gpu_model(name)
        slices = gpu.mig.compute_slices if gpu is not None and gpu.mig is not None else None
        unmapped = ""
        if has_mig and slices is None:
            unmapped = f"MIG series on {name!r}, a model gpufleet does not know: pass --policy to size its instances"
        pools.append(
            PoolView(
                name=_slug(name),
                mode="mig" if has_mig else "full",
                nodes=frozenset(),
                model_label=name,
                capacity_gpus=None,
                compute_slices=slices,
                unmapped=unmapped,
            )
        )
    teams: dict[str, tuple[str, ...]] = {ns: (ns,) for ns in sorted(namespaces)}
    return FleetMap(pools=tuple(pools), teams=teams, declared=False, exporters=exporters)


def _slug(model_name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", model_name.casefold()).strip("-")
