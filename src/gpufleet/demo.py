"""``gpufleet demo``: the whole chain on the bundled example, with no cluster.

Plans and renders the example fleet into one folder. Each later stage (simulation, ledger, report)
adds its outputs here, so a person sees the product's main job end to end from one command.
"""

from __future__ import annotations

import importlib.resources
import json
from dataclasses import dataclass
from pathlib import Path

from gpufleet.plan import Plan, make_plan
from gpufleet.policy import parse_policy, resolve
from gpufleet.render import render, write_bundle

EXAMPLE = "fleet.yaml"


@dataclass(frozen=True)
class DemoResult:
    policy: Path
    plan: Plan
    plan_json: Path
    manifests: list[Path]


def example_text(name: str = EXAMPLE) -> str:
    return (importlib.resources.files("gpufleet.examples") / name).read_text(encoding="utf-8")


def run_demo(out: Path) -> DemoResult:
    out.mkdir(parents=True, exist_ok=True)
    policy_path = out / EXAMPLE
    text = example_text()
    policy_path.write_text(text, encoding="utf-8")
    fleet = resolve(parse_policy(text, str(policy_path)))
    plan = make_plan(fleet)
    plan_json = out / "plan.json"
    tmp = plan_json.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(plan.as_dict(), indent=2), encoding="utf-8")
    tmp.replace(plan_json)
    manifests = write_bundle(render(fleet), out / "manifests")
    return DemoResult(policy=policy_path, plan=plan, plan_json=plan_json, manifests=manifests)
