"""Read what a scan needs from a live cluster into a ``Snapshot`` (read-only, through ``gpufleet.kube``)."""

from __future__ import annotations

from pathlib import Path

from gpufleet.kube import list_cluster
from gpufleet.scan.snapshot import Snapshot


def fetch(kubeconfig: Path | None = None) -> Snapshot:
    listing = list_cluster(kubeconfig)
    return Snapshot(
        nodes=listing.nodes,
        pods=listing.pods,
        jobs=listing.jobs,
        namespaces=listing.namespaces,
        kueue_installed=listing.kueue_installed,
        kueue=listing.kueue,
        resource_slices=listing.resource_slices,
    )
