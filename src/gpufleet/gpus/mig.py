"""MIG layouts: validate them by placing every instance on the card, and name the standard ones.

Summing slices is not enough to know whether a set of MIG instances fits: each instance must take a
legal start slot on the memory-slice axis without overlapping another (NVML refuses an overlapping
GPU instance). So ``place`` searches start slots with backtracking, as NVIDIA's DRA driver and HAMi
do, and everything else here builds on it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache

from gpufleet.gpus.catalogue import GpuModel, MigGeometry, MigProfile, models, profile_sort_key

Layout = tuple[tuple[str, int], ...]
"""(profile name, count) pairs, no zero counts, ordered by ``profile_sort_key`` of the name."""

# mig-parted's all-balanced formula (pkg/mig/builder/balanced.go): compute slices of the card ->
# {compute slices of a profile: instances}.
_BALANCED: dict[int, dict[int, int]] = {7: {1: 2, 2: 1, 3: 1}, 4: {1: 2, 2: 1}}


@dataclass(frozen=True, slots=True)
class Placement:
    """One instance on one card: its profile and the memory slices [start, start + size) it holds."""

    profile: str
    start: int
    size: int


class LayoutError(ValueError):
    """A layout that cannot be used; ``messages`` holds one human sentence per problem."""

    def __init__(self, messages: Sequence[str]) -> None:
        self.messages = tuple(messages)
        super().__init__("; ".join(self.messages))


def canonical(layout: Mapping[str, int]) -> Layout:
    """The layout as sorted pairs without zero counts, so equal layouts compare and hash equal.

    Order: compute slices in the name, then the memory in the name, then the name
    (``1g.10gb`` < ``1g.10gb+me`` < ``1g.20gb`` < ``2g.20gb``).
    """
    pairs = ((name, count) for name, count in layout.items() if count != 0)
    return tuple(sorted(pairs, key=lambda pair: profile_sort_key(pair[0])))


def _instances(geometry: MigGeometry, layout: Mapping[str, int]) -> list[MigProfile] | None:
    """One entry per instance, or None when a profile is unknown or a count is out of range."""
    instances: list[MigProfile] = []
    for name, count in layout.items():
        profile = geometry.profile(name)
        if count < 0 or (count > 0 and profile is None):
            return None
        if profile is not None:
            if count > profile.max_count:
                return None
            instances.extend([profile] * count)
    return instances


def place(gpu: GpuModel, layout: Mapping[str, int]) -> tuple[Placement, ...] | None:
    """Where each instance of ``layout`` goes on one card, or None when the layout does not fit.

    Rules: no two instances overlap on the memory-slice axis, each starts at one of its profile's
    legal slots, compute slices add up to at most the card's, no profile exceeds its max count, and
    at most one ``+me`` instance per card. The choice is deterministic: instances are placed largest
    first (memory slices, then compute slices, then name), each at the highest free legal start slot,
    backtracking when a later instance finds no slot. Filling from the top keeps slot 0 free for as
    long as possible, the only slot 4g and 7g can use (HAMi prefers high slots for the same reason).
    The result is ordered by start slot.
    """
    geometry = gpu.mig
    if geometry is None:
        return None
    instances = _instances(geometry, layout)
    if instances is None:
        return None
    if sum(p.is_media_extension for p in instances) > 1:
        return None
    if sum(p.compute for p in instances) > geometry.compute_slices:
        return None
    if sum(p.memory_slices for p in instances) > geometry.memory_slices:
        return None
    instances.sort(key=lambda p: (-p.memory_slices, -p.compute, p.name))
    chosen: list[Placement] = []
    if not _search(instances, geometry.memory_slices, 0, chosen):
        return None
    return tuple(sorted(chosen, key=lambda p: p.start))


def _search(instances: list[MigProfile], slots: int, occupied: int, chosen: list[Placement]) -> bool:
    """Depth-first search over start slots; ``occupied`` is a bit mask of taken memory slices."""
    index = len(chosen)
    if index == len(instances):
        return True
    profile = instances[index]
    # Identical instances are interchangeable: give them strictly falling starts to skip permutations.
    ceiling = slots
    if index > 0 and instances[index - 1] is profile:
        ceiling = chosen[-1].start
    for start in sorted(profile.starts, reverse=True):
        mask = ((1 << profile.memory_slices) - 1) << start
        if start >= ceiling or start + profile.memory_slices > slots or occupied & mask:
            continue
        chosen.append(Placement(profile.name, start, profile.memory_slices))
        if _search(instances, slots, occupied | mask, chosen):
            return True
        chosen.pop()
    return False


def _describe(pairs: Sequence[tuple[MigProfile, int]]) -> str:
    return " + ".join(f"{count} × {profile.name}" for profile, count in pairs)


def _slices(count: int, axis: str) -> str:
    return f"{count} {axis} slice{'' if count == 1 else 's'}"


def _owners(name: str) -> list[str]:
    return [m.name for m in models() if m.mig is not None and m.mig.profile(name) is not None]


def check_layout(gpu: GpuModel, layout: Mapping[str, int]) -> list[str]:
    """Every reason ``layout`` cannot be used on ``gpu``, one sentence each; empty when it is valid."""
    geometry = gpu.mig
    if geometry is None:
        return [f"{gpu.name} has no MIG; use full cards or time-slicing on it"]
    problems: list[str] = []
    valid = ", ".join(p.name for p in geometry.profiles)
    known: list[tuple[MigProfile, int]] = []
    for name, count in sorted(layout.items(), key=lambda pair: profile_sort_key(pair[0])):
        profile = geometry.profile(name)
        if profile is None:
            owners = _owners(name)
            hint = f" ({name} is a profile of {', '.join(owners)})" if owners else ""
            problems.append(f"unknown MIG profile '{name}' for {gpu.name}{hint}; valid profiles: {valid}")
        elif count < 0:
            problems.append(f"the count of {name} must not be negative, got {count}")
        else:
            if count > profile.max_count:
                problems.append(f"{count} × {name} exceeds the maximum of {profile.max_count} per {gpu.name} card")
            if count > 0:
                known.append((profile, count))
    media = [(p, c) for p, c in known if p.is_media_extension]
    if sum(c for _, c in media) > 1:
        problems.append(
            f"at most one media-extension (+me) instance fits on a card, which has one set of media "
            f"engines; the layout asks for {_describe(media)}"
        )
    sizes = "; ".join(
        f"{p.name}: {_slices(p.compute, 'compute')}, {_slices(p.memory_slices, 'memory')}" for p, _ in known
    )
    memory = sum(p.memory_slices * c for p, c in known)
    compute = sum(p.compute * c for p, c in known)
    if memory > geometry.memory_slices:
        problems.append(
            f"{_describe(known)} needs {memory} memory slices but {gpu.name} has {geometry.memory_slices} ({sizes})"
        )
    if compute > geometry.compute_slices:
        problems.append(
            f"{_describe(known)} needs {compute} compute slices but {gpu.name} has {geometry.compute_slices} ({sizes})"
        )
    if not problems and place(gpu, layout) is None:
        starts = "; ".join(
            f"{p.name} may start only at {'slots' if len(p.starts) > 1 else 'slot'} {', '.join(map(str, p.starts))}"
            for p, _ in known
        )
        problems.append(
            f"{_describe(known)} fits the slice totals ({memory}/{geometry.memory_slices} memory, "
            f"{compute}/{geometry.compute_slices} compute) but no choice of start slots avoids an "
            f"overlap on {gpu.name} ({starts})"
        )
    return problems


def _candidates(profiles: Sequence[MigProfile], geometry: MigGeometry) -> Iterator[dict[str, int]]:
    """Every count vector within max counts and slice totals (placement is checked by the caller)."""

    def extend(index: int, memory: int, compute: int, counts: dict[str, int]) -> Iterator[dict[str, int]]:
        if index == len(profiles):
            yield dict(counts)
            return
        profile = profiles[index]
        for count in range(profile.max_count + 1):
            used_memory = memory + count * profile.memory_slices
            used_compute = compute + count * profile.compute
            if used_memory > geometry.memory_slices or used_compute > geometry.compute_slices:
                break
            counts[profile.name] = count
            yield from extend(index + 1, used_memory, used_compute, counts)
        counts.pop(profile.name, None)

    yield from extend(0, 0, 0, {})


@cache
def maximal_layouts(gpu: GpuModel) -> tuple[Layout, ...]:
    """The layouts that fit and to which no further instance can be added.

    Only plain profiles take part: a ``+me`` profile has the same size and placements as its plain
    twin, so it is one substitution inside these layouts, not a layout of its own. Ordered by compute
    slices used (most first), then memory slices used (most first), then the canonical layout.
    """
    geometry = gpu.mig
    if geometry is None:
        return ()
    plain = [p for p in geometry.profiles if not p.is_media_extension]
    fitting = [c for c in _candidates(plain, geometry) if place(gpu, c) is not None]
    maximal: list[Layout] = []
    for counts in fitting:
        grown = ({**counts, p.name: counts[p.name] + 1} for p in plain)
        if all(place(gpu, layout) is None for layout in grown):
            maximal.append(canonical(counts))

    def order(layout: Layout) -> tuple[int, int, Layout]:
        sizes = [(geometry.profile(name), count) for name, count in layout]
        compute = sum(p.compute * c for p, c in sizes if p is not None)
        memory = sum(p.memory_slices * c for p, c in sizes if p is not None)
        return (-compute, -memory, layout)

    return tuple(sorted(maximal, key=order))


def standard_layouts(gpu: GpuModel) -> dict[str, Layout]:
    """The GPU Operator's standard mig-parted config names that apply to ``gpu``, with their layouts.

    In order: ``all-disabled`` (MIG off) and ``all-enabled`` (MIG on, no instances) — both hold no
    instances, the renderer tells them apart —, then ``all-<profile>`` for each profile in catalogue
    order at its max count (``+`` written as ``.``, e.g. ``all-1g.10gb.me``), then ``all-balanced``
    (2×1g + 1×2g + 1×3g on 7-slice cards, 2×1g + 1×2g on A30, each G taking the plain profile with
    the highest max count). Names and rules follow mig-parted's config generator and the GPU
    Operator's default ConfigMap. Cards without MIG have none.
    """
    geometry = gpu.mig
    if geometry is None:
        return {}
    layouts: dict[str, Layout] = {"all-disabled": (), "all-enabled": ()}
    for profile in geometry.profiles:
        layouts[f"all-{profile.name.replace('+', '.')}"] = ((profile.name, profile.max_count),)
    balanced: dict[str, int] = {}
    for compute, count in _BALANCED[geometry.compute_slices].items():
        candidates = [p for p in geometry.profiles if p.compute == compute and not p.is_media_extension]
        best = max(candidates, key=lambda p: p.max_count)  # max() keeps the first of equals
        balanced[best.name] = count
    layouts["all-balanced"] = canonical(balanced)
    return layouts


def resolve_layout(gpu: GpuModel, spec: str | Mapping[str, int]) -> Layout:
    """A standard layout name or explicit instance counts, validated for ``gpu``.

    Raises ``LayoutError`` (a ``ValueError``) carrying every problem ``check_layout`` finds.
    """
    if gpu.mig is None:
        raise LayoutError(check_layout(gpu, {}))
    if isinstance(spec, str):
        standard = standard_layouts(gpu)
        if spec not in standard:
            raise LayoutError(
                [
                    f"unknown MIG layout '{spec}' for {gpu.name}; standard layouts: "
                    f"{', '.join(standard)} (or give the number of instances per profile)"
                ]
            )
        return standard[spec]
    problems = check_layout(gpu, spec)
    if problems:
        raise LayoutError(problems)
    return canonical(spec)


def units(gpu: GpuModel, layout: Layout, gpus: int) -> dict[str, int]:
    """Schedulable MIG instances per profile when ``gpus`` cards all use ``layout``.

    Keyed the way Kubernetes sees them: a ``+me`` instance counts under its plain profile, because
    the device plugin advertises both under one resource (see ``MigProfile.resource_name``).
    Ordered like a canonical layout.
    """
    if gpus < 0:
        raise ValueError(f"the number of cards must not be negative, got {gpus}")
    problems = check_layout(gpu, dict(layout))
    if problems:
        raise LayoutError(problems)
    geometry = gpu.mig
    assert geometry is not None  # check_layout reports a card without MIG
    totals: dict[str, int] = {}
    for name, count in layout:
        profile = geometry.profile(name)
        plain = profile.base_name if profile is not None else name
        totals[plain] = totals.get(plain, 0) + count * gpus
    return dict(sorted(totals.items(), key=lambda pair: profile_sort_key(pair[0])))
