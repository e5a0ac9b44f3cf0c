"""What gpufleet writes on a cluster it was asked to: the world differential's Jobs on the testbed,
and whole objects server-side applied (the testbed's stand-in DRA driver's ResourceSlices)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
from lightkube import ApiError, Client
from lightkube.core.generic_client import ALL_NS
from lightkube.generic_resource import create_global_resource, create_namespaced_resource
from lightkube.types import PatchType

from gpufleet.errors import InputError
from gpufleet.kube.connection import (
    RESOURCES,
    WriteRefused,
    _as_dict,
    sync_client,
)


def create_job(api: Client, obj: dict[str, Any]) -> None:
    """Create one batch/v1 Job from a plain dict (a user's ``kubectl create``); refusals raise ``WriteRefused``."""
    meta = obj.get("metadata", {})
    try:
        api.create(RESOURCES["jobs"].from_dict(obj), namespace=meta.get("namespace"))
    except ApiError as exc:
        raise WriteRefused(f"create job {meta.get('namespace')}/{meta.get('name')}: {exc.status.message}") from exc


def job_outcomes(api: Client, label_selector: str) -> dict[str, tuple[int, int]]:
    """``namespace/name`` -> (succeeded, failed) pods of every Job carrying ``label_selector``."""
    out: dict[str, tuple[int, int]] = {}
    for job in api.list(RESOURCES["jobs"], namespace=ALL_NS, labels=_selector(label_selector)):
        data = _as_dict(job)
        meta, status = data.get("metadata", {}), data.get("status") or {}
        out[f"{meta.get('namespace')}/{meta.get('name')}"] = (
            int(status.get("succeeded", 0)),
            int(status.get("failed", 0)),
        )
    return out


def _selector(text: str) -> dict[str, Any]:
    """``a=b,c=d`` as lightkube's label filter."""
    return {key: value for key, _, value in (part.partition("=") for part in text.split(",") if part)}


def rest_plural(kind: str) -> str:
    """The REST plural of the kinds applied here (regular English plurals of CamelCase kinds)."""
    lower = kind.lower()
    return f"{lower[:-1]}ies" if lower.endswith("y") else f"{lower}es" if lower.endswith("s") else f"{lower}s"


def apply_objects(objects: list[dict[str, Any]], kubeconfig: Path | None, *, field_manager: str) -> None:
    """Server-side apply each object (forced, under ``field_manager``), as a controller owning them does.

    Cluster-scoped and namespaced kinds alike; the API server's refusal is raised as an InputError
    naming the object.
    """
    api = sync_client(kubeconfig)
    for obj in objects:
        group, _, version = str(obj["apiVersion"]).rpartition("/")
        kind, meta = str(obj["kind"]), obj.get("metadata") or {}
        namespace = meta.get("namespace")
        make = create_namespaced_resource if namespace else create_global_resource
        res = make(group, version, kind, rest_plural(kind))
        scope = {"namespace": namespace} if namespace else {}
        try:
            api.patch(
                res, meta["name"], obj, patch_type=PatchType.APPLY, field_manager=field_manager, force=True, **scope
            )
        except ApiError as exc:
            raise InputError.one(f"the API server refused {kind} {meta['name']}: {exc.status.message}") from None
        except httpx2.HTTPError as exc:
            raise InputError.one(f"cannot reach the API server: {exc}") from None
