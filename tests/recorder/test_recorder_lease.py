"""Leader election on a coordination.k8s.io Lease, against the HTTP-level API test double
(kmock + ``RVEmulator``; the real control plane is a later issue)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from recorder_emulator import RVEmulator
from recorder_support import write_kubeconfig

from gpufleet import kube

T0 = datetime(2026, 11, 2, 8, 0, tzinfo=UTC)


@pytest.mark.asyncio
@pytest.mark.kmock(cls=RVEmulator)
async def test_one_holder_at_a_time_and_takeover_only_after_expiry(kmock: Any, tmp_path: Path) -> None:
    api = kube.client(str(write_kubeconfig(tmp_path / "kubeconfig", str(kmock.url))))
    hold = kube.hold_lease
    assert await hold(api, "gpufleet-system", "rec", "a", 15, now=T0)
    assert not await hold(api, "gpufleet-system", "rec", "b", 15, now=T0 + timedelta(seconds=10))
    assert await hold(api, "gpufleet-system", "rec", "a", 15, now=T0 + timedelta(seconds=10))  # renewal
    assert not await hold(api, "gpufleet-system", "rec", "b", 15, now=T0 + timedelta(seconds=24))
    # "a" missed its renewal deadline (renewed at 10 s, 15 s lease): "b" takes over
    assert await hold(api, "gpufleet-system", "rec", "b", 15, now=T0 + timedelta(seconds=26))
    assert not await hold(api, "gpufleet-system", "rec", "a", 15, now=T0 + timedelta(seconds=27))


@pytest.mark.asyncio
@pytest.mark.kmock(cls=RVEmulator)
async def test_two_candidates_racing_for_an_expired_lease_cannot_both_win(kmock: Any, tmp_path: Path) -> None:
    api = kube.client(str(write_kubeconfig(tmp_path / "kubeconfig", str(kmock.url))))
    assert await kube.hold_lease(api, "ns", "rec", "old", 15, now=T0)
    later = T0 + timedelta(minutes=5)
    results = await asyncio.gather(
        *(kube.hold_lease(api, "ns", "rec", who, 15, now=later) for who in ("b", "c", "d"))
    )
    assert sum(results) == 1  # the losers' writes carried a stale resourceVersion: 409 Conflict


@pytest.mark.asyncio
async def test_an_unreachable_api_server_is_a_lost_connection_not_a_crash(tmp_path: Path) -> None:
    # a refused connection or a read timeout is a transport error: the recorder retries, it does not crash
    api = kube.client(str(write_kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:9")))
    with pytest.raises(kube.ConnectionLost):
        await kube.hold_lease(api, "ns", "rec", "a", 15, now=T0)
