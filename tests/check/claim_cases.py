"""Admission cases for pods that get their GPU from a ResourceClaim, shared by the offline and e2e tests.

The fleet is the e2e fleet with ``dra: on`` (train: H100 whole cards, mig: A100 all-balanced, serve: L4
through the device plugin). Each case names the reasons the rules must give, in catalogue order; the
webhook test holds Python, CEL and the webhook to the same messages, the e2e test holds the API
server (the rendered ValidatingAdmissionPolicy) to them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpufleet.policy import Fleet, load_policy, resolve

ROOT = Path(__file__).resolve().parents[2]
E2E_POLICY = ROOT / "tests" / "e2e" / "fleet.yaml"
H100 = "h100-sxm5-80gb-gpu"  # the rendered template of the train pool's unit (policy.dra.template_name)
MIG = "a100-sxm4-80gb-1g-10gb"
SERVE_TAINT = {"key": "gpufleet.io/pool", "operator": "Equal", "value": "serve", "effect": "NoSchedule"}
LABELS = {
    "kueue.x-k8s.io/queue-name": "alpha",
    "gpufleet.io/team": "alpha",
    "gpufleet.io/model": "tiny",
    "gpufleet.io/data-class": "internal",
}
CHECKPOINT = "gpufleet.io/checkpoint"


def dra_policy_text() -> str:
    text = E2E_POLICY.read_text(encoding="utf-8")
    assert "dra: off" in text, "the e2e fleet no longer says dra: off; update claim_cases"
    return text.replace("dra: off", "dra: on")


def two_model_policy_text() -> str:
    """The DRA fleet with the mig pool cut whole: two full-card pools of different models (H100, A100), both
    counted by Kueue as nvidia.com/gpu, in one resource group of alpha's ClusterQueue (train first)."""
    text = dra_policy_text()
    for old, new in (
        ("slicing: {mode: mig, layout: all-balanced}", "slicing: {mode: full}"),
        ("mig: {mig: {1g.10gb: 2, 3g.40gb: 1}}", "mig: {gpus: 2}"),
    ):
        assert old in text, f"the e2e fleet changed ({old!r}); update claim_cases"
        text = text.replace(old, new)
    return text


def dra_fleet(tmp: Path, text: str | None = None) -> Fleet:
    path = tmp / "fleet-dra.yaml"
    path.write_text(dra_policy_text() if text is None else text, encoding="utf-8")
    return resolve(load_policy(path))


def pod_spec(templates: list[str], named: list[str] = (), **extra: Any) -> dict[str, Any]:  # type: ignore[assignment]
    """A pod spec whose one container uses a claim per template (and per named ResourceClaim)."""
    claims = [{"name": f"gpu{i}", "resourceClaimTemplateName": t} for i, t in enumerate(templates)]
    claims += [{"name": f"named{i}", "resourceClaimName": n} for i, n in enumerate(named)]
    container = {"name": "main", "image": "trainer", "resources": {"claims": [{"name": c["name"]} for c in claims]}}
    return {"restartPolicy": "Never", "containers": [container], "resourceClaims": claims, **extra}


def extended_spec(resource: str, count: int, **extra: Any) -> dict[str, Any]:
    """A pod spec asking ``count`` of an extended resource the device plugin would advertise (no claim)."""
    container = {"name": "main", "image": "trainer", "resources": {"limits": {resource: count}}}
    return {"restartPolicy": "Never", "containers": [container], **extra}


def job(name: str, spec: dict[str, Any], labels: dict[str, str] | None = None, **annotations: str) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": "alpha",
        "labels": dict(LABELS if labels is None else labels),
    }
    if annotations:
        metadata["annotations"] = {CHECKPOINT: annotations["checkpoint"]}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": {"template": {"spec": spec}}}


def pod(name: str, spec: dict[str, Any], labels: dict[str, str] | None = None) -> dict[str, Any]:
    metadata = {"name": name, "namespace": "alpha", "labels": dict(labels or {})}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


