"""The GPU models gpufleet knows: memory, node label, architecture and MIG geometry.

The data is a compact table in code rather than a packaged YAML file: it is small, it changes only
when NVIDIA ships a card, and as typed Python it is checked by mypy and cannot fail to load or parse
at run time. Sources (see docs/gpus.md for the full list):

- MIG profile names, sizes, max counts: NVIDIA MIG User Guide "Supported MIG Profiles" and the GPU
  Operator's ``assets/state-mig-manager/0400_configmap.yaml``; PCI device IDs from that ConfigMap's
  ``device-filter`` entries.
- Placements: ``nvidia-smi mig -lgipp`` transcripts (A100, H100, H100 NVL, A30). H200, GH200 and B200
  are assumed to use the same 8-slice list (their memory fractions match) — unverified on hardware.
- ``product``: the value GPU Feature Discovery writes into ``nvidia.com/gpu.product`` (the NVML name
  with spaces turned into dashes), as seen on real nodes in public manifests, except where marked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_MEDIA_EXTENSION = "+me"
_PROFILE_NAME = re.compile(r"^(\d+)g\.(\d+)gb")


@dataclass(frozen=True, slots=True)
class MigProfile:
    """One GPU-instance profile: how many compute and memory slices it takes and where it may start."""

    name: str
    compute: int
    memory_slices: int
    max_count: int
    starts: tuple[int, ...]
    memory_gb: int

    @property
    def is_media_extension(self) -> bool:
        """A ``+me`` profile owns the card's media engines (decoders, JPEG, OFA): one per GPU."""
        return self.name.endswith(_MEDIA_EXTENSION)

    @property
    def base_name(self) -> str:
        """The plain profile a ``+me`` profile extends (itself for a plain profile)."""
        return self.name.removesuffix(_MEDIA_EXTENSION)

    @property
    def resource_name(self) -> str:
        """The extended resource the device plugin advertises under the ``mixed`` MIG strategy.

        A ``+me`` instance is advertised under its base profile's resource: ``+`` is not allowed in a
        Kubernetes resource name, and the device plugin's resource patterns match ``1g.10gb`` against
        ``1g.10gb+me`` too (NVIDIA/k8s-device-plugin#1462 shows an A100 node reporting its ``+me``
        instances inside ``nvidia.com/mig-1g.10gb``). A pod cannot ask for the media engines by name.
        """
        return f"nvidia.com/mig-{self.base_name}"


@dataclass(frozen=True, slots=True)
class MigGeometry:
    """How a MIG card is cut: the two slice axes and the profiles that may be created."""

    compute_slices: int
    memory_slices: int
    profiles: tuple[MigProfile, ...]

    def profile(self, name: str) -> MigProfile | None:
        """The profile of that exact name (MIG names are case-sensitive), or None."""
        for candidate in self.profiles:
            if candidate.name == name:
                return candidate
        return None


@dataclass(frozen=True, slots=True)
class GpuModel:
    """One GPU model as a policy names it and as the cluster labels it."""

    name: str
    aliases: tuple[str, ...]
    memory_gib: int
    product: str
    architecture: str
    mig: MigGeometry | None
    pci_device_ids: tuple[str, ...]

    @property
    def has_mig(self) -> bool:
        return self.mig is not None


def profile_sort_key(name: str) -> tuple[int, int, str]:
    """Order profile names by compute slices, then the memory in the name, then the name itself.

    Works on bare names so that layouts can be ordered before they are validated; a name that does
    not look like ``<C>g.<N>gb`` sorts after every real profile.
    """
    match = _PROFILE_NAME.match(name)
    if match is None:
        return (1 << 30, 1 << 30, name)
    return (int(match.group(1)), int(match.group(2)), name)


