"""``gpufleet record`` and ``gpufleet audit who|why|report|verify|export``: parsing and printing only."""

from __future__ import annotations

import asyncio
import logging
import os
import socket

import typer

from gpufleet.cli.common import console, guarded
from gpufleet.recorder.service import RecorderConfig, run

DEFAULT_LEDGER = "gpufleet-ledger.db"
LEDGER_HELP = "SQLite file path or database URL (postgresql://user@host/db)."

audit_app = typer.Typer(
    name="audit", help="Answer who held which GPUs, why a workload waited, and prove the ledger intact.",
    no_args_is_help=True,
)


@guarded
def record(
    ledger: str = typer.Option(DEFAULT_LEDGER, "--ledger", help=LEDGER_HELP),
    kubeconfig: str | None = typer.Option(None, "--kubeconfig", help="Kubeconfig file (default: the environment)."),
    in_cluster: bool = typer.Option(False, "--in-cluster", help="Use the pod's service account."),
    namespace: str = typer.Option(
        os.environ.get("POD_NAMESPACE", "gpufleet-system"), "--namespace", help="Namespace of the leader Lease."
    ),
    lease_name: str = typer.Option("gpufleet-recorder", "--lease-name"),
    identity: str = typer.Option(
        os.environ.get("POD_NAME", socket.gethostname()), "--identity", help="This replica's name in the Lease."
    ),
    lease_seconds: int = typer.Option(15, "--lease-seconds", min=3),
    metrics_host: str = typer.Option("127.0.0.1", "--metrics-host"),
    metrics_port: int = typer.Option(9090, "--metrics-port", help="Port of /metrics and /healthz; 0 turns it off."),
) -> None:
    """Watch the cluster and write every allocation and wait into the ledger (runs until stopped)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = RecorderConfig(
        ledger=ledger,
        kubeconfig=kubeconfig,
        in_cluster=in_cluster,
        namespace=namespace,
        lease_name=lease_name,
        identity=identity,
        lease_seconds=lease_seconds,
        metrics_host=metrics_host,
        metrics_port=metrics_port,
    )
    try:
        asyncio.run(run(config))
    except KeyboardInterrupt:
        console.print("recorder stopped")
