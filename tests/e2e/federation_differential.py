"""The multi-cluster differential's scenarios: Jobs applied on the real MultiKueue manager, step by step,
and the same Jobs given to ``simulate_federation`` at the seconds they were applied.

A scenario is a list of steps; each step applies one Job and waits for the state the next step needs
(its Workload on the manager, or the Job held by a worker), never for time. While it plays, every
Workload's ``status.clusterName`` on the manager is polled, so a Job that moves (evicted on one
worker, dispatched again) shows each worker it was held by, in order.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from gpufleet.policy.fleet import Fleet
from gpufleet.simulate.config import SimulationConfig
from gpufleet.simulate.federation import FederationResult, simulate_federation
from gpufleet.trace.job import Job, JobKind
from tests.e2e.batch_jobs import batch_job
from tests.e2e.conftest import eventually

FOREVER_S = 3600  # a Job given no run-for runs until the test deletes it; the simulator runs it an hour


class Manager(Protocol):
    def get(self, *args: str) -> Any: ...
    def apply(self, obj: dict[str, Any], *extra: str) -> Any: ...
    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> Any: ...


def alpha_job(
    name: str, queue: str, data_class: str, run_for: str | None, gpus: int = 1, priority: str = "normal"
) -> dict[str, Any]:
    """A Job of team alpha with every label the rendered admission policy asks for."""
    labels = {
        "gpufleet.io/team": "alpha",
        "gpufleet.io/model": "e2e-model",
        "gpufleet.io/data-class": data_class,
        "kueue.x-k8s.io/queue-name": queue,
        "kueue.x-k8s.io/priority-class": priority,
    }
    annotations = {"testbed.gpufleet.io/run-for": run_for} if run_for else {}
    return batch_job(
        name, "alpha", labels, pods=1, limits={"nvidia.com/gpu": gpus}, pod_metadata={"annotations": annotations}
    )


def workload_of(manager: Manager, job: str) -> dict[str, Any] | None:
    items = (manager.get("workloads", "--namespace=alpha") or {}).get("items", [])
    return next((w for w in items if any(o["name"] == job for o in w["metadata"].get("ownerReferences", []))), None)


@dataclass(frozen=True)
class Step:
    """One Job of a scenario (4 GPUs: a whole worker) and what to wait for before the next step."""

    name: str
    data_class: str
    run_for: int | None  # seconds; None: until the test deletes it
    priority: str = "normal"
    then: str = "workload"  # "workload": its Workload exists on the manager; "placed": a worker holds it


class Watch:
    """Each Job's placements as the manager's Workloads show them, in the order they were seen."""

    def __init__(self, manager: Manager, names: list[str]) -> None:
        self.manager = manager
        self.names = set(names)
        self.started = time.monotonic()
        self.history: dict[str, list[tuple[str, float]]] = {}
        self.nominated: dict[str, set[str]] = {}  # status.nominatedClusterNames, as far as a poll caught them
        self.checks: dict[str, list[str]] = {}  # the MultiKueue check's state and message, each change

    def now(self) -> int:
        return int(time.monotonic() - self.started)

    def poll(self) -> dict[str, str]:
        """The worker holding each Job now (Jobs no worker holds are left out)."""
        items = (self.manager.get("workloads", "--namespace=alpha") or {}).get("items", [])
        out = {}
        for w in items:
            owner = next((o["name"] for o in w["metadata"].get("ownerReferences", [])), "")
            status = w.get("status", {})
            cluster = status.get("clusterName")
            if owner in self.names:
                self.nominated.setdefault(owner, set()).update(status.get("nominatedClusterNames") or [])
                for check in status.get("admissionChecks", []):
                    said = f"{check['state']}: {check.get('message', '')}"
                    if said not in self.checks.setdefault(owner, []):
                        self.checks[owner].append(said)
            if owner in self.names and cluster:
                out[owner] = cluster
                seen = self.history.setdefault(owner, [])
                if not seen or seen[-1][0] != cluster:
                    seen.append((cluster, time.monotonic() - self.started))
        return out

    def moves(self, name: str) -> list[str]:
        return [cluster for cluster, _ in self.history.get(name, [])]

    def final(self) -> dict[str, str]:
        return {n: h[-1][0] for n, h in self.history.items()}


def play(manager: Manager, steps: list[Step]) -> tuple[dict[str, int], Watch]:
    """Apply each step's Job in order; return the second each was applied at, and the watch."""
    watch = Watch(manager, [s.name for s in steps])
    submitted: dict[str, int] = {}
    for s in steps:
        submitted[s.name] = watch.now()
        run_for = f"{s.run_for}s" if s.run_for is not None else None
        job = alpha_job(s.name, f"alpha-{s.data_class}", s.data_class, run_for, gpus=4, priority=s.priority)
        assert manager.apply(job).returncode == 0
        if s.then == "placed":
            eventually(lambda s=s: s.name in watch.poll(), f"{s.name} admitted on a worker")
            # The simulator counts whole seconds and orders Jobs of one second by name: the next Job
            # goes in a later second, so the simulator sees it after this one, as the testbed did.
            while watch.now() == submitted[s.name]:
                time.sleep(0.1)
        else:
            eventually(lambda s=s: workload_of(manager, s.name), f"{s.name}'s Workload on the manager")
    return submitted, watch


def simulate(fleet: Fleet, steps: list[Step], submitted: dict[str, int]) -> FederationResult:
    """The same Jobs for the simulator; the testbed's pods stop at once (grace 0, as ``batch_job``'s)."""
    jobs = []
    for s in steps:
        duration = s.run_for if s.run_for is not None else FOREVER_S
        jobs.append(
            Job(s.name, "alpha", "alpha", submitted[s.name], duration, JobKind.TRAINING, gpus=4,
                data_class=s.data_class, priority_class=s.priority, termination_grace_s=0)
        )  # fmt: skip
    return simulate_federation(fleet, jobs, SimulationConfig())


def compare(
    scenario: str, steps: list[Step], submitted: dict[str, int], watch: Watch, simulated: FederationResult
) -> tuple[dict[str, str], dict[str, str | None]]:
    """Print each Job's real and simulated placements and the agreement line; return (real, simulated)."""
    real = watch.final()
    sim = {d.key.split("/")[1]: d.cluster for d in simulated.dispatches}
    for s in steps:
        moves = " -> ".join(watch.moves(s.name)) or "none"
        print(f"{s.name}: applied at {submitted[s.name]}s, real {moves}, simulated {sim[s.name]}")
    for cluster in simulated.clusters:
        seen = sorted(((n, t) for n, h in watch.history.items() for c, t in h if c == cluster), key=lambda x: x[1])
        simulated_order = [k.split("/")[1] for k in simulated.admission_order[cluster]]
        print(f"admission order on {cluster}: real {[n for n, _ in seen]}, simulated {simulated_order}")
    agree = sum(1 for s in steps if sim[s.name] == real.get(s.name))
    print(f"multi-cluster differential ({scenario}): {agree} of {len(steps)} placements agree")
    return real, sim


def wait_for(watch: Watch, check: Callable[[dict[str, str]], bool], what: str, timeout_s: float = 240) -> None:
    eventually(lambda: check(watch.poll()), what, timeout_s)


def clean(manager: Manager, steps: list[Step]) -> None:
    for s in steps:
        manager.kubectl(
            "delete", "job", s.name, "--namespace=alpha", "--cascade=foreground", "--wait=true", "--ignore-not-found"
        )  # fmt: skip