def _profile(name: str, memory_slices: int, max_count: int, starts: tuple[int, ...]) -> MigProfile:
    match = _PROFILE_NAME.match(name)
    if match is None:  # pragma: no cover - the table below is fixed
        raise AssertionError(f"malformed MIG profile name in the catalogue: {name}")
    return MigProfile(
        name=name,
        compute=int(match.group(1)),
        memory_slices=memory_slices,
        max_count=max_count,
        starts=starts,
        memory_gb=int(match.group(2)),
    )


def _eight_slice(gb: tuple[int, int, int, int, int, int]) -> MigGeometry:
    """The 7-compute / 8-memory-slice geometry of A100, H100, H200, GH200 and B200.

    ``gb`` holds the numbers in the profile names: 1g, double-memory 1g, 2g, 3g, 4g, 7g.
    Placements (``nvidia-smi mig -lgipp``): 1g {0..6}:1, 1g+me {0..6}:1, double-memory 1g
    {0,2,4,6}:2, 2g {0,2,4}:2, 3g {0,4}:4, 4g {0}:4, 7g {0}:8.
    """
    one, one_double, two, three, four, seven = gb
    return MigGeometry(
        compute_slices=7,
        memory_slices=8,
        profiles=(
            _profile(f"1g.{one}gb", 1, 7, (0, 1, 2, 3, 4, 5, 6)),
            _profile(f"1g.{one}gb+me", 1, 1, (0, 1, 2, 3, 4, 5, 6)),
            _profile(f"1g.{one_double}gb", 2, 4, (0, 2, 4, 6)),
            _profile(f"2g.{two}gb", 2, 3, (0, 2, 4)),
            _profile(f"3g.{three}gb", 4, 2, (0, 4)),
            _profile(f"4g.{four}gb", 4, 1, (0,)),
            _profile(f"7g.{seven}gb", 8, 1, (0,)),
        ),
    )


# A30: 4 compute and 4 memory slices; placements from `nvidia-smi mig -lgipp` on an A30.
_A30 = MigGeometry(
    compute_slices=4,
    memory_slices=4,
    profiles=(
        _profile("1g.6gb", 1, 4, (0, 1, 2, 3)),
        _profile("1g.6gb+me", 1, 1, (0, 1, 2, 3)),
        _profile("2g.12gb", 2, 2, (0, 2)),
        _profile("2g.12gb+me", 2, 1, (0, 2)),
        _profile("4g.24gb", 4, 1, (0,)),
    ),
)

_A100_40 = _eight_slice((5, 10, 10, 20, 20, 40))
_A100_80 = _eight_slice((10, 20, 20, 40, 40, 80))  # H100 80GB has the same names
_H100_94 = _eight_slice((12, 24, 24, 47, 47, 94))
_GH200_96 = _eight_slice((12, 24, 24, 48, 48, 96))
_GH200_144 = _eight_slice((18, 36, 36, 72, 72, 144))
_H200 = _eight_slice((18, 35, 35, 71, 71, 141))
_B200 = _eight_slice((23, 45, 45, 90, 90, 180))

