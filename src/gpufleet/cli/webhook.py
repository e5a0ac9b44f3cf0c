"""``gpufleet webhook serve`` and ``webhook certs``: the admission rules of ``gpufleet check``, served.

The server (granian, starlette) is imported when ``serve`` runs, so ``certs`` and ``--help`` do not
pay for it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from gpufleet.check.manifests import NAMESPACE, WEBHOOK
from gpufleet.cli.check import ClusterOpt, PolicyArg, facts_for
from gpufleet.cli.common import ForceOpt, console, guarded
from gpufleet.errors import InputError
from gpufleet.webhook import certs as webhook_certs
from gpufleet.webhook.tls import RELOAD_SECONDS, Listen, loads

app = typer.Typer(help="The admission webhook (validating and mutating, AdmissionReview v1).", no_args_is_help=True)


@app.command("serve")
@guarded
def serve(
    policy: PolicyArg,
    *,
    cert: Annotated[Path, typer.Option("--cert", help="TLS certificate (PEM); reloaded when it changes")],
    key: Annotated[Path, typer.Option("--key", help="TLS private key (PEM)")],
    port: Annotated[int, typer.Option("--port", help="HTTPS port")] = 8443,
    host: Annotated[str, typer.Option("--host", help="Address to listen on (all interfaces in a pod)")] = "0.0.0.0",
    reload_seconds: Annotated[
        float, typer.Option("--reload-seconds", help="How often to look for a renewed certificate")
    ] = RELOAD_SECONDS,
    log_level: Annotated[str, typer.Option("--log-level", help="debug, info, warning or error")] = "info",
    workers: Annotated[
        int,
        typer.Option(
            "--workers",
            min=1,
            help="Review processes behind the port (granian's workers; metrics added up across them)."
            " 1 serves from this process",
        ),
    ] = 1,
    cluster: ClusterOpt = None,
) -> None:
    """Serve /validate, /mutate, /healthz and /metrics over HTTPS."""
    for path, what in ((cert, "certificate"), (key, "key")):
        if not path.is_file():
            raise InputError.one(f"no such {what} file", file=str(path))
    problem = loads(cert, key)
    if problem is not None:
        raise InputError.one(f"is not a PEM certificate and matching key: {problem}", file=str(cert))
    from gpufleet.webhook.telemetry import configure_logging

    facts = facts_for(policy, cluster)  # each worker loads it again; a bad policy stops here
    configure_logging(log_level)
    listen = Listen(cert, key, host, port, reload_seconds)
    if workers > 1:
        from gpufleet.webhook.workers import WorkerPool

        try:
            tempfile.gettempdir()  # the first writable of $TMPDIR, /tmp, /var/tmp, /usr/tmp and here
        except FileNotFoundError:  # a pod with readOnlyRootFilesystem and no emptyDir
            raise InputError.one(
                "no writable temporary folder, and --workers above 1 keeps the workers' metrics in one:"
                " mount an emptyDir at /tmp or set TMPDIR",
                file="/tmp",
            ) from None

        WorkerPool(policy, listen, workers=workers, log_level=log_level, cluster=cluster).run()
        return
    from gpufleet.webhook.app import create_app
    from gpufleet.webhook.server import WebhookServer

    WebhookServer(create_app(facts), listen).run()


@app.command("certs")
@guarded
def certs(
    *,
    output: Annotated[
        Path, typer.Option("-o", "--output", help="Folder for the CA, the serving pair and the Secret")
    ] = Path("webhook-certs"),
    configuration: Annotated[
        Path | None,
        typer.Option(
            "--configuration",
            help="The admission-webhook.yaml render wrote: a copy with caBundle filled in and cert-manager's objects left out",
        ),
    ] = None,
    namespace: Annotated[str, typer.Option("--namespace", help="The webhook's namespace")] = NAMESPACE,
    service: Annotated[str, typer.Option("--service", help="The webhook's Service")] = WEBHOOK,
    dns: Annotated[list[str] | None, typer.Option("--dns", help="Another DNS name for the certificate")] = None,
    ip: Annotated[
        list[str] | None, typer.Option("--ip", help="An IP address for the certificate (a URL webhook)")
    ] = None,
    days: Annotated[
        int, typer.Option("--days", help="Lifetime of the serving certificate")
    ] = webhook_certs.SERVING_DAYS,
    ca_days: Annotated[int, typer.Option("--ca-days", help="Lifetime of a new CA")] = webhook_certs.CA_DAYS,
    renew: Annotated[
        bool, typer.Option("--renew", help="Keep the CA in the folder; issue a new serving certificate from it")
    ] = False,
    force: ForceOpt = False,
) -> None:
    """Make a CA and a serving certificate for the webhook (the path without cert-manager)."""
    names = webhook_certs.Names.service(service, namespace, tuple(dns or ()), tuple(ip or ()))
    issued = webhook_certs.issue(
        output,
        names,
        secret_name=f"{WEBHOOK}-tls",
        namespace=namespace,
        configuration=configuration,
        renew=renew,
        force=force,
        ca_days=ca_days,
        days=days,
    )
    what = "a new serving certificate from the CA kept in" if issued.renewed else "a new CA and serving certificate in"
    console.print(f"wrote {what} {escape(str(output))}", highlight=False, soft_wrap=True)
    console.print(f"  names: {escape(', '.join(issued.names.dns + issued.names.ips))}", highlight=False, soft_wrap=True)
    console.print(f"  serving certificate valid until {issued.not_after:%Y-%m-%d %H:%M} UTC", highlight=False)
    console.print(
        f"  kubectl apply -f {escape(str(output / webhook_certs.SECRET_FILE))}  (the Secret {WEBHOOK}-tls; "
        "the webhook reloads a renewed pair without a restart)",
        highlight=False,
        soft_wrap=True,
    )
    if (output / webhook_certs.CONFIGURED_FILE).is_file():
        console.print(
            f"  kubectl apply -f {escape(str(output / webhook_certs.CONFIGURED_FILE))}  (the webhook, caBundle filled in)",
            highlight=False,
            soft_wrap=True,
        )
