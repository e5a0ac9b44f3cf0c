"""The MIG fitter: which layouts fit on a card, where their instances go, and why others do not."""

import itertools
from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.gpus import (
    GpuModel,
    MigGeometry,
    MigProfile,
    Placement,
    canonical,
    check_layout,
    lookup,
    maximal_layouts,
    models,
    place,
)

MIG_MODELS = [m for m in models() if m.mig is not None]
EIGHT_SLICE = [m for m in MIG_MODELS if m.mig is not None and m.mig.memory_slices == 8]


def model(name: str) -> GpuModel:
    found = lookup(name)
    assert found is not None
    return found


A100 = model("A100-SXM4-80GB")
A30 = model("A30-24GB")


@pytest.mark.parametrize(
    ("gpu", "layout", "fits"),
    [
        ("A100-SXM4-80GB", {"3g.40gb": 2, "1g.10gb": 1}, False),
        ("A100-SXM4-80GB", {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}, True),
        ("A100-SXM4-80GB", {"3g.40gb": 2}, True),
        ("A100-SXM4-80GB", {"3g.40gb": 1, "4g.40gb": 1}, True),
        ("A100-SXM4-80GB", {"1g.10gb": 7}, True),
        ("A100-SXM4-80GB", {"1g.10gb": 8}, False),
        ("A100-SXM4-80GB", {"1g.20gb": 4}, True),
        ("A100-SXM4-80GB", {"1g.20gb": 4, "1g.10gb": 1}, False),
        ("A100-SXM4-80GB", {"2g.20gb": 3, "1g.10gb": 2}, False),
        # The layout of NVIDIA/k8s-device-plugin#1462, applied on a real A100 80GB.
        ("A100-SXM4-80GB", {"1g.10gb": 5, "1g.10gb+me": 1, "1g.20gb": 1}, True),
        ("A100-SXM4-80GB", {"1g.10gb+me": 2}, False),
        ("A100-SXM4-80GB", {}, True),
        ("A100-SXM4-80GB", {"1g.10gb": 0, "3g.40gb": 2}, True),
        ("A100-SXM4-40GB", {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}, True),
        ("A100-SXM4-40GB", {"1g.10gb": 4}, True),
        ("B200-180GB", {"3g.90gb": 2, "1g.23gb": 1}, False),
        ("A30-24GB", {"1g.6gb": 2, "2g.12gb": 1}, True),
        ("A30-24GB", {"2g.12gb": 2, "1g.6gb": 1}, False),
        ("A30-24GB", {"1g.6gb+me": 1, "2g.12gb+me": 1}, False),
        ("A30-24GB", {"1g.6gb+me": 1, "1g.6gb": 1, "2g.12gb": 1}, True),
        ("L40S", {}, False),
    ],
    ids=str,
)
def test_layouts_fit_or_not(gpu: str, layout: dict[str, int], fits: bool) -> None:
    card = model(gpu)
    assert (place(card, layout) is not None) is fits
    assert (check_layout(card, layout) == []) is fits


def test_balanced_a100_places_the_3g_high_so_two_1g_fit_below() -> None:
    placements = place(A100, {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1})
    assert placements == (
        Placement("1g.10gb", 0, 1),
        Placement("1g.10gb", 1, 1),
        Placement("2g.20gb", 2, 2),
        Placement("3g.40gb", 4, 4),
    )


def test_three_3g_plus_1g_is_refused_because_of_memory_slices() -> None:
    [message] = check_layout(A100, {"3g.40gb": 2, "1g.10gb": 1})
    assert "needs 9 memory slices but A100-SXM4-80GB has 8" in message
    assert "3g.40gb: 3 compute slices, 4 memory slices" in message


@pytest.mark.parametrize("gpu", EIGHT_SLICE, ids=lambda m: m.name)
def test_a_7g_leaves_room_for_nothing(gpu: GpuModel) -> None:
    assert gpu.mig is not None
    whole = next(p for p in gpu.mig.profiles if p.compute == 7)
    for other in gpu.mig.profiles:
        layout = {whole.name: 1} | ({other.name: 1} if other is not whole else {whole.name: 2})
        assert place(gpu, layout) is None
        assert any("memory slices" in message for message in check_layout(gpu, layout))


def test_two_media_extension_instances_are_refused_with_the_reason() -> None:
    messages = check_layout(A30, {"1g.6gb+me": 1, "2g.12gb+me": 1})
    assert messages == [
        "at most one media-extension (+me) instance fits on a card, which has one set of media engines; "
        "the layout asks for 1 × 1g.6gb+me + 1 × 2g.12gb+me"
    ]
    assert any("media-extension" in m for m in check_layout(A100, {"1g.10gb+me": 2}))


