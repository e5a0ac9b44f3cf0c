"""The rendered Alertmanager routing, judged by amtool and by a real Alertmanager.

``amtool check-config`` accepts it for every example; ``amtool config routes test`` sends every
rendered alert's labels through it: serving alerts to the pager, the rest to the ticket queue,
which only runs inside the service hours. A real ``prometheus-alertmanager`` then shows the hours
at work: with service hours that exclude today (night) a batch alert is held ("not within active
time") while a serving alert pages at once; with hours that cover now (morning) the batch alert
goes out. Only the receivers' webhook URLs (a local HTTP server) and the group waits (1 s, so the
test does not sit out the rendered 30 s) are changed for the run; routes and intervals are the
rendered ones.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import httpx2
import pytest
import yaml

from gpufleet.policy.model import WEEKDAYS, ServiceHours
from gpufleet.render.alertmanager import PAGER, SERVICE_HOURS, TICKETS, routing
from tests.render.monitoring_support import (
    ALERTMANAGER,
    AMTOOL,
    MONITORING_FLEET,
    alert_rules,
    fleet_of,
    monitoring_documents,
    need,
)
from tests.support import EXAMPLES

SETUP = ".ci/setup.d/alertmanager.sh"
FLEET = fleet_of()


def _routing_file(policy: Path, tmp_path: Path) -> Path:
    (config,) = monitoring_documents(fleet_of(policy), "alertmanager-routing.yaml")
    path = tmp_path / "alertmanager.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


@pytest.mark.parametrize("policy", [*sorted(EXAMPLES.glob("*.yaml")), MONITORING_FLEET], ids=lambda p: p.name)
def test_amtool_accepts_the_routing(policy: Path, tmp_path: Path) -> None:
    amtool = need(AMTOOL, SETUP)
    result = subprocess.run(
        [amtool, "check-config", str(_routing_file(policy, tmp_path))], check=False, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_rendered_alert_routes_by_its_impact(tmp_path: Path) -> None:
    amtool = need(AMTOOL, SETUP)
    config = _routing_file(MONITORING_FLEET, tmp_path)
    for rule in alert_rules(FLEET):
        labels = [f"{k}={v}" for k, v in {"alertname": rule["alert"], **rule["labels"]}.items()]
        result = subprocess.run(
            [amtool, "config", "routes", "test", f"--config.file={config}", *labels],
            check=False,
            capture_output=True,
            text=True,
        )
        expected = PAGER if rule["labels"]["gpufleet_impact"] == "serving" else TICKETS
        assert result.stdout.strip() == expected, (rule["alert"], result.stdout, result.stderr)


def test_the_ticket_route_is_held_to_the_policys_service_hours() -> None:
    (config,) = monitoring_documents(FLEET, "alertmanager-routing.yaml")
    tickets = next(r for r in config["route"]["routes"] if r["receiver"] == TICKETS)
    assert tickets["active_time_intervals"] == [SERVICE_HOURS]
    (interval,) = next(t for t in config["time_intervals"] if t["name"] == SERVICE_HOURS)["time_intervals"]
    assert interval == {
        "weekdays": ["monday:friday"],
        "times": [{"start_time": "08:00", "end_time": "18:00"}],
        "location": "Europe/Berlin",
    }
    pager = next(r for r in config["route"]["routes"] if r["receiver"] == PAGER)
    assert "active_time_intervals" not in pager and "mute_time_intervals" not in pager


@pytest.mark.parametrize(
    ("days", "expected"),
    [
        (["monday", "tuesday", "wednesday", "thursday", "friday"], ["monday:friday"]),
        (["saturday", "monday", "sunday"], ["sunday:monday", "saturday"]),
        (["tuesday", "thursday"], ["tuesday", "thursday"]),
        (list(WEEKDAYS), ["sunday:saturday"]),
    ],
)
def test_weekdays_become_alertmanager_ranges(days: list[str], expected: list[str], tmp_path: Path) -> None:
    """Alertmanager's week starts on Sunday; a range that wraps past Saturday is refused."""
    amtool = need(AMTOOL, SETUP)
    config = routing(ServiceHours.model_validate({"days": days}))
    assert config["time_intervals"][0]["time_intervals"][0]["weekdays"] == expected
    (tmp_path / "am.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    result = subprocess.run([amtool, "check-config", str(tmp_path / "am.yml")], check=False, capture_output=True)
    assert result.returncode == 0, result.stdout + result.stderr


# --- a real Alertmanager --------------------------------------------------------------------------


class _Inbox:
    """A webhook receiver: what Alertmanager delivered, per path."""

    def __init__(self) -> None:
        self.got: dict[str, list[str]] = {}
        self.lock = threading.Lock()

    def alertnames(self, path: str) -> list[str]:
        with self.lock:
            return list(self.got.get(path, []))


@contextmanager
def _inbox() -> Iterator[tuple[_Inbox, int]]:
    inbox = _Inbox()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with inbox.lock:
                inbox.got.setdefault(self.path, []).extend(a["labels"]["alertname"] for a in body["alerts"])
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield inbox, int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _until(what: str, check: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


@contextmanager
def _alertmanager(config: dict[str, Any], root: Path) -> Iterator[tuple[str, Path]]:
    binary = need(ALERTMANAGER, SETUP)
    (root / "am.yml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    port = _free_port()
    log = root / "alertmanager.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={root / 'am.yml'}",
                f"--storage.path={root / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--cluster.listen-address=",
                "--log.level=debug",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        try:

            def ready() -> bool:
                if proc.poll() is not None:
                    raise AssertionError(f"alertmanager exited: {log.read_text()[-2000:]}")
                try:
                    return httpx2.get(f"{url}/-/ready", timeout=1).status_code == 200
                except httpx2.HTTPError:
                    return False

            _until("alertmanager to be ready", ready)
            yield url, log
        finally:
            proc.terminate()
            proc.wait(timeout=20)


def _for_the_test(hours: ServiceHours, inbox_port: int) -> dict[str, Any]:
    """The rendered routing with webhook receivers on the local inbox and 1 s group waits."""
    config = routing(hours)
    for receiver in config["receivers"]:
        receiver["webhook_configs"] = [{"url": f"http://127.0.0.1:{inbox_port}/{receiver['name']}"}]
    for route in [config["route"], *config["route"]["routes"]]:
        route["group_wait"] = "1s"
    return config


def _fire(url: str) -> None:
    alerts = [
        {"labels": {"alertname": "GpufleetTeamWaitTooLong", "gpufleet_impact": "batch", "team": "research"}},
        {"labels": {"alertname": "GpufleetServingReplicasUnavailable", "gpufleet_impact": "serving", "pool": "serve"}},
    ]
    assert httpx2.post(f"{url}/api/v2/alerts", json=alerts, timeout=10).status_code == 200


def test_at_night_batch_waits_and_serving_pages(tmp_path: Path) -> None:
    today = WEEKDAYS[datetime.now(ZoneInfo("Europe/Berlin")).weekday()]
    night = ServiceHours.model_validate({"days": [d for d in WEEKDAYS if d != today]})  # not today: it is night
    with _inbox() as (inbox, port), _alertmanager(_for_the_test(night, port), tmp_path) as (url, log):
        _fire(url)
        _until("the serving page", lambda: inbox.alertnames(f"/{PAGER}") == ["GpufleetServingReplicasUnavailable"])
        _until(
            "the ticket route to hold its notification",
            lambda: "Notifications not sent, route is not within active time" in log.read_text(),
        )
        assert inbox.alertnames(f"/{TICKETS}") == []


def test_in_service_hours_batch_goes_to_tickets(tmp_path: Path) -> None:
    morning = ServiceHours.model_validate({"days": list(WEEKDAYS), "start": "00:00", "end": "24:00"})
    with _inbox() as (inbox, port), _alertmanager(_for_the_test(morning, port), tmp_path) as (url, _):
        _fire(url)
        _until("the ticket", lambda: inbox.alertnames(f"/{TICKETS}") == ["GpufleetTeamWaitTooLong"])
        _until("the serving page", lambda: inbox.alertnames(f"/{PAGER}") == ["GpufleetServingReplicasUnavailable"])
