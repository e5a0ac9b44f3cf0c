"""``gpufleet record`` against the real API server, with the real Kueue deciding: the ledger holds what the
API server's history shows, record for record, exactly once; ``audit why`` reads with Kueue's words.

One scenario, run once for the module: a Job that finishes, one that fails (the Job controller's
``activeDeadlineSeconds``), beta borrowing alpha's idle GPUs and being preempted when alpha reclaims
them (``InCohortReclamation``), a Job that waits for alpha's quota with Kueue's own message, and
deletions of a pending and of running Jobs. A ``kubectl --watch`` beside the recorder is the oracle.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.ledger.records import EndReason
from gpufleet.ledger.store import Ledger
from tests.e2e.conftest import Cluster, eventually
from tests.e2e.recorder_live import (
    LEASE_NAMESPACE,
    History,
    RecorderProcess,
    WorkloadWatch,
    compare,
    duplicated_entries,
    job,
    live_workloads,
)

PREFIX = "rec-"


def _conds(wl: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (wl or {}).get("status", {}).get("conditions") or []}


def _workload(cluster: Cluster, job_name: str) -> dict[str, Any] | None:
    return next((w for w in live_workloads(cluster, PREFIX) if _owner(w) == job_name), None)


def _owner(wl: dict[str, Any]) -> str:
    return next((o["name"] for o in wl["metadata"].get("ownerReferences") or [] if o["kind"] == "Job"), "")


def _is(cluster: Cluster, job_name: str, kind: str, status: str = "True") -> dict[str, Any] | None:
    wl = _workload(cluster, job_name)
    return wl if _conds(wl).get(kind, {}).get("status") == status else None


def _delete(cluster: Cluster, team: str, name: str) -> None:
    cluster.kubectl(
        "delete", "job", name, f"--namespace={team}", "--cascade=foreground", "--wait=true", "--timeout=90s"
    )


@dataclass
class Recorded:
    ledger: str
    history: History
    waited: dict[str, Any]  # the Workload of the job that waited for alpha's quota, while it waited


@pytest.fixture(scope="module")
def recorded(cluster: Cluster, applied: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    folder = tmp_path_factory.mktemp("recorder")
    ledger = str(folder / "ledger.db")
    cluster.kubectl("create", "namespace", LEASE_NAMESPACE, check=False)
    watch = WorkloadWatch(cluster.bed.bin.path("kubectl"), cluster.kubeconfig)
    recorder = RecorderProcess(
        ledger, cluster.kubeconfig, folder / "recorder.log", identity="recorder-0", lease="rec-history", lease_s=6
    )
    recorder.start()
    try:
        eventually(recorder.leader, f"the recorder to take the Lease (log: {recorder.log})")
        cluster.apply([
            job(f"{PREFIX}done", "alpha", "history", gpus=1, run_for="2s"),
            job(f"{PREFIX}fails", "alpha", "history", gpus=1, deadline_s=2),
        ])  # fmt: skip
        eventually(lambda: _is(cluster, f"{PREFIX}done", "Finished"), "the short job to finish")
        eventually(lambda: _is(cluster, f"{PREFIX}fails", "Finished"), "the failing job to fail")
        # beta borrows alpha's idle 4 GPUs, then alpha reclaims them: Kueue preempts beta's job
        cluster.apply([job(f"{PREFIX}borrows", "beta", "history", pods=2, gpus=4)])
        eventually(lambda: _is(cluster, f"{PREFIX}borrows", "Admitted"), "beta's 8-GPU job to borrow")
        cluster.apply([job(f"{PREFIX}reclaims", "alpha", "history", gpus=4)])
        eventually(lambda: _is(cluster, f"{PREFIX}borrows", "Preempted"), "Kueue to preempt the borrower")
        eventually(lambda: _is(cluster, f"{PREFIX}reclaims", "Admitted"), "alpha's job to be admitted")
        # alpha's quota is spent: the next waits with Kueue's message
        cluster.apply([job(f"{PREFIX}waits", "alpha", "history", gpus=2)])

        def waiting() -> dict[str, Any] | None:
            wl = _is(cluster, f"{PREFIX}waits", "QuotaReserved", "False")
            return wl if wl and _conds(wl)["QuotaReserved"].get("message") else None

        waited = eventually(waiting, "Kueue to say why alpha's second job waits")
        _delete(cluster, "beta", f"{PREFIX}borrows")  # deleted while pending after its preemption
        _delete(cluster, "alpha", f"{PREFIX}reclaims")  # deleted while running: the waiting job gets in
        eventually(lambda: _is(cluster, f"{PREFIX}waits", "Admitted"), "the waiting job to be admitted")
        _delete(cluster, "alpha", f"{PREFIX}waits")
        uids = watch.uids(PREFIX)
        assert len(uids) == 5

        def caught_up() -> bool:
            with Ledger.read(ledger) as opened:
                return not compare(opened, watch.history(uids))

        eventually(caught_up, "the recorder to catch up with the API server", timeout_s=60)
        yield Recorded(ledger, watch.history(uids), waited)
    finally:
        recorder.kill()
        watch.stop()
        for team in ("alpha", "beta"):
            for wl in live_workloads(cluster, PREFIX):
                if wl["metadata"]["namespace"] == team:
                    _delete(cluster, team, _owner(wl))


def test_the_ledger_matches_the_api_servers_history_record_for_record(recorded: Recorded) -> None:
    history = recorded.history
    with Ledger.read(recorded.ledger) as ledger:
        assert compare(ledger, history) == []
        assert duplicated_entries(ledger) == 0
        allocations = ledger.allocations()
        waits = ledger.waits()
    # the scenario produced every way an attempt ends, and each is in the ledger once
    # a Job deleted while running ends its attempt as Kueue tells: Finished with OwnerNotFound when Kueue
    # sees the Job gone first, or the Workload's own deletion when the garbage collector is faster
    deleted = {"OwnerNotFound", "Deleted"}
    ends = sorted((a.name.rsplit("-", 1)[0], a.attempt, a.end_reason, a.end_detail in deleted) for a in allocations)
    assert ends == [
        ("job-rec-borrows", 1, EndReason.PREEMPTED, False),
        ("job-rec-done", 1, EndReason.FINISHED, False),
        ("job-rec-fails", 1, EndReason.FAILED, False),
        ("job-rec-reclaims", 1, EndReason.EVICTED, True),
        ("job-rec-waits", 1, EndReason.EVICTED, True),
    ]
    details = {a.name.rsplit("-", 1)[0]: a.end_detail for a in allocations}
    assert (details["job-rec-borrows"], details["job-rec-done"], details["job-rec-fails"]) == (
        "InCohortReclamation",
        "Succeeded",
        "Failed",
    )
    assert sum(len(a) for a in history.attempts.values()) == len(allocations) == 5
    assert all(w.end is not None for w in waits), "every wait closed: admitted or deleted"
    borrower = next(a for a in allocations if a.name.startswith("job-rec-borrows"))
    assert borrower.gpu_count == 8 and sum(p.gpus for p in borrower.placements) == 8
    assert "Preempted to accommodate" in borrower.end_message


def test_audit_why_on_a_real_waiting_workload_reads_with_kueues_own_message(recorded: Recorded) -> None:
    waited = recorded.waited
    kueue_says = {c["type"]: c for c in waited["status"]["conditions"]}["QuotaReserved"]["message"]
    assert "nvidia.com/gpu" in kueue_says  # Kueue's words, e.g. "couldn't assign flavors to pod set main: ..."
    name = f"{waited['metadata']['namespace']}/{waited['metadata']['name']}"
    result = CliRunner().invoke(app, ["audit", "why", name, "--ledger", recorded.ledger, "--json"])
    assert result.exit_code == 0, result.output
    answer = json.loads(result.output)
    messages = [w["message"] for w in answer["waits"]]
    assert kueue_says in messages
    text = CliRunner().invoke(app, ["audit", "why", name, "--ledger", recorded.ledger])
    assert text.exit_code == 0 and kueue_says in " ".join(text.output.split())


def test_the_recorded_ledger_replays_with_catalogue_gpu_models(recorded: Recorded, tmp_path: Path) -> None:
    """Issue 32: the recorder stores the node's ``nvidia.com/gpu.product`` (``NVIDIA-H100-80GB-HBM3``);
    ``trace convert --from-ledger`` must give the catalogue name the simulator's nodes carry, so the
    replayed job is placed on its model's nodes instead of pinned to none."""
    from gpufleet.policy import load_policy, resolve
    from gpufleet.simulate.config import SimulationConfig
    from gpufleet.simulate.run import simulate
    from gpufleet.trace import read_trace
    from tests.e2e.conftest import POLICY

    with Ledger.read(recorded.ledger) as opened:
        # the ledger names a job by its Workload (job-<job name>-<hash>)
        raw = {p.gpu_model for a in opened.allocations() if f"-{PREFIX}done-" in a.name for p in a.placements}
    assert raw == {"NVIDIA-H100-80GB-HBM3"}  # what the recorder really wrote
    out = tmp_path / "replay.csv"
    args = ["trace", "convert", "--from-ledger", recorded.ledger, "--policy", str(POLICY), "-o", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    (done,) = [j for j in read_trace(out) if f"-{PREFIX}done-" in j.job_id]
    assert done.gpu_models == ("H100-SXM5-80GB",)
    run = simulate(resolve(load_policy(POLICY)), [done], SimulationConfig())
    (replayed,) = run.outcome.runs
    assert replayed.attempts[-1].started is not None and replayed.attempts[-1].end_reason == "Finished"
