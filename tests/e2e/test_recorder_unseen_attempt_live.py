"""An attempt wholly inside a window the recorder never saw, on the testbed: recorded from Kueue's count.

The recorder is SIGKILLed; while it is down, beta's Job borrows alpha's idle GPUs, alpha reclaims them
(the real Kueue preempts beta, ``InCohortReclamation``), alpha's short Job finishes and beta's is
readmitted and finishes. etcd is then compacted and kube-apiserver restarted, so the recorder's
resuming watch gets 410 Gone and its relist shows only the end: one finished Workload whose
``schedulingStats.evictions`` counts one preemption. The ledger must hold both attempts: the first
marked ``InferredFromEvictionCount`` with no time, the second as observed; a second restart adds
nothing; ``audit why`` and ``audit verify`` read it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from gpufleet.ledger.records import INFERRED_FROM_COUNT, EndReason, inferred, parse_time
from gpufleet.ledger.store import Ledger
from tests.e2e.conftest import Cluster, eventually
from tests.e2e.recorder_live import LEASE_NAMESPACE, RecorderProcess, audit_verify, job, live_workloads, owner_job

PREFIX = "unseen-"


def _workload(cluster: Cluster, name: str) -> dict[str, Any] | None:
    return next((w for w in live_workloads(cluster, PREFIX) if owner_job(w) == name), None)


def _has(cluster: Cluster, name: str, kind: str) -> dict[str, Any] | None:
    wl = _workload(cluster, name)
    conds = {c["type"]: c for c in (wl or {}).get("status", {}).get("conditions") or []}
    return wl if conds.get(kind, {}).get("status") == "True" else None


def test_an_attempt_wholly_inside_a_410_window_is_inferred_once(
    cluster: Cluster, applied: Path, tmp_path: Path
) -> None:
    cluster.kubectl("create", "namespace", LEASE_NAMESPACE, check=False)
    ledger = str(tmp_path / "ledger.db")
    recorder = RecorderProcess(
        ledger, cluster.kubeconfig, tmp_path / "recorder.log", identity="r0", lease="unseen-lease", lease_s=6
    )
    borrower, reclaimer = f"{PREFIX}borrows", f"{PREFIX}reclaims"
    try:
        recorder.start()
        eventually(recorder.leader, "the recorder to lead")

        def positioned() -> bool:
            with Ledger.read(ledger) as opened:
                return bool(opened.positions())

        eventually(positioned, "the recorder to store its positions")
        recorder.kill()  # down from here: it sees none of what follows until after the 410
        cluster.apply([job(borrower, "beta", "unseen", pods=2, gpus=4, run_for="3s")])
        eventually(lambda: _has(cluster, borrower, "Admitted"), "beta's 8-GPU job to borrow")
        cluster.apply([job(reclaimer, "alpha", "unseen", gpus=4, run_for="2s")])
        eventually(lambda: _has(cluster, borrower, "Preempted"), "Kueue to preempt the borrower")
        eventually(lambda: _has(cluster, reclaimer, "Finished"), "alpha's job to finish", timeout_s=120)
        final = eventually(lambda: _has(cluster, borrower, "Finished"), "the readmitted borrower to finish", 180)
        counted = final["status"]["schedulingStats"]["evictions"]
        assert sum(int(e["count"]) for e in counted) == 1 and counted[0]["reason"] == "Preempted", counted
        compacted = cluster.bed.compact_etcd()
        cluster.bed.restart("kube-apiserver")
        with Ledger.read(ledger) as opened:
            assert all(int(rv) < compacted for rv in opened.positions().values())
        recorder.start()
        eventually(lambda: recorder.restarts("Gone"), "the resumed watches to get 410 Gone", timeout_s=60)
        uid = final["metadata"]["uid"]

        def both() -> list[Any] | None:
            with Ledger.read(ledger) as opened:
                found = sorted(opened.allocations(workload_uid=uid), key=lambda a: a.attempt)
            return found if len(found) == 2 and found[1].end_reason is not None else None

        first, second = eventually(both, "the borrower's two attempts in the ledger", timeout_s=60)
        reserved = next(c for c in final["status"]["conditions"] if c["type"] == "QuotaReserved")
        assert (second.attempt, second.end_reason, inferred(second)) == (2, EndReason.FINISHED, False)
        assert second.quota_reserved == parse_time(reserved["lastTransitionTime"])
        assert (first.attempt, first.end_reason, first.end_detail) == (1, EndReason.PREEMPTED, INFERRED_FROM_COUNT)
        assert (first.quota_reserved, first.admitted, first.started, first.finished) == (None, None, None, None)
        assert (
            "evicted as Preempted" in first.end_message and f"and {reserved['lastTransitionTime']}" in first.end_message
        )
        with Ledger.read(ledger) as opened:
            entries = sum(1 for _ in opened.entries())
        recorder.kill()  # restarted on the same ledger: the inferred attempt is not written again
        recorder.start()
        eventually(recorder.leader, "the restarted recorder to lead")
        eventually(lambda: recorder.sample("gpufleet_recorder_events_total") > 0, "the restarted recorder's events")
        with Ledger.read(ledger) as opened:
            assert sum(1 for _ in opened.entries()) == entries
            assert len(opened.allocations(workload_uid=uid)) == 2
        why = subprocess.run(
            [sys.executable, "-m", "gpufleet", "audit", "why", f"beta/{final['metadata']['name']}", "--ledger", ledger,
             "--json"], capture_output=True, text=True, check=True, timeout=120,
        )  # fmt: skip
        attempts = json.loads(why.stdout)["attempts"]
        assert [(a["attempt"], a["observed"], a["endReason"]) for a in attempts] == [
            (1, False, "Preempted"),
            (2, True, "Finished"),
        ]
        code, output = audit_verify(ledger)
        assert code == 0, output
        print(f"\nunseen attempt: inferred 1 of 2 attempts, first: {first.end_message}")
    finally:
        recorder.kill()
        for team in ("alpha", "beta"):
            cluster.kubectl(
                "delete", "jobs", "--selector=e2e.gpufleet.io/run=unseen", f"--namespace={team}", "--wait=true",
                "--timeout=120s", check=False,
            )  # fmt: skip
