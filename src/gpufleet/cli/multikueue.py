"""``gpufleet worker-secret``: a worker's kubeconfig as the Secret the MultiKueue manager reads.

Parsing and printing only; the checks live in ``gpufleet.render.worker_secret``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
import yaml

from gpufleet.cli.common import console, guarded
from gpufleet.errors import InputError
from gpufleet.files import atomic_path
from gpufleet.policy import load_policy

MAX_KUBECONFIG = 1 << 20
PolicyArg = Annotated[Path, typer.Argument(help="The fleet policy (YAML), with clusters:", show_default=False)]


@guarded
def worker_secret(
    policy: PolicyArg,
    cluster: Annotated[str, typer.Argument(help="The worker cluster's name in the policy's clusters:")],
    *,
    kubeconfig: Annotated[Path, typer.Option("--kubeconfig", help="The worker's kubeconfig, credentials inline")],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the Secret here (mode 0600); default: standard output")
    ] = None,
) -> None:
    """Check a worker's kubeconfig as Kueue's MultiKueue does and write it as the Secret the policy names.

    The Secret goes to the manager's kueue-system namespace, key kubeconfig (apply it with kubectl).
    A kubeconfig Kueue would refuse (file paths, tokenFile, exec plugins, skipped TLS verification) is a
    located error, exit 2, and nothing is written.
    """
    from gpufleet.render.worker_secret import worker_secret as make_secret

    loaded = load_policy(policy)
    found = next((c for c in loaded.clusters if c.name == cluster), None)
    if found is None:
        declared = ", ".join(c.name for c in loaded.clusters) or "none"
        raise InputError.one(
            f"no cluster {cluster!r} in the policy; declared: {declared}", file=str(policy), path="clusters"
        )
    try:
        if not kubeconfig.is_file() or kubeconfig.stat().st_size > MAX_KUBECONFIG:
            raise InputError.one("not a regular file of at most 1 MiB", file=str(kubeconfig), path="--kubeconfig")
        text = kubeconfig.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError.one(f"cannot read it: {exc}", file=str(kubeconfig), path="--kubeconfig") from None
    document = yaml.safe_dump(make_secret(found.kubeconfigSecret, text, str(kubeconfig)), sort_keys=False)
    if output is None:
        typer.echo(document, nl=False)
        return
    with atomic_path(output, mode=0o600) as tmp:
        fd = os.open(tmp, os.O_WRONLY | os.O_TRUNC)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(document)
    console.print(f"wrote Secret kueue-system/{found.kubeconfigSecret} to {output} (mode 0600)", highlight=False)
