"""Where ``gpufleet why --workers-from-manager`` finds each worker: the manager's MultiKueueClusters
and the kubeconfig Secret each names, read as Kueue v0.19.2 reads them (``apis/kueue/v1beta2``
``MultiKueueClusterSpec.clusterSource``; ``getKubeConfigFromSecret``: key ``kubeconfig`` of the Secret
in Kueue's namespace). The real API server's side is
``tests/e2e/test_worker_secrets_live.py`` and the federation's ``test_federation.py``."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from gpufleet.explain.workers import KUEUE_NAMESPACE, kubeconfig_text, kueue_namespace, worker_sources


def _cluster(name: str, source: dict[str, Any], active: dict[str, str] | None = None) -> dict[str, Any]:
    status = {"conditions": [{"type": "Active", **active}]} if active else {}
    return {"metadata": {"name": name}, "spec": {"clusterSource": source}, "status": status}


SOURCES = [
    ({"kubeConfig": {"location": "west-kc", "locationType": "Secret"}}, "west-kc", ""),
    ({"kubeConfig": {"location": "west-kc"}}, "west-kc", ""),  # locationType defaults to Secret
    ({"kubeConfig": {"location": "/etc/kc", "locationType": "Path"}}, None, "the file '/etc/kc' on the manager's"),
    ({"clusterProfileRef": {"name": "west-profile"}}, None, "ClusterProfile west-profile"),
    ({}, None, "names no kubeconfig"),
]


@pytest.mark.parametrize(("source", "secret", "problem"), SOURCES, ids=["secret", "default", "path", "profile", "none"])
def test_a_worker_is_found_where_its_multikueuecluster_says(
    source: dict[str, Any], secret: str | None, problem: str
) -> None:
    (found,) = worker_sources([_cluster("west", source)])
    assert (found.cluster, found.secret) == ("west", secret)
    assert problem in found.problem and bool(found.problem) == bool(problem)


def test_workers_come_in_name_order_with_what_the_managers_kueue_says_of_each() -> None:
    clusters = [
        _cluster(
            "west", {"kubeConfig": {"location": "w"}}, {"status": "False", "reason": "BadKubeConfig", "message": "m"}
        ),
        _cluster("east", {"kubeConfig": {"location": "e"}}, {"status": "True", "reason": "Active", "message": ""}),
        _cluster("north", {"kubeConfig": {"location": "n"}}),
    ]
    found = worker_sources(clusters)
    assert [(s.cluster, s.secret) for s in found] == [("east", "e"), ("north", "n"), ("west", "w")]
    assert found[0].active == "the manager's Kueue reports it Active"
    assert "has not reported" in found[1].active
    assert found[2].active == "the manager's Kueue reports it not Active (BadKubeConfig: m)"


KUBECONFIG = "apiVersion: v1\nkind: Config\n"
SECRETS = [
    ({"data": {"kubeconfig": base64.b64encode(KUBECONFIG.encode()).decode()}}, KUBECONFIG, ""),
    (None, None, "no Secret kueue-system/west-kc"),
    ({"data": {"config": "eA=="}}, None, "key 'kubeconfig' not found in Secret kueue-system/west-kc"),
    ({"data": {"kubeconfig": "not base64!"}}, None, "is not base64 of UTF-8 text"),
    ({"data": {"kubeconfig": base64.b64encode(b"\xff\xfe").decode()}}, None, "is not base64 of UTF-8 text"),
]


@pytest.mark.parametrize(
    ("secret", "text", "problem"), SECRETS, ids=["kubeconfig", "missing", "other-key", "not-base64", "not-utf8"]
)
def test_the_kubeconfig_is_the_secrets_kubeconfig_key(
    secret: dict[str, Any] | None, text: str | None, problem: str
) -> None:
    found, said = kubeconfig_text(secret, KUEUE_NAMESPACE, "west-kc")
    assert found == text and problem in said and bool(said) == bool(problem)


@pytest.mark.parametrize(
    ("configuration", "namespace"),
    [(None, "kueue-system"), ({"kind": "Configuration"}, "kueue-system"), ({"namespace": "kueue-mgr"}, "kueue-mgr")],
)
def test_the_secrets_namespace_is_kueues_own(configuration: dict[str, Any] | None, namespace: str) -> None:
    assert kueue_namespace(configuration) == namespace
