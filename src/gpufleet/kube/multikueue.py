"""A MultiKueue manager's view of its workers, as Kueue v0.19.2 reads it: the MultiKueueCluster
objects (``kueue.x-k8s.io/v1beta2``, cluster-scoped) and the kubeconfig Secrets they name (in Kueue's
own namespace). List and get only; what the objects mean is ``explain.workers``' business."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
from lightkube import ApiError
from lightkube.generic_resource import create_global_resource
from lightkube.resources.core_v1 import Secret

from gpufleet.errors import InputError
from gpufleet.kube.connection import HTTP_FORBIDDEN, HTTP_NOT_FOUND, InlineKubeconfig, _as_dict, sync_client

MultiKueueCluster = create_global_resource("kueue.x-k8s.io", "v1beta2", "MultiKueueCluster", "multikueueclusters")


def read_multikueue_clusters(kubeconfig: Path | InlineKubeconfig | None) -> list[dict[str, Any]]:
    """Every MultiKueueCluster on the manager as a plain dict; exit 2 where the API server does not
    serve them (not a Kueue with MultiKueue) or cannot be reached."""
    api = sync_client(kubeconfig)
    try:
        return [_as_dict(o) for o in api.list(MultiKueueCluster)]
    except ApiError as exc:
        if exc.status.code == HTTP_NOT_FOUND:
            raise InputError.one(
                "the manager serves no kueue.x-k8s.io/v1beta2 MultiKueueCluster: is Kueue installed there?",
                path="--workers-from-manager",
            ) from None
        raise InputError.one(f"the API server refused the listing: {exc.status.message}") from None
    except httpx2.HTTPError as exc:
        raise InputError.one(f"cannot reach the API server: {exc}") from None


def read_secret(kubeconfig: Path | InlineKubeconfig | None, namespace: str, name: str) -> dict[str, Any] | None:
    """The Secret as a plain dict (its ``data`` base64, as the API gives it), None where there is
    none; a refusal or an unreachable server is an ``InputError`` saying which."""
    api = sync_client(kubeconfig)
    try:
        return _as_dict(api.get(Secret, name, namespace=namespace))
    except ApiError as exc:
        if exc.status.code == HTTP_NOT_FOUND:
            return None
        what = "may not read" if exc.status.code == HTTP_FORBIDDEN else "refused to give"
        raise InputError.one(f"the API server {what} Secret {namespace}/{name}: {exc.status.message}") from None
    except httpx2.HTTPError as exc:
        raise InputError.one(f"cannot reach the API server: {exc}") from None
