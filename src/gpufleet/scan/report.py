"""The fleet report: pools, GPU pods by team, the Kueue objects present, and the risks."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

from gpufleet.scan.fleet import GpuPod, NodePool, gpu_pods, node_pools
from gpufleet.scan.risks import Risk, find_risks, pool_quota, serving_pools
from gpufleet.scan.snapshot import KUEUE_KINDS, Snapshot, name
from gpufleet.scan.starter import starter_policy

NO_TEAM = "(no team label)"
SERVING = "(serving)"


def _team_order(team: str) -> tuple[int, str]:
    """Named teams by name first, then the unlabelled serving pods, then the other unlabelled ones."""
    return ({SERVING: 1, NO_TEAM: 2}.get(team, 0), team)


def plain(items: list[tuple[str, Any]]) -> dict[str, Any]:
    """``asdict``'s factory: enum values (a pool's ``SlicingMode``) as the plain words they stand for."""
    return {k: (v.value if isinstance(v, Enum) else v) for k, v in items}


@dataclass(frozen=True)
class FleetReport:
    pools: list[NodePool]
    pods: list[GpuPod]
    kueue_installed: bool
    kueue: dict[str, list[str]]  # kind -> names (namespace/name for namespaced kinds)
    quota: dict[str, int]  # pool -> nominal quota units held by queues
    serving_pools: list[str]
    risks: list[Risk]
    team_label: str

    def by_team(self) -> dict[str, list[GpuPod]]:
        """GPU pods per team: teams by name, then unlabelled serving pods, then the other unlabelled ones."""
        out: dict[str, list[GpuPod]] = defaultdict(list)
        for pod in self.pods:
            out[pod.team or (SERVING if pod.serving else NO_TEAM)].append(pod)
        return dict(sorted(out.items(), key=lambda kv: _team_order(kv[0])))

    def starter_policy(self) -> str:
        return starter_policy(self.pools, self.pods, set(self.serving_pools), self.team_label)

    def as_dict(self) -> dict[str, Any]:
        return {
            "pools": [asdict(p, dict_factory=plain) for p in self.pools],
            "teams": {team: [asdict(p) for p in pods] for team, pods in self.by_team().items()},
            "kueue": {"installed": self.kueue_installed, "objects": self.kueue, "quotaByPool": self.quota},
            "servingPools": self.serving_pools,
            "risks": [asdict(r) for r in self.risks],
        }


def _qualified(o: dict[str, Any]) -> str:
    ns = o.get("metadata", {}).get("namespace")
    return f"{ns}/{name(o)}" if ns else name(o)


def analyse(snapshot: Snapshot, team_label: str = "gpufleet.io/team") -> FleetReport:
    pools = node_pools(snapshot)
    pods = gpu_pods(snapshot, pools, team_label)
    return FleetReport(
        pools=pools,
        pods=pods,
        kueue_installed=snapshot.kueue_installed,
        kueue={kind: sorted(_qualified(o) for o in snapshot.kueue_objects(kind)) for kind in KUEUE_KINDS},
        quota=pool_quota(snapshot, pools) if snapshot.kueue_installed else {},
        serving_pools=sorted(serving_pools(pools, pods)),
        risks=find_risks(snapshot, pools, pods),
        team_label=team_label,
    )
