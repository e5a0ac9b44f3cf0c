"""Field-level changes between a live object and the same object after a (dry-run) apply.

The API server's bookkeeping (resourceVersion, managedFields, generation, uid, timestamps) and
``status`` are not changes a user makes, so they are left out. Lists of named items (resource
groups' flavors, resources, containers) are matched by name, so a reordered or inserted item reads
as that item, not as every index after it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpufleet.twin.resources import QuantityError, parse_decimal

IGNORED_METADATA = frozenset(
    {"managedFields", "resourceVersion", "generation", "uid", "creationTimestamp", "selfLink", "deletionTimestamp"}
)
IGNORED_ANNOTATIONS = frozenset({"kubectl.kubernetes.io/last-applied-configuration"})
ABSENT: Any = None


@dataclass(frozen=True)
class FieldChange:
    """One field: its dotted path, the value before (None: absent) and after (None: removed)."""

    path: str
    before: Any
    after: Any


def _clean(obj: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in obj.items() if k != "status"}
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in IGNORED_METADATA}
    if "annotations" in meta:
        notes = {k: v for k, v in (meta["annotations"] or {}).items() if k not in IGNORED_ANNOTATIONS}
        if notes:
            meta["annotations"] = notes
        else:
            del meta["annotations"]
    out["metadata"] = meta
    return out


def _named(items: list[Any]) -> dict[str, Any] | None:
    """A list of mappings that all carry a distinct ``name``, keyed by it; else None."""
    if not items or not all(isinstance(i, dict) and isinstance(i.get("name"), str) for i in items):
        return None
    keyed = {str(i["name"]): i for i in items}
    return keyed if len(keyed) == len(items) else None


def same_value(before: Any, after: Any) -> bool:
    """Equal, or the same quantity written two ways (``"4"`` and ``4``: a server echoes what it was
    sent, but reads it back as a string)."""
    if before == after:
        return True
    scalars = (str, int, float)
    if isinstance(before, scalars) and isinstance(after, scalars) and isinstance(before, str) != isinstance(after, str):
        try:
            return parse_decimal(before) == parse_decimal(after)
        except QuantityError:
            return False
    return False


def _walk(path: str, before: Any, after: Any, out: list[FieldChange]) -> None:
    if same_value(before, after):
        return
    if isinstance(before, dict) and isinstance(after, dict):
        for key in sorted(set(before) | set(after), key=lambda k: (k not in before, str(k))):
            _walk(f"{path}.{key}" if path else str(key), before.get(key, ABSENT), after.get(key, ABSENT), out)
        return
    if isinstance(before, list) and isinstance(after, list):
        old, new = _named(before), _named(after)
        if old is not None and new is not None:
            for name in [*old, *(n for n in new if n not in old)]:
                _walk(f"{path}[{name}]", old.get(name, ABSENT), new.get(name, ABSENT), out)
            return
        if len(before) == len(after):
            for i, (b, a) in enumerate(zip(before, after, strict=True)):
                _walk(f"{path}[{i}]", b, a, out)
            return
    out.append(FieldChange(path, before, after))


def changes(live: dict[str, Any] | None, applied: dict[str, Any]) -> list[FieldChange]:
    """What applying changes in ``live`` (``None``: the object would be created, every field is new)."""
    after = _clean(applied)
    if live is None:
        return [FieldChange("", None, after)]
    out: list[FieldChange] = []
    _walk("", _clean(live), after, out)
    return out


@dataclass(frozen=True)
class ObjectChange:
    """What the apply does to one object: ``Create``, ``Update``, ``Unchanged`` or ``Refused`` (the
    API server's message in ``error``), with the field-level changes."""

    kind: str
    name: str
    namespace: str | None
    action: str
    fields: tuple[FieldChange, ...] = ()
    error: str | None = None

    @property
    def subject(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"


def object_change(
    kind: str, name: str, namespace: str | None, *, live: dict[str, Any] | None, applied: dict[str, Any] | None,
    error: str | None = None,
) -> ObjectChange:  # fmt: skip
    if applied is None:
        return ObjectChange(kind, name, namespace, "Refused", (), error or "the API server refused it")
    found = changes(live, applied)
    if live is None:
        return ObjectChange(kind, name, namespace, "Create", tuple(found))
    return ObjectChange(kind, name, namespace, "Update" if found else "Unchanged", tuple(found))
