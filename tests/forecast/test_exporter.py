"""The forecast exporter (``gpufleet forecast --serve``): its figures from a live state, and a real
Prometheus scraping it.

The exporter's input is a live state built from Workloads shaped as the API server returns them
(``tests/forecast/test_live.py``'s, on why-fleet.yaml) and the policy's rendered LocalQueues, not a
testbed: the listing is the one thing a testbed would add, and ``gpufleet forecast`` reads it through
the same ``kube.read_kueue_state`` (tests/e2e/test_why_live.py runs that path on the real Kueue)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.forecast.estimate import Basis, Forecast, Report, Settings
from gpufleet.forecast.exporter import ADMISSION, DECLINED, NOT_WITHIN, ForecastExporter, figures, reason_of, serve
from gpufleet.forecast.live import forecast_live, live_state
from gpufleet.policy import Fleet, load_policy, resolve
from gpufleet.render import kueue
from gpufleet.simulate.config import SimulationConfig
from tests.evidence.conftest import _need_binaries, _serve
from tests.forecast.test_live import BIG, NOW, POLICY, WAIT, history, workload

SETTINGS = Settings(samples=20, seed=3)
OUTSIDER = workload("elsewhere", "lost", pods=1, gpus=1, created=2)  # waiting, in no team's namespace
HELD_OUTSIDER = workload("elsewhere", "held", pods=1, gpus=1, created=9, admitted=8)  # holding: no forecast


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    return resolve(load_policy(POLICY))


def objects(fleet: Fleet) -> list[dict[str, Any]]:
    return [*kueue.local_queues(fleet), BIG, WAIT, OUTSIDER, HELD_OUTSIDER]


def exporter(fleet: Fleet, runs: int = 12) -> ForecastExporter:
    return ForecastExporter(fleet, lambda: (objects(fleet), None), lambda: history(runs), SETTINGS, clock=lambda: NOW)


def series(ex: ForecastExporter) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """What /metrics would serve, parsed back: (metric, labels) -> value."""
    from prometheus_client.parser import text_string_to_metric_families

    registry = CollectorRegistry()
    registry.register(ex)
    out = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


WAIT_LABELS = {"namespace": "wf-alpha", "workload": "job-wait-abcde", "job_name": "wait", "team": "wf-alpha", "cluster_queue": "wf-alpha"}  # fmt: skip
OUTSIDER_LABELS = {"namespace": "elsewhere", "workload": "job-lost-abcde", "job_name": "lost", "team": "", "cluster_queue": ""}  # fmt: skip


def test_each_quantile_is_the_forecasts_figure_in_seconds_from_the_moment(fleet: Fleet) -> None:
    ex = exporter(fleet)
    done = ex.round()
    assert done is not None and done.at == NOW.timestamp()
    report = forecast_live(live_state(objects(fleet), fleet, NOW), fleet, history(12), SETTINGS, SimulationConfig())
    (f,) = [f for f in report.forecasts if f.workload == "wf-alpha/wait"]
    got = series(ex)
    for key, quantile in (("p10", "0.1"), ("p50", "0.5"), ("p90", "0.9")):
        assert got[(ADMISSION, tuple(sorted({**WAIT_LABELS, "quantile": quantile}.items())))] == f.quantiles[key]
    # the Workload the policy cannot place waits with no figure, and says why; the holding one is not there
    assert got[(DECLINED, tuple(sorted({**OUTSIDER_LABELS, "reason": "NamespaceNotInPolicy"}.items())))] == 1
    assert not [k for k in got if dict(k[1]).get("job_name") in ("big", "held")]
    assert got[("gpufleet_forecast_round_timestamp_seconds", ())] == NOW.timestamp()


def test_too_little_history_is_declined_not_invented(fleet: Fleet) -> None:
    ex = exporter(fleet, runs=3)
    ex.round()
    got = series(ex)
    assert not [k for k in got if k[0] == ADMISSION]
    assert got[(DECLINED, tuple(sorted({**WAIT_LABELS, "reason": "TooLittleHistory"}.items())))] == 1


def test_a_failed_round_serves_no_stale_figure(fleet: Fleet) -> None:
    calls = iter([objects(fleet)])

    def listing() -> tuple[list[dict[str, Any]], None]:
        found = next(calls, None)
        if found is None:
            raise ConnectionError("the API server went away")
        return found, None

    ex = ForecastExporter(fleet, listing, lambda: history(12), SETTINGS, clock=lambda: NOW)
    assert ex.round() is not None and any(k[0] == ADMISSION for k in series(ex))
    assert ex.round() is None
    got = series(ex)
    assert not [k for k in got if k[0] in (ADMISSION, DECLINED)]
    assert got[("gpufleet_forecast_round_failures_total", (("reason", "ConnectionError"),))] == 1


def test_no_quantile_within_the_horizon_is_a_reason_not_a_figure(fleet: Fleet) -> None:
    state = live_state(objects(fleet), fleet, NOW)
    basis = Basis(state.at, 20, 3, False, {}, 12, {})
    beyond = {"p10": None, "p50": None, "p90": None}
    partly = {"p10": 600, "p50": None, "p90": None}
    for quantiles, expected in ((beyond, {(DECLINED, NOT_WITHIN)}), (partly, {(ADMISSION, "0.1")})):
        report = Report(basis, (Forecast("wf-alpha/wait", "wf-alpha", 900, quantiles, 1, 20, ()),))
        got = {(g.metric, g.labels[-1]) for g in figures(objects(fleet), state, report, fleet) if g.labels[2] == "wait"}
        assert got == expected


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        ("too little history: 3 finished runs", "TooLittleHistory"),
        ("the replay differs: it waits on the cluster, ...", "ReplayDiffers"),
        ("never admitted: it asks more than its team's quota can ever reach", "NeverAdmissible"),
        ("LedgerClockSkew: the ledger's clock is 5 min behind the cluster's", "LedgerClockSkew"),
        ("MalformedDeclaredRuntime: gpufleet.io/expected-runtime is 'soon'", "MalformedDeclaredRuntime"),
        ("something new: with a colon", "NoEstimate"),
    ],
)
def test_declined_messages_have_machine_reasons(message: str, reason: str) -> None:
    assert reason_of(message) == reason


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def scraping(root: Path, target: str) -> Iterator[str]:
    """A real Prometheus scraping ``target`` every second, healthy; yields its URL."""
    _need_binaries()
    config = (
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        f"scrape_configs: [{{job_name: gpufleet-forecast, static_configs: [{{targets: ['{target}']}}]}}]\n"
    )
    with _serve(root, root / "data", config=config) as url:
        yield url


def _targets(url: str) -> list[tuple[str, str]]:
    """Each scrape target's health and last error, for a failure's message."""
    try:
        body = httpx2.get(f"{url}/api/v1/targets", timeout=5).json()
    except httpx2.HTTPError as e:
        return [("unreachable", str(e))]
    return [(t.get("health", ""), t.get("lastError", "")) for t in body.get("data", {}).get("activeTargets", [])]


def _query(url: str, expr: str) -> dict[tuple[tuple[str, str], ...], float]:
    try:
        body = httpx2.get(f"{url}/api/v1/query", params={"query": expr}, timeout=5).json()
    except httpx2.HTTPError:
        return {}
    drop = ("__name__", "instance", "job")
    return {
        tuple(sorted((k, v) for k, v in r["metric"].items() if k not in drop)): float(r["value"][1])
        for r in body.get("data", {}).get("result", [])
    }


@contextmanager
def exporting(ex: ForecastExporter) -> Iterator[str]:
    """``serve`` on a free loopback port, answering /metrics; yields HOST:PORT, then stops it.

    As with Prometheus, another test may take the port first: ``serve`` then fails in its thread, and
    a new port is tried."""
    for _attempt in range(3):
        address = f"127.0.0.1:{_free_port()}"
        stop = threading.Event()
        thread = threading.Thread(target=serve, args=(ex, address, 3600.0), kwargs={"stop": stop})
        thread.start()
        try:
            while thread.is_alive():
                time.sleep(0.2)  # a taken port fails ``serve`` at once: its thread is gone by the check
                try:
                    if httpx2.get(f"http://{address}/metrics", timeout=1).status_code == 200 and thread.is_alive():
                        yield address
                        return
                except httpx2.HTTPError:
                    pass
        finally:
            stop.set()
            thread.join(timeout=30)
    raise RuntimeError("the exporter never served /metrics: three ports were taken")


def test_a_real_prometheus_scrapes_the_forecast(fleet: Fleet, tmp_path: Path) -> None:
    ex = exporter(fleet)
    with exporting(ex) as address, scraping(tmp_path, address) as url:
        deadline = time.monotonic() + 90
        got: dict[tuple[tuple[str, str], ...], float] = {}
        while len(got) < 3 and time.monotonic() < deadline:  # the three quantiles, once scraped
            time.sleep(0.5)
            got = _query(url, f'{ADMISSION}{{job_name="wait"}}')
        declined = _query(url, f'{DECLINED}{{reason="NamespaceNotInPolicy"}}')
        targets = _targets(url)
        log = (tmp_path / "prometheus.log").read_text()[-1500:]
    assert ex.last is not None
    expected = {
        tuple(sorted(zip((*WAIT_LABELS, "quantile"), g.labels, strict=True))): g.value
        for g in ex.last.figures
        if g.metric == ADMISSION
    }
    assert got == expected and len(expected) == 3, f"scrape targets {targets}; prometheus said: {log}"
    # Prometheus stores no empty label: the outsider has no team and no ClusterQueue
    shown = {k: v for k, v in OUTSIDER_LABELS.items() if v}
    assert declined == {tuple(sorted({**shown, "reason": "NamespaceNotInPolicy"}.items())): 1.0}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--serve", "nonsense"], "expected HOST:PORT"),
        (["--serve", "127.0.0.1:0"], "expected HOST:PORT"),
        (["--serve", "127.0.0.1:9", "--trace", "week.csv", "--at", "1d"], "--serve exports the live cluster's"),
        (["--serve", "127.0.0.1:9", "--ledger", "/nonexistent/ledger.db"], "ledger.db"),
    ],
)
def test_bad_serve_input_exits_2_before_serving(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["forecast", "--policy", str(POLICY), "--kubeconfig", "/nonexistent", *args])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
