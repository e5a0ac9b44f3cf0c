"""``gpufleet forecast --serve HOST:PORT``: the forecast exporter (``gpufleet.forecast.exporter``),
wired to the cluster's listing and the ledger (``read_records``: ``cli.forecast.ledger_records``)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpufleet.errors import InputError


def serve_forecasts(
    policy: Path,
    address: str,
    every: float,
    *,
    trace: Path | None,
    at: str | None,
    workload: str | None,
    kubeconfig: Path | None,
    ledger: str | None,
    settings: Any,
    read_records: Callable[[str | None], list[Any]],
) -> None:
    """Check everything a round needs before serving (a bad policy, address or ledger exits 2 at once,
    not at the first round), then serve until killed."""
    from gpufleet import kube
    from gpufleet.forecast.exporter import ForecastExporter, parse_address, serve
    from gpufleet.policy import load_policy, resolve

    if trace is not None or at is not None or workload is not None:
        raise InputError.one(
            "--serve exports the live cluster's forecast: it takes neither --trace, --at nor --workload",
            path="--serve",
        )
    parse_address(address)
    fleet = resolve(load_policy(policy))
    read_records(ledger)  # a missing or foreign ledger is refused now; each round reads it afresh
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    def listing() -> tuple[list[Any], Any]:
        cluster = kube.read_kueue_state(kubeconfig, with_owners=True)  # Jobs, JobSets...: what they declared
        return cluster.objects + cluster.owners, cluster.server_time

    exporter = ForecastExporter(fleet, listing, lambda: read_records(ledger), settings)
    serve(exporter, address, every)
