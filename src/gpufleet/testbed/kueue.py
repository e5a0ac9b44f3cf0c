"""Kueue on loopback: its manager Configuration and its webhook configurations rewritten to a URL.

In a cluster Kueue's webhooks sit behind a Service and it manages its own certificate. Here Kueue runs
as a local process, so the webhook configurations shipped in the Kueue module are rewritten to call
``https://127.0.0.1:<port>/<path>`` with the testbed CA, and internal certificate management is off.
Only the webhooks of the integrations the testbed enables (batch/v1 Jobs) and of Kueue's own objects
are registered: a webhook for a disabled integration would only add a failure point to every pod.
Every field gpufleet renders for Kueue's Configuration (excluded resources and DRA device class
mappings, fair sharing, waitForPodsReady, feature gates, queue-resource metrics: whatever ``render``
emits) is merged in, so the testbed's Kueue behaves as the policy asks a production one to. Only what
must stay local wins over it (``LOCAL_KEYS``: where Kueue listens, how it finds its certificates, that it
leads alone, which integrations run); every other rendered leaf overrides the testbed's own.
"""

from __future__ import annotations

import base64
import copy
from typing import Any

from gpufleet.render.common import Obj

CONFIG_API = "config.kueue.x-k8s.io/v1beta2"
NAMESPACE = "kueue-system"
FRAMEWORKS = ("batch/job",)
KEPT_PATH_PARTS = ("-batch-v1-job", "-kueue-x-k8s-io-")
# As Kueue's own kustomization does: its job webhooks never intercept the system namespaces.
SYSTEM_NAMESPACES = ("kube-system", NAMESPACE)
# Leaves of the local Configuration that the rendered one may never change: the process's own plumbing.
LOCAL_KEYS = (
    "namespace",
    "health",
    "metrics.bindAddress",
    "webhook",
    "leaderElection",
    "internalCertManagement",
    "clientConnection",
    "integrations",
    "featureGates.VisibilityOnDemand",
)
# Identity of the document, not a setting.
IDENTITY_KEYS = ("apiVersion", "kind")


def manager_config(*, webhook_port: int, health_port: int, cert_dir: str, rendered: Obj) -> Obj:
    """Kueue's Configuration for a local process, with gpufleet's rendered fields merged in."""
    config: Obj = {
        "apiVersion": CONFIG_API,
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "manageJobsWithoutQueueName": False,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": cert_dir},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "clientConnection": {"qps": 200, "burst": 400},
        "integrations": {"frameworks": list(FRAMEWORKS)},
        # The on-demand visibility API server reads its certificate from a fixed /visibility folder
        # outside internal certificate management; the testbed does not serve that API.
        "featureGates": {"VisibilityOnDemand": False},
    }
    return merge(config, rendered_fields(rendered))


def rendered_fields(rendered: Obj) -> Obj:
    """The rendered Configuration's settings: all of it but its identity and the ``LOCAL_KEYS``."""
    out = {k: copy.deepcopy(v) for k, v in rendered.items() if k not in IDENTITY_KEYS}
    for dotted in LOCAL_KEYS:
        *parents, leaf = dotted.split(".")
        node: Any = out
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(leaf, None)
    return out


def merge(base: Obj, over: Obj) -> Obj:
    """``base`` with ``over`` laid on it: maps merge key by key, any other value of ``over`` wins."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _kept(hook: dict[str, Any]) -> bool:
    path = str(hook.get("clientConfig", {}).get("service", {}).get("path", ""))
    return any(part in path for part in KEPT_PATH_PARTS)


def local_webhooks(documents: list[Obj], *, port: int, ca_pem: bytes) -> list[Obj]:
    """Kueue's webhook configurations, pointed at the local process and trimmed to what runs."""
    bundle = base64.b64encode(ca_pem).decode()
    out: list[Obj] = []
    for doc in documents:
        if doc.get("kind") not in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            continue
        config = copy.deepcopy(doc)
        config["metadata"] = {"name": f"kueue-{doc['metadata']['name']}"}
        hooks = []
        for hook in config.get("webhooks", []):
            if not _kept(hook):
                continue
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": bundle}
            if "-batch-v1-job" in path:
                hook["namespaceSelector"] = {
                    "matchExpressions": [
                        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": list(SYSTEM_NAMESPACES)}
                    ]
                }
            hooks.append(hook)
        config["webhooks"] = hooks
        if hooks:
            out.append(config)
    return out
