"""The GPU catalogue and MIG placement: which cards exist and how each can be sliced."""

from gpufleet.gpus.catalogue import (
    GpuModel,
    MigGeometry,
    MigProfile,
    lookup,
    models,
    names,
    profile_sort_key,
)
from gpufleet.gpus.mig import (
    Layout,
    LayoutError,
    Placement,
    canonical,
    check_layout,
    maximal_layouts,
    place,
    resolve_layout,
    standard_layouts,
    units,
)

__all__ = [
    "GpuModel",
    "Layout",
    "LayoutError",
    "MigGeometry",
    "MigProfile",
    "Placement",
    "canonical",
    "check_layout",
    "lookup",
    "maximal_layouts",
    "models",
    "names",
    "place",
    "profile_sort_key",
    "resolve_layout",
    "standard_layouts",
    "units",
]
