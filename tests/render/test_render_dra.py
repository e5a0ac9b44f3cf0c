"""DRA in the render: what it writes for whom, and the policies it refuses (located, exit 2, nothing written)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpufleet.check.facts import admission_facts
from gpufleet.check.rules import judge
from gpufleet.cli import app
from gpufleet.policy import parse_policy, resolve
from gpufleet.render import dra as render_dra
from tests.check.claim_cases import dra_policy_text, job, pod_spec

MODELS = [
    "A100-SXM4-40GB", "A100-PCIE-40GB", "A100-SXM4-80GB", "A100-PCIE-80GB", "H100-SXM5-80GB",
    "H100-PCIE-80GB", "H100-NVL-94GB", "H200-SXM-141GB", "L40S",
]  # fmt: skip


def nine_models() -> str:
    pools = "".join(
        f"  - {{name: p{i}, gpu: {m}, nodes: 1, gpusPerNode: 1, role: training, slicing: {{mode: full}}}}\n"
        for i, m in enumerate(MODELS)
    )
    quota = ", ".join(f"p{i}: {{gpus: 1}}" for i in range(len(MODELS)))
    return f"""apiVersion: gpufleet.io/v1alpha1
kind: FleetPolicy
cluster: {{kubernetes: "1.34", dra: on}}
pools:
{pools}teams:
  - {{name: a, namespaces: [a], quota: {{{quota}}}, priorityClasses: [batch], dataClasses: [internal]}}
priorityClasses: [{{name: batch, value: 1}}]
dataClasses: [{{name: internal, checkpointLocations: ["s3://x/"]}}]
"""


@pytest.mark.parametrize(
    ("edit", "where", "words"),
    [
        (
            lambda t: t.replace('kubernetes: "1.36", dra: off', 'kubernetes: "1.33", dra: on'),
            "cluster.dra",
            "DRA (resource.k8s.io/v1) needs Kubernetes 1.34 or later, and cluster.kubernetes is 1.33",
        ),
        (lambda _: nine_models(), "pools[8].gpu", "Kueue maps at most 8 DeviceClasses to one resource"),
        (  # a MIG profile the A100 does not have (its smallest is 1g.10gb)
            lambda t: dra_policy_text().replace("mig: {1g.10gb: 2, 3g.40gb: 1}", "mig: {1g.5gb: 2, 3g.40gb: 1}"),
            "teams[0].quota.mig.mig.1g.5gb",
            "profile '1g.5gb' is not in pool 'mig''s layout",
        ),
        (
            lambda t: dra_policy_text().replace("layout: all-balanced", "layout: {7g.80gb: 1, 1g.5gb: 1}"),
            "pools[1].slicing.layout",
            "invalid MIG layout",
        ),
    ],
    ids=["dra-before-1.34", "nine-models-one-mapping", "quota-profile-not-on-card", "layout-profile-not-on-card"],
)
def test_a_dra_policy_kueue_or_the_cluster_cannot_run_is_refused_located(
    tmp_path: Path, edit: Callable[[str], str], where: str, words: str
) -> None:
    text = edit(dra_policy_text().replace("dra: on", "dra: off"))
    policy = tmp_path / "fleet.yaml"
    policy.write_text(text, encoding="utf-8")
    out = tmp_path / "manifests"
    result = CliRunner().invoke(app, ["render", str(policy), "-o", str(out)])
    print(result.output)
    assert result.exit_code == 2
    flat = " ".join(result.output.split())
    assert words in flat and "fleet.yaml" in flat
    assert f": {where}: " in flat  # file:line:column: the field, then the message
    assert "Traceback" not in result.output
    assert not out.exists() or not any(out.iterdir())


def test_a_team_gets_templates_only_where_kueue_can_admit_it() -> None:
    """alpha holds 1g.10gb and 3g.40gb of the A100; beta holds none but may borrow what alpha lends;
    nobody holds 2g.20gb, so no namespace gets a template for it."""
    fleet = resolve(parse_policy(dra_policy_text(), "fleet-dra.yaml"))
    by_ns: dict[str, set[str]] = {}
    for t in render_dra.claim_templates(fleet):
        by_ns.setdefault(t["metadata"]["namespace"], set()).add(t["metadata"]["name"])
    both = {"h100-sxm5-80gb-gpu", "a100-sxm4-80gb-1g-10gb", "a100-sxm4-80gb-3g-40gb"}
    assert by_ns == {"alpha": both, "beta": both}
    no_lending = dra_policy_text().replace(
        "mig: {1g.10gb: 2, 3g.40gb: 1}", "mig: {1g.10gb: 2, 3g.40gb: 1}, lendingLimit: 0"
    )
    fleet = resolve(parse_policy(no_lending, "fleet-dra.yaml"))
    beta = {t["metadata"]["name"] for t in render_dra.claim_templates(fleet) if t["metadata"]["namespace"] == "beta"}
    assert beta == {"h100-sxm5-80gb-gpu"}
    # and a claim from a template the team was not given is refused, as a resource none of its pools offers
    obj = job("j", pod_spec(["a100-sxm4-80gb-1g-10gb"]))
    obj["metadata"] |= {"namespace": "beta"}
    obj["metadata"]["labels"] |= {"kueue.x-k8s.io/queue-name": "beta", "gpufleet.io/team": "beta"}
    assert [d.reason for d in judge(admission_facts(fleet), obj, "beta")] == ["GPUResourceNotOffered"]
