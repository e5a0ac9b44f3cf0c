"""``PrioritizePreemptorWorkloads`` (alpha, off by default): quota stealing while a preemptor waits.

Both cases restate Kueue v0.19.2's integration tests of the gate, driven through the twin's
library API with evicted quota held until the caller says a victim's pods are gone (as on a
cluster, and as ``gpufleet simulate`` runs it):

* ``test/integration/singlecluster/scheduler/preemption_test.go`` "Should prevent other
  workloads from stealing quota when a preemptor is waiting for multiple evictions" (classical);
* ``.../scheduler/fairsharing/fair_sharing_test.go``, same title (fair sharing).

A preemptor evicts two workloads; the first victim's quota frees; another workload that fits in
what freed is ahead of the preemptor in the cycle's order (not borrowing, or a lower share), so
without the gate it takes that quota and the preemptor no longer fits when the second victim is
gone: the cohort-reclaim thrash of kueue#13662. With the gate the preemptor is ordered first,
holds its quota in the cycle's snapshot, and is admitted once the second victim is gone.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import yaml

from gpufleet.twin import Twin
from gpufleet.twin.apis import specs as s
from gpufleet.twin.apis.objects import parse_cluster
from tests.twin.trees import Job, Queue, pending_spec, tree

LOW, MID, HIGH = 1, 2, 3
GATE = (("PrioritizePreemptorWorkloads", True),)


@dataclass(frozen=True)
class Thrash:
    spec: s.ClusterSpec
    waiting: str  # pending from the start, parked before the preemptor arrives
    preemptor: Job
    victims: tuple[str, str]  # (evicted first, evicted second)


def classical(gates: tuple[tuple[str, bool], ...]) -> Thrash:
    """Cohort "all": alpha 2 CPU (reclaim Any), beta 1, gamma 1 (reclaim LowerPriority); wl-a
    (alpha, 1) and wl-b (beta, 3: borrowing 2) use all 4; wl-c (gamma, low, 1) waits; alpha's
    high-priority preemptor asks 4 and evicts both. When wl-b is gone, 3 are free: wl-c (within
    gamma's nominal, so first in the classical order) fits."""
    policy = {"within": s.LOWER_PRIORITY, "borrow": s.LOWER_PRIORITY}
    queues = {
        "alpha": Queue("all", 2, reclaim=s.ANY, **policy),
        "beta": Queue("all", 1, reclaim=s.LOWER_PRIORITY, **policy),
        "gamma": Queue("all", 1, reclaim=s.LOWER_PRIORITY, **policy),
    }
    running = [Job("wl-a", "alpha", 1, MID, 1), Job("wl-b", "beta", 3, MID, 2)]
    config = s.ConfigSpec(fair_sharing=False, feature_gates=gates)
    spec = tree({"all": (None, 1.0)}, queues, running, [Job("wl-c", "gamma", 1, LOW, 10)], config)
    return Thrash(spec, "ns/wl-c", Job("preemptor", "alpha", 4, HIGH, 20), ("ns/wl-b", "ns/wl-a"))


def fair(gates: tuple[tuple[str, bool], ...]) -> Thrash:
    """Fair sharing: cq-1 (10 CPU, 0 memory) and cq-2 (0 CPU, 10 memory), both reclaim Any; wlA
    and wlB (cq-2, 1 CPU each, borrowed) run; cq-1's preemptor asks 10 CPU and 10 memory and evicts
    both. When wlA is gone it queues again; cq-2's share with it (200) is below cq-1's with the
    preemptor (1000), both borrowing, so the tournament offers wlA first, and 9 CPU are free."""
    cpu, mem = "cpu", "memory"
    queues = {
        "cq-1": Queue("thrash", {cpu: 10_000, mem: 0}, reclaim=s.ANY),
        "cq-2": Queue("thrash", {cpu: 0, mem: 10}, reclaim=s.ANY),
    }
    running = [Job("wlA", "cq-2", {cpu: 1000, mem: 0}, 100, 1), Job("wlB", "cq-2", {cpu: 1000, mem: 0}, 100, 2)]
    config = s.ConfigSpec(fair_sharing=True, feature_gates=gates)
    spec = tree({"thrash": (None, 1.0)}, queues, running, [], config)
    return Thrash(spec, "", Job("preemptor", "cq-1", {cpu: 10_000, mem: 10}, 0, 20), ("ns/wlA", "ns/wlB"))


CASES = {
    "classical, gate off": (classical, (), True),
    "classical, gate on": (classical, GATE, False),
    "fair sharing, gate off": (fair, (), True),
    "fair sharing, gate on": (fair, GATE, False),
}


@pytest.mark.parametrize(("build", "gates", "stolen"), CASES.values(), ids=CASES.keys())
def test_a_waiting_preemptor_keeps_its_quota_only_with_the_gate(
    build: object, gates: tuple[tuple[str, bool], ...], stolen: bool
) -> None:
    case: Thrash = build(gates)  # type: ignore[operator]
    twin = Twin(case.spec, hold_evicted_quota=True)
    if case.waiting:
        twin.run_cycle()  # the waiting workload finds no room and is parked
        assert twin.workloads[case.waiting].admission is None
    twin.add_workload(pending_spec(case.preemptor))
    first = twin.run_cycle()
    assert {p.workload for p in first.preempted} == set(case.victims)
    gone, last = case.victims
    twin.evicted_gone(gone)
    interim = twin.run_cycle()
    thief = case.waiting or gone  # the workload that fits in the quota the first victim freed
    assert [a.workload for a in interim.admitted] == ([thief] if stolen else [])
    twin.evicted_gone(last)
    admitted = [a.workload for r in twin.run() for a in r.admitted]
    preemptor = f"ns/{case.preemptor.name}"
    assert (preemptor in admitted) is not stolen  # the thief holds what the preemptor needs
    assert (twin.workloads[preemptor].admission is not None) is not stolen


def test_the_gate_is_read_from_the_configuration() -> None:
    text = (
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
        "featureGates: {PrioritizePreemptorWorkloads: true, SchedulingEquivalenceHashing: false}\n"
    )
    config = parse_cluster([("config.yaml", text)]).config
    assert config.gate("PrioritizePreemptorWorkloads") is True
    assert config.gate("SchedulingEquivalenceHashing") is False
    assert config.gate("PartialAdmission") is True  # Kueue's default when not named
    default = parse_cluster([("config.yaml", "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n")])
    assert default.config.gate("PrioritizePreemptorWorkloads") is False


@pytest.mark.parametrize("on", [False, True])
def test_the_policy_field_reaches_kueues_configuration_and_the_simulators_twin(on: bool) -> None:
    """``queueing.prioritizePreemptorWorkloads`` -> render's Configuration ``featureGates`` -> the
    twin ``gpufleet simulate`` and ``tune`` run (the simulator parses what render writes)."""
    from gpufleet.policy import parse_policy, resolve
    from gpufleet.render import render
    from gpufleet.simulate.queue import cluster_spec
    from tests.support import EXAMPLES

    text = (EXAMPLES / "fleet.yaml").read_text(encoding="utf-8")
    if on:
        text = text.replace("queueing:", "queueing:\n  prioritizePreemptorWorkloads: true", 1)
    fleet = resolve(parse_policy(text, "fleet.yaml"))
    assert fleet.policy.queueing.prioritizePreemptorWorkloads is on
    config = yaml.safe_load(render(fleet).contents()["kueue-configuration.yaml"])
    assert config.get("featureGates") == ({"PrioritizePreemptorWorkloads": True} if on else None)
    spec = cluster_spec(fleet)
    assert spec.config.gate("PrioritizePreemptorWorkloads") is on
    assert Twin(spec).preemptor.preemptors.enabled is on
