"""Real Prometheus servers on loopback: one over backfilled DCGM series, one that demands credentials."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import httpx2
import pytest

from tests.evidence.evidence_scenario import LivePrometheus, generate, windows

PROMETHEUS = Path("/usr/bin/prometheus")
PROMTOOL = Path("/usr/bin/promtool")
SETUP = ".ci/setup.d/prometheus.sh"
# basic_auth_users needs a bcrypt hash; no test ever logs in, so any well-formed hash will do
WEB_CONFIG = "basic_auth_users:\n  admin: $2b$12$hNf2lSsxfm0.i4a.1kVpSOVyBCfIB51VRjgBUyv6kdnyTlgWj81Ay\n"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _need_binaries() -> None:
    if not (PROMETHEUS.exists() and PROMTOOL.exists()):
        pytest.skip(f"Debian's prometheus package is not installed ({PROMETHEUS}, {PROMTOOL}); run {SETUP}")


EMPTY_CONFIG = "global:\n  scrape_interval: 30s\nscrape_configs: []\n"


@contextmanager
def _serve(root: Path, data: Path, *extra: str, config: str = EMPTY_CONFIG) -> Iterator[str]:
    """Start ``prometheus`` over ``data`` on a free loopback port, healthy; yield its URL; stop it.

    The port is free when picked but another test (pytest-xdist runs several) may take it before
    Prometheus binds, so a start that exits on a taken address is retried on a new port."""
    (root / "prometheus.yml").write_text(config, encoding="utf-8")
    log_path = root / "prometheus.log"
    for _attempt in range(3):
        port = _free_port()
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                [
                    str(PROMETHEUS),
                    f"--config.file={root / 'prometheus.yml'}",
                    f"--storage.tsdb.path={data}",
                    "--storage.tsdb.retention.time=10y",
                    f"--web.listen-address=127.0.0.1:{port}",
                    *extra,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        url = f"http://127.0.0.1:{port}"
        try:
            if _healthy(url, proc, root / "prometheus.yml", deadline=time.monotonic() + 60):
                yield url
                return
        finally:
            _stop(proc)
        if "address already in use" not in log_path.read_text():
            break
    raise RuntimeError(f"prometheus did not start: {log_path.read_text()[-2000:]}")


def _healthy(url: str, proc: subprocess.Popen[bytes], config: Path, deadline: float) -> bool:
    """Whether this Prometheus answers at ``url`` before it exits or the deadline: its flags name
    ``config`` (another server that took the port would answer too), or it asks for credentials
    (behind basic auth) while still running."""
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            answer = httpx2.get(f"{url}/api/v1/status/flags", timeout=1)
            if answer.status_code == 200 and answer.json().get("data", {}).get("config.file") == str(config):
                return True
            if answer.status_code == 401 and proc.poll() is None:
                return True
        except (httpx2.HTTPError, ValueError):
            pass
        time.sleep(0.2)
    return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LivePrometheus]:
    """Prometheus over the scenario's series, backfilled with ``promtool tsdb create-blocks-from openmetrics``."""
    root = tmp_path_factory.mktemp("prometheus")
    span = windows(datetime.now(UTC))
    with backfilled_prometheus(root, generate(span)) as url:
        yield LivePrometheus(url=url, windows=span)


@contextmanager
def backfilled_prometheus(root: Path, openmetrics: str) -> Iterator[str]:
    """A real Prometheus over ``openmetrics`` (``promtool tsdb create-blocks-from openmetrics``), ready
    to answer; yields its URL, then stops it and removes ``root``."""
    _need_binaries()
    (root / "series.om").write_text(openmetrics, encoding="utf-8")
    data = root / "data"
    subprocess.run(
        [str(PROMTOOL), "tsdb", "create-blocks-from", "openmetrics", str(root / "series.om"), str(data)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    try:
        with _serve(root, data) as url:
            # ready means the backfilled blocks are loaded, not just that the port is open
            deadline = time.monotonic() + 60
            while httpx2.get(f"{url}/-/ready", timeout=1).status_code != 200:
                if time.monotonic() > deadline:
                    raise RuntimeError("prometheus never became ready")
                time.sleep(0.2)
            yield url
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def guarded_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Prometheus with basic auth on (its web config): every unauthenticated query gets HTTP 401."""
    _need_binaries()
    root = tmp_path_factory.mktemp("prometheus-auth")
    (root / "web.yml").write_text(WEB_CONFIG, encoding="utf-8")
    try:
        with _serve(root, root / "data", f"--web.config.file={root / 'web.yml'}") as url:
            yield url
    finally:
        shutil.rmtree(root, ignore_errors=True)
