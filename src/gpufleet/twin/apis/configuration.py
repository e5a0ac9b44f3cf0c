"""Kueue v0.19.2: ``apis/config/v1beta2/configuration_types.go``, ``pkg/config/config.go``,
``pkg/config/validation.go``.

Kueue's manager ``Configuration`` (``config.kueue.x-k8s.io``): the fields that change admission.

Fair sharing and its preemption strategies, ``admissionFairSharing``, ``resources.excludeResourcePrefixes`` and
``resources.quotaCheckStrategy``, and ``featureGates`` (the API's alternative to the manager's
``--feature-gates`` flag).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gpufleet.twin.apis import specs as s
from gpufleet.twin.apis.admission_fairsharing_fields import read_admission_fair_sharing
from gpufleet.twin.apis.claims import read_device_class_mappings
from gpufleet.twin.apis.fields import Doc, choice, type_name
from gpufleet.twin.features import DEFAULTS, unmodelled


def read_configuration(doc: Doc, obj: dict[str, Any]) -> s.ConfigSpec:
    """The ``config.kueue.x-k8s.io`` Configuration's fields the twin models (v1beta1's
    ``fairSharing.enable`` mapped onto v1beta2, where the section's presence turns it on)."""
    resources = doc.mapping("resources", obj.get("resources"))
    excluded = doc.strings("resources.excludeResourcePrefixes", resources.get("excludeResourcePrefixes"))
    strategy = choice(
        doc, "resources.quotaCheckStrategy", resources.get("quotaCheckStrategy"),
        (s.BLOCK_UNDECLARED, s.IGNORE_UNDECLARED), s.BLOCK_UNDECLARED,
    )  # fmt: skip
    if strategy == s.IGNORE_UNDECLARED and excluded:  # Kueue's config validation
        doc.fail("resources.quotaCheckStrategy", "IgnoreUndeclared cannot be combined with excludeResourcePrefixes")
    base = s.ConfigSpec(
        fair_sharing=False,
        excluded_prefixes=excluded,
        feature_gates=_feature_gates(doc, obj.get("featureGates")),
        quota_check_strategy=strategy,
        admission_fair_sharing=read_admission_fair_sharing(doc, obj.get("admissionFairSharing")),
        device_class_mappings=read_device_class_mappings(doc, resources.get("deviceClassMappings")),
    )
    if obj.get("fairSharing") is None:
        return base
    fs = doc.mapping("fairSharing", obj.get("fairSharing"))
    enabled = bool(fs.get("enable", True)) if str(obj.get("apiVersion", "")).endswith("v1beta1") else True
    strategies = doc.strings("fairSharing.preemptionStrategies", fs.get("preemptionStrategies"))
    allowed = {
        (s.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,),
        (s.LESS_THAN_INITIAL_SHARE,),
        (s.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, s.LESS_THAN_INITIAL_SHARE),
    }
    if strategies and strategies not in allowed:
        doc.fail("fairSharing.preemptionStrategies", f"unsupported strategy list {list(strategies)}")
    return replace(base, fair_sharing=enabled, preemption_strategies=strategies or base.preemption_strategies)


def _feature_gates(doc: Doc, raw: Any) -> tuple[tuple[str, bool], ...]:
    """``featureGates``: a map of gate name to ``true``/``false`` (Kueue's ``map[string]bool``)."""
    gates = []
    for name, value in doc.mapping("featureGates", raw).items():
        if not isinstance(value, bool):
            doc.fail(f"featureGates.{name}", f"expected true or false, got {type_name(value)}")
            continue
        if unmodelled(str(name), value):
            doc.fail(
                f"featureGates.{name}",
                f"the twin models Kueue with {name} at its default ({str(DEFAULTS[name]).lower()}) only",
            )
            continue
        gates.append((str(name), value))
    return tuple(sorted(gates))
