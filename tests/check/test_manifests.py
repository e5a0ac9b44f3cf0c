"""The rendered admission objects: valid Kubernetes, scoped as promised, and every rule compiled."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from gpufleet.check.catalogue import RULES
from gpufleet.check.facts import AdmissionFacts
from gpufleet.check.manifests import NAMESPACE, TIMEOUT_SECONDS, admission_objects
from gpufleet.check.rules import CHECKS, judge
from gpufleet.policy import Fleet, parse_policy
from gpufleet.render import render


def by_kind(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == kind)


@pytest.fixture(scope="module")
def objects(fleet: Fleet) -> list[dict[str, Any]]:
    return admission_objects(fleet, webhook_image="registry.example/gpufleet:test")


def test_every_built_in_object_validates_against_kubernetes_1_34(objects: list[dict[str, Any]]) -> None:
    built_in = [o for o in objects if not o["apiVersion"].startswith("cert-manager.io/")]
    assert len(built_in) == 9
    for obj in built_in:
        kubernetes_validate.validate(obj, "1.34.0", strict=True)


def test_policy_fails_closed_and_binding_covers_team_and_serving_namespaces(objects: list[dict[str, Any]]) -> None:
    policy = by_kind(objects, "ValidatingAdmissionPolicy")
    binding = by_kind(objects, "ValidatingAdmissionPolicyBinding")
    assert policy["apiVersion"] == "admissionregistration.k8s.io/v1"
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    (expression,) = binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
    assert expression["values"] == ["nlp", "nlp-eval", "research", "serving", "vision"]


def test_every_rule_is_compiled_with_a_message_expression(objects: list[dict[str, Any]]) -> None:
    validations = by_kind(objects, "ValidatingAdmissionPolicy")["spec"]["validations"]
    assert len(validations) == len(RULES)  # the example fleet has a serving pool, so no rule is dropped
    assert set(CHECKS) == {rule.id for rule in RULES}
    for validation, rule in zip(validations, RULES, strict=True):
        assert validation["messageExpression"].startswith(f'"{rule.reason}: "')


@pytest.mark.parametrize("kind", ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"])
def test_webhooks_spare_system_and_serving_namespaces(objects: list[dict[str, Any]], kind: str) -> None:
    (webhook,) = by_kind(objects, kind)["webhooks"]
    assert webhook["sideEffects"] == "None"
    assert webhook["failurePolicy"] == "Fail"
    assert webhook["timeoutSeconds"] == TIMEOUT_SECONDS <= 5
    assert webhook["admissionReviewVersions"] == ["v1"]
    inside, outside = webhook["namespaceSelector"]["matchExpressions"]
    assert (inside["operator"], outside["operator"]) == ("In", "NotIn")
    assert {"kube-system", "kueue-system", "serving", NAMESPACE} <= set(outside["values"])
    assert not {"kube-system", "kueue-system", "serving"} & set(inside["values"])


def test_the_webhook_needs_no_rbac_and_serves_the_policy_it_was_rendered_from(
    objects: list[dict[str, Any]], fleet: Fleet
) -> None:
    assert not [o for o in objects if o["kind"] in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")]
    pod = by_kind(objects, "Deployment")["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert pod["containers"][0]["image"] == "registry.example/gpufleet:test"
    config = by_kind(objects, "ConfigMap")
    assert parse_policy(config["data"]["fleet.yaml"]) == fleet.policy


def test_everything_the_renderer_writes_passes_the_rules(fleet: Fleet, facts: AdmissionFacts) -> None:
    """The serving Deployments tolerate the serving pool and carry no queue name: they must be admitted."""
    rendered = render(fleet).objects()
    deployments = [o for o in rendered if o["kind"] == "Deployment"]
    assert deployments
    for obj in rendered:
        assert judge(facts, obj, obj["metadata"].get("namespace", "")) == [], obj["metadata"]["name"]


def test_the_rules_use_the_renderers_queue_and_taint(fleet: Fleet, facts: AdmissionFacts) -> None:
    rendered = render(fleet).objects()
    queues = {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in rendered if o["kind"] == "LocalQueue"}
    assert queues == {(ns, t.name) for t in facts.teams for ns in t.namespaces}
    assert facts.serving is not None
    (serving_node,) = [o for o in rendered if o["kind"] == "Node" and o["metadata"]["name"] in facts.serving.nodes]
    assert [(t["key"], t["value"], t["effect"]) for t in serving_node["spec"]["taints"]] == list(facts.serving.taints)
