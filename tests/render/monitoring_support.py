"""Shared by the monitoring tests: the test fleet, the rendered monitoring folder, the real tools."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufleet.policy import load_policy, resolve
from gpufleet.policy.fleet import Fleet
from gpufleet.render import render

HERE = Path(__file__).parent
MONITORING_FLEET = HERE / "monitoring-fleet.yaml"
PROMTOOL = Path("/usr/bin/promtool")
AMTOOL = Path("/usr/bin/amtool")
ALERTMANAGER = Path("/usr/bin/prometheus-alertmanager")


def need(binary: Path, setup: str) -> str:
    if not binary.exists() and shutil.which(binary.name) is None:
        pytest.skip(f"{binary} is not installed; run {setup} (CI does)")
    return str(binary if binary.exists() else shutil.which(binary.name))


def fleet_of(path: Path = MONITORING_FLEET) -> Fleet:
    return resolve(load_policy(path))


def monitoring_documents(fleet: Fleet, name: str) -> list[Any]:
    """The objects of ``monitoring/<name>`` as the bundle writes them (parsed back from the text)."""
    text = render(fleet).contents()[f"monitoring/{name}"]
    return [d for d in yaml.safe_load_all(text) if d is not None]


def rule_groups(fleet: Fleet) -> list[dict[str, Any]]:
    """Every PrometheusRule's ``spec.groups``, which is exactly a Prometheus rules file's ``groups``."""
    return [g for rule in monitoring_documents(fleet, "prometheus-rules.yaml") for g in rule["spec"]["groups"]]


def write_rules_file(fleet: Fleet, path: Path) -> Path:
    path.write_text(yaml.safe_dump({"groups": rule_groups(fleet)}, sort_keys=False), encoding="utf-8")
    return path


def alert_rules(fleet: Fleet) -> list[dict[str, Any]]:
    return [r for g in rule_groups(fleet) for r in g["rules"] if "alert" in r]
