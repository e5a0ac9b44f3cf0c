"""``gpufleet record``: the recorder's options parsed into its configuration, its exits printed.

The one command that writes the ledger (``audit`` only reads it); the watching, the Lease and the
checkpoints are ``gpufleet.recorder``'s.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from pathlib import Path
from typing import Annotated

import typer

from gpufleet.cli.audit_common import DEFAULT_LEDGER, LEDGER_HELP
from gpufleet.cli.common import console, err_console, guarded
from gpufleet.errors import InputError

EXIT_LOST_LEASE = 75  # EX_TEMPFAIL (sysexits.h): the recorder lost its Lease; a restart rejoins as a follower


@guarded
def record(
    *,
    ledger: Annotated[str, typer.Option("--ledger", help=LEDGER_HELP)] = DEFAULT_LEDGER,
    kubeconfig: Annotated[
        str | None, typer.Option("--kubeconfig", help="Kubeconfig file (default: the environment).")
    ] = None,
    in_cluster: Annotated[bool, typer.Option("--in-cluster", help="Use the pod's service account.")] = False,
    namespace: Annotated[str, typer.Option("--namespace", help="Namespace of the leader Lease.")] = os.environ.get(
        "POD_NAMESPACE", "gpufleet-system"
    ),
    lease_name: Annotated[str, typer.Option("--lease-name")] = "gpufleet-recorder",
    identity: Annotated[str, typer.Option("--identity", help="This replica's name in the Lease.")] = os.environ.get(
        "POD_NAME", socket.gethostname()
    ),
    lease_seconds: Annotated[int, typer.Option("--lease-seconds", min=3)] = 15,
    metrics_host: Annotated[str, typer.Option("--metrics-host")] = "127.0.0.1",
    metrics_port: Annotated[
        int, typer.Option("--metrics-port", help="Port of /metrics and /healthz; 0 turns it off.")
    ] = 9090,
    checkpoint_key: Annotated[
        Path | None,
        typer.Option("--checkpoint-key", help="Sign and publish checkpoints with this key (`audit keygen`)."),
    ] = None,
    checkpoint_to: Annotated[
        list[str] | None,
        typer.Option(
            "--checkpoint-to", help="file:PATH, configmap:NAMESPACE/NAME or log (repeat for several; default log)."
        ),
    ] = None,
    checkpoint_every_entries: Annotated[
        int, typer.Option("--checkpoint-every-entries", min=1, help="Publish after this many new entries.")
    ] = 1000,
    checkpoint_every_minutes: Annotated[
        float, typer.Option("--checkpoint-every-minutes", min=0.01, help="... or this long after the last one.")
    ] = 5.0,
    checkpoint_origin: Annotated[
        str | None, typer.Option("--checkpoint-origin", help="The checkpoints' origin (default: the key's name).")
    ] = None,
    cluster: Annotated[
        str | None,
        typer.Option(
            "--cluster", help="This cluster's name in a federation (the policy's clusters[].name), on every record."
        ),
    ] = None,
) -> None:
    """Watch the cluster and write every allocation and wait into the ledger (runs until stopped)."""
    from gpufleet.recorder.derive import LabelKeys
    from gpufleet.recorder.publish import CheckpointPolicy, parse_targets
    from gpufleet.recorder.service import LostLeadership, RecorderConfig, run  # heavy imports only here

    if cluster is not None:
        from gpufleet.ledger.fleet import cluster_name

        cluster_name(cluster, "--cluster")

    if checkpoint_key is None and checkpoint_to:
        raise InputError.one("--checkpoint-to needs --checkpoint-key to sign with", path="--checkpoint-to")
    checkpoints = (
        None
        if checkpoint_key is None
        else CheckpointPolicy(
            key=checkpoint_key,
            targets=parse_targets(checkpoint_to or []),
            every_entries=checkpoint_every_entries,
            every_seconds=checkpoint_every_minutes * 60,
            origin=checkpoint_origin,
        )
    )

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx2").setLevel(logging.WARNING)  # one line per request is noise
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
        checkpoints=checkpoints,
        keys=LabelKeys(cluster=cluster),
    )
    try:
        asyncio.run(run(config))
    except KeyboardInterrupt:
        console.print("recorder stopped")
    except LostLeadership as exc:
        # Not a crash: an API server out of reach for a whole Lease means another replica may lead now.
        # Exit so the pod restarts and rejoins as a follower (EX_TEMPFAIL: try again).
        err_console.print(
            f"[bold red]error:[/] {exc}; stopped writing, restart to rejoin as a follower",
            soft_wrap=True,
            highlight=False,
        )
        raise typer.Exit(EXIT_LOST_LEASE) from None
