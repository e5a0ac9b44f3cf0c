"""Named and enumerated MIG layouts: maximal layouts, the GPU Operator's standard names, units."""

import pytest

from gpufleet.gpus import (
    GpuModel,
    LayoutError,
    MigProfile,
    canonical,
    check_layout,
    lookup,
    maximal_layouts,
    models,
    resolve_layout,
    standard_layouts,
    units,
)

MIG_MODELS = [m for m in models() if m.mig is not None]


def model(name: str) -> GpuModel:
    found = lookup(name)
    assert found is not None
    return found


def kind(profile: MigProfile) -> str:
    """The size class the research tables use: 1g, 1g×2m (double-memory 1g), 2g, 3g, 4g, 7g."""
    return "1g×2m" if (profile.compute, profile.memory_slices) == (1, 2) else f"{profile.compute}g"


# gpu-sharing.md §1.3: every maximal layout of a 7-compute / 8-memory-slice card.
MAXIMAL_EIGHT_SLICE = [
    {"1g": 7},
    {"1g": 6, "1g×2m": 1},
    {"1g": 5, "2g": 1},
    {"1g": 4, "1g×2m": 1, "2g": 1},
    {"1g": 4, "3g": 1},
    {"1g": 3, "2g": 2},
    {"1g": 3, "4g": 1},
    {"1g": 2, "1g×2m": 1, "2g": 2},
    {"1g": 2, "1g×2m": 1, "4g": 1},
    {"1g": 2, "2g": 1, "3g": 1},
    {"1g": 1, "2g": 3},
    {"1g": 1, "2g": 1, "4g": 1},
    {"1g×2m": 1, "2g": 3},
    {"1g×2m": 1, "2g": 1, "4g": 1},
    {"2g": 2, "3g": 1},
    {"3g": 1, "4g": 1},
    {"7g": 1},
    {"1g": 4, "1g×2m": 2},
    {"1g": 2, "1g×2m": 2, "2g": 1},
    {"1g": 2, "1g×2m": 1, "3g": 1},
    {"1g×2m": 2, "2g": 2},
    {"1g×2m": 2, "4g": 1},
    {"1g×2m": 1, "2g": 1, "3g": 1},
    {"3g": 2},
    {"1g": 2, "1g×2m": 3},
    {"1g×2m": 3, "2g": 1},
    {"1g×2m": 2, "3g": 1},
    {"1g×2m": 4},
]
# gpu-sharing.md §1.3, A30.
MAXIMAL_A30 = [{"1g": 4}, {"1g": 2, "2g": 1}, {"2g": 2}, {"4g": 1}]


def _as_kinds(gpu: GpuModel) -> list[frozenset[tuple[str, int]]]:
    assert gpu.mig is not None
    result = []
    for layout in maximal_layouts(gpu):
        pairs = []
        for name, count in layout:
            profile = gpu.mig.profile(name)
            assert profile is not None
            pairs.append((kind(profile), count))
        result.append(frozenset(pairs))
    return result


@pytest.mark.parametrize("gpu", MIG_MODELS, ids=lambda m: m.name)
def test_maximal_layouts_match_the_research_table(gpu: GpuModel) -> None:
    assert gpu.mig is not None
    expected = MAXIMAL_EIGHT_SLICE if gpu.mig.compute_slices == 7 else MAXIMAL_A30
    found = _as_kinds(gpu)
    assert len(found) == (28 if gpu.mig.compute_slices == 7 else 4)
    assert len(set(found)) == len(found)
    assert set(found) == {frozenset(layout.items()) for layout in expected}


@pytest.mark.parametrize("gpu", MIG_MODELS, ids=lambda m: m.name)
def test_maximal_layouts_are_valid_ordered_and_cannot_grow(gpu: GpuModel) -> None:
    assert gpu.mig is not None
    layouts = maximal_layouts(gpu)
    used = []
    for layout in layouts:
        assert layout == canonical(dict(layout))
        assert check_layout(gpu, dict(layout)) == []
        for profile in gpu.mig.profiles:
            grown = dict(layout)
            grown[profile.name] = grown.get(profile.name, 0) + 1
            assert check_layout(gpu, grown) != []
        sizes = [(gpu.mig.profile(n), c) for n, c in layout]
        used.append(
            (
                -sum(p.compute * c for p, c in sizes if p is not None),
                -sum(p.memory_slices * c for p, c in sizes if p is not None),
                layout,
            )
        )
    assert used == sorted(used)


def test_cards_without_mig_have_no_layouts() -> None:
    l40s = model("L40S")
    assert maximal_layouts(l40s) == ()
    assert standard_layouts(l40s) == {}
    with pytest.raises(LayoutError) as raised:
        resolve_layout(l40s, "all-balanced")
    assert raised.value.messages == ("L40S has no MIG; use full cards or time-slicing on it",)


