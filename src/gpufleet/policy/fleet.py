"""A validated policy resolved against the GPU catalogue: each pool's card, slicing and capacity."""

from __future__ import annotations

from dataclasses import dataclass

from gpufleet.gpus import lookup
from gpufleet.policy.capacity import PoolCapacity, pool_capacity
from gpufleet.policy.model import FleetPolicy, Pool
from gpufleet.policy.slicing import Facts, decide


@dataclass(frozen=True)
class Fleet:
    policy: FleetPolicy
    pools: dict[str, PoolCapacity]  # in policy order

    @property
    def serving_pool(self) -> PoolCapacity | None:
        serving = self.policy.serving
        return self.pools.get(serving.pool) if serving else None

    def queued_pools(self) -> list[PoolCapacity]:
        """Pools whose cards Kueue hands out (every pool but the serving reservation)."""
        serving = self.policy.serving.pool if self.policy.serving else None
        return [p for name, p in self.pools.items() if name != serving]

    def reachable(self, team: str, pool: Pool) -> bool:
        serving = self.policy.serving.pool if self.policy.serving else None
        if pool.name == serving or pool.role.value == "serving":
            return False
        return pool.teams is None or team in pool.teams


def facts_for(policy: FleetPolicy, pool: Pool) -> Facts:
    gpu = lookup(pool.gpu)
    if gpu is None:
        raise ValueError(f"unknown GPU model {pool.gpu!r}")
    goal = policy.serving.latencyGoalMs if policy.serving and policy.serving.pool == pool.name else None
    return Facts(pool=pool, gpu=gpu, serving_latency_goal_ms=goal)


def resolve(policy: FleetPolicy) -> Fleet:
    """Resolve a policy that passed ``cross_check``; the checks guarantee this cannot fail."""
    pools: dict[str, PoolCapacity] = {}
    for pool in policy.pools:
        facts = facts_for(policy, pool)
        pools[pool.name] = pool_capacity(pool, facts.gpu, decide(facts))
    return Fleet(policy=policy, pools=pools)
