"""Whole-unit counts of Kubernetes quantities for device resources (GPUs, MIG slices, replicas).

Device plugins only ever advertise integers; a value that is not one (``500m``) counts as 0 rather
than being rounded into a GPU that does not exist.
"""

from __future__ import annotations

_SUFFIXES = {"k": 10**3, "M": 10**6, "G": 10**9, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}


def count(value: object) -> int:
    text = str(value).strip()
    for suffix, factor in _SUFFIXES.items():
        if text.endswith(suffix) and text[: -len(suffix)].isdigit():
            return int(text[: -len(suffix)]) * factor
    return int(text) if text.isdigit() else 0
