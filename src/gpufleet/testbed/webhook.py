"""gpufleet's own webhook on loopback: the rendered configurations pointed at a local process.

In a cluster the API server reaches the webhook through its Service. On the testbed the webhook is a
local ``gpufleet webhook serve``, so each webhook's ``clientConfig.service`` becomes
``url: https://127.0.0.1:<port><path>``, as ``gpufleet.testbed.kueue.local_webhooks`` does for Kueue.
The ``caBundle`` (from ``gpufleet webhook certs``) and everything else the render wrote are kept, so
the API server judges with the scoping, failure policy and timeout a cluster gets.
"""

from __future__ import annotations

import copy

from gpufleet.render.common import Obj

KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


def local_configurations(documents: list[Obj], *, host: str, port: int) -> list[Obj]:
    """The webhook configurations among ``documents``, calling ``https://host:port`` by URL."""
    out: list[Obj] = []
    for doc in documents:
        if doc.get("kind") not in KINDS:
            continue
        config = copy.deepcopy(doc)
        for hook in config.get("webhooks", []):
            client = hook["clientConfig"]
            path = client.pop("service")["path"]
            client["url"] = f"https://{host}:{port}{path}"
        out.append(config)
    return out
