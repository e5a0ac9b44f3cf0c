"""The admission objects ``render`` writes: the ValidatingAdmissionPolicy and the webhook around it.

The ValidatingAdmissionPolicy carries the rules as CEL and needs nothing running. The webhook adds
what CEL cannot do (filling in the queue name and a priority class) and serves clusters without
ValidatingAdmissionPolicy. Both are scoped to the team namespaces (the policy also to the serving
namespace, for its one rule), so an outage of the webhook can never block kube-system, Kueue, or the
serving pods; the webhook needs no RBAC because the policy file is all it reads.
"""

from __future__ import annotations

from typing import Any

import yaml

from gpufleet import __version__
from gpufleet.check import cel
from gpufleet.check.facts import SYSTEM_NAMESPACES, admission_facts
from gpufleet.check.workloads import KINDS
from gpufleet.policy.fleet import Fleet
from gpufleet.policy.images import PUBLISHED

Obj = dict[str, Any]
NAME = "gpufleet-admission"
WEBHOOK = "gpufleet-webhook"
NAMESPACE = "gpufleet-system"
PORT = 8443
TIMEOUT_SECONDS = 3
POLICY_PATH = "/etc/gpufleet/fleet.yaml"
TLS_DIR = "/etc/gpufleet/tls"
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpufleet"}
APP = {"app.kubernetes.io/name": WEBHOOK}
DEFAULT_IMAGE = f"{PUBLISHED}:{__version__}"  # unpublished until a release: README, "On a real cluster"
ADMISSION_API = "admissionregistration.k8s.io/v1"


def _meta(name: str, namespace: str | None = None, annotations: dict[str, str] | None = None) -> Obj:
    out: Obj = {"name": name}
    if namespace:
        out["namespace"] = namespace
    out["labels"] = {**MANAGED_BY, **APP} if name == WEBHOOK else dict(MANAGED_BY)
    if annotations:
        out["annotations"] = annotations
    return out


def _rules(operations: list[str], batch_only: bool) -> list[Obj]:
    by_group: dict[str, list[str]] = {}
    for kind in KINDS:
        if kind.batch or not batch_only:
            by_group.setdefault(kind.group, []).append(kind.plural)
    return [
        {"apiGroups": [group], "apiVersions": ["*"], "operations": operations, "resources": plurals}
        for group, plurals in by_group.items()
    ]


def _namespaces_in(names: list[str]) -> Obj:
    return {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": sorted(names)}]}


def validating_admission_policy(fleet: Fleet) -> list[Obj]:
    facts = admission_facts(fleet)
    governed = list(facts.team_namespaces) + ([facts.serving.namespace] if facts.serving else [])
    policy = {
        "apiVersion": ADMISSION_API,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": _meta(NAME),
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": _rules(["CREATE", "UPDATE"], batch_only=False)},
            "matchConditions": cel.MATCH_CONDITIONS,
            "variables": cel.variables(facts),
            "validations": cel.validations(facts),
        },
    }
    binding = {
        "apiVersion": ADMISSION_API,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": _meta(NAME),
        "spec": {
            "policyName": NAME,
            "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": _namespaces_in(governed)},
        },
    }
    return [policy, binding]


def _webhook(fleet: Fleet, name: str, path: str, operations: list[str], batch_only: bool) -> Obj:
    facts = admission_facts(fleet)
    excluded = [*SYSTEM_NAMESPACES, NAMESPACE] + ([facts.serving.namespace] if facts.serving else [])
    selector = _namespaces_in(list(facts.team_namespaces))
    selector["matchExpressions"].append({"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": excluded})
    return {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": "Fail",
        "timeoutSeconds": TIMEOUT_SECONDS,
        "clientConfig": {"service": {"namespace": NAMESPACE, "name": WEBHOOK, "path": path, "port": 443}},
        "rules": _rules(operations, batch_only),
        "namespaceSelector": selector,
        "matchConditions": cel.MATCH_CONDITIONS,
    }


