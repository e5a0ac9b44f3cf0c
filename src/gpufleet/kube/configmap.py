"""The ConfigMap the recorder publishes its signed checkpoints to: read, and written only at the
resourceVersion it was read at."""

from __future__ import annotations

from typing import Any, cast

import httpx2
from lightkube import Client
from lightkube.resources.core_v1 import ConfigMap

from gpufleet.kube.connection import (
    HTTP_CONFLICT,
    HTTP_FORBIDDEN,
    HTTP_INVALID,
    HTTP_NOT_FOUND,
    ConnectionLost,
    WriteRefused,
    _as_dict,
    _config,
    _status_code,
)


def configmap_client(kubeconfig: str | None = None, *, in_cluster: bool = False) -> Client:
    """A synchronous client chosen as ``client`` chooses (the checkpoint publisher runs in a thread)."""
    config = _config(kubeconfig, in_cluster=in_cluster)
    return Client(config, timeout=httpx2.Timeout(30.0), field_manager="gpufleet-recorder")


def read_configmap(api: Client, namespace: str, name: str) -> dict[str, Any] | None:
    """The ConfigMap as a plain dict (with its resourceVersion), or None when there is none."""
    try:
        return _as_dict(api.get(ConfigMap, name, namespace=namespace))
    except httpx2.HTTPStatusError as exc:
        code = _status_code(exc)
        if code == HTTP_NOT_FOUND:
            return None
        if code == HTTP_FORBIDDEN:
            raise WriteRefused(f"get configmap {namespace}/{name}: {code} {exc}") from exc
        raise ConnectionLost(f"get configmap {namespace}/{name}: {exc}") from exc
    except httpx2.TransportError as exc:
        raise ConnectionLost(f"get configmap {namespace}/{name}: {exc!r}") from exc


def write_configmap(api: Client, obj: dict[str, Any]) -> bool:
    """Create ``obj`` when it carries no resourceVersion, else replace it carrying the one it was read
    at, so a concurrent writer is never overwritten unseen: False when someone wrote first (409)."""
    meta = obj.get("metadata", {})
    where = f"configmap {meta.get('namespace')}/{meta.get('name')}"
    configmap = cast(ConfigMap, ConfigMap.from_dict(obj))
    try:
        if meta.get("resourceVersion"):
            api.replace(configmap)
        else:
            api.create(configmap)
    except httpx2.HTTPStatusError as exc:
        code = _status_code(exc)
        if code == HTTP_CONFLICT:
            return False
        if code in (HTTP_FORBIDDEN, HTTP_NOT_FOUND, HTTP_INVALID):
            raise WriteRefused(f"write {where}: {code} {exc}") from exc
        raise ConnectionLost(f"write {where}: {exc}") from exc
    except httpx2.TransportError as exc:
        raise ConnectionLost(f"write {where}: {exc!r}") from exc
    return True
