"""The forecast as Prometheus metrics: ``gpufleet forecast --serve HOST:PORT --every SECONDS``.

A small exporter of its own, not a mode of the recorder, because the two differ in everything that
matters to running them: the recorder is the ledger's one writer, leader-elected, and its liveness
probe fails when it stops making progress; a forecast of a busy cluster is tens of CPU-seconds of
simulation (``bench/forecast_speed.py``) that would hold the recorder's process and raise its lag.
The forecast needs the fleet policy, which the recorder does not, and only reads the ledger, so it
runs with a read-only ledger role and its own CPU limit, and a slow round delays nothing but itself.

Every ``--every`` seconds a round lists the cluster's Kueue objects, forecasts every waiting Workload
(``forecast_live``, as ``gpufleet forecast`` does) and replaces what ``/metrics`` serves:

- ``gpufleet_forecast_admission_seconds{namespace, workload, job_name, team, cluster_queue, quantile}``:
  seconds from the round's moment to the expected admission, at quantile 0.1, 0.5 and 0.9 (0.1 and
  0.9 are the 80 % interval's ends, the forecast's p10 and p90: ``estimate.interval_ranks``). Seconds
  from the moment rather than a timestamp because that is what the CLI and ``why`` say ("expected to
  start in 25 min"), and what a panel beside Kueue's pending count reads at a glance; the moment is
  ``gpufleet_forecast_round_timestamp_seconds``, so ``time() - that`` says how old the figure is.
  A quantile no sample reached within the horizon has no sample: there is no figure to give.
- ``gpufleet_forecast_declined{namespace, workload, job_name, team, cluster_queue, reason}`` = 1 for a
  waiting Workload with no figure, the reason PascalCase (``TooLittleHistory``, ``ReplayDiffers``,
  ``LedgerClockSkew``, ``MalformedDeclaredRuntime``,
  ``NeverAdmissible``, or the live state's own: ``NamespaceNotInPolicy``, ``PodSetsNotModelled``...).
- ``gpufleet_forecast_round_timestamp_seconds``, ``..._round_duration_seconds``: the last good round.
- ``gpufleet_forecast_round_failures_total{reason}``: rounds that failed (API server or ledger
  unreachable). A failed round drops the figures instead of serving the previous round's as current.

``cluster_queue`` is the ClusterQueue of the Workload's LocalQueue (the live listing's LocalQueues),
the label Kueue's ``kueue_pending_workloads`` carries, so a query can join the two.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from gpufleet.errors import InputError
from gpufleet.forecast.clock import cluster_now
from gpufleet.forecast.estimate import Report, Settings
from gpufleet.forecast.live import LiveState, forecast_live, job_name, live_state
from gpufleet.ledger.records import Record
from gpufleet.policy import Fleet
from gpufleet.simulate.config import SimulationConfig

log = logging.getLogger("gpufleet.forecast.exporter")

Obj = dict[str, Any]
ADMISSION = "gpufleet_forecast_admission_seconds"
DECLINED = "gpufleet_forecast_declined"
QUANTILES = (("p10", "0.1"), ("p50", "0.5"), ("p90", "0.9"))
_PASCAL = re.compile(r"(?:[A-Z][a-z0-9]+)+")
NOT_WITHIN = "NotWithinHorizon"  # admitted in too few samples within the horizon for even p10
LABELS = ("namespace", "workload", "job_name", "team", "cluster_queue")  # not "job": the scrape's own label
# a declined forecast's message (``Forecast.declined``) -> its machine reason, by prefix
REASONS = (
    ("too little history", "TooLittleHistory"),
    ("the replay differs", "ReplayDiffers"),
    ("never admitted", "NeverAdmissible"),
)


@dataclass(frozen=True)
class Figure:
    """One exported sample: the metric, its labels in ``LABELS`` order plus the last one, the value."""

    metric: str
    labels: tuple[str, ...]
    value: float


@dataclass(frozen=True)
class Round:
    """What one round found: its moment (unix seconds), its wall time, and its figures."""

    at: float
    duration_s: float
    figures: tuple[Figure, ...]


def reason_of(declined: str) -> str:
    """The machine reason of a declined forecast: a message that starts with one (``LedgerClockSkew: ...``,
    ``MalformedDeclaredRuntime: ...``) gives it; the others by their prefix (``REASONS``)."""
    head = declined.partition(":")[0]
    if _PASCAL.fullmatch(head):
        return head
    return next((reason for prefix, reason in REASONS if declined.startswith(prefix)), "NoEstimate")


def _queues(objects: Sequence[Obj]) -> dict[tuple[str, str], str]:
    """(namespace, LocalQueue) -> its ClusterQueue."""
    out: dict[tuple[str, str], str] = {}
    for o in objects:
        if o.get("kind") == "LocalQueue":
            meta = o.get("metadata") or {}
            out[(str(meta.get("namespace")), str(meta.get("name")))] = str((o.get("spec") or {}).get("clusterQueue"))
    return out


def _holding(wl: Obj) -> bool:
    conds = (wl.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "QuotaReserved" and c.get("status") == "True" for c in conds if isinstance(c, dict))


def figures(objects: Sequence[Obj], state: LiveState, report: Report, fleet: Fleet) -> tuple[Figure, ...]:
    """The samples of one round, sorted by metric and labels (a stable exposition)."""
    queues = _queues(objects)
    by_name = {
        f"{(o.get('metadata') or {}).get('namespace')}/{(o.get('metadata') or {}).get('name')}": o
        for o in objects
        if o.get("kind") == "Workload"
    }

    def labels(workload_key: str, job: str, team: str) -> tuple[str, ...]:
        namespace, _, name = workload_key.partition("/")
        queue = str(((by_name.get(workload_key) or {}).get("spec") or {}).get("queueName") or "")
        return (namespace, name, job, team, queues.get((namespace, queue), ""))

    live = {w.key: w for w in state.workloads}
    out: list[Figure] = []
    for f in report.forecasts:
        w = live[f.workload]
        names = labels(w.workload, w.job.job_id, f.team)
        if f.declined:
            out.append(Figure(DECLINED, (*names, reason_of(f.declined)), 1.0))
            continue
        given = [(quantile, f.quantiles.get(key)) for key, quantile in QUANTILES]
        out += [Figure(ADMISSION, (*names, quantile), float(v)) for quantile, v in given if v is not None]
        if all(v is None for _, v in given):  # not even p10 within the horizon: no figure, and why
            out.append(Figure(DECLINED, (*names, NOT_WITHIN), 1.0))
    teams = {ns: t.name for t in fleet.policy.teams for ns in t.namespaces}
    for key, reason, _ in state.skipped:
        wl = by_name.get(key)
        if wl is None or _holding(wl):
            continue  # only waiting Workloads have a forecast to decline
        namespace = key.partition("/")[0]
        out.append(Figure(DECLINED, (*labels(key, job_name(wl), teams.get(namespace, "")), reason), 1.0))
    return tuple(sorted(out, key=lambda g: (g.metric, g.labels)))  # final tie-breaker: the labels


class ForecastExporter(Collector):
    """Runs rounds and serves the last one. ``read_cluster`` is the live listing and the API server's
    clock (``kube.read_kueue_state`` with the owners, in the CLI); ``read_records`` the ledger's
    allocations. Both are called once per round. The round's *now* is the API server's clock where it
    sent one, else ``clock`` (this machine's; a test's fixed moment), as ``gpufleet forecast`` does."""

    def __init__(
        self,
        fleet: Fleet,
        read_cluster: Callable[[], tuple[Sequence[Obj], datetime | None]],
        read_records: Callable[[], Sequence[Record]],
        settings: Settings,
        *,
        config: SimulationConfig | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.fleet, self.read_cluster, self.read_records = fleet, read_cluster, read_records
        self.settings, self.config, self.clock = settings, config or SimulationConfig(), clock
        self.last: Round | None = None
        self.failures: dict[str, int] = {}
        self.lock = threading.Lock()

    def round(self) -> Round | None:
        """One round; a failure is logged and counted, and leaves no figure served."""
        started = time.monotonic()
        try:
            listed, server_time = self.read_cluster()
            objects = list(listed)
            records = list(self.read_records())
        except InputError as exc:
            self._failed("InputRefused", exc)
            return None
        except Exception as exc:  # an unreachable API server or database: the next round tries again
            self._failed(type(exc).__name__, exc)
            return None
        now, now_from = cluster_now(server_time, self.clock())
        state = live_state(objects, self.fleet, now, now_from)
        report = forecast_live(state, self.fleet, records, self.settings, self.config)
        done = Round(now.timestamp(), time.monotonic() - started, figures(objects, state, report, self.fleet))
        with self.lock:
            self.last = done
        return done

    def _failed(self, reason: str, exc: Exception) -> None:
        log.error("forecast round failed (%s): %s", reason, exc)
        with self.lock:
            self.last = None
            self.failures[reason] = self.failures.get(reason, 0) + 1

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        with self.lock:
            last, failures = self.last, dict(self.failures)
        admission = GaugeMetricFamily(
            ADMISSION,
            "Expected admission of a waiting Workload, seconds from the round's moment",
            labels=[*LABELS, "quantile"],
        )
        declined = GaugeMetricFamily(
            DECLINED,
            "1 for a waiting Workload the forecast gives no figure, with the reason",
            labels=[*LABELS, "reason"],
        )
        stamp = GaugeMetricFamily(
            "gpufleet_forecast_round_timestamp_seconds", "Unix time of the last good round's moment"
        )
        took = GaugeMetricFamily("gpufleet_forecast_round_duration_seconds", "Wall time of the last good round")
        failed = CounterMetricFamily(
            "gpufleet_forecast_round_failures", "Rounds that failed, by reason", labels=["reason"]
        )
        if last is not None:
            for g in last.figures:
                (admission if g.metric == ADMISSION else declined).add_metric(list(g.labels), g.value)
            stamp.add_metric([], last.at)
            took.add_metric([], last.duration_s)
        for reason, count in sorted(failures.items()):
            failed.add_metric([reason], count)
        yield from (admission, declined, stamp, took, failed)


def serve(exporter: ForecastExporter, address: str, every_s: float, *, stop: threading.Event | None = None) -> None:
    """Serve ``/metrics`` on ``address`` (HOST:PORT) and run a round every ``every_s`` seconds, from the
    start of one to the start of the next (a round longer than that starts the next at once), until
    ``stop`` is set (never, from the CLI: it runs until killed). The adapters (the cluster's listing,
    the ledger) are the callables the exporter was given, so this module stays off the network but for
    its own ``/metrics``."""
    stop = stop or threading.Event()
    host, port = parse_address(address)
    registry = CollectorRegistry()
    registry.register(exporter)
    server, thread = start_http_server(port, addr=host, registry=registry)
    log.info("forecast exporter serving http://%s:%d/metrics every %.0f s", host, port, every_s)
    try:
        while not stop.is_set():
            started = time.monotonic()
            exporter.round()
            stop.wait(max(0.0, every_s - (time.monotonic() - started)))
    finally:
        server.shutdown()
        thread.join(timeout=5)


def parse_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError.one(f"expected HOST:PORT (such as 0.0.0.0:9091), got {address!r}", path="--serve")
    return host or "0.0.0.0", int(port)
