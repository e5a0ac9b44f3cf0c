"""Chaos: SIGKILL the recorder process at random points of a 5,000-transition stream, restart it, and
prove the ledger holds every admission exactly once, with how it ended (SQLite and PostgreSQL).

The API server is the HTTP-level test double (kmock + ``RVEmulator``), because the real control
plane is a later issue; the recorder itself is the real ``gpufleet record`` command in a child
process, killed without warning, so a kill can land in the middle of a database transaction.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest

import gpufleet
from gpufleet.ledger.store import Ledger
from tests.recorder.recorder_cluster import FakeKueue
from tests.recorder.recorder_emulator import RVEmulator
from tests.recorder.recorder_support import BACKENDS, write_kubeconfig

TRANSITIONS = int(os.environ.get("CHAOS_TRANSITIONS", "5000"))


class Chaos:
    """Starts ``gpufleet record``, kills it with SIGKILL after a random while, and starts it again."""

    def __init__(self, ledger: str, kubeconfig: Path, log: Path, seed: int) -> None:
        self.argv = [
            sys.executable,
            "-m",
            "gpufleet",
            "record",
            "--ledger",
            ledger,
            "--kubeconfig",
            str(kubeconfig),
            "--identity",
            "recorder-0",
            "--lease-seconds",
            "3",
            "--metrics-port",
            "0",
        ]
        src = str(Path(gpufleet.__file__).resolve().parents[1])
        self.env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
        self.log = log
        self.rng = random.Random(seed)
        self.kills = 0
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        with self.log.open("a") as log:
            self.process = await asyncio.create_subprocess_exec(*self.argv, env=self.env, stdout=log, stderr=log)

    async def kill(self) -> None:
        assert self.process is not None
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGKILL)
            self.kills += 1
        await self.process.wait()

    async def rampage(self, stop: asyncio.Event, ready: asyncio.Event, ledger: Ledger) -> None:
        """Kill at a random moment after the new process has committed something (mid-stream)."""
        while not stop.is_set():
            before = await asyncio.to_thread(ledger.positions)
            await self.start()
            deadline = asyncio.get_running_loop().time() + 120  # generous: CI machines are shared
            while await asyncio.to_thread(ledger.positions) == before and not stop.is_set():
                assert asyncio.get_running_loop().time() < deadline, f"no progress; see {self.log}"
                await asyncio.sleep(0.05)
            ready.set()  # the first run has stored its starting point: the cluster may begin
            await asyncio.sleep(self.rng.uniform(0.0, 1.0))
            await self.kill()


def _difference(seen: dict[tuple[str, int], str], expected: dict[tuple[str, int], str]) -> str:
    missing = sorted(expected.keys() - seen.keys())[:5]
    extra = sorted(seen.keys() - expected.keys())[:5]
    wrong = sorted((k, seen[k], v) for k, v in expected.items() if k in seen and seen[k] != v)[:5]
    return f"the recorder did not catch up: missing {missing}, extra {extra}, ended differently {wrong}"


def _ended(ledger: Ledger) -> dict[tuple[str, int], str]:
    return {(a.workload_uid, a.attempt): (a.end_reason or "open") for a in ledger.allocations()}


@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.kmock(cls=RVEmulator)
@pytest.mark.parametrize("ledger_url", BACKENDS, indirect=True)
async def test_sigkilled_recorder_records_every_admission_exactly_once(
    kmock: Any, tmp_path: Path, ledger_url: str
) -> None:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", str(kmock.url))
    chaos = Chaos(ledger_url, kubeconfig, tmp_path / "recorder.log", seed=5)
    stop, ready = asyncio.Event(), asyncio.Event()
    async with httpx2.AsyncClient(base_url=str(kmock.url), timeout=60) as http:
        cluster = FakeKueue(http, seed=5)
        with Ledger.open(ledger_url) as watcher:
            rampage = asyncio.create_task(chaos.rampage(stop, ready, watcher))
            await ready.wait()  # what happens before a recorder first runs is only seen as a listing
            await cluster.scenario(TRANSITIONS)
            stop.set()
            await rampage
    await chaos.start()  # one last, undisturbed run to catch up
    try:
        with Ledger.open(ledger_url) as ledger:
            deadline = asyncio.get_running_loop().time() + 180
            while (seen := await asyncio.to_thread(_ended, ledger)) != cluster.expected:
                assert asyncio.get_running_loop().time() < deadline, _difference(seen, cluster.expected)
                await asyncio.sleep(0.5)
            verdict = ledger.verify()
            entries = sum(1 for _ in ledger.entries())
    finally:
        await chaos.kill()
    assert chaos.kills >= 4, "the recorder should have been killed several times"
    assert len(cluster.expected) > 300 and cluster.transitions >= TRANSITIONS
    assert verdict.ok and verdict.chain.entries == entries
