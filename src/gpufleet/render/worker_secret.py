"""A worker's kubeconfig as the Secret MultiKueue reads, refused where Kueue would refuse it.

Kueue v0.19.2 loads a MultiKueueCluster's kubeconfig from the ``kubeconfig`` key of a Secret in its
own namespace and refuses one it deems unsafe (``validateKubeconfig``/``validateRestConfig`` in
``pkg/controller/admissionchecks/multikueue/multikueuecluster.go``): a ``tokenFile``, TLS
verification skipped, a ``certificate-authority`` file path, a cluster without a server, a server
whose host is neither an IP nor a DNS name, basic auth, an exec plugin or an auth provider. The
MultiKueueCluster then stays inactive with reason ``InsecureKubeConfig``; here the same kubeconfig is
a located error before anything is written. Client certificate and key *files* pass Kueue's check but
cannot be read inside Kueue's pod, so they are refused too: their ``-data`` forms work.
"""

from __future__ import annotations

import base64
import ipaddress
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from gpufleet.errors import InputError, Problem
from gpufleet.render.common import Obj, meta
from gpufleet.yamldoc import Document, read_document

KUEUE_NAMESPACE = "kueue-system"
SECRET_KEY = "kubeconfig"  # kueue.MultiKueueConfigSecretKey
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# (field of a user, Kueue's or gpufleet's reason)
_USER_FIELDS = (
    ("tokenFile", "tokenFile is not allowed (Kueue): put the token inline as token"),
    ("exec", "exec plugins are not allowed (Kueue): use a token or a client certificate"),
    ("auth-provider", "auth providers are not allowed (Kueue)"),
    ("username", "basic auth is not allowed (Kueue)"),
    ("password", "basic auth is not allowed (Kueue)"),
    ("client-certificate", "a file path cannot be read in Kueue's pod: use client-certificate-data"),
    ("client-key", "a file path cannot be read in Kueue's pod: use client-key-data"),
)


def _valid_host(server: str) -> bool:
    """Kueue's ``isValidHostname``: the URL's host (port dropped) is an IP or a DNS subdomain."""
    try:
        host = urlsplit(server.lower()).hostname or ""
    except ValueError:
        return False
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return len(host) <= 253 and bool(_DNS_SUBDOMAIN.match(host))


def _named(doc: Document, section: str) -> list[tuple[int, str, dict[str, Any]]]:
    entries = doc.data.get(section) if isinstance(doc.data, dict) else None
    inner = {"clusters": "cluster", "users": "user", "contexts": "context"}[section]
    out = []
    for i, entry in enumerate(entries if isinstance(entries, list) else []):
        if isinstance(entry, dict) and isinstance(entry.get(inner), dict):
            out.append((i, str(entry.get("name", "")), entry[inner]))
    return out


def kubeconfig_problems(doc: Document) -> Iterator[Problem]:
    """Everything Kueue (or its pod) would refuse in this kubeconfig, each located."""
    if not isinstance(doc.data, dict) or doc.data.get("kind", "Config") != "Config":
        yield doc.problem((), "expected a kubeconfig (kind: Config)")
        return
    clusters, users = _named(doc, "clusters"), _named(doc, "users")
    for i, name, cluster in clusters:
        loc = ("clusters", i, "cluster")
        if cluster.get("insecure-skip-tls-verify"):
            yield doc.problem(
                (*loc, "insecure-skip-tls-verify"),
                f"insecure TLS verification is not allowed for cluster {name} (Kueue)",
            )
        if cluster.get("certificate-authority"):
            yield doc.problem(
                (*loc, "certificate-authority"),
                "certificate-authority file paths are not allowed (Kueue): use certificate-authority-data",
            )
        server = cluster.get("server")
        if not server:
            yield doc.problem(loc, f"server URL is required for cluster {name} (Kueue)")
        elif not _valid_host(str(server)):
            yield doc.problem(
                (*loc, "server"), f"untrusted server endpoint {server!r} (Kueue): the host must be an IP or a DNS name"
            )
    for i, _, user in users:
        for field, reason in _USER_FIELDS:
            if user.get(field):
                yield doc.problem(("users", i, "user", field), reason)
    current = doc.data.get("current-context")
    contexts = {name: ctx for _, name, ctx in _named(doc, "contexts")}
    if current not in contexts:
        yield doc.problem(("current-context",), f"current-context {current!r} names no context: Kueue connects with it")
    elif contexts[current].get("cluster") not in {n for _, n, _ in clusters}:
        yield doc.problem(("current-context",), f"context {current!r} names no cluster of this kubeconfig")


def worker_secret(name: str, text: str, file: str) -> Obj:
    """The Secret ``name`` in Kueue's namespace holding the kubeconfig ``text``; InputError if Kueue would refuse it."""
    doc = read_document(text, file)
    problems = list(kubeconfig_problems(doc))
    if problems:
        raise InputError(problems)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": meta(name, KUEUE_NAMESPACE),
        "type": "Opaque",
        "data": {SECRET_KEY: base64.b64encode(text.encode()).decode()},
    }
