"""What a series or a request is worth in cards, and which pool and team it belongs to."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from evidence_scenario import LivePrometheus
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.evidence.fleetmap import PoolView, from_policy, gpu_model
from gpufleet.policy import load_policy, resolve

POLICY = Path(__file__).with_name("fleet.yaml")
runner = CliRunner()


@pytest.fixture(scope="module")
def pools() -> dict[str, PoolView]:
    fmap = from_policy(resolve(load_policy(POLICY)))
    return {p.name: p for p in fmap.pools}


@pytest.mark.parametrize(
    ("pool", "resource", "weight"),
    [
        ("train", "nvidia_com_gpu", 1.0),
        ("train", "nvidia_com_mig_3g_40gb", None),
        ("mig", "nvidia_com_mig_3g_40gb", 3 / 7),
        ("mig", "nvidia_com_mig_1g_10gb", 1 / 7),
        ("mig", "nvidia_com_gpu", None),
        ("dev", "nvidia_com_gpu_shared", 1 / 4),
        (
            "dev",
            "nvidia_com_gpu",
            1 / 4,
        ),  # a replica advertised as nvidia.com/gpu (renameByDefault off) is still a replica
        ("dev", "cpu", None),
    ],
    ids=str,
)
def test_a_request_weighs_its_share_of_a_card(
    pools: dict[str, PoolView], pool: str, resource: str, weight: float | None
) -> None:
    assert pools[pool].request_weight(resource) == (pytest.approx(weight) if weight is not None else None)


@pytest.mark.parametrize(
    ("pool", "labels", "weight"),
    [
        ("train", {"gpu": "0"}, 1.0),
        ("train", {"gpu": "0", "GPU_I_PROFILE": "1g.10gb", "GPU_I_ID": "7"}, None),
        ("mig", {"gpu": "0", "GPU_I_PROFILE": "2g.20gb", "GPU_I_ID": "5"}, 2 / 7),
        ("mig", {"gpu": "0"}, None),  # the whole-card series beside the instances would count twice
        ("mig", {"gpu": "0", "GPU_I_PROFILE": "2g.20gb"}, None),  # no instance id: not a device
        ("dev", {"gpu": "0"}, 1.0),
    ],
    ids=["card", "mig-on-full-pool", "instance", "whole-card-on-mig", "no-instance-id", "timesliced-card"],
)
def test_a_device_series_weighs_its_share_of_a_card(
    pools: dict[str, PoolView], pool: str, labels: dict[str, str], weight: float | None
) -> None:
    assert pools[pool].device_weight(labels) == (pytest.approx(weight) if weight is not None else None)


@pytest.mark.parametrize(
    ("model_name", "catalogue"),
    [("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"), ("NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"), ("Tesla X1", None)],
    ids=["a100", "h100", "unknown"],
)
def test_dcgm_model_names_find_the_catalogue_entry(model_name: str, catalogue: str | None) -> None:
    found = gpu_model(model_name)
    assert (found.name if found else None) == catalogue


def _cell(data: Any, window: str, pool: str, team: str | None, figure: str) -> dict[str, Any]:
    row = next(r for r in data["windows"][window]["rows"] if r["pool"] == pool and r["team"] == team)
    return row["figures"][figure]


@pytest.mark.xdist_group("prometheus")
def test_without_a_policy_pools_are_the_models_seen(prometheus: LivePrometheus, tmp_path: Path) -> None:
    w = prometheus.windows
    out = tmp_path / "out"
    args = ["evidence", "--prometheus", prometheus.url, "--before", w.before, "--after", w.after, "-o", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads((out / "evidence.json").read_text())
    assert data["pools_from"] == "series seen"
    h100 = "nvidia-h100-80gb-hbm3"
    # after: node-a's two cards and node-x's one are all the H100s seen: 3 cards × 2 h
    assert _cell(data, "after", h100, None, "capacity") == pytest.approx(
        {"unit": "GPU-h", "source": "devices seen", "value": 6.0, "low": 6.0, "high": 6.0, "coverage": None}
    )
    assert _cell(data, "after", h100, None, "busy")["value"] == pytest.approx(0.8 * 2 + 0.6 * 2 + 0.9 * 2)
    assert _cell(data, "after", h100, "research", "busy")["value"] == pytest.approx(0.8 * 2)
    assert _cell(data, "before", "nvidia-a100-sxm4-80gb", None, "busy")["reason"] == "Gaps"


@pytest.mark.xdist_group("prometheus")
def test_without_a_policy_an_unknown_pool_names_the_pools_seen(prometheus: LivePrometheus, tmp_path: Path) -> None:
    w = prometheus.windows
    args = ["evidence", "--prometheus", prometheus.url, "--before", w.before, "--after", w.after]
    result = runner.invoke(app, [*args, "--pool", "train", "-o", str(tmp_path / "out")])
    assert result.exit_code == 2
    said = " ".join(result.output.split())
    assert "unknown pool 'train'" in said and "nvidia-l40s" in said
    assert not (tmp_path / "out").exists()