#: (id, object, the reasons in catalogue order, the pools the claim can land on: `gpufleet check` names them
#: for admitted work)
CASES: list[tuple[str, dict[str, Any], list[str], list[str]]] = [
    ("claim-job-labelled", job("claim-ok", pod_spec([H100])), [], ["train"]),
    ("mig-claim-job", job("mig-ok", pod_spec([MIG])), [], ["mig"]),
    (
        "claim-job-without-labels",
        job("claim-bare", pod_spec([H100]), labels={}),
        ["MissingLabel", "MissingLabel", "MissingLabel", "MissingQueueName"],
        ["train"],
    ),
    # a bare Pod is batch work when it claims a device, as when it asks for nvidia.com/gpu
    (
        "claim-pod-without-labels",
        pod("claim-pod", pod_spec([H100])),
        ["MissingLabel", "MissingLabel", "MissingLabel", "MissingQueueName"],
        ["train"],
    ),
    (
        "named-claim-pod-without-labels",
        pod("named-pod", pod_spec([], ["mine"])),
        ["MissingLabel"] * 3 + ["MissingQueueName"],
        [],
    ),
    ("plain-pod-without-labels", pod("plain-pod", pod_spec([])), [], []),
    (
        "claim-job-tolerates-serving",
        job("claim-tol", pod_spec([H100], tolerations=[SERVE_TAINT])),
        ["ServingPoolToleration"],
        ["train"],
    ),
    # pinned to the serving pool's nodes: refused, and no pool of alpha's offers the claim there
    (
        "claim-job-selects-serving",
        job("claim-sel", pod_spec([H100], nodeName="e2e-l4-0", nodeSelector={"gpufleet.io/pool": "serve"})),
        ["ServingPoolNodeSelection", "GPUResourceNotOffered"],
        [],
    ),
    # residency: the checkpoint must sit where the data class allows, claim or not
    (
        "claim-job-checkpoint-elsewhere",
        job("claim-ckpt", pod_spec([H100]), checkpoint="s3://us-east-1/ckpt"),
        ["CheckpointLocationNotAllowed"],
        ["train"],
    ),
    (
        "claim-job-checkpoint-allowed",
        job("claim-ckpt-ok", pod_spec([H100]), checkpoint="s3://eu-central-1/c"),
        [],
        ["train"],
    ),
    # the claim's pool: an H100 claim pinned to the A100 pool's nodes has no card there
    (
        "h100-claim-on-mig-pool",
        job("claim-wrong-pool", pod_spec([H100], nodeSelector={"gpufleet.io/pool": "mig"})),
        ["GPUResourceNotOffered"],
        [],
    ),
    # five claims in one pod: a train node holds four cards
    ("five-claims-one-pod", job("claim-five", pod_spec([H100] * 5)), ["GPURequestTooLarge"], []),
    ("four-claims-one-pod", job("claim-four", pod_spec([H100] * 4)), [], ["train"]),
    # on a DRA pool the nodes advertise no nvidia.com/*: Kueue would admit the pod on the pool's flavor
    # (its quota is nvidia.com/gpu) and no node would ever run it; the template to use is named instead
    ("extended-gpu-on-dra-pool", job("ext-gpu", extended_spec("nvidia.com/gpu", 1)), ["GPUClaimRequired"], []),
    ("extended-mig-on-dra-pool", job("ext-mig", extended_spec("nvidia.com/mig-1g.10gb", 2)), ["GPUClaimRequired"], []),
    # too many for a node, too: the missing claim is the one reason (the count never could fit anywhere)
    ("extended-gpus-too-many", job("ext-many", extended_spec("nvidia.com/gpu", 9)), ["GPUClaimRequired"], []),
    # pinned to the MIG pool, whose claims hand out MIG instances only: nothing offers nvidia.com/gpu there
    (
        "extended-gpu-pinned-to-mig-pool",
        job("ext-pinned", extended_spec("nvidia.com/gpu", 1, nodeSelector={"gpufleet.io/pool": "mig"})),
        ["GPUResourceNotOffered"],
        [],
    ),
    # a template gpufleet did not render: its device is unknown to the rules (Kueue judges its class)
    ("foreign-template", job("claim-foreign", pod_spec(["someone-elses"])), [], []),
]


A100 = "a100-sxm4-80gb-gpu"  # the mig pool's template once the pool is cut whole (two_model_policy_text)
TRAIN = {"gpufleet.io/pool": "train"}
A100_POOL = {"gpufleet.io/pool": "mig"}

#: On the two-model fleet (two_model_policy_text): Kueue assigns a flavor by the quota resource only, so a
#: claim that does not select its pool could be given the other model's flavor and never run.
TWO_MODEL_CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    ("h100-claim-unpinned", job("h100-free", pod_spec([H100])), ["GPUClaimPoolNotSelected"]),
    ("a100-claim-unpinned", job("a100-free", pod_spec([A100])), ["GPUClaimPoolNotSelected"]),
    ("h100-claim-pinned", job("h100-pinned", pod_spec([H100], nodeSelector=TRAIN)), []),
    ("a100-claim-pinned", job("a100-pinned", pod_spec([A100], nodeSelector=A100_POOL)), []),
    # the claim's device is on neither candidate: not offered is the one reason
    ("a100-claim-pinned-to-train", job("a100-train", pod_spec([A100], nodeSelector=TRAIN)), ["GPUResourceNotOffered"]),
    ("extended-gpu-two-models", job("ext-two", extended_spec("nvidia.com/gpu", 1)), ["GPUClaimRequired"]),
]
