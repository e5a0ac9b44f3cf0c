"""Small shared pieces of every rendered object: metadata, labels, the pool taint."""

from __future__ import annotations

from typing import Any

from gpufleet.policy.model import Pool

MANAGED_BY = {"app.kubernetes.io/managed-by": "gpufleet"}
POOL_LABEL = "gpufleet.io/pool"
POOL_TAINT_KEY = "gpufleet.io/pool"
TEAM_LABEL_DEFAULT = "gpufleet.io/team"

Obj = dict[str, Any]


def meta(name: str, namespace: str | None = None, labels: dict[str, str] | None = None) -> Obj:
    out: Obj = {"name": name}
    if namespace is not None:
        out["namespace"] = namespace
    out["labels"] = {**MANAGED_BY, **(labels or {})}
    return out


def obj(api_version: str, kind: str, metadata: Obj, **body: Any) -> Obj:
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, **body}


def pool_taints(pool: Pool) -> list[Obj]:
    """Every pool is tainted, so only pods admitted for it (or serving pods, on the serving pool) land there."""
    taints: list[Obj] = [{"key": POOL_TAINT_KEY, "value": pool.name, "effect": "NoSchedule"}]
    taints += [{"key": t.key, "value": t.value, "effect": t.effect} for t in pool.taints]
    return taints


def tolerations_for(pool: Pool) -> list[Obj]:
    return [
        {"key": t["key"], "operator": "Equal", "value": t["value"], "effect": t["effect"]} for t in pool_taints(pool)
    ]
