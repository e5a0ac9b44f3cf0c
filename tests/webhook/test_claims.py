"""A pod that gets its GPU from a ResourceClaim is judged like one asking for ``nvidia.com/gpu``, by all three.

Table-driven over ``tests/check/claim_cases.py`` on the e2e fleet with ``dra: on``: the Python rules give
the expected reasons, the rendered ValidatingAdmissionPolicy's CEL (offline) and the webhook over TLS
give the same messages in the same order, and ``gpufleet check --json`` names the pools the claim
can land on. ``tests/e2e/test_dra_admission.py`` holds the real API server to the same cases.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml
from typer.testing import CliRunner

from gpufleet.check.facts import CLAIM_PREFIX, AdmissionFacts, admission_facts
from gpufleet.check.manifests import validating_admission_policy
from gpufleet.check.offline import OfflinePolicy
from gpufleet.check.rules import judge
from gpufleet.cli import app
from gpufleet.policy import Fleet, load_policy, resolve
from tests.check.claim_cases import CASES, H100, MIG, dra_fleet, dra_policy_text
from tests.webhook.test_differential import webhook_messages


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    return dra_fleet(tmp_path_factory.mktemp("dra-fleet"))


@pytest.fixture(scope="module")
def facts(fleet: Fleet) -> AdmissionFacts:
    return admission_facts(fleet)


@pytest.fixture(scope="module")
def offline(fleet: Fleet) -> OfflinePolicy:
    return OfflinePolicy(validating_admission_policy(fleet)[0]["spec"])


def test_each_dra_pool_offers_its_templates_units_per_node_and_no_extended_resource(facts: AdmissionFacts) -> None:
    """A DRA pool's nodes publish ResourceSlices only: the pool offers its templates' units, and names for each
    quota resource the template that hands it out (what GPUClaimRequired tells a pod asking the resource)."""
    alpha = facts.team_of("alpha")
    assert alpha is not None
    per_node = {p.name: p.per_node for p in alpha.pools}
    claims = {p.name: p.claims for p in alpha.pools}
    assert per_node["train"] == {CLAIM_PREFIX + H100: 4}
    assert claims["train"] == {"nvidia.com/gpu": H100}
    assert per_node["mig"][CLAIM_PREFIX + MIG] == 4
    assert claims["mig"]["nvidia.com/mig-1g.10gb"] == MIG
    assert not [r for r in per_node["mig"] if not r.startswith(CLAIM_PREFIX)]
    assert CLAIM_PREFIX + H100 not in per_node["mig"]
    assert f"{H100} (for nvidia.com/gpu on pool train)" in alpha.claims_text
    assert CLAIM_PREFIX + H100 in facts.claim_resources


@pytest.mark.parametrize(("obj", "reasons", "pools"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_python_cel_and_webhook_judge_claims_alike(
    obj: dict[str, Any],
    reasons: list[str],
    pools: list[str],
    facts: AdmissionFacts,
    offline: OfflinePolicy,
    client: httpx2.Client,
) -> None:
    python = [d.message for d in judge(facts, obj, "alpha")]
    print(python)
    assert [m.split(":")[0] for m in python] == reasons
    assert offline.judge(obj, "alpha") == python
    assert webhook_messages(client, obj, "alpha") == python


@pytest.mark.parametrize(("obj", "reasons", "pools"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_gpufleet_check_names_the_claims_pools(
    obj: dict[str, Any], reasons: list[str], pools: list[str], tmp_path: Path
) -> None:
    policy = tmp_path / "fleet.yaml"
    policy.write_text(dra_policy_text(), encoding="utf-8")
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump(obj), encoding="utf-8")
    result = CliRunner().invoke(app, ["check", str(policy), str(manifest), "--json"])
    assert result.exit_code == (1 if reasons else 0), result.output
    (verdict,) = json.loads(result.stdout)["objects"]
    # check replays the mutating webhook first, which fills in a missing queue name
    assert [d["reason"] for d in verdict["denials"]] == [r for r in reasons if r != "MissingQueueName"]
    assert verdict["flavors"] == (pools if not verdict["denials"] else [])  # check names pools of admitted work


def test_a_claim_outside_the_teams_pools_is_not_offered(tmp_path: Path) -> None:
    """beta may not use the mig pool here: its namespace gets no MIG template and a MIG claim is refused."""
    text = dra_policy_text().replace(
        "role: batch,\n     workloads: [batch-eval]", "role: batch, teams: [alpha],\n     workloads: [batch-eval]"
    )
    assert "teams: [alpha]" in text
    path = tmp_path / "fleet.yaml"
    path.write_text(text, encoding="utf-8")
    facts = admission_facts(resolve(load_policy(path)))
    obj = CASES[1][1] | {
        "metadata": {"name": "m", "namespace": "beta", "labels": {**CASES[1][1]["metadata"]["labels"]}}
    }
    obj["metadata"]["labels"].update({"kueue.x-k8s.io/queue-name": "beta", "gpufleet.io/team": "beta"})
    python = [d.message for d in judge(facts, obj, "beta")]
    assert [m.split(":")[0] for m in python] == ["GPUResourceNotOffered"]
    assert f"{CLAIM_PREFIX}{H100} (up to 4 per node)" in python[0] and MIG not in python[0]