def test_a_profile_of_another_card_is_refused_naming_the_valid_ones() -> None:
    [message] = check_layout(A100, {"3g.20gb": 1})
    assert "unknown MIG profile '3g.20gb' for A100-SXM4-80GB" in message
    assert "(3g.20gb is a profile of A100-SXM4-40GB, A100-PCIE-40GB)" in message
    assert message.endswith("valid profiles: 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb")


@pytest.mark.parametrize(
    ("gpu", "layout", "expected"),
    [
        ("L40S", {"1g.10gb": 1}, ["L40S has no MIG; use full cards or time-slicing on it"]),
        ("A100-SXM4-80GB", {"2g.20gb": -1}, ["the count of 2g.20gb must not be negative, got -1"]),
        (
            "A100-SXM4-80GB",
            {"1g.20gb": 5},
            [
                "5 × 1g.20gb exceeds the maximum of 4 per A100-SXM4-80GB card",
                "5 × 1g.20gb needs 10 memory slices but A100-SXM4-80GB has 8 "
                "(1g.20gb: 1 compute slice, 2 memory slices)",
            ],
        ),
        (
            "A100-SXM4-80GB",
            {"7g.80gb": 1, "1g.10gb": 1},
            [
                "1 × 1g.10gb + 1 × 7g.80gb needs 9 memory slices but A100-SXM4-80GB has 8 "
                "(1g.10gb: 1 compute slice, 1 memory slice; 7g.80gb: 7 compute slices, 8 memory slices)",
                "1 × 1g.10gb + 1 × 7g.80gb needs 8 compute slices but A100-SXM4-80GB has 7 "
                "(1g.10gb: 1 compute slice, 1 memory slice; 7g.80gb: 7 compute slices, 8 memory slices)",
            ],
        ),
        (
            "A100-SXM4-80GB",
            {"bogus": 1, "2g.20gb": 4},
            [
                "4 × 2g.20gb exceeds the maximum of 3 per A100-SXM4-80GB card",
                "unknown MIG profile 'bogus' for A100-SXM4-80GB; valid profiles: "
                "1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb",
                "4 × 2g.20gb needs 8 compute slices but A100-SXM4-80GB has 7 "
                "(2g.20gb: 2 compute slices, 2 memory slices)",
            ],
        ),
    ],
    ids=["no-mig", "negative", "over-max", "7g-plus-1g", "everything-at-once"],
)
def test_check_layout_messages(gpu: str, layout: dict[str, int], expected: list[str]) -> None:
    assert check_layout(model(gpu), layout) == expected


def test_a_placement_only_failure_says_which_start_slots_are_legal() -> None:
    # No real card has a layout that passes the slice totals yet cannot be placed (the exhaustive
    # test below shows it), so this made-up card stands in: two 2-slice profiles that may both only
    # start at slot 0 of a 4-slice card.
    geometry = MigGeometry(
        compute_slices=4,
        memory_slices=4,
        profiles=(MigProfile("2g.10gb", 2, 2, 2, (0,), 10),),
    )
    card = GpuModel("TEST-CARD", (), 20, "TEST", "ampere", geometry, ("0x000010DE",))
    assert place(card, {"2g.10gb": 1}) == (Placement("2g.10gb", 0, 2),)
    assert check_layout(card, {"2g.10gb": 2}) == [
        "2 × 2g.10gb fits the slice totals (4/4 memory, 4/4 compute) but no choice of start slots avoids "
        "an overlap on TEST-CARD (2g.10gb may start only at slot 0)"
    ]


def _geometries() -> list[GpuModel]:
    """One card per distinct MIG geometry, to keep the exhaustive test short."""
    seen: dict[MigGeometry, GpuModel] = {}
    for gpu in MIG_MODELS:
        assert gpu.mig is not None
        seen.setdefault(gpu.mig, gpu)
    return list(seen.values())


@pytest.mark.parametrize("gpu", _geometries(), ids=lambda m: m.name)
def test_on_real_cards_placement_agrees_with_an_exhaustive_slot_search(gpu: GpuModel) -> None:
    """Compare ``place`` with a brute force over every start slot of every instance.

    Only layouts within the slice totals are tried; the others are refused before any search.
    """
    geometry = gpu.mig
    assert geometry is not None
    profiles = geometry.profiles
    for counts in itertools.product(*(range(p.max_count + 1) for p in profiles)):
        instances = [p for p, c in zip(profiles, counts, strict=True) for _ in range(c)]
        if sum(p.is_media_extension for p in instances) > 1:
            continue
        if sum(p.compute for p in instances) > geometry.compute_slices:
            continue
        if sum(p.memory_slices for p in instances) > geometry.memory_slices:
            continue
        brute = any(_disjoint(instances, starts) for starts in itertools.product(*(p.starts for p in instances)))
        layout = {p.name: c for p, c in zip(profiles, counts, strict=True)}
        assert (place(gpu, layout) is not None) is brute, layout
        # On the real placement tables the slice totals alone decide (docs/gpus.md says so).
        assert brute, layout