def _cert_manager() -> list[Obj]:
    """A self-signed certificate that cert-manager renews; the webhook reloads it without a restart."""
    issuer = {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Issuer",
        "metadata": _meta(WEBHOOK, NAMESPACE),
        "spec": {"selfSigned": {}},
    }
    certificate = {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": _meta(WEBHOOK, NAMESPACE),
        "spec": {
            "secretName": f"{WEBHOOK}-tls",
            "dnsNames": [f"{WEBHOOK}.{NAMESPACE}.svc", f"{WEBHOOK}.{NAMESPACE}.svc.cluster.local"],
            "issuerRef": {"kind": "Issuer", "name": WEBHOOK},
        },
    }
    return [issuer, certificate]


def _deployment(webhook_image: str) -> Obj:
    probe = {"httpGet": {"path": "/healthz", "port": PORT, "scheme": "HTTPS"}, "periodSeconds": 10}
    container = {
        "name": "webhook",
        "image": webhook_image,
        "args": [
            "webhook",
            "serve",
            POLICY_PATH,
            "--cert",
            f"{TLS_DIR}/tls.crt",
            "--key",
            f"{TLS_DIR}/tls.key",
            "--port",
            str(PORT),
        ],
        "ports": [{"name": "https", "containerPort": PORT}],
        "readinessProbe": probe,
        "livenessProbe": probe,
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [
            {"name": "policy", "mountPath": "/etc/gpufleet", "readOnly": True},
            {"name": "tls", "mountPath": TLS_DIR, "readOnly": True},
        ],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(WEBHOOK, NAMESPACE),
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": APP},
            "template": {
                "metadata": {"labels": APP},
                "spec": {
                    "serviceAccountName": WEBHOOK,
                    "automountServiceAccountToken": False,
                    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [container],
                    "volumes": [
                        {"name": "policy", "configMap": {"name": f"{WEBHOOK}-policy"}},
                        {"name": "tls", "secret": {"secretName": f"{WEBHOOK}-tls"}},
                    ],
                },
            },
        },
    }


def _policy_copy(fleet: Fleet) -> Obj:
    """The policy the webhook loads. Scheduling is kube-scheduler's, not the webhook's; left at its default
    it stays out, so the ConfigMap reads as it did before the field existed (and a webhook of that
    release, which refuses unknown fields, still loads it)."""
    policy = fleet.policy
    default = policy.scheduling == type(policy.scheduling)()
    dumped: Obj = policy.model_dump(mode="json", exclude_none=True, exclude={"scheduling"} if default else None)
    return dumped


def webhook_objects(fleet: Fleet, webhook_image: str = DEFAULT_IMAGE) -> list[Obj]:
    policy_text = yaml.safe_dump(_policy_copy(fleet), sort_keys=False)
    inject = {"cert-manager.io/inject-ca-from": f"{NAMESPACE}/{WEBHOOK}"}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(NAMESPACE)},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": _meta(WEBHOOK, NAMESPACE),
            "automountServiceAccountToken": False,
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _meta(f"{WEBHOOK}-policy", NAMESPACE),
            "data": {"fleet.yaml": policy_text},
        },
        *_cert_manager(),
        _deployment(webhook_image),
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": _meta(WEBHOOK, NAMESPACE),
            "spec": {"selector": APP, "ports": [{"name": "https", "port": 443, "targetPort": "https"}]},
        },
        {
            "apiVersion": ADMISSION_API,
            "kind": "MutatingWebhookConfiguration",
            "metadata": _meta(WEBHOOK, annotations=inject),
            "webhooks": [_webhook(fleet, "mutate.gpufleet.io", "/mutate", ["CREATE"], batch_only=True)],
        },
        {
            "apiVersion": ADMISSION_API,
            "kind": "ValidatingWebhookConfiguration",
            "metadata": _meta(WEBHOOK, annotations=inject),
            "webhooks": [_webhook(fleet, "validate.gpufleet.io", "/validate", ["CREATE", "UPDATE"], batch_only=False)],
        },
    ]


def admission_objects(fleet: Fleet, *, webhook_image: str = DEFAULT_IMAGE) -> list[dict[str, Any]]:
    """Every admission object for ``fleet``: the CEL policy and its binding, then the webhook."""
    return validating_admission_policy(fleet) + webhook_objects(fleet, webhook_image)
