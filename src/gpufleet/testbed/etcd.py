"""The testbed's etcd through its v3 HTTP gateway: the current revision, and compaction.

Chaos tests compact etcd to show that a watch resuming from a revision etcd no longer keeps gets
410 Gone and relists. etcd serves gRPC-gateway JSON on its client URL (plain HTTP on loopback in
the testbed), so no etcdctl is needed; the bodies follow etcd's ``etcdserverpb`` JSON mapping.
"""

from __future__ import annotations

import base64
import json
import urllib.request
from typing import Any

from gpufleet.testbed.processes import TestbedError


def _post(url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{url}{path}", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            data: dict[str, Any] = json.loads(reply.read())
    except OSError as exc:
        raise TestbedError(f"etcd at {url}{path}: {exc}") from exc
    return data


def revision(url: str) -> int:
    """etcd's current revision (every write to any key moves it)."""
    key = base64.b64encode(b"/registry/").decode()
    header = _post(url, "/v3/kv/range", {"key": key, "limit": 1, "keys_only": True}).get("header", {})
    return int(header["revision"])


def compact(url: str, upto: int | None = None) -> int:
    """Drop the history before ``upto`` (default: now) and wait until it is gone; returns the revision."""
    target = revision(url) if upto is None else upto
    _post(url, "/v3/kv/compaction", {"revision": str(target), "physical": True})
    return target