# The config names of the GPU Operator's default-mig-parted-config
# (assets/state-mig-manager/0400_configmap.yaml) that apply to each card, all-disabled, all-enabled
# and all-balanced aside.
PROFILE_CONFIGS = {
    "A100-SXM4-40GB": "1g.5gb 1g.5gb.me 1g.10gb 2g.10gb 3g.20gb 4g.20gb 7g.40gb",
    "A100-PCIE-40GB": "1g.5gb 1g.5gb.me 1g.10gb 2g.10gb 3g.20gb 4g.20gb 7g.40gb",
    "A100-SXM4-80GB": "1g.10gb 1g.10gb.me 1g.20gb 2g.20gb 3g.40gb 4g.40gb 7g.80gb",
    "A100-PCIE-80GB": "1g.10gb 1g.10gb.me 1g.20gb 2g.20gb 3g.40gb 4g.40gb 7g.80gb",
    "H100-SXM5-80GB": "1g.10gb 1g.10gb.me 1g.20gb 2g.20gb 3g.40gb 4g.40gb 7g.80gb",
    "H100-PCIE-80GB": "1g.10gb 1g.10gb.me 1g.20gb 2g.20gb 3g.40gb 4g.40gb 7g.80gb",
    "H100-NVL-94GB": "1g.12gb 1g.12gb.me 1g.24gb 2g.24gb 3g.47gb 4g.47gb 7g.94gb",
    "GH200-96GB": "1g.12gb 1g.12gb.me 1g.24gb 2g.24gb 3g.48gb 4g.48gb 7g.96gb",
    "GH200-144GB": "1g.18gb 1g.18gb.me 1g.36gb 2g.36gb 3g.72gb 4g.72gb 7g.144gb",
    "H200-SXM-141GB": "1g.18gb 1g.18gb.me 1g.35gb 2g.35gb 3g.71gb 4g.71gb 7g.141gb",
    "H200-NVL-141GB": "1g.18gb 1g.18gb.me 1g.35gb 2g.35gb 3g.71gb 4g.71gb 7g.141gb",
    "B200-180GB": "1g.23gb 1g.23gb.me 1g.45gb 2g.45gb 3g.90gb 4g.90gb 7g.180gb",
    "A30-24GB": "1g.6gb 1g.6gb.me 2g.12gb 2g.12gb.me 4g.24gb",
}


@pytest.mark.parametrize("gpu", MIG_MODELS, ids=lambda m: m.name)
def test_standard_layout_names_are_the_gpu_operators(gpu: GpuModel) -> None:
    standard = standard_layouts(gpu)
    expected = [f"all-{p}" for p in PROFILE_CONFIGS[gpu.name].split()]
    assert list(standard) == ["all-disabled", "all-enabled", *expected, "all-balanced"]
    assert standard["all-disabled"] == standard["all-enabled"] == ()
    for name, layout in standard.items():
        assert check_layout(gpu, dict(layout)) == [], name
        assert resolve_layout(gpu, name) == layout


@pytest.mark.parametrize(
    ("gpu", "config", "layout"),
    [
        ("A100-SXM4-80GB", "all-1g.10gb", (("1g.10gb", 7),)),
        ("A100-SXM4-40GB", "all-1g.10gb", (("1g.10gb", 4),)),
        ("A100-SXM4-80GB", "all-1g.10gb.me", (("1g.10gb+me", 1),)),
        ("A100-SXM4-80GB", "all-1g.20gb", (("1g.20gb", 4),)),
        ("H100-SXM5-80GB", "all-2g.20gb", (("2g.20gb", 3),)),
        ("H200-SXM-141GB", "all-3g.71gb", (("3g.71gb", 2),)),
        ("B200-180GB", "all-7g.180gb", (("7g.180gb", 1),)),
        ("A30-24GB", "all-1g.6gb", (("1g.6gb", 4),)),
        ("A30-24GB", "all-2g.12gb", (("2g.12gb", 2),)),
        ("A30-24GB", "all-2g.12gb.me", (("2g.12gb+me", 1),)),
    ],
    ids=str,
)
def test_single_profile_configs_have_the_gpu_operators_counts(gpu: str, config: str, layout: tuple) -> None:
    assert standard_layouts(model(gpu))[config] == layout


