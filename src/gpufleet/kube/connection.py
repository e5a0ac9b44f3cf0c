"""Clients from a kubeconfig, the in-cluster account or the environment; the errors every call
raises to its caller; the generic kinds the recorder reads."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import yaml
from lightkube import ApiError, AsyncClient, Client, ConfigError, KubeConfig
from lightkube.generic_resource import create_global_resource, create_namespaced_resource

from gpufleet.errors import InputError

Workload = create_namespaced_resource("kueue.x-k8s.io", "v1beta2", "Workload", "workloads")

#: The kinds the recorder reads, by plural name. All are generic (plain dicts inside): lightkube's
#: typed models refuse the API server's BOOKMARK objects, which are a kind's empty object with its
#: required lists as null (a Job's ``spec.template.spec.containers``: found on the testbed), and the
#: recorder turns every object back into a dict anyway.
RESOURCES: dict[str, Any] = {
    "workloads": Workload,
    "jobs": create_namespaced_resource("batch", "v1", "Job", "jobs"),
    "pods": create_namespaced_resource("", "v1", "Pod", "pods"),
    "nodes": create_global_resource("", "v1", "Node", "nodes"),
}
NAMESPACED = frozenset({"workloads", "jobs", "pods"})

HTTP_NOT_FOUND = 404
HTTP_FORBIDDEN = 403
HTTP_CONFLICT = 409
HTTP_INVALID = 422


class Gone(Exception):
    """410 Gone: the resourceVersion is older than the server keeps; relist."""


class ConnectionLost(Exception):
    """The watch stream broke (network, server restart); reconnect after a backoff."""


class WriteRefused(Exception):
    """The API server refused a write for good (403 Forbidden, 404, 422 Invalid): retrying will not help."""


def _config(kubeconfig: str | None, *, in_cluster: bool) -> KubeConfig:
    """A kubeconfig file, the in-cluster service account, or the environment, in that order."""
    if in_cluster:
        return KubeConfig.from_service_account()
    if kubeconfig:
        return KubeConfig.from_file(kubeconfig)
    return KubeConfig.from_env()


def client(kubeconfig: str | None = None, *, in_cluster: bool = False) -> AsyncClient:
    """An async client from a kubeconfig file, the in-cluster service account, or the environment."""
    config = _config(kubeconfig, in_cluster=in_cluster)
    return AsyncClient(config, timeout=httpx2.Timeout(30.0), field_manager="gpufleet-recorder")


@dataclass(frozen=True)
class InlineKubeconfig:
    """A kubeconfig's text read from somewhere other than a file (a MultiKueue worker's Secret), and
    where it came from, for messages. Its credentials stay in memory: nothing is written to disk."""

    text: str
    source: str

    def __repr__(self) -> str:  # never the credentials in a log or a traceback
        return f"InlineKubeconfig(source={self.source!r})"


def _from_text(inline: InlineKubeconfig) -> KubeConfig:
    data = yaml.safe_load(inline.text)
    if not isinstance(data, dict):
        raise TypeError("not a mapping")
    return KubeConfig.from_dict(data)


def sync_client(kubeconfig: Path | InlineKubeconfig | None) -> Client:
    """A client from ``kubeconfig`` (a file, or text in memory), else from $KUBECONFIG /
    ~/.kube/config / the in-cluster account."""
    where = kubeconfig.source if isinstance(kubeconfig, InlineKubeconfig) else str(kubeconfig or "")
    try:
        if isinstance(kubeconfig, InlineKubeconfig):
            config = _from_text(kubeconfig)
        else:
            config = KubeConfig.from_file(kubeconfig) if kubeconfig else KubeConfig.from_env()
    except (ConfigError, OSError) as exc:
        raise InputError.one(f"cannot load a kubeconfig: {exc}", file=where) from None
    except (yaml.YAMLError, KeyError, TypeError, ValueError, AttributeError) as exc:
        # lightkube lets a file that is not YAML, or YAML that is not a kubeconfig, raise as it parses.
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError.one(f"cannot load a kubeconfig: not a kubeconfig ({detail})", file=where) from None
    return Client(config=config, field_manager="gpufleet")


def _status_code(exc: httpx2.HTTPStatusError) -> int:
    """The HTTP status of a failed call (lightkube wraps it in ApiError only for exact JSON replies)."""
    if isinstance(exc, ApiError) and exc.status is not None and exc.status.code:
        return int(exc.status.code)
    return int(exc.response.status_code)


def _as_dict(obj: Any) -> dict[str, Any]:
    data: dict[str, Any] = obj.to_dict()
    return data
