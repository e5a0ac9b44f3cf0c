"""The recorder against the API test double, in-process: list, watch, bookmarks, 410 Gone, drops.

The API server is an HTTP-level test double (kmock + ``RVEmulator``) because the real control
plane is a later issue; the recorder's lightkube code runs unchanged against it over HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest
from recorder_cluster import FakeKueue
from recorder_emulator import RVEmulator
from recorder_support import write_kubeconfig

from gpufleet.ledger.records import EndReason
from gpufleet.ledger.store import Ledger
from gpufleet.recorder import service


async def _until(check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await asyncio.to_thread(check):
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("the ledger did not catch up in time")
        await asyncio.sleep(0.2)


def _ended(ledger: Ledger) -> dict[tuple[str, int], str]:
    return {(a.workload_uid, a.attempt): (a.end_reason or "open") for a in ledger.allocations()}


@contextlib.asynccontextmanager
async def _recorder(kmock: Any, tmp_path: Path, ledger_path: str) -> Any:
    config = service.RecorderConfig(
        ledger=ledger_path,
        kubeconfig=str(write_kubeconfig(tmp_path / "kubeconfig", str(kmock.url))),
        identity="test",
        lease_seconds=3,
        metrics_port=0,
        backoff_max_s=0.5,
    )
    task = asyncio.create_task(service.run(config))
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@pytest.mark.asyncio
@pytest.mark.kmock(cls=RVEmulator)
@pytest.mark.parametrize("drop_every", [None, 7], ids=["steady", "dropped-connections"])
async def test_every_admission_is_recorded_once_with_how_it_ended(
    kmock: Any, tmp_path: Path, drop_every: int | None
) -> None:
    kmock.drop_every = drop_every
    ledger_path = str(tmp_path / "ledger.db")
    async with httpx2.AsyncClient(base_url=str(kmock.url), timeout=60) as http:
        cluster = FakeKueue(http, seed=11)
        async with _recorder(kmock, tmp_path, ledger_path):
            await cluster.scenario(400)
            with Ledger.open(ledger_path) as ledger:
                await _until(lambda: _ended(ledger) == cluster.expected)
                allocations = ledger.allocations()
                assert ledger.verify().ok
    preempted = [a for a in allocations if a.end_reason == EndReason.PREEMPTED]
    assert preempted and all(a.end_detail == "InCohortReclamation" for a in preempted)
    assert all(a.team and a.model == "llama-3.1-8b" and a.checkpoint for a in allocations)
    ran = [a for a in allocations if a.end_reason is not None]  # every ended attempt had its pod bound
    assert all(a.placements and a.placements[0].gpu_model == "NVIDIA-H100-80GB-HBM3" for a in ran)
    bad = [a for a in ran if a.started is None or a.gpu_count != a.placements[0].gpus]
    assert bad == []


@pytest.mark.asyncio
@pytest.mark.kmock(cls=RVEmulator)
async def test_a_compacted_history_makes_the_recorder_relist_and_keep_the_final_state(
    kmock: Any, tmp_path: Path
) -> None:
    kmock.drop_every = 5
    ledger_path = str(tmp_path / "ledger.db")
    async with httpx2.AsyncClient(base_url=str(kmock.url), timeout=60) as http:
        cluster = FakeKueue(http, seed=3)
        async with _recorder(kmock, tmp_path, ledger_path):
            for _ in range(6):
                await cluster.scenario(cluster.transitions + 40)
                kmock.compact()  # every reconnect from before this point now gets 410 Gone
            with Ledger.open(ledger_path) as ledger:
                finished = {k: v for k, v in cluster.expected.items() if v in ("Finished", "Failed")}
                await _until(lambda: finished.items() <= _ended(ledger).items())
                assert ledger.verify().ok
    assert kmock.gone >= 1  # a watch resumed from a compacted resourceVersion, and the recorder relisted