# gpu-sharing.md §1.4 (from the GPU Operator's all-balanced entries).
ALL_BALANCED = {
    "A100-SXM4-40GB": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},
    "A100-PCIE-40GB": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},
    "A100-SXM4-80GB": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
    "A100-PCIE-80GB": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
    "H100-SXM5-80GB": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
    "H100-PCIE-80GB": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
    "H100-NVL-94GB": {"1g.12gb": 2, "2g.24gb": 1, "3g.47gb": 1},
    "GH200-96GB": {"1g.12gb": 2, "2g.24gb": 1, "3g.48gb": 1},
    "GH200-144GB": {"1g.18gb": 2, "2g.36gb": 1, "3g.72gb": 1},
    "H200-SXM-141GB": {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1},
    "H200-NVL-141GB": {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1},
    "B200-180GB": {"1g.23gb": 2, "2g.45gb": 1, "3g.90gb": 1},
    "A30-24GB": {"1g.6gb": 2, "2g.12gb": 1},
}
# The device-filter of each all-balanced entry in the GPU Operator's ConfigMap.
BALANCED_DEVICE_FILTERS = {
    "A100-40": {"0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"},
    "A100-80/H100-80": {
        "0x233010DE", "0x233110DE", "0x232210DE", "0x20B210DE",
        "0x20B510DE", "0x20F310DE", "0x20F510DE", "0x232410DE",
    },
    "H100-NVL": {"0x232110DE", "0x233A10DE"},
    "GH200-96": {"0x234210DE", "0x233D10DE", "0x20B610DE", "0x232910DE"},
    "GH200-144": {"0x234810DE"},
    "H200": {"0x233510DE", "0x233B10DE"},
    "B200": {"0x290110DE"},
    "A30": {"0x20B710DE"},
}  # fmt: skip


@pytest.mark.parametrize("gpu", MIG_MODELS, ids=lambda m: m.name)
def test_all_balanced_matches_the_gpu_operator_for_the_cards_pci_ids(gpu: GpuModel) -> None:
    balanced = standard_layouts(gpu)["all-balanced"]
    assert balanced == canonical(ALL_BALANCED[gpu.name])
    groups = [g for g, ids in BALANCED_DEVICE_FILTERS.items() if set(gpu.pci_device_ids) <= ids]
    assert len(groups) == 1
    siblings = [m for m in MIG_MODELS if set(m.pci_device_ids) <= BALANCED_DEVICE_FILTERS[groups[0]]]
    assert {standard_layouts(m)["all-balanced"] for m in siblings} == {balanced}


@pytest.mark.parametrize(
    ("gpu", "layout", "cards", "expected"),
    [
        ("A100-SXM4-80GB", "all-balanced", 8, {"1g.10gb": 16, "2g.20gb": 8, "3g.40gb": 8}),
        ("A100-SXM4-80GB", "all-1g.10gb", 8, {"1g.10gb": 56}),
        ("A100-SXM4-80GB", "all-balanced", 0, {"1g.10gb": 0, "2g.20gb": 0, "3g.40gb": 0}),
        ("A30-24GB", "all-balanced", 4, {"1g.6gb": 8, "2g.12gb": 4}),
        ("H100-SXM5-80GB", "all-enabled", 8, {}),
        # NVIDIA/k8s-device-plugin#1462: two A100 80GB cards with this layout reported
        # nvidia.com/mig-1g.10gb: 12 and nvidia.com/mig-1g.20gb: 2.
        ("A100-SXM4-80GB", {"1g.10gb": 5, "1g.10gb+me": 1, "1g.20gb": 1}, 2, {"1g.10gb": 12, "1g.20gb": 2}),
    ],
    ids=[
        "8xA100-balanced",
        "8xA100-all-1g",
        "no-cards",
        "4xA30-balanced",
        "mig-on-no-instances",
        "+me-folded",
    ],
)
def test_units_count_schedulable_instances(
    gpu: str, layout: str | dict[str, int], cards: int, expected: dict[str, int]
) -> None:
    card = model(gpu)
    assert units(card, resolve_layout(card, layout), cards) == expected


def test_units_refuses_a_negative_card_count_and_an_invalid_layout() -> None:
    a100 = model("A100-SXM4-80GB")
    with pytest.raises(ValueError, match="must not be negative"):
        units(a100, (("1g.10gb", 1),), -1)
    with pytest.raises(LayoutError):
        units(a100, (("3g.40gb", 3),), 1)


def test_resolve_layout_names_the_standard_layouts_when_the_name_is_unknown() -> None:
    a30 = model("A30-24GB")
    with pytest.raises(LayoutError) as raised:
        resolve_layout(a30, "all-3g.40gb")
    assert raised.value.messages == (
        "unknown MIG layout 'all-3g.40gb' for A30-24GB; standard layouts: all-disabled, all-enabled, "
        "all-1g.6gb, all-1g.6gb.me, all-2g.12gb, all-2g.12gb.me, all-4g.24gb, all-balanced "
        "(or give the number of instances per profile)",
    )


def test_resolve_layout_returns_the_canonical_layout_or_every_problem() -> None:
    a100 = model("A100-SXM4-80GB")
    explicit = {"3g.40gb": 1, "1g.10gb+me": 1, "2g.20gb": 0, "1g.10gb": 1, "1g.20gb": 1}
    assert resolve_layout(a100, explicit) == (
        ("1g.10gb", 1),
        ("1g.10gb+me", 1),
        ("1g.20gb", 1),
        ("3g.40gb", 1),
    )
    wrong = {"3g.40gb": 2, "1g.10gb": 1, "5g.50gb": 1}
    with pytest.raises(LayoutError) as raised:
        resolve_layout(a100, wrong)
    assert list(raised.value.messages) == check_layout(a100, wrong)
    assert len(raised.value.messages) == 2
    assert isinstance(raised.value, ValueError)
