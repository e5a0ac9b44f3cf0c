"""The x-kubernetes-* semantics and the CEL rule engine, on a small purpose-built CRD.

The Kueue tests cover the real rules; these cover the engine's own behaviour (where a rule applies,
which message it reports, which rules are skipped) on a schema that isolates each case.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpufleet.validation import CrdIndex, Finding, load_crds, validate
from gpufleet.validation.rules import is_transition_rule


def crd(spec_schema: dict[str, Any]) -> CrdIndex:
    return load_crds(
        [
            {
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {"name": "widgets.example.com"},
                "spec": {
                    "group": "example.com",
                    "scope": "Namespaced",
                    "names": {"kind": "Widget", "plural": "widgets"},
                    "versions": [
                        {
                            "name": "v1",
                            "served": True,
                            "storage": True,
                            "schema": {
                                "openAPIV3Schema": {
                                    "type": "object",
                                    "properties": {
                                        "apiVersion": {"type": "string"},
                                        "kind": {"type": "string"},
                                        "metadata": {"type": "object"},
                                        "spec": spec_schema,
                                    },
                                }
                            },
                        },
                        {"name": "v0", "served": False, "storage": False},
                    ],
                },
            }
        ]
    )


def widget(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": spec,
    }


def check(spec_schema: dict[str, Any], spec: dict[str, Any]) -> list[tuple[str, str, str]]:
    findings: list[Finding] = validate([widget(spec)], kubernetes="1.34", crds=crd(spec_schema))
    assert all(f.object == "Widget/ns/w" for f in findings)
    return [(f.path, f.source, f.message) for f in findings]


def obj(properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, **extra}


def rule(expression: str, **extra: Any) -> dict[str, Any]:
    return {"rule": expression, **extra}


NOT_CHECKED = (
    "some validation rules were not checked because the object was invalid; "
    "correct the existing errors to complete validation"
)
INT = {"type": "integer"}
STR = {"type": "string"}

CASES = [
    pytest.param(
        obj(
            {
                "items": {
                    "type": "array",
                    "items": obj(
                        {"n": INT},
                        **{"x-kubernetes-validations": [rule("self.n > 0", message="n must be positive")]},
                    ),
                }
            }
        ),
        {"items": [{"n": 1}, {"n": 0}, {"n": 2}]},
        [("spec.items[1]", "cel", "n must be positive")],
        id="rule-on-items-runs-per-element",
    ),
    pytest.param(
        obj(
            {
                "limits": {
                    "type": "object",
                    "additionalProperties": {
                        **INT,
                        "x-kubernetes-validations": [rule("self <= 8", message="at most 8")],
                    },
                }
            }
        ),
        {"limits": {"nvidia.com/gpu": 4, "nvidia.com/mig-1g.10gb": 9}},
        [("spec.limits[nvidia.com/mig-1g.10gb]", "cel", "at most 8")],
        id="rule-on-map-values-runs-per-value",
    ),
    pytest.param(
        obj(
            {"n": INT},
            **{
                "x-kubernetes-validations": [
                    rule("self.n < 3", message="static", messageExpression="'n is ' + string(self.n)")
                ]
            },
        ),
        {"n": 5},
        [("spec", "cel", "n is 5")],
        id="message-expression",
    ),
    pytest.param(
        obj(
            {"n": INT},
            **{"x-kubernetes-validations": [rule("self.n < 3", message="static", messageExpression="self.missing")]},
        ),
        {"n": 5},
        [("spec", "cel", "static")],
        id="failing-message-expression-falls-back",
    ),
    pytest.param(
        obj({"n": INT}, **{"x-kubernetes-validations": [rule("self.n < 3")]}),
        {"n": 5},
        [("spec", "cel", "failed rule: self.n < 3")],
        id="default-message",
    ),
    pytest.param(
        obj(
            {"a": INT, "b": INT},
            **{"x-kubernetes-validations": [rule("self.a <= self.b", message="a above b", fieldPath=".a")]},
        ),
        {"a": 5, "b": 1},
        [("spec.a", "cel", "a above b")],
        id="field-path",
    ),
    pytest.param(
        obj({"a": INT}, **{"x-kubernetes-validations": [rule("self == oldSelf", message="immutable")]}),
        {"a": 1},
        [],
        id="transition-rule-skipped-on-create",
    ),
    pytest.param(
        obj(
            {"a": INT},
            **{
                "x-kubernetes-validations": [
                    rule("oldSelf.hasValue() || self.a == 1", message="a starts at 1", optionalOldSelf=True)
                ]
            },
        ),
        {"a": 2},
        [("spec", "cel", "a starts at 1")],
        id="optional-old-self-runs-on-create",
    ),
    pytest.param(
        obj({"q": STR}, **{"x-kubernetes-validations": [rule("quantity(self.q).isLessThan(quantity('1'))")]}),
        {"q": "2"},
        [("spec", "cel", "rule \"quantity(self.q).isLessThan(quantity('1'))\" cannot be compiled offline")],
        id="uncompilable-rule-is-a-finding",
    ),
    pytest.param(
        obj({"a": INT}, **{"x-kubernetes-validations": [rule("self.a")]}),
        {"a": 2},
        [("spec", "cel", "rule 'self.a' returned 2, not a bool")],
        id="non-bool-result",
    ),
    pytest.param(
        obj(
            {"ratio": {"type": "number"}},
            **{"x-kubernetes-validations": [rule("type(self.ratio) == double", message="double")]},
        ),
        {"ratio": 1},
        [],
        id="number-field-is-a-double",
    ),
    pytest.param(
        obj({"a": INT}, **{"x-kubernetes-validations": [rule("self.a > 0", message="positive")]}),
        {"a": "one"},
        [
            (
                "",
                "cel",
                NOT_CHECKED,
            ),
            ("spec.a", "schema", "'one' is not of type 'integer'"),
        ],
        id="blocking-error-stops-rules",
    ),
    pytest.param(
        obj(
            {"a": {**INT, "minimum": 1}},
            **{"x-kubernetes-validations": [rule("self.a > 5", message="above five")]},
        ),
        {"a": 0},
        [("spec.a", "schema", "0 is less than the minimum of 1"), ("spec", "cel", "above five")],
        id="non-blocking-error-keeps-rules",
    ),
    # --- structural ---
    pytest.param(
        obj({"known": STR, "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}),
        {"known": "x", "free": {"anything": {"goes": 1}}, "typo": 1},
        [("spec.typo", "structural", 'unknown field "typo"')],
        id="unknown-fields-except-where-preserved",
    ),
    pytest.param(
        obj({"tags": {"type": "array", "items": STR, "x-kubernetes-list-type": "set"}}),
        {"tags": ["a", "b", "a"]},
        [
            (
                "spec.tags[2]",
                "structural",
                'Duplicate value: "a" (x-kubernetes-list-type=set); first at index 0',
            )
        ],
        id="list-type-set",
    ),
    pytest.param(
        obj(
            {
                "ports": {
                    "type": "array",
                    "items": obj({"port": INT, "protocol": STR}),
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["port", "protocol"],
                }
            }
        ),
        {
            "ports": [
                {"port": 80, "protocol": "TCP"},
                {"port": 80, "protocol": "UDP"},
                {"port": 80, "protocol": "TCP"},
            ]
        },
        [
            (
                "spec.ports[2]",
                "structural",
                'Duplicate value: {"port":80,"protocol":"TCP"} '
                "(x-kubernetes-list-type=map keyed by port, protocol); first at index 0",
            )
        ],
        id="list-type-map-with-two-keys",
    ),
    pytest.param(
        obj({"size": {"x-kubernetes-int-or-string": True}}),
        {"size": 1.5},
        [
            (
                "",
                "cel",
                NOT_CHECKED,
            ),
            (
                "spec.size",
                "schema",
                "must be an integer or a string (x-kubernetes-int-or-string), got number",
            ),
        ],
        id="int-or-string-without-anyOf",
    ),
    pytest.param(
        obj(
            {
                "template": {
                    "type": "object",
                    "x-kubernetes-embedded-resource": True,
                    "x-kubernetes-preserve-unknown-fields": True,
                }
            }
        ),
        {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labelz": {}}}},
        [("spec.template.metadata.labelz", "structural", 'unknown field "labelz"')],
        id="embedded-resource-metadata-is-object-meta",
    ),
    pytest.param(
        obj({"mode": {**STR, "default": "Fast"}, "opt": {**STR, "nullable": True}, "gone": STR}),
        {"opt": None, "gone": None},
        [],
        id="nulls-pruned-nullable-kept",
    ),
]


@pytest.mark.parametrize(("schema", "spec", "expected"), CASES)
def test_engine(schema: dict[str, Any], spec: dict[str, Any], expected: list[tuple[str, str, str]]) -> None:
    got = check(schema, spec)
    assert len(got) == len(expected), got
    for found, want in zip(sorted(got), sorted(expected), strict=True):
        assert found[:2] == want[:2], got
        assert found[2].startswith(want[2]), got


def test_defaults_apply_recursively_before_rules() -> None:
    schema = obj(
        {
            "policy": obj(
                {
                    "mode": {**STR, "default": "Never"},
                    "inner": obj({"level": {**INT, "default": 3}}, default={}),
                },
                default={},
            )
        },
        **{
            "x-kubernetes-validations": [
                rule("self.policy.mode == 'Never' && self.policy.inner.level == 3", message="defaults missing")
            ]
        },
    )
    assert check(schema, {}) == []


@pytest.mark.parametrize(
    ("expression", "transition"),
    [
        pytest.param("self == oldSelf", True, id="plain"),
        pytest.param("!has(oldSelf.x) || self.x == oldSelf.x", True, id="has"),
        pytest.param("self.name != 'oldSelf'", False, id="in-single-quoted-string"),
        pytest.param('self.name != "keep oldSelf"', False, id="in-double-quoted-string"),
        pytest.param("self.oldSelfish == 1", False, id="longer-identifier"),
    ],
)
def test_transition_rule_detection(expression: str, transition: bool) -> None:
    assert is_transition_rule(expression) is transition


def test_unserved_version_is_not_indexed() -> None:
    index = crd(obj({}))
    assert index.kinds() == ["example.com/v1 Widget"]
    resolution = index.resolve("example.com/v0", "Widget")
    assert (resolution.version, resolution.defined, resolution.served) == (None, True, ("v1",))


@given(st.lists(st.integers(min_value=0, max_value=5), max_size=10))
def test_one_duplicate_finding_per_repeated_set_item(tags: list[int]) -> None:
    schema = obj({"tags": {"type": "array", "items": INT, "x-kubernetes-list-type": "set"}})
    found = check(schema, {"tags": tags})
    assert len(found) == len(tags) - len(set(tags))
    assert {path for path, _, _ in found} == {f"spec.tags[{i}]" for i, tag in enumerate(tags) if tag in tags[:i]}


def test_read_only_mappings_and_tuples_are_accepted() -> None:
    schema = obj(
        {
            "items": {
                "type": "array",
                "items": obj({"n": INT}),
                "x-kubernetes-validations": [rule("size(self) == 2")],
            }
        }
    )
    frozen = MappingProxyType(
        {
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "metadata": MappingProxyType({"name": "w", "namespace": "ns"}),
            "spec": MappingProxyType({"items": (MappingProxyType({"n": 1}), MappingProxyType({"n": 2}))}),
        }
    )
    assert validate([frozen], kubernetes="1.34", crds=crd(schema)) == []
