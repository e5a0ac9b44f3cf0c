"""A custom resource against its CRD's ``openAPIV3Schema``, the way the API server sees it.

Before validating, the object is prepared as the API server's decoder prepares it: ``null`` in a
field that is not ``nullable`` is dropped (or replaced by the field's default), and ``default``
values are filled in where a field is absent — recursively, so a defaulted ``{}`` gets its own
fields' defaults. CEL rules are written against this defaulted object (Kueue's
``flavorFungibility`` rule reads ``whenCanBorrow``, which the user rarely writes).

Then OpenAPI 3.0 validation (openapi-schema-validator's ``OAS30Validator``) reports every error with
its path. Type, required, enum, maxLength, maxItems and maxProperties failures are *blocking*: the
API server then does not run the CEL rules, because the object lacks the shape they were written for.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from gpufleet.validation import finding as fp
from gpufleet.validation.crds import CrdVersion
from gpufleet.validation.finding import Finding

# jsonschema keywords whose failure the API server reports as a blocking error type
# (TypeInvalid, Required, NotSupported, TooLong, TooMany).
_BLOCKING_KEYWORDS = frozenset({"type", "required", "enum", "maxLength", "maxItems", "maxProperties"})
_REQUIRED_NAME = re.compile(r"^'(.*)' is a required property$")
_ABSENT = object()  # marks a field that is not in the object (``None`` is a value: JSON null)


def child_schema(schema: Mapping[str, Any] | None, name: str) -> tuple[Mapping[str, Any] | None, bool]:
    """The schema of field ``name`` of an object node, and whether ``name`` is a map key.

    A declared property wins; otherwise an ``additionalProperties`` schema makes the node a map.
    """
    if schema is None:
        return None, False
    properties = schema.get("properties")
    if isinstance(properties, Mapping) and name in properties:
        return properties[name], False
    extra = schema.get("additionalProperties")
    if isinstance(extra, Mapping):
        return extra, True
    return None, False


def render_path(schema: Mapping[str, Any] | None, parts: Iterable[str | int]) -> str:
    """Turn a jsonschema path (keys and indices) into a Kubernetes field path, guided by the schema."""
    path = ""
    node = schema
    for part in parts:
        if isinstance(part, int):
            path = fp.index(path, part)
            items = node.get("items") if node is not None else None
            node = items if isinstance(items, Mapping) else None
            continue
        node, is_map_key = child_schema(node, part)
        path = fp.key(path, part) if is_map_key else fp.child(path, part)
    return path


def prepare(value: Any, schema: Mapping[str, Any]) -> Any:
    """A copy of ``value`` with non-nullable nulls pruned and schema defaults applied.

    The copy is made of plain dicts and lists (what jsonschema and CEL take), whatever mapping and
    sequence types the caller used; the caller's object is never changed.
    """
    return _prepare(plain(value), schema)


def plain(value: Any) -> Any:
    """``value`` as plain dicts and lists, the JSON shapes validators and CEL accept."""
    if isinstance(value, Mapping):
        return {name: plain(item) for name, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    return value


def _prepare(value: Any, schema: Mapping[str, Any]) -> Any:
    if isinstance(value, dict):
        properties = schema.get("properties")
        if isinstance(properties, Mapping):
            for name, sub in properties.items():
                current = value.get(name, _ABSENT)
                if current is None and not sub.get("nullable"):
                    del value[name]
                    current = _ABSENT
                if current is _ABSENT and "default" in sub:
                    value[name] = plain(sub["default"])
        extra = schema.get("additionalProperties")
        for name in list(value):
            sub, _ = child_schema(schema, name)
            if sub is None:
                continue
            if value[name] is None and not sub.get("nullable") and sub is extra:
                del value[name]
                continue
            value[name] = _prepare(value[name], sub)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            return [_prepare(item, items) for item in value]
    return value


def check_schema(obj: Mapping[str, Any], crd: CrdVersion, ref: str) -> tuple[list[Finding], bool]:
    """Every OpenAPI error of ``obj`` (already ``prepare``d) and whether any of them is blocking."""
    findings: list[Finding] = []
    blocking = False
    seen: set[tuple[str, str]] = set()
    for error in crd.validator.iter_errors(obj):
        parts = list(error.absolute_path)
        if error.validator == "anyOf" and _is_int_or_string(crd.schema, parts):
            continue  # the structural pass reports int-or-string with a clearer message
        message = error.message
        if error.validator == "required":
            match = _REQUIRED_NAME.match(message)
            if match:
                parts.append(match.group(1))
                message = "Required value"
        elif error.validator == "nullable" or (error.validator == "type" and error.instance is None):
            message = "must not be null"
        path = render_path(crd.schema, parts)
        if (path, message) in seen:
            continue
        seen.add((path, message))
        blocking = blocking or error.validator in _BLOCKING_KEYWORDS
        findings.append(Finding(object=ref, path=path, message=message, source="schema"))
    return findings, blocking


def _is_int_or_string(schema: Mapping[str, Any], parts: list[str | int]) -> bool:
    node: Mapping[str, Any] | None = schema
    for part in parts:
        if node is None:
            return False
        if isinstance(part, int):
            items = node.get("items")
            node = items if isinstance(items, Mapping) else None
        else:
            node, _ = child_schema(node, part)
    return node is not None and bool(node.get("x-kubernetes-int-or-string"))
