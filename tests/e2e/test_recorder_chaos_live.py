"""Chaos on the testbed while Jobs flow through the real Kueue: the recorder SIGKILLed at seeded random
moments; kube-apiserver and Kueue restarted under it; etcd compacted so its resuming watch gets 410
Gone; two replicas with the leader killed. On SQLite and on a real PostgreSQL, nothing is lost and
nothing is written twice: the ledger's attempts equal what the finished Workloads show (Kueue counts
their evictions), no record is stored twice, and ``gpufleet audit verify`` passes.

Counts (kills, restarts, 410s, failovers, records compared) are printed for the closing note (-s).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from gpufleet.ledger.records import parse_time
from gpufleet.ledger.store import Ledger
from gpufleet.recorder import derive
from tests.e2e import recorder_live
from tests.e2e.conftest import Cluster, eventually
from tests.e2e.recorder_live import (
    BACKENDS,
    LEASE_NAMESPACE,
    Flow,
    RecorderProcess,
    Supervisor,
    attempts_told,
    audit_verify,
    differences,
    duplicated_entries,
    inferred_attempts,
    outcomes_from_ledger,
    preempted_events,
)

# the fixtures, from the helper module (a real PostgreSQL from tests/ledger's server)
postgres_url = recorder_live.postgres_url
ledger_url = recorder_live.ledger_url

JOBS = 24
LEASE_S = 6


@pytest.fixture
def lease_namespace(cluster: Cluster, applied: Path) -> Iterator[Cluster]:
    cluster.kubectl("create", "namespace", LEASE_NAMESPACE, check=False)
    yield cluster


def _name(kind: str, ledger_url: str) -> str:
    return f"{kind}-{'pg' if ledger_url.startswith('postgresql') else 'sq'}-"


def _settle(flow: Flow, ledger_url: str, recorder: RecorderProcess, what: str) -> dict[str, int]:
    """Wait until every Job ended and the ledger shows it; then the checks nothing lost / nothing twice."""
    eventually(flow.settled, f"every {flow.prefix} Job to finish or be deleted", timeout_s=300)
    eventually(lambda: recorder.running and recorder.leader(), "a leading recorder at the end")
    want = flow.expected()

    def caught_up() -> list[str] | bool:
        with Ledger.read(ledger_url) as ledger:
            gaps = differences(want, outcomes_from_ledger(ledger, set(want), set(flow.deleted), flow.prefix))
        return gaps if gaps else True

    last: list[str] | bool = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (last := caught_up()) is not True:
        time.sleep(0.5)
    if isinstance(last, list):
        with Ledger.read(ledger_url) as ledger:
            told = attempts_told(ledger, {line.split(":")[0] for line in last})
        raise AssertionError(f"{what}: the ledger differs from the API server: {last}; its attempts: {told}")
    with Ledger.read(ledger_url) as ledger:
        twice = duplicated_entries(ledger)
        compared = sum(len(o[0].earlier) + 1 for o in want.values())
        disagreed = sum(len(o) > 1 for o in want.values())
        entries = sum(1 for _ in ledger.entries())
        guessed = inferred_attempts(ledger)
        raced = sum(1 for a in ledger.allocations() if derive.BEGAN_TO_EVICT in a.end_message)
    assert twice == 0, f"{what}: {twice} records stored twice"
    code, output = audit_verify(ledger_url)
    assert code == 0, output
    return {
        "workloads": len(want),
        "attempts compared": compared,
        "of them inferred from Kueue's count": guessed,
        "finished while Kueue was evicting them": raced,
        "preemptions in Kueue's events": sum(preempted_events(flow.cluster).get(uid, 0) for uid in want),
        "workloads whose count and events disagree": disagreed,
        "entries": entries,
        "lost": 0,
        "duplicated": twice,
    }


def _one_recorder(
    cluster: Cluster, ledger_url: str, tmp_path: Path, kind: str, seed: int
) -> tuple[RecorderProcess, Flow]:
    """The test's single recorder (replica r0, on a Lease of the test's own) and its flow of Jobs."""
    prefix = _name(kind, ledger_url)
    log = tmp_path / "recorder.log"
    recorder = RecorderProcess(
        ledger_url, cluster.kubeconfig, log, identity="r0", lease=f"{prefix}lease", lease_s=LEASE_S
    )
    return recorder, Flow(cluster, prefix, JOBS, seed=seed)


def _report(what: str, counts: dict[str, int | float]) -> None:
    print(f"\nchaos {what}: " + ", ".join(f"{k} {v:g}" for k, v in counts.items()))


@pytest.mark.parametrize("ledger_url", BACKENDS, indirect=True)
def test_a_recorder_sigkilled_at_random_moments_loses_and_duplicates_nothing(
    lease_namespace: Cluster, ledger_url: str, tmp_path: Path
) -> None:
    recorder, flow = _one_recorder(lease_namespace, ledger_url, tmp_path, "kill", seed=16)
    rng = random.Random(16)
    try:
        recorder.start()
        eventually(recorder.leader, "the recorder to lead")
        moving = True
        while moving or not flow.settled():
            moving = flow.step()
            with Ledger.read(ledger_url) as ledger:
                before = ledger.positions()
            time.sleep(rng.uniform(0.2, 1.5))
            with Ledger.read(ledger_url) as ledger:
                progressed = ledger.positions() != before
            if rng.random() < (0.8 if progressed else 0.3):  # some land in start-up, listing, relisting
                recorder.kill()  # no warning: a transaction in flight is cut where it stands
                recorder.start()
        counts = _settle(flow, ledger_url, recorder, "SIGKILL")
    finally:
        recorder.kill()
        flow.cleanup()
    assert recorder.kills >= 3
    _report("SIGKILL", {"kills": recorder.kills, **counts})


@pytest.mark.parametrize("ledger_url", BACKENDS, indirect=True)
def test_kube_apiserver_and_kueue_restarted_under_the_recorder(
    lease_namespace: Cluster, ledger_url: str, tmp_path: Path
) -> None:
    recorder, flow = _one_recorder(lease_namespace, ledger_url, tmp_path, "restart", seed=17)
    restarted: list[str] = []
    with Supervisor(recorder) as supervisor:
        try:
            eventually(recorder.leader, "the recorder to lead")
            plan = {1: "kube-apiserver", 3: "kueue", 4: "kube-apiserver"}
            waves = 0
            while flow.step() or not flow.settled():
                waves += 1
                if waves in plan:
                    lease_namespace.bed.restart(plan[waves])
                    restarted.append(plan[waves])
                time.sleep(1.0)
            counts = _settle(flow, ledger_url, recorder, "restarts")
        finally:
            flow.cleanup()
    assert restarted == ["kube-apiserver", "kueue", "kube-apiserver"]
    # an API server away for longer than the Lease: the recorder stops writing and exits to be restarted,
    # saying so (exit 75, EX_TEMPFAIL), not as a crash
    assert set(supervisor.codes) <= {75}, supervisor.codes
    assert recorder.logged("stopped writing, restart to rejoin as a follower") == supervisor.exits
    assert recorder.logged("This is a bug in gpufleet") == 0
    _report(
        "restarts",
        {"restarts": len(restarted), "recorder exits (lost Lease)": supervisor.exits,
         "watch reconnects": recorder.logged("reconnecting in"), "410 Gone relists": recorder.logged("is gone;"),
         **counts},
    )  # fmt: skip


@pytest.mark.parametrize("ledger_url", BACKENDS, indirect=True)
def test_a_watch_resuming_after_etcd_compaction_gets_410_gone_and_relists(
    lease_namespace: Cluster, ledger_url: str, tmp_path: Path
) -> None:
    recorder, flow = _one_recorder(lease_namespace, ledger_url, tmp_path, "gone", seed=18)
    try:
        recorder.start()
        eventually(recorder.leader, "the recorder to lead")
        flow.step()
        flow.step()
        time.sleep(3)
        recorder.kill()  # down while the cluster moves on
        # new Jobs, but none deleted: a Job admitted and deleted while no recorder watches is gone
        # before the relist, and no record of it can exist (docs/ledger.md, "What no count can
        # restore"); under load the first admissions can land after the kill
        flow.step(delete=False)
        flow.step(delete=False)
        time.sleep(3)
        compacted = lease_namespace.bed.compact_etcd()
        # the API server's watch cache keeps recent events in memory; restarted, it rebuilds from the
        # compacted etcd, so resuming from the recorder's stored resourceVersion is too old: 410 Gone
        lease_namespace.bed.restart("kube-apiserver")
        with Ledger.read(ledger_url) as ledger:
            stored = ledger.positions()
        assert stored and all(int(rv) < compacted for rv in stored.values())
        recorder.start()
        gone = eventually(lambda: recorder.restarts("Gone"), "the resumed watches to get 410 Gone", timeout_s=60)
        while flow.step() or not flow.settled():
            time.sleep(1.0)
        counts = _settle(flow, ledger_url, recorder, "410 Gone")
    finally:
        recorder.kill()
        flow.cleanup()
    assert gone >= 1
    _report("410 Gone", {"compacted at revision": compacted, "410 Gone relists": recorder.logged("is gone;"), **counts})


def _lease(cluster: Cluster, name: str) -> dict[str, str]:
    spec: dict[str, str] = cluster.get("lease", name, f"--namespace={LEASE_NAMESPACE}")["spec"]
    return spec


@pytest.mark.parametrize("ledger_url", BACKENDS, indirect=True)
def test_two_replicas_one_writer_and_failover_within_the_lease(
    lease_namespace: Cluster, ledger_url: str, tmp_path: Path
) -> None:
    cluster, prefix = lease_namespace, _name("failover", ledger_url)
    lease = f"{prefix}lease"
    replicas = [
        RecorderProcess(ledger_url, cluster.kubeconfig, tmp_path / f"{n}.log", identity=n, lease=lease, lease_s=LEASE_S)
        for n in ("replica-a", "replica-b")
    ]
    by_name = {r.identity: r for r in replicas}
    flow = Flow(cluster, prefix, JOBS, seed=19)
    gaps: list[float] = []
    both_leading = 0
    with Supervisor(*replicas):
        try:
            eventually(lambda: any(r.leader() for r in replicas), "one replica to lead")
            failovers = 0
            while flow.step() or not flow.settled():
                both_leading += all(r.leader() for r in replicas)
                if failovers < 2 and flow.created >= (failovers + 1) * JOBS // 3:
                    old = by_name[_lease(cluster, lease)["holderIdentity"]]
                    old.paused = True
                    old.kill()
                    last_renewal = parse_time(_lease(cluster, lease)["renewTime"])
                    new = next(r for r in replicas if r is not old)
                    eventually(lambda new=new: _lease(cluster, lease)["holderIdentity"] == new.identity, "failover")
                    taken = parse_time(_lease(cluster, lease)["acquireTime"])
                    gaps.append((taken - last_renewal).total_seconds())
                    old.paused = False  # the kubelet restarts it: now a follower
                    following = old.logged(" follows: lease ")
                    eventually(lambda old=old, n=following: old.logged(" follows: lease ") > n, "a new follower")
                    failovers += 1
                time.sleep(1.0)
            leader = by_name[_lease(cluster, lease)["holderIdentity"]]
            counts = _settle(flow, ledger_url, leader, "failover")
        finally:
            flow.cleanup()
    spec = _lease(cluster, lease)
    assert int(spec.get("leaseTransitions", 0)) >= 2
    retry = LEASE_S / 3  # a follower tries every third of the Lease
    for gap in gaps:
        # one writer at a time: taken only after the holder's Lease ran out; and within the Lease's
        # duration plus the follower's retry period (+1 s for the requests themselves)
        assert timedelta(seconds=LEASE_S) < timedelta(seconds=gap) <= timedelta(seconds=LEASE_S + retry + 1.0), gaps
    assert both_leading == 0
    _report(
        "failover",
        {"failovers": len(gaps), "lease s": LEASE_S, **{f"takeover {i + 1} s after last renewal": g
                                                          for i, g in enumerate(gaps)}, **counts},
    )  # fmt: skip
    print(json.dumps({"gaps": gaps}))
