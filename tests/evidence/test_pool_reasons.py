"""The reasons a pool's or team's DCGM figures cannot be given, on generated series (no server needed)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gpufleet.evidence.allocation import absent
from gpufleet.evidence.figures import BUSY, IDLE_ALLOCATED, Settings, window_rows
from gpufleet.evidence.fleetmap import FleetMap, PoolView, from_policy, holder
from gpufleet.evidence.tracks import ENGINE, build
from gpufleet.evidence.window import Window
from gpufleet.policy import parse_policy, resolve
from gpufleet.prom import Series

T0 = datetime(2026, 6, 1, tzinfo=UTC)
WINDOW = Window("before", T0, T0 + timedelta(minutes=10), 30)


def _series(gpu: str, namespace: str | None, value: float = 0.5) -> Series:
    labels = {"Hostname": "n1", "gpu": gpu}
    if namespace:
        labels |= {"namespace": namespace, "pod": f"{namespace}-pod"}
    return Series(labels=labels, points=tuple((T0.timestamp() + 30 * k, value) for k in range(20)))


def _full_pool(cards: float) -> PoolView:
    return PoolView(
        name="p", mode="full", nodes=frozenset({"n1"}), model_label=None, capacity_gpus=cards, compute_slices=None
    )


def _busy(fmap: FleetMap, series: list[Series], team: str | None) -> tuple[str, float | None]:
    rows = window_rows(build(WINDOW, fmap, {ENGINE: series}), fmap, absent("none"), None, Settings(0.9))
    cell = next(r for r in rows if r.team == team).cells[BUSY]
    return cell.reason, cell.value


@pytest.mark.parametrize(
    ("cards", "series", "team", "reason"),
    [
        (1, [_series("0", "a"), _series("1", "a")], None, "MoreDevicesThanDeclared"),
        (2, [_series("0", "a"), _series("0", "b")], "a", "TimeSlicedNoAttribution"),  # two namespaces, one card
        (1, [_series("0", None)], "a", "MissingLabels"),
        (1, [_series("0", "b")], "a", "NoSeries"),
        (1, [], None, "NoSeries"),
        (1, [_series("0", "a")], "a", ""),
    ],
    ids=["more-devices", "shared-card", "no-namespace", "team-absent", "pool-silent", "measured"],
)
def test_reasons(cards: int, series: list[Series], team: str | None, reason: str) -> None:
    fmap = FleetMap(pools=(_full_pool(cards),), teams={"a": ("a",), "b": ("b",)}, declared=True)
    got, value = _busy(fmap, series, team)
    assert got == reason
    assert (value is None) == bool(reason)


def test_a_pool_given_as_a_node_count_cannot_be_tied_to_series() -> None:
    policy = parse_policy(
        "apiVersion: gpufleet.io/v1alpha1\nkind: FleetPolicy\n"
        "pools: [{name: p, gpu: L40S, nodes: 2, gpusPerNode: 1, role: training, slicing: {mode: full}}]\n",
        "inline.yaml",
    )
    fmap = from_policy(resolve(policy))
    reason, value = _busy(fmap, [_series("0", "a")], None)
    assert (reason, value) == ("PoolNodesNotNamed", None)


GPU_OPERATOR = {"namespace": "gpu-operator", "pod": "nvidia-dcgm-exporter-x1"}


@pytest.mark.parametrize(
    ("extra", "exporters", "held_by"),
    [
        ({"namespace": "a"}, frozenset(), "a"),  # honor_labels: the exporter's label stands
        (GPU_OPERATOR | {"exported_namespace": "a"}, frozenset({"gpu-operator"}), "a"),
        (GPU_OPERATOR, frozenset({"gpu-operator"}), None),  # an idle card, seen through the target's labels
        ({"pod_namespace": "a"}, frozenset(), "a"),  # dcgm-exporter -o (old label names)
        ({}, frozenset(), None),
    ],
    ids=["namespace", "exported", "target-only", "old-names", "none"],
)
def test_the_holder_is_the_workload_namespace_never_the_exporters(
    extra: dict[str, str], exporters: frozenset[str], held_by: str | None
) -> None:
    assert holder({"Hostname": "n1", "gpu": "0"} | extra, exporters) == held_by


def test_idle_cards_labelled_with_the_exporters_namespace_are_not_held() -> None:
    """Prometheus without honor_labels: a held card has exported_namespace; an idle one only the target's."""
    held = Series(
        labels={"Hostname": "n1", "gpu": "0"} | GPU_OPERATOR | {"exported_namespace": "a"},
        points=tuple((T0.timestamp() + 30 * k, 0.25) for k in range(20)),
    )
    idle = Series(
        labels={"Hostname": "n1", "gpu": "1"} | GPU_OPERATOR,
        points=tuple((T0.timestamp() + 30 * k, 0.0) for k in range(20)),
    )
    fmap = FleetMap(pools=(_full_pool(2),), teams={"a": ("a",)}, declared=True, exporters=frozenset({"gpu-operator"}))
    rows = window_rows(build(WINDOW, fmap, {ENGINE: [held, idle]}), fmap, absent("none"), None, Settings(0.9))
    pool, team = rows
    hours = 20 * 30 / 3600
    assert pool.cells[IDLE_ALLOCATED].value == pytest.approx((1 - 0.25) * hours)  # the idle card was held by nobody
    assert team.cells[BUSY].value == pytest.approx(0.25 * hours)
