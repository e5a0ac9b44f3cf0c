"""The GPU catalogue: lookup, and the sanity of every model's facts."""

import re
from pathlib import Path

import pytest

from gpufleet.gpus import GpuModel, lookup, models, names

MIG_MODELS = [m for m in models() if m.mig is not None]

# What the issue asks the catalogue to hold.
REQUIRED = {
    "A100-SXM4-40GB",
    "A100-PCIE-40GB",
    "A100-SXM4-80GB",
    "A100-PCIE-80GB",
    "H100-SXM5-80GB",
    "H100-PCIE-80GB",
    "H100-NVL-94GB",
    "H200-SXM-141GB",
    "H200-NVL-141GB",
    "GH200-96GB",
    "GH200-144GB",
    "B200-180GB",
    "A30-24GB",
    "L4",
    "L40S",
    "L40",
    "T4",
    "V100-SXM2-16GB",
    "V100-SXM2-32GB",
    "A10",
    "A10G",
}
WITHOUT_MIG = {"L4", "L40S", "L40", "T4", "V100-SXM2-16GB", "V100-SXM2-32GB", "A10", "A10G"}

# Kubernetes qualified name: optional DNS-subdomain prefix, then a name of at most 63 characters.
QUALIFIED_NAME = re.compile(r"^[a-z0-9.-]+/[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def test_the_catalogue_holds_exactly_the_required_models() -> None:
    assert set(names()) == REQUIRED
    assert len(names()) == len(REQUIRED)
    assert {m.name for m in models() if m.mig is None} == WITHOUT_MIG


def test_names_and_aliases_are_unique_ignoring_case() -> None:
    keys = [key.casefold() for m in models() for key in (m.name, *m.aliases)]
    assert len(keys) == len(set(keys))


@pytest.mark.parametrize(
    ("spelling", "expected"),
    [
        ("H100-SXM5-80GB", "H100-SXM5-80GB"),
        ("h100-80gb", "H100-SXM5-80GB"),
        ("A100-80GB", "A100-SXM4-80GB"),
        ("a100-sxm4-80gb", "A100-SXM4-80GB"),
        ("A100-80GB-PCIe", "A100-PCIE-80GB"),
        (" L40S ", "L40S"),
        ("l40s", "L40S"),
        ("tesla-t4", "T4"),
        ("H100-NVL", "H100-NVL-94GB"),
        ("b200", "B200-180GB"),
        ("A30", "A30-24GB"),
        ("v100-32gb", "V100-SXM2-32GB"),
        ("GH200-480GB", "GH200-96GB"),
    ],
    ids=str,
)
def test_lookup_accepts_names_and_aliases_in_any_case(spelling: str, expected: str) -> None:
    model = lookup(spelling)
    assert model is not None
    assert model.name == expected


@pytest.mark.parametrize("spelling", ["H100", "H200", "GH200", "V100", "A100", "RTX-4090", ""])
def test_lookup_refuses_unknown_and_ambiguous_names(spelling: str) -> None:
    assert lookup(spelling) is None


@pytest.mark.parametrize(
    ("model", "product"),
    [
        ("H100-SXM5-80GB", "NVIDIA-H100-80GB-HBM3"),
        ("A100-SXM4-80GB", "NVIDIA-A100-SXM4-80GB"),
        ("A100-PCIE-80GB", "NVIDIA-A100-80GB-PCIe"),
        ("A100-PCIE-40GB", "NVIDIA-A100-PCIE-40GB"),
        ("H100-NVL-94GB", "NVIDIA-H100-NVL"),
        ("L40S", "NVIDIA-L40S"),
        ("T4", "Tesla-T4"),
        ("A10G", "NVIDIA-A10G"),
        ("V100-SXM2-32GB", "Tesla-V100-SXM2-32GB"),
    ],
    ids=str,
)
def test_product_labels_match_what_gfd_reports_on_real_nodes(model: str, product: str) -> None:
    found = lookup(model)
    assert found is not None
    assert found.product == product


@pytest.mark.parametrize("model", models(), ids=lambda m: m.name)
def test_every_model_has_sane_fields(model: GpuModel) -> None:
    assert model.memory_gib > 0
    assert model.architecture in {"ampere", "hopper", "blackwell", "ada", "turing", "volta"}
    assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9.-]*", model.product)
    assert model.has_mig == (model.mig is not None)
    if model.mig is None:
        assert model.pci_device_ids == ()
    else:
        assert model.pci_device_ids
        assert all(re.fullmatch(r"0x[0-9A-F]{4}10DE", pci) for pci in model.pci_device_ids)