def _disjoint(instances: list[MigProfile], starts: tuple[int, ...]) -> bool:
    taken: set[int] = set()
    for profile, start in zip(instances, starts, strict=True):
        span = set(range(start, start + profile.memory_slices))
        if taken & span:
            return False
        taken |= span
    return True


@st.composite
def layouts(draw: st.DrawFn) -> tuple[GpuModel, dict[str, int]]:
    gpu = draw(st.sampled_from(MIG_MODELS))
    assert gpu.mig is not None
    chosen = draw(st.lists(st.sampled_from(gpu.mig.profiles), unique=True, max_size=5))
    return gpu, {p.name: draw(st.integers(0, p.max_count + 1)) for p in chosen}


@st.composite
def fitting_layouts(draw: st.DrawFn) -> tuple[GpuModel, dict[str, int]]:
    """Part of a maximal layout, with one plain instance perhaps swapped for its ``+me`` twin."""
    gpu = draw(st.sampled_from(MIG_MODELS))
    assert gpu.mig is not None
    maximal = draw(st.sampled_from(maximal_layouts(gpu)))
    layout = {name: draw(st.integers(0, count)) for name, count in maximal}
    media = [p for p in gpu.mig.profiles if p.is_media_extension and layout.get(p.base_name, 0) > 0]
    if media and draw(st.booleans()):
        swap = draw(st.sampled_from(media))
        layout[swap.base_name] -= 1
        layout[swap.name] = 1
    return gpu, layout


def _plain(gpu: GpuModel, layout: Mapping[str, int]) -> dict[str, int]:
    """The layout with every ``+me`` instance counted as its plain profile."""
    assert gpu.mig is not None
    folded: dict[str, int] = {}
    for name, count in layout.items():
        profile = gpu.mig.profile(name)
        assert profile is not None
        folded[profile.base_name] = folded.get(profile.base_name, 0) + count
    return folded


@settings(max_examples=300, deadline=None)
@given(st.one_of(layouts(), fitting_layouts()))
def test_accepted_layouts_are_placed_legally_and_lie_inside_a_maximal_layout(
    case: tuple[GpuModel, dict[str, int]],
) -> None:
    gpu, layout = case
    placements = place(gpu, layout)
    assert (placements is not None) is (check_layout(gpu, layout) == [])
    if placements is None:
        return
    geometry = gpu.mig
    assert geometry is not None
    assert sorted(p.profile for p in placements) == sorted(n for n, c in layout.items() for _ in range(c))
    taken: set[int] = set()
    compute = 0
    for placement in placements:
        profile = geometry.profile(placement.profile)
        assert profile is not None
        assert placement.start in profile.starts
        assert placement.size == profile.memory_slices
        assert placement.start + placement.size <= geometry.memory_slices
        span = set(range(placement.start, placement.start + placement.size))
        assert not taken & span
        taken |= span
        compute += profile.compute
    assert compute <= geometry.compute_slices
    assert [p.start for p in placements] == sorted(p.start for p in placements)
    plain = _plain(gpu, layout)
    assert any(all(plain.get(n, 0) <= dict(m).get(n, 0) for n in plain) for m in maximal_layouts(gpu))


@settings(max_examples=300, deadline=None)
@given(fitting_layouts(), st.data())
def test_every_part_of_a_fitting_layout_fits(case: tuple[GpuModel, dict[str, int]], data: st.DataObject) -> None:
    gpu, layout = case
    assert place(gpu, layout) is not None
    part = {name: data.draw(st.integers(0, count)) for name, count in layout.items()}
    assert place(gpu, part) is not None


@settings(max_examples=200, deadline=None)
@given(st.one_of(layouts(), fitting_layouts()))
def test_place_is_deterministic_whatever_the_key_order(case: tuple[GpuModel, dict[str, int]]) -> None:
    gpu, layout = case
    reordered = dict(reversed(list(layout.items())))
    assert place(gpu, layout) == place(gpu, reordered) == place(gpu, dict(layout))
    assert check_layout(gpu, layout) == check_layout(gpu, reordered)
    assert canonical(layout) == canonical(reordered)
