"""One validation failure, and how objects and fields are named in it.

Field paths follow the Kubernetes API server's own notation (``field.Path``): properties are joined
with dots, list indices and map keys go in brackets, so ``spec.nodeLabels[kubernetes.io/hostname]``
and ``spec.resourceGroups[0].flavors[1]`` read the same as the server's error messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

Source = Literal["schema", "cel", "structural"]

# Findings of one object are reported in this order of source, then by path (see ``sort_key``).
_SOURCE_RANK: dict[str, int] = {"schema": 0, "structural": 1, "cel": 2}


@dataclass(frozen=True, slots=True)
class Finding:
    """One validation failure: which object, which field, what is wrong, and which check found it."""

    object: str  # kind/[namespace/]name, e.g. "ClusterQueue/team-a" or "Deployment/serving/chat"
    path: str  # field path, e.g. "spec.resourceGroups[0].flavors[1].resources[0].nominalQuota"
    message: str  # what is wrong and what was expected (a CEL rule's own message where it is one)
    source: Source  # "schema" | "cel" | "structural"

    def __str__(self) -> str:
        where = f"{self.object} {self.path}" if self.path else self.object
        return f"{where}: {self.message} ({self.source})"


def sort_key(position: int, finding: Finding) -> tuple[int, int, str, str]:
    """Order findings by the object's position in the input, then source, path and message.

    The message is the final tie-breaker, so two runs over the same input list findings identically.
    """
    return (position, _SOURCE_RANK[finding.source], finding.path, finding.message)


def object_ref(obj: Mapping[str, Any], position: int) -> str:
    """Name an object as ``kind/[namespace/]name``; fall back to its position when it has no kind."""
    kind = obj.get("kind")
    metadata = obj.get("metadata")
    name = namespace = None
    if isinstance(metadata, Mapping):
        name = metadata.get("name") or metadata.get("generateName")
        namespace = metadata.get("namespace")
    if not isinstance(kind, str) or not kind:
        kind = f"object[{position}]"
    parts = [kind]
    if isinstance(namespace, str) and namespace:
        parts.append(namespace)
    parts.append(name if isinstance(name, str) and name else "<unnamed>")
    return "/".join(parts)


def child(path: str, name: str) -> str:
    """The path of property ``name`` under ``path``."""
    return f"{path}.{name}" if path else name


def index(path: str, position: int) -> str:
    """The path of list element ``position`` under ``path``."""
    return f"{path}[{position}]"


def key(path: str, map_key: str) -> str:
    """The path of map entry ``map_key`` under ``path`` (a map, not a property)."""
    return f"{path}[{map_key}]"


def join_relative(path: str, relative: str) -> str:
    """Append a rule's ``fieldPath`` (``.spec.x`` or ``['a.b']`` style) to the node's path."""
    relative = relative.strip()
    if not relative:
        return path
    if relative.startswith("["):
        return f"{path}{relative}"
    return child(path, relative.lstrip("."))