@pytest.mark.parametrize("model", MIG_MODELS, ids=lambda m: m.name)
def test_every_mig_profile_fits_inside_its_card(model: GpuModel) -> None:
    geometry = model.mig
    assert geometry is not None
    assert (geometry.compute_slices, geometry.memory_slices) in {(7, 8), (4, 4)}
    names_seen = [p.name for p in geometry.profiles]
    assert len(names_seen) == len(set(names_seen))
    for profile in geometry.profiles:
        assert geometry.profile(profile.name) is profile
        assert profile.name.startswith(f"{profile.compute}g.{profile.memory_gb}gb")
        assert 1 <= profile.compute <= geometry.compute_slices
        assert profile.starts == tuple(sorted(set(profile.starts)))
        assert all(s >= 0 and s + profile.memory_slices <= geometry.memory_slices for s in profile.starts)
        assert profile.max_count * profile.compute <= geometry.compute_slices
        assert profile.max_count * profile.memory_slices <= geometry.memory_slices
        assert profile.max_count >= 1
    # The whole-card profile is named after the card's memory.
    whole = [p for p in geometry.profiles if p.memory_slices == geometry.memory_slices]
    assert [(p.compute, p.memory_gb) for p in whole] == [(geometry.compute_slices, model.memory_gib)]


@pytest.mark.parametrize(
    ("model", "profile", "resource", "media"),
    [
        ("A100-SXM4-80GB", "1g.10gb", "nvidia.com/mig-1g.10gb", False),
        ("A100-SXM4-80GB", "1g.10gb+me", "nvidia.com/mig-1g.10gb", True),
        ("A100-SXM4-80GB", "3g.40gb", "nvidia.com/mig-3g.40gb", False),
        ("A100-SXM4-40GB", "1g.10gb", "nvidia.com/mig-1g.10gb", False),
        ("A30-24GB", "2g.12gb+me", "nvidia.com/mig-2g.12gb", True),
        ("H200-SXM-141GB", "7g.141gb", "nvidia.com/mig-7g.141gb", False),
    ],
    ids=str,
)
def test_resource_names_follow_the_mixed_strategy(model: str, profile: str, resource: str, media: bool) -> None:
    found = lookup(model)
    assert found is not None and found.mig is not None
    mig_profile = found.mig.profile(profile)
    assert mig_profile is not None
    assert mig_profile.resource_name == resource
    assert mig_profile.is_media_extension is media


@pytest.mark.parametrize("model", MIG_MODELS, ids=lambda m: m.name)
def test_every_resource_name_is_a_valid_kubernetes_resource_name(model: GpuModel) -> None:
    assert model.mig is not None
    for profile in model.mig.profiles:
        assert QUALIFIED_NAME.fullmatch(profile.resource_name), profile.resource_name


def test_the_user_documentation_lists_every_model_as_the_catalogue_has_it() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "gpus.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip(): line for line in doc.splitlines() if line.startswith("| ")}
    for model in models():
        row = rows[model.name]
        assert f"`{model.product}`" in row
        assert f"| {model.memory_gib} |" in row
        assert f"| {', '.join(model.aliases)} |" in row
        assert f"| {', '.join(model.pci_device_ids) or '—'} |" in row