# name, aliases, memory GiB, GFD product label, architecture, MIG geometry, PCI device IDs
# (PCI IDs only matter to mig-parted's device-filter, so cards without MIG carry none).
# Bare family names that fit two models (H100, H200, GH200, V100) are deliberately no alias.
# fmt: off
_MODELS: tuple[GpuModel, ...] = (
    GpuModel("A100-SXM4-40GB", ("A100-40GB",), 40, "NVIDIA-A100-SXM4-40GB", "ampere", _A100_40,
             ("0x20B010DE",)),
    # 0x20B110DE is grouped with the 40GB cards in the GPU Operator config; its SKU is unverified.
    GpuModel("A100-PCIE-40GB", ("A100-40GB-PCIE",), 40, "NVIDIA-A100-PCIE-40GB", "ampere", _A100_40,
             ("0x20F110DE", "0x20B110DE")),
    GpuModel("A100-SXM4-80GB", ("A100-80GB",), 80, "NVIDIA-A100-SXM4-80GB", "ampere", _A100_80,
             ("0x20B210DE",)),
    GpuModel("A100-PCIE-80GB", ("A100-80GB-PCIE",), 80, "NVIDIA-A100-80GB-PCIe", "ampere", _A100_80,
             ("0x20B510DE",)),
    GpuModel("H100-SXM5-80GB", ("H100-80GB", "H100-SXM-80GB"), 80, "NVIDIA-H100-80GB-HBM3",
             "hopper", _A100_80, ("0x233010DE",)),
    GpuModel("H100-PCIE-80GB", ("H100-80GB-PCIE", "H100-PCIE"), 80, "NVIDIA-H100-PCIe", "hopper",
             _A100_80, ("0x233110DE",)),
    GpuModel("H100-NVL-94GB", ("H100-NVL", "H100-94GB"), 94, "NVIDIA-H100-NVL", "hopper", _H100_94,
             ("0x232110DE",)),
    GpuModel("H200-SXM-141GB", ("H200-141GB", "H200-SXM"), 141, "NVIDIA-H200", "hopper", _H200,
             ("0x233510DE",)),
    GpuModel("H200-NVL-141GB", ("H200-NVL",), 141, "NVIDIA-H200-NVL", "hopper", _H200,
             ("0x233B10DE",)),
    # GH200 with 96 GB HBM3 reports the superchip's name, "GH200 480GB" (96 GB HBM3 + 480 GB LPDDR5X).
    GpuModel("GH200-96GB", ("GH200-480GB",), 96, "NVIDIA-GH200-480GB", "hopper", _GH200_96,
             ("0x234210DE",)),
    # Product label unverified: derived from the NVML name "NVIDIA GH200 144G HBM3e".
    GpuModel("GH200-144GB", ("GH200-144G-HBM3E",), 144, "NVIDIA-GH200-144G-HBM3e", "hopper",
             _GH200_144, ("0x234810DE",)),
    GpuModel("B200-180GB", ("B200", "B200-SXM-180GB"), 180, "NVIDIA-B200", "blackwell", _B200,
             ("0x290110DE",)),
    GpuModel("A30-24GB", ("A30",), 24, "NVIDIA-A30", "ampere", _A30, ("0x20B710DE",)),
    GpuModel("L4", ("L4-24GB",), 24, "NVIDIA-L4", "ada", None, ()),
    GpuModel("L40S", ("L40S-48GB",), 48, "NVIDIA-L40S", "ada", None, ()),
    GpuModel("L40", ("L40-48GB",), 48, "NVIDIA-L40", "ada", None, ()),
    GpuModel("T4", ("T4-16GB", "Tesla-T4"), 16, "Tesla-T4", "turing", None, ()),
    GpuModel("V100-SXM2-16GB", ("V100-16GB",), 16, "Tesla-V100-SXM2-16GB", "volta", None, ()),
    GpuModel("V100-SXM2-32GB", ("V100-32GB",), 32, "Tesla-V100-SXM2-32GB", "volta", None, ()),
    GpuModel("A10", ("A10-24GB",), 24, "NVIDIA-A10", "ampere", None, ()),
    GpuModel("A10G", ("A10G-24GB",), 24, "NVIDIA-A10G", "ampere", None, ()),
)
# fmt: on

_BY_KEY: dict[str, GpuModel] = {key.casefold(): model for model in _MODELS for key in (model.name, *model.aliases)}


def lookup(name: str) -> GpuModel | None:
    """The model a policy means by ``name``: a canonical name or an alias, in any letter case."""
    return _BY_KEY.get(name.strip().casefold())


def models() -> tuple[GpuModel, ...]:
    """The whole catalogue, in the table's order (data-centre MIG cards first)."""
    return _MODELS


def names() -> tuple[str, ...]:
    """Canonical names, for error messages that list what is accepted."""
    return tuple(model.name for model in _MODELS)
