"""The recorder publishes signed checkpoints to a file, and nothing it published is ever contradicted.

The API server is the HTTP-level test double (kmock + ``RVEmulator``), because the real control
plane is a later issue; the ledger, the signing and the files are real, and in the SIGKILL test
the recorder is the real ``gpufleet record`` in a child process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx2
import pytest
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.ledger import checkpoint as checkpoints
from gpufleet.ledger import note
from gpufleet.ledger.records import from_canonical
from gpufleet.ledger.store import Ledger
from gpufleet.recorder import service
from gpufleet.recorder.metrics import Metrics
from gpufleet.recorder.publish import CheckpointPolicy, Publisher
from tests.recorder.recorder_cluster import FakeKueue
from tests.recorder.recorder_emulator import RVEmulator
from tests.recorder.recorder_support import BACKENDS, write_kubeconfig
from tests.recorder.test_recorder_chaos import Chaos

runner = CliRunner()


def _keys(tmp_path: Path) -> tuple[Path, Path]:
    prefix = tmp_path / "recorder-key"
    assert runner.invoke(app, ["audit", "keygen", "-o", str(prefix), "--name", "test.example/ledger"]).exit_code == 0
    return prefix, tmp_path / "recorder-key.pub"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _extends(ledger_url: str, signed: str, public: Path) -> checkpoints.Extension:
    with Ledger.read(ledger_url) as ledger:
        return checkpoints.check(ledger, signed, note.parse_verifier(public.read_text()), origin=None)


@pytest.mark.asyncio
@pytest.mark.kmock(cls=RVEmulator)
async def test_the_recorder_publishes_checkpoints_to_a_file_and_exposes_when(kmock: Any, tmp_path: Path) -> None:
    private, public = _keys(tmp_path)
    published = tmp_path / "published" / "checkpoint"
    ledger_path = str(tmp_path / "ledger.db")
    port = _free_port()
    config = service.RecorderConfig(
        ledger=ledger_path,
        kubeconfig=str(write_kubeconfig(tmp_path / "kubeconfig", str(kmock.url))),
        identity="test",
        lease_seconds=3,
        metrics_port=port,
        backoff_max_s=0.5,
        checkpoints=CheckpointPolicy(key=private, targets=(f"file:{published}",), every_entries=25, every_seconds=3600),
    )
    sizes: set[int] = set()

    async def collect(stop: asyncio.Event) -> None:
        while not stop.is_set():
            if published.exists():
                sizes.add(checkpoints.parse(published.read_text())[0].size)  # always whole
            await asyncio.sleep(0.02)

    async with httpx2.AsyncClient(base_url=str(kmock.url), timeout=60) as http:
        cluster = FakeKueue(http, seed=13)
        task = asyncio.create_task(service.run(config))
        stop = asyncio.Event()
        collector = asyncio.create_task(collect(stop))
        try:
            await cluster.scenario(300)
            deadline = asyncio.get_running_loop().time() + 60
            while True:
                with Ledger.read(ledger_path) as ledger:
                    head = ledger.tree_head()[0]
                if sizes and max(sizes) > head - 25 and len(sizes) >= 3:
                    break
                assert asyncio.get_running_loop().time() < deadline, f"checkpoints seen at sizes {sorted(sizes)}"
                await asyncio.sleep(0.1)
            async with httpx2.AsyncClient() as metrics_http:
                text = (await metrics_http.get(f"http://127.0.0.1:{port}/metrics")).text
        finally:
            stop.set()
            await collector
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    stamp = next(
        line for line in text.splitlines() if line.startswith("gpufleet_recorder_last_checkpoint_timestamp_seconds ")
    )
    assert float(stamp.split()[1]) > 1.7e9  # unix seconds, set by a publication
    args = ["audit", "verify", "--ledger", ledger_path, "--checkpoint", str(published), "--pubkey", str(public)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0 and "extends checkpoint 'test.example/ledger'" in result.stdout, result.output


@pytest.mark.parametrize("ledger_url", BACKENDS, indirect=True)
def test_a_ledger_rewritten_under_the_recorder_is_not_signed(
    ledger_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.ledger.ledger_scenario import history

    private, _ = _keys(tmp_path)
    target = tmp_path / "checkpoint"
    policy = CheckpointPolicy(key=private, targets=(f"file:{target}", "log"), every_entries=1)
    signer = note.parse_signer(private.read_text())
    with Ledger.open(ledger_url) as ledger:
        ledger.append(history())
        with caplog.at_level(logging.INFO, logger="gpufleet.recorder.checkpoint"):
            assert Publisher(policy, signer, Metrics()).publish(ledger) is not None
        assert "checkpoint " in caplog.text and "\\n\\n\\u2014" not in caplog.text  # the log target: one line
        first = target.read_text()
        records = [from_canonical(e.body) for e in ledger.entries()]
        with ledger.engine.begin() as conn:
            for table in ("ledger_entries", "ledger_current", "ledger_head", "ledger_tree"):
                conn.exec_driver_sql(f"DELETE FROM {table}")
        ledger.append([replace(records[0], team="vision"), *records[1:]])  # every hash recomputed
        restarted = Publisher(policy, signer, Metrics())
        restarted.resume()  # a restarted recorder picks up what it published last
        with caplog.at_level(logging.ERROR, logger="gpufleet.recorder.checkpoint"):
            assert restarted.publish(ledger) is None
    assert "NOT publishing" in caplog.text and target.read_text() == first


@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.kmock(cls=RVEmulator)
@pytest.mark.parametrize("ledger_url", BACKENDS, indirect=True)
async def test_sigkilled_recorder_never_leaves_a_half_checkpoint_or_contradicts_one(
    kmock: Any, tmp_path: Path, ledger_url: str
) -> None:
    private, public = _keys(tmp_path)
    published = tmp_path / "checkpoint"
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", str(kmock.url))
    chaos = Chaos(ledger_url, kubeconfig, tmp_path / "recorder.log", seed=9)
    chaos.argv += ["--checkpoint-key", str(private), "--checkpoint-to", f"file:{published}"]
    chaos.argv += ["--checkpoint-every-entries", "20"]
    seen: list[str] = []

    async def collect(stop: asyncio.Event) -> None:
        while not stop.is_set():
            if published.exists():
                text = published.read_text()
                checkpoints.parse(text)  # whole, every time it is looked at
                if not seen or seen[-1] != text:
                    seen.append(text)
            await asyncio.sleep(0.02)

    stop, ready, done = asyncio.Event(), asyncio.Event(), asyncio.Event()
    async with httpx2.AsyncClient(base_url=str(kmock.url), timeout=60) as http:
        cluster = FakeKueue(http, seed=9)
        with Ledger.open(ledger_url) as watcher:
            collector = asyncio.create_task(collect(done))
            rampage = asyncio.create_task(chaos.rampage(stop, ready, watcher))
            await ready.wait()
            await cluster.scenario(1500)
            stop.set()
            await rampage
            await chaos.start()  # one last, undisturbed run: it catches up and checkpoints the end
            try:
                deadline = asyncio.get_running_loop().time() + 180
                while not seen or checkpoints.parse(seen[-1])[0].size < await asyncio.to_thread(_settled, watcher):
                    assert asyncio.get_running_loop().time() < deadline, f"no checkpoint near the head; see {chaos.log}"
                    await asyncio.sleep(0.2)
            finally:
                await chaos.kill()
                done.set()
                await collector
    assert chaos.kills >= 3 and len(seen) >= 2, (chaos.kills, len(seen))
    for signed in seen:  # the final ledger extends every checkpoint ever published
        result = _extends(ledger_url, signed, public)
        assert result.ok, (result.problems, result.verdict)


def _settled(ledger: Ledger) -> int:
    """The tree size a checkpoint every 20 entries must have reached once the recorder caught up."""
    return max(1, ledger.tree_head()[0] - 19)
