"""The ``x-kubernetes-*`` semantics that no OpenAPI validator knows.

- Unknown fields: a field the schema does not declare is an error unless the node has
  ``x-kubernetes-preserve-unknown-fields`` (what ``kubectl --validate=strict`` reports; without it the
  API server silently prunes the field, which hides typos).
- ``x-kubernetes-list-type: set`` items and ``map`` keys (``x-kubernetes-list-map-keys``) must be
  unique.
- ``x-kubernetes-int-or-string`` values must be an integer or a string.
- ``metadata`` at the root (and in ``x-kubernetes-embedded-resource`` nodes) is ObjectMeta, checked
  by ``metadata``, whatever the CRD declares for it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpufleet.validation import finding as fp
from gpufleet.validation.finding import Finding, Source
from gpufleet.validation.metadata import check_metadata
from gpufleet.validation.schema import child_schema

_TYPE_META = ("apiVersion", "kind")


@dataclass
class _Walk:
    ref: str
    findings: list[Finding] = field(default_factory=list)
    blocking: bool = False

    def add(self, path: str, message: str, *, source: Source = "structural", blocking: bool = False) -> None:
        self.findings.append(Finding(object=self.ref, path=path, message=message, source=source))
        self.blocking = self.blocking or blocking


def check_structure(obj: Mapping[str, Any], schema: Mapping[str, Any], ref: str) -> tuple[list[Finding], bool]:
    """Every structural error of a custom resource, and whether one of them blocks the CEL rules."""
    walk = _Walk(ref)
    _node(walk, obj, schema, "", resource=True)
    return walk.findings, walk.blocking


def _node(walk: _Walk, value: Any, schema: Mapping[str, Any], path: str, *, resource: bool = False) -> None:
    if schema.get("x-kubernetes-int-or-string"):
        if isinstance(value, bool) or not isinstance(value, int | str):
            walk.add(
                path,
                f"must be an integer or a string (x-kubernetes-int-or-string), got {_json_type(value)}",
                source="schema",
                blocking=True,
            )
        return
    if isinstance(value, Mapping):
        _object(walk, value, schema, path, resource=resource or bool(schema.get("x-kubernetes-embedded-resource")))
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            _list_type(walk, value, schema, path)
            for position, item in enumerate(value):
                _node(walk, item, items, fp.index(path, position))


def _object(walk: _Walk, value: Mapping[str, Any], schema: Mapping[str, Any], path: str, *, resource: bool) -> None:
    preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
    for name, item in value.items():
        child_path = fp.child(path, name)
        if resource and name == "metadata":
            findings, blocking = check_metadata(item, walk.ref, child_path, custom=True)
            walk.findings.extend(findings)
            walk.blocking = walk.blocking or blocking
            continue
        sub, is_map_key = child_schema(schema, name)
        if sub is None:
            if not (preserve or (resource and name in _TYPE_META)):
                walk.add(child_path, f'unknown field "{name}"')
            continue
        _node(walk, item, sub, fp.key(path, name) if is_map_key else child_path)


def _list_type(walk: _Walk, items: list[Any], schema: Mapping[str, Any], path: str) -> None:
    list_type = schema.get("x-kubernetes-list-type")
    if list_type not in ("set", "map"):
        return
    keys: list[str] = list(schema.get("x-kubernetes-list-map-keys") or []) if list_type == "map" else []
    first: dict[str, int] = {}
    for position, item in enumerate(items):
        if list_type == "map":
            if not isinstance(item, Mapping):
                continue
            identity = {k: item.get(k) for k in keys}
            described = f"{_canonical(identity)} (x-kubernetes-list-type=map keyed by {', '.join(keys)})"
        else:
            identity = item
            described = f"{_canonical(item)} (x-kubernetes-list-type=set)"
        token = _canonical(identity)
        if token in first:
            walk.add(fp.index(path, position), f"Duplicate value: {described}; first at index {first[token]}")
        else:
            first[token] = position


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list):
        return "array"
    return type(value).__name__
