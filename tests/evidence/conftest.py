"""A real Prometheus over backfilled DCGM series, started once per test session on loopback."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx2
import pytest
from evidence_scenario import Windows, generate, windows

PROMETHEUS = Path("/usr/bin/prometheus")
PROMTOOL = Path("/usr/bin/promtool")
SETUP = ".ci/setup.d/prometheus.sh"


@dataclass(frozen=True)
class LivePrometheus:
    url: str
    windows: Windows


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LivePrometheus]:
    if not (PROMETHEUS.exists() and PROMTOOL.exists()):
        pytest.skip(f"Debian's prometheus package is not installed ({PROMETHEUS}, {PROMTOOL}); run {SETUP}")
    root = tmp_path_factory.mktemp("prometheus")
    span = windows(datetime.now(UTC))
    (root / "dcgm.om").write_text(generate(span), encoding="utf-8")
    data = root / "data"
    subprocess.run(
        [str(PROMTOOL), "tsdb", "create-blocks-from", "openmetrics", str(root / "dcgm.om"), str(data)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    (root / "prometheus.yml").write_text("global:\n  scrape_interval: 30s\nscrape_configs: []\n", encoding="utf-8")
    port = _free_port()
    log = (root / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        [
            str(PROMETHEUS),
            f"--config.file={root / 'prometheus.yml'}",
            f"--storage.tsdb.path={data}",
            "--storage.tsdb.retention.time=10y",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx2.get(f"{url}/-/ready", timeout=1).status_code == 200:
                    break
            except httpx2.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"prometheus did not start: {(root / 'prometheus.log').read_text()[-2000:]}")
            time.sleep(0.2)
        yield LivePrometheus(url=url, windows=span)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        shutil.rmtree(root, ignore_errors=True)
