"""``tune`` across clusters: each trial run through the federation, each knob named with its cluster.

A policy with ``clusters:`` is a MultiKueue fleet: the manager's quota and dispatch in front of one
Kueue per worker, and residency zones that keep each data class to its clusters. A trial of such a
policy is simulated as ``simulate`` runs it (``federation_run.federated_run``: every worker's Kueue
and the dispatch), never as the one cluster it is not. First apply has no queue and no MultiKueue: it
places pods on any GPU node of any cluster, as the one-cluster first apply does.

Which knob belongs to which cluster: a team's quota knob is on a pool, and a pool is in exactly one
cluster, so ``teams[T].quota[P].*`` is that cluster's; ``pools[P].*`` likewise; every other knob
(``queueing``, ``scheduling``, the teams' preemption, the priority classes) is one field the policy
renders into every cluster's Kueue alike, so it is named for every cluster. A quota knob is only
built on a pool whose cluster one of the team's data classes may use (``policy`` refuses any other
quota), and ``allowed`` is checked again on the space, so no trial changes a team's quota outside its
residency.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from gpufleet.errors import InputError
from gpufleet.policy import Fleet, FleetPolicy
from gpufleet.policy.residency import allowed_clusters, cluster_of
from gpufleet.simulate.config import Mode, SimulationConfig
from gpufleet.simulate.federation_run import federated_run
from gpufleet.simulate.result import RunResult
from gpufleet.simulate.run import simulate
from gpufleet.trace.job import Job
from gpufleet.tune.diff import Change

EVERY = "every cluster"  # how a fleet-wide knob's cluster is named
_QUOTA = re.compile(r"^teams\[(?P<team>[^\]]+)\]\.quota\[(?P<pool>[^\]]+)\]\.")
_POOL = re.compile(r"^pools\[(?P<pool>[^\]]+)\]\.")


def federated(policy: FleetPolicy) -> bool:
    return bool(policy.clusters)


def run(fleet: Fleet, jobs: Sequence[Job], config: SimulationConfig) -> RunResult:
    """One world of ``config.mode``: a federated policy's queue world runs the federation."""
    if config.mode is Mode.QUEUE and federated(fleet.policy):
        return federated_run(fleet, jobs, config, Mode.QUEUE.value)[0]
    return simulate(fleet, jobs, config)


def first_apply(fleet: Fleet, jobs: Sequence[Job], config: SimulationConfig) -> RunResult:
    return run(fleet, jobs, replace(config, mode=Mode.FIRST_APPLY))


def queue(fleet: Fleet, jobs: Sequence[Job], config: SimulationConfig) -> RunResult:
    return run(fleet, jobs, replace(config, mode=Mode.QUEUE))


def cluster_of_knob(policy: FleetPolicy, path: str) -> str:
    """The cluster a knob's setting lives in (``EVERY`` for a fleet-wide one); "" without ``clusters:``."""
    if not federated(policy):
        return ""
    found = _QUOTA.match(path) or _POOL.match(path)
    if found is None:
        return EVERY
    return cluster_of(policy, found["pool"]) or EVERY


def team_clusters(policy: FleetPolicy, team: str) -> set[str]:
    """The clusters a team's data classes may use (its residency)."""
    t = policy.team(team)
    if t is None:
        return set()
    classes = {dc.name: dc for dc in policy.dataClasses}
    return {c for name in t.dataClasses if name in classes for c in allowed_clusters(policy, classes[name])}


def allowed(policy: FleetPolicy, path: str) -> bool:
    """False for a team's quota knob on a pool in a cluster the team's residency forbids."""
    found = _QUOTA.match(path)
    if found is None or not federated(policy):
        return True
    return cluster_of(policy, found["pool"]) in team_clusters(policy, found["team"])


def located(policy: FleetPolicy, changes: Sequence[Change]) -> list[Change]:
    """Each change with the cluster its setting lives in (unchanged without ``clusters:``)."""
    return [replace(c, cluster=cluster_of_knob(policy, c.setting)) for c in changes]


def refuse_rungs(policy: FleetPolicy, rungs: bool, file: str = "") -> None:
    """Rungs pause one queue world; a federation is several in lockstep: refused, located, not guessed."""
    if rungs and federated(policy):
        raise InputError.one(
            "--rung-hours is not supported for a policy with clusters: a federation runs one Kueue world per "
            "worker in lockstep behind the manager, and tune cannot yet pause that run at a rung; leave "
            "--rung-hours out (every trial then runs whole)",
            file=file,
            path="--rung-hours",
        )
