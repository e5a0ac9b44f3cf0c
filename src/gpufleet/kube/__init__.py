"""The one adapter to the Kubernetes API (lightkube): list, watch, a Lease for leader election, the
read-only listing behind ``gpufleet scan``, Kueue's live state, and the few writes gpufleet makes.

No business logic lives here: callers get plain dicts and resourceVersions, and decide what they
mean. Two lightkube gaps are filled here so no other module needs lightkube's internals: the watch
request asks for BOOKMARK events (``allowWatchBookmarks``), which lightkube's public ``watch`` does
not expose, and a 410 Gone or a dropped connection is raised to the caller instead of being retried
silently, because the caller must relist (410) or back off (dropped) itself.

One module per use (``connection``, ``watch``, ``listing``, ``live``, ``multikueue``, ``configmap``,
``writes``); callers import the names below from ``gpufleet.kube``.
"""

from gpufleet.kube.configmap import configmap_client, read_configmap, write_configmap
from gpufleet.kube.connection import (
    RESOURCES,
    ConnectionLost,
    Gone,
    InlineKubeconfig,
    WriteRefused,
    client,
    sync_client,
)
from gpufleet.kube.listing import ClusterListing, list_cluster
from gpufleet.kube.live import DryRun, KueueState, dry_run_apply, read_kueue_state
from gpufleet.kube.multikueue import read_multikueue_clusters, read_secret
from gpufleet.kube.watch import WatchEvent, hold_lease, list_objects, watch_objects
from gpufleet.kube.writes import apply_objects, create_job, job_outcomes, rest_plural

__all__ = [
    "RESOURCES",
    "ClusterListing",
    "ConnectionLost",
    "DryRun",
    "Gone",
    "InlineKubeconfig",
    "KueueState",
    "WatchEvent",
    "WriteRefused",
    "apply_objects",
    "client",
    "configmap_client",
    "create_job",
    "dry_run_apply",
    "hold_lease",
    "job_outcomes",
    "list_cluster",
    "list_objects",
    "read_configmap",
    "read_kueue_state",
    "read_multikueue_clusters",
    "read_secret",
    "rest_plural",
    "sync_client",
    "watch_objects",
    "write_configmap",
]
